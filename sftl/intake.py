"""Intake: load one issue (file, URL, ref), crawl a repository incrementally and resumably, import and export JSONL/CSV.

Public interface:

- `load_issue(target, settings, store, via="api") -> Issue`
- `crawl(repo, settings, store, since=None, state="open", labels=None, limit=None, progress=None) -> CrawlStats`
- `import_jsonl(path_or_dash, store, stdin=None) -> ImportStats`
- `export_issues(store, fmt="jsonl", repo=None) -> Iterator[str]` (lines without trailing newline)
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import logging
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from sftl.config import Settings
from sftl.errors import (
    AuthError,
    BrowserError,
    GitHubError,
    InputError,
    NotFoundError,
    OfflineMissError,
    SftlError,
)
from sftl.github import (
    GitHubClient,
    Page,
    comment_from_json,
    comment_issue_number,
    issue_from_json,
    issue_to_json,
    json_type,
    parse_repo,
    parse_target,
)
from sftl.model import Comment, Issue
from sftl.store import Store

STATES = ("open", "closed", "all")
_log = logging.getLogger("sftl")


# -- one issue --------------------------------------------------------------------------------------


def decode_text(data: bytes, name: str) -> str:
    """UTF-8 (a BOM is tolerated) or InputError naming the first bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{name} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None


def parse_json_text(text: str, name: str) -> Any:
    """json.loads with a one-line InputError that says where, and whether it looks truncated."""
    try:
        return json.loads(text)
    except RecursionError:  # the C decoder recurses per nesting level
        raise InputError(f"{name}: JSON nested too deeply to be a GitHub issue") from None
    except json.JSONDecodeError as exc:
        truncated = exc.pos >= len(text.rstrip()) or "Unterminated" in exc.msg
        what = "truncated JSON" if truncated else "corrupt JSON"
        raise InputError(f"{name}: {what} ({exc.msg.removesuffix(' at')}; line {exc.lineno}, column {exc.colno})") from None


