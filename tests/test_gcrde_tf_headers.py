"""TensorFlow GCRDE localization from a wheel's kernel headers: declaring headers and the files inferred from them."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest

from sftl.localize.gcrde import localize_gcrde
from sftl.localize.gcrde.tensorflow import tf_inferred
from sftl.model import Environment, Extraction, Issue, Localization, Outcome, Side
from sftl.sources import LocalTree, SitePackages, WheelSource

K = "tensorflow/core/kernels/"
INFERRED = "source not available; inferred from "


@pytest.fixture
def site(fixtures_dir: Path) -> SitePackages:
    return SitePackages("tensorflow", site_dir=fixtures_dir / "tf_headers_site")


@pytest.fixture
def wheel(fixtures_dir: Path, tmp_path: Path) -> WheelSource:
    """The fixture packed as a real wheel (tensorflow/include/... members), read as a zip."""
    root = fixtures_dir / "tf_headers_site"
    path = tmp_path / "tensorflow_cpu-2.6.0-cp39-cp39-manylinux2010_x86_64.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for f in sorted(root.rglob("*")):
            if f.is_file():
                zf.write(f, f.relative_to(root).as_posix())
    return WheelSource(path, "tensorflow")


def locate(source: object, title: str, api: str, body: str = "", method: str = "sftl") -> Localization:
    issue = Issue(repo="tensorflow/tensorflow", number=1, title=title, body=body)
    ex = Extraction(None, None, Environment(framework="tensorflow"), apis=(api,))
    return localize_gcrde(issue, ex, source, method=method)  # type: ignore[arg-type]


def paths(loc: Localization) -> list[str]:
    return [s.path for s in loc.suspects]


def test_argmax_gpu_report_puts_the_inferred_gpu_file_first_marked_inferred(wheel: WheelSource) -> None:
    loc = locate(wheel, "tf.math.argmax returns a wrong index on GPU", "tensorflow.math.argmax")
    assert loc.outcome is Outcome.LOCATED and "kernel headers only" in loc.reason
    first = loc.suspects[0]
    assert first.path == K + "argmax_op_gpu.cu.cc" and first.side is Side.CUDA
    assert first.reason.startswith(INFERRED + K + "argmax_op.h by TensorFlow's naming convention")
    assert "declares functor::ArgMax" in first.reason
    assert wheel.read_text(first.path) is None  # inferred: not in the wheel, never claimed as read
    assert paths(loc)[1:3] == [K + "argmax_op.cc", K + "argmax_op.h"]
    header = loc.suspects[2]
    assert not header.reason.startswith(INFERRED)  # the header itself was read


def test_cpu_wrong_report_puts_the_cc_file_above_the_gpu_one(site: SitePackages) -> None:
    loc = locate(site, "argmax differs between devices", "tensorflow.math.argmax",
                 body="The CPU result is wrong; the GPU one is correct.")
    order = paths(loc)
    assert order.index(K + "argmax_op.cc") < order.index(K + "argmax_op_gpu.cu.cc")


def test_segment_sum_reaches_the_family_files_and_the_real_gpu_header(site: SitePackages) -> None:
    loc = locate(site, "tf.math.segment_sum is wrong on GPU", "tensorflow.math.segment_sum")
    # the real GPU header holds the kernels (__global__): it leads; the .cu.cc that instantiates them is inferred
    assert paths(loc)[:2] == [K + "segment_reduction_ops_gpu.cu.h", K + "segment_reduction_ops_gpu.cu.cc"]
    assert loc.suspects[1].reason.startswith(INFERRED + K + "segment_reduction_ops.h")
    assert not loc.suspects[0].reason.startswith(INFERRED) and loc.suspects[0].side is Side.CUDA
    assert K + "segment_reduction_ops.cc" in paths(loc)


def test_reduce_sum_prefers_the_reduction_family_over_a_segment_functor_named_sum(site: SitePackages) -> None:
    loc = locate(site, "reduce_sum gives a different result on GPU", "tensorflow.math.reduce_sum")
    order = paths(loc)
    assert order[0] == K + "reduction_gpu_kernels.cu.h"
    assert K + "reduction_ops_sum.cc" in order  # one .cc per reduction in TensorFlow's layout
    seg = K + "segment_reduction_ops.h"
    assert seg not in order or order.index(seg) > order.index(K + "reduction_ops.h")


def test_bias_add_names_the_gpu_launcher_file_and_its_header(wheel: WheelSource) -> None:
    loc = locate(wheel, "tf.nn.bias_add output differs on the GPU", "tensorflow.nn.bias_add")
    assert set(paths(loc)[:2]) == {K + "bias_op_gpu.cu.cc", K + "bias_op_gpu.h"}
    assert all(s.side is Side.CUDA for s in loc.suspects[:2])


def test_cwise_functor_names_its_per_op_files_not_the_gradient_header(site: SitePackages) -> None:
    loc = locate(site, "tf.math.floordiv wrong for negative ints on GPU", "tensorflow.math.floordiv")
    order = paths(loc)
    assert order[0] == K + "cwise_op_gpu_floor_div.cu.cc"
    assert "cwise functor functor::floor_div" in loc.suspects[0].reason
    assert K + "cwise_op_floor_div.cc" in order and K + "cwise_ops.h" in order
    assert K + "cwise_ops_gpu_gradients.cu.h" not in order
    assert K + "cwise_op_gpu_floor_mod.cu.cc" not in order  # a sibling functor, not this op


def test_nan_cue_lifts_the_gpu_header_that_handles_nan(site: SitePackages) -> None:
    plain = locate(site, "tf.reduce_max differs on GPU", "tensorflow.math.reduce_max")
    nan = locate(site, "tf.reduce_max ignores NaN on GPU", "tensorflow.math.reduce_max",
                 body="On CPU the NaN propagates, on GPU it is dropped.")
    gpu_header = K + "reduction_gpu_kernels.cu.h"
    assert nan.suspects[0].path == gpu_header and "handles NaN" in nan.suspects[0].reason
    assert nan.suspects[0].score > next(s.score for s in plain.suspects if s.path == gpu_header)


def test_value_cue_points_at_the_cwise_functor(site: SitePackages) -> None:
    loc = locate(site, "tf.math.tanh loses precision for large inputs on GPU", "tensorflow.math.tanh")
    header = next(s for s in loc.suspects if s.path == K + "cwise_ops.h")
    assert "the math is the functor in cwise_ops.h" in header.reason
    plain = locate(site, "tf.math.tanh differs on GPU", "tensorflow.math.tanh")
    assert header.score > next(s.score for s in plain.suspects if s.path == K + "cwise_ops.h")


def test_resize_in_the_image_folder_keeps_its_folder(site: SitePackages) -> None:
    loc = locate(site, "tf.image.resize bilinear differs on GPU", "tensorflow.image.resize_bilinear")
    assert paths(loc)[0] == K + "image/resize_bilinear_op_gpu.cu.cc"


def test_a_header_registration_is_kept_beside_the_inference(site: SitePackages) -> None:
    loc = locate(site, "batch matmul wrong on GPU", "tensorflow.linalg.matmul")
    impl = next(s for s in loc.suspects if s.path == K + "matmul_op_impl.h")
    assert 'REGISTER_KERNEL_BUILDER(Name("BatchMatMulV2"))' in impl.reason


def test_an_op_whose_gpu_kernel_a_header_registers_gets_no_inferred_gpu_file(site: SitePackages) -> None:
    loc = locate(site, "tf.linalg.matmul wrong on GPU", "tensorflow.raw_ops.MatMul")
    assert paths(loc)[0] == K + "matmul_op_impl.h"
    assert 'Name("MatMul")) for GPU' in loc.suspects[0].reason
    assert K + "matmul_op_gpu.cu.cc" not in paths(loc) and K + "matmul_op.cc" in paths(loc)


def test_a_tree_with_cc_files_reads_registrations_and_infers_nothing(fixtures_dir: Path, tmp_path: Path) -> None:
    shutil.copytree(fixtures_dir / "tf_headers_site" / "tensorflow" / "include", tmp_path, dirs_exist_ok=True)
    (tmp_path / K / "argmax_op.cc").write_text(
        'REGISTER_KERNEL_BUILDER(Name("ArgMax").Device(DEVICE_GPU).TypeConstraint<float>("T"), ArgMaxOp);\n')
    loc = locate(LocalTree(tmp_path, "tensorflow"), "argmax wrong on GPU", "tensorflow.math.argmax")
    assert paths(loc)[0] == K + "argmax_op.cc" and "REGISTER_KERNEL_BUILDER" in loc.reason
    assert not any(s.reason.startswith(INFERRED) for s in loc.suspects)


def test_paper_method_never_infers(site: SitePackages) -> None:
    loc = locate(site, "argmax wrong on GPU", "tensorflow.math.argmax", method="paper")
    assert not any(s.reason.startswith(INFERRED) for s in loc.suspects)


def test_unknown_op_with_no_declaring_header_falls_back_to_names_or_abstains(site: SitePackages) -> None:
    loc = locate(site, "tf.math.bessel_zz wrong on GPU", "tensorflow.math.bessel_zz")
    assert loc.outcome is Outcome.ABSTAINED or not any(s.reason.startswith(INFERRED) for s in loc.suspects)


@pytest.mark.parametrize(
    ("header", "op", "functor", "expected"),
    [
        ("argmax_op.h", "ArgMax", "", ["argmax_op_gpu.cu.cc", "argmax_op.cc"]),
        ("segment_reduction_ops.h", "SegmentSum", "", ["segment_reduction_ops_gpu.cu.cc", "segment_reduction_ops.cc"]),
        ("softmax_op_functor.h", "Softmax", "", ["softmax_op_gpu.cu.cc", "softmax_op.cc"]),
        ("bias_op_gpu.h", "BiasAdd", "", ["bias_op_gpu.cu.cc", "bias_op.cc"]),
        ("gather_functor.h", "GatherV2", "", ["gather_functor_gpu.cu.cc", "gather_functor.cc"]),
        ("cwise_ops.h", "FloorDiv", "floor_div", ["cwise_op_gpu_floor_div.cu.cc", "cwise_op_floor_div.cc"]),
        ("reduction_ops.h", "Mean", "", ["reduction_ops_mean.cc"]),
        ("conv_2d.h", "Conv2D", "", []),  # no _op/_ops stem: no convention names a file
    ],
)
def test_naming_conventions(header: str, op: str, functor: str, expected: list[str]) -> None:
    assert [p.removeprefix(K) for p, _ in tf_inferred(K + header, op, functor)] == expected


_INSTALLED = SitePackages("tensorflow") if __import__("importlib").util.find_spec("tensorflow") else None


@pytest.mark.skipif(_INSTALLED is None or not any(p.startswith(K) and p.endswith(".h")
                                                  for p in _INSTALLED.list_files()),
                    reason="tensorflow (with its include/ headers) is not installed")
def test_installed_tensorflow_headers() -> None:
    assert _INSTALLED is not None
    argmax = locate(_INSTALLED, "tf.math.argmax wrong on GPU", "tensorflow.math.argmax")
    assert argmax.suspects[0].path == K + "argmax_op_gpu.cu.cc"
    assert argmax.suspects[0].reason.startswith(INFERRED + K + "argmax_op.h")
    seg = locate(_INSTALLED, "unsorted_segment_sum wrong on GPU", "tensorflow.math.unsorted_segment_sum")
    assert {K + "segment_reduction_ops_gpu.cu.cc", K + "segment_reduction_ops_gpu.cu.h"} <= set(paths(seg)[:3])


def test_a_gpu_header_holding_the_kernels_ranks_above_the_inferred_cu_cc(site: SitePackages) -> None:
    loc = locate(site, "[CUDA] illegal memory read on TopK", "tensorflow.math.top_k")
    got = paths(loc)
    assert got[0] == K + "topk_op_gpu.h" and "holds the GPU kernels" in loc.suspects[0].reason
    assert got.index(K + "topk_op_gpu.cu.cc") == 1 and "inferred" in loc.suspects[1].reason


def test_an_api_exported_from_a_generated_wrapper_names_its_raw_op(tmp_path: Path) -> None:
    from sftl.localize.gcrde import tf_raw_ops
    from sftl.sources import LocalTree

    ops = tmp_path / "tensorflow" / "python" / "ops"
    ops.mkdir(parents=True)
    (ops / "gen_linalg_ops.py").write_text(
        "@_dispatch.add_fallback_dispatch_list\n@tf_export('linalg.solve', v1=['linalg.solve', 'matrix_solve'])\n"
        "def matrix_solve(matrix, rhs, adjoint=False, name=None):\n"
        "  _, _, _op, _outputs = _op_def_library._apply_op_helper(\n        \"MatrixSolve\", matrix=matrix, rhs=rhs)\n")
    tree = LocalTree(tmp_path, "tensorflow")
    assert tf_raw_ops("tensorflow.linalg.solve", tree) == ("MatrixSolve",)  # not 'Solve' by name rules
    assert tf_raw_ops("tensorflow.linalg.solve") == ("Solve",)  # without the sources: the name rule
