"""Versions as report templates carry them, from the text to the release read: extract keeps the field as
written (`Environment.version_text`), `sftl.releases` reads it, and the source chosen follows; an X.Y line
is served by a cached release of that line."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from sftl.config import load_settings
from sftl.extract import parse_environment
from sftl.model import Environment, Extraction
from sftl.releases import resolve
from sftl.sources import open_source, sources_for_report, wheel_cache_dir

PT, TF = "PyTorch version: ", "- TensorFlow version (use command below): "

# (framework, the template line, filed, version extract reads, ref read offline, words of the reason)
SPELLINGS = [
    ("pytorch", PT + "1.11 era (Apr 2022; linked file at 3f2a9c1e)", "2022-04-20T09:00:00Z", "1.11", "v1.11.0",
     "the newest 1.11.x release out by 2022-04-20"),
    ("tensorflow", TF + "r2.4 (compiled from source)", "2020-10-01T09:00:00Z", "2.4", "v2.4.0",
     "2.4 was not yet released on 2020-10-01 (a pre-release of it); read its first release"),
    ("pytorch", PT + "master (Mar 2019)", "2019-04-10T09:00:00Z", None, "v1.0.1", "the development branch on 2019-03-31"),
    ("pytorch", PT + "main (2024-05-02)", "2024-05-09T09:00:00Z", None, "v2.3.0", "the development branch on 2024-05-02"),
    # two lines: the later one (the newest code known to hold the bug, nearest its fix) unless it was not out yet
    ("pytorch", PT + "1.7/1.8 era (Feb 2021; Python 3.9)", "2021-02-20T09:00:00Z", "1.7", "v1.7.1",
     "1.8 was not yet released on 2021-02-20, so the earlier line 1.7"),
    ("pytorch", PT + "1.7/1.8 era (May 2021)", "2021-05-20T09:00:00Z", "1.7", "v1.8.1", "the later of the lines named (1.7, 1.8)"),
    ("pytorch", PT + "1.12.1 (per maintainer); the reporter printed torch.__version__", "2022-09-01T09:00:00Z", "1.12.1",
     "v1.12.1", "release 1.12.1"),
    ("pytorch", PT + "1.8.0a0-internal", "2021-02-01T09:00:00Z", "1.8.0a0", "v1.8.0", "release 1.8.0"),  # never the line 1.8
    # a major line: the date decides; a later date in the text ('still open in ...') is not when it ran
    ("tensorflow", TF + "TF 2.x (2021 thread; exact version not visible); still open in Mar 2023", "2021-06-01T09:00:00Z",
     None, "v2.5.0", "a 2.x release of no stated number; the newest out by 2021-06-01"),
    ("tensorflow", TF + "TF 1.x (2018 thread; exact version not visible); still open in Mar 2023", None,
     None, "v1.12.0", "the newest out by 2018-12-31"),
]


@pytest.mark.parametrize(("framework", "line", "filed", "version", "ref", "why"), SPELLINGS)
def test_a_template_version_reaches_the_release_it_names(tmp_path: Path, framework: str, line: str, filed: str | None,
                                                         version: str | None, ref: str, why: str) -> None:
    env = parse_environment(f"Collecting environment information...\n{line}\n", framework)
    assert env.version == version
    assert env.version_text == line.split(": ", 1)[1]
    res = resolve(framework, env.version_text, load_settings({}, home=tmp_path, offline=True), created_at=filed)
    assert res.ref == ref, res.reason
    assert why in res.reason and "\n" not in res.reason


def test_a_bare_version_keeps_no_text() -> None:
    assert parse_environment(PT + "2.1.0+cu121\n", "pytorch").version_text is None
    assert parse_environment(PT + "1.9.0\n", "pytorch").version_text is None


def _wheel(settings_home: Path, version: str) -> None:
    folder = wheel_cache_dir(load_settings({}, home=settings_home, offline=True), "pytorch", version)
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / f"torch-{version}-cp39-cp39-manylinux1_x86_64.whl", "w") as zf:
        zf.writestr("torch/__init__.py", f"__version__ = '{version}'\n")
        zf.writestr("torch/nn/modules/module.py", f"class Module:  # {version}\n    pass\n")


def _extraction(version: str | None, text: str | None) -> Extraction:
    return Extraction(None, None, Environment(framework="pytorch", version=version, version_text=text))


def test_the_lines_rule_picks_the_wheel_it_reads(tmp_path: Path) -> None:
    """'1.7/1.8 era': in Feb 2021 (1.8 not out) the 1.7 line's wheel, in May 2021 the 1.8 line's."""
    home = tmp_path / "home"
    for v in ("1.7.1", "1.8.0"):
        _wheel(home, v)
    settings = load_settings({}, home=home, offline=True)
    early = sources_for_report(_extraction("1.7", "1.7/1.8 era (Feb 2021)"), settings, offline=True,
                               created_at="2021-02-20T09:00:00Z")
    assert early.provider is not None and "torch-1.7.1" in early.provider.description, early.note
    late = sources_for_report(_extraction("1.7", "1.7/1.8 era (May 2021)"), settings, offline=True,
                              created_at="2021-05-20T09:00:00Z")
    assert late.provider is not None and "torch-1.8.0" in late.provider.description, late.note
    assert "read as 1.8" in late.note


def test_a_line_is_served_by_a_cached_release_of_that_line_offline_and_before_a_download(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """'1.10' resolves to the newest 1.10.z (1.10.2); the cached 1.10.0 serves it, and says so, with no request."""
    home = tmp_path / "home"
    _wheel(home, "1.10.0")
    offline = load_settings({}, home=home, offline=True)
    src = open_source("pytorch", "1.10", offline, needs_cxx=False)
    assert "torch-1.10.0" in src.description and "names the 1.10 line: read the cached 1.10.0" in src.description
    assert src.read_text("torch/nn/modules/module.py") == "class Module:  # 1.10.0\n    pass\n"
    # online, for Python files: still the cached wheel, never a request (the API URL is a closed port)
    monkeypatch.setenv("SFTL_GITHUB_API_URL", "http://127.0.0.1:9")
    online = load_settings({"SFTL_GITHUB_API_URL": "http://127.0.0.1:9"}, home=home, offline=False)
    assert "read the cached 1.10.0" in open_source("pytorch", "1.10", online, needs_cxx=False).description
    # a release of the line out by the report's date wins over a later one
    _wheel(home, "1.10.1")
    dated = open_source("pytorch", "1.10", offline, needs_cxx=False, created_at="2021-11-20T09:00:00Z")
    assert "torch-1.10.0" in dated.description
    assert "torch-1.10.1" in open_source("pytorch", "1.10", offline, needs_cxx=False).description


def test_online_a_discrepancy_is_served_by_a_cached_release_of_the_line_only_when_it_holds_kernels(
        tmp_path: Path, fixtures_dir: Path) -> None:
    """Online, a wheel of the line (no C++) does not stand in for the line's archive; a tree of the line does."""
    from sftl.errors import SourceError
    from sftl.sources import register_tree

    home = tmp_path / "home"
    _wheel(home, "1.10.0")
    online = load_settings({"SFTL_GITHUB_API_URL": "http://127.0.0.1:9"}, home=home, offline=False)
    with pytest.raises(SourceError, match="no cached sources"):  # the cache-first probe: worth the download
        open_source("pytorch", "1.10", online, offline=True, needs_cxx=True)
    # really offline: the wheel of the line is what there is (the nearest tree layered when one exists)
    assert "torch-1.10.0" in open_source("pytorch", "1.10", load_settings({}, home=home, offline=True),
                                         needs_cxx=True).description
    register_tree(online, "pytorch", "1.10.0", fixtures_dir / "sources" / "mini_pytorch")
    tree = open_source("pytorch", "1.10", online, offline=True, needs_cxx=True)
    assert "local tree" in tree.description and "read the cached 1.10.0" in tree.description


def test_a_major_lines_release_with_no_sources_falls_back_as_a_versionless_report(tmp_path: Path) -> None:
    """'1.x (2018 thread)' reads 1.0.0; nothing of it cached offline: read as if no version were given."""
    pytest.importorskip("torch")
    settings = load_settings({}, home=tmp_path / "home", offline=True)
    found = sources_for_report(_extraction(None, "1.x (2018 thread; exact version not visible)"), settings,
                               offline=True, created_at="2019-06-01T09:00:00Z")
    src, why = found.provider, found.note
    assert src is not None and "installed" in src.description
    assert why.startswith("version read as 1.0.0: 1.x (2018 thread") and "read the installed" in why
