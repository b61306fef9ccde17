"""`sftl.sources.sources_for_report`, the one call that answers "the sources for this report": a provider with
a note, or none and why; the framework read off the traceback when the text never names it."""

from __future__ import annotations

import dataclasses
import zipfile
from pathlib import Path

import pytest

from sftl.config import load_settings
from sftl.model import Environment, Extraction, Frame, Traceback
from sftl.sources import ReportSources, sources_for_report, wheel_cache_dir


def test_a_report_naming_no_framework_gets_no_sources_and_the_reason(tmp_path: Path) -> None:
    settings = load_settings({}, home=tmp_path / "home", offline=True)
    found = sources_for_report(Extraction(None, None, Environment()), settings)
    assert found == ReportSources(None, "the report does not say which framework it is about")
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.note = "changed"  # type: ignore[misc]


def test_the_framework_of_the_traceback_frames_chooses_the_release_read(tmp_path: Path) -> None:
    """No word of PyTorch in the text, but its frames run through torch/: the cached 1.9.0 wheel is read."""
    settings = load_settings({}, home=tmp_path / "home", offline=True)
    folder = wheel_cache_dir(settings, "pytorch", "1.9.0")
    folder.mkdir(parents=True)
    with zipfile.ZipFile(folder / "torch-1.9.0-cp39-cp39-manylinux1_x86_64.whl", "w") as zf:
        zf.writestr("torch/__init__.py", "__version__ = '1.9.0'\n")
        zf.writestr("torch/nn/modules/module.py", "class Module:\n    pass\n")
    frame = Frame("/usr/lib/python3.9/site-packages/torch/nn/modules/module.py", 10, "forward",
                  repo_path="torch/nn/modules/module.py")
    extraction = Extraction(None, Traceback((frame,), "TypeError", "bad"), Environment(version="1.9.0"))
    found = sources_for_report(extraction, settings, created_at="2021-07-01T00:00:00Z")
    assert found.provider is not None and "torch-1.9.0" in found.provider.description, found.note
    assert found.provider.read_text("torch/nn/modules/module.py") == "class Module:\n    pass\n"
