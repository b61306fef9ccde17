"""Every subcommand over a corpus of bad inputs: one line on stderr, the documented exit code (sftl.errors),
no traceback, and a store that passes `PRAGMA integrity_check` with every earlier row still there."""

from __future__ import annotations

import io
import json
import os
import re
import sqlite3
from pathlib import Path

import pytest

from sftl.cli import main
from sftl.errors import EXIT_CODES
from tests.ghserver import make_issue

REPO = "bad/inputs"
BAD_USAGE, NO_RESULT = 2, 8


def _issue(number: int, **fields: object) -> str:
    return json.dumps({**make_issue(REPO, number), **fields})


# name -> file content written under the test's folder (referenced as {name} in argv)
FILES: dict[str, str] = {
    "huge_number.json": '{"number": 1e30, "title": "t", "repository_url": "https://api.github.com/repos/bad/inputs"}',
    "labels_not_a_list.json": _issue(7, labels="notalist"),
    "created_yesterday.json": _issue(8, created_at="yesterday"),
    "pull_url.json": _issue(9, html_url="https://github.com/bad/inputs/pull/9"),
    "null.json": "null",
    "array_of_two.json": f"[{_issue(10)}, {_issue(11)}]",
    "empty.json": "",
    "truncated.json": _issue(12)[:40],
    "one_bad_line.jsonl": _issue(13, labels="notalist") + "\n",
    "empty.jsonl": "",
    "garbage.jsonl": "this is not json\n",
    "array.jsonl": "[1, 2]\n",
    "labels_empty_root.jsonl": json.dumps({"url": f"https://github.com/{REPO}/issues/15", "category": "mme",
                                           "truth_files": ["torch/a.py"], "source_root": "dir",
                                           "issue": make_issue(REPO, 15)}) + "\n",
    "syntax_error.py": "import torch\ndef f(:\n",
    "no_snippet.json": _issue(14, body="It breaks, no code."),
}

