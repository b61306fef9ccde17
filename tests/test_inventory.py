"""The source files a wheel's compiled libraries name: real shared libraries built with gcc, packed as wheels."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from sftl.sources import LayeredSource, LocalTree, PythonFilesOf, WheelSource
from sftl.sources.inventory import CACHE_NAME, cache_path, named_paths, scan_stream, wheel_named_paths

# a check of the kind TORCH_CHECK / TensorFlow's CHECK compile in: the file's own __FILE__ and a message naming it
C_SOURCE = r"""
#include <stdio.h>
#define STR2(x) #x
#define STR(x) STR2(x)
static const char *messages[] = {
    "Exception raised from launch_kernel at " __FILE__ ":" STR(__LINE__) " (most recent call first):",
    EXTRA
};
int check(int i) {
    if (i < 0) fprintf(stderr, "%s:%d: check failed\n", __FILE__, __LINE__);
    return puts(messages[i > 0]);
}
"""


def build_library(tmp: Path, relative_source: str, extra: list[str], name: str) -> Path:
    """A real shared library compiled from `../<relative_source>` (a build folder beside the tree, as CMake does)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    src = tmp / "repo" / relative_source
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(C_SOURCE.replace("EXTRA", ", ".join(json.dumps(e) for e in extra) or '""'), encoding="utf-8")
    build = tmp / "repo" / "build"
    build.mkdir(parents=True, exist_ok=True)
    out = tmp / name
    subprocess.run(["gcc", "-x", "c", "-shared", "-fPIC", "-O1", "-o", str(out), f"../{relative_source}"],
                   cwd=build, check=True, capture_output=True)
    return out


def pack_wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


@pytest.fixture
def torch_lib(tmp_path: Path) -> bytes:
    lib = build_library(tmp_path, "aten/src/ATen/native/cuda/SortingKthValue.cu", [
        "at ../aten/src/ATen/native/cuda/ScanKernels.cu:120",
        "/pytorch/c10/cuda/CUDACachingAllocator.cpp",
        "aten/src/ATen/native/cuda/Loss.cu",  # named bare here, but with ../ too: the repository's file
        "../aten/src/ATen/native/cuda/Loss.cu",
        "aten/src/ATen/RegisterCUDA.cpp",  # only bare, in a build naming its sources ../: the build wrote it
        "/pytorch/build/aten/src/ATen/RegisterCPU.cpp",  # generated in the build folder: not a repository file
        "../torch/csrc/autograd/generated/Functions.cpp",  # generated too
        "see https://github.com/pytorch/pytorch/blob/master/aten/src/ATen/native/cuda/Reduce.cuh",  # a link
        "libmyaten/src/x.cpp",  # an anchor inside a longer name
        "../aten/src/ATen/native/cuda/README",  # not a source file
    ], "libtorch_cuda.so")
    return lib.read_bytes()


@pytest.fixture
def torch_wheel(tmp_path: Path, torch_lib: bytes) -> Path:
    folder = tmp_path / "wheels" / "pytorch-1.6.0"
    folder.mkdir(parents=True)
    return pack_wheel(folder / "torch-1.6.0-cp38-cp38-manylinux1_x86_64.whl", {
        "torch/__init__.py": b"__version__ = '1.6.0'\n",
        "torch/lib/libtorch_cuda.so": torch_lib,
        "torch/nn/functional.py": b"# aten/src/ATen/native/cuda/NotALibrary.cu is named in Python, not in a library\n",
    })


TORCH_NAMED = {
    "aten/src/ATen/native/cuda/SortingKthValue.cu",
    "aten/src/ATen/native/cuda/ScanKernels.cu",
    "aten/src/ATen/native/cuda/Loss.cu",
    "c10/cuda/CUDACachingAllocator.cpp",
}


def test_a_compiled_library_names_its_own_file_and_the_files_its_messages_name(torch_wheel: Path) -> None:
    assert wheel_named_paths(torch_wheel, "pytorch") == TORCH_NAMED


def test_paths_cut_by_a_chunk_boundary_are_found_whatever_the_chunk_size(torch_lib: bytes) -> None:
    anchors = (b"aten/src/", b"c10/", b"torch/csrc/", b"caffe2/")
    padded = b"\0" * 1500 + torch_lib + b"\0" * 3 + b"../aten/src/ATen/native/cuda/Tail.cu"  # a path at the very end
    whole = scan_stream(io.BytesIO(padded), anchors, chunk=len(padded) + 1)
    # a stream's paths: whether a bare one was the build's own is told for the whole wheel
    assert TORCH_NAMED | {"aten/src/ATen/native/cuda/Tail.cu", "aten/src/ATen/RegisterCUDA.cpp"} == whole
    for chunk in (5, 64, 1000, 1025, 4096):
        assert scan_stream(io.BytesIO(padded), anchors, chunk=chunk) == whole, chunk


