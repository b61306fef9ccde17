"""A --source-root tree composed of a release's wheel files over another release's C++ (linked), read as the cache's wheel-over-tree source."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from sftl.sources import (
    LayeredSource,
    LocalTree,
    ReleaseFiles,
    open_local_tree,
    tree_cxx_release,
    tree_python_release,
)
from sftl.sources.inventory import library_named_paths, named_paths

KERNEL = "aten/src/ATen/native/cuda/SortingKthValue.cu"


def debian_tree(root: Path, version_txt: str = "1.13.0a0") -> Path:
    """A small PyTorch checkout: version.txt, a kernel, native_functions.yaml, its own Python file."""
    (root / "aten/src/ATen/native/cuda").mkdir(parents=True)
    (root / KERNEL).write_text("__global__ void kthvalue_kernel() {}\n", encoding="utf-8")
    (root / "aten/src/ATen/native/native_functions.yaml").write_text("- func: kthvalue(Tensor self) -> Tensor\n",
                                                                       encoding="utf-8")
    (root / "c10/core").mkdir(parents=True)
    (root / "c10/core/TensorImpl.cpp").write_text("// c10\n", encoding="utf-8")
    (root / "torch/csrc").mkdir(parents=True)
    (root / "torch/csrc/Module.cpp").write_text("// csrc\n", encoding="utf-8")
    (root / "torch/nn").mkdir(parents=True)
    (root / "torch/nn/functional.py").write_text("# the tree's own 1.13 Python\n", encoding="utf-8")
    (root / "version.txt").write_text(version_txt + "\n", encoding="utf-8")
    return root


def composite(root: Path, tree: Path, python_version: str = "1.9.0+cu102") -> Path:
    """What the evaluator hands sftl: the wheel's Python files, the tree's C++ folders linked in."""
    (root / "torch/nn").mkdir(parents=True)
    (root / "torch/version.py").write_text(f"__version__ = '{python_version}'\ndebug = False\n", encoding="utf-8")
    (root / "torch/nn/functional.py").write_text("def kthvalue(): pass  # the wheel's 1.9 Python\n", encoding="utf-8")
    for rel in ("aten", "c10", "torch/csrc"):
        (root / rel).symlink_to(tree / rel, target_is_directory=True)
    return root


def test_a_tree_lists_the_files_of_its_linked_folders_and_survives_a_link_loop(tmp_path: Path) -> None:
    tree = debian_tree(tmp_path / "debian")
    comp = composite(tmp_path / "comp", tree)
    (comp / "torch/nn/loop").symlink_to(comp / "torch", target_is_directory=True)  # a link back up the tree
    files = LocalTree(comp, "pytorch", "1.9.0").list_files()
    assert KERNEL in files and "c10/core/TensorImpl.cpp" in files and "torch/csrc/Module.cpp" in files
    assert files.count("torch/nn/functional.py") == 1
    assert not any(p.startswith("torch/nn/loop/") for p in files)
    assert LocalTree(comp, "pytorch").read_text(KERNEL) == "__global__ void kthvalue_kernel() {}\n"


def test_the_releases_of_a_composed_tree_are_read_from_version_py_and_the_linked_trees_version_txt(
        tmp_path: Path) -> None:
    tree = debian_tree(tmp_path / "debian")
    comp = composite(tmp_path / "comp", tree)
    assert tree_python_release(LocalTree(comp, "pytorch")) == "1.9.0+cu102"
    assert tree_cxx_release(LocalTree(comp, "pytorch")) == "1.13.0"  # through the link: comp has no version.txt
    assert tree_cxx_release(LocalTree(tree, "pytorch")) == "1.13.0"
    assert tree_python_release(LocalTree(tree, "pytorch")) is None  # a checkout that was not built


def test_a_tree_mixing_two_releases_is_layered_like_the_caches_wheel_over_tree(tmp_path: Path) -> None:
    from sftl.localize.gcrde.release import tree_release_of
    from sftl.localize.legacy import postdates_release, report_layers

    tree = debian_tree(tmp_path / "debian")
    comp = composite(tmp_path / "comp", tree)
    source = open_local_tree(comp, "pytorch", "1.9.0", cache_dir=tmp_path / "cache")
    assert isinstance(source, LayeredSource)
    assert source.version == "1.9.0" and source.era_release is None
    assert source.read_text("torch/nn/functional.py") == "def kthvalue(): pass  # the wheel's 1.9 Python\n"
    assert source.release_of("torch/nn/functional.py") == "1.9.0"
    assert source.release_of(KERNEL) == "1.13.0"
    assert sorted(set(source.releases()), key=str) == ["1.13.0", "1.9.0"]
    own = report_layers(source)
    assert isinstance(own[0], ReleaseFiles) and KERNEL not in own[0].list_files()
    # 1.9.0 still had TH/THC: its header declarations from the bundled index are a layer of its release too
    assert [type(p).__name__ for p in own[1:]] == ["DeclaredHeaders"] and KERNEL not in own[1].list_files()
    assert postdates_release(source, KERNEL) == "1.13.0"  # the report's release holds no text of it
    assert tree_release_of(source) == "1.13.0"  # gcrde's release-aware ranking sees a tree of another release
    assert "1.9.0+cu102" in source.description and "1.13.0" in source.description


def test_a_report_of_a_nightly_reads_the_trees_python_files_as_its_era(tmp_path: Path) -> None:
    comp = composite(tmp_path / "comp", debian_tree(tmp_path / "debian"))
    source = open_local_tree(comp, "pytorch", "1.10.0.dev20210525")
    assert isinstance(source, LayeredSource)
    assert source.version == "1.10.0.dev20210525" and source.era_release == "1.9.0+cu102"
    assert source.release_of("torch/nn/functional.py") == "1.9.0+cu102"


def test_a_tree_of_one_release_stays_a_local_tree_at_the_reports_version(tmp_path: Path) -> None:
    tree = debian_tree(tmp_path / "debian")
    plain = open_local_tree(tree, "pytorch", "1.13.1")
    assert isinstance(plain, LocalTree) and plain.version == "1.13.1"
    same = open_local_tree(composite(tmp_path / "comp", tree, "1.13.0+cu117"), "pytorch", "1.13.0")
    assert isinstance(same, LocalTree) and same.version == "1.13.0"
    # a report naming no version: the release the tree's Python package names
    unnamed = open_local_tree(composite(tmp_path / "comp2", tree, "1.13.0+cu117"), "pytorch", None)
    assert unnamed.version == "1.13.0+cu117"
    tf = tmp_path / "tf/tensorflow/python"
    tf.mkdir(parents=True)
    (tf / "ops.py").write_text("x = 1\n", encoding="utf-8")
    assert isinstance(open_local_tree(tmp_path / "tf", "tensorflow", "2.4.0"), LocalTree)


def test_the_pipeline_reads_a_source_root_as_a_layered_tree(tmp_path: Path) -> None:
    from sftl.config import load_settings
    from sftl.extract import extract
    from sftl.model import Issue
    from sftl.sources import sources_for_report

    comp = composite(tmp_path / "comp", debian_tree(tmp_path / "debian"))
    issue = Issue(repo="pytorch/pytorch", number=1, title="kthvalue wrong on CUDA",
                  body="```python\nimport torch\nx = torch.rand(5).cuda()\nprint(x.kthvalue(2))\n```\n"
                       "PyTorch version: 1.9.0\n", created_at="2021-07-01T00:00:00Z")
    settings = load_settings({"SFTL_HOME": str(tmp_path / "home")})
    source = sources_for_report(extract(issue), settings, source_root=comp, offline=True, needs_cxx=True).provider
    assert isinstance(source, LayeredSource) and source.release_of(KERNEL) == "1.13.0"


def gcc_library(tmp: Path, named: str, name: str) -> Path:
    """A real shared library compiled from `../<named>` in a build folder (its checks keep __FILE__)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    src = tmp / "repo" / named
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text('#include <stdio.h>\nint check(int i) { if (i < 0) fprintf(stderr, "%s:%d\\n", __FILE__, '
                   '__LINE__); return i; }\n', encoding="utf-8")
    (tmp / "repo/build").mkdir(parents=True, exist_ok=True)
    out = tmp / name
    subprocess.run(["gcc", "-x", "c", "-shared", "-fPIC", "-O1", "-o", str(out), f"../{named}"],
                   cwd=tmp / "repo/build", check=True, capture_output=True)
    return out


