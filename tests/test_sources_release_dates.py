"""A report's date to its framework release: impossible dates and dates past the release table name no release."""

from __future__ import annotations

from pathlib import Path

import pytest

from sftl.config import load_settings
from sftl.errors import SourceError
from sftl.sources import open_source, register_tree, release_at


def test_an_impossible_date_names_no_release() -> None:
    assert release_at("pytorch", "2019-13-45T00:00:00Z") is None  # was 1.3.1
    assert release_at("tensorflow", "2019-02-30") is None
    assert release_at("pytorch", "2019-02-28") == "1.0.1"


def test_open_source_guesses_no_release_for_a_date_past_its_table(tmp_path: Path, fixtures_dir: Path) -> None:
    s = load_settings({}, home=tmp_path / "home", offline=True)
    register_tree(s, "pytorch", "1.4.0", fixtures_dir / "legacy_tree_1_4")
    with pytest.raises(SourceError, match="names no pytorch version"):
        open_source("pytorch", None, s, created_at="2099-01-01T00:00:00Z")  # was "2.9.0 was current on 2099-01-01"
    dated = open_source("pytorch", None, s, created_at="2020-02-20T10:00:00Z")
    assert dated.version == "1.4.0" and "1.4.0 was current on 2020-02-20" in dated.description
