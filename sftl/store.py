"""The SQLite store: issues, comments, crawl progress and every stage's results; the store is the cache."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sftl.errors import StoreError
from sftl.model import Comment, Issue, to_jsonable

SCHEMA_VERSION = 4  # 2: issue_labels table; 3: thread_queue, comment_listings, crawls.since; 4: fixes, fix_crawls

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
    done INTEGER NOT NULL DEFAULT 0, updated REAL NOT NULL, since TEXT,
    PRIMARY KEY (repo, query)
);
-- issues whose comment thread a crawl still owes: listed with a changed, non-zero count
CREATE TABLE IF NOT EXISTS thread_queue (
    repo TEXT NOT NULL, number INTEGER NOT NULL,
    since TEXT,  -- the listing's since when queued: the comments it lacks were updated after it
    covered INTEGER NOT NULL,  -- 1: a comment listing since `since` brings every comment it lacks
    PRIMARY KEY (repo, number)
);
-- a repository-wide comment listing in progress: where to continue
CREATE TABLE IF NOT EXISTS comment_listings (
    repo TEXT PRIMARY KEY, since TEXT, next_url TEXT NOT NULL, updated REAL NOT NULL
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
-- the history: fixed issues and the source files their fixes changed (sftl history import/crawl)
CREATE TABLE IF NOT EXISTS fixes (
    repo TEXT NOT NULL, fix_key TEXT NOT NULL,  -- "issue|pr|commit": a PR fixing two issues is two rows
    issue INTEGER, pr INTEGER, sha TEXT, fixed_on TEXT NOT NULL,
    record TEXT NOT NULL,  -- the FixRecord as JSON
    terms TEXT NOT NULL,  -- its similarity terms as JSON, read by the prior without re-tokenizing
    updated REAL NOT NULL,
    PRIMARY KEY (repo, fix_key)
);
CREATE INDEX IF NOT EXISTS fixes_date ON fixes (repo, fixed_on);
-- issues a history crawl has examined (found a fix or not): a rerun skips them
CREATE TABLE IF NOT EXISTS fix_crawls (
    repo TEXT NOT NULL, number INTEGER NOT NULL, updated_at TEXT NOT NULL, found INTEGER NOT NULL,
    PRIMARY KEY (repo, number)
);
"""


