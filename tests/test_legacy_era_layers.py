"""A newer stand-in tree layered over the report's own wheel: the report release's binding of the op decides."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest

from sftl.config import Settings, load_settings
from sftl.localize.gcrde import localize_gcrde
from sftl.localize.legacy import postdates_release, release_binding, report_layers
from sftl.model import Environment, Extraction, Issue, Localization, Outcome, Side
from sftl.sources import (
    LayeredSource,
    LocalTree,
    SourceProvider,
    WheelSource,
    cached_wheel,
    next_cached_wheel,
    open_source,
    register_tree,
    wheel_cache_dir,
)

PAIRWISE = "aten/src/THC/generic/THCTensorMathPairwise.cu"
SHIFT_CUDA = "aten/src/ATen/native/cuda/BinaryShiftOpsKernels.cu"
RANGE_CUDA = "aten/src/ATen/native/cuda/RangeFactories.cu"


def zip_tree(folder: Path, dest: Path) -> Path:
    """A wheel file holding the fixture folder's files (the real wheel's layout, written for the tests)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(dest, "w") as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(folder).as_posix())
    return dest


WHEELS = {"1.0.1": ("legacy_era_wheel_1_0_1", "torch-1.0.1-cp36-cp36m-manylinux1_x86_64.whl"),
          "1.4.0": ("legacy_era_wheel_1_4", "torch-1.4.0-cp36-cp36m-manylinux1_x86_64.whl")}


def offline_home(tmp_path: Path, fixtures_dir: Path, wheels: tuple[str, ...]) -> Settings:
    """A home with the 1.13 stand-in tree registered and these releases' wheels cached, as an offline user has."""
    s = load_settings({}, home=tmp_path / "home", offline=True)
    tree = tmp_path / "pytorch-1.13.1"
    shutil.copytree(fixtures_dir / "legacy_era_tree_1_13", tree)
    register_tree(s, "pytorch", "1.13.1", tree)
    for version in wheels:
        folder, name = WHEELS[version]
        zip_tree(fixtures_dir / folder, wheel_cache_dir(s, "pytorch", version) / name)
    return s


@pytest.fixture
def settings(tmp_path: Path, fixtures_dir: Path) -> Settings:
    return offline_home(tmp_path, fixtures_dir, ("1.0.1", "1.4.0"))


def locate(source: SourceProvider, title: str, apis: tuple[str, ...], body: str) -> Localization:
    issue = Issue(repo="pytorch/pytorch", number=1, title=title, body=body)
    ex = Extraction(snippet=None, traceback=None, apis=apis, environment=Environment(framework="pytorch"))
    return localize_gcrde(issue, ex, source, top=8)


def rshift_cuda(source: SourceProvider) -> Localization:
    return locate(source, "x >> 1 multiplies on CUDA float tensors", ("torch.Tensor.__rshift__",),
                  "The CUDA result is wrong; the CPU divides correctly.")


def rank(loc: Localization, path: str) -> int:
    return [s.path for s in loc.suspects].index(path) + 1


def test_a_layered_source_says_which_layer_and_release_each_path_comes_from(settings: Settings) -> None:
    src = open_source("pytorch", "1.0.1", settings)
    assert isinstance(src, LayeredSource) and src.version == "1.0.1"
    assert src.releases() == ["1.13.1", "1.0.1"]
    assert src.release_of(SHIFT_CUDA) == "1.13.1" and isinstance(src.layer_of(SHIFT_CUDA), LocalTree)
    assert src.release_of("aten/src/ATen/CUDAFloatType.h") == "1.0.1"
    assert isinstance(src.layer_of("aten/src/ATen/CUDAFloatType.h"), WheelSource)
    assert src.layer_of("aten/src/THC/generic/THCTensorMathPairwise.cu") is None  # no layer holds it
    assert [p.version for p in src.layers_at("1.0.1")] == ["1.0.1"] and src.layers_at("0.4.0") == []
    assert postdates_release(src, SHIFT_CUDA) == "1.13.1"
    assert postdates_release(src, "aten/src/ATen/CUDAFloatType.h") is None
    assert [p.version for p in report_layers(src)] == ["1.0.1"]


def test_thc_bound_op_ranks_the_thc_file_above_the_newer_trees_kernel_and_says_why(settings: Settings) -> None:
    src = open_source("pytorch", "1.0.1", settings)
    assert isinstance(src, LayeredSource) and [p.version for p in src.successors] == ["1.4.0"]  # still THC there
    loc = rshift_cuda(src)
    assert loc.outcome is Outcome.LOCATED
    assert loc.suspects[0].path == PAIRWISE and loc.suspects[0].side is Side.CUDA
    assert "at 1.0.1 CUDA rshift was bound to THC (_th_rshift in CUDAFloatType.h)" in loc.suspects[0].reason
    newer = loc.suspects[rank(loc, SHIFT_CUDA) - 1]
    assert rank(loc, SHIFT_CUDA) > 1  # still listed, below the code the report ran
    assert "the newer tree's (1.13.1) cuda/BinaryShiftOpsKernels.cu postdates it" in newer.reason
    assert "_th_rshift in CUDAFloatType.h" in loc.reason


