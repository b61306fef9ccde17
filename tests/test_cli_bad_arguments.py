"""Bad arguments to the real CLI give one `sftl:` line and a documented exit code."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from sftl.cli import main

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "github" / "issue_mme_no_comments.json"


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SFTL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SFTL_GITHUB_API_URL", "http://127.0.0.1:9")  # a closed port: never the internet
    monkeypatch.setenv("SFTL_MAX_RETRIES", "0")
    return tmp_path


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def assert_one_line(err: str, *needles: str) -> None:
    lines = [line for line in err.splitlines() if line.startswith("sftl:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err and "internal error" not in err, err
    for needle in needles:
        assert needle in lines[0], err


def test_envs_create_rejects_a_python_that_is_not_a_version(home: Path) -> None:
    rc, _, err = run("envs", "create", "pytorch==1.13.1", "--python", "abc", "--dry-run")
    assert rc == 2
    assert_one_line(err, "'abc' is not a Python version")


def test_screen_train_on_a_binary_file_is_bad_input(home: Path) -> None:
    labels = home / "labels.jsonl"
    labels.write_bytes(b"\xff\xfe\x00binary")
    rc, _, err = run("screen", "--train", str(labels))
    assert rc == 2
    assert_one_line(err, "not UTF-8", "0xff")


def test_locate_with_a_missing_source_root_is_bad_input_not_skipped(home: Path) -> None:
    rc, out, err = run("locate", str(FIXTURE), "--offline", "--source-root", str(home / "nope"))
    assert rc == 2 and out == ""
    assert_one_line(err, "--source-root", "is not a directory")


def test_replay_with_an_unreadable_version_is_bad_input(home: Path) -> None:
    snippet = home / "ok.py"
    snippet.write_text("print(1)\n")
    rc, _, err = run("replay", "--snippet", str(snippet), "--framework", "pytorch", "--version", "abc",
                     "--device", "cpu")
    assert rc == 2
    assert_one_line(err, "cannot read a version from 'abc'")


@pytest.mark.parametrize("value", ["-1", "0", "nan"])
def test_replay_nan_budget_must_be_positive(home: Path, value: str) -> None:
    snippet = home / "ok.py"
    snippet.write_text("print(1)\n")
    rc, out, err = run("replay", "--snippet", str(snippet), "--framework", "pytorch", "--version", "2.13.0",
                       "--device", "cpu", "--nan-search", f"--nan-budget={value}")
    assert rc == 2 and out == ""  # refused before anything ran
    assert_one_line(err, "--nan-budget")


def test_replay_timeout_nan_is_refused(home: Path) -> None:
    snippet = home / "ok.py"
    snippet.write_text("print(1)\n")
    rc, _, err = run("replay", "--snippet", str(snippet), "--framework", "pytorch", "--device", "cpu",
                     "--timeout", "nan")
    assert rc == 2
    assert_one_line(err, "--timeout")


def test_bisect_with_a_version_list_typo_is_bad_input(home: Path) -> None:
    rc, _, err = run("bisect", str(FIXTURE), "--versions", "2.1,abc", "--device", "cpu")
    assert rc == 2
    assert_one_line(err, "cannot read a version from 'abc'")


@pytest.mark.parametrize("command", ["fetch", "add"])
def test_sources_with_an_unreadable_version_never_asks_pip(home: Path, command: str) -> None:
    argv = ["sources", command, "pytorch==abc"] + ([str(home)] if command == "add" else [])
    rc, _, err = run(*argv)
    assert rc == 2
    assert_one_line(err, "cannot read a version from 'abc'")
    assert "fetching" not in err


@pytest.mark.parametrize("extra", [
    ["--memory", "0"],                          # every run crashed: "different-error"
    ["--memory", "99999999999999999999G"],      # setrlimit overflow: "cannot start the sandbox" (exit 7)
    ["--timeout", "1e308"],
    ["--max-procs", "99999999999999999999"],
    ["--max-output", "99999999999T"],
])
def test_replay_limits_the_kernel_cannot_take_are_bad_input(home: Path, extra: list[str]) -> None:
    snippet = home / "ok.py"
    snippet.write_text("print(1)\n")
    rc, out, err = run("replay", "--snippet", str(snippet), "--framework", "pytorch", "--version", "2.13.0",
                       "--device", "cpu", "--no-cache", *extra)
    assert rc == 2 and out == ""
    assert_one_line(err, extra[0])
