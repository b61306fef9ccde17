"""The bundled release index: built from a wheel's libraries, exact / neighbouring / unknown releases, the shipped file."""

from __future__ import annotations

import zipfile
from pathlib import Path

from sftl.sources import inventory, release_index


def _wheel(tmp: Path, version: str, paths: list[str]) -> Path:
    w = tmp / f"torch-{version}-cp310-cp310-linux_x86_64.whl"
    with zipfile.ZipFile(w, "w") as zf:
        zf.writestr("torch/lib/libtorch_cuda.so", b"\0".join(b"../" + p.encode() for p in paths) + b"\0")
    return w


def test_built_index_answers_exact_neighbour_and_unknown(tmp_path: Path) -> None:
    entries = []
    for version, paths in [("1.9.0", ["aten/src/ATen/native/cuda/A.cu", "c10/core/X.cpp"]),
                           ("1.11.0", ["aten/src/ATen/native/cuda/B.cu"])]:
        w = _wheel(tmp_path, version, paths)
        named = inventory.wheel_named_paths(w, "pytorch")
        assert named is not None
        stubs = ["sort_stub", "topk_stub"] if version == "1.11.0" else ["topk_stub"]
        entries.append({"framework": "pytorch", "release": version, "paths": sorted(named), "wheel": w.name,
                        "size": w.stat().st_size, "sha256": None,
                        "declarations": {"aten/src/ATen/native/Sorting.h": stubs}})
    out = tmp_path / "index.json.gz"
    release_index.write_index(release_index.build_index(entries, "test", "2026-01-01"), out)
    hit = release_index.indexed_release("pytorch", "1.9.0", out)
    assert hit is not None and hit.exact and hit.paths == {"aten/src/ATen/native/cuda/A.cu"} and hit.gpu_build
    near = release_index.indexed_release("torch", "1.10.0.dev20210601", out)
    assert near is not None and not near.exact and near.release == "1.9.0" and "nearest" in near.origin
    assert release_index.indexed_release("pytorch", "r1.12", out).release == "1.11.0"  # type: ignore[union-attr]
    assert hit.declarations == {"aten/src/ATen/native/Sorting.h": ("topk_stub",)}
    later = release_index.indexed_release("pytorch", "1.11.0", out)
    assert later is not None and later.declarations["aten/src/ATen/native/Sorting.h"] == ("sort_stub", "topk_stub")
    assert release_index.indexed_release("pytorch", "nightly", out) is None
    assert release_index.indexed_release("mxnet", "1.9.0", out) is None


def test_shipped_index_loads_and_holds_its_releases() -> None:
    hit = release_index.indexed_release("pytorch", "1.9.0")
    assert hit is not None and hit.exact and "bundled release index" in hit.origin
    assert any(p.startswith("aten/src/ATen/native/cuda/") for p in hit.paths)
    tf = release_index.indexed_release("tensorflow", "2.0.0")
    assert tf is not None and any(p.startswith("tensorflow/core/kernels/") for p in tf.paths)


def test_named_paths_falls_back_to_the_index_without_a_wheel() -> None:
    class Tree:
        framework = "pytorch"
        version = "1.9.0"

        def library_files(self) -> list[str]:
            return []

    assert inventory.named_paths(Tree()) == release_index.indexed_release("pytorch", "1.9.0").paths  # type: ignore[union-attr]
    assert inventory.named_paths(Tree(), index=False) == frozenset()


def test_the_builder_keeps_the_stubs_a_wheels_native_headers_declare(tmp_path: Path) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_release_index", Path(__file__).parent.parent / "tools" / "build_release_index.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    w = _wheel(tmp_path, "1.6.0", ["aten/src/ATen/native/cuda/Sort.cu"])
    with zipfile.ZipFile(w, "a") as zf:
        zf.writestr("torch/include/ATen/native/Sorting.h", "#pragma once\nDECLARE_DISPATCH(topk_fn, topk_stub);\n")
        zf.writestr("torch/include/ATen/native/Empty.h", "#pragma once\n")
    out = tmp_path / "index.json.gz"
    assert tool.main(["--scan", "-o", str(out), str(tmp_path)]) == 0
    hit = release_index.indexed_release("pytorch", "1.6.0", out)
    assert hit is not None and hit.paths == {"aten/src/ATen/native/cuda/Sort.cu"}
    assert hit.declarations == {"aten/src/ATen/native/Sorting.h": ("topk_stub",)}  # a header declaring none is left out


def test_the_th_era_headers_are_written_back_from_their_declarations_and_never_past_the_era() -> None:
    old = release_index.declared_headers("pytorch", "1.0.1")
    assert old is not None and old.declarations_only and old.version == "1.0.1"
    assert "aten/src/ATen/CUDAFloatType.h" in old.list_files()
    assert "Tensor _th_max(const Tensor & self);" in (old.read_text("aten/src/ATen/CUDAFloatType.h") or "")
    assert old.read_text("aten/src/ATen/native/cuda/Reduce.cuh") is None  # not kept: not held
    stand_in = release_index.declared_headers("pytorch", "1.0.0")  # before the first indexed release
    assert stand_in is not None and "standing for 1.0.0" in stand_in.description
    after = release_index.declared_headers_after("pytorch", "1.0.1")
    assert after is not None and after.version == "1.1.0"
    assert release_index.declared_headers("pytorch", "2.4.0") is None
    assert release_index.declared_headers("tensorflow", "2.4.0") is None
