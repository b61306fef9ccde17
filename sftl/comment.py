"""The one comment sftl keeps under an issue: what it says (category, suspects and their functions, replay verdict, who to ask) and creating or updating it, found by a hidden marker.

`plan_comment(report, settings)` reads who to ask from the release's tree and renders; `render_comment(report,
routes, release)` is pure: everything it quotes from the report (reasons, names, the
replay's exception line) is escaped, and the replay's raw output is never shown, so a hostile snippet
cannot print into a public comment. `post_comment(client, repo, number, body, labels)` checks every
refusal it can before writing (no token, a deleted or locked issue), then updates sftl's earlier comment
(the first one holding `MARKER`, whatever a maintainer edited around it) or creates one: never a second.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sftl import __version__
from sftl.errors import (
    AuthError,
    GitHubError,
    IssueGoneError,
    LockedIssueError,
    NotFoundError,
    SftlError,
    WriteAccessError,
)
from sftl.github_json import comment_from_json
from sftl.model import Category, Comment, Outcome, Report, Suspect
from sftl.sources.owners import Route

if TYPE_CHECKING:
    from pathlib import Path

    from sftl.config import Settings
    from sftl.github import GitHubClient

MARKER = "<!-- sftl:triage-comment (sftl updates this comment in place; keep this line) -->"
_MARKER_RE = re.compile(r"<!--\s*sftl:triage-comment\b")
LOW_CONFIDENCE = "low confidence:"  # how the ranker's reason begins below its calibrated threshold
_CATEGORY = {
    Category.MME: "missing-module error",
    Category.GCRDE: "GPU/CPU result discrepancy",
    Category.OTHER: "other (neither a missing-module error nor a GPU/CPU discrepancy)",
}
_REASON_CHARS = 400  # per suspect: the comment stays a glance, the reasons are cut, never the list
_QUOTE_CHARS = 200  # an exception line from the replay


@dataclass(frozen=True)
class CommentPlan:
    """What sftl would write under an issue: the comment's markdown, the labels `--apply-labels` adds, the
    routes (who to ask) it names, and the release it was read against."""

    body: str
    labels: tuple[str, ...]
    routes: tuple[Route, ...]
    release: str


@dataclass(frozen=True)
class Posted:
    """What `post_comment` did: "created", "updated", "unchanged" or "none" (labels only), the comment's id
    and URL, the labels added."""

    action: str
    comment_id: int
    url: str
    labels_added: tuple[str, ...] = ()


def escape_markdown(text: str) -> str:
    """Report-derived prose made inert: one line, no HTML, no markdown syntax, no @mentions or #references."""
    text = " ".join(_printable(text).split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = re.sub(r"([\\`*\[\]|~])", r"\\\1", text)
    text = re.sub(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", r"\\_", text)  # an intraword _ emphasizes nothing
    # a word joiner after @ and before a number after #: no mention, no cross-reference, the reader sees the same
    return re.sub(r"#(?=\d)", "#\u2060", text.replace("@", "@\u2060"))


def code_span(text: str, limit: int = _QUOTE_CHARS) -> str:
    """`text` as one inline code span (nothing in it renders, links or mentions), cut at `limit` characters."""
    text = " ".join(_printable(text).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _printable(text: str) -> str:
    return "".join(ch if ch.isprintable() or ch in "\t\n" else " " for ch in text)


def is_low_confidence(report: Report) -> bool:
    loc = report.localization
    return loc is not None and loc.reason.startswith(LOW_CONFIDENCE)


def labels_to_apply(report: Report, routes: Sequence[Route]) -> tuple[str, ...]:
    """The labels `--apply-labels` adds: those of the suspects named, only when sftl located with confidence."""
    loc = report.localization
    if loc is None or loc.outcome != Outcome.LOCATED or is_low_confidence(report):
        return ()
    return tuple(dict.fromkeys(label for route in routes for label in route.labels))


def render_comment(report: Report, routes: Sequence[Route] = (), release: str = "", top: int = 3,
                   functions: int = 3) -> str:
    """The comment's markdown: `top` suspects with their reasons and first `functions` functions."""
    scr, loc = report.screening, report.localization
    score = scr.scores.get(scr.category.value)
    lines = [MARKER, "### sftl: a first reading of this report", ""]
    lines.append(f"- **Category:** {_CATEGORY[scr.category]}"
                 + (f" (`{scr.category.value}`, score {score:.2f})" if score is not None else ""))
    if release:
        lines.append(f"- **Read against:** {escape_markdown(release)}")
    if report.replay is not None:
        lines.append(f"- **Replay:** {_replay_line(report)}")
    lines.append("")
    suspects: tuple[Suspect, ...] = loc.suspects[:top] if loc is not None else ()
    if loc is None or loc.outcome == Outcome.SKIPPED:
        lines.append(f"**Not ranked:** {escape_markdown(loc.reason if loc else 'no localization ran')}")
    elif not suspects or loc.outcome == Outcome.ABSTAINED:
        lines.append(f"**No confident suspect.** {escape_markdown(loc.reason)}")
    else:
        if is_low_confidence(report):
            lines += [f"> **Low confidence:** sftl is not sure of these files; read them as leads, not as the answer "
                      f"({escape_markdown(loc.reason[len(LOW_CONFIDENCE):].split(';')[0].strip())}).", ""]
        lines.append("**Suspects**, likeliest first:")
        lines.append("")
        for i, s in enumerate(suspects, 1):
            lines += _suspect_lines(i, s, functions)
    if routes:
        lines += ["", "**Who to ask** (from the release's CODEOWNERS and labeler map):", ""]
        lines += [f"- {line}" for line in _route_lines(routes, [s.path for s in suspects])]
    lines += ["", f"<sub>sftl {__version__}: an automated first reading, not a verdict. Edit it freely; sftl "
                  "updates this one comment in place and never posts a second.</sub>"]
    return "\n".join(lines) + "\n"


def _suspect_lines(i: int, s: Suspect, functions: int) -> list[str]:
    side = f" [{s.side.value}]" if s.side else ""
    reason = s.reason if len(s.reason) <= _REASON_CHARS else s.reason[: _REASON_CHARS - 1] + "…"
    out = [f"{i}. {code_span(s.path, 300)}{side} (score {s.score:.2f}): {escape_markdown(reason)}"]
    for f in s.functions[:functions]:
        out.append(f"   - {code_span(f.name, 120)} (lines {f.start}–{f.end}): {escape_markdown(f.reason[:200])}")
    return out


def _replay_line(report: Report) -> str:
    """The verdict and, when a run raised, its exception line: never the snippet's printed output."""
    assert report.replay is not None
    rep = report.replay
    env = rep.environment
    where = f" in {escape_markdown(f'{env.framework} {env.version}')}" if env.framework and env.version else ""
    raised = next((r for r in rep.runs if r.exception), None)
    line = f"`{rep.verdict.value}`{where}"
    if raised is not None:
        quoted = f"{raised.exception}: {raised.message}" if raised.message else str(raised.exception)
        line += f" ({raised.device.value}): {code_span(quoted)}"
    return line


def _route_lines(routes: Sequence[Route], shown: list[str]) -> list[str]:
    """One line per owning rule and labels, naming the suspects (by number) it covers."""
    groups: dict[tuple[str, tuple[str, ...], tuple[str, ...]], list[str]] = {}
    for route in routes:
        groups.setdefault((route.pattern, route.owners, route.labels), []).append(route.path)
    out = []
    for (pattern, owners, labels), paths in groups.items():
        parts = []
        if owners:  # named, not @-mentioned: a comment on every new issue must not ping anyone
            parts.append(f"owners of {code_span(pattern, 200)}: {', '.join(code_span(o, 80) for o in owners)}")
        if labels:
            word = "label" if len(labels) == 1 else "labels"
            parts.append(f"{word}: {', '.join(code_span(label, 80) for label in labels)}")
        numbers = [str(shown.index(p) + 1) for p in paths if p in shown]
        which = (f" (suspect{'s' if len(numbers) > 1 else ''} {', '.join(numbers)})" if numbers
                 else f" ({', '.join(code_span(p, 200) for p in paths)})")
        out.append("; ".join(parts) + which)
    return out


def plan_comment(report: Report, settings: Settings, *, source_root: str | Path | None = None,
                 top: int = 3) -> CommentPlan:
    """The comment for a located report: who to ask read from the same release's tree the ranking read (its
    `CODEOWNERS` and labeler map), the release named as read; sources that cannot be had only drop who to ask."""
    from sftl.sources import sources_for_report
    from sftl.sources.owners import routes_for

    env = report.extraction.environment
    release = f"{env.framework} {env.version}" if env.framework and env.version else ""
    loc = report.localization
    suspects = loc.suspects[:top] if loc is not None else ()
    routes: tuple[Route, ...] = ()
    try:
        found = sources_for_report(report.extraction, settings, source_root=source_root, offline=settings.offline,
                                   needs_cxx=report.screening.category != Category.MME,
                                   created_at=report.issue.created_at)
    except SftlError:
        found = None  # the ranking already said why sources were missing
    if found is not None and found.provider is not None:
        provider = found.provider
        release = f"{provider.framework} {provider.version}" if provider.version else release
        if suspects:
            routes = routes_for(provider, [s.path for s in suspects])
    if env.version and release and env.version not in release:
        release += f" (the report names {env.version})"
    body = render_comment(report, routes, release, top=top)
    return CommentPlan(body, labels_to_apply(report, routes), routes, release)


def find_marked(comments: Sequence[Comment]) -> Comment | None:
    """sftl's comment in a thread: the oldest holding the marker (a maintainer may have edited the rest)."""
    return next((c for c in comments if _MARKER_RE.search(c.body)), None)


def post_comment(client: GitHubClient, repo: str, number: int, body: str | None,
                 labels: Sequence[str] = ()) -> Posted:
    """Create or update sftl's one comment on `repo#number` (none when `body` is None), then add the `labels`
    it lacks.

    Refusals before anything is written: no token (WriteAccessError), a deleted or missing issue
    (IssueGoneError), a locked one (LockedIssueError, when a comment is to be written). The comment is
    written before the labels, so a label GitHub refuses (RejectedWriteError) leaves a whole comment."""
    if not client.settings.token:
        raise WriteAccessError("writing needs a token: set GITHUB_TOKEN (a workflow: `permissions: issues: write`); "
                               "nothing was written")
    what = f"{repo}#{number}"
    try:
        raw = client.get_issue(repo, number)
        if body is not None and raw.get("locked"):
            raise LockedIssueError(f"{what} is locked: sftl posts no comment on it; nothing was written")
        comments = [comment_from_json(c) for c in client.get_comments(repo, number)] if body is not None else []
    except NotFoundError as exc:
        raise IssueGoneError(f"{exc}; nothing was written") from exc
    except AuthError as exc:
        if isinstance(exc, WriteAccessError):
            raise
        raise WriteAccessError(f"{exc}; nothing was written") from exc
    posted = Posted("none", 0, "")
    mine = find_marked(comments)
    if body is None:
        pass
    elif mine is None:
        made = client.create_comment(repo, number, body)
        posted = Posted("created", int(made.get("id") or 0), str(made.get("html_url") or ""))
    elif mine.body == body:
        posted = Posted("unchanged", mine.id, f"https://github.com/{repo}/issues/{number}#issuecomment-{mine.id}")
    else:
        made = client.update_comment(repo, mine.id, body)
        posted = Posted("updated", mine.id, str(made.get("html_url") or ""))
    have = {str(lab.get("name")) for lab in raw.get("labels") or () if isinstance(lab, dict)}
    missing = tuple(label for label in dict.fromkeys(labels) if label not in have)
    if missing:
        try:
            client.add_labels(repo, number, missing)
        except GitHubError as exc:
            if posted.action == "none":
                raise
            raise type(exc)(f"{exc}; the comment was {posted.action}, no label was added") from exc
    return Posted(posted.action, posted.comment_id, posted.url, missing)
