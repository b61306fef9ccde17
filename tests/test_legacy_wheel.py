"""A release with no source tree: its wheel's C/C++ headers (TH/THC era) as a partial source, honestly reported."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from sftl.config import load_settings
from sftl.errors import SourceError
from sftl.localize.gcrde import localize_gcrde
from sftl.localize.legacy import HEADERS_ONLY, INFERRED
from sftl.model import Environment, Extraction, Issue, Localization, Outcome, Side
from sftl.sources import WheelSource, nearest_version, open_source, release_at, wheel_cache_dir

WHEEL_101 = "torch-1.0.1-cp36-cp36m-manylinux1_x86_64.whl"


def zip_tree(folder: Path, dest: Path) -> Path:
    """A wheel file holding the fixture folder's files (the layout of the real wheel, written for the tests)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(dest, "w") as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(folder).as_posix())
    return dest


@pytest.fixture
def wheel(tmp_path: Path, fixtures_dir: Path) -> WheelSource:
    return WheelSource(zip_tree(fixtures_dir / "legacy_tree_wheel_1_0_1", tmp_path / WHEEL_101), "pytorch")


def locate(source: object, title: str, apis: tuple[str, ...], body: str = "") -> Localization:
    issue = Issue(repo="pytorch/pytorch", number=1, title=title, body=body)
    extraction = Extraction(snippet=None, traceback=None, apis=apis, environment=Environment(framework="pytorch"))
    return localize_gcrde(issue, extraction, source, top=5)  # type: ignore[arg-type]


def test_old_wheel_headers_map_to_repository_paths(wheel: WheelSource) -> None:
    files = set(wheel.list_files())
    assert {"aten/src/THC/generic/THCTensorMathPairwise.h", "aten/src/THC/THCTensorMathReduce.cuh",
            "aten/src/TH/generic/THTensorMath.h", "aten/src/ATen/CUDAFloatType.h",
            "aten/src/THCUNN/generic/THCUNN.h", "aten/src/THCUNN/SharedMem.cuh", "torch/__init__.py"} <= files
    assert not any(f.startswith("torch/lib/") for f in files)
    assert wheel.version == "1.0.1"


def test_rshift_names_the_implementation_by_thc_convention_and_says_it_was_inferred(wheel: WheelSource) -> None:
    loc = locate(wheel, "Weird bug when using ATen __rshift__() on cuda tensors", ("torch.Tensor.__rshift__",))
    assert loc.outcome is Outcome.LOCATED and HEADERS_ONLY in loc.reason and WHEEL_101 in loc.reason
    top = loc.suspects[0]
    assert top.path == "aten/src/THC/generic/THCTensorMathPairwise.cu" and top.side is Side.CUDA
    assert INFERRED in top.reason and "generic/THCTensorMathPairwise.h declares it" in top.reason
    assert "_th_rshift" in top.reason  # the release's CUDAFloatType.h binds the op to TH


def test_a_functor_read_from_a_shipped_header_leads_an_inferred_file(wheel: WheelSource) -> None:
    loc = locate(wheel, '"torch.max" ignores "nan" in cuda case', ("torch.max", "torch.min"))
    got = [s.path for s in loc.suspects]
    assert got[0] == "aten/src/THC/THCTensorMathReduce.cuh"
    assert "ReduceMax" in loc.suspects[0].reason and "read from the release's header" in loc.suspects[0].reason
    assert got[1] == "aten/src/THC/generic/THCTensorMathReduce.cu" and INFERRED in loc.suspects[1].reason


def test_thcunn_modules_are_inferred_from_thcunn_h(wheel: WheelSource) -> None:
    loc = locate(wheel, "BCELoss differs on GPU", ("torch.nn.BCELoss",), "the CUDA loss is wrong")
    assert loc.suspects[0].path == "aten/src/THCUNN/generic/BCECriterion.cu" and INFERRED in loc.suspects[0].reason


