"""The intake CLI: fetch/crawl/import/show/export, and one line + a documented exit code for every bad input."""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path

import pytest
from ghserver import GitHubServer, make_comment, make_issue

from sftl.cli import main

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "github"
SFTL = ROOT / ".venv" / "bin" / "sftl"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def env(sftl_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SFTL_MAX_RETRIES", "1")
    monkeypatch.setenv("SFTL_BACKOFF", "0.01")
    monkeypatch.setenv("SFTL_HTTP_TIMEOUT", "2")
    monkeypatch.setenv("SFTL_RATE_LIMIT_WAIT", "1")
    return sftl_home


@pytest.fixture
def gh(env: Path, monkeypatch: pytest.MonkeyPatch):
    with GitHubServer() as server:
        server.add_issues("o/r", [make_issue("o/r", n, comments=1 if n == 3 else 0) for n in range(1, 6)]
                          + [make_issue("o/r", 6, pull_request=True)])
        server.add_comments("o/r", 3, [make_comment("o/r", 3, 33, body="me too")])
        monkeypatch.setenv("SFTL_GITHUB_API_URL", server.url)
        yield server


def test_fetch_file_offline_then_show_and_json(env: Path) -> None:
    code, out, err = run("fetch", str(FIX / "issue_with_inline_comments_gcrde.json"), "--offline")
    assert code == 0 and err == ""
    assert out.startswith("pytorch/pytorch#113524  [open]  torch.histc gives different results")
    code, out, _ = run("show", "pytorch/pytorch#113524", "--offline", "--json")
    data = json.loads(out)
    assert code == 0 and data["number"] == 113524 and len(data["comments"]) == 2
    code, out, _ = run("show", "https://github.com/pytorch/pytorch/issues/113524")
    assert code == 0 and "```python" in out and "--- maintainer-a commented" in out


def test_show_of_an_issue_not_stored_says_how_to_get_it(env: Path) -> None:
    code, out, err = run("show", "o/r#1")
    assert code == 8 and out == "" and err == "sftl: o/r#1 is not in the store; run: sftl fetch o/r#1\n"


def test_fetch_over_the_api_and_crawl(gh: GitHubServer) -> None:
    code, out, _ = run("fetch", "o/r#3", "--json")
    assert code == 0 and json.loads(out)["comments"][0]["body"] == "me too"
    code, out, err = run("crawl", "o/r", "--state", "all")
    assert code == 0, err
    # o/r#3 was fetched just before, identical: listed but not written again
    assert out.startswith("o/r: 5 issues listed (full), 4 written, 1 pull requests skipped, 0 comment threads fetched")
    code, out, _ = run("crawl", "o/r", "--state", "all", "--json")
    figures = json.loads(out)
    assert code == 0 and figures["since"] and figures["stored_total"] == 5 and figures["done"]


def test_export_import_round_trip_in_real_processes(gh: GitHubServer, env: Path, tmp_path: Path) -> None:
    assert run("crawl", "o/r", "--state", "all")[0] == 0
    penv = {**os.environ, "SFTL_HOME": str(env)}
    exported = subprocess.run([str(SFTL), "export"], env=penv, capture_output=True, check=True, timeout=60).stdout
    assert len(exported.splitlines()) == 5
    penv2 = {**penv, "SFTL_HOME": str(tmp_path / "other")}
    done = subprocess.run([str(SFTL), "import", "-"], input=exported, env=penv2, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == "stdin: 5 issues imported, 0 unchanged, 0 pull requests skipped, 0 bad lines\n"
    again = subprocess.run([str(SFTL), "export"], env=penv2, capture_output=True, check=True, timeout=60).stdout
    assert [json.loads(x)["title"] for x in again.splitlines()] == [json.loads(x)["title"] for x in exported.splitlines()]


def test_import_with_bad_lines_exits_2_and_names_them(env: Path) -> None:
    code, out, err = run("import", str(FIX / "import_with_bad_lines.jsonl"))
    assert code == 2
    assert "3 issues imported" in out and "2 bad lines" in out
    assert [line.split(": ")[1].rsplit(":", 1)[1] for line in err.splitlines()] == ["3", "5"]


def test_export_csv(env: Path) -> None:
    run("import", str(FIX / "import_with_bad_lines.jsonl"))
    code, out, _ = run("export", "--format", "csv", "--repo", "tensorflow/tensorflow")
    assert code == 0 and out.splitlines()[1].startswith("tensorflow/tensorflow,61300,")


BAD_INPUTS = [
    (("fetch", "https://github.com/o/r/issues/x1"), 2, "malformed GitHub issue URL"),
    (("fetch", "https://example.com/o/r/issues/1"), 2, "not a GitHub issue URL"),
    (("fetch", "https://github.com/o/r/pull/6"), 2, "is a pull request"),
    (("fetch", "o/r#6"), 3, "is a pull request"),
    (("fetch", "o/r#404"), 3, "not found (404)"),
    (("fetch", str(FIX / "truncated_issue.json")), 2, "truncated JSON"),
    (("fetch", str(FIX / "not_an_issue.json")), 2, "not a GitHub issue object"),
    (("fetch", str(FIX / "non_utf8_issue.json")), 2, "not UTF-8 text"),
    (("fetch", "o/r#1", "--offline"), 3, "offline: o/r#1 is neither in the store nor in the HTTP cache"),
    (("crawl", "not a repo"), 2, "malformed repository"),
    (("crawl", "o/r", "--since", "yesterday"), 2, "not a date"),
    (("crawl", "o/r", "--limit", "0"), 2, "--limit must be a positive number"),
    (("import", "/nonexistent.jsonl"), 2, "cannot read"),
]


@pytest.mark.parametrize(("argv", "code", "words"), BAD_INPUTS)
def test_bad_input_is_one_line_and_a_documented_exit_code(gh: GitHubServer, argv: tuple[str, ...], code: int, words: str) -> None:
    got, out, err = run(*argv)
    assert got == code
    assert len(err.splitlines()) == 1 and err.startswith("sftl: ") and words in err
    assert "Traceback" not in err + out


def test_bad_token_rate_limit_and_network_down(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with GitHubServer(token="right") as server:
        server.add_issues("o/r", [make_issue("o/r", 1)])
        monkeypatch.setenv("SFTL_GITHUB_API_URL", server.url)
        monkeypatch.setenv("GITHUB_TOKEN", "wrong")
        code, _, err = run("fetch", "o/r#1")
        assert code == 3 and "401" in err and "check GITHUB_TOKEN" in err and "wrong" not in err
        monkeypatch.setenv("GITHUB_TOKEN", "right")
        server.set_rate_limit(0, reset_in=3000)
        code, _, err = run("crawl", "o/r")
        assert code == 3 and "rate limit exhausted until" in err and len(err.splitlines()) == 1
    monkeypatch.setenv("SFTL_GITHUB_API_URL", "http://127.0.0.1:9")
    code, _, err = run("fetch", "o/r#1")
    assert code == 3 and "network down?" in err and len(err.splitlines()) == 1


def test_a_real_sftl_process_reports_a_bad_target_without_a_traceback(env: Path) -> None:
    done = subprocess.run([str(SFTL), "fetch", "https://github.com/o/r/pull/1"], capture_output=True, timeout=60,
                          env={**os.environ, "SFTL_HOME": str(env)})
    assert done.returncode == 2
    assert done.stderr.decode() == "sftl: https://github.com/o/r/pull/1 is a pull request, not an issue; sftl triages issues only\n"


def test_crawl_reports_the_repository_wide_comment_listing(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with GitHubServer() as server:
        server.add_issues("o/r", [make_issue("o/r", n, comments=2) for n in range(1, 41)])
        for n in range(1, 41):
            server.add_comments("o/r", n, [make_comment("o/r", n, n * 10 + k) for k in range(2)])
        monkeypatch.setenv("SFTL_GITHUB_API_URL", server.url)
        code, out, err = run("crawl", "o/r", "--json")
    figures = json.loads(out)
    assert code == 0, err
    assert figures["comment_mode"] == "listing" and figures["comment_pages"] == 1 and figures["comments_listed"] == 80
    assert figures["comment_threads"] == 0 and figures["requests"] == 2 and figures["requests_per_issue"] == 0.05
    code, out, _ = run("show", "o/r#40", "--json")
    assert [c["id"] for c in json.loads(out)["comments"]] == [400, 401]


def test_import_says_what_was_new_identical_or_only_new_comments(env: Path, tmp_path: Path) -> None:
    plain = make_issue("o/r", 1, comments=1)
    (tmp_path / "a.jsonl").write_text(json.dumps(plain) + "\n")
    (tmp_path / "b.jsonl").write_text(json.dumps({**plain, "comments": [make_comment("o/r", 1, 5)]}) + "\n")
    assert run("import", str(tmp_path / "a.jsonl"))[1].endswith(": 1 issues imported, 0 unchanged, 0 pull requests skipped, 0 bad lines\n")
    assert run("import", str(tmp_path / "a.jsonl"))[1].endswith(": 0 issues imported, 1 unchanged, 0 pull requests skipped, 0 bad lines\n")
    code, out, _ = run("import", str(tmp_path / "b.jsonl"))
    assert code == 0 and out.endswith(": 0 issues imported, 1 with new comments, 0 unchanged, 0 pull requests skipped, 0 bad lines\n")
    code, out, _ = run("import", str(tmp_path / "a.jsonl"), "--json")
    assert json.loads(out)["unchanged"] == 1 and json.loads(run("show", "o/r#1", "--json")[1])["comments"][0]["id"] == 5
