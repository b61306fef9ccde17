"""A real loopback GitHub REST (and issue-page HTML) server for tests and benchmarks.

Serves data you give it, the way api.github.com does: issue listings with `per_page`/`page`,
`state`, `since`, `labels`, `sort`/`direction` and `Link` headers; single issues; comments, per
issue and repository-wide (`/repos/o/r/issues/comments` with `since`, `sort`, `direction`);
git trees; raw file contents; issue timelines, pull requests (listing, one, its files paginated) and
single commits with their files (for the history crawl); commits with `until=`/`sha=`; source archives (`/repos/o/r/tarball/{ref}`
redirecting to `/_codeload/...`, which honours Range unless told not to and can trickle its body);
ETags with 304s (which cost no rate limit); rate-limit headers;
and HTML pages (for the browser crawler) at `/{owner}/{repo}/issues/{n}`. Writes as `sftl comment`
makes them: POST a comment (`/issues/{n}/comments`), PATCH one (`/issues/comments/{id}`), POST labels
(`/issues/{n}/labels`); they need a token (401 without; 403 with `read_only_token`), a locked issue
refuses comments (403), a deleted one answers 410 to everything, an empty or oversized body or label 422.
Faults are injected per path pattern (and `method`): a status (502, 403 + Retry-After, 422, ...), extra
headers, a delay (a stalled response), or a connection dropped mid-body.

    with GitHubServer() as gh:
        gh.add_issues("o/r", [make_issue("o/r", n) for n in range(1, 301)])
        gh.inject(r"/repos/o/r/issues$", status=502, times=1, after=1)
        settings = load_settings({}, home=tmp, api_url=gh.url, max_retries=2, backoff_base=0.01)

Every request is recorded in `gh.requests` (method, path, query dict, headers, status).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

_EPOCH = datetime(2023, 1, 1, tzinfo=UTC)


def make_issue(
    repo: str,
    number: int,
    *,
    title: str | None = None,
    body: str | None = None,
    state: str = "open",
    labels: tuple[str, ...] = (),
    comments: int = 0,
    updated_at: str | None = None,
    created_at: str | None = None,
    author: str = "reporter",
    pull_request: bool = False,
    api_root: str = "https://api.github.com",
) -> dict[str, Any]:
    """A GitHub REST issue object with the fields GitHub really sends (trimmed of avatars etc.)."""
    # creation order follows the number, as on GitHub
    created = created_at or (_EPOCH + timedelta(minutes=number)).strftime("%Y-%m-%dT%H:%M:%SZ")
    obj: dict[str, Any] = {
        "url": f"{api_root}/repos/{repo}/issues/{number}",
        "repository_url": f"{api_root}/repos/{repo}",
        "comments_url": f"{api_root}/repos/{repo}/issues/{number}/comments",
        "html_url": f"https://github.com/{repo}/{'pull' if pull_request else 'issues'}/{number}",
        "id": 1_000_000 + number,
        "node_id": f"I_kwDO{number:08d}",
        "number": number,
        "title": title if title is not None else f"Issue {number}: something breaks",
        "user": {"login": author, "id": 42, "type": "User"},
        "labels": [{"id": 7000 + i, "name": name, "color": "d73a4a", "default": False} for i, name in enumerate(labels)],
        "state": state,
        "locked": False,
        "assignee": None,
        "assignees": [],
        "milestone": None,
        "comments": comments,
        "created_at": created,
        "updated_at": updated_at or created,
        "closed_at": None if state == "open" else (updated_at or created),
        "author_association": "NONE",
        "body": body if body is not None else f"Body of issue {number}.\n\n```python\nimport torch\nprint({number})\n```",
        "reactions": {"total_count": 0},
        "state_reason": None if state == "open" else "completed",
    }
    if pull_request:
        obj["pull_request"] = {
            "url": f"{api_root}/repos/{repo}/pulls/{number}",
            "html_url": f"https://github.com/{repo}/pull/{number}",
            "merged_at": None,
        }
    return obj


def make_comment(repo: str, number: int, cid: int, body: str | None = None, created_at: str | None = None) -> dict[str, Any]:
    created = created_at or f"2023-02-01T00:{cid % 60:02d}:00Z"
    return {
        "url": f"https://api.github.com/repos/{repo}/issues/comments/{cid}",
        "html_url": f"https://github.com/{repo}/issues/{number}#issuecomment-{cid}",
        "issue_url": f"https://api.github.com/repos/{repo}/issues/{number}",
        "id": cid,
        "user": {"login": f"commenter{cid % 7}", "id": 100 + cid % 7, "type": "User"},
        "created_at": created,
        "updated_at": created,
        "author_association": "CONTRIBUTOR",
        "body": body if body is not None else f"Comment {cid} on {number}.",
    }


def make_pull(
    repo: str,
    number: int,
    *,
    title: str | None = None,
    body: str | None = "",
    merged_at: str | None = None,
    merge_commit_sha: str | None = None,
    state: str = "closed",
    updated_at: str | None = None,
    created_at: str | None = None,
) -> dict[str, Any]:
    """A GitHub REST pull-request object (trimmed): merged when `merged_at` is given."""
    created = created_at or (_EPOCH + timedelta(minutes=number)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "url": f"https://api.github.com/repos/{repo}/pulls/{number}",
        "html_url": f"https://github.com/{repo}/pull/{number}",
        "number": number,
        "state": state,
        "title": title if title is not None else f"PR {number}",
        "body": body,
        "user": {"login": "contributor", "id": 43, "type": "User"},
        "created_at": created,
        "updated_at": updated_at or merged_at or created,
        "closed_at": merged_at if state == "closed" else None,
        "merged_at": merged_at,
        "merge_commit_sha": merge_commit_sha,
        "base": {"ref": "main", "repo": {"full_name": repo}},
    }


def make_cross_reference(repo: str, pull: dict[str, Any], created_at: str = "2023-03-01T00:00:00Z") -> dict[str, Any]:
    """A timeline `cross-referenced` event: the pull request `pull` mentioned the issue."""
    source = {
        "number": pull["number"], "title": pull["title"], "state": pull["state"], "body": pull.get("body"),
        "html_url": pull["html_url"], "repository": {"full_name": repo},
        "pull_request": {"url": pull["url"], "html_url": pull["html_url"], "merged_at": pull.get("merged_at")},
    }
    return {"event": "cross-referenced", "created_at": created_at, "actor": {"login": "contributor"},
            "source": {"type": "issue", "issue": source}}


def make_commit_event(event: str, commit_id: str | None, created_at: str = "2023-03-02T00:00:00Z") -> dict[str, Any]:
    """A timeline `closed`, `referenced` or `reopened` event (with the commit that did it, if any)."""
    return {"event": event, "id": int(hashlib.sha1(f"{event}{commit_id}{created_at}".encode()).hexdigest()[:8], 16), "created_at": created_at,
            "actor": {"login": "maintainer"}, "commit_id": commit_id,
            "commit_url": f"https://api.github.com/repos/o/r/commits/{commit_id}" if commit_id else None}


def make_changed_file(filename: str, status: str = "modified", changes: int = 4) -> dict[str, Any]:
    """One entry of /pulls/N/files or of a commit's `files`."""
    return {"sha": hashlib.sha1(filename.encode()).hexdigest(), "filename": filename, "status": status,
            "additions": changes // 2, "deletions": changes - changes // 2, "changes": changes}


@dataclass
class Fault:
    pattern: re.Pattern[str]
    status: int | None = None  # None: answer normally (after the delay)
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    delay: float = 0.0  # seconds before answering: a stalled response
    times: int = 1  # how many matching requests it hits
    after: int = 0  # let this many matching requests through first
    drop: bool = False  # send headers and half the body, then close: a truncated response
    method: str | None = None  # only requests of this method (None: any)
    seen: int = 0


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    status: int


class GitHubServer:
    """A threaded http.server on 127.0.0.1 with a free port; use as a context manager."""

    def __init__(self, *, token: str | None = None, rate_limit: int = 5000, page_delay: float = 0.0) -> None:
        self.issues: dict[str, dict[int, dict[str, Any]]] = {}
        self.comments: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self.trees: dict[tuple[str, str], list[str]] = {}
        self.files: dict[tuple[str, str, str], bytes] = {}
        self.pages: dict[str, str] = {}  # path -> HTML
        self.redirects: dict[str, str] = {}  # path -> location (302), e.g. an issue number that is a PR
        self.archives: dict[tuple[str, str], bytes] = {}  # (repo, ref) -> .tar.gz bytes
        self.archive_ranges = True  # False: the archive host ignores Range (answers 200 with the whole body)
        self.archive_chunk = 1 << 16  # bytes per write of an archive body
        self.archive_chunk_delay = 0.0  # seconds between writes: a slow download (to kill it half-way)
        self.archive_length = True  # False: no Content-Length (GitHub's archive host often streams without one)
        self.archive_host: str | None = None  # another server's URL: redirect archives there (another host)
        self.commits: dict[str, list[dict[str, Any]]] = {}  # repo -> REST commit objects, newest first
        self.timelines: dict[tuple[str, int], list[dict[str, Any]]] = {}  # (repo, issue) -> timeline events
        self.pulls: dict[str, dict[int, dict[str, Any]]] = {}  # repo -> number -> pull-request object
        self.pull_files: dict[tuple[str, int], list[dict[str, Any]]] = {}  # (repo, pr) -> changed files
        self.commit_details: dict[tuple[str, str], dict[str, Any]] = {}  # (repo, sha) -> commit with `files`
        self.token = token
        self.read_only_token: str | None = None  # accepted for reads; writes with it answer 403
        self.gone: set[tuple[str, int]] = set()  # deleted issues: 410 to every request about them
        self._next_comment_id = 900_000
        self.rate_limit = rate_limit
        self.remaining = rate_limit
        self.reset_at = int(time.time()) + 3600
        self.page_delay = page_delay  # seconds added to every page of the issue and comment listings
        self.link_last = True  # False: Link headers without rel="last" (the size of a listing unknown)
        self.requests: list[Recorded] = []
        self.faults: list[Fault] = []
        self._version = 0  # bumped by every data change: listings sorted once per version, not per page
        self._sorted: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- data

    def add_issues(self, repo: str, issues: list[dict[str, Any]]) -> None:
        bucket = self.issues.setdefault(repo, {})
        for obj in issues:
            bucket[int(obj["number"])] = obj
        self._version += 1

    def add_comments(self, repo: str, number: int, comments: list[dict[str, Any]]) -> None:
        self.comments[(repo, number)] = comments
        self._version += 1

    def lock_issue(self, repo: str, number: int) -> None:
        """GitHub's 'lock conversation': the issue says `locked`, and a comment on it answers 403."""
        self.issues[repo][number] = {**self.issues[repo][number], "locked": True, "active_lock_reason": "resolved"}
        self._version += 1

    def delete_issue(self, repo: str, number: int) -> None:
        """A deleted issue: GitHub answers 410 Gone for it and for its comments."""
        self.gone.add((repo, number))

    def comments_of(self, repo: str, number: int) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(c) for c in self.comments.get((repo, number), [])]

    def edit_comment(self, repo: str, cid: int, body: str) -> None:
        """A maintainer's edit of a comment, as the web UI makes it."""
        with self._lock:
            for (r, _), thread in self.comments.items():
                for c in thread:
                    if r == repo and c["id"] == cid:
                        c["body"] = body
                        c["updated_at"] = _now()
            self._version += 1

    def add_tree(self, repo: str, ref: str, paths: list[str]) -> None:
        self.trees[(repo, ref)] = paths

    def add_file(self, repo: str, ref: str, path: str, content: str | bytes) -> None:
        self.files[(repo, ref, path)] = content.encode() if isinstance(content, str) else content

    def add_archive(self, repo: str, ref: str, data: bytes) -> None:
        """Serve `data` (a .tar.gz) for `/repos/{repo}/tarball/{ref}`, through a redirect as GitHub does."""
        self.archives[(repo, ref)] = data

    def add_commit(self, repo: str, sha: str, date: str, branch: str | None = None) -> None:
        """A commit on `branch` (None: the default branch) committed at `date` (ISO, Z)."""
        obj = {"sha": sha, "commit": {"committer": {"date": date}, "message": f"commit {sha[:7]}"}, "branch": branch}
        self.commits.setdefault(repo, []).append(obj)
        self.commits[repo].sort(key=lambda c: c["commit"]["committer"]["date"], reverse=True)

    def add_timeline(self, repo: str, number: int, events: list[dict[str, Any]]) -> None:
        """Serve `events` at /repos/{repo}/issues/{number}/timeline (paginated)."""
        self.timelines[(repo, number)] = events

    def add_pull(self, repo: str, pull: dict[str, Any], files: list[str | dict[str, Any]] | None = None) -> None:
        """A pull request at /repos/{repo}/pulls/{n} (and in the listing), its files at /pulls/{n}/files."""
        self.pulls.setdefault(repo, {})[int(pull["number"])] = pull
        if files is not None:
            self.pull_files[(repo, int(pull["number"]))] = [make_changed_file(f) if isinstance(f, str) else f for f in files]
        self._version += 1

    def add_commit_detail(self, repo: str, sha: str, date: str, files: list[str], message: str = "") -> None:
        """A commit at /repos/{repo}/commits/{sha}, with the files it changed."""
        self.commit_details[(repo, sha)] = {
            "sha": sha, "html_url": f"https://github.com/{repo}/commit/{sha}",
            "commit": {"message": message or f"commit {sha[:7]}", "author": {"date": date}, "committer": {"date": date}},
            "files": [make_changed_file(f) for f in files],
        }

    def add_page(self, path: str, html: str) -> None:
        self.pages[path] = html

    def add_redirect(self, path: str, location: str) -> None:
        """github.com answers /o/r/issues/N with a redirect to /o/r/pull/N when N is a PR."""
        self.redirects[path] = location

    def inject(self, pattern: str, **kw: Any) -> Fault:
        """Add a fault for requests whose path (without query) matches `pattern` (re.search)."""
        fault = Fault(pattern=re.compile(pattern), **kw)
        with self._lock:
            self.faults.append(fault)
        return fault

    def set_rate_limit(self, remaining: int, reset_in: float = 3600) -> None:
        with self._lock:
            self.remaining = remaining
            self.reset_at = int(time.time() + reset_in)

    def count(self, pattern: str = "", status: int | None = None) -> int:
        rx = re.compile(pattern)
        with self._lock:
            return sum(1 for r in self.requests if rx.search(r.path) and (status is None or r.status == status))

    # -- lifecycle

    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> GitHubServer:
        server = self

        class Handler(_Handler):
            gh = server

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False  # a stalled handler must not hold up stop()
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> GitHubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- routing (called from handler threads)

    def _take_fault(self, path: str, method: str = "GET") -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.pattern.search(path) and fault.method in (None, method):
                    fault.seen += 1
                    if fault.seen > fault.after and fault.times > 0:
                        fault.times -= 1
                        return fault
        return None

    def route(self, path: str, query: dict[str, str], accept: str) -> tuple[int, dict[str, str], bytes, bool]:
        """-> (status, headers, body, is_api). Pure data; rate limits/ETags are applied by the handler."""
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues", path)
        if m:
            return self._listing(m.group(1), path, query)
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/comments", path)
        if m:
            return self._comment_listing(m.group(1), path, query)
        m = re.match(r"/repos/([^/]+/[^/]+)/issues/(\d+)(?:/|$)", path)
        if m and (m.group(1), int(m.group(2))) in self.gone:
            return _gone()
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/(\d+)", path)
        if m:
            obj = self.issues.get(m.group(1), {}).get(int(m.group(2)))
            return (200, {}, _json(obj), True) if obj else _not_found()
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/(\d+)/comments", path)
        if m:
            repo, number = m.group(1), int(m.group(2))
            if number not in self.issues.get(repo, {}):
                return _not_found()
            return self._paginate(path, query, self.comments.get((repo, number), []))
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/git/trees/(.+)", path)
        if m:
            paths = self.trees.get((m.group(1), unquote(m.group(2))))
            if paths is None:
                return _not_found()
            tree = [{"path": p, "mode": "100644", "type": "blob", "sha": hashlib.sha1(p.encode()).hexdigest()} for p in paths]
            dirs = sorted({p.rsplit("/", 1)[0] for p in paths if "/" in p})
            tree += [{"path": d, "mode": "040000", "type": "tree", "sha": "0" * 40} for d in dirs]
            return 200, {}, _json({"sha": "f" * 40, "tree": tree, "truncated": False}), True
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/contents/(.+)", path)
        if m:
            content = self.files.get((m.group(1), query.get("ref", "main"), unquote(m.group(2))))
            if content is None:
                return _not_found()
            if "raw" in accept:
                return 200, {"Content-Type": "application/vnd.github.raw; charset=utf-8"}, content, True
            import base64

            return 200, {}, _json({"type": "file", "encoding": "base64", "content": base64.b64encode(content).decode()}), True
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/tarball/(.+)", path)
        if m:
            repo, ref = m.group(1), unquote(m.group(2))
            if (repo, ref) not in self.archives:
                return _not_found()
            return 302, {"Location": f"{self.archive_host or self.url}/_codeload/{repo}/legacy.tar.gz/{ref}"}, b"", True
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/commits", path)
        if m:
            until, branch = query.get("until"), query.get("sha")
            found = [c for c in self.commits.get(m.group(1), []) if (until is None or c["commit"]["committer"]["date"] <= until)
                     and (branch is None or c.get("branch") in (None, branch))]
            per_page = max(1, min(100, int(query.get("per_page", 30))))
            return 200, {}, _json([{k: v for k, v in c.items() if k != "branch"} for c in found[:per_page]]), True
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/(\d+)/timeline", path)
        if m:
            repo, number = m.group(1), int(m.group(2))
            if number not in self.issues.get(repo, {}):
                return _not_found()
            return self._paginate(path, query, self.timelines.get((repo, number), []))
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/pulls", path)
        if m:
            pulls = list(self.pulls.get(m.group(1), {}).values())
            state = query.get("state", "open")
            if state != "all":
                pulls = [p for p in pulls if p["state"] == state]
            key = "updated_at" if query.get("sort") == "updated" else "created_at"
            pulls.sort(key=lambda p: (p[key], p["number"]), reverse=query.get("direction", "desc") == "desc")
            return self._paginate(path, query, pulls)
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/pulls/(\d+)", path)
        if m:
            pull = self.pulls.get(m.group(1), {}).get(int(m.group(2)))
            return (200, {}, _json(pull), True) if pull else _not_found()
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/pulls/(\d+)/files", path)
        if m:
            if int(m.group(2)) not in self.pulls.get(m.group(1), {}):
                return _not_found()
            return self._paginate(path, query, self.pull_files.get((m.group(1), int(m.group(2))), []))
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/commits/([0-9a-fA-F]+)", path)
        if m:
            found = self.commit_details.get((m.group(1), m.group(2)))
            return (200, {}, _json(found), True) if found else _not_found()
        if path.startswith("/repos/"):
            return _not_found()
        if path in self.redirects:
            return 302, {"Location": self.redirects[path], "Content-Type": "text/html"}, b"", False
        html = self.pages.get(path)
        if html is None:
            return 404, {"Content-Type": "text/html; charset=utf-8"}, _NOT_FOUND_HTML.encode(), False
        return 200, {"Content-Type": "text/html; charset=utf-8"}, html.encode("utf-8"), False

    def write(self, method: str, path: str, payload: Any, auth: str) -> tuple[int, bytes]:
        """A POST or PATCH: (status, JSON body). Changes the data under the lock, as GitHub would."""
        if not auth:
            return 401, _json({"message": "Requires authentication"})
        if self.read_only_token is not None and auth in (f"Bearer {self.read_only_token}", f"token {self.read_only_token}"):
            return 403, _json({"message": "Resource not accessible by personal access token"})
        if not isinstance(payload, dict):
            return 400, _json({"message": "Problems parsing JSON"})
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/(\d+)/(comments|labels)", path)
        if m and method == "POST":
            repo, number, what = m.group(1), int(m.group(2)), m.group(3)
            if (repo, number) in self.gone:
                return _gone()[0], _gone()[2]
            issue = self.issues.get(repo, {}).get(number)
            if issue is None:
                return _not_found()[0], _not_found()[2]
            if what == "labels":
                labels = payload.get("labels")
                if not isinstance(labels, list) or not all(isinstance(x, str) and 0 < len(x) <= 50 for x in labels):
                    return 422, _validation("labels", "invalid")
                with self._lock:
                    names = list(dict.fromkeys([lab["name"] for lab in issue["labels"]] + labels))
                    issue["labels"] = [{"id": 7000 + i, "name": n, "color": "ededed", "default": False} for i, n in enumerate(names)]
                    self._version += 1
                return 200, _json(issue["labels"])
            if issue.get("locked"):
                return 403, _json({"message": "Unable to create comment because issue is locked."})
            body = payload.get("body")
            if not isinstance(body, str) or not body.strip() or len(body) > 65536:
                return 422, _validation("body", "invalid" if body else "missing_field")
            with self._lock:
                self._next_comment_id += 1
                comment = make_comment(repo, number, self._next_comment_id, body, created_at=_now())
                comment["user"] = {"login": "github-actions[bot]", "id": 41898282, "type": "Bot"}
                self.comments.setdefault((repo, number), []).append(comment)
                issue["comments"] = len(self.comments[(repo, number)])
                self._version += 1
            return 201, _json(comment)
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/comments/(\d+)", path)
        if m and method == "PATCH":
            repo, cid = m.group(1), int(m.group(2))
            body = payload.get("body")
            if not isinstance(body, str) or not body.strip() or len(body) > 65536:
                return 422, _validation("body", "invalid")
            with self._lock:
                for (r, number), thread in self.comments.items():
                    for c in thread:
                        if r == repo and c["id"] == cid:
                            if (repo, number) in self.gone:
                                return _gone()[0], _gone()[2]
                            c["body"], c["updated_at"] = body, _now()
                            self._version += 1
                            return 200, _json(c)
            return _not_found()[0], _not_found()[2]
        return _not_found()[0], _not_found()[2]

    def _listing(self, repo: str, path: str, query: dict[str, str]) -> tuple[int, dict[str, str], bytes, bool]:
        if repo not in self.issues:
            return _not_found()
        params = tuple(query.get(k) for k in ("state", "since", "labels", "sort", "direction"))
        items = self._sorted.get(("issues", repo, self._version, params))
        if items is None:
            items = list(self.issues[repo].values())
            state = query.get("state", "open")
            if state != "all":
                items = [i for i in items if i["state"] == state]
            if query.get("since"):
                items = [i for i in items if i["updated_at"] >= query["since"]]
            if query.get("labels"):
                want = set(query["labels"].split(","))
                items = [i for i in items if want <= {lab["name"] for lab in i["labels"]}]
            key = "updated_at" if query.get("sort") == "updated" else "created_at"
            items.sort(key=lambda i: (i[key], i["number"]), reverse=query.get("direction", "desc") == "desc")
            self._sorted[("issues", repo, self._version, params)] = items
        if self.page_delay:
            time.sleep(self.page_delay)
        return self._paginate(path, query, items)

    def _comment_listing(self, repo: str, path: str, query: dict[str, str]) -> tuple[int, dict[str, str], bytes, bool]:
        """Every comment of the repository's issues and pull requests, as GitHub lists them:
        `since` keeps comments updated at or after it; `sort` created (default) or updated;
        `direction` asc (default) or desc."""
        if repo not in self.issues:
            return _not_found()
        params = tuple(query.get(k) for k in ("since", "sort", "direction"))
        items = self._sorted.get(("comments", repo, self._version, params))
        if items is None:
            items = [c for (r, _), thread in list(self.comments.items()) if r == repo for c in thread]
            if query.get("since"):
                items = [c for c in items if c["updated_at"] >= query["since"]]
            key = "updated_at" if query.get("sort") == "updated" else "created_at"
            items.sort(key=lambda c: (c[key], c["id"]), reverse=query.get("direction", "asc") == "desc")
            self._sorted[("comments", repo, self._version, params)] = items
        if self.page_delay:
            time.sleep(self.page_delay)
        return self._paginate(path, query, items)

    def _paginate(self, path: str, query: dict[str, str], items: list[dict[str, Any]]) -> tuple[int, dict[str, str], bytes, bool]:
        per_page = max(1, min(100, int(query.get("per_page", 30))))
        page = max(1, int(query.get("page", 1)))
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]
        links = []
        base = self.url + path

        def link(p: int, rel: str) -> str:
            return f'<{base}?{urlencode({**query, "page": p})}>; rel="{rel}"'

        if page < last:
            links += [link(page + 1, "next")] + ([link(last, "last")] if self.link_last else [])
        if page > 1:
            links += [link(1, "first"), link(page - 1, "prev")]
        headers = {"Link": ", ".join(links)} if links else {}
        return 200, headers, _json(chunk), True