# (argv, exit code, a word the one line must hold)
CASES: list[tuple[list[str], int, str]] = [
    (["show", f"{REPO}#99999999999999999999999"], BAD_USAGE, "out of range"),
    (["fetch", f"{REPO}#9223372036854775808"], BAD_USAGE, "out of range"),
    (["locate", f"{REPO}#9223372036854775808"], BAD_USAGE, "out of range"),
    (["similar", f"{REPO}#99999999999999999999999"], BAD_USAGE, "out of range"),
    (["screen", f"{REPO}#99999999999999999999999"], BAD_USAGE, "out of range"),
    (["replay", f"{REPO}#99999999999999999999999"], BAD_USAGE, "out of range"),
    (["bisect", f"{REPO}#99999999999999999999999", "--versions", "2.0..2.1"], BAD_USAGE, "out of range"),
    (["fuzz", "bmm", "--seed-from", f"{REPO}#99999999999999999999999"], BAD_USAGE, "out of range"),
    (["show", f"{REPO}#0"], BAD_USAGE, "start at 1"),
    (["fetch", f"https://github.com/{REPO}/issues/0"], BAD_USAGE, "start at 1"),
    (["fetch", f"{REPO}#-1"], BAD_USAGE, "malformed"),
    (["show", "{huge_number.json}"], BAD_USAGE, "1e+30"),
    (["locate", "{labels_not_a_list.json}"], BAD_USAGE, "'labels' should be an array, not a string"),
    (["show", "{created_yesterday.json}"], BAD_USAGE, "not an ISO 8601 time"),
    (["locate", "{pull_url.json}"], BAD_USAGE, "pull request"),
    (["show", "{null.json}"], BAD_USAGE, "found null"),
    (["show", "{array_of_two.json}"], BAD_USAGE, "found an array"),
    (["show", "{empty.json}"], BAD_USAGE, "empty"),
    (["show", "{truncated.json}"], BAD_USAGE, "truncated JSON"),
    (["show", "{dir}"], BAD_USAGE, "is a directory"),
    (["locate", "/dev/null"], BAD_USAGE, "is a device"),
    (["show", "{fifo}"], BAD_USAGE, "FIFO"),
    (["import", "{one_bad_line.jsonl}"], BAD_USAGE, "'labels' should be an array"),
    (["import", "{missing.jsonl}"], BAD_USAGE, "cannot read"),
    (["replay", "--snippet", "{syntax_error.py}", "--framework", "pytorch"], BAD_USAGE, "never ran"),
    (["bisect", "{no_snippet.json}", "--versions", "2.0..2.1", "--framework", "pytorch"], NO_RESULT, "no snippet"),
    (["eval", "{empty.jsonl}"], BAD_USAGE, "empty"),
    (["eval", "{garbage.jsonl}"], BAD_USAGE, "no usable label line"),
    (["eval", "{array.jsonl}"], BAD_USAGE, "expected a JSON object, got an array"),
    (["eval", "{labels_empty_root.jsonl}"], BAD_USAGE, "source_root"),
    (["screen", "--train", "{garbage.jsonl}", "--precision", "2"], BAD_USAGE, "--precision"),
    (["triage", REPO, "--offline", "--since", "2030-01-01"], NO_RESULT, "none of the 3 stored open issues"),
    (["triage", "nobody/nothing", "--offline"], NO_RESULT, "no stored open issues"),
    (["triage", "not-a-repo", "--offline"], BAD_USAGE, "OWNER/REPO"),
    (["triage", REPO, "--offline", "--jobs", "0"], BAD_USAGE, "at least 1"),
    (["locate", f"{REPO}#1", "--offline", "--source-root", "{dir}"], BAD_USAGE, "is empty"),
    (["locate", f"{REPO}#1", "--offline", "--source-root", "{unrelated}"], BAD_USAGE, "no PyTorch or TensorFlow"),
    (["triage", REPO, "--offline", "--source-root", "{unrelated}"], BAD_USAGE, "no PyTorch or TensorFlow"),
    (["eval", "{garbage.jsonl}", "--source-root", "{dir}"], BAD_USAGE, "is empty"),
    (["locate", f"{REPO}#1", "--source-root", "{missing}"], BAD_USAGE, "not a directory"),
    (["--home", "{a_file}", "show", f"{REPO}#1"], BAD_USAGE, "is a file"),
    (["crawl", "not a repo"], BAD_USAGE, "OWNER/REPO"),
    (["crawl", REPO, "--since", "yesterday"], BAD_USAGE, "not a date"),
    (["export", "--format", "xml"], BAD_USAGE, "invalid choice"),
    (["similar", f"{REPO}#1", "--top", "0"], BAD_USAGE, "--top"),
    (["cache", "prune", "--max-size", "lots"], BAD_USAGE, "not a size"),
    (["envs", "create", "nosuch==1.0"], BAD_USAGE, "unknown framework"),
    (["fuzz", "no_such_api_xyz"], BAD_USAGE, "no API named"),
    (["fuzz", "bmm", "--inputs", "5"], BAD_USAGE, "--inputs"),
    (["fuzz", "bmm", "--jobs", "0"], BAD_USAGE, "--jobs"),
    (["nan-search", "{missing}.py"], BAD_USAGE, "no such script"),
    (["nan-search", "{syntax_error.py}", "--budget", "-1"], BAD_USAGE, "budget"),
    (["sources", "fetch", "pytorch==abc"], BAD_USAGE, "cannot read a version"),
    (["sources", "fetch", "nosuch==1.0"], BAD_USAGE, "unknown framework"),
    (["sources", "add", "nosuch==1.0", "{dir}"], BAD_USAGE, "unknown framework"),
    (["sources", "add", "pytorch", "{dir}"], BAD_USAGE, "FRAMEWORK==VERSION"),
    (["sources", "add", "pytorch==2.0", "{missing_dir}"], BAD_USAGE, "not a directory"),
    (["sources", "add", "pytorch==2.0", "{unrelated}"], BAD_USAGE, "does not look like"),
    (["history", "import", "{garbage.jsonl}"], BAD_USAGE, "malformed JSON"),
    (["no-such-command"], BAD_USAGE, "invalid choice"),
]