def test_the_same_report_on_the_newer_tree_alone_keeps_its_native_kernel(settings: Settings, tmp_path: Path) -> None:
    loc = rshift_cuda(LocalTree(tmp_path / "pytorch-1.13.1", "pytorch", "1.13.1"))
    assert loc.suspects[0].path == SHIFT_CUDA
    assert not any("postdates" in s.reason for s in loc.suspects)


def test_layers_of_one_release_are_not_mixed(settings: Settings, tmp_path: Path, fixtures_dir: Path) -> None:
    tree = LocalTree(tmp_path / "pytorch-1.13.1", "pytorch", "1.0.1")  # the tree given as the report's own release
    wheel = WheelSource(zip_tree(fixtures_dir / "legacy_tree_wheel_1_0_1", tmp_path / "w" / "torch-1.0.1-x.whl"),
                        "pytorch", "1.0.1")
    src = LayeredSource([tree, wheel])
    assert report_layers(src) == []
    assert rshift_cuda(src).suspects[0].path == SHIFT_CUDA


def test_an_op_already_native_at_the_report_release_changes_nothing(settings: Settings, tmp_path: Path) -> None:
    title, apis = "arange gives one element more on CUDA", ("torch.arange",)
    body = "With a float step the CUDA arange returns 801 elements, the CPU 800."
    layered = locate(open_source("pytorch", "1.4.0", settings), title, apis, body)
    alone = locate(LocalTree(tmp_path / "pytorch-1.13.1", "pytorch", "1.13.1"), title, apis, body)
    assert layered.suspects[0].path == RANGE_CUDA
    assert [s.path for s in layered.suspects] == [s.path for s in alone.suspects]
    assert [s.score for s in layered.suspects] == [s.score for s in alone.suspects]
    assert not any("postdates" in s.reason for s in layered.suspects)
    assert "at 1.4.0 CUDA arange was already a native kernel (arange_cuda_out in NativeFunctions.h)" in layered.reason


def test_legacy_th_functions_header_of_1_4_binds_rshift_to_thc(settings: Settings) -> None:
    src = open_source("pytorch", "1.4.0", settings)
    loc = rshift_cuda(src)
    assert loc.suspects[0].path == PAIRWISE
    assert "at 1.4.0 CUDA rshift was bound to THC (_th_rshift in LegacyTHFunctionsCUDA.h)" in loc.suspects[0].reason
    assert rank(loc, SHIFT_CUDA) > 1


def test_a_side_the_release_headers_do_not_cover_is_left_alone(settings: Settings, tmp_path: Path) -> None:
    # the 1.0.1 fixture wheel ships CUDAFloatType.h only: nothing says how the CPU ran rshift then
    title, apis = "x >> 1 wrong on CPU", ("torch.Tensor.__rshift__",)
    body = "The CPU result is wrong; it works on GPU."
    layered = locate(open_source("pytorch", "1.0.1", settings), title, apis, body)
    alone = locate(LocalTree(tmp_path / "pytorch-1.13.1", "pytorch", "1.13.1"), title, apis, body)
    assert layered.suspects[0].path == alone.suspects[0].path == "aten/src/ATen/native/cpu/BinaryOpsKernel.cpp"
    assert not any("postdates" in s.reason for s in layered.suspects)


def test_release_binding_reads_the_yaml_dispatch_when_the_layer_ships_one(tmp_path: Path) -> None:
    root = tmp_path / "r"
    yaml = root / "aten/src/ATen/native/native_functions.yaml"
    yaml.parent.mkdir(parents=True)
    yaml.write_text("- func: __rshift__.Scalar(Tensor self, Scalar other) -> Tensor\n  dispatch:\n"
                    "    CPU: __rshift__\n    CUDA: legacy::cuda::_th_rshift\n")
    layer = LocalTree(root, "pytorch", "1.2.0")
    cuda = release_binding("__rshift__", Side.CUDA, [layer])
    cpu = release_binding("__rshift__", Side.CPU, [layer])
    assert cuda is not None and cuda.kind == "th" and cuda.library == "THC" and "legacy::cuda::_th_rshift" in cuda.evidence
    assert cpu is not None and cpu.kind == "native"
    assert release_binding("histc", Side.CUDA, [layer]) is None


ARANGE = ("arange gives one element more on CUDA", ("torch.arange",),
          "With a float step the CUDA arange returns 801 elements, the CPU 800.")


def test_an_op_thc_bound_at_the_report_release_and_after_it_ranks_thc_first(tmp_path: Path, fixtures_dir: Path) -> None:
    # only the report's own wheel is cached: nothing says arange was ported before a fix could land
    src = open_source("pytorch", "1.0.1", offline_home(tmp_path, fixtures_dir, ("1.0.1",)))
    assert isinstance(src, LayeredSource) and src.successors == []
    loc = locate(src, *ARANGE)
    assert loc.suspects[0].path == "aten/src/THC/generic/THCTensorMath.cu"
    assert "at 1.0.1 CUDA arange was bound to THC (_th_arange in CUDAFloatType.h)" in loc.suspects[0].reason
    assert "postdates it" in loc.suspects[rank(loc, RANGE_CUDA) - 1].reason


