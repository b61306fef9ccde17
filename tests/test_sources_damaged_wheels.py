"""Damaged or hand-placed wheels in the source cache: a clear SourceError, a lost hint, or the cache folder's release, never a crash."""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

import pytest
from test_legacy_era_layers import WHEELS, zip_tree

from sftl.config import Settings, load_settings
from sftl.errors import SourceError
from sftl.localize.gcrde import localize_gcrde
from sftl.model import Environment, Extraction, Issue, Outcome
from sftl.sources import LayeredSource, WheelSource, open_source, register_tree, wheel_cache_dir


def _garble_members(wheel: Path) -> None:
    """Flip bytes inside the members' data, keeping the zip's central directory intact (a bad download/disk)."""
    data = bytearray(wheel.read_bytes())
    for i in range(200, len(data) // 2):
        data[i] ^= 0x5A
    wheel.write_bytes(bytes(data))


def test_a_corrupt_deflate_stream_is_a_source_error_not_a_zlib_traceback(tmp_path: Path) -> None:
    wheel = tmp_path / "torch-1.0.0-cp36-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("torch/include/ATen/Foo.h", "int x;\n" * 5000)
    data = bytearray(wheel.read_bytes())
    for i in range(60, 70):  # inside the deflate stream, past the local header
        data[i] ^= 0xFF
    wheel.write_bytes(bytes(data))
    src = WheelSource(wheel, "pytorch")
    with pytest.raises(SourceError, match="cannot read torch/include/ATen/Foo.h"):
        src.read_text("aten/src/ATen/Foo.h")


def _offline_home(tmp_path: Path, fixtures_dir: Path) -> Settings:
    s = load_settings({}, home=tmp_path / "home", offline=True)
    tree = tmp_path / "pytorch-1.13.1"
    shutil.copytree(fixtures_dir / "legacy_era_tree_1_13", tree)
    register_tree(s, "pytorch", "1.13.1", tree)
    for version, (folder, name) in WHEELS.items():
        zip_tree(fixtures_dir / folder, wheel_cache_dir(s, "pytorch", version) / name)
    return s


def test_a_corrupt_successor_wheel_only_loses_the_op_history_hint(tmp_path: Path, fixtures_dir: Path) -> None:
    s = _offline_home(tmp_path, fixtures_dir)
    _garble_members(next(wheel_cache_dir(s, "pytorch", "1.4.0").glob("*.whl")))
    src = open_source("pytorch", "1.0.1", s)
    issue = Issue(repo="pytorch/pytorch", number=1, title="x >> 1 multiplies on CUDA float tensors",
                  body="The CUDA result is wrong; the CPU divides correctly.")
    ex = Extraction(snippet=None, traceback=None, apis=("torch.Tensor.__rshift__",),
                    environment=Environment(framework="pytorch"))
    loc = localize_gcrde(issue, ex, src, top=5)
    assert loc.outcome is Outcome.LOCATED, loc.reason  # was SKIPPED: "source unavailable: cannot read ... 1.4.0"
    assert loc.suspects[0].path == "aten/src/THC/generic/THCTensorMathPairwise.cu"


def test_a_cached_wheel_without_a_version_in_its_name_takes_its_cache_folders_release(
        tmp_path: Path, fixtures_dir: Path) -> None:
    s = _offline_home(tmp_path, fixtures_dir)
    era = next(wheel_cache_dir(s, "pytorch", "1.0.1").glob("*.whl"))
    era.rename(era.with_name("torch.whl"))  # dropped into the cache by hand
    src = open_source("pytorch", "1.0.0", s)  # no wheel of 1.0.0: 1.0.1's stands for its era
    assert isinstance(src, LayeredSource)
    # was None: the era's binding was never consulted, and the era wheel itself became the "later" release
    assert src.era_release == "1.0.1"
    assert [p.version for p in src.successors] == ["1.4.0"]


@pytest.mark.parametrize("damage", ["zero", "truncated"])
def test_a_broken_wheel_of_the_reports_release_says_how_to_replace_it(
        tmp_path: Path, fixtures_dir: Path, damage: str) -> None:
    s = _offline_home(tmp_path, fixtures_dir)
    wheel = next(wheel_cache_dir(s, "pytorch", "1.0.1").glob("*.whl"))
    data = wheel.read_bytes()
    wheel.write_bytes(b"" if damage == "zero" else data[: len(data) // 2])
    with pytest.raises(SourceError, match=r"cannot open wheel .*; delete it and run `sftl sources fetch pytorch==1.0.1`"):
        open_source("pytorch", "1.0.1", s)
    assert wheel.exists()  # never deleted for the user


def _two_member_wheel(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("torch/nn/functional.py", "def relu(x):\n    return x\n" * 200)
        zf.writestr(zipfile.ZipInfo("torch/version.py"), "__version__ = '1.0.0'\n")  # stored, not deflated
    return path


def test_the_member_table_beside_a_wheel_reads_what_zipfile_reads(tmp_path: Path) -> None:
    wheel = _two_member_wheel(tmp_path / "torch-1.0.0-cp36-none-any.whl")
    first = WheelSource(wheel, "pytorch")
    table = wheel.with_name(WheelSource.TABLE_NAME)
    assert table.is_file()
    again = WheelSource(wheel, "pytorch")  # from the table: no central directory parsed, no zip opened
    assert again._zip is None
    with zipfile.ZipFile(wheel) as zf:
        for repo, member in (("torch/nn/functional.py", "torch/nn/functional.py"), ("torch/version.py", "torch/version.py")):
            assert again.read_text(repo) == first.read_text(repo) == zf.read(member).decode()
    assert again._zip is None and sorted(again.list_files()) == sorted(first.list_files())


def test_a_replaced_wheel_is_listed_anew_and_a_garbled_member_is_a_source_error(tmp_path: Path) -> None:
    wheel = _two_member_wheel(tmp_path / "torch-1.0.0-cp36-none-any.whl")
    WheelSource(wheel, "pytorch")
    with zipfile.ZipFile(wheel, "w") as zf:  # another wheel under the same name: the stale table is not used
        zf.writestr("torch/other.py", "x = 1\n")
    assert WheelSource(wheel, "pytorch").list_files() == ["torch/other.py"]
    wheel = _two_member_wheel(tmp_path / "sub" / "torch-1.0.0-cp36-none-any.whl")
    WheelSource(wheel, "pytorch")  # the table is written
    stamp = wheel.stat()
    data = bytearray(wheel.read_bytes())
    for i in range(60, 70):  # inside the first member's deflate stream
        data[i] ^= 0xFF
    wheel.write_bytes(bytes(data))
    os.utime(wheel, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # same size and mtime: the table stays in use
    src = WheelSource(wheel, "pytorch")
    assert src._zip is None
    with pytest.raises(SourceError, match="cannot read torch/nn/functional.py"):
        src.read_text("torch/nn/functional.py")
