"""`sftl history crawl` against the loopback GitHub: merged, unmerged and reverted PRs, one PR fixing two issues, a commit fix, paginated files, incremental and resumable."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from ghserver import GitHubServer, make_commit_event, make_cross_reference, make_issue, make_pull

from sftl.cli import main
from sftl.config import Settings, load_settings
from sftl.errors import GitHubError
from sftl.history_crawl import closing_references, crawl_fixes
from sftl.history_io import iter_fixes
from sftl.store import Store

R = "o/r"
SHA = "abc123def4567890abc123def4567890abc12345"


def settings_for(home: Path, gh: GitHubServer) -> Settings:
    return load_settings({}, home=home, api_url=gh.url, max_retries=1, backoff_base=0.01, http_timeout=2.0, rate_limit_wait=5.0)


def backlog(gh: GitHubServer) -> dict[int, set[str]]:
    """Closed issues with every way a fix shows; returns issue -> the fixes to be found ("pr:N" / "commit:SHA")."""
    closed = "2023-04-01T00:00:00Z"
    gh.add_issues(R, [make_issue(R, n, state="closed", updated_at=closed, title=f"bug {n}: cumsum wrong on CUDA")
                      for n in range(1, 10)] + [make_issue(R, 10, state="open")] + [make_issue(R, 50, state="closed", pull_request=True)])
    # 1: a merged PR cross-references it (the timeline says merged); its tests and docs are dropped
    p101 = make_pull(R, 101, title="Fix cumsum on CUDA", merged_at="2023-03-01T00:00:00Z")
    gh.add_pull(R, p101, ["aten/src/ATen/native/cuda/ScanKernels.cu", "test/test_ops.py", "docs/source/notes.rst"])
    gh.add_timeline(R, 1, [make_cross_reference(R, p101), make_commit_event("closed", None)])
    # 2: an unmerged PR and a merged one whose cross-reference does not say (fetched to check)
    p102 = make_pull(R, 102, title="Attempt", merged_at=None)
    p103 = make_pull(R, 103, title="Real fix", merged_at="2023-03-02T00:00:00Z", merge_commit_sha="f" * 40)
    gh.add_pull(R, p102, ["aten/src/ATen/native/cuda/Wrong.cu"])
    gh.add_pull(R, p103, ["aten/src/ATen/native/cuda/Right.cu"])
    ref103 = make_cross_reference(R, p103)
    del ref103["source"]["issue"]["pull_request"]["merged_at"]
    gh.add_timeline(R, 2, [make_cross_reference(R, p102), ref103, make_commit_event("closed", "f" * 40)])
    # 3: merged, reverted (the issue reopened), relanded
    p104 = make_pull(R, 104, title="Fix scan", merged_at="2023-02-01T00:00:00Z")
    p105 = make_pull(R, 105, title='Revert "Fix scan"', merged_at="2023-02-02T00:00:00Z", body="Reverts o/r#104")
    p106 = make_pull(R, 106, title="Fix scan, again", merged_at="2023-02-10T00:00:00Z")
    for p, f in ((p104, "a/Scan.cu"), (p105, "a/Scan.cu"), (p106, "a/ScanUtils.cuh")):
        gh.add_pull(R, p, [f])
    gh.add_timeline(R, 3, [make_cross_reference(R, p104), make_commit_event("closed", None, "2023-02-01T00:00:01Z"),
                           make_cross_reference(R, p105), make_commit_event("reopened", None, "2023-02-02T00:00:01Z"),
                           make_cross_reference(R, p106), make_commit_event("closed", None, "2023-02-10T00:00:01Z")])
    # 4 and 5: one PR's body fixes both; their timelines are silent
    p107 = make_pull(R, 107, title="Fix two", merged_at="2023-03-05T00:00:00Z", body="Fixes #4\n\nalso closes o/r#5 and fixes other/x#4")
    gh.add_pull(R, p107, ["torch/nn/functional.py"])
    # 6: a commit closed it, no pull request
    gh.add_commit_detail(R, SHA, "2023-03-07T12:00:00Z", ["aten/src/ATen/native/cpu/ScanKernels.cpp", "test/test_x.py"])
    gh.add_timeline(R, 6, [make_commit_event("referenced", SHA), make_commit_event("closed", SHA)])
    # 7: closed without a fix
    gh.add_timeline(R, 7, [make_commit_event("closed", None)])
    # 8: a PR of 250 changed files (three pages of /files)
    p108 = make_pull(R, 108, title="Big fix", merged_at="2023-03-09T00:00:00Z")
    gh.add_pull(R, p108, [f"aten/src/ATen/native/cuda/F{i:03d}.cu" for i in range(250)])
    gh.add_timeline(R, 8, [make_cross_reference(R, p108)])
    # 9: fixed only by tests
    p109 = make_pull(R, 109, title="Add a test", merged_at="2023-03-10T00:00:00Z")
    gh.add_pull(R, p109, ["test/test_cuda.py"])
    gh.add_timeline(R, 9, [make_cross_reference(R, p109)])
    return {1: {"pr:101"}, 2: {"pr:103"}, 3: {"pr:106"}, 4: {"pr:107"}, 5: {"pr:107"}, 6: {f"commit:{SHA}"}, 8: {"pr:108"}}


def found(store: Store) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for rec in iter_fixes(store, R):
        assert rec.issue is not None
        out.setdefault(rec.issue, []).append(f"pr:{rec.pr}" if rec.pr else f"commit:{rec.commit}")
    return out


@pytest.fixture
def gh():
    with GitHubServer() as server:
        yield server


def test_every_fix_is_found_exactly_once_with_its_source_files(gh: GitHubServer, tmp_path: Path) -> None:
    expected = backlog(gh)
    s = settings_for(tmp_path, gh)
    with Store(s.db_path) as store:
        stats = crawl_fixes(R, s, store)
        got = found(store)
        assert {k: sorted(v) for k, v in got.items()} == {k: sorted(v) for k, v in expected.items()}
        assert all(len(v) == 1 for v in got.values())  # exactly once each
        recs = {r.issue: r for r in iter_fixes(store, R)}
        assert recs[1].files == ("aten/src/ATen/native/cuda/ScanKernels.cu",)  # tests and docs dropped
        assert recs[1].fixed_on == "2023-03-01" and "merged 2023-03-01" in recs[1].evidence
        assert recs[6].files == ("aten/src/ATen/native/cpu/ScanKernels.cpp",) and recs[6].fixed_on == "2023-03-07"
        assert len(recs[8].files) == 250  # every page of /files
        assert recs[1].title == "bug 1: cumsum wrong on CUDA" and recs[1].issue_created_at
    assert stats.issues_examined == 9 and stats.issues_fixed == 7 and stats.fixes_stored == 7
    assert stats.by_pull == 6 and stats.by_commit == 1 and stats.no_source_files == 1
    assert stats.done
    assert gh.count(r"/pulls/107/files$") == 1  # one PR fixing two issues: its files fetched once
    assert gh.count(r"/pulls/102$") == 0 and gh.count(r"/pulls/103$") == 1  # only the one the timeline left open
    assert gh.count(r"/pulls/108/files$") == 3
    assert stats.requests == len(gh.requests)


def test_a_rerun_examines_only_issues_updated_since_and_revalidates_with_etags(gh: GitHubServer, tmp_path: Path) -> None:
    backlog(gh)
    s = settings_for(tmp_path, gh)
    with Store(s.db_path) as store:
        crawl_fixes(R, s, store)
        first = len(gh.requests)
        again = crawl_fixes(R, s, store)
        assert again.issues_examined == 0 and again.issues_skipped == 9
        assert gh.count("/timeline") == 9  # one per closed issue, in the first run only
        assert gh.count(r"/pulls$", status=304) == 1  # the pull-request listing revalidated by its ETag
        assert len(gh.requests) - first == again.requests
        # issue 7 gets its fix later: updated, examined again, found
        p110 = make_pull(R, 110, title="Fix 7", merged_at="2023-05-01T00:00:00Z", updated_at="2023-05-01T00:00:00Z")
        gh.add_pull(R, p110, ["aten/src/ATen/native/cuda/Seven.cu"])
        gh.add_timeline(R, 7, [make_cross_reference(R, p110), make_commit_event("closed", None)])
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # updated after the last crawl began
        gh.add_issues(R, [make_issue(R, 7, state="closed", updated_at=now, title="bug 7")])
        third = crawl_fixes(R, s, store)
        assert third.issues_examined == 1 and third.issues_fixed == 1
        assert found(store)[7] == ["pr:110"]


def test_an_interrupted_crawl_resumes_where_it_stopped(gh: GitHubServer, tmp_path: Path) -> None:
    expected = backlog(gh)
    gh.inject(r"/issues/6/timeline$", status=500, times=10)
    s = settings_for(tmp_path, gh)
    with Store(s.db_path) as store:
        with pytest.raises(GitHubError, match="run the same crawl again to resume"):
            crawl_fixes(R, s, store)
        kept = found(store)
        assert set(kept) == {1, 2, 3, 4, 5}  # what was examined before the failure is kept
        gh.faults.clear()
        stats = crawl_fixes(R, s, store)
        assert stats.issues_examined == 4 and stats.done
        assert {k: sorted(v) for k, v in found(store).items()} == {k: sorted(v) for k, v in expected.items()}


def test_the_cli_prints_the_request_count_in_json(gh: GitHubServer, tmp_path: Path) -> None:
    backlog(gh)
    out, err = io.StringIO(), io.StringIO()
    code = main(["history", "crawl", R, "--json", "--home", str(tmp_path), "--api-url", gh.url], out=out, err=err)
    assert code == 0, err.getvalue()
    payload = json.loads(out.getvalue())
    assert payload["requests"] == len(gh.requests) and payload["issues_fixed"] == 7
    assert payload["requests_per_fixed_issue"] == round(len(gh.requests) / 7, 3)
    assert payload["stored_total"] == 7
    out = io.StringIO()
    assert main(["history", "export", "--labelled", "--home", str(tmp_path)], out=out, err=err) == 0
    rows = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [r["url"].rsplit("/", 1)[1] for r in rows] == ["1", "2", "3", "4", "5", "6", "8"]
    assert rows[0]["truth_files"] == ["aten/src/ATen/native/cuda/ScanKernels.cu"] and rows[0]["issue"]["number"] == 1


def test_closing_references_read_the_keywords_github_reads() -> None:
    text = "Fixes #12. closes: #3; Resolved o/r#7, fixes https://github.com/o/r/issues/9, fixes x/y#4, refs #5, fix#6"
    assert closing_references(text, "o/r") == [12, 3, 7, 9, 6]


def test_issues_closed_as_not_planned_cost_no_request_unless_a_pull_request_says_it_fixes_them(gh: GitHubServer, tmp_path: Path) -> None:
    backlog(gh)
    dup = make_issue(R, 11, state="closed", updated_at="2023-04-01T00:00:00Z")
    dup["state_reason"] = "not_planned"
    claimed = make_issue(R, 12, state="closed", updated_at="2023-04-01T00:00:00Z")
    claimed["state_reason"] = "not_planned"
    gh.add_issues(R, [dup, claimed])
    p111 = make_pull(R, 111, title="Fix 12 anyway", merged_at="2023-03-20T00:00:00Z", body="Closes #12")
    gh.add_pull(R, p111, ["aten/src/ATen/native/Twelve.cpp"])
    s = settings_for(tmp_path, gh)
    with Store(s.db_path) as store:
        stats = crawl_fixes(R, s, store)
        assert found(store)[12] == ["pr:111"] and 11 not in found(store)
    assert stats.issues_not_planned == 1 and gh.count(r"/issues/11/timeline$") == 0
    assert gh.count(r"/issues/12/timeline$") == 1