def test_the_libraries_an_unpacked_wheel_left_in_the_tree_name_the_releases_kernel_files(tmp_path: Path) -> None:
    comp = composite(tmp_path / "comp", debian_tree(tmp_path / "debian"))
    (comp / "torch/lib").mkdir()
    lib = gcc_library(tmp_path / "build", "aten/src/ATen/native/cuda/SortingKthValue.cu", "libtorch_cuda.so")
    shutil.copyfile(lib, comp / "torch/lib/libtorch_cuda.so")
    cache = tmp_path / "cache"
    source = open_local_tree(comp, "pytorch", "1.9.0", cache_dir=cache)
    assert named_paths(source) == frozenset({KERNEL})
    kept = list((cache / "index").glob("named-libraries-*.json"))
    assert len(kept) == 1  # scanned once, kept in the cache
    again = open_local_tree(comp, "pytorch", "1.9.0", cache_dir=cache)
    assert named_paths(again, build=False) == frozenset({KERNEL})
    # a library rebuilt (another size/mtime) is scanned again, never read from a stale entry
    (comp / "torch/lib/libtorch_cuda.so").write_bytes(b"\0../aten/src/ATen/native/cuda/Sorting.cu\0")
    assert library_named_paths([comp / "torch/lib/libtorch_cuda.so"], "pytorch", cache, build=False) is None
    assert library_named_paths([comp / "torch/lib/libtorch_cuda.so"], "pytorch", cache) == frozenset(
        {"aten/src/ATen/native/cuda/Sorting.cu"})