@pytest.fixture
def workdir(sftl_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SFTL_MAX_RETRIES", "0")  # nothing here may need the network; if it tries, fail fast
    monkeypatch.chdir(tmp_path)
    for name, text in FILES.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "dir").mkdir()
    (tmp_path / "unrelated" / "docs").mkdir(parents=True)
    (tmp_path / "unrelated" / "docs" / "index.md").write_text("# not a framework\n")
    (tmp_path / "a_file").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    stored = tmp_path / "stored.jsonl"
    stored.write_text("\n".join(_issue(n, body=f"Report {n}: torch.histc differs on CUDA") for n in (1, 2, 3)) + "\n")
    assert main(["import", str(stored)], out=io.StringIO(), err=io.StringIO()) == 0
    return tmp_path


def _rows(db: Path) -> tuple[str, list[tuple[str, int, str]]]:
    with sqlite3.connect(db) as conn:
        check = conn.execute("PRAGMA integrity_check").fetchone()[0]
        rows = conn.execute("SELECT repo, number, title FROM issues ORDER BY repo, number").fetchall()
    return check, rows


def test_every_documented_exit_code_has_its_meaning() -> None:
    assert {0, 1, 2, 3, 4, 5, 6, 7, 8, 130} <= set(EXIT_CODES)


@pytest.mark.parametrize(("argv", "code", "needle"), CASES, ids=[" ".join(a)[:60] for a, _, _ in CASES])
def test_bad_input_is_one_line_its_exit_code_and_no_data_lost(
    workdir: Path, sftl_home: Path, argv: list[str], code: int, needle: str
) -> None:
    db = sftl_home / "sftl.db"
    _, before = _rows(db)
    args = [re.sub(r"\{([^}]+)\}", lambda m: str(workdir / m.group(1)), a) for a in argv]  # {name}: a path here
    out, err = io.StringIO(), io.StringIO()
    got = main(args, out=out, err=err)
    lines = err.getvalue().splitlines()
    assert got == code, err.getvalue()
    assert len(lines) == 1, err.getvalue()
    assert lines[0].startswith("sftl:") and "internal error" not in lines[0] and "Traceback" not in lines[0]
    assert needle in lines[0]
    check, after = _rows(db)
    assert check == "ok"
    assert set(before) <= set(after), "earlier rows were lost"


def test_import_keeps_every_good_line_beside_bad_ones(workdir: Path, sftl_home: Path) -> None:
    lines = [_issue(20), _issue(25).replace('"number": 25', '"number": 1' + "0" * 30), '{"number": 1e30, "title": "t"}', _issue(21, labels="x"), _issue(22),
             f"[{_issue(23)}][{_issue(24)}]"]
    (workdir / "mixed.jsonl").write_text("\n".join(lines) + "\n")
    err = io.StringIO()
    assert main(["import", str(workdir / "mixed.jsonl")], out=io.StringIO(), err=err) == BAD_USAGE
    assert len(err.getvalue().splitlines()) == 3  # one line per bad line, with its number
    _, rows = _rows(sftl_home / "sftl.db")
    assert {20, 22, 23, 24} <= {n for _, n, _ in rows}


def test_the_store_refuses_a_number_sqlite_cannot_hold_and_keeps_its_rows(tmp_path: Path) -> None:
    from sftl.errors import InputError
    from sftl.model import Issue
    from sftl.store import Store

    db = tmp_path / "s.db"
    with Store(db) as store:
        store.upsert_issues([(Issue(repo=REPO, number=1, title="kept", body=""), None)])
        with pytest.raises(InputError, match="cannot be stored"):
            store.upsert_issues([(Issue(repo=REPO, number=2**63, title="t", body=""), None)])
        with pytest.raises(InputError, match="cannot be stored"):
            store.get_issue(REPO, 10**30)
    check, rows = _rows(db)
    assert check == "ok" and rows == [(REPO, 1, "kept")]
