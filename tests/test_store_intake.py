"""The store's intake side: idempotent upserts, newer-wins, comment threads, and all-or-nothing crawl pages."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
from ghserver import make_issue

from sftl.errors import StoreError
from sftl.github import issue_from_json
from sftl.model import Comment
from sftl.store import SCHEMA_VERSION, Store


def issue(n: int, updated: str = "2024-01-01T00:00:00Z", **kw: object):
    return issue_from_json(make_issue("o/r", n, updated_at=updated, **kw))  # type: ignore[arg-type]


def test_upsert_is_idempotent_and_an_older_copy_never_wins(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        new = replace(issue(1, "2024-02-01T00:00:00Z"), title="new")
        assert store.upsert_issue(new)
        assert store.upsert_issue(new)
        assert not store.upsert_issue(replace(issue(1, "2024-01-01T00:00:00Z"), title="old"))
        assert store.get_issue("o/r", 1).title == "new"  # type: ignore[union-attr]
        assert store.count_issues() == 1


def test_threads_replace_keep_or_clear_comments(tmp_path: Path) -> None:
    c = [Comment(1, "a", "x", "2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z")]
    with Store(tmp_path / "s.db") as store:
        store.upsert_threads([(issue(1), None, c)])
        store.upsert_threads([(issue(1), None, None)])  # None keeps the thread
        assert store.get_issue("o/r", 1).comments == tuple(c)  # type: ignore[union-attr]
        assert store.comment_counts("o/r", [1, 2]) == {1: (0, "2024-01-01T00:00:00Z")}
        # the same version again with an empty thread: a thread fetched later is never lost
        assert store.upsert_threads([(issue(1), None, [])]) == 0
        assert store.get_issue("o/r", 1).comments == tuple(c)  # type: ignore[union-attr]
        store.upsert_threads([(issue(1, "2024-02-01T00:00:00Z"), None, [])])  # a newer version's empty thread clears it
        assert store.get_issue("o/r", 1).comments == ()  # type: ignore[union-attr]
        store.upsert_threads([(issue(1, "2024-02-01T00:00:00Z"), None, c)])
        store.upsert_threads([(issue(1, "2024-02-01T00:00:00Z"), None, [])], authoritative=True)  # fetched just now
        assert store.get_issue("o/r", 1).comments == ()  # type: ignore[union-attr]


def test_a_crawl_page_and_its_cursor_commit_together_or_not_at_all(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        store.save_crawl_page("o/r", "q", [(issue(1), None, None)], "http://x/?page=2", "2024-01-01T00:00:00Z", False)
        broken = replace(issue(2), title=None)  # type: ignore[arg-type]  # NOT NULL violation mid-page
        with pytest.raises(sqlite3.IntegrityError):
            store.save_crawl_page("o/r", "q", [(issue(3), None, None), (broken, None, None)], "http://x/?page=3", None, False)
        assert [i.number for i in store.iter_issues()] == [1]
        assert store.crawl_state("o/r", "q")["next_url"] == "http://x/?page=2"  # type: ignore[index]


def test_raw_objects_and_size(tmp_path: Path) -> None:
    raw = make_issue("o/r", 5)
    with Store(tmp_path / "s.db") as store:
        store.upsert_issue(issue_from_json(raw), raw)
        assert store.get_raw("o/r", 5) == raw
        assert [r for _, r in store.iter_issues_raw("o/r")] == [raw]
        assert store.size_bytes() > 0


def test_a_newer_schema_or_a_corrupt_file_is_a_store_error(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        with store.transaction() as db:
            db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(StoreError, match="newer than this sftl"):
        Store(tmp_path / "s.db")
    (tmp_path / "junk.db").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="cannot open the store"):
        Store(tmp_path / "junk.db")


def test_labels_are_a_table_and_a_version_1_store_is_migrated(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        store.upsert_issue(issue(1, labels=("module: cuda", "triaged")))
        store.upsert_issue(issue(2, labels=("triaged",)))
        assert [i.number for i in store.iter_issues(label="triaged")] == [1, 2]
        assert [i.number for i in store.iter_issues(label="module: cuda")] == [1]
        store.upsert_issue(issue(1, "2024-05-01T00:00:00Z", labels=()))
        assert [i.number for i in store.iter_issues(label="module: cuda")] == []
        with store.transaction() as db:  # make it look like a version-1 store
            db.execute("DELETE FROM issue_labels")
            db.execute("UPDATE meta SET value='1' WHERE key='schema_version'")
    with Store(tmp_path / "s.db") as store:
        assert [i.number for i in store.iter_issues(label="triaged")] == [2]
        assert store._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)


def test_comment_pages_touch_only_stored_issues_and_an_edit_wins(tmp_path: Path) -> None:
    def c(cid: int, body: str, updated: str) -> Comment:
        return Comment(cid, "a", body, "2024-01-01T00:00:00Z", updated)

    with Store(tmp_path / "s.db") as store:
        store.upsert_threads([(issue(1, comments=2), None, None)])
        applied = store.save_comment_page(
            "o/r", [(1, c(10, "first", "2024-01-02T00:00:00Z")), (99, c(11, "on a PR", "2024-01-02T00:00:00Z"))],
            "http://x/?page=2", "2024-01-01T00:00:00Z")
        assert applied == 1 and store.comment_listing("o/r") == {"since": "2024-01-01T00:00:00Z", "next_url": "http://x/?page=2"}
        store.save_comment_page("o/r", [(1, c(10, "edited", "2024-01-03T00:00:00Z")), (1, c(12, "second", "2024-01-03T00:00:00Z"))], None, None)
        store.save_comment_page("o/r", [(1, c(10, "stale copy", "2024-01-01T12:00:00Z"))], None, None)
        assert [(x.id, x.body) for x in store.get_issue("o/r", 1).comments] == [(10, "edited"), (12, "second")]  # type: ignore[union-attr]
        assert store.comment_listing("o/r") is None and store.get_issue("o/r", 99) is None


def test_owed_threads_stay_queued_until_whole(tmp_path: Path) -> None:
    one = Comment(10, "a", "x", "2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z")
    with Store(tmp_path / "s.db") as store:
        store.save_crawl_page("o/r", "q", [(issue(1, comments=2), None, None), (issue(2, comments=1), None, None)],
                              None, "2024-01-01T00:00:00Z", True, queue=[(1, True), (2, False)], since="2023-12-01T00:00:00Z")
        assert [(q["number"], q["covered"], q["stored"]) for q in store.thread_queue("o/r")] == [(1, 1, 0), (2, 0, 0)]
        store.save_comment_page("o/r", [(1, one), (2, replace(one, id=20))], None, None)
        assert store.settle_threads("o/r") == 1  # issue 2 is whole, issue 1 has 1 of 2
        assert [q["number"] for q in store.thread_queue("o/r")] == [1]
        store.save_thread("o/r", 1, [one, replace(one, id=11)])
        assert store.thread_queue("o/r") == [] and store.comments_synced_at("o/r", 1) == "2024-01-01T00:00:00Z"
        assert store.crawl_state("o/r", "q")["since"] == "2023-12-01T00:00:00Z"  # type: ignore[index]


def test_a_version_2_store_gains_the_crawl_since_column(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    db = sqlite3.connect(path)
    db.executescript("""CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('schema_version', '2');
        CREATE TABLE crawls (repo TEXT NOT NULL, query TEXT NOT NULL, next_url TEXT, high_water TEXT,
            done INTEGER NOT NULL DEFAULT 0, updated REAL NOT NULL, PRIMARY KEY (repo, query));
        INSERT INTO crawls VALUES ('o/r', 'q', 'http://x/?page=3', '2024-01-01T00:00:00Z', 0, 0);""")
    db.commit()
    db.close()
    with Store(path) as store:
        state = store.crawl_state("o/r", "q")
        assert state is not None and state["next_url"] == "http://x/?page=3" and state["since"] is None
        store.save_crawl_state("o/r", "q", None, "2024-02-01T00:00:00Z", True, since="2024-01-01T00:00:00Z")
        assert store.crawl_state("o/r", "q")["since"] == "2024-01-01T00:00:00Z"  # type: ignore[index]