def make_tarball(repo: str, sha: str, files: dict[str, str | bytes]) -> bytes:
    """A .tar.gz laid out as GitHub's archives are: a pax global header naming the commit, then one top
    folder `owner-repo-<sha7>/` holding the tree."""
    import io
    import tarfile

    top = f"{repo.replace('/', '-')}-{sha[:7]}"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT, pax_headers={"comment": sha}) as tar:
        info = tarfile.TarInfo(top)
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
        tar.addfile(info)
        for name, content in sorted(files.items()):
            raw = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(raw)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(raw))
    return buf.getvalue()


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _gone() -> tuple[int, dict[str, str], bytes, bool]:
    return 410, {}, _json({"message": "This issue was deleted", "documentation_url": "https://docs.github.com/rest"}), True


def _validation(field: str, code: str) -> bytes:
    return _json({"message": "Validation Failed", "errors": [{"resource": "IssueComment", "field": field, "code": code}]})


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _not_found() -> tuple[int, dict[str, str], bytes, bool]:
    return 404, {}, _json({"message": "Not Found", "documentation_url": "https://docs.github.com/rest", "status": "404"}), True


_NOT_FOUND_HTML = """<!DOCTYPE html><html lang="en"><head><title>Page not found · GitHub</title></head>
<body><main><h1>404</h1><p>This is not the web page you are looking for.</p></main></body></html>"""


