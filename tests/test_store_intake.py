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
        store.upsert_threads([(issue(1), None, [])])  # an empty list clears it
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
