"""Tracebacks cut at an import (pytest's long format from CI logs): frames read, screened mme, the framework's reference ranked."""

from __future__ import annotations

from pathlib import Path

from sftl.extract import extract
from sftl.localize.mme import localize_sftl
from sftl.model import Issue, Outcome
from sftl.screen.documents import prepare
from sftl.sources import LocalTree

TRACE = """Traceback:

```
_________________ ERROR collecting tests/test_models.py __________________
.nox\\tests-3-9\\lib\\site-packages\\thirdlib\\utils.py:1063: in _get_module
    return importlib.import_module("." + module_name, self.__name__)
<frozen importlib._bootstrap>:1030: in _gcd_import
    ???
.nox\\tests-3-9\\lib\\site-packages\\otherlib\\__init__.py:7: in <module>
    {last}
```

The error:

```
E   AttributeError: module 'signal' has no attribute 'SIGKILL'
```
"""


def report(title: str, last: str = "from .runner import Runner") -> Issue:
    return Issue(repo="pytorch/pytorch", number=7, title=title, body=TRACE.format(last=last))


def test_pytest_frames_are_read_with_their_source_lines() -> None:
    ex = extract(report("torchrun fails on Windows"))
    assert ex.traceback is not None
    frames = ex.traceback.frames
    assert [f.line for f in frames] == [1063, 1030, 7]
    assert frames[0].function == "_get_module" and frames[0].source.startswith("return importlib.import_module")
    assert frames[1].path == "<frozen importlib._bootstrap>" and frames[1].source == ""  # pytest's ??? is no source
    assert frames[-1].source == "from .runner import Runner"
    assert ex.traceback.exception == "AttributeError" and "SIGKILL" in (ex.error_line or "")


def test_a_trace_cut_at_an_import_in_a_report_about_the_framework_screens_mme() -> None:
    doc = prepare(report("torchrun AttributeError on Windows"), extract(report("torchrun AttributeError on Windows")))
    assert doc.rules.mme
    # the same trace in a report that names no framework, or one not cut at an import, stays the other library's
    plain = report("otherlib breaks on Windows")
    assert not prepare(plain, extract(plain)).rules.mme
    uncut = report("torchrun AttributeError on Windows", last="kill(pid, signal.SIGKILL)")
    assert not prepare(uncut, extract(uncut)).rules.mme


def test_the_framework_file_referring_to_the_missing_name_is_ranked(tmp_path: Path) -> None:
    files = {
        "torch/__init__.py": "",
        "torch/distributed/__init__.py": "",
        "torch/distributed/elastic/timer/file_based_local_timer.py": "import signal\n\n\ndef reap(pid):\n    os.kill(pid, signal.SIGKILL)\n",
        "torch/distributed/elastic/timer/local_timer.py": "import signal\n\n\ndef stop(pid):\n    os.kill(pid, signal.SIGTERM)\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    source = LocalTree(tmp_path, "pytorch", "9.9.0")
    issue = report("torchrun AttributeError caused by `file_based_local_timer` on Windows")
    loc = localize_sftl(issue, extract(issue), source)
    assert loc.outcome == Outcome.LOCATED
    assert loc.suspects[0].path == "torch/distributed/elastic/timer/file_based_local_timer.py"
    uncut = report("torchrun AttributeError on Windows", last="kill(pid, signal.SIGKILL)")
    loc = localize_sftl(uncut, extract(uncut), source)
    assert loc.outcome == Outcome.ABSTAINED and "outside the framework" in loc.reason
