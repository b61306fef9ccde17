"""The report's release's own kernel files against a tree of another release: a real gcc-built library in a wheel names them."""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from sftl.localize.gcrde import localize_gcrde
from sftl.model import Environment, Extraction, Issue, Localization
from sftl.sources import LayeredSource, LocalTree, PythonFilesOf, WheelSource
from sftl.sources.inventory import release_named

NATIVE = "aten/src/ATen/native/"
# what TORCH_CHECK compiles in: the file's own path and the paths of the files whose checks were linked beside it
C_SOURCE = r"""
#include <stdio.h>
static const char *messages[] = {"Exception raised from launch at " __FILE__ ":12", PATHS};
int check(int i) { return puts(messages[i]); }
"""


def library(tmp: Path, named: list[str]) -> bytes:
    """A real shared library whose strings name `named` (as ../aten/... paths, the way a CMake build keeps them)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    src = tmp / "repo" / "aten/src/ATen/native/cuda/Loss.cu"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(C_SOURCE.replace("PATHS", ", ".join(json.dumps(f"at ../{p}:7") for p in named)), encoding="utf-8")
    build = tmp / "repo" / "build"
    build.mkdir()
    out = tmp / "libtorch_cuda.so"
    subprocess.run(["gcc", "-x", "c", "-shared", "-fPIC", "-O1", "-o", str(out), "../aten/src/ATen/native/cuda/Loss.cu"],
                   cwd=build, check=True, capture_output=True)
    return out.read_bytes()


def release_source(tmp: Path, fixtures_dir: Path, named: list[str], version: str = "1.6.0") -> LayeredSource:
    """The pipeline's layering for a report whose wheel carries no C++: its Python files, the nearest tree, the wheel."""
    folder = tmp / "wheels" / f"pytorch-{version}"
    folder.mkdir(parents=True)
    wheel = folder / f"torch-{version}-cp38-cp38-manylinux1_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("torch/__init__.py", f"__version__ = '{version}'\n")
        zf.writestr("torch/lib/libtorch_cuda.so", library(tmp, named))
    tree = LocalTree(fixtures_dir / "gcrde_roles", "pytorch", "2.6.0")
    own = WheelSource(wheel, "pytorch", version)
    layered = LayeredSource([PythonFilesOf(own), tree, own])
    layered.version = version
    return layered


def locate(source: object, title: str, apis: tuple[str, ...]) -> Localization:
    issue = Issue(repo="pytorch/pytorch", number=1, title=title, body="")
    ex = Extraction(None, None, Environment(framework="pytorch", version="1.6.0"), apis=apis)
    return localize_gcrde(issue, ex, source)  # type: ignore[arg-type]


def short(loc: Localization) -> list[str]:
    return [s.path.removeprefix(NATIVE) for s in loc.suspects]


# the fixture tree's other CUDA files, which the release also had: enough of the folder named to judge
OTHERS = [NATIVE + "cuda/" + f for f in ("SummaryOps.cu", "ZetaKernel.cu", "UnaryOpsKernel.cu", "ReduceSumProdKernel.cu",
                                         "jit_utils.cpp")]


def test_a_kernel_file_only_the_release_had_ranks_first_when_named_after_the_op(tmp_path: Path,
                                                                                fixtures_dir: Path) -> None:
    # the release computed topk in cuda/SortingTopK.cu; its libraries name neither of the tree's TensorTopK files
    source = release_source(tmp_path, fixtures_dir, [NATIVE + "cuda/SortingTopK.cu", *OTHERS])
    loc = locate(source, "topk returns wrong values on CUDA", ("torch.topk",))
    got = short(loc)
    assert got[0] == "cuda/SortingTopK.cu"
    top = loc.suspects[0]
    assert "named by the compiled libraries of 1.6.0 " in top.reason and "not at hand" in top.reason
    assert "cuda/TensorTopK" in top.reason  # the tree's file it stands for
    assert "only 1.6.0 had" in loc.reason


