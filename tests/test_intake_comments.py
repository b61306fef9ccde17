"""Comment threads in a crawl: the repository-wide comment listing against per-issue fetching, resumable and exact."""

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
from sftl.errors import GitHubError
from sftl.intake import crawl
from sftl.store import Store

ROOT = Path(__file__).resolve().parent.parent
REPO = "o/r"


def ts(n: int) -> str:
    return f"2024-01-{1 + n // 1440:02d}T{n // 60 % 24:02d}:{n % 60:02d}:00Z"


def now_iso(offset: float = 0.0) -> str:
    return datetime.fromtimestamp(time.time() + offset, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def thread(number: int, count: int, first_id: int | None = None, updated: str | None = None) -> list[dict]:
    base = first_id if first_id is not None else number * 100
    return [make_comment(REPO, number, base + k, created_at=updated or f"2024-02-01T{k % 24:02d}:{number % 60:02d}:00Z")
            for k in range(count)]


def populate(gh: GitHubServer, n: int, counts: dict[int, int], prs: dict[int, int] | None = None) -> dict[int, list[int]]:
    """Issues 1..n (count comments where given) and pull requests (numbers above n, with comments)."""
    expected: dict[int, list[int]] = {}
    items = []
    for i in range(1, n + 1):
        c = counts.get(i, 0)
        items.append(make_issue(REPO, i, comments=c, updated_at=ts(i)))
        if c:
            gh.add_comments(REPO, i, thread(i, c))
            expected[i] = [i * 100 + k for k in range(c)]
    for number, c in (prs or {}).items():
        items.append(make_issue(REPO, number, comments=c, updated_at=ts(number), pull_request=True))
        gh.add_comments(REPO, number, thread(number, c))
    gh.add_issues(REPO, items)
    return expected


def settings_for(home: Path, gh: GitHubServer, **kw: object) -> Settings:
    base: dict[str, object] = {"max_retries": 2, "backoff_base": 0.01, "http_timeout": 2.0, "rate_limit_wait": 5.0}
    base.update(kw)
    return load_settings({}, home=home, api_url=gh.url, **base)


def stored_threads(store: Store) -> dict[int, list[int]]:
    return {i.number: [c.id for c in i.comments] for i in store.iter_issues(REPO) if i.comments}


@pytest.fixture
def gh():
    with GitHubServer() as server:
        yield server


def test_first_crawl_lists_comments_100_per_request_instead_of_one_request_per_thread(gh: GitHubServer, tmp_path: Path) -> None:
    # 60% of 300 issues carry 1..5 comments: 180 threads, 462 comments -> 5 listing pages
    counts = {i: 1 + i % 7 % 5 for i in range(1, 301) if i % 5 < 3}
    expected = populate(gh, 300, counts)
    s = settings_for(tmp_path, gh)
    with Store(s.db_path) as store:
        stats = crawl(REPO, s, store, state="all")
        assert stored_threads(store) == expected
        assert not store.thread_queue(REPO) and stats.done
    assert stats.comment_mode == "listing" and stats.comment_threads == 0
    assert stats.comment_pages == 5 == gh.count(r"/issues/comments$")
    assert stats.comments_listed == sum(counts.values()) == 462
    assert stats.requests == 3 + 5 and gh.count(r"/issues/\d+/comments$") == 0


def test_a_second_first_crawl_revalidates_comment_pages_with_etags(gh: GitHubServer, tmp_path: Path) -> None:
    counts = {i: 2 for i in range(1, 201) if i % 2}
    populate(gh, 200, counts)
    gh.add_issues(REPO, [make_issue(REPO, i, state="closed", comments=2, updated_at=ts(i)) for i in range(1, 201) if i % 4 == 1])
    s = settings_for(tmp_path, gh)
    with Store(s.db_path) as store:
        crawl(REPO, s, store, state="open")
        before = gh.count(r"/issues/comments$", status=304)
        closed = crawl(REPO, s, store, state="closed")  # another query, the same repository-wide listing
        assert gh.count(r"/issues/comments$", status=304) - before == closed.comment_pages == 2
        assert closed.not_modified == 2 and len(stored_threads(store)) == 100


def test_incremental_crawl_lists_only_comments_since_the_mark_and_refetches_a_shrunk_thread(gh: GitHubServer, tmp_path: Path) -> None:
    counts = {i: 2 for i in range(1, 201)}
    expected = populate(gh, 200, counts)
    s = settings_for(tmp_path, gh)
    with Store(s.db_path) as store:
        first = crawl(REPO, s, store, state="all")
        assert stored_threads(store) == expected
        # 10 issues get a third comment; issue 50 loses one (a count that shrinks cannot be listed)
        for n in range(10, 110, 10):
            fresh = make_comment(REPO, n, n * 100 + 2, body="new", created_at=now_iso(1))
            gh.add_comments(REPO, n, [*thread(n, 2), fresh])
            gh.add_issues(REPO, [make_issue(REPO, n, comments=3, updated_at=now_iso(1))])
            expected[n] = [n * 100, n * 100 + 1, n * 100 + 2]
        gh.add_comments(REPO, 55, thread(55, 2)[1:])
        gh.add_issues(REPO, [make_issue(REPO, 55, comments=1, updated_at=now_iso(1))])
        expected[55] = [5501]
        before = len(gh.requests)
        stats = crawl(REPO, s, store, state="all")
        new = gh.requests[before:]
        assert stats.issues_seen == 11 and stats.comment_mode == "listing"
        listing = [r for r in new if r.path.endswith("/issues/comments")]
        assert len(listing) == 1 and listing[0].query["since"] == first.high_water
        assert stats.comments_listed == 10
        # only the shrunk thread is fetched on its own
        assert [r.path for r in new if r.path.endswith("/comments") and r not in listing] == [f"/repos/{REPO}/issues/55/comments"]
        assert stored_threads(store) == expected and not store.thread_queue(REPO)


def test_per_issue_fetching_is_kept_where_the_listing_would_cost_more(gh: GitHubServer, tmp_path: Path) -> None:
    """A repository whose comments are mostly on pull requests: the listing's first page reveals it."""
    counts = {i: 1 for i in range(1, 31)}
    expected = populate(gh, 30, counts, prs={1000 + k: 100 for k in range(40)})  # 4000 PR comments
    s = settings_for(tmp_path, gh)
    with Store(s.db_path) as store:
        stats = crawl(REPO, s, store, state="all")
        assert stored_threads(store) == expected and stats.done
    assert stats.comment_mode == "per-issue" and stats.comment_pages == 1  # one probe, then thread by thread
    assert stats.requests <= 1 + 1 + 30 and stats.comment_threads == 30 - stats.comments_listed


def test_a_listing_of_unknown_size_stops_once_it_costs_what_per_issue_fetching_would(gh: GitHubServer, tmp_path: Path) -> None:
    counts = {i: 1 for i in range(1, 31)}
    expected = populate(gh, 30, counts, prs={1000 + k: 100 for k in range(40)})
    gh.link_last = False
    s = settings_for(tmp_path, gh)
    with Store(s.db_path) as store:
        stats = crawl(REPO, s, store, state="all")
        assert stored_threads(store) == expected and stats.done and store.comment_listing(REPO) is None
    assert stats.comment_pages == 30 and stats.comment_threads == 30 - stats.comments_listed
    assert stats.requests <= 1 + 30 + 30  # at worst twice what one request per thread costs


def test_a_handful_of_threads_skip_the_listing(gh: GitHubServer, tmp_path: Path) -> None:
    expected = populate(gh, 150, {3: 2, 140: 4})
    s = settings_for(tmp_path, gh)
    with Store(s.db_path) as store:
        stats = crawl(REPO, s, store, state="all")
        assert stored_threads(store) == expected
    assert stats.comment_mode == "per-issue" and stats.comment_pages == 0 and stats.comment_threads == 2


def test_a_failed_comment_listing_resumes_at_its_cursor(gh: GitHubServer, tmp_path: Path) -> None:
    counts = {i: 3 for i in range(1, 201)}
    expected = populate(gh, 200, counts)
    gh.inject(r"/issues/comments$", status=502, times=10, after=3)  # page 4 of 6 fails, retries too
    s = settings_for(tmp_path, gh)
    with Store(s.db_path) as store:
        with pytest.raises(GitHubError, match="server error 502.*run the same crawl again to resume"):
            crawl(REPO, s, store, state="all")
        assert store.comment_listing(REPO)["next_url"].endswith("page=4")  # type: ignore[index]
        gh.faults.clear()
        before = len(gh.requests)
        stats = crawl(REPO, s, store, state="all")
        pages = [r.query.get("page") for r in gh.requests[before:] if r.path.endswith("/issues/comments")]
        assert pages == ["4", "5", "6"] and stats.done
        assert stored_threads(store) == expected and store.comment_listing(REPO) is None


CRAWLER = """
import sys
from sftl.config import load_settings
from sftl.intake import crawl
from sftl.store import Store
s = load_settings({}, home=sys.argv[1], api_url=sys.argv[2], max_retries=2, backoff_base=0.01)
with Store(s.db_path) as store:
    crawl("o/r", s, store, state="all")
"""


def test_killed_while_listing_comments_then_resumed_has_every_comment_exactly_once(tmp_path: Path) -> None:
    counts = {i: 3 for i in range(1, 601) if i % 5 < 3}  # 360 threads, 1080 comments, 11 pages
    with GitHubServer(page_delay=0.1) as gh:
        expected = populate(gh, 600, counts)
        home = tmp_path / "home"
        proc = subprocess.Popen([sys.executable, "-c", CRAWLER, str(home), gh.url], cwd=ROOT,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
        db = home / "sftl.db"
        deadline = time.monotonic() + 60
        listed = 0
        while time.monotonic() < deadline and proc.poll() is None:
            if db.exists():
                con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
                try:
                    listed = con.execute("SELECT COUNT(*) FROM comments").fetchone()[0]
                except sqlite3.OperationalError:
                    listed = 0
                finally:
                    con.close()
            if listed >= 300:
                break
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert proc.returncode == -signal.SIGKILL, "the crawl finished before it could be killed"
        s = load_settings({}, home=home, api_url=gh.url, max_retries=2, backoff_base=0.01, http_timeout=5)
        with Store(s.db_path) as store:
            killed_at = store._db.execute("SELECT COUNT(*) FROM comments").fetchone()[0]
            assert 0 < killed_at < 1080 and killed_at % 100 == 0  # whole listing pages only
            assert store.count_issues(REPO) == 600 and store.comment_listing(REPO) is not None
            before = len(gh.requests)
            stats = crawl(REPO, s, store, state="all")
            assert stats.done and stats.comment_mode == "listing" and stats.comment_threads == 0
            first_page = next(r for r in gh.requests[before:] if r.path.endswith("/issues/comments"))
            assert first_page.query["page"] == str(killed_at // 100 + 1)  # from the cursor, not from the start
            assert stored_threads(store) == expected
            ids = store._db.execute("SELECT id FROM comments ORDER BY id").fetchall()
            assert len(ids) == len({r[0] for r in ids}) == 1080 and [i.number for i in store.iter_issues(REPO)] == list(range(1, 601))