def _loads(text: str, column: str) -> Any:
    """json.loads of a stored column; a row damaged outside sftl is a store error (exit 4), not a crash."""
    try:
        return json.loads(text)
    except (ValueError, TypeError, RecursionError):
        raise StoreError(f"the store holds a corrupt {column!r} value (changed outside sftl?); "
                         "re-import or re-fetch the issue, or start from a fresh SFTL_HOME") from None


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
                # a read-only folder or file says only "unable to open database file" / "readonly database"
                readonly = not os.access(self.path.parent, os.W_OK) or (
                    self.path.exists() and not os.access(self.path, os.W_OK))
                hint = " (the store or its folder is read-only: sftl writes there, even to read)" if readonly else ""
                raise StoreError(f"cannot open the store {self.path}: {exc}{hint}") from exc
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
        elif int(row["value"]) < SCHEMA_VERSION:
            version = int(row["value"])
            with self.transaction() as db:
                if version < 2:  # 1 -> 2: fill issue_labels from the issues' label lists
                    for r in db.execute("SELECT repo, number, labels FROM issues").fetchall():
                        db.executemany(
                            "INSERT OR IGNORE INTO issue_labels VALUES (?,?,?)",
                            [(r["repo"], r["number"], name) for name in _loads(r["labels"], "labels")],
                        )
                # 2 -> 3: the crawl remembers the since of its listing (a resumed run queues threads by it)
                if "since" not in {c["name"] for c in db.execute("PRAGMA table_info(crawls)")}:
                    db.execute("ALTER TABLE crawls ADD COLUMN since TEXT")
                # 3 -> 4: the fixes and fix_crawls tables are new (created above by the schema script)
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
        status = self._write_issue(db, issue, raw)
        if status == "older":
            return False
        if issue.comments:
            self._set_thread(db, issue.repo, issue.number, issue.comments, issue.updated_at, replace=status in ("new", "updated"))
        return True

    def _write_issue(self, db: sqlite3.Connection, issue: Issue, raw: dict[str, Any] | None) -> str:
        """Write the issue's own fields (not its thread) -> "new", "updated" (a newer version),
        "revised" (the version stored, with other fields), "same" (this very copy is stored
        already: nothing written) or "older" (a newer one is stored: kept)."""
        _check_number(issue.number)
        row = db.execute("SELECT * FROM issues WHERE repo=? AND number=?", (issue.repo, issue.number)).fetchone()
        revised = False
        if row is not None:
            if issue.updated_at and row["updated_at"] > issue.updated_at:
                return "older"
            if _same_issue(row, issue, raw):
                return "same"
            revised = row["updated_at"] == issue.updated_at
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
        return "new" if row is None else "revised" if revised else "updated"

    def _set_thread(
        self,
        db: sqlite3.Connection,
        repo: str,
        number: int,
        comments: tuple[Comment, ...] | list[Comment],
        synced_at: str,
        *,
        replace: bool,
    ) -> bool:
        """Store a thread; True when anything changed. `replace`: it is the whole thread of a newer
        version (deleted comments go). Otherwise (the same issue version again) it is merged: new
        comments are added and newer edits win, but nothing stored is dropped."""
        stored = {
            r["id"]: (r["author"], r["body"], r["created_at"], r["updated_at"])
            for r in db.execute("SELECT * FROM comments WHERE repo=? AND number=?", (repo, number))
        }
        given = {c.id: (c.author, c.body, c.created_at, c.updated_at) for c in comments}
        if replace:
            changed = stored != given
            if changed:
                self._replace_comments(db, repo, number, comments, synced_at)
        else:
            fresh = [c for c in comments if c.id not in stored or (given[c.id] != stored[c.id] and c.updated_at >= stored[c.id][3])]
            changed = bool(fresh)
            db.executemany(
                "INSERT OR REPLACE INTO comments VALUES (?,?,?,?,?,?,?)",
                [(repo, number, c.id, c.author, c.body, c.created_at, c.updated_at) for c in fresh],
            )
        if not changed or not replace:
            db.execute(
                "UPDATE issues SET comments_synced_at=MAX(COALESCE(comments_synced_at, ''), ?) WHERE repo=? AND number=?",
                (synced_at, repo, number),
            )
        return changed

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
        _check_number(number)
        row = self._db.execute("SELECT * FROM issues WHERE repo=? AND number=?", (repo, number)).fetchone()
        return self._issue_from_row(row) if row else None

    def get_raw(self, repo: str, number: int) -> dict[str, Any] | None:
        row = self._db.execute("SELECT raw FROM issues WHERE repo=? AND number=?", (repo, number)).fetchone()
        return _loads(row["raw"], "raw") if row and row["raw"] else None

    def iter_issues(
        self, repo: str | None = None, state: str | None = None, include_pulls: bool = False, label: str | None = None
    ) -> Iterator[Issue]:
        for row in self._issue_rows(repo, state, include_pulls, label):
            yield self._issue_from_row(row)

    def _issue_rows(
        self, repo: str | None, state: str | None, include_pulls: bool, label: str | None = None
    ) -> list[sqlite3.Row]:
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
        return self._db.execute(sql, params).fetchall()

    def iter_report_texts(self) -> Iterator[tuple[str, int, str, str, tuple[str, ...]]]:
        """(repo, number, title, body, the author's own comment bodies) of every stored issue that is
        not a pull request, in two queries: what screening reads, without building Issue objects."""
        own: dict[tuple[str, int], list[str]] = {}
        for c in self._db.execute(
            "SELECT c.repo, c.number, c.body FROM comments c JOIN issues i ON i.repo=c.repo AND i.number=c.number "
            "WHERE i.is_pull_request=0 AND i.author<>'' AND c.author=i.author AND c.body<>'' "
            "ORDER BY c.repo, c.number, c.created_at, c.id"
        ):
            own.setdefault((c[0], c[1]), []).append(c[2])
        for r in self._db.execute("SELECT repo, number, title, body FROM issues WHERE is_pull_request=0 ORDER BY repo, number"):
            yield r[0], r[1], r[2], r[3], tuple(own.get((r[0], r[1]), ()))

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
            labels=tuple(_loads(row["labels"], "labels")),
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
        self, repo: str, query: str, next_url: str | None, high_water: str | None, done: bool, since: str | None = None
    ) -> None:
        with self.transaction() as db:
            self._save_crawl(db, repo, query, next_url, high_water, done, since)

    def save_crawl_page(
        self,
        repo: str,
        query: str,
        issues: list[tuple[Issue, dict[str, Any] | None, list[Comment] | None]],
        next_url: str | None,
        high_water: str | None,
        done: bool,
        *,
        queue: Sequence[tuple[int, bool]] = (),
        since: str | None = None,
    ) -> int:
        """One crawl page and the cursor after it, in ONE transaction: a crash leaves either the
        page and its cursor, or neither, so a resumed crawl has no gaps. A non-None comment list
        replaces the stored thread (an empty list clears it). `queue` names issues whose threads
        the crawl still owes ((number, covered by a comment listing since `since`)); they stay
        queued until fetched, across crashes. Returns the number of issues written."""
        with self.transaction() as db:
            written = sum(1 for st in self._write_threads(db, issues, authoritative=True) if st not in ("unchanged", "older"))
            db.executemany(
                """INSERT INTO thread_queue VALUES (?,?,?,?) ON CONFLICT (repo, number) DO UPDATE SET
                   since=CASE WHEN thread_queue.since IS NULL OR excluded.since IS NULL THEN NULL
                              ELSE MIN(thread_queue.since, excluded.since) END,
                   covered=MIN(thread_queue.covered, excluded.covered)""",
                [(repo, n, since, int(covered)) for n, covered in queue],
            )
            self._save_crawl(db, repo, query, next_url, high_water, done, since)
        return written

    def _save_crawl(
        self, db: sqlite3.Connection, repo: str, query: str, next_url: str | None, high_water: str | None, done: bool,
        since: str | None,
    ) -> None:
        db.execute(
            """INSERT INTO crawls (repo, query, next_url, high_water, done, updated, since) VALUES (?,?,?,?,?,?,?)
               ON CONFLICT (repo, query) DO UPDATE SET next_url=excluded.next_url, high_water=excluded.high_water,
               done=excluded.done, updated=excluded.updated, since=excluded.since""",
            (repo, query, next_url, high_water, int(done), time.time(), since),
        )

    def upsert_threads(
        self, issues: list[tuple[Issue, dict[str, Any] | None, list[Comment] | None]], *, authoritative: bool = False
    ) -> int:
        """Issues with their comment threads, in one transaction (all or nothing). A non-None
        comment list is the thread: for a newer version (or with `authoritative`, e.g. fetched
        just now) it replaces the stored one, for the version already stored it is merged (added
        and edited comments; a thread fetched later is never lost); None keeps it. Returns how
        many issues changed (an older copy never overwrites a newer one; an identical one is
        not written)."""
        statuses = self.write_threads(issues, authoritative=authoritative)
        return sum(1 for st in statuses if st not in ("unchanged", "older"))

    def write_threads(
        self, issues: list[tuple[Issue, dict[str, Any] | None, list[Comment] | None]], *, authoritative: bool = False
    ) -> list[str]:
        """Like `upsert_threads`, with one status per issue: "new", "updated" (a newer version),
        "comments" (the same version, its thread completed or edited), "unchanged" or "older"."""
        with self.transaction() as db:
            return self._write_threads(db, issues, authoritative)

    def _write_threads(
        self,
        db: sqlite3.Connection,
        issues: list[tuple[Issue, dict[str, Any] | None, list[Comment] | None]],
        authoritative: bool = False,
    ) -> list[str]:
        out: list[str] = []
        for issue, raw, comments in issues:
            status = self._write_issue(db, issue, raw)
            if status == "older":
                out.append(status)
                continue
            # only a newer version's thread (or one fetched just now) may drop stored comments
            replace = authoritative or status in ("new", "updated")
            changed = False
            for thread in (issue.comments or None, comments):
                if thread is not None:
                    changed |= self._set_thread(db, issue.repo, issue.number, thread, issue.updated_at, replace=replace)
            if comments is not None:
                self._settle(db, issue.repo, [issue.number], force=replace)
            if status == "revised":
                status = "updated"
            out.append(status if status != "same" else "comments" if changed else "unchanged")
        return out

    # -- comment threads a crawl owes ---------------------------------------------------------------

    def thread_queue(self, repo: str) -> list[dict[str, Any]]:
        """Queued threads: number, since, covered, comments_count, stored (comments held now)."""
        rows = self._db.execute(
            """SELECT q.number, q.since, q.covered, i.comments_count,
                      (SELECT COUNT(*) FROM comments c WHERE c.repo=q.repo AND c.number=q.number) AS stored
               FROM thread_queue q JOIN issues i ON i.repo=q.repo AND i.number=q.number
               WHERE q.repo=? ORDER BY q.number""",
            (repo,),
        ).fetchall()
        return [dict(r) for r in rows]

    def comment_listing(self, repo: str) -> dict[str, Any] | None:
        """The repository-wide comment listing in progress (since, next_url), if any."""
        row = self._db.execute("SELECT since, next_url FROM comment_listings WHERE repo=?", (repo,)).fetchone()
        return dict(row) if row else None

    def save_comment_page(
        self, repo: str, comments: list[tuple[int, Comment]], next_url: str | None, since: str | None
    ) -> int:
        """One page of the repository-wide comment listing and the cursor after it, in ONE
        transaction. Comments of stored issues are upserted (an edit wins, a stale copy does not);
        others (pull requests, issues never crawled) are ignored. Returns how many were applied."""
        with self.transaction() as db:
            numbers = sorted({n for n, _ in comments})
            known: set[int] = set()
            for i in range(0, len(numbers), 500):
                chunk = numbers[i : i + 500]
                known.update(
                    r[0] for r in db.execute(
                        f"SELECT number FROM issues WHERE repo=? AND number IN ({','.join('?' * len(chunk))})", (repo, *chunk)
                    )
                )
            rows = [(repo, n, c.id, c.author, c.body, c.created_at, c.updated_at) for n, c in comments if n in known]
            db.executemany(
                """INSERT INTO comments VALUES (?,?,?,?,?,?,?) ON CONFLICT (repo, number, id) DO UPDATE SET
                   author=excluded.author, body=excluded.body, created_at=excluded.created_at,
                   updated_at=excluded.updated_at WHERE excluded.updated_at >= comments.updated_at""",
                rows,
            )
            if next_url:
                db.execute(
                    "INSERT OR REPLACE INTO comment_listings VALUES (?,?,?,?)", (repo, since, next_url, time.time())
                )
            else:
                db.execute("DELETE FROM comment_listings WHERE repo=?", (repo,))
            return len(rows)

    def settle_threads(self, repo: str) -> int:
        """Dequeue every queued thread that is now whole (as many comments stored as the issue
        counts); returns how many are left to fetch one by one."""
        with self.transaction() as db:
            numbers = [r[0] for r in db.execute("SELECT number FROM thread_queue WHERE repo=?", (repo,))]
            self._settle(db, repo, numbers, force=False)
            return int(db.execute("SELECT COUNT(*) FROM thread_queue WHERE repo=?", (repo,)).fetchone()[0])

    def save_thread(self, repo: str, number: int, comments: list[Comment]) -> None:
        """The whole thread of a stored issue, fetched just now: replaces the stored one, dequeued."""
        with self.transaction() as db:
            row = db.execute("SELECT updated_at FROM issues WHERE repo=? AND number=?", (repo, number)).fetchone()
            if row is not None:
                self._set_thread(db, repo, number, comments, row["updated_at"], replace=True)
                db.execute(
                    "UPDATE issues SET comments_synced_at=? WHERE repo=? AND number=?", (row["updated_at"], repo, number)
                )
            db.execute("DELETE FROM thread_queue WHERE repo=? AND number=?", (repo, number))

    def _settle(self, db: sqlite3.Connection, repo: str, numbers: list[int], *, force: bool) -> None:
        for n in numbers:
            row = db.execute(
                """SELECT updated_at, comments_count,
                          (SELECT COUNT(*) FROM comments c WHERE c.repo=i.repo AND c.number=i.number) AS stored
                   FROM issues i WHERE repo=? AND number=?""",
                (repo, n),
            ).fetchone()
            if row is not None and (force or row["stored"] == row["comments_count"]):
                db.execute("DELETE FROM thread_queue WHERE repo=? AND number=?", (repo, n))
                db.execute("UPDATE issues SET comments_synced_at=? WHERE repo=? AND number=?", (row["updated_at"], repo, n))

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
        for row in self._issue_rows(repo, None, include_pulls):
            yield self._issue_from_row(row), (_loads(row["raw"], "raw") if row["raw"] else None)

    def size_bytes(self) -> int:
        """The store's size on disk, WAL included."""
        total = 0
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                total += p.stat().st_size
        return total

    # -- stage results --------------------------------------------------------------------------

    def save_screening(self, repo: str, number: int, screening: Any, fingerprint: str | None = None) -> None:
        """`fingerprint` (Issue.fingerprint) ties the screening to the text it read: readers can tell it is stale."""
        payload = to_jsonable(screening)
        if fingerprint:
            payload["issue_fingerprint"] = fingerprint
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
        return _loads(row["payload"], "payload") if row else None

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
        return _loads(row["payload"], "payload") if row else None

    def save_replay(self, key: str, payload: dict[str, Any], repo: str | None = None, number: int | None = None) -> None:
        """Replays are keyed by a content hash of (snippet, environment, device)."""
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO replays VALUES (?,?,?,?,?)",
                (key, repo, number, json.dumps(payload), time.time()),
            )

    def get_replay(self, key: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT payload FROM replays WHERE key=?", (key,)).fetchone()
        return _loads(row["payload"], "payload") if row else None

    def save_result(self, kind: str, key: str, payload: dict[str, Any]) -> None:
        """A generic keyed result (evaluation rows, triage progress, fuzz models' metadata, ...)."""
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO results VALUES (?,?,?,?)", (kind, key, json.dumps(payload), time.time()))

    def get_result(self, kind: str, key: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT payload FROM results WHERE kind=? AND key=?", (kind, key)).fetchone()
        return _loads(row["payload"], "payload") if row else None

    def iter_results(self, kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
        for row in self._db.execute("SELECT key, payload FROM results WHERE kind=? ORDER BY key", (kind,)).fetchall():
            yield row["key"], _loads(row["payload"], "payload")

    # -- the history: fix records -----------------------------------------------------------------

    def upsert_fixes(self, rows: Sequence[tuple[str, str, int | None, int | None, str | None, str, str, str]]) -> int:
        """(repo, fix_key, issue, pr, sha, fixed_on, record JSON, terms JSON) rows in one transaction;
        a row with the same (repo, fix_key) is replaced. Returns how many rows were new or changed."""
        changed = 0
        with self.transaction() as db:
            for row in rows:
                old = db.execute("SELECT record, terms FROM fixes WHERE repo=? AND fix_key=?", row[:2]).fetchone()
                if old is not None and old["record"] == row[6] and old["terms"] == row[7]:
                    continue
                db.execute("INSERT OR REPLACE INTO fixes VALUES (?,?,?,?,?,?,?,?,?)", (*row, time.time()))
                changed += 1
        return changed

    def iter_fix_rows(self, repo: str | None = None, before: str | None = None) -> Iterator[tuple[str, str, str]]:
        """(repo, record JSON, terms JSON) of the stored fixes, oldest first; `before` keeps those
        whose `fixed_on` sorts before it (a YYYY-MM month sorts before every day of that month)."""
        sql = "SELECT repo, record, terms FROM fixes WHERE 1=1"
        params: list[Any] = []
        if repo:
            sql += " AND repo=?"
            params.append(repo)
        if before:
            sql += " AND fixed_on<?"
            params.append(before)
        yield from ((r[0], r[1], r[2]) for r in self._db.execute(sql + " ORDER BY fixed_on, repo, fix_key", params))

    def iter_fix_terms(self) -> Iterator[tuple[str, str, str, str]]:
        """(repo, fix_key, fixed_on, terms JSON) of every stored fix: what the prior's index is built from."""
        yield from ((r[0], r[1], r[2], r[3]) for r in self._db.execute("SELECT repo, fix_key, fixed_on, terms FROM fixes"))

    def get_fix_records(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """(repo, fix_key) -> the record JSON, for the keys that are stored."""
        out: dict[tuple[str, str], str] = {}
        for repo, key in keys:
            row = self._db.execute("SELECT record FROM fixes WHERE repo=? AND fix_key=?", (repo, key)).fetchone()
            if row is not None:
                out[(repo, key)] = row[0]
        return out

    def fixes_stamp(self) -> tuple[int, float]:
        """(how many fixes, when the latest was written): changes whenever the history does."""
        row = self._db.execute("SELECT COUNT(*), COALESCE(MAX(updated), 0) FROM fixes").fetchone()
        return int(row[0]), float(row[1])

    def count_fixes(self, repo: str | None = None) -> int:
        if repo:
            return int(self._db.execute("SELECT COUNT(*) FROM fixes WHERE repo=?", (repo,)).fetchone()[0])
        return int(self._db.execute("SELECT COUNT(*) FROM fixes").fetchone()[0])

    def fix_crawled(self, repo: str, numbers: Sequence[int]) -> dict[int, str]:
        """number -> the issue's updated_at when a history crawl last examined it."""
        out: dict[int, str] = {}
        for i in range(0, len(numbers), 500):
            chunk = list(numbers[i : i + 500])
            out.update(
                (r[0], r[1]) for r in self._db.execute(
                    f"SELECT number, updated_at FROM fix_crawls WHERE repo=? AND number IN ({','.join('?' * len(chunk))})",
                    (repo, *chunk),
                )
            )
        return out

    def save_fix_crawl(
        self, repo: str, number: int, updated_at: str,
        rows: Sequence[tuple[str, str, int | None, int | None, str | None, str, str, str]],
    ) -> None:
        """An examined issue and the fixes found for it, in ONE transaction (a crash loses neither half)."""
        with self.transaction() as db:
            for row in rows:
                db.execute("INSERT OR REPLACE INTO fixes VALUES (?,?,?,?,?,?,?,?,?)", (*row, time.time()))
            db.execute("INSERT OR REPLACE INTO fix_crawls VALUES (?,?,?,?)", (repo, number, updated_at, int(bool(rows))))


_MAX_INTEGER = 2**63 - 1  # SQLite's INTEGER: a larger Python int raises OverflowError inside a transaction


def _check_number(number: int) -> None:
    """The store's own boundary check: an issue number SQLite cannot hold is bad input (exit 2), refused before
    its statement runs (the transaction of its batch rolls back whole, never half-written)."""
    if not isinstance(number, int) or isinstance(number, bool) or not 0 < number <= _MAX_INTEGER:
        from sftl.errors import InputError

        shown = str(number) if len(str(number)) <= 30 else f"{str(number)[:12]}... ({len(str(number))} digits)"
        raise InputError(f"issue number {shown} cannot be stored (1 .. {_MAX_INTEGER})")


def _without_comments(raw: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in raw.items() if k != "comments"}


def _same_issue(row: sqlite3.Row, issue: Issue, raw: dict[str, Any] | None) -> bool:
    """Is `issue` (and its raw object, when given) exactly what the row holds? The thread aside:
    a raw object's `comments` is a count or an inline list, and threads are compared apart.
    A row damaged outside sftl is not the same: writing the new copy repairs it."""
    try:
        return _same_row(row, issue, raw)
    except StoreError:
        return False


def _same_row(row: sqlite3.Row, issue: Issue, raw: dict[str, Any] | None) -> bool:
    if (
        row["title"] != issue.title or row["body"] != issue.body or row["state"] != issue.state
        or _loads(row["labels"], "labels") != list(issue.labels) or row["author"] != issue.author
        or row["created_at"] != issue.created_at or row["updated_at"] != issue.updated_at
        or row["comments_count"] != issue.comments_count or bool(row["is_pull_request"]) != issue.is_pull_request
        or row["html_url"] != issue.html_url
    ):
        return False
    if raw is None:
        return True
    if not row["raw"]:
        return False
    return bool(_without_comments(_loads(row["raw"], "raw")) == _without_comments(raw))
