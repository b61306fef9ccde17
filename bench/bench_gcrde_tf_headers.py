"""Measure TensorFlow GCRDE localization from kernel headers only (an installed package or a wheel, no .cc files).

The truth set is this bench's own, written from TensorFlow 2.x's real tree layout: for each of ~18 ops
common in CPU/GPU discrepancy reports, the file(s) a maintainer would edit for a GPU-only bug in it
(any one of them counts). It was written alongside the localizer, so the figures are OPTIMISTIC: they
check that the conventions hold on the real headers, not how the method does on unseen reports.

Sources: the installed tensorflow-cpu's include/ headers, and the cached tensorflow_cpu-2.6.0 wheel
when /work/cache/wheels (or $SFTL_WHEELS) holds it. Methods: `sftl` (declaring headers + files
inferred by TensorFlow's naming conventions) and `paper` (file names fuzzy-matched against the
listing: it can only name headers). Prints top-1/3/5, MRR over the top 10 and the time per query.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from sftl.errors import SftlError
from sftl.localize.gcrde import localize_gcrde
from sftl.model import Environment, Extraction, Issue
from sftl.sources import SitePackages, SourceProvider, WheelSource

K = "tensorflow/core/kernels/"
# (API call, files a maintainer edits for a GPU-only bug, in TF 2.x's layout)
TRUTH: list[tuple[str, tuple[str, ...]]] = [
    ("tensorflow.math.argmax", ("argmax_op_gpu.cu.cc", "argmax_op.h")),
    ("tensorflow.math.unsorted_segment_sum", ("segment_reduction_ops_gpu.cu.cc", "segment_reduction_ops_gpu.cu.h")),
    ("tensorflow.math.segment_sum", ("segment_reduction_ops_gpu.cu.cc", "segment_reduction_ops_gpu.cu.h")),
    ("tensorflow.nn.bias_add", ("bias_op_gpu.cu.cc",)),
    ("tensorflow.math.floordiv", ("cwise_op_gpu_floor_div.cu.cc", "cwise_ops.h")),
    ("tensorflow.nn.softmax", ("softmax_op_gpu.cu.cc",)),
    ("tensorflow.nn.conv2d", ("conv_ops.cc", "conv_ops_gpu.cc", "conv_ops_impl.h")),
    ("tensorflow.linalg.matmul", ("matmul_op_impl.h", "matmul_op.cc")),
    ("tensorflow.math.cumsum", ("scan_ops_gpu.h",)),
    ("tensorflow.math.reduce_mean", ("reduction_gpu_kernels.cu.h",)),
    ("tensorflow.image.resize_bilinear", ("image/resize_bilinear_op_gpu.cu.cc",)),
    ("tensorflow.math.top_k", ("topk_op_gpu.h",)),
    ("tensorflow.gather", ("gather_functor_gpu.cu.h", "gather_functor_gpu.cu.cc")),
    ("tensorflow.nn.fused_batch_norm", ("fused_batch_norm_op.cu.cc",)),
    ("tensorflow.nn.max_pool2d", ("maxpooling_op_gpu.cu.cc",)),
    ("tensorflow.nn.relu", ("relu_op_gpu.cu.cc",)),
    ("tensorflow.where", ("where_op_gpu.cu.h",)),
    ("tensorflow.nn.depthwise_conv2d", ("depthwise_conv_op_gpu.h",)),
]


def sources() -> list[SourceProvider]:
    out: list[SourceProvider] = []
    try:
        out.append(SitePackages("tensorflow"))
    except SftlError as exc:
        print(f"installed tensorflow: unavailable ({exc})")
    wheels = Path(os.environ.get("SFTL_WHEELS", "/work/cache/wheels"))
    for whl in sorted(wheels.glob("tensorflow_cpu-2.6.0-*.whl")):
        out.append(WheelSource(whl, "tensorflow"))
    return out


def run(source: SourceProvider, method: str, verbose: bool) -> None:
    hits = {1: 0, 3: 0, 5: 0}
    rr = 0.0
    took = []
    for api, truth in TRUTH:
        leaf = api.rsplit(".", 1)[-1]
        issue = Issue(repo="tensorflow/tensorflow", number=1, title=f"tf.{leaf} gives a wrong result on GPU",
                      body="The CPU result is correct, the GPU one is wrong.")
        ex = Extraction(None, None, Environment(framework="tensorflow"), apis=("tensorflow.constant", api))
        t = time.perf_counter()
        loc = localize_gcrde(issue, ex, source, method=method, top=10)
        took.append(time.perf_counter() - t)
        ranked = [s.path for s in loc.suspects]
        rank = next((i + 1 for i, p in enumerate(ranked) if p in {K + f for f in truth}), None)
        for k in hits:
            hits[k] += rank is not None and rank <= k
        rr += 1 / rank if rank else 0.0
        if verbose:
            top = ranked[0].removeprefix(K) if ranked else "-"
            print(f"    {leaf:22} rank {rank or '-':>2}  top-1 {top}")
    n = len(TRUTH)
    listed = set(source.list_files())
    shipped = sum(any(K + f in listed for f in truth) for _, truth in TRUTH)
    if method == "sftl":
        print(f"  ({shipped}/{n} ops have a truth file shipped in this source; the rest only by an inferred name)")
    print(f"  {method:6} top-1 {hits[1] / n:.2f}  top-3 {hits[3] / n:.2f}  top-5 {hits[5] / n:.2f}  "
          f"MRR {rr / n:.2f}  ({n} ops; {1000 * sum(took) / n:.0f} ms/query, first includes the listing)")


if __name__ == "__main__":
    verbose = "-v" in sys.argv
    print(__doc__.split("\n\n")[0])
    print("(truth set written for this bench: figures are optimistic)")
    for src in sources():
        print(f"\n{src.description}")
        for method in ("sftl", "paper"):
            run(src, method, verbose)
