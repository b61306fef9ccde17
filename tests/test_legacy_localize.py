"""GCRDE on TH/THC-era trees (fixtures modeled on PyTorch 0.4 and 1.4): definitions, functors, sides and reasons."""

from __future__ import annotations

from pathlib import Path

import pytest

from sftl.localize.gcrde import localize_gcrde
from sftl.model import Environment, Extraction, Issue, Localization, Outcome, Side
from sftl.sources import LocalTree

THC = "aten/src/THC/"


def locate(fixtures_dir: Path, tree: str, version: str, title: str, apis: tuple[str, ...], body: str = "") -> Localization:
    source = LocalTree(fixtures_dir / tree, "pytorch", version)
    issue = Issue(repo="pytorch/pytorch", number=1, title=title, body=body)
    env = Environment(framework="pytorch", version=version)
    return localize_gcrde(issue, Extraction(snippet=None, traceback=None, apis=apis, environment=env), source, top=5)


def paths(loc: Localization) -> list[str]:
    return [s.path for s in loc.suspects]


@pytest.mark.parametrize("tree,version", [("legacy_tree_0_4", "0.4.0"), ("legacy_tree_1_4", "1.4.0")])
def test_cuda_rshift_is_the_generic_thc_definition_with_its_own_float_math(fixtures_dir: Path, tree: str,
                                                                            version: str) -> None:
    loc = locate(fixtures_dir, tree, version, "Weird bug when using __rshift__() on cuda tensors",
                 ("torch.Tensor.__rshift__",), "CUDA tensor: rshift multiplies; the CPU result is as expected")
    assert loc.outcome is Outcome.LOCATED
    top = loc.suspects[0]
    assert top.path == THC + "generic/THCTensorMathPairwise.cu" and top.side is Side.CUDA
    assert "TH*Tensor_(rshift)" in top.reason and "cname rshift" in top.reason
    # its functor lies beside the definition's own (THC_REAL_IS_FLOAT) math, so it ranks below it
    functor = loc.suspects[paths(loc).index(THC + "THCTensorMathPairwise.cu")]
    assert "TensorRShiftConstantOp" in functor.reason and "beside its own math" in functor.reason


def test_release_1_4_binds_rshift_to_thc_on_cuda_only(fixtures_dir: Path) -> None:
    cuda = locate(fixtures_dir, "legacy_tree_1_4", "1.4.0", "rshift wrong on cuda", ("torch.Tensor.__rshift__",))
    assert cuda.suspects[0].path == THC + "generic/THCTensorMathPairwise.cu"
    assert "native_functions.yaml CUDA: legacy::cuda::_th_rshift" in cuda.suspects[0].reason
    cpu = locate(fixtures_dir, "legacy_tree_1_4", "1.4.0", "rshift wrong on CPU", ("torch.Tensor.__rshift__",),
                 "The CPU result is wrong, it works on GPU.")
    assert cpu.suspects[0].path == "aten/src/ATen/native/cpu/BinaryOpsKernel.cpp"  # CPU: __rshift__ is native
    assert not any(p.startswith("aten/src/TH/") for p in paths(cpu))  # no TH rshift on CPU in this release


@pytest.mark.parametrize("tree,version", [("legacy_tree_0_4", "0.4.0"), ("legacy_tree_1_4", "1.4.0")])
def test_cuda_max_ignoring_nan_is_the_reduce_functor(fixtures_dir: Path, tree: str, version: str) -> None:
    loc = locate(fixtures_dir, tree, version, '"torch.max" ignores "nan" in cuda case', ("torch.max",))
    got = paths(loc)
    # THCTensor_(maxall) only hands ReduceMax to THC_reduceAll: the functor's header is where the math is
    assert got[0] == THC + "THCTensorMathReduce.cuh" and "ReduceMax" in loc.suspects[0].reason
    assert "the math it only hands to the launcher" in loc.suspects[0].reason
    assert got[1] == THC + "generic/THCTensorMathReduce.cu" and "maxall" in loc.suspects[1].reason


def test_a_cpu_side_report_puts_the_th_definition_first(fixtures_dir: Path) -> None:
    loc = locate(fixtures_dir, "legacy_tree_0_4", "0.4.0", "torch.max returns a wrong value on CPU",
                 ("torch.max",), "The CPU result is wrong; it works on GPU.")
    assert loc.suspects[0].path == "aten/src/TH/generic/THTensorMath.c" and loc.suspects[0].side is Side.CPU
    assert "TH*Tensor_(maxall)" in loc.suspects[0].reason


def test_nn_losses_reach_thcunn_through_nn_yaml(fixtures_dir: Path) -> None:
    loc = locate(fixtures_dir, "legacy_tree_0_4", "0.4.0", "BCELoss differs between CPU and GPU", ("torch.nn.BCELoss",),
                 "the CUDA loss is wrong")
    got = paths(loc)
    assert set(got[:2]) == {"aten/src/THCUNN/BCECriterion.cu", "aten/src/THCUNN/generic/BCECriterion.cu"}
    generic = loc.suspects[got.index("aten/src/THCUNN/generic/BCECriterion.cu")]
    assert "THNN_(BCECriterion_updateOutput)" in generic.reason and "nn.yaml binary_cross_entropy" in generic.reason
    assert "bce_functor" in loc.suspects[got.index("aten/src/THCUNN/BCECriterion.cu")].reason
    mlm = locate(fixtures_dir, "legacy_tree_1_4", "1.4.0", "MultiLabelMarginLoss differs on GPU",
                 ("torch.nn.MultiLabelMarginLoss",))
    assert mlm.suspects[0].path == "aten/src/THCUNN/generic/MultiLabelMarginCriterion.cu"
    assert "legacy::cuda::_thnn_multilabel_margin_loss_forward" in mlm.suspects[0].reason
    assert not any(p.startswith("aten/src/THNN/") for p in paths(mlm))  # CPU: a native kernel in 1.4


def test_backends_keep_a_cpu_only_th_op_off_the_cuda_files(fixtures_dir: Path) -> None:
    """0.4 bound histc for CPU only (backends: [CPU]); 1.4 dispatched CPU to TH and CUDA to a native kernel."""
    old = locate(fixtures_dir, "legacy_tree_0_4", "0.4.0", "histc on cuda differs", ("torch.histc",))
    assert not any(p.startswith(THC) for p in paths(old))
    cuda = locate(fixtures_dir, "legacy_tree_1_4", "1.4.0", "histc cuda wrong", ("torch.histc",))
    assert cuda.suspects[0].path == "aten/src/ATen/native/cuda/SummaryOps.cu"
    cpu = locate(fixtures_dir, "legacy_tree_1_4", "1.4.0", "histc CPU wrong", ("torch.histc",),
                 "The CPU result is wrong; it works on GPU.")
    assert cpu.suspects[0].path == "aten/src/TH/generic/THTensorMoreMath.cpp"
    assert "legacy::cpu::_th_histc" in cpu.suspects[0].reason


def test_modern_layout_gets_no_legacy_evidence(fixtures_dir: Path) -> None:
    loc = locate(fixtures_dir, "sources/mini_pytorch", "2.6.0", "histc wrong on GPU", ("torch.histc",))
    assert loc.outcome is Outcome.LOCATED
    assert not any("TH*Tensor_" in s.reason or "THNN_(" in s.reason for s in loc.suspects)
