"""`sftl history crawl`: mine a repository's closed issues for their fixes (timeline, 'Fixes #N' pull requests, closing commits) and the files those changed."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from sftl.config import Settings
from sftl.errors import NotFoundError, SftlError
from sftl.github import GitHubClient, parse_repo
from sftl.history import is_source_file
from sftl.history_io import fix_row
from sftl.intake import crawl
from sftl.model import FixRecord, Issue
from sftl.store import Store

# "Fixes #12", "closes: #3", "Resolved owner/repo#7", "fixes https://github.com/owner/repo/issues/9"
_CLOSING = re.compile(
    r"\b(?:fix(?:e[sd])?|close[sd]?|resolve[sd]?)\b[:\s]*"
    r"(?:(?:https?://github\.com/)?([\w.-]+/[\w.-]+)(?:/issues/|#)|#)(\d+)",
    re.IGNORECASE,
)
_REVERT_TITLE = re.compile(r'^\s*(?:\[[^\]]*\]\s*)?revert\s+"(.+)"\s*$', re.IGNORECASE | re.DOTALL)
_REVERTS_PR = re.compile(r"\breverts?\s+(?:([\w.-]+/[\w.-]+))?#(\d+)", re.IGNORECASE)
_REFS_KIND = "history-pull-refs"  # results rows: issue -> merged PRs whose body closes it, and the listing's mark


@dataclass
class FixCrawlStats:
    """What one `history crawl` did."""

    repo: str
    since: str | None = None
    issues_listed: int = 0  # closed issues the intake crawl listed in this run
    issues_examined: int = 0  # closed issues whose fix was looked for in this run
    issues_skipped: int = 0  # unchanged since a crawl examined them, or closed as not planned
    issues_not_planned: int = 0  # closed as won't-fix/duplicate (GitHub's state_reason): no request spent
    issues_fixed: int = 0  # examined issues with a fix found
    fixes_stored: int = 0  # fix records written (a PR fixing two issues is two)
    by_pull: int = 0
    by_commit: int = 0
    no_source_files: int = 0  # fixes found whose changes were tests/docs only
    pull_pages: int = 0  # pages of the pull-request listing read for 'Fixes #N'
    requests: int = 0  # HTTP requests of this run, the issue listing's included (304s and retries too)
    not_modified: int = 0
    seconds: float = 0.0
    done: bool = False
    found: list[str] = field(default_factory=list)  # "#issue <- PR #n" / "#issue <- commit abc", this run

    @property
    def requests_per_fixed_issue(self) -> float:
        return self.requests / self.issues_fixed if self.issues_fixed else 0.0


@dataclass(frozen=True)
class FixCrawlProgress:
    phase: str  # "issues" | "pulls" | "fixes"
    done: int
    total: int | None
    found: int


def closing_references(text: str, repo: str) -> list[int]:
    """The issue numbers of this repository a pull request's text says it closes."""
    out: list[int] = []
    for other, number in _CLOSING.findall(text or ""):
        if other and other.lower() != repo.lower():
            continue
        n = int(number)
        if n not in out:
            out.append(n)
    return out


def crawl_fixes(
    repo: str,
    settings: Settings,
    store: Store,
    since: str | None = None,
    limit: int | None = None,
    progress: Callable[[FixCrawlProgress], None] | None = None,
) -> FixCrawlStats:
    """Find the fixes of a repository's closed issues and store them with their changed source files.

    1. The closed issues are crawled into the store by the intake (incremental and resumable there).
    2. Merged pull requests updated since the last run are listed (most recent first) for
       'Fixes #N' / 'Closes #N' in their bodies; what they say is kept in the store.
    3. Each closed issue not examined at its current version is examined: its timeline gives the
       pull requests that cross-referenced it (kept when merged, dropped when reverted or a revert)
       and the commit that closed it; with no merged pull request the closing (else the referencing)
       commit is the fix. The fix's changed files come from /pulls/N/files (paginated) or
       /commits/SHA, tests and docs dropped. Each issue is stored with its fixes in one transaction,
       so an interrupted crawl goes on where it stopped.
    """
    repo = parse_repo(repo)
    stats = FixCrawlStats(repo=repo, since=since)
    started = time.monotonic()
    listing = crawl(repo, settings, store, since=since, state="closed",
                    progress=(lambda p: progress(FixCrawlProgress("issues", p.page, p.total_pages, 0))) if progress else None)
    stats.issues_listed = listing.issues_seen
    stats.requests += listing.requests
    stats.not_modified += listing.not_modified
    client = GitHubClient(settings)
    try:
        refs = _pull_references(client, store, repo, stats, progress, since)
        closed: list[Issue] = []
        not_planned: set[int] = set()
        for issue, raw in store.iter_issues_raw(repo):
            if issue.state == "closed":
                closed.append(issue)
                if isinstance(raw, dict) and raw.get("state_reason") == "not_planned":
                    not_planned.add(issue.number)  # closed as won't-fix or duplicate: no fix to look for
        examined = store.fix_crawled(repo, [i.number for i in closed])
        todo = [i for i in closed if examined.get(i.number) != i.updated_at]
        stats.issues_skipped = len(closed) - len(todo)
        for issue in [i for i in todo if i.number in not_planned and not refs.get(i.number)]:
            store.save_fix_crawl(repo, issue.number, issue.updated_at, [])
            stats.issues_not_planned += 1
            stats.issues_skipped += 1
        todo = [i for i in todo if i.number not in not_planned or refs.get(i.number)]
        if limit is not None:
            todo = todo[:limit]
        pulls: dict[int, dict[str, Any] | None] = {}  # one request per pull request, whichever issues it fixes
        files: dict[str, list[str]] = {}
        for n, issue in enumerate(todo, start=1):
            records = _fixes_of(client, repo, issue, refs.get(issue.number, []), pulls, files, stats)
            store.save_fix_crawl(repo, issue.number, issue.updated_at, [fix_row(r) for r in records])
            stats.issues_examined += 1
            if records:
                stats.issues_fixed += 1
                stats.fixes_stored += len(records)
            if progress is not None:
                progress(FixCrawlProgress("fixes", n, len(todo), stats.issues_fixed))
        stats.done = listing.done and stats.issues_examined + stats.issues_skipped == len(closed)
    except SftlError as exc:
        _fill(stats, client, started)
        raise type(exc)(f"{exc} ({stats.issues_examined} issues examined in this run; run the same crawl again to resume)") from exc
    finally:
        client.close()
    _fill(stats, client, started)
    return stats


