"""`sftl triage --since last`: only the issues new or edited since the store's last crawl of the repository."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from ghserver import GitHubServer, make_issue

from sftl.cli import main

REPO = "o/r"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def gh(sftl_home: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SFTL_MAX_RETRIES", "1")
    monkeypatch.setenv("SFTL_BACKOFF", "0.01")
    with GitHubServer() as server:
        server.add_issues(REPO, [make_issue(REPO, n, body="The docs of torch.load have a typo.") for n in range(1, 5)])
        monkeypatch.setenv("SFTL_GITHUB_API_URL", server.url)
        yield server


def test_since_last_takes_only_what_changed_after_the_last_crawl(gh: GitHubServer, tmp_path: Path) -> None:
    assert run("crawl", REPO)[0] == 0
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    edited = {**gh.issues[REPO][2], "body": "The docs of torch.save have a typo too.", "updated_at": now}
    gh.add_issues(REPO, [edited, make_issue(REPO, 5, body="torch.load docs typo", created_at=now)])
    code, out, err = run("triage", REPO, "--since", "last", "--jobs", "1", "--out", str(tmp_path / "r"), "--json")
    assert code == 0, err
    assert json.loads(out)["issues"] == 2  # #2 edited and #5 new; #1, #3, #4 untouched since the crawl
    rows = json.loads((tmp_path / "r" / "triage.json").read_text("utf-8"))
    numbers = sorted(r["issue"]["number"] for r in rows["rows"])
    assert numbers == [2, 5]


def test_since_last_without_an_earlier_crawl_is_bad_input(gh: GitHubServer, tmp_path: Path) -> None:
    code, out, err = run("triage", REPO, "--since", "last", "--out", str(tmp_path / "r"))
    assert code == 2 and out == "" and gh.requests == []
    assert err == (f"sftl: --since last: the store holds no crawl of {REPO} (open issues) yet; give a date, or run "
                   f"`sftl crawl {REPO}` once first\n")
