"""GCRDE cues on a synthetic tree in PyTorch's layout: cross-device reports, value-dependent math, NaN functors, scores."""

from __future__ import annotations

from pathlib import Path

import pytest

from sftl.localize.gcrde import localize_gcrde, report_cues
from sftl.localize.gcrde.follow import jiterator_fallbacks
from sftl.model import Environment, Extraction, Issue, Side, Snippet
from sftl.sources import LocalTree

NATIVE = "aten/src/ATen/native/"


@pytest.fixture
def tree(fixtures_dir: Path) -> LocalTree:
    return LocalTree(fixtures_dir / "gcrde_launch", "pytorch", "2.6.0")


def report(title: str, apis: tuple[str, ...], body: str = "", code: str = "") -> tuple[Issue, Extraction]:
    issue = Issue(repo="pytorch/pytorch", number=1, title=title, body=body)
    snippet = Snippet(code, "test") if code else None
    return issue, Extraction(snippet, None, Environment(framework="pytorch"), apis=apis)


def paths(tree: LocalTree, title: str, apis: tuple[str, ...], body: str = "", code: str = "") -> list[str]:
    issue, ex = report(title, apis, body, code)
    return [s.path.removeprefix(NATIVE) for s in localize_gcrde(issue, ex, tree).suspects]


# -- reading the cues ---------------------------------------------------------------------------

TWO_DEVICES = "import torch\nx = torch.rand(4)\na = torch.mul(2.0, x.cuda())\nb = torch.mul(2.0, x.cuda(1))\n"


@pytest.mark.parametrize(
    ("title", "body", "code"),
    [
        ("mul differs on different cuda devices", "", ""),
        ("Wrong result on a second GPU", "", ""),
        ("mul is wrong on the non-default device", "", ""),
        ("mul gives different values", "CPU and cuda:0 agree; cuda:1 is off.", ""),
        ("mul gives different values", "", TWO_DEVICES),
        ("results differ between GPUs", "with device='cuda:1' only", ""),
        ("mul differs", "", "torch.cuda.set_device(1)\ny = x.to('cuda')\n"),
    ],
)
def test_cross_device_reports_are_recognised(title: str, body: str, code: str) -> None:
    issue, ex = report(title, ("torch.mul",), body, code)
    assert report_cues(issue, ex).cross_device


@pytest.mark.parametrize(
    ("title", "body", "code"),
    [
        ("mul gives different results on different devices", "CPU and GPU disagree.", ""),  # CPU vs GPU
        ("mul differs on different GPUs", "V100 and A100 give different values.", ""),  # GPU models
        ("mul wrong on CUDA", "The CUDA result differs from the CPU one.", "y = torch.mul(2.0, x.cuda(1))\n"),
        # an environment section's versions are no device indices
        ("mul wrong on CUDA", "PyTorch: 1.13.1\nCUDA: 11.7\ncuDNN: 8.5", "y = torch.mul(2.0, x.cuda())\n"),
    ],
)
def test_cpu_gpu_and_gpu_model_reports_are_not_cross_device(title: str, body: str, code: str) -> None:
    issue, ex = report(title, ("torch.mul",), body, code)
    assert report_cues(issue, ex).cross_device == ""


def test_value_cue_needs_values_not_shapes() -> None:
    issue, ex = report("digamma inaccurate for large x on CUDA", ("torch.digamma",),
                       "relative error of 1e-4 against scipy")
    assert report_cues(issue, ex).value_dependent
    issue, ex = report("digamma inaccurate on CUDA for non-contiguous inputs", ("torch.digamma",),
                       "relative error of 1e-4 for large tensors")
    assert report_cues(issue, ex).value_dependent == ""


def test_nan_cue() -> None:
    assert report_cues(*report("argmax ignores nan on CUDA", ("torch.argmax",))).nan
    assert report_cues(*report("argmax", ("torch.argmax",), "NaN propagation differs between CPU and GPU")).nan
    assert report_cues(*report("argmax wrong on CUDA", ("torch.argmax",), "the index is off by one")).nan == ""


# -- cross-device: the launch path above the math -----------------------------------------------


