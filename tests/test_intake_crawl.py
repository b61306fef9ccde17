"""sftl.intake.crawl against the loopback GitHub server: pagination, faults, incremental, resumable, crash-safe."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from ghserver import GitHubServer, make_comment, make_issue

from sftl.config import Settings, load_settings
from sftl.errors import GitHubError, RateLimitError
from sftl.intake import CrawlProgress, crawl, crawl_query
from sftl.store import Store

ROOT = Path(__file__).resolve().parent.parent


def ts(n: int) -> str:
    """A distinct, increasing updated_at per issue number."""
    return f"2024-01-{1 + n // 1440:02d}T{n // 60 % 24:02d}:{n % 60:02d}:00Z"


def populate(gh: GitHubServer, repo: str, n: int, *, commented_every: int = 0, prs: tuple[int, ...] = ()) -> None:
    issues = []
    for i in range(1, n + 1):
        count = 2 if commented_every and i % commented_every == 0 else 0
        issues.append(make_issue(repo, i, comments=count, updated_at=ts(i), pull_request=i in prs))
        if count:
            gh.add_comments(repo, i, [make_comment(repo, i, i * 10 + k) for k in range(count)])
    gh.add_issues(repo, issues)


def settings_for(home: Path, gh: GitHubServer, **kw: object) -> Settings:
    base: dict[str, object] = {"max_retries": 3, "backoff_base": 0.01, "http_timeout": 0.5, "rate_limit_wait": 5.0}
    base.update(kw)
    return load_settings({}, home=home, api_url=gh.url, **base)


@pytest.fixture
def gh():
    with GitHubServer() as server:
        yield server


def test_full_crawl_stores_every_issue_once_skips_prs_and_lists_comments_repo_wide(gh: GitHubServer, tmp_path: Path) -> None:
    populate(gh, "o/r", 420, commented_every=50, prs=(7, 300))
    s = settings_for(tmp_path, gh)
    seen: list[CrawlProgress] = []
    with Store(s.db_path) as store:
        stats = crawl("o/r", s, store, state="all", progress=seen.append)
        numbers = [i.number for i in store.iter_issues("o/r")]
        assert numbers == [n for n in range(1, 421) if n not in (7, 300)]
        assert store.get_issue("o/r", 7) is None
        assert [c.id for c in store.get_issue("o/r", 50).comments] == [500, 501]  # type: ignore[union-attr]
    assert stats.pulls_skipped == 2 and stats.issues_seen == 418 and stats.done
    # 7 threads owed (50..400, but 300 is a PR): one page of the repository-wide listing, not 7 requests
    assert stats.pages == 5 and stats.comment_threads == 0 and stats.comment_mode == "listing"
    assert stats.comment_pages == 1 and stats.comments_listed == 14  # PR 300's 2 comments are not stored
    assert gh.count(r"/repos/o/r/issues/\d+/comments$") == 0 and gh.count(r"/repos/o/r/issues$") == 5
    assert stats.requests == 6
    listing = [r for r in gh.requests if r.path == "/repos/o/r/issues/comments"]
    assert listing[0].query == {"sort": "updated", "direction": "asc", "per_page": "100"}
    # the mark is when the crawl began by the server's clock, less a minute of overlap
    mark = datetime.strptime(stats.high_water or "", "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    assert 55 <= time.time() - mark <= 70
    assert [(p.phase, p.page) for p in seen] == [("issues", n) for n in range(1, 6)] + [("comments", 1)]
    assert seen[0].total_pages == 5
    first = [r for r in gh.requests if r.path == "/repos/o/r/issues"][0]
    assert first.query["per_page"] == "100" and first.query["sort"] == "created" and first.query["direction"] == "asc"


def test_crawl_survives_502_stall_and_secondary_limit_mid_crawl(gh: GitHubServer, tmp_path: Path) -> None:
    populate(gh, "o/r", 500)
    gh.inject(r"/repos/o/r/issues$", status=502, times=1, after=1)
    gh.inject(r"/repos/o/r/issues$", delay=1.5, times=1, after=2)
    gh.inject(r"/repos/o/r/issues$", status=403, headers={"Retry-After": "0.2"}, times=1, after=3,
              body=b'{"message":"You have exceeded a secondary rate limit"}')
    s = settings_for(tmp_path, gh)
    with Store(s.db_path) as store:
        stats = crawl("o/r", s, store, state="all")
        assert [i.number for i in store.iter_issues("o/r")] == list(range(1, 501))
    assert stats.retries == 2 and stats.waited_s >= 0.2 and stats.done


def now_iso(offset: float = 0.0) -> str:
    return datetime.fromtimestamp(time.time() + offset, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_incremental_crawl_asks_only_for_what_changed_and_refetches_changed_threads(gh: GitHubServer, tmp_path: Path) -> None:
    populate(gh, "o/r", 250, commented_every=100)
    s = settings_for(tmp_path, gh)
    with Store(s.db_path) as store:
        first = crawl("o/r", s, store, state="all")
        # two issues change after the crawl: one gets a new comment, one a new title
        gh.add_issues("o/r", [make_issue("o/r", 100, comments=3, updated_at=now_iso(1)),
                              make_issue("o/r", 5, title="renamed", updated_at=now_iso(2))])
        gh.add_comments("o/r", 100, [make_comment("o/r", 100, k) for k in (1000, 1001, 1002)])
        before = len(gh.requests)
        stats = crawl("o/r", s, store, state="all")
        new = gh.requests[before:]
        assert new[0].query["since"] == first.high_water
        assert stats.issues_seen == 2
        assert stats.comment_threads == 1 and [r.path for r in new if r.path.endswith("/comments")] == ["/repos/o/r/issues/100/comments"]
        assert store.get_issue("o/r", 5).title == "renamed"  # type: ignore[union-attr]
        assert len(store.get_issue("o/r", 100).comments) == 3  # type: ignore[union-attr]
        assert store.count_issues("o/r") == 250


def test_issues_updated_while_the_crawl_runs_are_neither_skipped_nor_lost(gh: GitHubServer, tmp_path: Path) -> None:
    """A live repository: issues on pages already read change mid-crawl. Nothing shifts across
    page boundaries (creation order), and the next incremental crawl picks the changes up."""
    populate(gh, "o/r", 400)
    s = settings_for(tmp_path, gh)

    def meddle(p: CrawlProgress) -> None:
        if p.page == 1:
            gh.add_issues("o/r", [make_issue("o/r", n, title=f"edited {n}", updated_at=now_iso(1)) for n in (3, 50, 99)])

    with Store(s.db_path) as store:
        crawl("o/r", s, store, state="all", progress=meddle)
        assert [i.number for i in store.iter_issues("o/r")] == list(range(1, 401))
        again = crawl("o/r", s, store, state="all")
        assert again.issues_seen == 3
        assert [store.get_issue("o/r", n).title for n in (3, 50, 99)] == ["edited 3", "edited 50", "edited 99"]  # type: ignore[union-attr]


def test_limit_then_resume_continues_from_the_saved_cursor(gh: GitHubServer, tmp_path: Path) -> None:
    populate(gh, "o/r", 350)
    s = settings_for(tmp_path, gh)
    with Store(s.db_path) as store:
        first = crawl("o/r", s, store, state="all", limit=150)
        assert first.issues_seen == 150 and not first.done
        state = store.crawl_state("o/r", crawl_query("all", None))
        assert state is not None and "page=2" in state["next_url"]
        before = len(gh.requests)
        second = crawl("o/r", s, store, state="all")
        assert second.resumed and second.done
        assert gh.requests[before].query.get("page") == "2"
        assert [i.number for i in store.iter_issues("o/r")] == list(range(1, 351))


def test_rate_limit_mid_crawl_keeps_what_was_stored_and_resumes(gh: GitHubServer, tmp_path: Path) -> None:
    populate(gh, "o/r", 300)
    gh.set_rate_limit(2, reset_in=3000)
    s = settings_for(tmp_path, gh, rate_limit_wait=1)
    with Store(s.db_path) as store:
        with pytest.raises(RateLimitError, match="200 issues stored in this run; run the same crawl again to resume"):
            crawl("o/r", s, store, state="all")
        assert store.count_issues("o/r") == 200
        gh.set_rate_limit(5000)
        stats = crawl("o/r", s, store, state="all")
        assert stats.resumed and stats.issues_seen == 100
        assert [i.number for i in store.iter_issues("o/r")] == list(range(1, 301))


def test_labels_and_state_reach_the_api_and_are_separate_crawls(gh: GitHubServer, tmp_path: Path) -> None:
    gh.add_issues("o/r", [make_issue("o/r", 1, labels=("module: cuda",)), make_issue("o/r", 2, state="closed"),
                          make_issue("o/r", 3)])
    s = settings_for(tmp_path, gh)
    with Store(s.db_path) as store:
        stats = crawl("o/r", s, store, labels="module: cuda")
        assert stats.issues_seen == 1 and gh.requests[-1].query["labels"] == "module: cuda"
        stats = crawl("o/r", s, store, state="closed")
        assert stats.issues_seen == 1 and store.get_issue("o/r", 2).state == "closed"  # type: ignore[union-attr]
        assert store.crawl_state("o/r", crawl_query("open", "module: cuda"))["done"] == 1  # type: ignore[index]


def test_unknown_repo_is_not_found(gh: GitHubServer, tmp_path: Path) -> None:
    s = settings_for(tmp_path, gh)
    with Store(s.db_path) as store, pytest.raises(GitHubError, match="not found"):
        crawl("no/such", s, store)


CRAWLER = """
import sys
from sftl.config import load_settings
from sftl.intake import crawl
from sftl.store import Store
s = load_settings({}, home=sys.argv[1], api_url=sys.argv[2], max_retries=2, backoff_base=0.01)
with Store(s.db_path) as store:
    crawl("o/r", s, store, state="all")