def test_a_tree_without_libraries_names_nothing_and_the_c_layer_of_another_release_is_not_asked(
        tmp_path: Path) -> None:
    tree = debian_tree(tmp_path / "debian")
    (tree / "torch/lib").mkdir()
    (tree / "torch/lib/libtorch_cuda.so").write_bytes(b"\0../aten/src/ATen/native/cuda/Tree.cu\0")
    comp = tmp_path / "comp"
    composite(comp, tree)
    source = open_local_tree(comp, "pytorch", "1.9.0", cache_dir=tmp_path / "cache")
    # the composite's own torch/ holds no libraries; the tree's (1.13) are not the report's release's
    assert named_paths(source, index=False) == frozenset()
    # with no libraries of its own release at hand, sftl's bundled index of 1.9.0 speaks, never the tree's 1.13 build
    indexed = named_paths(source)
    assert indexed and "aten/src/ATen/native/cuda/Tree.cu" not in indexed
    assert named_paths(LocalTree(tmp_path / "debian", "pytorch", "1.13.0")) == frozenset(
        {"aten/src/ATen/native/cuda/Tree.cu"})


def test_a_whole_wheel_unzipped_in_the_tree_is_read_at_repository_paths_its_metadata_hidden(tmp_path: Path) -> None:
    tree = debian_tree(tmp_path / "debian")
    comp = composite(tmp_path / "comp", tree)
    header = comp / "torch/include/ATen/native/cuda/SortingKthValue.cuh"  # the release's header, at its wheel path
    header.parent.mkdir(parents=True)
    header.write_text("// 1.9's header\n", encoding="utf-8")
    yaml = comp / "torchgen/packaged/ATen/native/native_functions.yaml"
    yaml.parent.mkdir(parents=True)
    yaml.write_text("- func: kthvalue(Tensor self, int k) -> Tensor\n", encoding="utf-8")
    (comp / "torch-1.9.0.dist-info").mkdir()
    (comp / "torch-1.9.0.dist-info/RECORD").write_text("torch/include/ATen/native/cuda/SortingKthValue.cuh\n",
                                                       encoding="utf-8")
    source = open_local_tree(comp, "pytorch", "1.9.0")
    assert isinstance(source, LayeredSource)
    files = source.list_files()
    assert "aten/src/ATen/native/cuda/SortingKthValue.cuh" in files
    assert not any(p.startswith(("torch/include/", "torchgen/packaged/", "torch-1.9.0.dist-info/")) for p in files)
    assert source.release_of("aten/src/ATen/native/cuda/SortingKthValue.cuh") == "1.9.0"
    # the tree's C++ (and its yaml) wins, consistent with its kernels; the release's yaml is its own layer's
    assert source.read_text("aten/src/ATen/native/native_functions.yaml") == "- func: kthvalue(Tensor self) -> Tensor\n"
    own = source.layers_at("1.9.0")
    assert any(layer.read_text("aten/src/ATen/native/native_functions.yaml") ==
               "- func: kthvalue(Tensor self, int k) -> Tensor\n" for layer in own)


def test_a_tensorflow_wheel_unzipped_as_the_tree_reads_its_headers_and_tensorflow_core(tmp_path: Path) -> None:
    root = tmp_path / "tf"
    (root / "tensorflow/include/tensorflow/core/kernels").mkdir(parents=True)
    (root / "tensorflow/include/tensorflow/core/kernels/topk_op.h").write_text("// TopK\n", encoding="utf-8")
    (root / "tensorflow_core/python/ops").mkdir(parents=True)
    (root / "tensorflow_core/python/ops/nn_ops.py").write_text("def top_k(): pass\n", encoding="utf-8")
    source = open_local_tree(root, "tensorflow", "2.0.0")
    files = set(source.list_files())
    assert {"tensorflow/core/kernels/topk_op.h", "tensorflow/python/ops/nn_ops.py"} <= files
    assert not any(p.startswith(("tensorflow/include/", "tensorflow_core/")) for p in files)
    assert source.read_text("tensorflow/python/ops/nn_ops.py") == "def top_k(): pass\n"
    assert source.version == "2.0.0"