def test_cross_device_ranks_the_launcher_the_kernel_calls_first(tree: LocalTree) -> None:
    issue, ex = report("mul with a CPU scalar differs on cuda:1", ("torch.mul",),
                       "CPU and cuda:0 agree.", TWO_DEVICES)
    loc = localize_gcrde(issue, ex, tree)
    got = [s.path.removeprefix(NATIVE) for s in loc.suspects]
    assert got[0] == "cuda/Loops.cuh"
    lead = loc.suspects[0]
    assert lead.side is Side.CUDA and "opmath_symmetric_gpu_kernel_with_scalars" in lead.reason
    assert "BinaryMulKernel.cu" in lead.reason
    # the launch it calls in turn, then the kernel; CPU code last (the CPU agreed)
    assert got.index("cuda/CUDALoops.cuh") < got.index("cuda/BinaryMulKernel.cu") < got.index("cpu/BinaryOpsKernel.cpp")
    assert got.index("BinaryOps.cpp") < got.index("cpu/BinaryOpsKernel.cpp")  # the structured meta decides devices
    assert "compares CUDA devices" in loc.reason or "non-default CUDA device" in loc.reason


def test_the_same_report_without_a_second_device_keeps_the_kernel_first(tree: LocalTree) -> None:
    code = "import torch\nx = torch.rand(4)\na = torch.mul(2.0, x)\nb = torch.mul(2.0, x.cuda())\n"
    got = paths(tree, "mul with a CPU scalar is wrong on CUDA", ("torch.mul",), "CPU is right.", code)
    assert got[0] == "cuda/BinaryMulKernel.cu"
    assert got.index("cuda/BinaryMulKernel.cu") < got.index("cuda/Loops.cuh")


def test_cross_device_reduction_reaches_the_reduce_launcher_through_a_functor(tree: LocalTree) -> None:
    # sum_kernel_cuda calls sum_functor<...>{}(iter), whose operator() calls gpu_reduce_kernel
    got = paths(tree, "sum differs between cuda:0 and cuda:1", ("torch.sum",),
                "On the second GPU the sum is wrong.", "y = x.cuda(1).sum()\nz = x.cuda().sum()\n")
    assert got[0] == "cuda/Reduce.cuh"


def test_cross_device_demotes_device_math(tree: LocalTree) -> None:
    got = paths(tree, "digamma differs on a second GPU", ("torch.digamma",), "cuda:0 and the CPU agree.")
    assert got[0] == "cuda/Loops.cuh"
    assert got.index("cuda/UnaryGammaKernels.cu") < got.index("cuda/Math.cuh")


# -- value-dependent accuracy: the math only the diverging device runs ----------------------------


def test_value_cue_lifts_cuda_only_math_above_the_kernel(tree: LocalTree) -> None:
    issue, ex = report("digamma loses precision for large x on CUDA", ("torch.digamma",),
                       "relative error 1e-4 against scipy on the GPU; the CPU is accurate.")
    loc = localize_gcrde(issue, ex, tree)
    assert loc.suspects[0].path == NATIVE + "cuda/Math.cuh"
    assert "calc_digamma" in loc.suspects[0].reason and "input values" in loc.suspects[0].reason
    assert loc.suspects[1].path == NATIVE + "cuda/UnaryGammaKernels.cu"


def test_value_cue_on_cpu_lifts_host_only_math(tree: LocalTree) -> None:
    got = paths(tree, "digamma inaccurate near the pole on CPU", ("torch.digamma",),
                "The CPU value has a relative error of 1e-3 compared to scipy; CUDA is correct.")
    assert got[0] == "Math.h"
    assert got[1] == "cpu/UnaryOpsKernel.cpp"


def test_without_a_value_cue_the_kernel_file_stays_first(tree: LocalTree) -> None:
    assert paths(tree, "digamma gives a wrong result on CUDA", ("torch.digamma",))[0] == "cuda/UnaryGammaKernels.cu"
    got = paths(tree, "digamma inaccurate for non-contiguous inputs on CUDA", ("torch.digamma",),
                "relative error 1e-4 on the GPU for a transposed tensor")
    assert got[0] == "cuda/UnaryGammaKernels.cu"


# -- NaN handling: the comparison functors the kernel uses ---------------------------------------


def test_nan_cue_lifts_the_comparison_functors_the_kernel_uses(tree: LocalTree) -> None:
    issue, ex = report("argmax ignores nan on CUDA", ("torch.argmax",),
                       "The CPU returns the index of the nan; CUDA returns the largest number's.")
    loc = localize_gcrde(issue, ex, tree)
    assert loc.suspects[0].path == NATIVE + "SharedReduceOps.h"
    assert loc.suspects[0].side is Side.SHARED and "NaN" in loc.suspects[0].reason
    assert loc.suspects[1].path == NATIVE + "cuda/ReduceArgMaxKernel.cu"


