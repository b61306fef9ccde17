"""Turn a labelled real-issue row into the GitHub REST issue object its reporter would have filed, without its labels.

Only what a reporter writes goes in: the title, the snippet as a fenced ```python block, the
observed output / traceback / error line in fenced blocks, and the environment in the tracker's
template (PyTorch's `collect_env` lines, TensorFlow's "System information" list). The labeller's
fields (`summary`, `truth_*`, `fix*`, `why`, `missing`, `related`, notes, hints) never do:
`LABEL_FIELDS` names them and `compose_issue` reads only `REPORT_FIELDS`.

`html_url` is the row's URL in its /issues/N form (three reports are pull requests quoting the
error; sftl triages issues only). `created_at` comes from the row's `filed` month, else a date named in its version text
("master (Dec 2018)", "main (2025-09-27)"), else the release date of the version it names, else
it is interpolated from the issue number between dated rows of the same repository (GitHub issue
numbers grow with time).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# what a reporter wrote (everything else in a row is the labeller's)
REPORT_FIELDS = ("url", "framework", "title", "version", "python", "cuda", "os", "code", "observed", "traceback", "error", "filed")
LABEL_FIELDS = ("summary", "truth_files", "truth_evidence", "truth_inferred", "truth_in_traceback", "truth_repo",
                "fix", "fix_note", "why", "missing", "related", "traceback_note", "error_source", "repro_hint", "apis")

_URL_RE = re.compile(r"https?://github\.com/([^/]+/[^/]+)/(?:issues|pull)/(\d+)")
_MONTHS = {m: i for i, m in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], start=1)}
_VERSION_RE = re.compile(r"(?<![\w.])[rv]?(\d+\.\d+(?:\.\d+)?(?:(?:\.dev|a|b|rc)\d*)?(?:\d+)?(?:\+[\w.]+)?)")
# version texts that say no release was stated ("1.10-era", "exact version not visible", "TF 1.x")
_NO_VERSION_RE = re.compile(r"\bera\b|not visible|\d\.x\b", re.I)


def repo_and_number(url: str) -> tuple[str, int]:
    m = _URL_RE.match(url or "")
    if m is None:
        raise ValueError(f"not a GitHub issue or pull request URL: {url!r}")
    return m.group(1), int(m.group(2))


def stated_version(text: str | None) -> str | None:
    """The release a row's version text states ('1.9.0.dev20210525+cu111', 'r2.2 (built...)' -> '2.2'), or None."""
    if not text or _NO_VERSION_RE.search(text):
        return None
    m = _VERSION_RE.search(text)
    return m.group(1) if m else None