def test_a_release_file_sharing_the_stem_of_the_ops_wrapper_stands_for_it(tmp_path: Path, fixtures_dir: Path) -> None:
    # cumsum lived in cuda/ScanKernels.cu; the tree split it into ScanKernels.cpp and CumsumKernel.cu, neither named
    source = release_source(tmp_path, fixtures_dir, [NATIVE + "cuda/ScanKernels.cu", NATIVE + "cuda/TensorTopK.cu",
                                                     NATIVE + "cuda/TensorTopK.cpp", *OTHERS])
    got = short(locate(source, "cumsum gives incorrect output for large tensors on CUDA", ("torch.cumsum",)))
    assert got.index("cuda/ScanKernels.cu") < got.index("cuda/ScanKernels.cpp")
    # the tree's split-off kernel, which the release does not name, ranks below the release's own file
    assert got.index("cuda/ScanKernels.cu") < got.index("cuda/CumsumKernel.cu")


def test_files_the_release_has_beside_the_trees_are_no_replacement(tmp_path: Path, fixtures_dir: Path) -> None:
    # a release (newer than the tree, say) naming the tree's topk files and one more: the tree's own file stands
    source = release_source(tmp_path, fixtures_dir, [NATIVE + "cuda/TensorTopK.cu", NATIVE + "cuda/TensorTopK.cpp",
                                                     NATIVE + "cuda/TensorTopKUtils.cu", *OTHERS])
    loc = locate(source, "topk returns wrong values on CUDA", ("torch.topk",))
    assert short(loc)[0] == "cuda/TensorTopK.cu"
    assert "cuda/TensorTopKUtils.cu" not in short(loc) and "only 1.6.0 had" not in loc.reason


def test_a_tree_of_the_reports_own_release_is_left_alone(fixtures_dir: Path) -> None:
    tree = LocalTree(fixtures_dir / "gcrde_roles", "pytorch", "2.6.0")
    assert "bundled release index" in release_named(tree)[1]  # no wheel at hand: the index's nearest release
    loc = locate(tree, "topk returns wrong values on CUDA", ("torch.topk",))
    assert short(loc)[0] == "cuda/TensorTopK.cu" and "compiled libraries" not in loc.reason


def test_a_nightly_reads_the_wheel_of_its_release_number(tmp_path: Path, fixtures_dir: Path) -> None:
    source = release_source(tmp_path, fixtures_dir, [NATIVE + "cuda/SortingTopK.cu", *OTHERS])
    source.version = "1.6.0.dev20200601"  # no wheel of the nightly itself: the 1.6.0 wheel stands for it
    named, release = release_named(source)
    assert NATIVE + "cuda/SortingTopK.cu" in named and release == "1.6.0 (standing for 1.6.0.dev20200601)"
    assert short(locate(source, "topk returns wrong values on CUDA", ("torch.topk",)))[0] == "cuda/SortingTopK.cu"
    reason = locate(source, "topk returns wrong values on CUDA", ("torch.topk",)).suspects[0].reason
    assert "compiled libraries of 1.6.0 (its wheel standing for 1.6.0.dev20200601)" in reason


def stub_source(tmp: Path, fixtures_dir: Path, release_header: str) -> LayeredSource:
    """The fixture tree with Sorting.h declaring topk_stub, under a 1.6.0 wheel whose own Sorting.h is `release_header`."""
    root = tmp / "tree"
    shutil.copytree(fixtures_dir / "gcrde_roles", root)
    (root / NATIVE / "Sorting.h").write_text("#pragma once\nusing topk_fn = void(*)(const TensorBase&, int64_t);\n"
                                             "DECLARE_DISPATCH(topk_fn, topk_stub);\n", encoding="utf-8")
    wheel = tmp / "torch-1.6.0-cp38-cp38-manylinux1_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("torch/__init__.py", "__version__ = '1.6.0'\n")
        zf.writestr("torch/include/ATen/native/Sorting.h", release_header)
    own = WheelSource(wheel, "pytorch", "1.6.0")
    layered = LayeredSource([PythonFilesOf(own), LocalTree(root, "pytorch", "2.6.0"), own])
    layered.version = "1.6.0"
    return layered