def test_a_kernel_writing_its_own_nan_comparison_stays_first(tree: LocalTree) -> None:
    got = paths(tree, "amax ignores nan on CUDA", ("torch.amax",), "The CPU returns nan.")
    assert got[0] == "cuda/ReduceMaxValuesKernel.cu"  # MaxNanFunctor lives in the kernel file


def test_nan_cue_on_an_op_that_compares_nothing_lifts_nothing(tree: LocalTree) -> None:
    got = paths(tree, "sum ignores nan on CUDA", ("torch.sum",), "The CPU sum is nan.")
    assert got[0] == "cuda/ReduceSumProdKernel.cu"


# -- scores ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["sftl", "paper"])
def test_scores_are_in_unit_range_and_ordered(tree: LocalTree, method: str) -> None:
    cases = [
        report("mul differs on cuda:1", ("torch.mul",), "CPU and cuda:0 agree.", TWO_DEVICES),
        report("argmax ignores nan on CUDA", ("torch.argmax",)),
        report("digamma loses precision for large x on CUDA", ("torch.digamma",), "relative error vs scipy"),
        report("mul wrong on CUDA", ("torch.mul",)),
    ]
    for issue, ex in cases:
        loc = localize_gcrde(issue, ex, tree, method=method)
        scores = [s.score for s in loc.suspects]
        assert scores or method == "paper"  # the published name matching may find nothing
        assert all(0.0 <= s <= 1.0 for s in scores)
        assert scores == sorted(scores, reverse=True)


# -- what a default CUDA build runs: not the `#else` of `#if AT_USE_JITERATOR()` --------------------


def test_jiterator_fallback_spans_handle_nesting() -> None:
    text = ("void k() {\n#if AT_USE_JITERATOR()\n  jitted(a);\n#else\n#ifdef X\n  b();\n#endif\n  calc(a);\n"
            "#endif\n#if defined(Y)\n  c();\n#else\n  d();\n#endif\n}\n")
    spans = jiterator_fallbacks(text)
    assert len(spans) == 1
    start, end = spans[0]
    assert "calc(a)" in text[start:end] and "b();" in text[start:end] and "jitted" not in text[start:end]
    assert "d();" not in text[start:end]  # an #else of another test is no jiterator fallback


def test_cpu_value_cue_lifts_host_math_cuda_runs_only_without_the_jiterator(tree: LocalTree) -> None:
    # calc_i0e is named by the CUDA kernel only in its #else fallback (and in the jiterator's name string),
    # and its definition carries an attribute macro before the body
    issue, ex = report("special.i0e inaccurate for large x on CPU", ("torch.special.i0e",),
                       "relative error 1e-4 against scipy on CPU; CUDA is accurate.")
    loc = localize_gcrde(issue, ex, tree)
    assert loc.suspects[0].path == NATIVE + "Math.h"
    assert "calc_i0e" in loc.suspects[0].reason and "CPU-only math" in loc.suspects[0].reason
    assert loc.suspects[1].path == NATIVE + "cpu/UnaryOpsKernel.cpp"


def test_cuda_kernel_math_and_launchers_skip_the_jiterator_fallback(tree: LocalTree) -> None:
    issue, ex = report("special.i0e gives a wrong result on CUDA", ("torch.special.i0e",))
    loc = localize_gcrde(issue, ex, tree)
    by_path = {s.path.removeprefix(NATIVE): s for s in loc.suspects}
    assert loc.suspects[0].path == NATIVE + "cuda/UnarySpecialOpsKernel.cu"
    assert "i0e_string" in by_path["cuda/Math.cuh"].reason
    assert "used by i0e_kernel_cuda" not in by_path.get("Math.h", loc.suspects[0]).reason
    assert "jitted_gpu_kernel" in by_path["cuda/JitLoops.cuh"].reason
    assert "gpu_kernel, called by" not in by_path.get("cuda/Loops.cuh", loc.suspects[0]).reason


# -- which device: one device named as the only one, a long float accumulation ------------------

