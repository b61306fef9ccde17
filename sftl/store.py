"""The SQLite store: issues, comments, crawl progress and every stage's results; the store is the cache."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sftl.errors import StoreError
from sftl.model import Comment, Issue, to_jsonable

SCHEMA_VERSION = 2  # 2: issue_labels table

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS issues (
    repo TEXT NOT NULL, number INTEGER NOT NULL,
    title TEXT NOT NULL, body TEXT NOT NULL, state TEXT NOT NULL,
    labels TEXT NOT NULL, author TEXT NOT NULL,
    created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    comments_count INTEGER NOT NULL, comments_synced_at TEXT,
    is_pull_request INTEGER NOT NULL, html_url TEXT NOT NULL,
    raw TEXT, fetched_at REAL NOT NULL,
    PRIMARY KEY (repo, number)
);
CREATE INDEX IF NOT EXISTS issues_updated ON issues (repo, updated_at);
CREATE TABLE IF NOT EXISTS issue_labels (
    repo TEXT NOT NULL, number INTEGER NOT NULL, name TEXT NOT NULL,
    PRIMARY KEY (repo, number, name)
);
CREATE INDEX IF NOT EXISTS issue_labels_name ON issue_labels (repo, name);
CREATE TABLE IF NOT EXISTS comments (
    repo TEXT NOT NULL, number INTEGER NOT NULL, id INTEGER NOT NULL,
    author TEXT NOT NULL, body TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    PRIMARY KEY (repo, number, id)
);
CREATE TABLE IF NOT EXISTS crawls (
    repo TEXT NOT NULL, query TEXT NOT NULL, next_url TEXT, high_water TEXT,
    done INTEGER NOT NULL DEFAULT 0, updated REAL NOT NULL,
    PRIMARY KEY (repo, query)
);
CREATE TABLE IF NOT EXISTS screenings (
    repo TEXT NOT NULL, number INTEGER NOT NULL, method TEXT NOT NULL,
    category TEXT NOT NULL, payload TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (repo, number, method)
);
CREATE TABLE IF NOT EXISTS localizations (
    repo TEXT NOT NULL, number INTEGER NOT NULL, method TEXT NOT NULL,
    outcome TEXT NOT NULL, payload TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (repo, number, method)
);
CREATE TABLE IF NOT EXISTS replays (
    key TEXT PRIMARY KEY, repo TEXT, number INTEGER,
    payload TEXT NOT NULL, created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    kind TEXT NOT NULL, key TEXT NOT NULL, payload TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (kind, key)
);
"""


