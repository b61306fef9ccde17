"""The commands that run report code: they refuse in one line (exit 7) where the machine cannot confine it,
run it only with --unconfined (loudly, on record), and keep the caller's token from it when confined."""

from __future__ import annotations

import copy
import io
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sftl.cli import main
from sftl.config import load_settings
from sftl.sandbox import probe

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "replay" / "mme_attribute_error_torch_2_13.json"
TOKEN = "ghp_" + "T0k3n" * 7


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path]:
    """A snippet that, once it runs, writes a file outside its scratch folder: its existence says it ran."""
    witness = tmp_path / "it-ran"
    snippet = tmp_path / "hostile.py"
    snippet.write_text(f"print('MARK')\nopen({str(witness)!r}, 'w').write('ran')\n", encoding="utf-8")
    return snippet, witness


@pytest.fixture
def bare_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sftl_home: Path) -> Path:
    """A PATH with neither bubblewrap nor unshare on it: no confinement can be had."""
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert probe(load_settings()).backend is None
    return empty


def _issue_with(snippet: Path, tmp_path: Path) -> Path:
    issue = json.loads(FIXTURE.read_text(encoding="utf-8"))
    issue = copy.deepcopy(issue)
    issue["body"] = ("### Describe the bug\n\nIt fails.\n\n```python\n" + snippet.read_text(encoding="utf-8")
                     + "```\n\n```\nTraceback (most recent call last):\n  File \"x.py\", line 2, in <module>\n"
                     "AttributeError: 'Tensor' object has no attribute 'ravel_'\n```\n")
    path = tmp_path / "issue.json"
    path.write_text(json.dumps(issue), encoding="utf-8")
    return path


def test_every_report_running_command_refuses_in_one_line(bare_path, hostile, tmp_path: Path) -> None:
    snippet, witness = hostile
    issue = _issue_with(snippet, tmp_path)
    commands = {
        "replay": ["replay", "--snippet", str(snippet), "--framework", "pytorch", "--version", "2.13.0",
                   "--env", "current", "--device", "cpu"],
        "replay TARGET": ["replay", str(issue), "--env", "current", "--device", "cpu", "--offline"],
        "bisect": ["bisect", "--snippet", str(snippet), "--framework", "pytorch", "--versions", "2.13.0",
                   "--env", "current", "--device", "cpu"],
        "nan-search": ["nan-search", str(snippet), "--budget", "1"],
        "locate --replay": ["locate", str(issue), "--replay", "--offline"],
        "triage --replay": ["triage", "pytorch/pytorch", "--replay", "--offline", "--out", str(tmp_path / "r")],
    }
    for name, argv in commands.items():
        code, out, err = _cli(*argv)
        assert code == 7, f"{name}: exit {code}, {err}"
        assert out == "" and err.count("\n") == 1, f"{name}: not one line: {err!r}"
        assert err.startswith("sftl: refusing to run report code: missing no network, read-only filesystem"), name
        assert "install bubblewrap" in err and "--unconfined" in err, name
        assert not witness.exists(), f"{name} ran the snippet"
    code, out, err = _cli("doctor")
    assert code == 7 and "sandbox: NONE" in out and "read-only filesystem  NO" in out


def test_unconfined_runs_it_loudly_and_on_record(bare_path, hostile, sftl_home: Path) -> None:
    snippet, witness = hostile
    code, out, err = _cli("replay", "--snippet", str(snippet), "--framework", "pytorch", "--version", "2.13.0",
                          "--env", "current", "--device", "cpu", "--unconfined", "--json")
    assert code == 0, err
    assert witness.exists()  # it did run: the refusal above is what kept it from running
    assert "WARNING: --unconfined: running report code WITHOUT no network, read-only filesystem" in err
    assert json.loads(out)["reason"].startswith("ran UNCONFINED (--unconfined)")
    with sqlite3.connect(sftl_home / "sftl.db") as db:
        stored = [json.loads(p) for (p,) in db.execute("SELECT payload FROM replays")]
    assert stored and all(p["containment"]["unconfined"] and p["containment"]["backend"] == "none" for p in stored)