def _fill(stats: FixCrawlStats, client: GitHubClient, started: float) -> None:
    stats.requests += client.stats.requests
    stats.not_modified += client.stats.not_modified
    client.stats.requests = client.stats.not_modified = 0  # counted once, even when filled twice
    stats.seconds = round(time.monotonic() - started, 3)


def _pull_references(
    client: GitHubClient, store: Store, repo: str, stats: FixCrawlStats,
    progress: Callable[[FixCrawlProgress], None] | None, since: str | None = None,
) -> dict[int, list[int]]:
    """issue -> merged pull requests whose body closes it: the stored map, brought up to date by
    listing closed pull requests updated since the last listing (newest first, stopping there;
    on a first crawl with `since`, at `since`)."""
    saved = store.get_result(_REFS_KIND, repo) or {}
    mark = saved.get("mark") if isinstance(saved.get("mark"), str) else since
    refs: dict[int, list[int]] = {}
    for key, prs in (saved.get("refs") or {}).items():
        if str(key).isdigit() and isinstance(prs, list):
            refs[int(key)] = [int(p) for p in prs if isinstance(p, int)]
    newest: str | None = None
    stop = False
    for page in client.iter_pull_pages(repo, state="closed"):
        stats.pull_pages += 1
        for pull in page.items:
            updated = str(pull.get("updated_at") or "")
            if mark is not None and updated and updated < mark:
                stop = True
                break
            newest = max(newest or updated, updated)
            if not pull.get("merged_at") or not isinstance(pull.get("number"), int):
                continue
            for n in closing_references(f"{pull.get('title') or ''}\n{pull.get('body') or ''}", repo):
                if pull["number"] not in refs.setdefault(n, []):
                    refs[n].append(pull["number"])
        if progress is not None:
            progress(FixCrawlProgress("pulls", stats.pull_pages, page.last_page, 0))
        if stop:
            break
    store.save_result(_REFS_KIND, repo, {"mark": newest or mark, "refs": {str(k): v for k, v in sorted(refs.items())}})
    # the map is kept even when the listing stops early: a rerun lists only what is newer
    return refs


def _pull(client: GitHubClient, repo: str, number: int, pulls: dict[int, dict[str, Any] | None]) -> dict[str, Any] | None:
    if number not in pulls:
        try:
            pulls[number] = client.get_pull(repo, number)
        except NotFoundError:
            pulls[number] = None  # an issue, or a deleted pull request
    return pulls[number]