class Store:
    """One SQLite file. Every write is one transaction; upserts are idempotent."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        db: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None)
            self._db = db
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except BaseException as exc:
            if db is not None:
                db.close()  # do not leak the handle of a store we refuse to use
            if isinstance(exc, sqlite3.DatabaseError):
                raise StoreError(f"cannot open the store {self.path}: {exc}") from exc
            if isinstance(exc, OSError):
                raise StoreError(f"cannot create the store {self.path}: {exc.strerror or exc}") from exc
            raise

    # -- plumbing -------------------------------------------------------------------------------

    def _migrate(self) -> None:
        # executescript commits on its own, so it runs outside an explicit transaction
        self._db.executescript(_SCHEMA)
        row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            self._db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif int(row["value"]) > SCHEMA_VERSION:
            raise StoreError(
                f"the store {self.path} has schema {row['value']}, newer than this sftl ({SCHEMA_VERSION}); upgrade sftl"
            )
        elif int(row["value"]) < 2:
            with self.transaction() as db:  # 1 -> 2: fill issue_labels from the issues' label lists
                for r in db.execute("SELECT repo, number, labels FROM issues").fetchall():
                    db.executemany(
                        "INSERT OR IGNORE INTO issue_labels VALUES (?,?,?)",
                        [(r["repo"], r["number"], name) for name in json.loads(r["labels"])],
                    )
                db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise StoreError(f"the store {self.path} is busy or unreadable: {exc}") from exc
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        else:
            self._db.execute("COMMIT")

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- issues ---------------------------------------------------------------------------------

    def upsert_issue(self, issue: Issue, raw: dict[str, Any] | None = None) -> bool:
        """Insert or update; an older copy never overwrites a newer one. Returns True when written."""
        with self.transaction() as db:
            return self._upsert_issue(db, issue, raw)

    def upsert_issues(self, issues: list[tuple[Issue, dict[str, Any] | None]]) -> int:
        """Many issues in one transaction (a crawl page): all or nothing."""
        written = 0
        with self.transaction() as db:
            for issue, raw in issues:
                written += self._upsert_issue(db, issue, raw)
        return written

    def _upsert_issue(self, db: sqlite3.Connection, issue: Issue, raw: dict[str, Any] | None) -> bool:
        row = db.execute(
            "SELECT updated_at FROM issues WHERE repo=? AND number=?", (issue.repo, issue.number)
        ).fetchone()
        if row is not None and issue.updated_at and row["updated_at"] > issue.updated_at:
            return False
        db.execute(
            """INSERT INTO issues (repo, number, title, body, state, labels, author, created_at, updated_at,
                   comments_count, is_pull_request, html_url, raw, fetched_at)
               VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)
               ON CONFLICT (repo, number) DO UPDATE SET
                   title=excluded.title, body=excluded.body, state=excluded.state, labels=excluded.labels,
                   author=excluded.author, created_at=excluded.created_at, updated_at=excluded.updated_at,
                   comments_count=excluded.comments_count, is_pull_request=excluded.is_pull_request,
                   html_url=excluded.html_url, raw=COALESCE(excluded.raw, issues.raw),
                   fetched_at=excluded.fetched_at""",
            (
                issue.repo,
                issue.number,
                issue.title,
                issue.body,
                issue.state,
                json.dumps(list(issue.labels)),
                issue.author,
                issue.created_at,
                issue.updated_at,
                issue.comments_count,
                int(issue.is_pull_request),
                issue.html_url,
                json.dumps(raw) if raw is not None else None,
                time.time(),
            ),
        )
        db.execute("DELETE FROM issue_labels WHERE repo=? AND number=?", (issue.repo, issue.number))
        db.executemany(
            "INSERT OR IGNORE INTO issue_labels VALUES (?,?,?)", [(issue.repo, issue.number, n) for n in issue.labels]
        )
        if issue.comments:
            self._replace_comments(db, issue.repo, issue.number, issue.comments, issue.updated_at)
        return True

    def replace_comments(
        self, repo: str, number: int, comments: tuple[Comment, ...] | list[Comment], synced_at: str
    ) -> None:
        with self.transaction() as db:
            self._replace_comments(db, repo, number, comments, synced_at)

    def _replace_comments(
        self,
        db: sqlite3.Connection,
        repo: str,
        number: int,
        comments: tuple[Comment, ...] | list[Comment],
        synced_at: str,
    ) -> None:
        db.execute("DELETE FROM comments WHERE repo=? AND number=?", (repo, number))
        db.executemany(
            "INSERT INTO comments VALUES (?,?,?,?,?,?,?)",
            [(repo, number, c.id, c.author, c.body, c.created_at, c.updated_at) for c in comments],
        )
        db.execute(
            "UPDATE issues SET comments_synced_at=? WHERE repo=? AND number=?", (synced_at, repo, number)
        )

    def comments_synced_at(self, repo: str, number: int) -> str | None:
        row = self._db.execute(
            "SELECT comments_synced_at FROM issues WHERE repo=? AND number=?", (repo, number)
        ).fetchone()
        return row["comments_synced_at"] if row else None

    def get_issue(self, repo: str, number: int) -> Issue | None:
        row = self._db.execute("SELECT * FROM issues WHERE repo=? AND number=?", (repo, number)).fetchone()
        return self._issue_from_row(row) if row else None

    def get_raw(self, repo: str, number: int) -> dict[str, Any] | None:
        row = self._db.execute("SELECT raw FROM issues WHERE repo=? AND number=?", (repo, number)).fetchone()
        return json.loads(row["raw"]) if row and row["raw"] else None

    def iter_issues(
        self, repo: str | None = None, state: str | None = None, include_pulls: bool = False, label: str | None = None
    ) -> Iterator[Issue]:
        sql = "SELECT * FROM issues WHERE 1=1"
        params: list[Any] = []
        if repo:
            sql += " AND repo=?"
            params.append(repo)
        if state and state != "all":
            sql += " AND state=?"
            params.append(state)
        if label:
            sql += " AND EXISTS (SELECT 1 FROM issue_labels l WHERE l.repo=issues.repo AND l.number=issues.number AND l.name=?)"
            params.append(label)
        if not include_pulls:
            sql += " AND is_pull_request=0"
        sql += " ORDER BY repo, number"
        for row in self._db.execute(sql, params).fetchall():
            yield self._issue_from_row(row)

    def count_issues(self, repo: str | None = None) -> int:
        if repo:
            return int(self._db.execute("SELECT COUNT(*) FROM issues WHERE repo=?", (repo,)).fetchone()[0])
        return int(self._db.execute("SELECT COUNT(*) FROM issues").fetchone()[0])

    def _issue_from_row(self, row: sqlite3.Row) -> Issue:
        comments = tuple(
            Comment(id=c["id"], author=c["author"], body=c["body"], created_at=c["created_at"], updated_at=c["updated_at"])
            for c in self._db.execute(
                "SELECT * FROM comments WHERE repo=? AND number=? ORDER BY created_at, id", (row["repo"], row["number"])
            )
        )
        return Issue(
            repo=row["repo"],
            number=row["number"],
            title=row["title"],
            body=row["body"],
            state=row["state"],
            labels=tuple(json.loads(row["labels"])),
            author=row["author"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            comments_count=row["comments_count"],
            comments=comments,
            is_pull_request=bool(row["is_pull_request"]),
            html_url=row["html_url"],
        )

    # -- crawl progress -------------------------------------------------------------------------

    def crawl_state(self, repo: str, query: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT * FROM crawls WHERE repo=? AND query=?", (repo, query)).fetchone()
        return dict(row) if row else None

    def save_crawl_state(
        self, repo: str, query: str, next_url: str | None, high_water: str | None, done: bool
    ) -> None:
        with self.transaction() as db:
            db.execute(
                """INSERT INTO crawls VALUES (?,?,?,?,?,?) ON CONFLICT (repo, query) DO UPDATE SET
                   next_url=excluded.next_url, high_water=excluded.high_water, done=excluded.done,
                   updated=excluded.updated""",
                (repo, query, next_url, high_water, int(done), time.time()),
            )

    def save_crawl_page(
        self,
        repo: str,
        query: str,
        issues: list[tuple[Issue, dict[str, Any] | None, list[Comment] | None]],
        next_url: str | None,
        high_water: str | None,
        done: bool,
    ) -> int:
        """One crawl page and the cursor after it, in ONE transaction: a crash leaves either the
        page and its cursor, or neither, so a resumed crawl has no gaps. A non-None comment list
        replaces the stored thread (an empty list clears it). Returns the number of issues written."""
        with self.transaction() as db:
            written = self._write_threads(db, issues)
            db.execute(
                """INSERT INTO crawls VALUES (?,?,?,?,?,?) ON CONFLICT (repo, query) DO UPDATE SET
                   next_url=excluded.next_url, high_water=excluded.high_water, done=excluded.done,
                   updated=excluded.updated""",
                (repo, query, next_url, high_water, int(done), time.time()),
            )
        return written

    def upsert_threads(self, issues: list[tuple[Issue, dict[str, Any] | None, list[Comment] | None]]) -> int:
        """Issues with their comment threads, in one transaction (all or nothing). A non-None
        comment list replaces the stored thread; None keeps it. Returns how many were written
        (an older copy never overwrites a newer one)."""
        with self.transaction() as db:
            return self._write_threads(db, issues)

    def _write_threads(
        self, db: sqlite3.Connection, issues: list[tuple[Issue, dict[str, Any] | None, list[Comment] | None]]
    ) -> int:
        written = 0
        for issue, raw, comments in issues:
            if self._upsert_issue(db, issue, raw):
                written += 1
                if comments is not None:
                    self._replace_comments(db, issue.repo, issue.number, comments, issue.updated_at)
        return written

    def comment_counts(self, repo: str, numbers: list[int]) -> dict[int, tuple[int, str | None]]:
        """number -> (stored comments_count, comments_synced_at) for the given issues that are stored."""
        out: dict[int, tuple[int, str | None]] = {}
        for i in range(0, len(numbers), 500):  # stay below SQLite's bound-parameter limit
            chunk = numbers[i : i + 500]
            rows = self._db.execute(
                f"SELECT number, comments_count, comments_synced_at FROM issues WHERE repo=? AND number IN ({','.join('?' * len(chunk))})",
                (repo, *chunk),
            ).fetchall()
            out.update({r["number"]: (r["comments_count"], r["comments_synced_at"]) for r in rows})
        return out

    def iter_issues_raw(
        self, repo: str | None = None, include_pulls: bool = False
    ) -> Iterator[tuple[Issue, dict[str, Any] | None]]:
        """Issues with their raw REST object (None when intake kept none, e.g. the browser)."""
        sql = "SELECT * FROM issues WHERE 1=1"
        params: list[Any] = []
        if repo:
            sql += " AND repo=?"
            params.append(repo)
        if not include_pulls:
            sql += " AND is_pull_request=0"
        sql += " ORDER BY repo, number"
        for row in self._db.execute(sql, params).fetchall():
            yield self._issue_from_row(row), (json.loads(row["raw"]) if row["raw"] else None)

    def size_bytes(self) -> int:
        """The store's size on disk, WAL included."""
        total = 0
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                total += p.stat().st_size
        return total

    # -- stage results --------------------------------------------------------------------------

    def save_screening(self, repo: str, number: int, screening: Any) -> None:
        payload = to_jsonable(screening)
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO screenings VALUES (?,?,?,?,?,?)",
                (repo, number, payload["method"], payload["category"], json.dumps(payload), time.time()),
            )

    def get_screening(self, repo: str, number: int, method: str | None = None) -> dict[str, Any] | None:
        sql = "SELECT payload FROM screenings WHERE repo=? AND number=?"
        params: list[Any] = [repo, number]
        if method:
            sql += " AND method=?"
            params.append(method)
        row = self._db.execute(sql + " ORDER BY created DESC LIMIT 1", params).fetchone()
        return json.loads(row["payload"]) if row else None

    def save_localization(self, repo: str, number: int, payload: dict[str, Any]) -> None:
        """`payload` is the `sftl locate --json` object (method and outcome inside)."""
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO localizations VALUES (?,?,?,?,?,?)",
                (repo, number, payload.get("method", "sftl"), payload.get("outcome", ""), json.dumps(payload), time.time()),
            )

    def get_localization(self, repo: str, number: int, method: str = "sftl") -> dict[str, Any] | None:
        row = self._db.execute(
            "SELECT payload FROM localizations WHERE repo=? AND number=? AND method=?", (repo, number, method)
        ).fetchone()
        return json.loads(row["payload"]) if row else None

    def save_replay(self, key: str, payload: dict[str, Any], repo: str | None = None, number: int | None = None) -> None:
        """Replays are keyed by a content hash of (snippet, environment, device)."""
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO replays VALUES (?,?,?,?,?)",
                (key, repo, number, json.dumps(payload), time.time()),
            )

    def get_replay(self, key: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT payload FROM replays WHERE key=?", (key,)).fetchone()
        return json.loads(row["payload"]) if row else None

    def save_result(self, kind: str, key: str, payload: dict[str, Any]) -> None:
        """A generic keyed result (evaluation rows, triage progress, fuzz models' metadata, ...)."""
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO results VALUES (?,?,?,?)", (kind, key, json.dumps(payload), time.time()))

    def get_result(self, kind: str, key: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT payload FROM results WHERE kind=? AND key=?", (kind, key)).fetchone()
        return json.loads(row["payload"]) if row else None

    def iter_results(self, kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
        for row in self._db.execute("SELECT key, payload FROM results WHERE kind=? ORDER BY key", (kind,)).fetchall():
            yield row["key"], json.loads(row["payload"])