def test_locate_refuses_unconfined_without_replay(sftl_home: Path) -> None:
    code, _, err = _cli("locate", str(FIXTURE), "--unconfined", "--offline")
    assert code == 2 and "--unconfined is for --replay" in err


def test_doctor_lists_every_guard_of_this_machine(sftl_home: Path) -> None:
    caps = probe(load_settings())
    if caps.backend is None:
        pytest.skip(f"no confinement on this machine: {'; '.join(caps.why)}")
    code, out, err = _cli("doctor", "--json")
    report = json.loads(out)
    names = [g["name"] for g in report["guards"]]
    assert names == ["no network", "read-only filesystem", "hidden environment", "process cap", "memory cap",
                     "time limit", "output cap"]
    assert report["backend"] == caps.backend and code == (0 if report["confined"] else 7)


def test_doctor_prints_the_view_a_snippet_gets(sftl_home: Path) -> None:
    caps = probe(load_settings())
    if caps.backend is None:
        pytest.skip(f"no confinement on this machine: {'; '.join(caps.why)}")
    code, out, err = _cli("doctor", "--json")
    view = {m["path"]: m for m in json.loads(out)["view"]}
    assert view["/usr"]["access"] == "read-only" and view["/etc/passwd"]["why"] == "written for the run"
    assert view["/tmp"]["access"].startswith("writable, fresh")
    assert [m["path"] for m in view.values() if m["access"] == "writable"] == [
        next(p for p, m in view.items() if m["why"] == "the run's scratch folder")]  # the one writable folder
    wide = {"/", "/opt", "/srv", "/var", "/mnt", "/home", "/root", "/run", "/sys", "/etc/shadow", "/etc/machine-id",
            str(ROOT), str(ROOT.parent), str(Path.home())}
    bound = {p for p, m in view.items() if not m["access"].startswith("writable, fresh")}  # a fresh /tmp is no leak
    assert not wide & bound, wide & bound
    assert not [p for p in view if p.startswith(str(ROOT) + "/") and not p.startswith(str(ROOT / ".venv"))]
    code, out, err = _cli("doctor")
    assert "/usr" in out and "read-only  (the system)" in out and "runs as nobody (uid and gid 65534)" in out


def test_a_confined_replay_never_sees_the_callers_token(tmp_path: Path) -> None:
    """sftl itself holds GITHUB_TOKEN in its environment; the snippet looks everywhere for it."""
    if probe(load_settings()).backend is None:
        pytest.skip("no confinement on this machine: the refusal is tested above")
    snippet = tmp_path / "steal.py"
    snippet.write_text(
        "import glob, os\n"
        "print('MARK', flush=True)\n"
        "print('TOKEN=' + str(os.environ.get('GITHUB_TOKEN')))\n"
        "for p in ['/proc/1/environ', '/proc/%d/environ' % os.getppid()] + glob.glob('/proc/*/environ'):\n"
        "    try:\n"
        f"        print('LEAK', p) if b'{TOKEN}' in open(p, 'rb').read() else None\n"
        "    except OSError:\n"
        "        pass\n"
        "print('SCANNED')\n", encoding="utf-8")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(Path.home()), "PYTHONPATH": str(ROOT),
           "SFTL_HOME": str(tmp_path / "home"), "GITHUB_TOKEN": TOKEN, "LANG": "C.UTF-8"}
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from sftl.cli import main; sys.exit(main(sys.argv[1:]))", "replay",
         "--snippet", str(snippet), "--framework", "pytorch", "--version", "2.13.0", "--env", "current",
         "--device", "cpu", "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)["runs"][0]
    assert "MARK" in run["stdout_tail"] and "SCANNED" in run["stdout_tail"] and "TOKEN=None" in run["stdout_tail"]
    assert "LEAK" not in run["stdout_tail"] and TOKEN not in done.stdout