def test_a_file_reached_through_a_stub_the_release_did_not_declare_ranks_below_the_ops_kernel(
        tmp_path: Path, fixtures_dir: Path) -> None:
    # 1.6.0's Sorting.h declares another stub, not topk_stub: its topk ran in Sorting.cpp's topk_cpu itself
    old = stub_source(tmp_path / "old", fixtures_dir, "#pragma once\nDECLARE_DISPATCH(sort_fn, sort_stub);\n")
    loc = locate(old, "topk returns wrong values on CPU", ("torch.topk",))
    got = short(loc)
    assert got.index("Sorting.cpp") < got.index("cpu/SortingKernel.cpp")
    moved = loc.suspects[got.index("cpu/SortingKernel.cpp")]
    assert "topk_stub, which 1.6.0's own headers do not declare" in moved.reason
    # the release declaring the stub: the registered CPU kernel keeps its place above the wrapper calling it
    new = stub_source(tmp_path / "new", fixtures_dir, "#pragma once\nDECLARE_DISPATCH(topk_fn, topk_stub);\n")
    got = short(locate(new, "topk returns wrong values on CPU", ("torch.topk",)))
    assert got.index("cpu/SortingKernel.cpp") < got.index("Sorting.cpp")


def index_stub_source(tmp: Path, fixtures_dir: Path, version: str) -> LayeredSource:
    """A Python-files tree of `version` (no wheel, no libraries: what a --source-root gives) over the fixture tree,
    whose topk kernel calls sort_stub, declared in Sorting.h and registered by cpu/SortingKernel.cpp."""
    root = tmp / "tree"
    shutil.copytree(fixtures_dir / "gcrde_roles", root)
    for rel in ("Sorting.cpp", "cpu/SortingKernel.cpp"):
        path = root / NATIVE / rel
        path.write_text(path.read_text(encoding="utf-8").replace("topk_stub", "sort_stub"), encoding="utf-8")
    (root / NATIVE / "Sorting.h").write_text("#pragma once\nDECLARE_DISPATCH(sort_fn, sort_stub);\n"
                                             "DECLARE_DISPATCH(topk_fn, topk_stub);\n", encoding="utf-8")
    python = tmp / "python"
    (python / "torch").mkdir(parents=True)
    (python / "torch/version.py").write_text(f"__version__ = '{version}'\n", encoding="utf-8")
    layered = LayeredSource([LocalTree(python, "pytorch", version), LocalTree(root, "pytorch", "2.6.0")])
    layered.version = version
    return layered


def test_without_the_releases_headers_the_bundled_index_says_which_stubs_it_declared(
        tmp_path: Path, fixtures_dir: Path) -> None:
    # torch 1.6.0's Sorting.h declared topk_stub only (sort_stub came in 1.7.0): a fact the shipped index keeps
    old = locate(index_stub_source(tmp_path / "old", fixtures_dir, "1.6.0"), "topk returns wrong values on CPU",
                 ("torch.topk",))
    got = short(old)
    assert got.index("Sorting.cpp") < got.index("cpu/SortingKernel.cpp")
    moved = old.suspects[got.index("cpu/SortingKernel.cpp")]
    assert "sort_stub, which 1.6.0's headers (torch 1.6.0's libraries (sftl's bundled release index)) do not declare" \
        in moved.reason
    new = short(locate(index_stub_source(tmp_path / "new", fixtures_dir, "1.7.0"), "topk returns wrong values on CPU",
                       ("torch.topk",)))
    assert new.index("cpu/SortingKernel.cpp") < new.index("Sorting.cpp")