def test_the_inventory_is_cached_beside_the_wheel_and_read_by_the_next_process(torch_wheel: Path) -> None:
    assert wheel_named_paths(torch_wheel, "pytorch", build=False) is None  # nothing cached, no scan asked for
    wheel_named_paths(torch_wheel, "pytorch")
    cache = cache_path(torch_wheel)
    assert cache == torch_wheel.parent / CACHE_NAME and cache.is_file()
    entry = json.loads(cache.read_text(encoding="utf-8"))["wheels"][torch_wheel.name]
    assert entry["size"] == torch_wheel.stat().st_size and entry["libraries"] == {"torch/lib/libtorch_cuda.so": 4}
    # a fresh interpreter that may not scan still knows the paths: it read them from the cache
    code = ("import sys; from sftl.sources.inventory import wheel_named_paths as w; "
            f"print(sorted(w({str(torch_wheel)!r}, 'pytorch', build=False) or []))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str(sorted(TORCH_NAMED))


def test_a_replaced_wheel_is_scanned_again(tmp_path: Path, torch_wheel: Path, torch_lib: bytes) -> None:
    wheel_named_paths(torch_wheel, "pytorch")
    other = build_library(tmp_path / "other", "aten/src/ATen/native/cuda/SoftMax.cu", [], "libtorch_cuda.so")
    pack_wheel(torch_wheel, {"torch/lib/libtorch_cuda.so": other.read_bytes(), "torch/lib/libc10.so": torch_lib})
    code = ("from sftl.sources.inventory import wheel_named_paths as w; "
            f"print(sorted(w({str(torch_wheel)!r}, 'pytorch') or []))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str(sorted(TORCH_NAMED | {"aten/src/ATen/native/cuda/SoftMax.cu"}))


def test_tensorflow_paths_keep_their_kernel_subfolders(tmp_path: Path) -> None:
    lib = build_library(tmp_path, "tensorflow/core/kernels/linalg/matrix_solve_op.cc", [
        "external/org_tensorflow/tensorflow/core/kernels/image/non_max_suppression_op.cc",
        "bazel-out/k8-opt/bin/tensorflow/core/kernels/generated_op.cc",  # a build output
        "aten/src/ATen/native/Foo.cpp",  # PyTorch's folders are not TensorFlow's
    ], "libtensorflow_cc.so.2")
    wheel = pack_wheel(tmp_path / "tensorflow_cpu-2.19.0-cp311-cp311-manylinux2014_x86_64.whl",
                       {"tensorflow/libtensorflow_cc.so.2": lib.read_bytes(), "tensorflow/__init__.py": b""})
    assert wheel_named_paths(wheel, "tensorflow") == {
        "tensorflow/core/kernels/linalg/matrix_solve_op.cc",
        "tensorflow/core/kernels/image/non_max_suppression_op.cc",
    }


def test_named_paths_reads_the_reported_releases_wheel_layer_only(tmp_path: Path, torch_wheel: Path) -> None:
    tree_root = tmp_path / "tree-1.13.1"
    (tree_root / "aten/src/ATen/native/cuda").mkdir(parents=True)
    (tree_root / "aten/src/ATen/native/cuda/Sorting.cu").write_text("// 1.13.1\n", encoding="utf-8")
    tree = LocalTree(tree_root, "pytorch", "1.13.1")
    own = WheelSource(torch_wheel, "pytorch", "1.6.0")
    layered = LayeredSource([PythonFilesOf(own), tree, own])
    layered.version = "1.6.0"
    assert named_paths(layered) == TORCH_NAMED
    assert named_paths(own) == TORCH_NAMED
    # a wheel of another release standing for the report's era is not the report's binary
    era = LayeredSource([PythonFilesOf(own), tree, own])
    era.version = "1.5.0"
    assert named_paths(era) == frozenset()
    assert named_paths(tree, index=False) == frozenset()  # no wheel at all (the bundled index aside)


def test_an_unreadable_wheel_names_nothing(tmp_path: Path) -> None:
    broken = tmp_path / "torch-1.6.0-cp38-cp38-manylinux1_x86_64.whl"
    broken.write_bytes(b"PK\x03\x04 not really a zip")
    assert wheel_named_paths(broken, "pytorch") is None
    assert not cache_path(broken).exists()
