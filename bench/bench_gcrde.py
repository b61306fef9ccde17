"""Measure the GCRDE localizer (methods `sftl` and `paper`) against real PyTorch C++/CUDA source trees.

Trees: PyTorch 1.13.1 (Debian bookworm) and 2.6.0 (Debian trixie) source packages, fetched with
apt-get's --download-only (no system configuration touched) and unpacked OUTSIDE the repository
into $SFTL_PYTORCH_SRC (default /work/cache/pytorch-src) on first use.

Two sets:
1. the GCRDE rows of ../shared/data/dev/localize.jsonl (real issues, truth = files the fix
   changed); the issues predate both trees, so each is scored on the nearest tree, and rows whose
   truth file no longer exists there are reported as such (they cannot be hit);
2. a check set written for this bench: ~75 operators common in CPU/GPU discrepancy reports, each
   with the CUDA file a maintainer would edit for a CUDA-only bug in it (the file that
   REGISTER_DISPATCHes the CUDA kernel or defines it, by hand from PyTorch's layout; checked to
   exist). Each op is asked twice: with a neutral title ("Different results between CPU and
   CUDA", the op only in the snippet next to incidental calls) and with the op named in the title.

Prints top-1/3/5 and MRR (over top 10) per set, tree and method (`tfidf`: a plain TF-IDF over kernel
file contents with the op names and title words, the baseline the published method should beat),
and the time per query.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sftl.localize.gcrde import localize_gcrde
from sftl.model import Environment, Extraction, Issue, Localization, Outcome, Snippet, Suspect
from sftl.sources import LocalTree

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data" / "dev" / "localize.jsonl"
SRC = Path(os.environ.get("SFTL_PYTORCH_SRC", "/work/cache/pytorch-src"))
TREES = {  # version -> (Debian source version, unpacked directory name)
    "1.13.1": ("1.13.1+dfsg-4", "pytorch-1.13.1"),
    "2.6.0": ("2.6.0+dfsg-7", "pytorch-v2.6.0"),
}
TOP = 10

# api -> CUDA files (under aten/src/ATen/native/) a fix of a CUDA-only bug in it would touch
CHECKS: list[tuple[str, tuple[str, ...]]] = [
    ("torch.histc", ("cuda/SummaryOps.cu",)),
    ("torch.bincount", ("cuda/SummaryOps.cu",)),
    ("torch.arange", ("cuda/RangeFactories.cu",)),
    ("torch.linspace", ("cuda/RangeFactories.cu",)),
    ("torch.cumsum", ("cuda/ScanKernels.cpp", "cuda/CumsumKernel.cu", "cuda/ScanUtils.cuh")),
    ("torch.cumprod", ("cuda/ScanKernels.cpp", "cuda/CumprodKernel.cu", "cuda/ScanUtils.cuh")),
    ("torch.logcumsumexp", ("cuda/ScanKernels.cpp", "cuda/LogcumsumexpKernel.cu", "cuda/ScanUtils.cuh")),
    ("torch.sort", ("cuda/Sort.cpp", "cuda/Sort.cu")),
    ("torch.topk", ("cuda/TensorTopK.cu", "cuda/TensorTopK.cpp")),
    ("torch.median", ("cuda/Sorting.cu", "cuda/Sorting.cpp")),
    ("torch.kthvalue", ("cuda/Sorting.cu", "cuda/Sorting.cpp")),
    ("torch.mode", ("cuda/TensorModeKernel.cu", "cuda/TensorModeKernel.cpp")),
    ("torch.Tensor.index_add_", ("cuda/Indexing.cu",)),
    ("torch.index_select", ("cuda/Indexing.cu",)),
    ("torch.Tensor.index_put_", ("cuda/IndexKernel.cu", "cuda/Indexing.cu")),
    ("torch.Tensor.scatter_add_", ("cuda/ScatterGatherKernel.cu",)),
    ("torch.gather", ("cuda/ScatterGatherKernel.cu",)),
    ("torch.nn.EmbeddingBag", ("cuda/EmbeddingBag.cu",)),
    ("torch.nn.functional.nll_loss", ("cuda/Loss.cu",)),
    ("torch.nn.BCELoss", ("cuda/Loss.cu",)),
    ("torch.nn.functional.ctc_loss", ("cuda/LossCTC.cu",)),
    ("torch.softmax", ("cuda/SoftMax.cu",)),
    ("torch.nn.functional.log_softmax", ("cuda/SoftMax.cu",)),
    ("torch.nn.LayerNorm", ("cuda/layer_norm_kernel.cu",)),
    ("torch.nn.GroupNorm", ("cuda/group_norm_kernel.cu",)),
    ("torch.nn.BatchNorm2d", ("cuda/Normalization.cu", "cuda/Normalization.cuh", "cudnn/BatchNorm.cpp")),
    ("torch.nn.functional.interpolate[bilinear]", ("cuda/UpSampleBilinear2d.cu",)),
    ("torch.nn.functional.interpolate[nearest]", ("cuda/UpSampleNearest2d.cu",)),
    ("torch.nn.MaxPool2d", ("cuda/DilatedMaxPool2d.cu",)),
    ("torch.nn.AvgPool2d", ("cuda/AveragePool2d.cu",)),
    ("torch.nn.AdaptiveAvgPool2d", ("cuda/AdaptiveAveragePooling.cu",)),
    ("torch.nn.functional.grid_sample", ("cuda/GridSampler.cu", "cuda/GridSampler.cpp")),
    ("torch.multinomial", ("cuda/MultinomialKernel.cu",)),
    ("torch.unique", ("cuda/Unique.cu",)),
    ("torch.pow", ("cuda/PowKernel.cu",)),
    ("torch.erfinv", ("cuda/UnarySpecialOpsKernel.cu",)),
    ("torch.lgamma", ("cuda/UnaryGammaKernels.cu",)),
    ("torch.digamma", ("cuda/UnaryGammaKernels.cu",)),
    ("torch.clamp", ("cuda/TensorCompare.cu",)),
    ("torch.where", ("cuda/TensorCompare.cu",)),
    ("torch.fmod", ("cuda/BinaryRemainderKernel.cu",)),
    ("torch.remainder", ("cuda/BinaryRemainderKernel.cu",)),
    ("torch.atan2", ("cuda/BinaryGeometricKernels.cu",)),
    ("torch.norm", ("cuda/ReduceNormKernel.cu",)),
    ("torch.std", ("cuda/ReduceMomentKernel.cu",)),
    ("torch.var", ("cuda/ReduceMomentKernel.cu",)),
    ("torch.mean", ("cuda/ReduceMomentKernel.cu",)),
    ("torch.sum", ("cuda/ReduceSumProdKernel.cu",)),
    ("torch.prod", ("cuda/ReduceSumProdKernel.cu",)),
    ("torch.argmax", ("cuda/ReduceArgMaxKernel.cu",)),
    ("torch.amax", ("cuda/ReduceMaxValuesKernel.cu",)),
    ("torch.cross", ("cuda/CrossKernel.cu",)),
    ("torch.nonzero", ("cuda/Nonzero.cu",)),
    ("torch.cdist", ("cuda/DistanceKernel.cu",)),
    ("torch.bmm", ("cuda/Blas.cpp",)),
    ("torch.mm", ("cuda/Blas.cpp",)),
    ("torch.lerp", ("cuda/Lerp.cu",)),
    ("torch.round", ("cuda/UnaryFractionKernels.cu",)),
    ("torch.nn.GELU", ("cuda/ActivationGeluKernel.cu",)),
    ("torch.nn.LeakyReLU", ("cuda/ActivationLeakyReluKernel.cu",)),
    ("torch.nn.PReLU", ("cuda/ActivationPreluKernel.cu", "cuda/Activation.cpp")),
    ("torch.roll", ("cuda/TensorTransformations.cu",)),
    ("torch.flip", ("cuda/IndexKernel.cu", "cuda/TensorTransformations.cu")),
    ("torch.randperm", ("cuda/Randperm.cu",)),
    ("torch.bernoulli", ("cuda/DistributionBernoulli.cu",)),
    ("torch.tril", ("cuda/TriangularOps.cu",)),
    ("torch.searchsorted", ("cuda/Bucketization.cu",)),
    ("torch.Tensor.__rshift__", ("cuda/BinaryShiftOpsKernels.cu",)),
    ("torch.div", ("cuda/BinaryDivTrueKernel.cu",)),
    ("torch.abs", ("cuda/AbsKernel.cu",)),
    ("torch.sign", ("cuda/UnarySignKernels.cu",)),
    ("torch.log", ("cuda/UnaryLogKernels.cu",)),
    ("torch.tanh", ("cuda/UnaryGeometricTanhKernel.cu",)),
    ("torch.addcmul", ("cuda/PointwiseOpsKernel.cu",)),
    ("torch.logical_and", ("cuda/BinaryLogicalOpsKernels.cu",)),
    ("torch.eq", ("cuda/CompareEQKernel.cu",)),
    ("torch.nn.functional.unfold", ("cuda/Im2Col.cu",)),
    ("torch.nn.functional.fold", ("cuda/Col2Im.cu",)),
]
NATIVE = "aten/src/ATen/native/"
# A held-out set, written after the localizer was tuned on CHECKS and never used to tune it.
HOLDOUT: list[tuple[str, tuple[str, ...]]] = [
    ("torch.nn.functional.smooth_l1_loss", ("cuda/BinaryMiscOpsKernels.cu",)),
    ("torch.nn.functional.mse_loss", ("cuda/BinaryMiscOpsKernels.cu",)),
    ("torch.hypot", ("cuda/BinaryGeometricKernels.cu",)),
    ("torch.logaddexp", ("cuda/LogAddExpKernel.cu",)),
    ("torch.take", ("cuda/IndexKernel.cu",)),
    ("torch.Tensor.put_", ("cuda/IndexKernel.cu",)),
    ("torch.Tensor.index_fill_", ("cuda/IndexKernel.cu",)),
    ("torch.Tensor.masked_fill_", ("cuda/IndexKernel.cu", "cuda/Indexing.cu")),
    ("torch.clamp_min", ("cuda/TensorCompare.cu",)),
    ("torch.nan_to_num", ("cuda/UnaryOpsKernel.cu",)),
    ("torch.i0", ("cuda/UnarySpecialOpsKernel.cu",)),
    ("torch.sinc", ("cuda/UnarySpecialOpsKernel.cu",)),
    ("torch.polygamma", ("cuda/UnaryGammaKernels.cu",)),
    ("torch.nn.Hardtanh", ("cuda/ActivationHardtanhKernel.cu",)),
    ("torch.nn.functional.softplus", ("cuda/ActivationSoftplusKernel.cu",)),
    ("torch.nn.ELU", ("cuda/ActivationEluKernel.cu",)),
    ("torch.nn.Hardswish", ("cuda/ActivationHardswishKernel.cu",)),
    ("torch.nn.SiLU", ("cuda/ActivationSiluKernel.cu",)),
    ("torch.nn.functional.mish", ("cuda/ActivationMishKernel.cu",)),
    ("torch.nn.functional.glu", ("cuda/ActivationGluKernel.cu",)),
    ("torch.copysign", ("cuda/CopysignKernel.cu",)),
    ("torch.gcd", ("cuda/GcdLcmKernel.cu",)),
    ("torch.frac", ("cuda/UnaryFractionKernels.cu",)),
    ("torch.ceil", ("cuda/UnaryFractionKernels.cu",)),
    ("torch.signbit", ("cuda/UnarySignKernels.cu",)),
    ("torch.bitwise_and", ("cuda/BinaryBitwiseOpsKernels.cu",)),
    ("torch.maximum", ("cuda/MaxMinElementwiseKernel.cu",)),
    ("torch.fmax", ("cuda/MaxMinElementwiseKernel.cu",)),
    ("torch.Tensor.random_", ("cuda/DistributionRandomKernel.cu",)),
    ("torch.Tensor.exponential_", ("cuda/DistributionExponentialKernel.cu",)),
    ("torch.Tensor.geometric_", ("cuda/DistributionGeometricKernel.cu",)),
    ("torch.Tensor.uniform_", ("cuda/DistributionUniform.cu",)),
    ("torch.addcdiv", ("cuda/PointwiseOpsKernel.cu",)),
    ("torch.nansum", ("cuda/ReduceSumProdKernel.cu",)),
    ("torch.renorm", ("cuda/RenormKernel.cu",)),
    ("torch.cummax", ("cuda/ScanKernels.cpp", "cuda/CumminmaxKernel.cu")),
    ("torch.nn.AdaptiveMaxPool2d", ("cuda/AdaptiveMaxPooling2d.cu",)),
    ("torch.nn.functional.max_unpool2d", ("cuda/MaxUnpooling.cu",)),
    ("torch.nn.AvgPool3d", ("cuda/AveragePool3d.cu",)),
    ("torch.nn.functional.interpolate[trilinear]", ("cuda/UpSampleTrilinear3d.cu",)),
    ("torch.nn.functional.interpolate[bicubic]", ("cuda/UpSampleBicubic2d.cu",)),
    ("torch.nn.MultiMarginLoss", ("cuda/MultiMarginLoss.cu",)),
    ("torch.nn.functional.multilabel_margin_loss", ("cuda/MultiLabelMarginCriterion.cu",)),
    ("torch.poisson", ("cuda/Distributions.cu",)),
    ("torch.triu", ("cuda/TriangularOps.cu",)),
    ("torch.bucketize", ("cuda/Bucketization.cu",)),
    ("torch.argsort", ("cuda/Sort.cpp", "cuda/Sort.cu")),
    ("torch.nanmedian", ("cuda/Sorting.cu", "cuda/Sorting.cpp")),
]

# Held-out cases whose fix lands in a shared header rather than the kernel file: the header that
# implements the math the diverging device runs (cuda/Math.cuh: the CUDA-only calc_*/jiterator
# *_string versions; Math.h: the CPU/host versions; SharedReduceOps.h: the reduction functors).
# Written from PyTorch's layout BEFORE the ranking learned to follow kernels into such headers, and
# never used to tune it. Truth: the header alone (the kernel file does not count here).
# (api, side that diverged, headers under aten/src/ATen/native/)
HEADER_HOLDOUT: list[tuple[str, str, tuple[str, ...]]] = [
    ("torch.digamma", "cuda", ("cuda/Math.cuh",)),
    ("torch.polygamma", "cuda", ("cuda/Math.cuh",)),
    ("torch.special.ndtri", "cuda", ("cuda/Math.cuh",)),
    ("torch.special.log_ndtr", "cuda", ("cuda/Math.cuh",)),
    ("torch.special.zeta", "cuda", ("cuda/Math.cuh",)),
    ("torch.special.i1", "cuda", ("cuda/Math.cuh",)),
    ("torch.special.erfcx", "cuda", ("cuda/Math.cuh",)),
    ("torch.erfinv", "cuda", ("cuda/Math.cuh",)),
    ("torch.digamma", "cpu", ("Math.h",)),
    ("torch.erfinv", "cpu", ("Math.h",)),
    ("torch.special.i0e", "cpu", ("Math.h",)),
    ("torch.var", "cuda", ("SharedReduceOps.h",)),
    ("torch.std", "cuda", ("SharedReduceOps.h",)),
    ("torch.linalg.vector_norm", "cuda", ("SharedReduceOps.h",)),
]

# The set above gives each report no cue beyond the diverging side, and two of its reports
# (digamma, erfinv on CUDA) are word for word the check set's, whose truth is the kernel file: no
# ranking can be right on both, so its top-1 measures only which convention wins. Top-3 is its
# meaningful figure. Part 2 below was written BEFORE the cue rules existed (and never used to tune
# them): each report carries the cue a maintainer reads the fix site from. A value-dependent accuracy
# loss (large/small inputs, tails, poles, relative error against scipy) points at the math only the
# diverging device runs (cuda/Math.cuh for CUDA; Math.h's host math for CPU); NaN dropped or kept
# differently points at the comparison functors the kernel uses (SharedReduceOps.h), unless the
# kernel file writes its own NaN comparison (then the kernel file, the control rows). After its first
# run, two general fixes came from its misses (math CUDA runs only in the jiterator's #else is host
# math; definitions with an attribute macro before the body): its later figures are not blind.
# (api, side, title, body, files under aten/src/ATen/native/)
CUED_HEADERS: list[tuple[str, str, str, str, tuple[str, ...]]] = [
    ("torch.special.i1e", "cuda", "special.i1e inaccurate for large inputs on GPU",
     "For x = 60 the CUDA result has a relative error of 1e-3 against scipy.special.i1e; the CPU result "
     "matches scipy to 1e-15. Small inputs agree.", ("cuda/Math.cuh",)),
    ("torch.special.log_ndtr", "cuda", "log_ndtr returns -inf on CUDA for very negative inputs",
     "log_ndtr(-40.) is -inf on the GPU while the CPU gives -804.6 as scipy does; the loss of precision "
     "starts around x < -20 in the tail.", ("cuda/Math.cuh",)),
    ("torch.special.ndtri", "cuda", "ndtri precision loss near 0 on cuda",
     "For p = 1e-300 the CUDA value is off in the 4th digit, the CPU matches mpmath. Values in the middle "
     "of the range agree.", ("cuda/Math.cuh",)),
    ("torch.polygamma", "cuda", "polygamma(3, x) wrong for large x on CUDA",
     "polygamma(3, x) for x > 1e4 loses accuracy on the GPU (relative error 1e-5); CPU is accurate.",
     ("cuda/Math.cuh",)),
    ("torch.special.erfcx", "cuda", "erfcx underflows on GPU for large x",
     "erfcx(1e5) gives 0 on CUDA but 5.64e-6 on CPU and in scipy: an overflow/underflow in the asymptotic "
     "branch for large arguments.", ("cuda/Math.cuh",)),
    ("torch.special.zeta", "cuda", "zeta near the pole is inaccurate on CUDA",
     "zeta(1.0001, 1) differs between CPU and CUDA: relative error 1e-4 on the GPU close to the pole at "
     "x = 1, the CPU value matches mpmath.", ("cuda/Math.cuh",)),
    ("torch.erfinv", "cpu", "erfinv loses precision near 1 on CPU",
     "erfinv(1 - 1e-7) on CPU has a relative error of 1e-6 in the tail; CUDA matches scipy.", ("Math.h",)),
    ("torch.special.i0e", "cpu", "i0e inaccurate for large x on CPU",
     "For x = 700 the CPU result differs from scipy by 1e-4 (relative); the CUDA value is accurate.",
     ("Math.h",)),
    ("torch.digamma", "cpu", "digamma near negative integers wrong on CPU",
     "digamma(-1.0000001) on CPU differs from scipy in the 3rd digit close to the pole; CUDA is correct.",
     ("Math.h",)),
    ("torch.special.zeta", "cpu", "zeta for large q loses accuracy on CPU",
     "zeta(2, 1e8) on CPU has a relative error of 1e-3; CUDA agrees with mpmath.", ("Math.h",)),
    ("torch.argmax", "cuda", "argmax ignores nan on CUDA",
     "With a nan in the tensor, argmax on CUDA returns the index of the largest number, while the CPU "
     "returns the index of the nan (NaN propagation differs).", ("SharedReduceOps.h",)),
    ("torch.argmin", "cuda", "argmin does not propagate NaN on GPU",
     "torch.argmin on a CUDA tensor holding nan skips it; on CPU the nan's index is returned.",
     ("SharedReduceOps.h",)),
    ("torch.nansum", "cuda", "nansum returns nan on cuda",
     "nansum of a half tensor with nan entries gives nan on CUDA; the CPU ignores the nan entries as "
     "documented.", ("SharedReduceOps.h",)),
    ("torch.amax", "cuda", "amax ignores nan on CUDA (control: the kernel file writes its own NaN functor)",
     "amax over a CUDA tensor with a nan returns the largest number; the CPU returns nan.",
     ("cuda/ReduceMaxValuesKernel.cu",)),
    ("torch.maximum", "cuda", "maximum does not propagate nan on GPU (control)",
     "torch.maximum(a, b) with a nan in b returns a's value on CUDA, nan on CPU.",
     ("cuda/MaxMinElementwiseKernel.cu",)),
]

# Part 3: written after the cue rules and the fixes part 2's misses prompted (math behind the
# jiterator's #else, attribute macros), and scored untouched: what the rules do on cases their author
# did not tune on (controls included: math written inline in the kernel, kernels that launch themselves).
CUED_HEADERS_3: list[tuple[str, str, str, str, tuple[str, ...]]] = [
    ("torch.special.i0", "cuda", "special.i0 overflows early on GPU for large x",
     "i0(700.) is inf on CUDA but finite on CPU; the asymptotic branch for large arguments loses accuracy.",
     ("cuda/Math.cuh",)),
    ("torch.lgamma", "cuda", "lgamma inaccurate near negative integers on CUDA (control: CUDA's own libm)",
     "lgamma(-2.0000001) differs from scipy by 1e-3 on the GPU; the CPU is accurate.",
     ("cuda/UnaryGammaKernels.cu",)),
    ("torch.special.entr", "cpu", "entr precision for tiny x on CPU (control: math inline in the kernel)",
     "entr(1e-300) has a relative error of 1e-2 on CPU; CUDA is accurate.", ("cpu/UnaryOpsKernel.cpp",)),
    ("torch.min", "cuda", "min ignores nan on CUDA (control: the kernel writes its own NaN functor)",
     "torch.min(x) with a nan gives the smallest number on CUDA and nan on the CPU.",
     ("cuda/ReduceMinValuesKernel.cu",)),
    ("torch.topk", "cuda", "topk treats nan differently on GPU",
     "With nan entries, topk on CUDA does not return the nan first; the CPU does (NaN ordering differs).",
     ("cuda/SortingRadixSelect.cuh",)),
    ("torch.special.i1e", "cpu", "i1e inaccurate for large inputs on CPU",
     "For x = 500 the CPU value differs from scipy by 1e-5 relative; CUDA agrees with scipy.", ("Math.h",)),
]
CROSS_DEVICE_3: list[tuple[str, str, str, str, tuple[str, ...]]] = [
    ("torch.abs", "torch.abs(x.cuda(1))", "abs wrong on the second GPU",
     "cuda:0 and the CPU agree.", ("cuda/Loops.cuh", "cuda/CUDALoops.cuh")),
    ("torch.mean", "torch.mean(x.cuda(1), dim=0)", "mean differs on a non-default device",
     "On cuda:1 the mean is wrong; cuda:0 is right.", ("cuda/Reduce.cuh",)),
    ("torch.clamp", "torch.clamp(x.cuda(1), min=0.2)", "clamp gives different results across CUDA devices",
     "", ("cuda/Loops.cuh", "cuda/CUDALoops.cuh")),
    ("torch.index_select", "torch.index_select(x.cuda(1), 0, idx.cuda(1))",
     "index_select on cuda:1 returns garbage (control: the kernel file launches itself)",
     "The same call on cuda:0 is right.", ("cuda/Indexing.cu",)),
    ("torch.softmax", "torch.softmax(x.cuda(1), dim=1)", "softmax differs on second GPU (control: own launches)",
     "CPU and cuda:0 agree; cuda:1 differs.", ("cuda/SoftMax.cu", "cuda/PersistentSoftmax.cuh")),
    ("torch.cumsum", "torch.cumsum(x.cuda(1), dim=1)", "cumsum wrong on cuda:1",
     "The result on the second GPU differs from cuda:0.", ("cuda/ScanUtils.cuh", "cuda/ScanKernels.cpp")),
]

# Reports whose results differ between CUDA devices (cuda:0 vs cuda:1; CPU agreeing with cuda:0):
# the op's math is right, the fault is device handling on its launch path. Written BEFORE the rule.
# Truth: the launcher headers the op's CUDA kernel uses (TensorIterator loops, reductions).
# (api, snippet call on the second device, title, body, files under aten/src/ATen/native/)
CROSS_DEVICE: list[tuple[str, str, str, str, tuple[str, ...]]] = [
    ("torch.mul", "torch.mul(torch.tensor(2.0), x.cuda(1))", "mul with a CPU scalar is wrong on cuda:1",
     "On cuda:0 and on the CPU the result is right; on the second GPU the values are garbage.",
     ("cuda/Loops.cuh",)),
    ("torch.div", "torch.div(torch.tensor(3.0), x.to('cuda:1'))", "div gives different results on different GPUs",
     "The CPU and cuda:0 agree; on cuda:1 the output differs.", ("cuda/Loops.cuh",)),
    ("torch.atan2", "torch.atan2(torch.tensor(1.0), x.cuda(1))", "atan2 wrong on a non-default device",
     "Running on a non-default CUDA device gives different values than cuda:0.", ("cuda/Loops.cuh",)),
    ("torch.sigmoid", "torch.sigmoid(x.cuda(1))", "sigmoid differs between cuda:0 and cuda:1",
     "Only on the second GPU does the result change; CPU and cuda:0 are identical.",
     ("cuda/Loops.cuh", "cuda/CUDALoops.cuh")),
    ("torch.lerp", "torch.lerp(x.cuda(1), y.cuda(1), 0.5)", "lerp on second GPU returns different values",
     "With torch.cuda.set_device(0) and tensors on cuda:1 the result differs from the one on cuda:0.",
     ("cuda/Loops.cuh", "cuda/CUDALoops.cuh")),
    ("torch.sum", "torch.sum(x.cuda(1))", "sum differs on cuda:1",
     "sum over a tensor on device='cuda:1' differs from the CPU and cuda:0 results.", ("cuda/Reduce.cuh",)),
    ("torch.amax", "torch.amax(x.to('cuda:1'), dim=1)", "amax on a second GPU is wrong",
     "The same call on cuda:0 and on the CPU gives the right maxima; on cuda:1 some rows are wrong.",
     ("cuda/Reduce.cuh",)),
    ("torch.pow", "torch.pow(2.0, x.cuda(1))", "pow(scalar, tensor) differs across CUDA devices",
     "On the non-default GPU the result differs; cuda:0 agrees with the CPU.", ("cuda/Loops.cuh",)),
]



def ensure_tree(version: str) -> Path:
    """The unpacked Debian source tree of this release, downloading and unpacking it if absent."""
    debian_version, dirname = TREES[version]
    tree = SRC / dirname
    if (tree / "aten/src/ATen/native/native_functions.yaml").is_file():
        return tree
    SRC.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="apt-src-", dir=SRC))
    (work / "lists" / "partial").mkdir(parents=True)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from real_sources import apt_mirror  # the mirror this machine's apt already uses, never one written here

    mirror = apt_mirror()
    if mirror is None:
        raise SystemExit("no Debian mirror in this machine's apt sources; fetch the trees with bench/real_sources.py")
    (work / "sources.list").write_text(
        f"deb-src [trusted=yes] {mirror} trixie main\n"
        f"deb-src [trusted=yes] {mirror} bookworm main\n"
    )
    opts = [f"-o=Dir::Etc::SourceList={work}/sources.list", "-o=Dir::Etc::SourceParts=/dev/null",
            f"-o=Dir::State::Lists={work}/lists"]
    print(f"fetching PyTorch {version} sources from Debian into {SRC} ...", flush=True)
    subprocess.run(["apt-get", *opts, "update"], cwd=work, check=True, capture_output=True)
    # the .debian.tar.xz of an old revision may be gone (404); the orig tarball is what we need
    subprocess.run(["apt-get", *opts, "source", "--download-only", f"pytorch={debian_version}"], cwd=work,
                   capture_output=True)
    orig = next(work.glob("pytorch_*.orig.tar.xz"), None)
    if orig is None:
        raise SystemExit(f"could not download the PyTorch {version} source package")
    subprocess.run(["tar", "xf", str(orig), "-C", str(SRC)], check=True)
    if not tree.is_dir():
        raise SystemExit(f"unpacked {orig.name} but {tree} is missing")
    return tree


METHODS = ("sftl", "paper", "tfidf")


def locate(issue: Issue, ex: Extraction, tree: LocalTree, method: str) -> Localization:
    """`sftl` / `paper` through the localizer; `tfidf`: the plain content TF-IDF baseline, for reference."""
    if method != "tfidf":
        return localize_gcrde(issue, ex, tree, method=method, top=TOP)
    from sftl.codegraph import native as nat
    from sftl.localize.gcrde import torch_ops
    from sftl.localize.gcrde.index import kernel_index

    index = kernel_index(tree, tree.list_files())
    ops, _ = torch_ops(issue, ex, None, None)
    terms = [o.name.strip("_") for o in ops if o.weight > 0.3] + issue.title.lower().split()
    scores = index.tfidf(terms)
    ranked = sorted(scores, key=lambda p: -scores[p])[:TOP]
    suspects = tuple(Suspect(p, scores[p], nat.path_side(p), "tf-idf") for p in ranked)
    return Localization("tfidf", suspects, Outcome.LOCATED if suspects else Outcome.ABSTAINED, "")


def issue_for(title: str, body: str = "") -> Issue:
    return Issue(repo="pytorch/pytorch", number=0, title=title, body=body)


def check_case(api: str, named: bool) -> tuple[Issue, Extraction]:
    mode = ""
    if "[" in api:
        api, mode = api[:-1].split("[")
    leaf = api.split(".")[-1]
    call = f"{api}(x{', mode=' + repr(mode) if mode else ''})"
    code = f"import torch\nx = torch.randn(4, 8)\ny = {call}\nz = {call.replace('(x', '(x.cuda()')}\nprint(torch.allclose(y, z.cpu()))\n"
    title = f"{leaf} gives a wrong result on CUDA" if named else "Different results between CPU and CUDA"
    body = f"The CUDA result differs from the CPU one{' with mode=' + mode if mode else ''}; the CPU result is correct."
    apis = ("torch.randn", api, "torch.Tensor.cuda", "torch.allclose", "torch.Tensor.cpu")
    env = Environment(framework="pytorch")
    return issue_for(title, body), Extraction(Snippet(code, "bench"), None, env, apis=apis)


def header_case(api: str, side: str) -> tuple[Issue, Extraction]:
    """A report whose wrong side is `side`, the op in the title (these bugs name their op)."""
    issue, ex = check_case(api, named=True)
    if side == "cpu":
        leaf = api.split(".")[-1]
        issue = issue_for(f"{leaf} gives a wrong result on CPU",
                          "The CPU result differs from the CUDA one; the CUDA result is correct.")
    return issue, ex


def rank_of(suspects: list[str], truth: set[str]) -> int | None:
    for i, path in enumerate(suspects[:TOP], 1):
        if path in truth:
            return i
    return None


def summarize(name: str, ranks: list[int | None], seconds: list[float]) -> str:
    n = len(ranks)
    if n == 0:
        return f"{name:44} n=0"
    hit = lambda k: sum(1 for r in ranks if r is not None and r <= k) / n  # noqa: E731
    mrr = sum(1 / r for r in ranks if r) / n
    return (f"{name:44} n={n:3}  top1 {hit(1):.2f}  top3 {hit(3):.2f}  top5 {hit(5):.2f}  MRR {mrr:.2f}"
            f"  median {statistics.median(seconds) * 1000:.0f} ms/query")


def dev_rows() -> list[dict[str, object]]:
    if not SHARED.is_file():
        print(f"(no {SHARED}: dev rows skipped)")
        return []
    rows = [json.loads(line) for line in SHARED.read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("category") == "gcrde"]


def nearest(version: object) -> str:
    return "2.6.0" if isinstance(version, str) and version[:1] == "2" else "1.13.1"


def main() -> int:
    trees = {v: LocalTree(ensure_tree(v), "pytorch", v) for v in TREES}
    print(f"trees: {', '.join(f'{v} ({t.root})' for v, t in trees.items())}")
    misses: list[str] = []

    print("\n-- dev rows (real issues; scored on the nearest tree)")
    for method in METHODS:
        ranks: list[int | None] = []
        secs: list[float] = []
        for row in dev_rows():
            version = nearest(row.get("version"))
            tree = trees[version]
            issue = issue_for(str(row["title"]), str(row.get("observed") or ""))
            ex = Extraction(Snippet(str(row.get("code") or ""), "dev"), None, Environment(framework="pytorch"),
                            apis=tuple(row.get("apis") or ()))  # type: ignore[arg-type]
            t0 = time.perf_counter()
            loc = locate(issue, ex, tree, method)
            secs.append(time.perf_counter() - t0)
            truth = set(row["truth_files"])  # type: ignore[call-overload]
            present = [t for t in truth if (tree.root / t).is_file()]
            r = rank_of([s.path for s in loc.suspects], truth)
            ranks.append(r)
            print(f"  [{method}] {row['url']} (v{row.get('version')} -> tree {version}): rank {r}; "
                  f"truth {'in tree' if present else 'NOT in this tree'}; top: "
                  f"{', '.join(s.path.replace(NATIVE, '') for s in loc.suspects[:3]) or loc.reason}")
        print(summarize(f"dev GCRDE rows [{method}]", ranks, secs))

    for set_name, checks in (("check set", CHECKS), ("held-out set", HOLDOUT)):
        misses += run_set(set_name, checks, trees)
    misses += run_headers(trees)
    misses += run_cued(trees)
    misses += run_cross_device(trees)
    if misses:
        print("\nsftl misses beyond top 3:")
        for m in misses:
            print("  " + m)
    return 0


def run_set(set_name: str, checks: list[tuple[str, tuple[str, ...]]], trees: dict[str, LocalTree]) -> list[str]:
    misses: list[str] = []
    print(f"\n-- {set_name} (truth: the CUDA kernel file of each op)")
    for version, tree in trees.items():
        cases = []
        for api, files in checks:
            truth = {NATIVE + f for f in files if (tree.root / NATIVE / f).is_file()}
            if truth:
                cases.append((api, truth))
        print(f"tree {version}: {len(cases)} of {len(checks)} ops have their truth file in this tree")
        for method in METHODS:
            for named in (False, True) if method == "sftl" else (False,):  # baselines: the neutral title only
                ranks, secs = [], []
                for api, truth in cases:
                    issue, ex = check_case(api, named)
                    t0 = time.perf_counter()
                    loc = locate(issue, ex, tree, method)
                    secs.append(time.perf_counter() - t0)
                    r = rank_of([s.path for s in loc.suspects], truth)
                    ranks.append(r)
                    if method == "sftl" and (r is None or r > 3):
                        misses.append(f"{set_name} {version} {'named' if named else 'neutral'} {api}: rank {r}; top "
                                      f"{', '.join(s.path.replace(NATIVE, '') for s in loc.suspects[:3])}")
                title = "op in title" if named else "neutral title"
                print(summarize(f"  {version} {title} [{method}]", ranks, secs))
    return misses


def run_headers(trees: dict[str, LocalTree]) -> list[str]:
    misses: list[str] = []
    print("\n-- header held-out set (truth: the header implementing the diverging math, not the kernel file)")
    for version, tree in trees.items():
        cases = []
        for api, side, files in HEADER_HOLDOUT:
            truth = {NATIVE + f for f in files if (tree.root / NATIVE / f).is_file()}
            if truth:
                issue, ex = header_case(api, side)
                cases.append((f"{api} [{side}]", issue, ex, truth))
        misses += _run_cases("headers", cases, tree, version, miss_above=3)
    return misses


def cued_case(api: str, title: str, body: str) -> tuple[Issue, Extraction]:
    _, ex = check_case(api, named=True)
    return issue_for(title, body), ex


def cross_case(api: str, call: str, title: str, body: str) -> tuple[Issue, Extraction]:
    cpu = call.replace(".cuda(1)", "").replace(".to('cuda:1')", "")
    code = (f"import torch\nx = torch.rand(4, 8)\ny = torch.rand(4, 8)\nidx = torch.tensor([0, 2])\na = {cpu}\n"
            f"b = {call}\n"
            "print(torch.allclose(a, b.cpu()))\n")
    apis = ("torch.rand", api, "torch.Tensor.cuda", "torch.allclose", "torch.Tensor.cpu")
    return issue_for(title, body), Extraction(Snippet(code, "bench"), None, Environment(framework="pytorch"),
                                              apis=apis)


def _run_cases(label: str, cases: list[tuple[str, Issue, Extraction, set[str]]], tree: LocalTree,
               version: str, miss_above: int = 1) -> list[str]:
    misses: list[str] = []
    for method in METHODS:
        ranks, secs = [], []
        for api, issue, ex, truth in cases:
            t0 = time.perf_counter()
            loc = locate(issue, ex, tree, method)
            secs.append(time.perf_counter() - t0)
            r = rank_of([s.path for s in loc.suspects], truth)
            ranks.append(r)
            if method == "sftl" and (r is None or r > miss_above):
                misses.append(f"{label} {version} {api} ({issue.title[:40]}): rank {r}; top "
                              f"{', '.join(s.path.replace(NATIVE, '') for s in loc.suspects[:3])}")
        print(summarize(f"  {version} {label} [{method}]", ranks, secs))
    return misses


def _run_set(trees: dict[str, LocalTree], heading: str, label: str, rows: Any, make_case: Any) -> list[str]:
    """One written set over every tree: rows (api, x, title, body, truth files); make_case(api, x, title, body)."""
    misses: list[str] = []
    print(f"\n-- {heading}")
    for version, tree in trees.items():
        cases = []
        for api, extra, title, body, files in rows:
            truth = {NATIVE + f for f in files if (tree.root / NATIVE / f).is_file()}
            if truth:
                issue, ex = make_case(api, extra, title, body)
                cases.append((api, issue, ex, truth))
        misses += _run_cases(label, cases, tree, version)
    return misses


def run_cued(trees: dict[str, LocalTree]) -> list[str]:
    def cued(api: str, _side: Any, title: str, body: str) -> Any:
        return cued_case(api, title, body)

    return (_run_set(trees, "header set part 2 (written before the cue rules: reports with the cue naming the fix site)",
                     "cued headers", CUED_HEADERS, cued)
            + _run_set(trees, "header set part 3 (written after the rules, scored untouched)", "cued headers 3",
                       CUED_HEADERS_3, cued))


def run_cross_device(trees: dict[str, LocalTree]) -> list[str]:
    return (_run_set(trees, "cross-device set (results differ between CUDA devices; truth: the launcher headers)",
                     "cross-device", CROSS_DEVICE, cross_case)
            + _run_set(trees, "cross-device set part 2 (written after the rules, scored untouched)", "cross-device 2",
                       CROSS_DEVICE_3, cross_case))


if __name__ == "__main__":
    sys.exit(main())
