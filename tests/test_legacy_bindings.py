"""TH/THC-era bindings: Declarations.cwrap, nn.yaml and native_functions.yaml's legacy dispatch, read from fixture trees."""

from __future__ import annotations

from pathlib import Path

from sftl.codegraph import native as nat
from sftl.localize.legacy import bindings_for, library, op_aliases, parse_cwrap, parse_nn_yaml, release_tables
from sftl.model import Side
from sftl.sources import LocalTree

T04 = "legacy_tree_0_4"
T14 = "legacy_tree_1_4"


def test_op_aliases_strip_th_prefixes_dunders_and_forward() -> None:
    assert {"max", "_th_max"} <= op_aliases("_th_max")
    assert "rshift" in op_aliases("__rshift__") and "rshift" in op_aliases("__irshift__")
    assert "multilabel_margin_loss" in op_aliases("_thnn_multilabel_margin_loss_forward")
    assert "rshift" in op_aliases("s__th_rshift")


def test_cwrap_blocks_give_cnames_and_backends(fixtures_dir: Path) -> None:
    old = parse_cwrap((fixtures_dir / T04 / "aten/src/ATen/Declarations.cwrap").read_text())
    assert {b.th for b in old["max"]} == {"maxall", "cmax", "max"}
    assert {b.th for b in old["rshift"]} == {"rshift", "crshift"}  # name: __rshift__ answers for rshift too
    histc = old["histc"]
    assert [b.th for b in histc] == ["histc"] and histc[0].sides == {Side.CPU}  # backends: [CPU]
    new = parse_cwrap((fixtures_dir / T14 / "aten/src/ATen/Declarations.cwrap").read_text())
    rshift = new["_th_rshift"]
    assert [b.th for b in rshift] == ["rshift"] and rshift[0].sides == {Side.CUDA}  # top-level cname, CUDA only
    assert {b.th for b in new["max"]} == {"maxall", "max"}
    assert all(b.kind == "tensor" for bs in new.values() for b in bs)


def test_nn_yaml_names_thnn_modules(fixtures_dir: Path) -> None:
    old = parse_nn_yaml((fixtures_dir / T04 / "aten/src/ATen/nn.yaml").read_text())
    assert [b.th for b in old["binary_cross_entropy"]] == ["BCECriterion"] and old["l1_loss"][0].th == "AbsCriterion"
    new = parse_nn_yaml((fixtures_dir / T14 / "aten/src/ATen/nn.yaml").read_text())
    mlm = new["multilabel_margin_loss"]
    assert [(b.th, b.kind) for b in mlm] == [("MultiLabelMarginCriterion", "nn")]
    assert "nn.yaml _thnn_multilabel_margin_loss" in mlm[0].origin


def test_native_yaml_legacy_dispatch_restricts_the_device(fixtures_dir: Path) -> None:
    tree = LocalTree(fixtures_dir / T14, "pytorch", "1.4.0")
    natives = nat.parse_native_functions(tree.read_text(nat.NATIVE_YAML) or "")
    tables, _ = release_tables(tree)
    rshift = bindings_for("__rshift__", tables, natives)  # CPU: __rshift__ (native), CUDA: legacy::cuda::_th_rshift
    assert [(b.th, b.sides) for b in rshift] == [("rshift", {Side.CUDA})]
    histc = bindings_for("histc", tables, natives)  # CPU: legacy::cpu::_th_histc, CUDA: _histc_cuda (native)
    assert [(b.th, b.sides) for b in histc] == [("histc", {Side.CPU})]
    assert {(b.th, frozenset(b.sides)) for b in bindings_for("max", tables, natives)} == {
        ("maxall", frozenset({Side.CPU, Side.CUDA})), ("max", frozenset({Side.CPU, Side.CUDA}))}
    # the module's own name (nn.MultiLabelMarginLoss -> multi_label_margin_loss) reaches the _thnn_ binding
    mlm = bindings_for("multi_label_margin_loss", tables, natives)
    assert [(b.th, b.kind, b.sides) for b in mlm] == [("MultiLabelMarginCriterion", "nn", {Side.CUDA})]
    assert bindings_for("frobnicate", tables, natives) == []


def test_a_dispatch_without_a_readable_binding_file_names_the_function_after_the_op() -> None:
    entry = nat.NativeFunction("lerp", "", {"CPU": "lerp_cpu", "CUDA": "legacy::cuda::_th_lerp"})
    found = bindings_for("lerp", {}, {"lerp": [entry]})
    assert [(b.th, b.sides) for b in found] == [("lerp", {Side.CUDA})]
    assert "legacy::cuda::_th_lerp" in found[0].origin


def test_library_sides() -> None:
    assert library("aten/src/THC/generic/THCTensorMathPairwise.cu") == ("tensor", Side.CUDA)
    assert library("aten/src/TH/generic/THTensorMath.c") == ("tensor", Side.CPU)
    assert library("aten/src/THCUNN/generic/BCECriterion.cu") == ("nn", Side.CUDA)
    assert library("aten/src/THNN/generic/BCECriterion.c") == ("nn", Side.CPU)
    assert library("aten/src/ATen/native/cuda/SummaryOps.cu") is None