def _fixes_of(
    client: GitHubClient, repo: str, issue: Issue, body_refs: list[int],
    pulls: dict[int, dict[str, Any] | None], files: dict[str, list[str]], stats: FixCrawlStats,
) -> list[FixRecord]:
    """The fixes of one closed issue: merged, unreverted pull requests, else the closing commit."""
    timeline = client.get_timeline(repo, issue.number)
    candidates: list[int] = []
    merged_inline: dict[int, dict[str, Any]] = {}
    closing_commit: str | None = None
    referencing: list[str] = []
    for event in timeline:
        kind = event.get("event")
        if kind == "cross-referenced":
            src = (event.get("source") or {}).get("issue") or {}
            same_repo = ((src.get("repository") or {}).get("full_name") or repo).lower() == repo.lower()
            if src.get("pull_request") is not None and same_repo and isinstance(src.get("number"), int):
                if src["number"] not in candidates:
                    candidates.append(src["number"])
                    merged_inline[src["number"]] = src
        elif kind == "closed" and event.get("commit_id"):
            closing_commit = str(event["commit_id"])  # the last closing counts (a reopened issue closes again)
        elif kind == "referenced" and event.get("commit_id"):
            referencing.append(str(event["commit_id"]))
        elif kind == "reopened":
            closing_commit = None  # what closed it before did not fix it
    for n in body_refs:
        if n not in candidates:
            candidates.append(n)
    merged: list[dict[str, Any]] = []
    for n in candidates:
        inline = (merged_inline.get(n) or {}).get("pull_request") or {}
        if "merged_at" in inline:  # the timeline says whether it was merged: no request
            if inline["merged_at"]:
                src = merged_inline[n]
                merged.append({"number": n, "title": src.get("title"), "body": src.get("body"),
                               "merged_at": inline["merged_at"], "merge_commit_sha": None})
            continue
        pull = _pull(client, repo, n, pulls)
        if pull is not None and pull.get("merged_at"):
            merged.append(pull)
    fixes = _drop_reverted(merged, repo)
    records: list[FixRecord] = []
    merge_shas = {str(p.get("merge_commit_sha") or "") for p in merged}
    for pull in fixes:
        changed = _pull_files(client, repo, pull["number"], files)
        if not changed:
            stats.no_source_files += 1
            continue
        records.append(_record(issue, repo, pull["number"], pull.get("merge_commit_sha"), str(pull["merged_at"]), changed,
                               f"crawled: PR #{pull['number']} merged {str(pull['merged_at'])[:10]} ({pull.get('title') or ''})"))
        stats.by_pull += 1
        stats.found.append(f"#{issue.number} <- PR #{pull['number']}")
    if not records and not fixes:
        # no merged pull request: the commit that closed the issue (else the last one that referenced it)
        sha = closing_commit or (referencing[-1] if referencing else None)
        if sha and sha not in merge_shas:  # a reverted PR's merge commit is no fix either
            try:
                commit = client.get_commit(repo, sha)
            except NotFoundError:
                commit = None
            if commit is not None:
                changed = [f for f in _filenames(commit.get("files") or []) if is_source_file(f)]
                date = str(((commit.get("commit") or {}).get("committer") or {}).get("date") or "")
                if changed and date:
                    how = "closed" if sha == closing_commit else "referenced"
                    records.append(_record(issue, repo, None, sha, date, changed, f"crawled: commit {sha[:10]} {how} the issue"))
                    stats.by_commit += 1
                    stats.found.append(f"#{issue.number} <- commit {sha[:10]}")
                elif not changed:
                    stats.no_source_files += 1
    return records


def _drop_reverted(merged: list[dict[str, Any]], repo: str) -> list[dict[str, Any]]:
    """Merged pull requests that stand: reverts themselves go, and so do the ones they revert."""
    reverted_titles: set[str] = set()
    reverted_numbers: set[int] = set()
    reverts: set[int] = set()
    for pull in merged:
        m = _REVERT_TITLE.match(str(pull.get("title") or ""))
        body_reverts = [int(n) for other, n in _REVERTS_PR.findall(str(pull.get("body") or ""))
                        if not other or other.lower() == repo.lower()]
        if m or body_reverts:
            reverts.add(pull["number"])
            if m:
                reverted_titles.add(m.group(1).strip().lower())
            reverted_numbers.update(body_reverts)
    return [
        p for p in merged
        if p["number"] not in reverts and p["number"] not in reverted_numbers
        and str(p.get("title") or "").strip().lower() not in reverted_titles
    ]


def _filenames(entries: Iterable[Any]) -> list[str]:
    out = []
    for e in entries:
        if isinstance(e, dict) and isinstance(e.get("filename"), str) and e.get("status") != "removed":
            out.append(e["filename"])
    return out


def _pull_files(client: GitHubClient, repo: str, number: int, files: dict[str, list[str]]) -> list[str]:
    key = f"pr:{number}"
    if key not in files:
        files[key] = [f for f in _filenames(client.get_pull_files(repo, number)) if is_source_file(f)]
    return files[key]


def _record(issue: Issue, repo: str, pr: int | None, sha: str | None, when: str, changed: list[str], evidence: str) -> FixRecord:
    from sftl.extract import extract
    from sftl.history import guess_kind

    extraction = extract(issue)
    text = f"{issue.title}\n{issue.body}"
    device = "both" if re.search(r"\bcpu\b", text, re.I) and re.search(r"\b(cuda|gpu)\b", text, re.I) else (
        "cuda" if re.search(r"\b(cuda|gpu)\b", text, re.I) else "mps" if re.search(r"\bmps\b", text, re.I) else None)
    return FixRecord(
        repo=repo, issue=issue.number, pr=pr, commit=(sha or None) and str(sha).lower()[:40], title=issue.title,
        fixed_on=when[:10], files=tuple(dict.fromkeys(changed)), ops=tuple(extraction.apis[:8]),
        kind=guess_kind(issue, extraction), device=device, body=issue.body[:4000], evidence=evidence,
        issue_created_at=issue.created_at,
    )
