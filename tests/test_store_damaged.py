"""A read-only or corrupt store is exit 4 with one line, and the stored data survives."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sftl.cli import main

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "github" / "issue_mme_no_comments.json"
SFTL = [str(Path(sys.executable).parent / "sftl")]  # the installed console script, as a user runs it


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def _readonly_runner(home: Path) -> list[str]:
    """A command prefix under which `home` is read-only: chmod for users, a read-only bind mount for root."""
    if os.geteuid() != 0:
        home.chmod(0o555)
        (home / "sftl.db").chmod(0o444)
        return []
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode:
        pytest.skip("root ignores file modes and no mount namespace is available for a read-only mount")
    return ["unshare", "-m", "sh", "-c", f'mount --bind -o ro "{home}" "{home}" && exec "$@"', "sh"]


def test_a_read_only_store_is_exit_4_naming_why_and_keeps_its_issues(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "SFTL_HOME": str(home), "SFTL_GITHUB_API_URL": "http://127.0.0.1:9"}
    subprocess.run([*SFTL, "import", str(FIXTURE)], env=env, check=True, capture_output=True)
    prefix = _readonly_runner(home)
    try:
        for argv in (["show", "tensorflow/tensorflow#61234"], ["import", str(FIXTURE)], ["screen"]):
            proc = subprocess.run([*prefix, *SFTL, *argv], env=env, capture_output=True, text=True, timeout=120)
            assert proc.returncode == 4, proc.stderr
            lines = proc.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("sftl: ") and "read-only" in lines[0], proc.stderr
    finally:
        home.chmod(0o755)
        (home / "sftl.db").chmod(0o644)
    proc = subprocess.run([*SFTL, "show", "tensorflow/tensorflow#61234", "--json"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and '"number": 61234' in proc.stdout


def test_a_corrupt_store_is_exit_4_for_every_store_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SFTL_HOME", str(tmp_path))
    monkeypatch.setenv("SFTL_GITHUB_API_URL", "http://127.0.0.1:9")
    garbage = os.urandom(4096)
    (tmp_path / "sftl.db").write_bytes(garbage)
    for argv in (["show", "a/b#1"], ["export"], ["screen"], ["import", str(FIXTURE)],
                 ["locate", str(FIXTURE), "--offline"], ["triage", "a/b", "--offline"], ["similar", str(FIXTURE)],
                 ["crawl", "a/b", "--offline"], ["replay", str(FIXTURE), "--offline", "--device", "cpu"]):
        rc, _, err = run(*argv)
        assert rc == 4, (argv, err)
        assert err.startswith("sftl: cannot open the store") and err.count("\n") == 1, err
    assert (tmp_path / "sftl.db").read_bytes() == garbage  # never "repaired" by overwriting


def test_a_row_damaged_outside_sftl_is_exit_4_and_a_reimport_repairs_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    monkeypatch.setenv("SFTL_HOME", str(tmp_path))
    monkeypatch.setenv("SFTL_GITHUB_API_URL", "http://127.0.0.1:9")
    assert run("import", str(FIXTURE))[0] == 0
    db = sqlite3.connect(tmp_path / "sftl.db")
    db.execute("UPDATE issues SET raw = '{garbage', labels = 'nope'")
    db.commit()
    db.close()
    for argv in (["show", "tensorflow/tensorflow#61234"], ["export"], ["screen"],
                 ["locate", "tensorflow/tensorflow#61234", "--offline"]):
        rc, _, err = run(*argv)
        assert rc == 4, (argv, err)  # was an internal error (JSONDecodeError)
        assert err.startswith("sftl: the store holds a corrupt") and err.count("\n") == 1, err
    rc, _, err = run("import", str(FIXTURE))
    assert rc == 0, err
    rc, out, _ = run("export")
    assert rc == 0 and json.loads(out)["number"] == 61234