def read_issue_file(path: Path) -> tuple[Issue, dict[str, Any]]:
    """A file holding one REST issue object (optionally with inline comments) -> (Issue, raw)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not data.strip():
        raise InputError(f"{path} is empty; expected one GitHub issue JSON object")
    obj = parse_json_text(decode_text(data, str(path)), str(path))
    if isinstance(obj, list) and len(obj) == 1:
        obj = obj[0]
    if not isinstance(obj, dict):
        raise InputError(f"{path}: expected one GitHub issue JSON object, found {json_type(obj)}")
    try:
        issue = issue_from_json(obj)
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from None
    return issue, obj


def load_issue(
    target: str, settings: Settings, store: Store, via: str = "api", *, stored_on_failure: bool = True
) -> Issue:
    """Resolve a target to an Issue, storing what was fetched.

    A JSON file is parsed (works offline, needs no store entry) and stored. A URL or ref comes
    from the store when offline (else the HTTP cache, else OfflineMissError); online it is
    fetched (with comments when it has any) and upserted. When GitHub cannot be reached (network
    down, server errors, rate limit) and the issue is stored, the stored copy is used with a note on
    the `sftl` logger, unless `stored_on_failure` is off (`sftl fetch`). `via="browser"` uses the crawler.
    """
    try:
        return _load_issue(target, settings, store, via)
    except (NotFoundError, AuthError, OfflineMissError):
        raise
    except (GitHubError, BrowserError) as exc:
        t = parse_target(target)
        stored = store.get_issue(t.repo, t.number) if stored_on_failure and t.repo and t.number else None
        if stored is None:
            raise
        _log.warning("note: %s; using the stored copy of %s (updated %s)", str(exc).split(" (")[0], stored.key,
                     stored.updated_at or "at an unknown time")
        return stored


def _load_issue(target: str, settings: Settings, store: Store, via: str) -> Issue:
    if via not in ("api", "browser"):
        raise InputError(f"unknown intake {via!r}: expected api or browser")
    t = parse_target(target)
    if t.kind == "file":
        assert t.path is not None
        issue, raw = read_issue_file(t.path)
        if issue.is_pull_request:
            raise InputError(f"{t.path} holds pull request {issue.key}, not an issue")
        store.upsert_issue(issue, raw)
        return store.get_issue(issue.repo, issue.number) or issue
    assert t.repo is not None and t.number is not None
    if settings.offline:
        stored = store.get_issue(t.repo, t.number)
        if stored is not None:
            return stored
        if via == "browser":
            raise OfflineMissError(f"offline: {t.repo}#{t.number} is not in the store; fetch it once without --offline")
    if via == "browser":
        from sftl.browser import BrowserCrawler

        with BrowserCrawler(settings) as crawler:
            issue = crawler.fetch_issue(t.repo, t.number)
        store.upsert_issue(issue)
        return store.get_issue(issue.repo, issue.number) or issue
    with GitHubClient(settings) as client:
        try:
            raw = client.get_issue(t.repo, t.number)
        except OfflineMissError:
            raise OfflineMissError(
                f"offline: {t.repo}#{t.number} is neither in the store nor in the HTTP cache; fetch it once without --offline"
            ) from None
        if raw.get("pull_request") is not None:
            raise NotFoundError(f"{t.repo}#{t.number} is a pull request, not an issue")
        comments: list[dict[str, Any]] = []
        if isinstance(raw.get("comments"), int) and raw["comments"] > 0:
            comments = client.get_comments(t.repo, t.number)
    try:
        issue = issue_from_json(raw, comments)
    except InputError as exc:
        raise GitHubError(f"GitHub sent a malformed issue for {t.repo}#{t.number}: {exc}") from None
    # the whole thread was fetched (or there is none): it replaces what was stored
    store.upsert_threads([(replace(issue, comments=()), raw, list(issue.comments))], authoritative=True)
    return store.get_issue(issue.repo, issue.number) or issue


# -- crawling ---------------------------------------------------------------------------------------


@dataclass
class CrawlStats:
    """What one `crawl` did."""

    repo: str
    query: str
    pages: int = 0
    issues_seen: int = 0
    issues_written: int = 0
    pulls_skipped: int = 0
    comment_threads: int = 0  # issues whose comments were (re)fetched one issue at a time
    comment_pages: int = 0  # pages of the repository-wide comment listing read
    comments_listed: int = 0  # comments of stored issues taken from that listing
    comment_mode: str = "none"  # how owed threads were fetched: none, per-issue, listing
    requests: int = 0  # HTTP requests sent, 304s and retries included
    not_modified: int = 0
    retries: int = 0
    waited_s: float = 0.0
    resumed: bool = False
    since: str | None = None
    high_water: str | None = None
    done: bool = False
    seconds: float = 0.0
    total_pages: int | None = None  # GitHub's Link rel="last", when known

    @property
    def requests_per_issue(self) -> float:
        return self.requests / self.issues_seen if self.issues_seen else 0.0


@dataclass(frozen=True)
class CrawlProgress:
    page: int
    total_pages: int | None
    issues_seen: int
    issues_written: int
    phase: str = "issues"  # "comments": page/total_pages count the repository-wide comment listing


def normalize_since(text: str) -> str:
    """`2024-01-31`, `2024-01-31T10:00`, `2024-01-31T10:00:00Z` or with an offset -> GitHub's
    `YYYY-MM-DDTHH:MM:SSZ` (UTC)."""
    from datetime import UTC, datetime

    raw = text.strip()
    try:
        parsed = datetime.fromisoformat(raw.replace("Z", "+00:00") if raw.endswith("Z") else raw)
    except ValueError:
        raise InputError(f"--since {text!r} is not a date: use YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def crawl_query(state: str, labels: str | None) -> str:
    """The key of a crawl in store.crawls: what is listed, not from when."""
    norm = ",".join(sorted(x.strip() for x in labels.split(",") if x.strip())) if labels else ""
    return f"state={state}&labels={norm}"


def last_crawl_mark(store: Store, repo: str, state: str = "open", labels: str | None = None) -> str | None:
    """When the store's last crawl of this listing began (GitHub's clock, less a minute), or None when it
    was never crawled: every issue updated at or after it is new or edited since (`triage --since last`)."""
    saved = store.crawl_state(parse_repo(repo), crawl_query(state, labels))
    mark = saved.get("high_water") if saved else None
    return mark if isinstance(mark, str) and mark else None


def check_crawl_args(repo: str, state: str, limit: int | None) -> str:
    """Validate crawl arguments (InputError) and return the normalised OWNER/REPO."""
    repo = parse_repo(repo)
    if state not in STATES:
        raise InputError(f"unknown state {state!r}: expected one of {', '.join(STATES)}")
    if limit is not None and limit <= 0:
        raise InputError("--limit must be a positive number")
    return repo


def crawl(
    repo: str,
    settings: Settings,
    store: Store,
    since: str | None = None,
    state: str = "open",
    labels: str | None = None,
    limit: int | None = None,
    progress: Callable[[CrawlProgress], None] | None = None,
) -> CrawlStats:
    """Crawl a repository's issues into the store, 100 per request.

    Incremental: without `since`, the mark of the last finished crawl is used: the time it
    began by GitHub's clock (the Date header), less a minute, so anything updated while it ran
    is listed again next time. Resumable: after each page, its issues and the cursor to the
    next page are committed together; an interrupted crawl continues from that cursor.
    Comment threads are owed only by issues whose comment count is non-zero and changed since
    they were last stored; they are queued in the store with each page and fetched after the
    listing, whichever way costs fewer requests: one request per thread, or the repository-wide
    comment listing (100 comments per request, all issues and pull requests alike, since the
    same mark). A thread still short of its count afterwards is fetched on its own. Pull requests
    are skipped. On a rate limit or network failure the error is raised with how much was
    stored; everything committed stays, and the next run continues where this one stopped.
    """
    repo = check_crawl_args(repo, state, limit)
    if since:
        since = normalize_since(since)
    query = crawl_query(state, labels)
    stats = CrawlStats(repo=repo, query=query)
    started = time.monotonic()
    saved = store.crawl_state(repo, query)
    start_url: str | None = None
    high_water: str | None = None
    mark: str | None = None  # the high-water mark this crawl will leave behind
    cycle_since: str | None = None  # the since of the listing this run continues or starts
    if saved is not None:
        high_water = saved.get("high_water")
        if not saved.get("done") and saved.get("next_url") and since is None:
            start_url = saved["next_url"]
            stats.resumed = True
            mark = high_water  # set when this crawl first began
            cycle_since = saved.get("since")
    if start_url is None:
        since = since or high_water
        cycle_since = since
    latest_seen: str | None = None
    stats.since = since if start_url is None else cycle_since
    client = GitHubClient(settings)
    listing_done = False
    try:
        for page in client.iter_issue_pages(repo, since=since, state=state, labels=labels, start_url=start_url):
            stats.pages += 1
            stats.total_pages = page.last_page or stats.total_pages
            items = page.items
            cut = False
            if limit is not None and stats.issues_seen + len(items) > limit:
                items = items[: max(0, limit - stats.issues_seen)]
                cut = True
            parsed: list[tuple[Issue, dict[str, Any]]] = []
            for obj in items:
                if isinstance(obj, dict) and obj.get("pull_request") is not None:
                    stats.pulls_skipped += 1
                    continue
                try:
                    issue = issue_from_json(obj)
                except InputError as exc:
                    raise GitHubError(f"GitHub sent a malformed issue in {page.url}: {exc}") from None
                parsed.append((issue, obj))
            stats.issues_seen += len(parsed)
            known = store.comment_counts(repo, [i.number for i, _ in parsed])
            rows: list[tuple[Issue, dict[str, Any] | None, list[Comment] | None]] = []
            owed: list[tuple[int, bool]] = []
            for issue, obj in parsed:
                old = known.get(issue.number)
                comments: list[Comment] | None = None
                if issue.comments_count > 0 and (old is None or old[0] != issue.comments_count or old[1] is None):
                    owed.append((issue.number, _listing_covers(issue, old, cycle_since)))
                elif issue.comments_count == 0 and old is not None and old[0] > 0:
                    comments = []  # the thread was deleted
                if latest_seen is None or issue.updated_at > latest_seen:
                    latest_seen = issue.updated_at
                rows.append((issue, obj, comments))
            if mark is None and client.server_time is not None:
                mark = _iso(client.server_time - _MARK_OVERLAP_S)
            next_url = page.url if cut else page.next_url
            done = next_url is None
            # without GitHub's clock (offline, from the cache) the latest update seen is the best mark
            high_water = mark or latest_seen or high_water
            stats.issues_written += store.save_crawl_page(
                repo, query, rows, next_url, high_water, done, queue=owed, since=cycle_since
            )
            stats.high_water = high_water
            listing_done = done
            if progress is not None:
                progress(CrawlProgress(stats.pages, stats.total_pages, stats.issues_seen, stats.issues_written))
            if cut or (limit is not None and stats.issues_seen >= limit):
                break
        else:
            if stats.pages == 0:
                listing_done = True
        _sync_threads(client, store, repo, stats, progress)
        stats.done = listing_done and not store.thread_queue(repo)
    except NotFoundError as exc:  # no such repository (or a private one): running again changes nothing
        _fill(stats, client, started)
        raise type(exc)(f"{exc}; check the OWNER/REPO spelling") from exc
    except SftlError as exc:
        _fill(stats, client, started)
        raise type(exc)(
            f"{exc} ({stats.issues_written} issues stored in this run; run the same crawl again to resume)"
        ) from exc
    finally:
        client.close()
    _fill(stats, client, started)
    return stats


def _listing_covers(issue: Issue, old: tuple[int, str | None] | None, since: str | None) -> bool:
    """Will a comment listing since `since` bring every comment this issue's stored thread lacks?
    Only an estimate for choosing how to fetch: the thread is checked against its count after."""
    if since is None or issue.created_at >= since:
        return True  # all of its comments are that recent
    return old is not None and old[1] is not None and issue.comments_count > old[0]  # only additions


_PROBE_MIN_REQUESTS = 3  # fewer threads than this are fetched one by one without asking the listing's size


def _thread_requests(count: int) -> int:
    return max(1, -(-count // 100))


def _sync_threads(
    client: GitHubClient, store: Store, repo: str, stats: CrawlStats, progress: Callable[[CrawlProgress], None] | None
) -> None:
    """Fetch the threads the store says are owed: resume or start the repository-wide comment
    listing when it costs fewer requests than fetching each thread, then fetch one by one the
    threads that are still short of their count."""
    queue = store.thread_queue(repo)
    listing = store.comment_listing(repo)
    if not queue and listing is None:
        return
    pages: Iterator[Page] | None = None
    list_since: str | None = None
    budget: int | None = None  # listing pages worth reading: beyond them, thread by thread is cheaper
    if listing is not None:  # an interrupted listing: continue from its cursor
        list_since = listing["since"]
        pages = client.iter_comment_pages(repo, start_url=listing["next_url"])
        stats.comment_mode = "listing"
    else:
        covered = [q for q in queue if q["covered"]]
        one_by_one = sum(_thread_requests(q["comments_count"]) for q in covered)
        if one_by_one >= _PROBE_MIN_REQUESTS:
            sinces = [q["since"] for q in covered]
            list_since = None if any(x is None for x in sinces) else min(sinces)
            pages = client.iter_comment_pages(repo, since=list_since)
            first = next(pages, None)
            if first is not None:
                # the first page's Link rel="last" tells what the whole listing costs; without it
                # (or if the repository grows meanwhile) the budget below stops a listing gone too long
                budget = one_by_one
                if (first.last_page or 1) <= one_by_one:
                    stats.comment_mode = "listing"
                    _save_comment_page(store, repo, first, list_since, stats, keep_cursor=True)
                else:
                    _save_comment_page(store, repo, first, list_since, stats, keep_cursor=False)
                    pages = None
                if progress is not None:
                    progress(CrawlProgress(stats.comment_pages, first.last_page, stats.issues_seen, stats.issues_written, "comments"))
            else:
                pages = None
    total = None
    for page in pages or ():
        total = page.last_page or total
        over = budget is not None and stats.comment_pages + 1 >= budget and page.next_url is not None
        _save_comment_page(store, repo, page, list_since, stats, keep_cursor=not over)
        if progress is not None:
            progress(CrawlProgress(stats.comment_pages, total, stats.issues_seen, stats.issues_written, "comments"))
        if over:
            break
    store.settle_threads(repo)
    for q in store.thread_queue(repo):
        if stats.comment_mode == "none":
            stats.comment_mode = "per-issue"
        try:
            raw = client.get_comments(repo, q["number"])
        except NotFoundError:
            store.save_thread(repo, q["number"], [])  # deleted or moved since it was listed
            continue
        try:
            thread = [comment_from_json(c) for c in raw]
        except InputError as exc:
            raise GitHubError(f"GitHub sent a malformed comment of {repo}#{q['number']}: {exc}") from None
        store.save_thread(repo, q["number"], thread)
        stats.comment_threads += 1


def _save_comment_page(store: Store, repo: str, page: Page, since: str | None, stats: CrawlStats, *, keep_cursor: bool) -> None:
    rows: list[tuple[int, Comment]] = []
    for obj in page.items:
        number = comment_issue_number(obj)
        if number is None:
            raise GitHubError(f"GitHub sent a comment without an issue_url in {page.url}")
        try:
            rows.append((number, comment_from_json(obj)))
        except InputError as exc:
            raise GitHubError(f"GitHub sent a malformed comment in {page.url}: {exc}") from None
    stats.comment_pages += 1
    stats.comments_listed += store.save_comment_page(repo, rows, page.next_url if keep_cursor else None, since)


_MARK_OVERLAP_S = 60.0  # re-list the last minute next time: GitHub's listing may lag its clock


def _iso(epoch: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _fill(stats: CrawlStats, client: GitHubClient, started: float) -> None:
    stats.requests = client.stats.requests
    stats.not_modified = client.stats.not_modified
    stats.retries = client.stats.retries
    stats.waited_s = client.stats.waited_s
    stats.seconds = time.monotonic() - started


# -- import / export --------------------------------------------------------------------------------


@dataclass
class ImportStats:
    lines: int = 0
    imported: int = 0  # written: new, or a newer version than the one stored
    comments_added: int = 0  # the version already stored, whose comment thread was completed or edited
    unchanged: int = 0  # already stored at that version (identical) or a newer one
    pulls_skipped: int = 0
    bad: list[tuple[int, str]] = field(default_factory=list)  # (line number, reason)


_BATCH = 500


def _iter_objects(lines: Iterable[bytes]) -> Iterator[tuple[int, Any, str | None]]:
    """(line number, parsed object or None, error) per non-blank line; arrays are flattened.

    A stream whose first line is a lone `[` or `{` is pretty-printed JSON (`gh api --paginate`
    on a terminal, or one issue file): it is read as a sequence of JSON documents instead."""
    it = iter(lines)
    head: list[bytes] = []
    for line in it:
        head.append(line)
        if line.strip():
            break
    if head and head[-1].strip() in (b"[", b"{"):
        yield from _iter_documents(b"".join(head) + b"".join(it))
        return
    yield from _iter_lines(itertools.chain(head, it))


def _iter_documents(data: bytes) -> Iterator[tuple[int, Any, str | None]]:
    try:
        text = decode_text(data, "the input")
    except InputError as exc:
        yield 1, None, str(exc).removeprefix("the input is ")
        return
    decoder = json.JSONDecoder()
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return
        line = text.count("\n", 0, pos) + 1
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except RecursionError:
            yield line, None, "JSON nested too deeply to be a GitHub issue"
            return
        except json.JSONDecodeError as exc:
            yield line, None, f"{'truncated' if exc.pos >= len(text.rstrip()) else 'corrupt'} JSON ({exc.msg}; line {exc.lineno}, column {exc.colno})"
            return  # no way to resynchronise inside a broken document
        for item in obj if isinstance(obj, list) else [obj]:
            yield line, item, None


def _iter_lines(lines: Iterable[bytes]) -> Iterator[tuple[int, Any, str | None]]:
    for n, line in enumerate(lines, 1):
        line = line.rstrip(b"\r\n")
        if not line.strip():
            continue
        try:
            text = decode_text(line, f"line {n}")
            docs = _documents_on_line(text, f"line {n}")
        except InputError as exc:
            yield n, None, str(exc).removeprefix(f"line {n}: ").removeprefix(f"line {n} is ")
            continue
        for obj in docs:
            if isinstance(obj, list):  # `gh api --paginate` without --jq writes one array per page
                for item in obj:
                    yield n, item, None
            else:
                yield n, obj, None


def _documents_on_line(text: str, name: str) -> list[Any]:
    """The JSON documents of one line: usually one; `[...][...]` (arrays of pages written back to back,
    as `gh api --paginate` does) or `{...} {...}` give several."""
    try:
        return [parse_json_text(text, name)]
    except InputError:
        decoder = json.JSONDecoder()
        docs: list[Any] = []
        pos = 0
        try:
            while pos < len(text):
                obj, pos = decoder.raw_decode(text, pos)
                docs.append(obj)
                while pos < len(text) and text[pos].isspace():
                    pos += 1
        except (json.JSONDecodeError, RecursionError):
            pass
        if len(docs) > 1 and pos >= len(text):
            return docs
        raise


def import_jsonl(path_or_dash: str | Path, store: Store, stdin: IO[bytes] | None = None) -> ImportStats:
    """Import GitHub REST issue objects, one per line (`-` reads stdin).

    Each issue is written whole or not at all (batches of 500 per transaction); bad lines are
    skipped and reported with their line numbers in `ImportStats.bad`.
    """
    stats = ImportStats()
    if str(path_or_dash) == "-":
        source: IO[bytes] = stdin if stdin is not None else sys.stdin.buffer
        return _import(source, store, stats)
    path = Path(path_or_dash)
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    with fh:
        return _import(fh, store, stats)


def _import(source: IO[bytes], store: Store, stats: ImportStats) -> ImportStats:
    batch: list[tuple[Issue, dict[str, Any]]] = []

    def flush() -> None:
        rows: list[tuple[Issue, dict[str, Any] | None, list[Comment] | None]] = [
            (replace(issue, comments=()), raw, list(issue.comments) if isinstance(raw.get("comments"), list) else None)
            for issue, raw in batch
        ]
        for status in store.write_threads(rows):
            if status in ("new", "updated"):
                stats.imported += 1
            elif status == "comments":
                stats.comments_added += 1
            else:
                stats.unchanged += 1
        batch.clear()

    last = 0
    for n, obj, error in _iter_objects(source):
        if n != last:
            stats.lines += 1
            last = n
        if error is not None:
            stats.bad.append((n, error))
            continue
        try:
            issue = issue_from_json(obj)
        except InputError as exc:
            stats.bad.append((n, str(exc)))
            continue
        if issue.is_pull_request:
            stats.pulls_skipped += 1
            continue
        batch.append((issue, obj))
        if len(batch) >= _BATCH:
            flush()
    if batch:
        flush()
    return stats


EXPORT_FORMATS = ("jsonl", "csv")
CSV_COLUMNS = ("repo", "number", "title", "state", "labels", "author", "created_at", "updated_at", "comments", "url")


def export_issues(store: Store, fmt: str = "jsonl", repo: str | None = None) -> Iterator[str]:
    """Stored issues as lines: jsonl = GitHub REST issue objects with comments inline
    (so `export | import -` round-trips), or csv with a header row."""
    if fmt not in EXPORT_FORMATS:
        raise InputError(f"unknown export format {fmt!r}: expected jsonl or csv")
    if repo:
        repo = parse_repo(repo)
    if fmt == "jsonl":
        for issue, raw in store.iter_issues_raw(repo):
            yield json.dumps(issue_to_json(issue, raw), ensure_ascii=False, separators=(",", ":"))
        return
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="")

    def row(values: Iterable[Any]) -> str:
        buf.seek(0)
        buf.truncate()
        writer.writerow(list(values))
        return buf.getvalue()

    yield row(CSV_COLUMNS)
    for issue in store.iter_issues(repo):
        yield row(
            (issue.repo, issue.number, issue.title, issue.state, ",".join(issue.labels), issue.author,
             issue.created_at, issue.updated_at, issue.comments_count, issue.url)
        )
