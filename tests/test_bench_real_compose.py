"""The real-issue bench's composer: GitHub issue JSON that `sftl locate` accepts offline, with no label field in it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from real_compose import LABEL_FIELDS, compose_issue, created_at, number_anchors, stated_version  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "dev"

ROW = {
    "url": "https://github.com/pytorch/pytorch/issues/69794",
    "framework": "pytorch",
    "category": "mme",
    "title": "lr_scheduler.SequentialLR.get_last_lr() does not work",
    "version": "1.10.0",
    "python": "3.7",
    "cuda": None,
    "os": None,
    "code": "import torch\nfrom torch.optim.lr_scheduler import SequentialLR\nprint(SequentialLR)",
    "traceback": (
        "Traceback (most recent call last):\n  File \"x.py\", line 14, in <module>\n    print(s.get_last_lr())\n"
        "AttributeError: 'SequentialLR' object has no attribute '_last_lr'"
    ),
    "error": "AttributeError: 'SequentialLR' object has no attribute '_last_lr'",
    "summary": "LEAKSUMMARY the fix sets _last_lr in step",
    "fix": "https://github.com/pytorch/pytorch/pull/LEAKFIX",
    "truth_files": ["torch/optim/LEAKTRUTH.py"],
    "truth_evidence": "LEAKEVIDENCE",
    "truth_inferred": False,
    "why": "LEAKWHY",
    "missing": {"owner": "LEAKOWNER", "name": "LEAKNAME"},
    "repro_hint": "LEAKHINT",
    "filed": "2021-12",
}


def _values(obj: object) -> list[str]:
    if isinstance(obj, dict):
        return [v for x in obj.values() for v in _values(x)]
    if isinstance(obj, list):
        return [v for x in obj for v in _values(x)]
    return [str(obj)] if isinstance(obj, str) else []


def test_no_label_field_reaches_the_issue() -> None:
    issue = json.dumps(compose_issue(ROW))
    leaked = [v for f in LABEL_FIELDS if f in ROW for v in _values(ROW[f]) if "LEAK" in v and v in issue]
    assert leaked == []
    assert "LEAK" not in issue
    for field in LABEL_FIELDS:
        assert f'"{field}"' not in issue


def test_issue_carries_the_report_in_the_template() -> None:
    issue = compose_issue(ROW)
    assert issue["number"] == 69794 and issue["html_url"] == ROW["url"]
    pr = compose_issue({**ROW, "url": "https://github.com/pytorch/torchdynamo/pull/864"})
    assert pr["html_url"] == "https://github.com/pytorch/torchdynamo/issues/864" and "pull_request" not in pr
    assert issue["created_at"].startswith("2021-12-15")
    assert "```python\nimport torch" in issue["body"]
    assert "AttributeError: 'SequentialLR' object has no attribute '_last_lr'" in issue["body"]
    assert "PyTorch version: 1.10.0" in issue["body"] and "Python version: 3.7" in issue["body"]
    # the error line already in the traceback is not repeated
    assert issue["body"].count("object has no attribute '_last_lr'") == 1


def test_versions_and_dates_read_from_free_text() -> None:
    assert stated_version("r2.2 (built from source)") == "2.2"
    assert stated_version("1.9.0.dev20210525+cu111") == "1.9.0.dev20210525+cu111"
    assert stated_version("1.10-era (Nov 2021; exact version not visible)") is None
    assert stated_version("master (Dec 2018)") is None
    assert created_at({"url": ROW["url"], "version": "master (Dec 2018)"}).startswith("2018-12-15")
    rows = [{"url": "https://github.com/o/r/issues/100", "filed": "2020-01"},
            {"url": "https://github.com/o/r/issues/300", "filed": "2020-03"},
            {"url": "https://github.com/o/r/issues/200"}]
    assert created_at(rows[2], number_anchors(rows)).startswith("2020-02")


def test_sftl_locate_accepts_the_composed_issue_offline(tmp_path: Path) -> None:
    issue_file = tmp_path / "issue.json"
    issue_file.write_text(json.dumps(compose_issue(ROW)), encoding="utf-8")
    sftl = Path(sys.executable).with_name("sftl")
    argv = [str(sftl)] if sftl.is_file() else [sys.executable, "-m", "sftl"]
    done = subprocess.run([*argv, "locate", str(issue_file), "--offline", "--json"], capture_output=True, text=True,
                          env={**os.environ, "SFTL_HOME": str(tmp_path / "home")}, timeout=300, check=False)
    assert done.returncode in (0, 8), done.stderr
    payload = json.loads(done.stdout)
    assert payload["issue"]["number"] == 69794 and payload["issue"]["repo"] == "pytorch/pytorch"
    assert payload["category"] == "mme"  # the composed report reads as what it is
    assert payload["environment"]["version"] == "1.10.0"


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/dev is not on this machine")
def test_no_real_row_leaks_its_labels() -> None:
    rows = [json.loads(line) for name in ("real_localize.jsonl", "localize.jsonl")
            for line in (SHARED / name).read_text(encoding="utf-8").splitlines() if line.strip()]
    anchors = number_anchors(rows)
    for row in rows:
        text = json.dumps(compose_issue(row, anchors))
        for field in ("summary", "truth_evidence", "fix_note", "why", "repro_hint"):
            value = row.get(field)
            if isinstance(value, str) and len(value) > 20:
                assert json.dumps(value)[1:-1] not in text, (row["url"], field)