def test_an_op_the_next_release_computes_natively_keeps_the_newer_trees_kernel(settings: Settings, tmp_path: Path) -> None:
    # 1.0.1 ran arange in THC, but the next cached release (1.4.0) declares arange_cuda_out: the port may predate the fix
    src = open_source("pytorch", "1.0.1", settings)
    assert isinstance(src, LayeredSource) and [p.version for p in src.successors] == ["1.4.0"]
    assert "later release consulted for op history" in src.description
    assert "torch-1.4.0" not in " ".join(src.list_files())  # the later wheel is never read as this source's files
    assert src.read_text("aten/src/ATen/LegacyTHFunctionsCUDA.h") is None
    loc = locate(src, *ARANGE)
    alone = locate(LocalTree(tmp_path / "pytorch-1.13.1", "pytorch", "1.13.1"), *ARANGE)
    assert loc.suspects[0].path == alone.suspects[0].path == RANGE_CUDA
    assert not any("postdates" in s.reason for s in loc.suspects)
    assert ("at 1.0.1 CUDA arange was bound to THC (_th_arange in CUDAFloatType.h), but at 1.4.0 CUDA arange was "
            "already a native kernel (arange_cuda_out in NativeFunctions.h)") in loc.reason


def test_next_cached_wheel_lies_between_the_report_and_the_tree(settings: Settings) -> None:
    assert next_cached_wheel(settings, "pytorch", "1.0.1", "1.13.1") == cached_wheel(settings, "pytorch", "1.4.0")
    assert next_cached_wheel(settings, "pytorch", "1.4.0", "1.13.1") is None
    assert next_cached_wheel(settings, "pytorch", "0.4.0", "1.0.1") is None
    assert next_cached_wheel(settings, "pytorch", "0.4.0") == cached_wheel(settings, "pytorch", "1.0.1")


def test_a_leftover_thc_header_found_only_by_tf_idf_does_not_outrank_the_kernel(tmp_path: Path, fixtures_dir: Path) -> None:
    # the report's wheel binds rshift to THC but ships no THC header declaring it; the newer tree keeps an unrelated
    # THC header that mentions rshift: nothing the binding reached, so nothing moves
    tree = tmp_path / "tree"
    shutil.copytree(fixtures_dir / "legacy_era_tree_1_13", tree)
    (tree / "aten/src/THC").mkdir(parents=True)
    (tree / "aten/src/THC/THCLeftover.cuh").write_text("// rshift: shifts kept for rshift users\n"
                                                       "inline int rshift_bits(int a, int b) { return a >> b; }\n")
    wheel_dir = tmp_path / "wheel"
    header = fixtures_dir / "legacy_era_wheel_1_4/torch/include/ATen/LegacyTHFunctionsCUDA.h"
    (wheel_dir / "torch/include/ATen").mkdir(parents=True)
    shutil.copy(header, wheel_dir / "torch/include/ATen/LegacyTHFunctionsCUDA.h")
    wheel = WheelSource(zip_tree(wheel_dir, tmp_path / "torch-1.4.0-cp36-cp36m-manylinux1_x86_64.whl"), "pytorch")
    src = LayeredSource([LocalTree(tree, "pytorch", "1.13.1"), wheel])
    src.version = "1.4.0"
    loc = rshift_cuda(src)
    assert loc.suspects[0].path == SHIFT_CUDA
    assert "no TH/THC file of the op was found to rank instead" in loc.reason
    assert not any("postdates" in s.reason for s in loc.suspects)


def test_a_release_with_no_wheel_takes_the_nearest_cached_one_as_its_era(settings: Settings) -> None:
    """0.4.x has no wheel on the registry: the cached 1.0.1 wheel stands for its era, never for its own files."""
    src = open_source("pytorch", "0.4.0", settings)
    assert isinstance(src, LayeredSource) and src.version == "0.4.0" and src.era_release == "1.0.1"
    assert "nearest cached wheel torch-1.0.1" in src.description and "standing for 0.4.0's era" in src.description
    assert [p.version for p in report_layers(src)] == ["1.0.1"]
    assert [p.version for p in src.successors] == ["1.4.0"]
    loc = rshift_cuda(src)
    assert loc.suspects[0].path == PAIRWISE
    assert "at 1.0.1 CUDA rshift was bound to THC" in loc.suspects[0].reason
    assert rank(loc, SHIFT_CUDA) > 1


def test_no_era_wheel_when_the_tree_is_nearer(tmp_path: Path, fixtures_dir: Path) -> None:
    s = offline_home(tmp_path, fixtures_dir, ("1.0.1",))
    src = open_source("pytorch", "1.12.0", s)  # 1.13.1 (the tree) is nearer than 1.0.1
    assert isinstance(src, LayeredSource) and src.era_release is None and src.releases() == ["1.13.1"]
    assert report_layers(src) == []