def test_the_libraries_of_a_tensorflow_core_wheel_unzipped_as_the_tree_are_found_under_its_hidden_folder(
        tmp_path: Path) -> None:
    root = tmp_path / "tf"
    (root / "tensorflow_core/python").mkdir(parents=True)
    (root / "tensorflow_core/python/ops.py").write_text("x = 1\n", encoding="utf-8")
    (root / "tensorflow_core/python/_pywrap_tensorflow_internal.so").write_bytes(
        b"\0tensorflow/core/kernels/non_max_suppression_op.cc\0")
    source = open_local_tree(root, "tensorflow", "2.0.0", cache_dir=tmp_path / "cache")
    assert not any(p.startswith("tensorflow_core/") for p in source.list_files())
    assert named_paths(source) == frozenset({"tensorflow/core/kernels/non_max_suppression_op.cc"})


def test_a_tensorflow_tree_says_its_release_from_its_setup_script_or_its_version_header(tmp_path: Path) -> None:
    wheel_files = tmp_path / "wheel"
    (wheel_files / "tensorflow/tools/pip_package").mkdir(parents=True)
    (wheel_files / "tensorflow/tools/pip_package/setup.py").write_text(
        "import os\n_VERSION = '2.20.0'\nREQUIRED_PACKAGES = []\n", encoding="utf-8")
    assert tree_python_release(LocalTree(wheel_files, "tensorflow")) == "2.20.0"
    assert open_local_tree(wheel_files, "tensorflow").version == "2.20.0"  # a report naming no release reads the tree's
    assert open_local_tree(wheel_files, "tensorflow", "2.19.0").version == "2.19.0"  # the report's own number wins
    checkout = tmp_path / "checkout"
    (checkout / "tensorflow/core/public").mkdir(parents=True)
    (checkout / "tensorflow/core/public/version.h").write_text(
        "#define TF_MAJOR_VERSION 1\n#define TF_MINOR_VERSION 15\n#define TF_PATCH_VERSION 0\n", encoding="utf-8")
    assert tree_python_release(LocalTree(checkout, "tensorflow")) == "1.15.0"
    (checkout / "tensorflow/core/public/version.h").write_text("#define TF_MAJOR_VERSION 1\n", encoding="utf-8")
    assert tree_python_release(LocalTree(checkout, "tensorflow")) is None  # a partial header says nothing


def test_a_th_era_release_without_its_headers_reads_the_declarations_the_bundled_index_keeps(tmp_path: Path) -> None:
    from sftl.localize.gcrde import localize_gcrde
    from sftl.model import Environment, Extraction, Issue
    from sftl.sources.release_index import DeclaredHeaders

    tree = debian_tree(tmp_path / "debian")
    comp = composite(tmp_path / "comp", tree, python_version="1.0.1")
    source = open_local_tree(comp, "pytorch", cache_dir=tmp_path / "cache")
    assert isinstance(source, LayeredSource)
    headers = source.providers[-1]
    assert isinstance(headers, DeclaredHeaders) and headers.version == "1.0.1"
    assert [s.version for s in source.successors] == ["1.1.0"]  # the next indexed release, for op history
    text = source.read_text("aten/src/THC/generic/THCTensorMathReduce.h") or ""
    assert text.startswith("// aten/src/THC/generic/THCTensorMathReduce.h: the declarations of torch 1.0.1's headers "
                           "kept by sftl's bundled release index (not the file's text)")
    assert "THC_API void THCTensor_(max)(void);" in text
    assert "struct ReduceMax {};" in (source.read_text("aten/src/THC/THCTensorMathReduce.cuh") or "")
    # torch 1.0.1 ran max on CUDA in THC (its CUDAFloatType.h binds _th_max): the functor's header ranks first
    issue = Issue(repo="pytorch/pytorch", number=1, title="torch.max gives a wrong value on CUDA",
                  body="The CUDA result is wrong; the CPU one is right.")
    loc = localize_gcrde(issue, Extraction(None, None, Environment(framework="pytorch", version="1.0.1"),
                                           apis=("torch.max",)), source)
    assert loc.suspects[0].path == "aten/src/THC/THCTensorMathReduce.cuh", [s.path for s in loc.suspects[:4]]
    assert "as sftl's bundled release index keeps the release's headers" in loc.suspects[0].reason
    assert "declares TH*Tensor_(max)" in loc.suspects[0].reason
    # a release after the TH era gets no such layer
    later = open_local_tree(composite(tmp_path / "comp2", tree, python_version="1.12.1"), "pytorch",
                            cache_dir=tmp_path / "cache2")
    assert not any(isinstance(p, DeclaredHeaders) for p in getattr(later, "providers", []))