"""


def test_killed_mid_crawl_then_resumed_has_every_issue_exactly_once(tmp_path: Path) -> None:
    """SIGKILL a real crawling process between pages; the rerun resumes from the committed cursor."""
    total = 2000
    with GitHubServer(page_delay=0.1) as gh:
        populate(gh, "o/r", total)
        home = tmp_path / "home"
        proc = subprocess.Popen([sys.executable, "-c", CRAWLER, str(home), gh.url], cwd=ROOT,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
        db = home / "sftl.db"
        deadline = time.monotonic() + 60
        stored = 0
        while time.monotonic() < deadline:
            if db.exists():
                con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
                try:
                    stored = con.execute("SELECT COUNT(*) FROM issues").fetchone()[0]
                except sqlite3.OperationalError:
                    stored = 0  # not created yet
                finally:
                    con.close()
            if stored >= 500 or proc.poll() is not None:
                break
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert proc.returncode == -signal.SIGKILL, "the crawl finished before it could be killed"
        s = load_settings({}, home=home, api_url=gh.url, max_retries=2, backoff_base=0.01, http_timeout=5)
        with Store(s.db_path) as store:
            killed_at = store.count_issues("o/r")
            assert 0 < killed_at < total and killed_at % 100 == 0  # whole pages only: no half-written page
            listing_before = gh.count(r"/repos/o/r/issues$")
            stats = crawl("o/r", s, store, state="all")
            assert stats.resumed
            numbers = [i.number for i in store.iter_issues("o/r")]
        assert numbers == list(range(1, total + 1))  # every issue, exactly once, no gaps
        resumed_pages = gh.count(r"/repos/o/r/issues$") - listing_before
        assert resumed_pages <= total // 100 - killed_at // 100 + 1  # it did not start over
