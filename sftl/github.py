"""The only module that talks HTTP to GitHub: the one client, pagination, ETag cache, rate limits, retries, offline.

Public interface (other stages code against it):

- `parse_target(text) -> Target`: an issue URL, `OWNER/REPO#N`, or a path to a JSON file.
- `issue_from_json(obj, comments=None) -> Issue` and `comment_from_json(obj) -> Comment`:
  GitHub REST objects to model dataclasses (InputError on malformed objects).
- `issue_to_json(issue) -> dict`: the reverse, so exports re-import losslessly.
  (parsed without the network in `sftl.github_json`, re-exported here)
- `GitHubClient(settings)`: `get_issue`, `get_comments`, `iter_issue_pages`,
  `create_comment`, `update_comment`, `add_labels` (writes: a token is required, each refusal its own
  error and exit code; creating a comment is never retried where it may have landed),
  `iter_comment_pages` (the repository-wide comment listing), `get_tree`, `get_raw_file`,
  `commit_at` (the commit current at a date) and `download_tarball` (a release's source archive,
  streamed to disk and resumable).
  Every GET goes through an on-disk cache under `settings.cache_dir/http` (ETag / Last-Modified
  conditional requests; a 304 costs no rate limit), the primary and secondary rate limits, and
  retries with exponential backoff + jitter. With `settings.offline` only the cache answers and a
  miss raises `OfflineMissError` naming the URL.
- `cache_usage(settings)` and `prune_cache(settings, max_bytes, max_age_s)` (in `sftl.github_cache`):
  the HTTP cache is bounded; entries are evicted oldest-used first (a hit refreshes its time). A
  client that wrote to the cache prunes it to `CACHE_MAX_BYTES` / `CACHE_MAX_AGE_S` when it closes,
  at most once per `CACHE_PRUNE_INTERVAL_S`.

About 900 lines, on purpose: what is left is the client class alone (every network call goes through
it); its pure parts already live in `sftl.github_json` and `sftl.github_cache`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode, urljoin, urlsplit

if TYPE_CHECKING:  # requests costs 0.25 s to import: only the calls that reach the network load it
    import requests

from sftl.config import Settings
from sftl.errors import (
    AuthError,
    GitHubError,
    IssueGoneError,
    LockedIssueError,
    NotFoundError,
    OfflineMissError,
    RateLimitError,
    RejectedWriteError,
    WriteAccessError,
)
from sftl.github_cache import (
    CACHE_MAX_AGE_S,
    CACHE_MAX_BYTES,
    CACHE_PRUNE_INTERVAL_S,
    PRUNE_MARK,
    prune_cache,
    touch,
)
from sftl.github_json import (  # noqa: F401 (re-exported: targets and REST JSON parsing moved to sftl.github_json)
    MAX_ISSUE_NUMBER,
    Target,
    check_issue_number,
    comment_from_json,
    comment_issue_number,
    comment_to_json,
    issue_from_json,
    issue_to_json,
    json_type,
    parse_repo,
    parse_target,
    repo_of,
)

USER_AGENT = "sftl (bug-report triage; +https://github.com)"
_log = logging.getLogger("sftl")  # waits are announced here; the CLI prints them on stderr
_UNREACHABLE: dict[str, float] = {}  # host -> when a request to it gave up on a network that is down
_UNREACHABLE_FOR_S = 60.0  # within this, further requests to that host fail at once instead of waiting again


def forget_unreachable_hosts() -> None:
    """Start afresh: the CLI calls this per command, so one command's outage is not the next one's."""
    _UNREACHABLE.clear()


_CONNECT_TIMEOUT_S = 10.0  # GitHub accepts a connection in well under a second; longer is a network down
_ANNOUNCE_WAIT_S = 1.0  # a wait this long or longer is said on stderr; shorter ones pass unnoticed
_SECONDARY_DEFAULT_WAIT = 60.0  # GitHub: wait at least a minute when no Retry-After is given
_REDIRECTS = (301, 302, 303, 307, 308)
_CHUNK = 1 << 16


# -- the client -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Page:
    """One page of a paginated listing."""

    url: str
    items: list[dict[str, Any]]
    next_url: str | None
    last_page: int | None = None  # from the Link rel="last", when GitHub gives it
    from_cache: bool = False


@dataclass
class ClientStats:
    """What the client did: network requests (incl. 304s and retries), cache answers, waits."""

    requests: int = 0
    not_modified: int = 0
    offline_hits: int = 0
    retries: int = 0
    waited_s: float = 0.0
    downloaded: int = 0  # bytes of archive bodies streamed to disk (download_tarball)


@dataclass(frozen=True)
class _Response:
    status: int
    body: bytes
    etag: str | None
    last_modified: str | None
    link: str | None
    from_cache: bool


def _http_date(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M:%S UTC")


def _parse_link(header: str | None) -> dict[str, str]:
    links: dict[str, str] = {}
    for part in (header or "").split(","):
        m = re.match(r'\s*<([^>]*)>\s*;\s*rel="?([^";]+)"?', part)
        if m:
            links[m.group(2)] = m.group(1)
    return links


class GitHubClient:
    """GitHub REST over one requests.Session, with cache, rate limits, retries and offline mode.

    `sleep` and `clock` are injectable so callers can observe waits; by default real time.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        cache_max_bytes: int | None = CACHE_MAX_BYTES,
        cache_max_age_s: float | None = CACHE_MAX_AGE_S,
    ) -> None:
        self.settings = settings
        self.cache_max_bytes = cache_max_bytes
        self.cache_max_age_s = cache_max_age_s
        self.cache_written = 0  # bytes this client added to the cache (pruning is due only then)
        self.api_url = settings.api_url.rstrip("/")
        self.stats = ClientStats()
        self._sleep = sleep
        self._clock = clock
        self._session: requests.Session | None = None
        self._cache = settings.cache_dir / "http"
        self._remaining: int | None = None
        self._reset_at: float | None = None
        self.server_time: float | None = None  # GitHub's clock (the Date header of the latest answer)

    # -- session / lifecycle

    @property
    def session(self) -> requests.Session:
        if self._session is None:
            import requests

            s = requests.Session()
            s.trust_env = False  # no proxies or .netrc credentials sneaking in from the environment
            s.headers.update(
                {
                    "User-Agent": USER_AGENT,
                    "Accept": "application/vnd.github+json",
                    "X-GitHub-Api-Version": "2022-11-28",
                }
            )
            if self.settings.token:
                s.headers["Authorization"] = f"Bearer {self.settings.token}"
            self._session = s
        return self._session

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None
        if self.cache_written:
            self.cache_written = 0
            self._auto_prune()

    def _auto_prune(self) -> None:
        """Keep the cache bounded without scanning it on every run: at most once an interval."""
        if self.cache_max_bytes is None and self.cache_max_age_s is None:
            return
        mark = self._cache / PRUNE_MARK
        try:
            if self._clock() - mark.stat().st_mtime < CACHE_PRUNE_INTERVAL_S:
                return
        except OSError:
            pass  # never pruned
        prune_cache(self.settings, self.cache_max_bytes, self.cache_max_age_s, now=self._clock())

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- public API

    def get_issue(self, repo: str, number: int) -> dict[str, Any]:
        """The raw REST issue object (pull requests come back too: check its `pull_request` key)."""
        data = self._json(self._get(f"/repos/{repo}/issues/{number}", what=f"issue {repo}#{number}"))
        if not isinstance(data, dict):
            raise GitHubError(f"unexpected answer for {repo}#{number}: not a JSON object")
        return data

    def get_comments(self, repo: str, number: int) -> list[dict[str, Any]]:
        """Every comment of an issue, all pages, oldest first (raw REST objects)."""
        url: str | None = self._url(f"/repos/{repo}/issues/{number}/comments", {"per_page": 100})
        out: list[dict[str, Any]] = []
        while url:
            resp = self._get(url, what=f"comments of {repo}#{number}")
            page = self._json(resp)
            if not isinstance(page, list):
                raise GitHubError(f"unexpected answer for the comments of {repo}#{number}: not a list")
            out.extend(page)
            url = _parse_link(resp.link).get("next")
        return out

    # -- writes (sftl comment): one comment per issue, labels

    def create_comment(self, repo: str, number: int, body: str) -> dict[str, Any]:
        """Post a new comment on an issue; the REST comment object GitHub created."""
        return self._write("POST", f"/repos/{repo}/issues/{number}/comments", {"body": body},
                           f"a comment on {repo}#{number}", idempotent=False)

    def update_comment(self, repo: str, comment_id: int, body: str) -> dict[str, Any]:
        """Replace the body of one comment (by its id); the updated REST comment object."""
        return self._write("PATCH", f"/repos/{repo}/issues/comments/{int(comment_id)}", {"body": body},
                           f"comment {comment_id} of {repo}")

    def add_labels(self, repo: str, number: int, labels: list[str] | tuple[str, ...]) -> list[str]:
        """Add labels to an issue (those it has stay; adding one twice is a no-op); every label it now has."""
        data = self._write("POST", f"/repos/{repo}/issues/{number}/labels", {"labels": list(labels)},
                           f"labels of {repo}#{number}")
        items = data if isinstance(data, list) else []
        return [str(x["name"]) for x in items if isinstance(x, dict) and "name" in x]

    def _write(self, method: str, path: str, payload: dict[str, Any], what: str, *, idempotent: bool = True) -> Any:
        """One write through the retry and rate-limit net; each refusal becomes its own error (its exit code)."""
        if self.settings.offline:
            raise OfflineMissError(f"offline: {what} cannot be written (drop --offline)")
        if not self.settings.token:
            raise WriteAccessError(f"writing {what} needs a token: set GITHUB_TOKEN (a workflow: "
                                   "`permissions: issues: write`); nothing was written")
        resp = self._send(self._url(path), {}, what, method=method, payload=payload, idempotent=idempotent,
                          answer_4xx=True)
        status, message = resp.status_code, _message(resp)
        if status < 300:
            try:
                return resp.json()
            except ValueError:
                return {}
        quoted = f"{status} {message}".strip()
        if status == 403 and "locked" in message.lower():
            raise LockedIssueError(f"GitHub refused {what}: the issue is locked ({quoted}); nothing was written")
        if status in (401, 403):
            raise WriteAccessError(f"GitHub refused {what} ({quoted}): GITHUB_TOKEN cannot write this repository's "
                                   "issues (a workflow needs `permissions: issues: write`); nothing was written")
        if status in (404, 410):
            gone = "was deleted" if status == 410 else "is not there (or the token cannot see it)"
            raise IssueGoneError(f"GitHub refused {what}: the issue {gone} ({quoted}); nothing was written")
        if status == 422:
            raise RejectedWriteError(f"GitHub refused {what} as invalid ({quoted}{_errors_of(resp)})")
        raise GitHubError(f"GitHub answered {quoted or status} for {what}; nothing was written")

    def issues_url(
        self,
        repo: str,
        since: str | None = None,
        state: str = "open",
        labels: str | list[str] | tuple[str, ...] | None = None,
        per_page: int = 100,
    ) -> str:
        """The first listing URL, sorted by creation time, oldest first: new issues append at the
        end and updates move nothing, so page-number cursors stay valid while the repository
        changes (sorting by `updated` would shift items across page boundaries mid-crawl and skip them)."""
        params: dict[str, Any] = {"state": state, "sort": "created", "direction": "asc", "per_page": per_page}
        if since:
            params["since"] = since
        if labels:
            params["labels"] = labels if isinstance(labels, str) else ",".join(labels)
        return self._url(f"/repos/{repo}/issues", params)

    def iter_issue_pages(
        self,
        repo: str,
        since: str | None = None,
        state: str = "open",
        labels: str | list[str] | tuple[str, ...] | None = None,
        per_page: int = 100,
        start_url: str | None = None,
    ) -> Iterator[Page]:
        """Pages of the issue listing (PRs included, as GitHub returns them), following Link rel="next".

        `start_url` resumes at a saved cursor (a `Page.next_url` from an earlier run).
        """
        yield from self._pages(start_url or self.issues_url(repo, since, state, labels, per_page), f"issue listing of {repo}")

    def comments_url(self, repo: str, since: str | None = None, per_page: int = 100) -> str:
        """The first page of the repository-wide comment listing (issues and pull requests alike),
        least recently updated first, so comments edited or added while it is read move to the end."""
        params: dict[str, Any] = {"sort": "updated", "direction": "asc", "per_page": per_page}
        if since:
            params["since"] = since
        return self._url(f"/repos/{repo}/issues/comments", params)

    def iter_comment_pages(
        self, repo: str, since: str | None = None, start_url: str | None = None, per_page: int = 100
    ) -> Iterator[Page]:
        """Pages of every comment in the repository updated at or after `since` (raw REST objects;
        `comment_issue_number` tells whose). `start_url` resumes at a saved `Page.next_url`."""
        yield from self._pages(start_url or self.comments_url(repo, since, per_page), f"comment listing of {repo}")

    def _pages(self, url: str | None, what: str) -> Iterator[Page]:
        while url:
            resp = self._get(url, what=what)
            items = self._json(resp)
            if not isinstance(items, list):
                raise GitHubError(f"unexpected answer for the {what}: not a list")
            links = _parse_link(resp.link)
            last = None
            m = re.search(r"[?&]page=(\d+)", links.get("last", ""))
            if m:
                last = int(m.group(1))
            yield Page(url=url, items=items, next_url=links.get("next"), last_page=last, from_cache=resp.from_cache)
            url = links.get("next")

    def get_tree(self, repo: str, ref: str) -> list[str]:
        """Every blob path of `repo` at `ref` (git trees API, recursive), cached on disk."""
        resp = self._get(
            self._url(f"/repos/{repo}/git/trees/{quote(ref, safe='')}", {"recursive": 1}), what=f"tree of {repo}@{ref}"
        )
        data = self._json(resp)
        if not isinstance(data, dict) or not isinstance(data.get("tree"), list):
            raise GitHubError(f"unexpected answer for the tree of {repo}@{ref}")
        if data.get("truncated"):
            # a partial file list would silently mislead whoever ranks files from it
            raise GitHubError(f"GitHub truncated the tree of {repo}@{ref} (over its 100,000-entry limit)")
        return [e["path"] for e in data["tree"] if isinstance(e, dict) and e.get("type") == "blob" and "path" in e]

    # -- what fixed an issue (sftl history crawl)

    def get_timeline(self, repo: str, number: int) -> list[dict[str, Any]]:
        """Every event of an issue's timeline, all pages (cross-references, closings with their commit, ...)."""
        return self._all(self._url(f"/repos/{repo}/issues/{number}/timeline", {"per_page": 100}), f"timeline of {repo}#{number}")

    def iter_pull_pages(self, repo: str, state: str = "closed", per_page: int = 100) -> Iterator[Page]:
        """Pages of the pull-request listing, most recently updated first (stop when older than you need)."""
        params = {"state": state, "sort": "updated", "direction": "desc", "per_page": per_page}
        yield from self._pages(self._url(f"/repos/{repo}/pulls", params), f"pull-request listing of {repo}")

    def get_pull(self, repo: str, number: int) -> dict[str, Any]:
        """One pull request (merged_at, merge_commit_sha, title, body)."""
        data = self._json(self._get(f"/repos/{repo}/pulls/{number}", what=f"pull request {repo}#{number}"))
        if not isinstance(data, dict):
            raise GitHubError(f"unexpected answer for pull request {repo}#{number}: not a JSON object")
        return data

    def get_pull_files(self, repo: str, number: int) -> list[dict[str, Any]]:
        """The files a pull request changed, all pages (GitHub lists at most 3,000)."""
        return self._all(self._url(f"/repos/{repo}/pulls/{number}/files", {"per_page": 100}), f"files of {repo}#{number}")

    def get_commit(self, repo: str, sha: str) -> dict[str, Any]:
        """One commit with the files it changed (`files`) and its dates."""
        data = self._json(self._get(f"/repos/{repo}/commits/{quote(sha, safe='')}", what=f"commit {sha[:10]} of {repo}"))
        if not isinstance(data, dict):
            raise GitHubError(f"unexpected answer for commit {sha[:10]} of {repo}: not a JSON object")
        return data

    def _all(self, url: str, what: str) -> list[dict[str, Any]]:
        return [item for page in self._pages(url, what) for item in page.items if isinstance(item, dict)]

    def get_raw_file(self, repo: str, ref: str, path: str) -> str | None:
        """The text of one file at `ref` (contents API, raw media type), or None when absent."""
        url = self._url(f"/repos/{repo}/contents/{quote(path.lstrip('/'))}", {"ref": ref})
        try:
            resp = self._get(url, what=f"{path} of {repo}@{ref}", accept="application/vnd.github.raw")
        except NotFoundError:
            return None
        return resp.body.decode("utf-8", errors="replace")

    def commit_at(self, repo: str, until: str, branch: str | None = None) -> tuple[str, str] | None:
        """(sha, committer date) of the newest commit of `branch` (the default branch when None) at or before
        `until` (an ISO timestamp): the commits API with `until=`, one request. None when there is none."""
        params: dict[str, Any] = {"until": until, "per_page": 1}
        if branch:
            params["sha"] = branch
        what = f"the commit of {repo}{'@' + branch if branch else ''} current at {until}"
        data = self._json(self._get(self._url(f"/repos/{repo}/commits", params), what=what))
        if not isinstance(data, list):
            raise GitHubError(f"unexpected answer for {what}: not a list")
        if not data:
            return None
        first = data[0] if isinstance(data[0], dict) else {}
        sha = first.get("sha")
        if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{7,40}", sha):
            raise GitHubError(f"unexpected answer for {what}: no commit sha")
        commit = first.get("commit")
        committer = commit.get("committer") if isinstance(commit, dict) else None
        date = committer.get("date") if isinstance(committer, dict) else None
        return sha, date if isinstance(date, str) else ""

    def download_tarball(
        self, repo: str, ref: str, dest: Path, progress: Callable[[str, int, int | None], None] | None = None
    ) -> Path:
        """Stream `GET /repos/{repo}/tarball/{ref}` (a .tar.gz of the tree at `ref`) to `dest`; returns `dest`.

        The API answers with a redirect to the archive host, followed here by hand so the token never
        leaves for another host. The body is streamed to `dest.part`, with the URL and validator it came
        from beside it (`dest.part.json`): a download killed half-way resumes with an HTTP Range request
        when the server honours it, and starts over when it does not. `dest` appears only complete
        (renamed into place). `progress(event, done, total)` sees "start", "update" and "end" (total None
        when the server sends no length). One API request; the archive host's requests are counted too.
        """
        import requests

        what = f"the source archive of {repo}@{ref}"
        if self.settings.offline:
            raise OfflineMissError(f"offline: {what} is not downloaded")
        dest.parent.mkdir(parents=True, exist_ok=True)
        part = dest.with_name(dest.name + ".part")
        meta_path = dest.with_name(dest.name + ".part.json")
        meta = _read_json_file(meta_path)
        location: str | None = meta.get("url") if isinstance(meta.get("url"), str) and part.is_file() else None
        validator = meta.get("validator") if location and isinstance(meta.get("validator"), str) else None
        if location is None:
            part.unlink(missing_ok=True)
        api_url = self._url(f"/repos/{repo}/tarball/{quote(ref, safe='')}")
        attempt = 0
        asked_api = False
        while True:
            resp: requests.Response | None = None
            offset = part.stat().st_size if part.is_file() else 0
            if location is None:
                if asked_api and attempt > self.settings.max_retries:
                    raise GitHubError(f"cannot download {what}: the archive host refused it after {attempt} attempts")
                asked_api = True
                resp = self._send(api_url, {}, what, allow_redirects=False, stream=True)
                if resp.status_code in _REDIRECTS:
                    target = resp.headers.get("Location") or ""
                    resp.close()
                    resp = None
                    if not target:
                        raise GitHubError(f"GitHub redirected {what} nowhere (no Location header)")
                    location = urljoin(api_url, target)
                    validator = None
                else:  # the API served the archive itself: the whole body, from the start
                    location, validator, offset = api_url, None, 0
            problem = ""
            try:
                if resp is None:
                    resp = self._archive_get(location, offset, validator, what)
                    if resp.status_code in (403, 404, 410) and location != api_url:
                        resp.close()  # a signed archive URL that expired: ask the API for a fresh one
                        location = None
                        attempt += 1
                        continue
                    if resp.status_code == 416 or resp.status_code >= 500:
                        resp.close()
                        raise requests.ConnectionError(f"archive host answered {resp.status_code}")
                    if resp.status_code >= 400:
                        raise GitHubError(f"the archive host answered {resp.status_code} for {what}")
                    if resp.status_code != 206 or not _range_starts_at(resp.headers.get("Content-Range"), offset):
                        offset = 0  # no partial content: the whole archive again
                total = _content_length(resp)
                total = total + offset if total is not None else None
                validator = resp.headers.get("ETag") or resp.headers.get("Last-Modified") or validator
                _write_json_file(meta_path, {"url": location, "validator": validator, "repo": repo, "ref": ref})
                done = offset
                if progress:
                    progress("start", done, total)
                with open(part, "r+b" if offset else "wb") as fh:
                    fh.seek(offset)
                    fh.truncate()
                    for chunk in resp.iter_content(_CHUNK):
                        fh.write(chunk)
                        done += len(chunk)
                        self.stats.downloaded += len(chunk)
                        if progress:
                            progress("update", done, total)
                    fh.flush()
                    os.fsync(fh.fileno())
                if total is not None and done != total:
                    raise requests.exceptions.ChunkedEncodingError(f"{done} of {total} bytes")
                os.replace(part, dest)
                meta_path.unlink(missing_ok=True)
                if progress:
                    progress("end", done, total)
                return dest
            except requests.Timeout:
                problem = f"timed out after {self.settings.http_timeout:g} s"
            except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
                problem = f"connection failed ({type(exc).__name__}: {str(exc)[:120]})"
            except requests.RequestException as exc:
                raise GitHubError(f"cannot download {what}: {exc}") from exc
            finally:
                if resp is not None:
                    resp.close()
            attempt += 1
            if attempt > self.settings.max_retries:
                have = part.stat().st_size if part.is_file() else 0
                raise GitHubError(
                    f"cannot download {what}: {problem} after {attempt} attempts; "
                    f"{have} bytes kept, the next run resumes from there"
                )
            self.stats.retries += 1
            self._wait(self._backoff(attempt - 1))

    def _archive_get(self, url: str, offset: int, validator: str | None, what: str) -> requests.Response:
        """One streamed GET of an archive URL, from `offset` when resuming (Range, If-Range)."""
        headers: dict[str, Any] = {"Accept": "*/*", "X-GitHub-Api-Version": None}
        if urlsplit(url).netloc != urlsplit(self.api_url).netloc:
            headers["Authorization"] = None  # the token is for the API host only
        if offset:
            headers["Range"] = f"bytes={offset}-"
            if validator:
                headers["If-Range"] = validator
        self.stats.requests += 1
        timeout = (self.settings.http_timeout, self.settings.http_timeout)
        return self.session.get(url, headers=headers, timeout=timeout, stream=True, allow_redirects=True)

    # -- plumbing

    def _url(self, path: str, params: dict[str, Any] | None = None) -> str:
        url = path if path.startswith(("http://", "https://")) else self.api_url + path
        return url + ("?" + urlencode(params) if params else "")

    def _json(self, resp: _Response) -> Any:
        try:
            return json.loads(resp.body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise GitHubError(f"GitHub sent a malformed JSON answer ({exc})") from exc
        except RecursionError:  # the C decoder recurses per nesting level
            raise GitHubError("GitHub sent a malformed JSON answer (nested too deeply)") from None

    def _cache_path(self, url: str, accept: str | None) -> Path:
        digest = hashlib.sha256(f"{accept or ''} {url}".encode()).hexdigest()
        return self._cache / digest[:2] / f"{digest}.json"

    def _read_cache(self, path: Path) -> dict[str, Any] | None:
        try:
            entry = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            return None  # a missing or torn cache file is just a miss
        return entry if isinstance(entry, dict) and isinstance(entry.get("body"), str) else None

    def _write_cache(self, path: Path, entry: dict[str, Any]) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(entry, fh)
                self.cache_written += fh.tell()
            os.replace(tmp, path)  # atomic: readers see the old entry or the new one
        except OSError:
            pass  # a cache that cannot be written only costs a later request

    def _get(self, url_or_path: str, *, what: str, accept: str | None = None) -> _Response:
        url = self._url(url_or_path)
        cpath = self._cache_path(url, accept)
        cached = self._read_cache(cpath)
        expect_json = accept is None or "json" in accept
        if cached is not None and expect_json and not _is_json(cached["body"].encode("utf-8")):
            cached = None  # a torn body cached before it was checked: a miss, fetched again
        if self.settings.offline:
            if cached is None:
                raise OfflineMissError(f"offline: {what} is not in the cache (GET {url}); run once without --offline")
            self.stats.offline_hits += 1
            touch(cpath)
            return _Response(200, cached["body"].encode("utf-8"), cached.get("etag"), cached.get("last_modified"), cached.get("link"), True)
        headers: dict[str, str] = {}
        if accept:
            headers["Accept"] = accept
        if cached is not None:
            if cached.get("etag"):
                headers["If-None-Match"] = cached["etag"]
            elif cached.get("last_modified"):
                headers["If-Modified-Since"] = cached["last_modified"]
        resp = self._send(url, headers, what, expect_json=expect_json)
        if resp.status_code == 304 and cached is not None:
            self.stats.not_modified += 1
            touch(cpath)
            return _Response(200, cached["body"].encode("utf-8"), cached.get("etag"), cached.get("last_modified"), cached.get("link"), True)
        body = resp.content
        result = _Response(
            resp.status_code, body, resp.headers.get("ETag"), resp.headers.get("Last-Modified"), resp.headers.get("Link"), False
        )
        if result.etag or result.last_modified:
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError:
                return result
            self._write_cache(
                cpath,
                {"url": url, "etag": result.etag, "last_modified": result.last_modified, "link": result.link, "body": text,
                 "stored": self._clock()},
            )
        return result

    def _backoff(self, attempt: int) -> float:
        base = self.settings.backoff_base * (2**attempt)
        return min(60.0, base * random.uniform(0.5, 1.5))  # jitter: retries of many clients spread out

    def _wait(self, seconds: float) -> None:
        if seconds > 0:
            self.stats.waited_s += seconds
            self._sleep(seconds)

    def _rate_limit_hint(self) -> str:
        return "" if self.settings.token else "; set GITHUB_TOKEN for a 5000 requests/hour limit"

    def _primary_wait_or_raise(self, reset_at: float, what: str) -> None:
        wait = max(0.0, reset_at - self._clock()) + 1.0
        if wait > self.settings.rate_limit_wait:
            raise RateLimitError(
                f"GitHub rate limit exhausted until {_http_date(reset_at)} (in {wait:.0f} s) while fetching {what}"
                f"{self._rate_limit_hint()}; what was stored is kept"
            )
        if wait >= _ANNOUNCE_WAIT_S:
            _log.warning("waiting for GitHub's rate limit to reset at %s (%.0f s) before fetching %s",
                         _http_date(reset_at), wait, what)
        self._wait(wait)

    def _send(
        self, url: str, headers: dict[str, str], what: str, *, allow_redirects: bool = True, stream: bool = False,
        expect_json: bool = False, method: str = "GET", payload: Any = None, idempotent: bool = True,
        answer_4xx: bool = False,
    ) -> requests.Response:
        """GET (or `method` with a JSON `payload`) with retries.

        Connection failures, timeouts, 5xx and (with `expect_json`) a 2xx body that is not JSON (a truncated
        page) are retried with backoff. Connection failures are retried only within `settings.net_wait`
        seconds of waiting in all, connection attempts that timed out included: the network is down, say so
        soon. Each wait of a second or more is announced on the `sftl` logger. A request that is not
        `idempotent` (creating a comment) is retried only where it cannot have reached GitHub (no connection)
        or GitHub refused it unread (rate limits): a retry after a 5xx could write twice. `answer_4xx`: other
        4xx answers come back to the caller, who words them (a write's refusals)."""
        import requests

        attempt = 0
        limited = 0
        down_waited = 0.0  # seconds waited on connection failures for this request
        connect_timeout = min(self.settings.http_timeout, _CONNECT_TIMEOUT_S)
        host = urlsplit(url).netloc
        gave_up = _UNREACHABLE.get(host)
        if gave_up is not None and time.monotonic() - gave_up < _UNREACHABLE_FOR_S:
            # this process found the network down a moment ago: one command waits once, not per request
            raise GitHubError(f"cannot fetch {what} from {host}: unreachable {time.monotonic() - gave_up:.0f} s ago "
                              "(network down? use --offline to work from the store)")
        while True:
            # known exhaustion from the previous answer: wait before spending a request
            if self._remaining == 0 and self._reset_at and self._reset_at > self._clock():
                self._primary_wait_or_raise(self._reset_at, what)
                self._remaining = None
            problem: str
            down = False
            try:
                self.stats.requests += 1
                resp = self.session.request(
                    method, url, headers=headers, timeout=(connect_timeout, self.settings.http_timeout),
                    allow_redirects=allow_redirects, stream=stream, json=payload,
                )
                if not stream:
                    _ = resp.content  # read the body inside the timeout/retry net
            except requests.ConnectTimeout:  # no answer to the connection itself: the network is down
                problem = f"no connection within {connect_timeout:g} s"
                down = True
                down_waited += connect_timeout
            except requests.Timeout:
                problem = f"timed out after {self.settings.http_timeout:g} s"
            except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
                problem = f"connection failed ({type(exc).__name__})"
                down = isinstance(exc, requests.ConnectionError)  # a body cut mid-way is no network down
            except requests.RequestException as exc:
                raise GitHubError(f"cannot fetch {what}: {exc}") from exc
            else:
                down = False
                self._note_limits(resp)
                status = resp.status_code
                _UNREACHABLE.pop(host, None)
                if status < 300 and status != 204 and expect_json and not stream and not _is_json(resp.content):
                    problem = f"a malformed JSON answer ({len(resp.content)} bytes, truncated?)"
                    status = 0  # retried like a 5xx below
                elif status < 300 or status == 304 or (not allow_redirects and status in _REDIRECTS):
                    return resp
                message = _message(resp) if status else ""
                if status in (403, 429) and (
                    resp.headers.get("Retry-After") or "secondary rate limit" in message.lower()
                ):
                    limited += 1
                    retry_after = _retry_after(resp.headers.get("Retry-After"), self._clock())
                    wait = retry_after if retry_after is not None else _SECONDARY_DEFAULT_WAIT
                    if wait > self.settings.rate_limit_wait or limited > max(1, self.settings.max_retries):
                        raise RateLimitError(
                            f"GitHub secondary rate limit while fetching {what}: retry after {wait:.0f} s"
                            f"{self._rate_limit_hint()}; what was stored is kept"
                        )
                    if wait >= _ANNOUNCE_WAIT_S:
                        _log.warning("waiting for %s: rate limited (%d) while fetching %s; retrying in %.0f s",
                                     host, status, what, wait)
                    self._wait(wait)
                    continue
                if status in (403, 429) and resp.headers.get("X-RateLimit-Remaining") == "0":
                    limited += 1
                    reset = _float_or_none(resp.headers.get("X-RateLimit-Reset")) or (self._clock() + 3600)
                    if limited > max(1, self.settings.max_retries):
                        raise RateLimitError(f"GitHub rate limit still exhausted while fetching {what}{self._rate_limit_hint()}")
                    self._primary_wait_or_raise(reset, what)
                    self._remaining = None
                    continue
                if answer_4xx and 400 <= status < 500:
                    return resp
                if status == 401:
                    raise AuthError(
                        f"GitHub rejected the credentials (401 {message or 'Bad credentials'}); "
                        + ("check GITHUB_TOKEN" if self.settings.token else "this API needs a token: set GITHUB_TOKEN")
                    )
                if status == 403:
                    raise AuthError(
                        f"GitHub refused access to {what} (403 {message or 'Forbidden'}); "
                        + ("the token in GITHUB_TOKEN lacks access" if self.settings.token else "set GITHUB_TOKEN")
                    )
                if status in (404, 410):
                    hint = "" if self.settings.token else " (a private repository also answers 404 without GITHUB_TOKEN)"
                    raise NotFoundError(f"{what} not found ({status}){hint}")
                if status >= 500:
                    problem = f"server error {status}"
                elif status == 0:
                    pass  # the malformed body above
                else:
                    raise GitHubError(f"GitHub answered {status} for {what}: {message or resp.reason}")
            if not idempotent and not problem.startswith("no connection"):
                raise GitHubError(
                    f"GitHub could not take {what}: {problem}; not retried (a retry could write it twice) - run "
                    "again: sftl finds its comment if this one landed"
                )
            pause = self._backoff(attempt)
            out_of_time = down and down_waited + pause > self.settings.net_wait
            if attempt >= self.settings.max_retries or out_of_time:
                if down:
                    _UNREACHABLE[host] = time.monotonic()
                hint = (
                    "network down? use --offline to work from the store" if down or problem.startswith(("timed out", "no conn"))
                    else "GitHub is failing; try again later"
                )
                raise GitHubError(
                    f"cannot fetch {what} from {host}: {problem} after {attempt + 1} attempts ({hint})"
                )
            self.stats.retries += 1
            if pause >= _ANNOUNCE_WAIT_S:
                _log.warning(
                    "waiting for %s: %s while fetching %s; retry %d of %d in %.0f s",
                    host, problem, what, attempt + 1, self.settings.max_retries, pause,
                )
            if down:
                down_waited += pause
            self._wait(pause)
            attempt += 1

    def _note_limits(self, resp: requests.Response) -> None:
        date = resp.headers.get("Date")
        if date:
            try:
                self.server_time = parsedate_to_datetime(date).timestamp()
            except (TypeError, ValueError):
                pass
        remaining = resp.headers.get("X-RateLimit-Remaining")
        reset = resp.headers.get("X-RateLimit-Reset")
        if remaining is not None and remaining.isdigit():
            self._remaining = int(remaining)
        if reset is not None:
            self._reset_at = _float_or_none(reset)


def _read_json_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_json_file(path: Path, obj: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(obj), encoding="utf-8")
    os.replace(tmp, path)


def _content_length(resp: requests.Response) -> int | None:
    """The body's length when the server says it (and sends it uncompressed by the transport)."""
    if resp.headers.get("Content-Encoding") not in (None, "", "identity"):
        return None
    value = resp.headers.get("Content-Length")
    return int(value) if value is not None and value.isdigit() else None


def _range_starts_at(content_range: str | None, offset: int) -> bool:
    m = re.match(r"bytes\s+(\d+)-", content_range or "")
    return m is not None and int(m.group(1)) == offset


def _is_json(body: bytes) -> bool:
    """Whether a 2xx body parses as JSON (a page cut short by a dropped connection or a proxy does not)."""
    try:
        json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return False
    except RecursionError:
        return True  # well-formed but absurdly nested: refused by `_json` with its own message, not retried
    return True


def _float_or_none(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _retry_after(value: str | None, now: float) -> float | None:
    """Retry-After as seconds: a number, or an HTTP date (RFC 9110 allows both)."""
    seconds = _float_or_none(value)
    if seconds is not None or not value:
        return seconds
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - now)
    except (TypeError, ValueError):
        return None


def _message(resp: requests.Response) -> str:
    """GitHub's error `message`, one line, or ''."""
    try:
        data = resp.json()
    except (ValueError, RecursionError):
        return ""
    msg = data.get("message") if isinstance(data, dict) else None
    return " ".join(str(msg).split())[:200] if msg else ""


def _errors_of(resp: requests.Response) -> str:
    """GitHub's 422 `errors` list, as '; field: message' parts ('' when none)."""
    try:
        data = resp.json()
    except (ValueError, RecursionError):
        return ""
    errors = data.get("errors") if isinstance(data, dict) else None
    parts = []
    for e in errors if isinstance(errors, list) else ():
        if isinstance(e, dict):
            parts.append(" ".join(str(e.get(k)) for k in ("field", "code", "message") if e.get(k)))
        elif isinstance(e, str):
            parts.append(e)
    return ("; " + ", ".join(" ".join(p.split())[:100] for p in parts[:3])) if parts else ""
