"""The CLI says things one way: one table of exit codes, the same option names for the same meaning (old
spellings still accepted), lists by default, whole lines off a terminal, and output any encoding can carry."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sftl.cli import main
from sftl.errors import EXIT_CODES
from tests.ghserver import GitHubServer, make_issue

SFTL = [sys.executable, "-c", "from sftl.cli import entry; entry()"]


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_version_names_sftl_python_and_the_frameworks_without_importing_them() -> None:
    code = ("import sys; from sftl.cli import main; rc = main(['--version']); "
            "print('imported' if {'torch', 'tensorflow'} & set(sys.modules) else 'not imported')")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    first, second = run.stdout.splitlines()
    assert first.startswith("sftl ") and "Python 3." in first and "torch" in first and "tensorflow" in first
    assert second == "not imported"


def test_help_carries_the_exit_code_table() -> None:
    _, out, _ = _run("--help")
    for code, meaning in EXIT_CODES.items():
        assert f"{code:<4} {meaning}" in out


def test_renamed_options_keep_their_old_spelling_unlisted() -> None:
    _, fuzz_help, _ = _run("fuzz", "--help")
    assert "--jobs" in fuzz_help and "--seed " in fuzz_help and "--inputs" in fuzz_help
    assert "--workers" not in fuzz_help and "--rng-seed" not in fuzz_help and "--budget" not in fuzz_help
    _, eval_help, _ = _run("eval", "--help")
    assert "--method M" in eval_help and "--methods" not in eval_help
    _, triage_help, _ = _run("triage", "--help")
    assert "--top K" in triage_help and "--format" in triage_help
    assert _run("fuzz", "bmm", "--workers", "0")[0] == 2 and _run("fuzz", "bmm", "--rng-seed", "x")[0] == 2


def test_envs_and_cache_without_an_action_list(sftl_home: Path) -> None:
    code, out, err = _run("envs")
    assert code == 0 and "backends:" in out, err
    code, out, _ = _run("cache", "--json")
    assert code == 0 and set(json.loads(out)) == {"path", "files", "bytes", "oldest_used"}


def test_a_pipe_gets_whole_titles(sftl_home: Path, tmp_path: Path) -> None:
    title = "torch.histc gives different counts on CUDA than on CPU for values on the upper edge of the last bin"
    lines = tmp_path / "i.jsonl"
    lines.write_text(json.dumps(make_issue("o/r", 1, title=title)) + "\n")
    assert _run("import", str(lines))[0] == 0
    code, out, _ = _run("screen")
    assert code == 0 and title in out


@pytest.mark.parametrize("json_flag", [True, False])
def test_an_ascii_only_stdout_still_gets_the_whole_answer(sftl_home: Path, tmp_path: Path, json_flag: bool) -> None:
    issue = tmp_path / "greek.json"
    issue.write_text(json.dumps(make_issue("o/r", 3, title="Σφάλμα: torch.histc на CUDA")), encoding="utf-8")
    run = subprocess.run([*SFTL, "show", str(issue), *(["--json"] if json_flag else [])], capture_output=True,
                         env={**os.environ, "PYTHONIOENCODING": "ascii"}, timeout=60)
    assert run.returncode == 0 and run.stderr == b"", run.stderr
    if json_flag:
        assert json.loads(run.stdout)["title"] == "Σφάλμα: torch.histc на CUDA"
    else:
        assert b"torch.histc" in run.stdout


def test_a_repository_github_does_not_know_is_not_something_to_resume(sftl_home: Path, tmp_path: Path) -> None:
    with GitHubServer() as gh:
        code, _, err = _run("--api-url", gh.url, "triage", "no/such-repo", "--out", str(tmp_path / "r"))
    assert code == 3 and len(err.splitlines()) == 1
    assert "not found (404)" in err and "resume" not in err
