"""Options and settings that make no sense are refused up front with one `sftl:` line (exit 2)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from sftl.cli import main

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "github" / "issue_mme_no_comments.json"
REPO = "tensorflow/tensorflow"  # the fixture's repository


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SFTL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SFTL_GITHUB_API_URL", "http://127.0.0.1:9")  # a closed port: never the internet
    monkeypatch.setenv("SFTL_MAX_RETRIES", "0")
    monkeypatch.chdir(tmp_path)  # triage writes ./triage-report by default
    return tmp_path


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("sftl:")]
    assert len(lines) == 1 and "internal error" not in err and "Traceback" not in err, err
    return lines[0]


@pytest.fixture()
def stored(home: Path) -> Path:
    assert run("import", str(FIXTURE))[0] == 0
    return home


@pytest.mark.parametrize(("extra", "needle"), [
    (["--limit", "-1"], "--limit"),           # sliced off the last issue before
    (["--since", "nope"], "not a date"),       # filtered everything: "no stored issues"
    (["--method", "zz"], "invalid choice"),    # ran, and every issue failed, exit 0
    (["--source-root", "/nonexistent/tree"], "is not a directory"),
    (["--out", "FILE"], "is a file"),          # internal error after all the work
])
def test_triage_refuses_bad_options_before_any_work(stored: Path, extra: list[str], needle: str) -> None:
    (stored / "FILE").write_text("x")
    rc, out, err = run("triage", REPO, "--offline", *extra)
    assert rc == 2 and out == ""
    assert needle in one_line(err)
    assert not (stored / "triage-report").exists()


def test_triage_since_takes_a_plain_date(stored: Path) -> None:
    rc, _, err = run("triage", REPO, "--offline", "--since", "2000-01-01", "--json")
    assert rc == 0, err
    rc, _, err = run("triage", REPO, "--offline", "--since", "2100-01-01")
    assert rc == 8 and "was updated since 2100-01-01" in one_line(err)  # nothing to give, and why


def test_eval_out_naming_a_file_is_bad_input(home: Path) -> None:
    labels = home / "labels.jsonl"
    labels.write_text("")
    (home / "FILE").write_text("x")
    rc, _, err = run("eval", str(labels), "--out", str(home / "FILE"), "--no-plots")
    assert rc == 2
    assert "cannot create the report directory" in one_line(err)
    assert (home / "FILE").read_text() == "x"


@pytest.mark.parametrize(("flag", "named"), [("--jobs", "--jobs"), ("--workers", "--jobs"), ("--variants", "--variants")])
def test_fuzz_refuses_non_positive_counts(home: Path, flag: str, named: str) -> None:
    rc, _, err = run("fuzz", "torch.add", flag, "0")  # --workers: the old spelling of --jobs, still accepted
    assert rc == 2
    assert named in one_line(err)


@pytest.mark.parametrize(("name", "value"), [
    ("SFTL_HTTP_TIMEOUT", "-1"), ("SFTL_HTTP_TIMEOUT", "0"), ("SFTL_HTTP_TIMEOUT", "nan"),
    ("SFTL_MAX_RETRIES", "-3"), ("SFTL_BACKOFF", "inf"), ("SFTL_PAGE_TIMEOUT", "0"),
    ("SFTL_GITHUB_API_URL", "notaurl"), ("SFTL_GITHUB_API_URL", "ftp://example.org"),
])
def test_nonsense_settings_are_bad_input(home: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    rc, _, err = run("fetch", "a/b#1")
    assert rc == 2
    assert name.removeprefix("SFTL_GITHUB_") in one_line(err) or "API root" in one_line(err)