@pytest.mark.parametrize(
    ("body", "side"),
    [
        ("Maintainer: 'Repros on cuda but not cpu'.", "cuda"),
        ("With CUDA (but not CPU) the backward pass crashes with an illegal memory access.", "cuda"),
        ("The issue seems to be exclusive to CUDA tensors. On CPU, the output was correct.", "cuda"),
        ("It works on cpu but not on cuda.", "cuda"),  # the device it works on is the right one
        ("This only happens on the CPU.", "cpu"),
        ("Works fine on the GPU but not the CPU.", "cpu"),
    ],
)
def test_one_device_named_as_the_only_one_a_fault_shows_on(body: str, side: str) -> None:
    from sftl.localize.gcrde import divergent_side

    issue = Issue(repo="pytorch/pytorch", number=1, title="cumsum gives different results", body=body)
    div = divergent_side(issue, Extraction(None, None, Environment(framework="pytorch")))
    assert div.side.value == side and div.confident and div.stated


GROUP_NORM = ("import torch\nx = torch.rand(1, 32, 256, 256, 72)\nm = torch.nn.GroupNorm(4, 32)\n"
              "print(torch.abs(m(x) - m.cuda()(x.cuda()).cpu()).max())\n")


@pytest.mark.parametrize(
    ("code", "output", "ops", "side"),
    [
        (GROUP_NORM, "0.0121 (expected a very small value)", ["group_norm"], "cpu"),
        # fewer elements than float32's mantissa spans: no accumulation argument
        (GROUP_NORM.replace("256, 256, 72", "8, 8"), "0.0121", ["group_norm"], "cuda"),
        (GROUP_NORM, "nan", ["group_norm"], "cuda"),  # a gross fault, not a precision gap
        (GROUP_NORM, "0.0121", ["cumsum"], "cuda"),  # a scan's large-input faults are its index arithmetic
        (GROUP_NORM.replace("(1, 32", "(1, 32, dtype=torch.float64"), "0.0121", ["group_norm"], "cuda"),
        ("x = torch.ones((2*4096*8, 1000))\nprint((x.sum() - x.cuda().sum().cpu()).abs())\n", "0.5", ["sum"], "cpu"),
    ],
)
def test_a_long_float_accumulation_with_a_small_gap_puts_the_cpu_first(code: str, output: str, ops: list[str],
                                                                       side: str) -> None:
    from sftl.localize.gcrde import divergent_side
    from sftl.localize.gcrde.cues import accumulation_side

    issue = Issue(repo="pytorch/pytorch", number=1, title="Running nn.GroupNorm on CPU and GPU return different results",
                  body=f"```python\n{code}```\n\nOutput:\n\n```\n{output}\n```\n")
    ex = Extraction(Snippet(code, "test"), None, Environment(framework="pytorch"))
    div = accumulation_side(issue, ex, ops, divergent_side(issue, ex))
    assert div.side.value == side
    if side == "cpu":
        assert "2**24" in div.why and not div.confident


def test_a_stated_device_wins_over_the_accumulation_argument() -> None:
    from sftl.localize.gcrde import divergent_side
    from sftl.localize.gcrde.cues import accumulation_side

    issue = Issue(repo="pytorch/pytorch", number=1, title="GroupNorm is wrong on CUDA", body="0.0121")
    ex = Extraction(Snippet(GROUP_NORM, "test"), None, Environment(framework="pytorch"))
    assert accumulation_side(issue, ex, ["group_norm"], divergent_side(issue, ex)).side.value == "cuda"


def test_version_lines_and_a_relative_error_do_not_decide_the_accumulation_argument() -> None:
    from sftl.localize.gcrde import divergent_side
    from sftl.localize.gcrde.cues import accumulation_side

    def side(output: str) -> str:
        issue = Issue(repo="pytorch/pytorch", number=1, title="GroupNorm gives different results",
                      body=f"```python\n{GROUP_NORM}```\n\n```\n{output}\n```\n")
        ex = Extraction(Snippet(GROUP_NORM, "test"), None, Environment(framework="pytorch"))
        return accumulation_side(issue, ex, ["group_norm"], divergent_side(issue, ex)).side.value

    assert side("the outputs differ\nPyTorch version: 0.4") == "cuda"  # no gap shown: a version is no difference
    assert side("relative error 0.003 between the devices") == "cpu"
    assert side("RuntimeError: 0.003") == "cuda"