def date_in(text: str | None) -> str | None:
    """An ISO date named in free text: '2025-09-27', 'Dec 2018', 'Sept 2022', '2018 thread' (mid-month/mid-year)."""
    if not text:
        return None
    found: list[tuple[int, str]] = []  # (position, date): the first date the text names wins
    m = re.search(r"\b(20\d\d)-(\d\d)(?:-(\d\d))?\b", text)
    if m:
        found.append((m.start(), f"{m.group(1)}-{m.group(2)}-{m.group(3) or '15'}"))
    m = re.search(r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?,?\s+(20\d\d)\b", text, re.I)
    if m:
        found.append((m.start(), f"{m.group(2)}-{_MONTHS[m.group(1).lower()]:02d}-15"))
    m = re.search(r"\b(20[12]\d)\b", text)
    if m and not any(m.start() >= pos and m.start() <= pos + 12 for pos, _ in found):
        found.append((m.start(), f"{m.group(1)}-07-01"))
    return min(found)[1] if found else None


def release_date(framework: str, version: str | None) -> str | None:
    """The day the named release came out, from sftl's release table (a month later: when users report on it)."""
    if not version:
        return None
    try:
        from sftl.sources import release_dates
    except ImportError:
        return None
    base = re.match(r"\d+\.\d+(?:\.\d+)?", version)
    if base is None:
        return None
    want = base.group(0).split(".")
    want += ["0"] * (3 - len(want))
    for v, day in release_dates(framework):
        if v.split(".") == want:
            import datetime

            later = datetime.date.fromisoformat(day) + datetime.timedelta(days=30)
            return later.isoformat()
    return None


def number_anchors(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[tuple[int, str]]]:
    """repo -> sorted (issue number, ISO date) of the rows whose date is known without interpolation."""
    out: dict[str, list[tuple[int, str]]] = {}
    for row in rows:
        try:
            repo, number = repo_and_number(str(row.get("url")))
        except ValueError:
            continue
        day = _dated(row)  # a release date says little about when an issue was filed: not an anchor
        if day:
            out.setdefault(repo, []).append((number, day))
    for pairs in out.values():
        pairs.sort()
    return out


def _dated(row: Mapping[str, Any]) -> str | None:
    """The date the row itself gives: its `filed` month, or a date named in its version text."""
    filed = row.get("filed")
    if isinstance(filed, str) and re.fullmatch(r"\d{4}-\d{2}", filed):
        return f"{filed}-15"
    version_text = row.get("version") if isinstance(row.get("version"), str) else None
    return date_in(version_text)


def _known_date(row: Mapping[str, Any]) -> str | None:
    version_text = row.get("version") if isinstance(row.get("version"), str) else None
    return _dated(row) or release_date(str(row.get("framework") or ""), stated_version(version_text))


def _interpolate(number: int, anchors: Sequence[tuple[int, str]]) -> str | None:
    import datetime

    if len(anchors) < 2:
        return None
    pts = [(n, datetime.date.fromisoformat(d).toordinal()) for n, d in anchors]
    lo = max((p for p in pts if p[0] <= number), default=None)
    hi = min((p for p in pts if p[0] >= number), default=None)
    if lo is None:  # before the first anchor: extrapolate from the first two
        lo, hi = pts[0], next((p for p in pts if p[0] > pts[0][0]), pts[0])
    elif hi is None:  # after the last: from the last two
        hi, lo = pts[-1], next((p for p in reversed(pts) if p[0] < pts[-1][0]), pts[-1])
    if lo[0] == hi[0]:
        day = lo[1]
    else:
        day = round(lo[1] + (hi[1] - lo[1]) * (number - lo[0]) / (hi[0] - lo[0]))
    return datetime.date.fromordinal(day).isoformat()


def created_at(row: Mapping[str, Any], anchors: Mapping[str, Sequence[tuple[int, str]]] | None = None) -> str:
    day = _known_date(row)
    if day is None and anchors is not None:
        repo, number = repo_and_number(str(row.get("url")))
        day = _interpolate(number, anchors.get(repo, ()))
    return f"{day or '2021-01-15'}T12:00:00Z"


def _fence(text: str, lang: str = "") -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


def environment_block(framework: str, version: str | None, python: str | None, cuda: str | None, os_name: str | None) -> str:
    """The environment as the tracker's template collects it (only the lines the reporter gave)."""
    if framework == "tensorflow":
        lines = ["**System information**"]
        if os_name:
            lines.append(f"- OS Platform and Distribution (e.g., Linux Ubuntu 16.04): {os_name}")
        if version:
            lines.append(f"- TensorFlow version (use command below): {version}")
        if python:
            lines.append(f"- Python version: {python}")
        if cuda:
            lines.append(f"- CUDA/cuDNN version: {cuda}")
        return "\n".join(lines) if len(lines) > 1 else ""
    lines = []
    if version:
        lines.append(f"PyTorch version: {version}")
    if cuda:
        lines.append(f"CUDA used to build PyTorch: {cuda}")
    if os_name:
        lines.append(f"OS: {os_name}")
    if python:
        lines.append(f"Python version: {python}")
    return ("## Environment\n\n" + _fence("Collecting environment information...\n" + "\n".join(lines))) if lines else ""


def compose_body(row: Mapping[str, Any]) -> str:
    """The issue body: snippet, what happened (output, traceback, error), environment."""
    get = {k: row.get(k) for k in REPORT_FIELDS}
    framework = str(get["framework"] or "pytorch")
    parts: list[str] = []
    code = get["code"] if isinstance(get["code"], str) and get["code"].strip() else None
    if code:
        parts += ["## To Reproduce", "", _fence(code, "python"), ""]
    observed = get["observed"] if isinstance(get["observed"], str) and get["observed"].strip() else None
    if observed:
        parts += ["Output:", "", _fence(observed), ""]
    traceback = get["traceback"] if isinstance(get["traceback"], str) and get["traceback"].strip() else None
    if traceback:
        parts += ["Traceback:", "", _fence(traceback), ""]
    error = get["error"] if isinstance(get["error"], str) and get["error"].strip() else None
    if error and not (traceback and error.strip() in traceback) and not (observed and error.strip() in observed):
        parts += ["The error:", "", _fence(error), ""]
    env = environment_block(framework, stated_version(get["version"] if isinstance(get["version"], str) else None),
                            get["python"] if isinstance(get["python"], str) else None,
                            get["cuda"] if isinstance(get["cuda"], str) else None,
                            get["os"] if isinstance(get["os"], str) else None)
    if env:
        parts += [env, ""]
    return "\n".join(parts).strip() + "\n"


def compose_issue(row: Mapping[str, Any], anchors: Mapping[str, Sequence[tuple[int, str]]] | None = None) -> dict[str, Any]:
    """A GitHub REST issue object (as `GET /repos/{owner}/{repo}/issues/{n}` returns it) for the row."""
    repo, number = repo_and_number(str(row.get("url")))
    when = created_at(row, anchors)
    return {
        "url": f"https://api.github.com/repos/{repo}/issues/{number}",
        "repository_url": f"https://api.github.com/repos/{repo}",
        # a report filed as a pull request (the fix's own PR quoting the traceback) is read as the issue
        # of that number: GitHub serves /issues/N for a pull request too, and sftl triages issues only
        "html_url": f"https://github.com/{repo}/issues/{number}",
        "number": number,
        "title": str(row.get("title") or ""),
        "user": {"login": "reporter"},
        "labels": [],
        "state": "closed",
        "comments": 0,
        "created_at": when,
        "updated_at": when,
        "body": compose_body(row),
    }
