"""Shared fixtures: an isolated SFTL_HOME per test and paths to the bundled fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture
def sftl_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh state directory; the real network is never configured."""
    home = tmp_path / "home"
    monkeypatch.setenv("SFTL_HOME", str(home))
    monkeypatch.setenv("SFTL_GITHUB_API_URL", "http://127.0.0.1:9")  # closed port: never the internet
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    return home


@pytest.fixture(autouse=True)
def _network_found_down_is_forgotten() -> None:
    """A host one test found unreachable (a stopped loopback server) is not skipped by the next one."""
    import sys

    github = sys.modules.get("sftl.github")
    if github is not None:
        github.forget_unreachable_hosts()