class _Handler(BaseHTTPRequestHandler):
    gh: GitHubServer
    protocol_version = "HTTP/1.1"  # keep-alive, as api.github.com
    # one segment per answer: headers and body written separately hit Nagle + delayed ACK (40 ms)
    disable_nagle_algorithm = True
    wbufsize = 1 << 16

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read gh.requests
        pass

    def handle(self) -> None:
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):
            pass  # a client that timed out and hung up is part of the tests, not a server error

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        gh = self.gh
        parts = urlsplit(self.path)
        path = parts.path
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        headers = {k: v for k, v in self.headers.items()}
        is_api = path.startswith("/repos/")
        fault = gh._take_fault(path)
        if path.startswith("/_codeload/"):
            return self._archive(path, query, headers, fault)
        if fault is not None and fault.delay:
            time.sleep(fault.delay)
        if fault is not None and fault.status is not None:
            body = fault.body if fault.body is not None else _json({"message": f"injected {fault.status}"})
            return self._send(path, query, headers, fault.status, {**self._limit_headers(), **fault.headers}, body)
        if is_api and gh.token is not None:
            auth = self.headers.get("Authorization", "")
            readable = [t for t in (gh.token, gh.read_only_token) if t]
            if auth not in [f"{kind} {t}" for t in readable for kind in ("Bearer", "token")]:
                return self._send(path, query, headers, 401, {}, _json({"message": "Bad credentials"}))
        if is_api:
            with gh._lock:
                exhausted = gh.remaining <= 0
            if exhausted:
                body = _json({"message": "API rate limit exceeded for 127.0.0.1."})
                return self._send(path, query, headers, 403, self._limit_headers(), body)
        status, extra, body, api = gh.route(path, query, self.headers.get("Accept", ""))
        if api and status == 200:
            etag = '"' + hashlib.sha1(body).hexdigest() + '"'
            extra = {**extra, "ETag": etag}
            if etag in (self.headers.get("If-None-Match") or ""):
                return self._send(path, query, headers, 304, {**self._limit_headers(), "ETag": etag}, b"")
        if api:
            with gh._lock:
                gh.remaining -= 1  # only answers that are not 304 cost rate limit
        if fault is not None and fault.drop:
            return self._drop(path, query, headers, status, extra, body)
        self._send(path, query, headers, status, {**(self._limit_headers() if api else {}), **extra}, body)

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self._write_request("POST")

    def do_PATCH(self) -> None:  # noqa: N802
        self._write_request("PATCH")

    def _write_request(self, method: str) -> None:
        gh = self.gh
        parts = urlsplit(self.path)
        path, query = parts.path, {k: v[-1] for k, v in parse_qs(parts.query).items()}
        headers = {k: v for k, v in self.headers.items()}
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        fault = gh._take_fault(path, method)
        if fault is not None and fault.delay:
            time.sleep(fault.delay)
        if fault is not None and fault.status is not None:
            body = fault.body if fault.body is not None else _json({"message": f"injected {fault.status}"})
            return self._send(path, query, headers, fault.status, {**self._limit_headers(), **fault.headers}, body, method)
        auth = self.headers.get("Authorization", "")
        readable = [t for t in (gh.token, gh.read_only_token) if t]
        if gh.token is not None and auth and auth not in [f"{kind} {t}" for t in readable for kind in ("Bearer", "token")]:
            return self._send(path, query, headers, 401, {}, _json({"message": "Bad credentials"}), method)
        with gh._lock:
            exhausted = gh.remaining <= 0
            gh.remaining -= 0 if exhausted else 1
        if exhausted:
            body = _json({"message": "API rate limit exceeded for 127.0.0.1."})
            return self._send(path, query, headers, 403, self._limit_headers(), body, method)
        try:
            payload = json.loads(raw.decode("utf-8")) if raw else None
        except (UnicodeDecodeError, ValueError):
            payload = None
        status, body = gh.write(method, path, payload, auth)
        self._send(path, query, headers, status, self._limit_headers(), body, method)

    def _archive(self, path: str, query: dict[str, str], headers: dict[str, str], fault: Fault | None) -> None:
        """The archive host: Range (unless switched off), a trickled body, faults (a status, a drop half-way)."""
        gh = self.gh
        m = re.fullmatch(r"/_codeload/([^/]+/[^/]+)/legacy\.tar\.gz/(.+)", path)
        data = gh.archives.get((m.group(1), unquote(m.group(2)))) if m else None
        if fault is not None and fault.delay:
            time.sleep(fault.delay)
        if fault is not None and fault.status is not None:
            return self._send(path, query, headers, fault.status, {"Content-Type": "text/plain"}, fault.body or b"")
        if data is None:
            return self._send(path, query, headers, 404, {"Content-Type": "text/plain"}, b"Not Found")
        etag = '"' + hashlib.sha1(data).hexdigest() + '"'
        start, status = 0, 200
        rng = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
        if rng and gh.archive_ranges and self.headers.get("If-Range", etag) == etag:
            start, status = int(rng.group(1)), 206
            if start >= len(data):
                return self._send(path, query, headers, 416, {"Content-Range": f"bytes */{len(data)}"}, b"")
        body = data[start:]
        self._record(path, query, headers, status)
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/x-gzip")
            self.send_header("ETag", etag)
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            if gh.archive_length or (fault is not None and fault.drop):
                self.send_header("Content-Length", str(len(body)))
            else:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            stop = len(body) // 2 if fault is not None and fault.drop else len(body)
            for at in range(0, stop, gh.archive_chunk):
                self.wfile.write(body[at: min(stop, at + gh.archive_chunk)])
                self.wfile.flush()
                if gh.archive_chunk_delay:
                    time.sleep(gh.archive_chunk_delay)
        except (BrokenPipeError, ConnectionResetError):
            pass
        if fault is not None and fault.drop:
            self.close_connection = True

    def _limit_headers(self) -> dict[str, str]:
        gh = self.gh
        with gh._lock:
            return {
                "X-RateLimit-Limit": str(gh.rate_limit),
                "X-RateLimit-Remaining": str(max(0, gh.remaining)),
                "X-RateLimit-Reset": str(gh.reset_at),
                "X-RateLimit-Used": str(gh.rate_limit - max(0, gh.remaining)),
                "X-RateLimit-Resource": "core",
            }

    def _record(self, path: str, query: dict[str, str], headers: dict[str, str], status: int, method: str = "GET") -> None:
        with self.gh._lock:
            self.gh.requests.append(Recorded(method, path, query, headers, status))

    def _send(self, path: str, query: dict[str, str], headers: dict[str, str], status: int, extra: dict[str, str], body: bytes,
              method: str = "GET") -> None:
        self._record(path, query, headers, status, method)
        try:
            self.send_response(status)
            if "Content-Type" not in extra:
                self.send_header("Content-Type", "application/json; charset=utf-8")
            for k, v in extra.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (a timeout test): nothing to answer

    def _drop(self, path: str, query: dict[str, str], headers: dict[str, str], status: int, extra: dict[str, str], body: bytes) -> None:
        self._record(path, query, headers, -1)
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True
