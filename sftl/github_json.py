"""GitHub's issues without the network: targets (issue URL, OWNER/REPO#N, a JSON file) parsed, REST JSON to and from the model."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sftl.errors import InputError
from sftl.model import Comment, Issue

_REPO_RE = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}"
_REF_RE = re.compile(rf"^({_REPO_RE})#(\d+)$")
_URL_RE = re.compile(rf"^https?://(?:www\.)?github\.com/({_REPO_RE})/(issues|pull|pulls)/(\d+)/?(?:[#?].*)?$")
_REPO_URL_RE = re.compile(rf"/repos/({_REPO_RE})(?:/|$)")
_HTML_URL_RE = re.compile(rf"^https?://[^/]+/({_REPO_RE})/(?:issues|pull)/(\d+)")
_PULL_URL_RE = re.compile(rf"^https?://[^/]+/{_REPO_RE}/pulls?/\d+")  # an html_url of a pull request
_ISSUE_URL_NUMBER_RE = re.compile(r"/issues/(\d+)/?$")


# -- targets --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """What the user pointed at: kind is "url" | "ref" | "file"."""

    kind: str
    repo: str | None = None
    number: int | None = None
    path: Path | None = None

    @property
    def key(self) -> str:
        return f"{self.repo}#{self.number}" if self.repo else str(self.path)


def parse_target(text: str) -> Target:
    """`https://github.com/OWNER/REPO/issues/N`, `OWNER/REPO#N`, or a path to a JSON file."""
    raw = text.strip()
    if not raw:
        raise InputError("empty target; expected https://github.com/OWNER/REPO/issues/N, OWNER/REPO#N or FILE.json")
    if "://" in raw or raw.lower().startswith(("github.com/", "www.github.com/")):
        url = raw if "://" in raw else "https://" + raw
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        if host not in ("github.com", "www.github.com"):
            raise InputError(f"not a GitHub issue URL: {raw!r} (host {host or '?'}; expected https://github.com/OWNER/REPO/issues/N)")
        m = _URL_RE.match(url)
        if not m:
            raise InputError(f"malformed GitHub issue URL: {raw!r} (expected https://github.com/OWNER/REPO/issues/N)")
        if m.group(2) != "issues":
            raise InputError(f"{raw} is a pull request, not an issue; sftl triages issues only")
        return Target("url", repo=m.group(1), number=_parse_number(m.group(3), raw))
    m = _REF_RE.match(raw)
    if m:
        return Target("ref", repo=m.group(1), number=_parse_number(m.group(2), raw))
    path = Path(raw).expanduser()
    if path.suffix.lower() == ".json" or path.exists():
        if not path.is_file():
            raise InputError(f"{raw} is {_not_a_file(path)}; expected a JSON file holding one GitHub issue")
        return Target("file", path=path)
    if "#" in raw or "/" in raw and not raw.endswith(".json"):
        raise InputError(f"malformed target {raw!r}: expected OWNER/REPO#N, an issue URL, or an existing JSON file")
    raise InputError(f"unrecognised target {raw!r}: expected https://github.com/OWNER/REPO/issues/N, OWNER/REPO#N or FILE.json")


def _not_a_file(path: Path) -> str:
    """What a path that is not a regular file is, in words (never opened: a FIFO would block)."""
    import stat

    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "not there (no such file)"
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def parse_repo(text: str) -> str:
    """Validate `OWNER/REPO`."""
    raw = text.strip().strip("/")
    if raw.startswith(("http://", "https://")):
        m = re.match(rf"^https?://(?:www\.)?github\.com/({_REPO_RE})/?$", raw)
        if m:
            return m.group(1)
    if re.fullmatch(_REPO_RE, raw):
        return raw
    raise InputError(f"malformed repository {text!r}: expected OWNER/REPO")


# -- REST JSON <-> model ----------------------------------------------------------------------------


MAX_ISSUE_NUMBER = 2**63 - 1  # SQLite's largest integer: a larger number cannot be an issue of any tracker


def json_type(value: Any) -> str:
    """The JSON type of a decoded value, in words ("an array", "null"), for messages about bad input."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{'true' if value else 'false'} (a boolean)"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def check_issue_number(number: int, where: str = "") -> int:
    """`number` when it can be an issue number (1 .. 2**63-1), else InputError, before any request or store write."""
    if number < 1:
        raise InputError(f"{where}issue number {number} is not valid: issue numbers start at 1")
    if number > MAX_ISSUE_NUMBER:
        shown = str(number) if number < 10**30 else f"{str(number)[:12]}... ({len(str(number))} digits)"
        raise InputError(f"{where}issue number {shown} is out of range (at most {MAX_ISSUE_NUMBER})")
    return number