@pytest.mark.parametrize("title,apis", [
    ("rshift on cuda", ("torch.Tensor.__rshift__",)), ("max nan cuda", ("torch.max",)),
    ("BCELoss on GPU", ("torch.nn.BCELoss",)), ("cmax", ("torch.max",)),
])
def test_never_claims_to_have_read_a_file_the_wheel_lacks(wheel: WheelSource, title: str, apis: tuple[str, ...]) -> None:
    files = set(wheel.list_files())
    loc = locate(wheel, title, apis)
    assert loc.suspects
    for s in loc.suspects:
        assert (s.path in files) == (INFERRED not in s.reason), s


def test_a_modern_wheel_without_th_headers_is_still_skipped(tmp_path: Path) -> None:
    whl = tmp_path / "torch-2.1.0-cp311-cp311-manylinux1_x86_64.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        zf.writestr("torch/include/ATen/native/cuda/Loops.cuh", "#pragma once\n")
        zf.writestr("torch/__init__.py", "")
    loc = locate(WheelSource(whl, "pytorch"), "histc wrong on GPU", ("torch.histc",))
    assert loc.outcome is Outcome.SKIPPED and "sftl sources fetch pytorch==2.1.0 --cxx" in loc.reason


def test_release_current_at_a_date() -> None:
    assert release_at("pytorch", "2018-06-04T12:00:00Z") == "0.4.0"
    assert release_at("pytorch", "2019-02-07") == "1.0.1"  # released that day
    assert release_at("pytorch", "2019-02-06") == "1.0.0"
    assert release_at("tensorflow", "2019-11-01T00:00:00Z") == "2.0.0"  # 1.15 came later, but 2.0 is higher
    assert release_at("pytorch", "2016-01-01") is None
    assert release_at("pytorch", "yesterday") is None


def test_nearest_release_follows_release_order_across_majors() -> None:
    assert nearest_version("0.4", ["1.0.1", "1.4.0", "1.8.1"]) == "1.0.1"  # not 1.4.0 for sharing a minor number
    assert nearest_version("2.0.0", ["1.0.1", "1.13.1"]) == "1.13.1"
    assert nearest_version("1.0.1", ["1.13.1", "2.6.0"]) == "1.13.1"


def test_open_source_without_a_version_uses_the_release_of_the_report_date(tmp_path: Path, fixtures_dir: Path) -> None:
    settings = load_settings({}, home=tmp_path / "home", offline=True)
    with pytest.raises(SourceError, match="names no pytorch version"):
        open_source("pytorch", None, settings)
    zip_tree(fixtures_dir / "legacy_tree_wheel_1_0_1",
             wheel_cache_dir(settings, "pytorch", "0.4.0") / "torch-0.4.0-cp36-cp36m-linux_x86_64.whl")
    src = open_source("pytorch", None, settings, created_at="2018-06-04T09:31:00Z")
    assert src.version == "0.4.0"
    assert "the report names no version: 0.4.0 was current on 2018-06-04" in src.description
    loc = locate(src, "rshift on cuda is wrong", ("torch.Tensor.__rshift__",))
    assert loc.suspects[0].path == "aten/src/THC/generic/THCTensorMathPairwise.cu"
    assert "0.4.0 was current on 2018-06-04" in loc.reason


def test_th_names_are_guessed_in_camel_case_too(tmp_path: Path) -> None:
    """index_add_ is THCTensor_(indexAdd): no binding file in a wheel, so the name is guessed from the op."""
    whl = tmp_path / "torch-1.0.1-cp37-cp37m-manylinux1_x86_64.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        zf.writestr("torch/lib/include/THC/generic/THCTensorIndex.h",
                    '#ifndef THC_GENERIC_FILE\n#define THC_GENERIC_FILE "generic/THCTensorIndex.h"\n#else\n\n'
                    "THC_API void THCTensor_(indexAdd)(THCState *state, THCTensor *res_, int dim, "
                    "THCudaLongTensor *indices, THCTensor *src);\n\n#endif\n")
        zf.writestr("torch/__init__.py", "")
    loc = locate(WheelSource(whl, "pytorch"), "index_add_ wrong on cuda", ("torch.Tensor.index_add_",))
    assert loc.suspects[0].path == "aten/src/THC/generic/THCTensorIndex.cu"
    assert "TH*Tensor_(indexAdd)" in loc.suspects[0].reason and "TH name guessed from the op" in loc.suspects[0].reason