def _parse_number(digits: str, target: str) -> int:
    """The issue number of a target's digits, refused (InputError) when no issue can have it."""
    where = f"{target[:60]}{'...' if len(target) > 60 else ''}: "
    if len(digits.lstrip("0")) > 19:  # past 2**63 (and past int()'s digit limit long before a request)
        raise InputError(f"{where}issue number of {len(digits)} digits is out of range (at most {MAX_ISSUE_NUMBER})")
    return check_issue_number(int(digits), where)


def _str(obj: dict[str, Any], key: str, default: str = "") -> str:
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise InputError(f"field {key!r} should be a string, not {json_type(value)}")
    return value


def _timestamp(obj: dict[str, Any], key: str, number: int) -> str:
    """An ISO 8601 time field ('2024-01-31T10:00:00Z'), or '' when absent; anything else is refused."""
    value = _str(obj, key)
    if value:
        from datetime import datetime

        try:
            datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith("Z") else value)
        except ValueError:
            raise InputError(f"issue {number}: {key} {value[:40]!r} is not an ISO 8601 time (like 2024-01-31T10:00:00Z)") from None
    return value


def _login(obj: Any) -> str:
    return obj.get("login", "") if isinstance(obj, dict) and isinstance(obj.get("login"), str) else ""


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _valid_unicode(obj: Any) -> Any:
    """`obj` with lone UTF-16 surrogates (legal JSON escapes such as \\ud800, not encodable as UTF-8,
    so SQLite refuses them) replaced by U+FFFD; the decoder has already joined every valid pair."""
    if isinstance(obj, str):
        return _LONE_SURROGATE.sub("\ufffd", obj) if _LONE_SURROGATE.search(obj) else obj
    if isinstance(obj, dict):
        return {k: _valid_unicode(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_valid_unicode(v) for v in obj]
    return obj


def comment_from_json(obj: Any) -> Comment:
    """A REST issue-comment object -> Comment."""
    if not isinstance(obj, dict):
        raise InputError(f"a comment must be a JSON object, not {json_type(obj)}")
    cid = obj.get("id")
    if not isinstance(cid, int) or isinstance(cid, bool):
        raise InputError("a comment has no integer 'id'")
    return Comment(
        id=cid,
        author=_login(obj.get("user")),
        body=_str(obj, "body"),
        created_at=_str(obj, "created_at"),
        updated_at=_str(obj, "updated_at") or _str(obj, "created_at"),
    )


def comment_issue_number(obj: Any) -> int | None:
    """The issue (or pull request) number a REST comment belongs to, from its `issue_url`."""
    url = obj.get("issue_url") if isinstance(obj, dict) else None
    m = _ISSUE_URL_NUMBER_RE.search(url) if isinstance(url, str) else None
    number = int(m.group(1)) if m and len(m.group(1)) <= 19 else None
    return number if number is not None and 0 < number <= MAX_ISSUE_NUMBER else None


def repo_of(obj: dict[str, Any]) -> str | None:
    """OWNER/REPO of a REST issue object, from repository_url, else html_url, else url."""
    for key in ("repository_url", "url"):
        value = obj.get(key)
        if isinstance(value, str):
            m = _REPO_URL_RE.search(value)
            if m:
                return m.group(1)
    html = obj.get("html_url")
    if isinstance(html, str):
        m = _HTML_URL_RE.match(html)
        if m:
            return m.group(1)
    repo = obj.get("repository")
    if isinstance(repo, dict) and isinstance(repo.get("full_name"), str):
        return repo["full_name"]
    return None


def issue_from_json(obj: Any, comments: list[dict[str, Any]] | None = None) -> Issue:
    """A GitHub REST issue object (optionally with an inline `"comments": [...]` array) -> Issue.

    The repository comes from `repository_url` (or `html_url`); pull requests (objects with a
    `pull_request` key) are flagged with `is_pull_request`. Raises InputError on malformed objects.
    """
    if not isinstance(obj, dict):
        raise InputError(f"an issue must be a JSON object, not {json_type(obj)}")
    obj = _valid_unicode(obj)
    if comments is not None:
        comments = _valid_unicode(comments)
    number = obj.get("number")
    if not isinstance(number, int) or isinstance(number, bool) or number <= 0:
        shown = "" if "number" not in obj else f" ('number' is {number!r})" if isinstance(number, int | float) else f" ('number' is {json_type(number)})"
        raise InputError(f"not a GitHub issue object: no positive integer 'number'{shown[:80]}")
    check_issue_number(number)
    if "title" not in obj:
        raise InputError(f"not a GitHub issue object: issue {number} has no 'title'")
    repo = repo_of(obj)
    if repo is None:
        raise InputError(f"issue {number}: cannot tell its repository (no repository_url or html_url)")
    inline = obj.get("comments")
    if comments is None and isinstance(inline, list):
        comments = inline
    parsed = tuple(comment_from_json(c) for c in comments) if comments else ()
    if isinstance(inline, int) and not isinstance(inline, bool):
        count = inline
    else:
        count = len(parsed)
    count = max(count, len(parsed))
    raw_labels = obj.get("labels")
    if raw_labels is not None and not isinstance(raw_labels, list):
        raise InputError(f"issue {number}: 'labels' should be an array, not {json_type(raw_labels)}")
    labels: list[str] = []
    for label in raw_labels or []:
        if isinstance(label, dict) and isinstance(label.get("name"), str):
            labels.append(label["name"])
        elif isinstance(label, str):
            labels.append(label)
        else:
            raise InputError(f"issue {number}: malformed label {label!r}")
    state = _str(obj, "state", "open").lower()
    if state not in ("open", "closed"):
        raise InputError(f"issue {number}: unknown state {state!r}")
    return Issue(
        repo=repo,
        number=number,
        title=_str(obj, "title"),
        body=_str(obj, "body"),
        state=state,
        labels=tuple(labels),
        author=_login(obj.get("user")),
        created_at=_timestamp(obj, "created_at", number),
        updated_at=_timestamp(obj, "updated_at", number) or _str(obj, "created_at"),
        comments_count=count,
        comments=parsed,
        is_pull_request=obj.get("pull_request") is not None or bool(_PULL_URL_RE.match(_str(obj, "html_url"))),
        html_url=_str(obj, "html_url") or f"https://github.com/{repo}/issues/{number}",
    )


def comment_to_json(comment: Comment) -> dict[str, Any]:
    return {
        "id": comment.id,
        "user": {"login": comment.author},
        "body": comment.body,
        "created_at": comment.created_at,
        "updated_at": comment.updated_at,
    }


def issue_to_json(issue: Issue, raw: dict[str, Any] | None = None) -> dict[str, Any]:
    """Issue -> a GitHub REST issue object (overlaid on `raw` when kept); comments inline when known."""
    obj: dict[str, Any] = dict(raw or {})
    obj.update(
        {
            "repository_url": obj.get("repository_url") or f"https://api.github.com/repos/{issue.repo}",
            "html_url": issue.url,
            "number": issue.number,
            "title": issue.title,
            "body": issue.body,
            "state": issue.state,
            "labels": [
                next((lab for lab in (raw or {}).get("labels") or [] if isinstance(lab, dict) and lab.get("name") == name), {"name": name})
                for name in issue.labels
            ],
            "user": (raw or {}).get("user") or {"login": issue.author},
            "created_at": issue.created_at,
            "updated_at": issue.updated_at,
            "comments": [comment_to_json(c) for c in issue.comments] if issue.comments else issue.comments_count,
        }
    )
    if issue.is_pull_request and not obj.get("pull_request"):
        obj["pull_request"] = {"html_url": f"https://github.com/{issue.repo}/pull/{issue.number}"}
    return obj
