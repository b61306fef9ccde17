"""Versions as reporters write them -> the git ref of the sources they ran, with the reason in words.

`resolve(framework, version, settings, created_at=...)` reads every spelling the trackers show:

- a release, as built or installed: `2.1.0`, `v2.1.0`, `2.1.0+cu121`, `2.1.0+cpu`, `torch==2.1.0`,
  `tensorflow-gpu 2.4.1`, `0.4.1.post2` -> the tag `v2.1.0` (a local build's `+suffix` names its CUDA,
  not its code);
- a line: `2.1`, `2.20`, `tf 2.16`, `r2.2`, `1.10 era (Oct 2021)` -> the newest `vX.Y.z` out by the report's
  date (or the date the text names, when earlier), else the newest sftl knows, else `vX.Y.0`; a line not yet
  released by that date was a pre-release of it: its first release, said so. A cached `X.Y.z` serves a line
  (`sftl.sources.open_source`);
- two lines: `1.4/1.5 era` -> the later (the newest code known to hold the bug, nearest its fix), unless
  it was not out yet by the date: then the earlier;
- a major line: `TF 1.x (2018 thread)` -> the newest `1.x` release out by the date (several dates in
  the text: the earliest; later ones say how long it lasted);
- a pre-release: `2.16.0-rc1`, `1.15.0rc2`, `2.0a` -> its tag (`v2.16.0-rc1`, `v2.0.0-alpha0`);
- a source build: `2.2.0a0+git2ef35a0`, `2.2.0a0+2ef35a0` -> that commit;
- a nightly: `1.13.0.dev20220826`, `tf-nightly 2.5.0.dev20201028`, `2.12.0-dev20230201` -> the default
  branch's commit of that night (commits API, `until=`); offline the release current that day, said so;
- a development branch or no version: `master (Dec 2018)`, `main (2025-09-27)`, `nightly`, `tf-nightly`,
  `not shown (Jan 2026)`, none -> the default branch's commit at that date, never later than the report
  (commits API, `until=`); offline the release current then, said so.

Looked-up commits are kept in the cache (`sources/refs.json`), so a report read again costs no request.
"""

from __future__ import annotations

import calendar
import datetime
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sftl.errors import GitHubError, InputError, SourceError

if TYPE_CHECKING:
    from sftl.config import Settings

GITHUB_REPOS = {"pytorch": "pytorch/pytorch", "tensorflow": "tensorflow/tensorflow"}
# a nightly dated D is built from the default branch early on D: the commit current at 08:00 UTC (midnight Pacific)
NIGHTLY_CUTOFF = "T08:00:00Z"


@dataclass(frozen=True)
class Resolution:
    """Where a report's sources are: the git ref, the release it is (or is nearest), and why."""

    framework: str
    ref: str  # what the archive is fetched at: a tag (v2.1.0) or a commit sha
    version: str | None  # the release number the ref stands for ('2.1.0'; a source build's base version)
    reason: str  # one line for the report: the spelling, what it means, the ref read
    exact: bool = True  # False: a stand-in (offline, a nightly read at the release current that day)
    series: str | None = None  # '1.10' when the report named a line, not a release: any cached 1.10.z serves it

    @property
    def is_commit(self) -> bool:
        return re.fullmatch(r"[0-9a-f]{7,40}", self.ref) is not None


# Release dates (first upload of each release to PyPI, to the day as far as known): the release a
# report without a version ran on is the one current when it was filed.
_RELEASES = {
    "pytorch": """0.1.12 2017-05-02 0.2.0 2017-08-08 0.3.0 2017-12-05 0.3.1 2018-02-14 0.4.0 2018-04-24
        0.4.1 2018-07-26 1.0.0 2018-12-07 1.0.1 2019-02-07 1.1.0 2019-04-30 1.2.0 2019-08-08 1.3.0 2019-10-10
        1.3.1 2019-11-07 1.4.0 2020-01-15 1.5.0 2020-04-21 1.5.1 2020-06-18 1.6.0 2020-07-28 1.7.0 2020-10-27
        1.7.1 2020-12-10 1.8.0 2021-03-04 1.8.1 2021-03-25 1.9.0 2021-06-15 1.9.1 2021-09-22 1.10.0 2021-10-21
        1.10.1 2021-12-15 1.10.2 2022-01-27 1.11.0 2022-03-10 1.12.0 2022-06-28 1.12.1 2022-08-05 1.13.0 2022-10-28
        1.13.1 2022-12-15 2.0.0 2023-03-15 2.0.1 2023-05-08 2.1.0 2023-10-04 2.1.1 2023-11-15 2.1.2 2023-12-14
        2.2.0 2024-01-30 2.2.1 2024-02-22 2.2.2 2024-03-27 2.3.0 2024-04-24 2.3.1 2024-06-05 2.4.0 2024-07-24
        2.4.1 2024-09-04 2.5.0 2024-10-17 2.5.1 2024-10-29 2.6.0 2025-01-29 2.7.0 2025-04-23 2.7.1 2025-06-04
        2.8.0 2025-08-06 2.9.0 2025-10-15 2.9.1 2025-11-12 2.10.0 2026-01-21 2.11.0 2026-03-23 2.12.0 2026-05-13
        2.12.1 2026-06-17 2.13.0 2026-07-08 2.14.0 2026-09-02 2.14.1 2026-09-30 2.15.0 2026-10-28""",
    "tensorflow": """1.0.0 2017-02-15 1.1.0 2017-04-21 1.2.0 2017-06-15 1.3.0 2017-08-17 1.4.0 2017-11-02
        1.5.0 2018-01-26 1.6.0 2018-03-01 1.7.0 2018-03-29 1.8.0 2018-04-28 1.9.0 2018-07-10 1.10.0 2018-08-08
        1.11.0 2018-09-27 1.12.0 2018-11-05 1.13.1 2019-02-26 1.14.0 2019-06-19 1.15.0 2019-10-16
        2.0.0 2019-09-30 2.1.0 2020-01-08 2.2.0 2020-05-07 2.3.0 2020-07-27 2.4.0 2020-12-14 2.5.0 2021-05-13
        2.6.0 2021-08-11 2.7.0 2021-11-04 2.8.0 2022-02-02 2.9.0 2022-05-16 2.10.0 2022-09-06 2.11.0 2022-11-18
        2.12.0 2023-03-20 2.13.0 2023-07-05 2.14.0 2023-09-26 2.15.0 2023-11-14 2.16.1 2024-03-08
        2.17.0 2024-07-11 2.18.0 2024-10-24 2.18.1 2025-03-12 2.19.0 2025-03-12 2.19.1 2025-08-13 2.20.0 2025-08-13
        2.21.0 2026-03-06""",
}


def normalize_framework(name: str) -> str:
    """'torch' / 'PyTorch' / 'tensorflow-cpu' -> 'pytorch' / 'tensorflow'."""
    low = name.strip().lower()
    if low in ("torch", "pytorch"):
        return "pytorch"
    if low.startswith(("tensorflow", "tf-nightly")) or low == "tf":
        return "tensorflow"
    raise InputError(f"unknown framework {name!r}; sftl knows pytorch and tensorflow")


def version_key(version: str) -> tuple[int, ...]:
    parts = re.findall(r"\d+", version.split("+")[0])[:3]
    return tuple(int(p) for p in parts) + (0,) * (3 - len(parts))


def nearest_version(version: str, candidates: Iterable[str]) -> str | None:
    """The candidate release closest to `version` in release order (0.4 is next to 1.0, not to 1.4; 2.0 to 1.13)."""
    want = version_key(version)

    def distance(v: str) -> tuple[int, int]:
        have = version_key(v)
        return (abs((have[0] - want[0]) * 100 + have[1] - want[1]), abs(have[2] - want[2]))

    ordered = sorted(candidates, key=distance)
    return ordered[0] if ordered else None


def release_dates(framework: str) -> list[tuple[str, str]]:
    """(version, ISO date) of the framework's releases sftl knows, oldest first."""
    words = _RELEASES[normalize_framework(framework)].split()
    return sorted(zip(words[::2], words[1::2], strict=True), key=lambda vd: vd[1])


def release_at(framework: str, when: str) -> str | None:
    """The latest release published on or before `when` (an ISO date or GitHub timestamp); None before the
    first, and None after the last release sftl knows (a newer one may have been current then: no guess).

    TensorFlow's 1.x and 2.x lines overlapped (1.15 came after 2.0): the highest version out by then
    wins, the one a plain `pip install` would have given that day.
    """
    day = _iso_day(when)
    if day is None:
        return None
    current = None
    known = release_dates(framework)
    if not any(date > day for _, date in known):
        return None
    for version, date in known:
        if date <= day and (current is None or version_key(version) > version_key(current)):
            current = version
    return current


def release_tag(framework: str, version: str) -> str:
    """The git tag of a release: PyTorch and TensorFlow both tag 'vX.Y.Z'."""
    base = re.match(r"\d+(?:\.\d+)*", version)
    if base is None:
        raise SourceError(f"cannot read a release from version {version!r}")
    parts = base.group(0).split(".")
    while len(parts) < 3:
        parts.append("0")
    return "v" + ".".join(parts[:3])


def newest_patch(framework: str, major_minor: str, until: str | None = None) -> str | None:
    """'2.1' -> '2.1.2': the newest X.Y.z release sftl knows (published by `until`, an ISO date, when given),
    None when it knows none."""
    day = _iso_day(until) if until else None
    line = [v for v, d in release_dates(framework)
            if v.split(".")[:2] == major_minor.split(".")[:2] and (day is None or d <= day)]
    return max(line, key=version_key) if line else None


def _iso_day(when: str | None) -> str | None:
    day = (when or "").strip()[:10]
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", day):
        return None
    try:
        datetime.date.fromisoformat(day)  # 2019-13-45 is no date
    except ValueError:
        return None
    return day


# -- spellings ---------------------------------------------------------------------------------------

_MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_abbr) if m}
_PREFIX = re.compile(
    r"^\s*(?:py)?(?:torch|pytorch|tensorflow(?:[-_](?:gpu|cpu|intel|macos|rocm|aarch64))?|tf(?:[-_]nightly(?:[-_](?:gpu|cpu))?)?|"
    r"tf2|keras)?\s*(?:version)?\s*[:=]*\s*(?:==|=)?\s*",
    re.IGNORECASE,
)
_NUMBER = r"\d+\.\d+(?:\.\d+)?"
_SOURCE_BUILD = re.compile(rf"^v?({_NUMBER})(?:a0|\.dev0|-?rc\d+)?\+(?:git)?([0-9a-f]{{7,40}})\b", re.IGNORECASE)
_NIGHTLY = re.compile(rf"^v?({_NUMBER})[.-]?dev(\d{{4}})(\d{{2}})(\d{{2}})", re.IGNORECASE)
_NIGHTLY_ANYWHERE = re.compile(rf"({_NUMBER})[.-]?dev(\d{{4}})(\d{{2}})(\d{{2}})", re.IGNORECASE)
_CANDIDATE = re.compile(r"^v?(\d+\.\d+\.\d+)[-.]?(rc\d+)\b", re.IGNORECASE)
_RELEASE = re.compile(rf"^v?({_NUMBER})(?!\d)(?:\.post\d+|a\d+)?(?:\+[\w.]+|-[a-z]\w*)?\b", re.IGNORECASE)  # 1.6.0a0-fb
_PRERELEASE = re.compile(r"^v?(\d+\.\d+(?:\.\d+)?)-?(a|alpha|b|beta)(\d*)$", re.IGNORECASE)
_DEVELOPMENT_WORD = re.compile(r"\b(?:master|main|nightly|trunk|head)\b", re.IGNORECASE)
_BRANCH = re.compile(r"^r(\d+\.\d+)\b", re.IGNORECASE)  # TensorFlow's release branches
_LINES = re.compile(r"^v?\d+\.\d+(?:\s*(?:/|or)\s*v?\d+\.\d+)+(?![\d.])", re.IGNORECASE)  # '1.4/1.5', '2.1 or 2.2'
_MAJOR = re.compile(r"^v?(\d+)\.x\b", re.IGNORECASE)  # '1.x'
_DEVELOPMENT = re.compile(r"^(?:master|main|nightly|head|trunk|latest|dev|source|tf[-_]nightly(?:[-_]gpu)?)\b", re.IGNORECASE)


def _month_end(year: int, month: int) -> str:
    return f"{year:04d}-{month:02d}-{calendar.monthrange(year, month)[1]:02d}T23:59:59Z"


def _date_in(text: str) -> str | None:
    """'main (2025-09-27)' -> '2025-09-27T23:59:59Z'; 'master (Dec 2018)' -> the month's last second;
    '(2018 thread)' -> the year's. Several dates: the earliest (the report ran then; later ones say
    how long it lasted: 'still present until ... (Jan 2021)')."""
    found: list[str] = []
    for m in re.finditer(r"(\d{4})-(\d{2})-(\d{2})", text):
        if _iso_day(m.group(0)):
            found.append(f"{m.group(0)}T23:59:59Z")
    for m in re.finditer(r"\b([A-Za-z]{3})[a-z]*\.?,?\s+(\d{4})\b", text):
        if m.group(1).lower() in _MONTHS:
            found.append(_month_end(int(m.group(2)), _MONTHS[m.group(1).lower()]))
    for m in re.finditer(r"\b(\d{4})[-/](\d{1,2})\b", text):
        if 1 <= int(m.group(2)) <= 12:
            found.append(_month_end(int(m.group(1)), int(m.group(2))))
    for m in re.finditer(r"(?<![\w.#/-])((?:19|20)\d\d)(?![\w.-])", text):  # a year alone: '(2018 thread)'
        found.append(f"{m.group(1)}-12-31T23:59:59Z")
    return min(found) if found else None


def _earlier(a: str | None, b: str | None) -> str | None:
    if a is None or b is None:
        return a or b
    return a if a <= b else b


def _timestamp(created_at: str | None) -> str | None:
    """A GitHub timestamp as the commits API takes it (2023-05-01T10:00:00Z); None when it is none."""
    raw = (created_at or "").strip()
    if _iso_day(raw) is None:
        return None
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", raw):
        return raw
    return raw[:10] + "T23:59:59Z"


@dataclass(frozen=True)
class _Spelling:
    kind: str  # "release" | "minor" | "candidate" | "commit" | "nightly" | "development"
    number: str | None = None  # 2.1.0 / 2.1
    commit: str | None = None
    until: str | None = None  # a nightly's or a dated branch's date; the date a line's text names
    text: str = ""
    earlier: str | None = None  # '1.4/1.5': the earlier line, read when the later was not out by the date


def read_spelling(framework: str, version: str | None) -> _Spelling:
    """What a version string says, without any lookup (raises SourceError for one that says nothing)."""
    raw = " ".join((version or "").split())
    if not raw:
        return _Spelling("development", text="")
    if _DEVELOPMENT.match(raw) or _DEVELOPMENT.match(_PREFIX.sub("", raw, count=1)):
        nightly = _NIGHTLY_ANYWHERE.search(raw)
        if nightly is not None:  # 'tf-nightly 2.5.0.dev20201028'
            number, y, mo, d = nightly.groups()
            return _Spelling("nightly", number, until=f"{y}-{mo}-{d}", text=raw)
        if not re.search(r"\d+\.\d+", re.sub(r"\(.*\)", "", raw)) or _date_in(raw):
            return _Spelling("development", until=_date_in(raw), text=raw)
    text = _PREFIX.sub("", raw, count=1).strip() or raw
    for pattern, kind in ((_SOURCE_BUILD, "commit"), (_NIGHTLY, "nightly"), (_CANDIDATE, "candidate")):
        m = pattern.match(text)
        if m is None:
            continue
        if kind == "commit":
            return _Spelling("commit", m.group(1), commit=m.group(2).lower(), text=raw)
        if kind == "nightly":
            day = f"{m.group(2)}-{m.group(3)}-{m.group(4)}"
            if _iso_day(day) is None:
                raise SourceError(f"version {raw!r} names the nightly of {day}, which is no date")
            return _Spelling("nightly", m.group(1), until=day, text=raw)
        return _Spelling("candidate", m.group(1), commit=m.group(2).lower(), text=raw)
    m = _PRERELEASE.match(text)
    if m:  # TensorFlow's 2.0a / 2.0.0-beta1: tagged v2.0.0-alpha0, v2.0.0-beta1
        number = m.group(1) if m.group(1).count(".") == 2 else m.group(1) + ".0"
        stage = "alpha" if m.group(2).lower().startswith("a") else "beta"
        return _Spelling("candidate", number, commit=f"{stage}{m.group(3) or '0'}", text=raw)
    m = _LINES.match(text)
    if m:  # '1.4/1.5 era': the later line (the newest code known to hold the bug, nearest its fix)
        lines = sorted(re.findall(r"\d+\.\d+", m.group(0)), key=version_key)
        return _Spelling("minor", lines[-1], until=_date_in(raw), text=raw, earlier=lines[0])
    m = _MAJOR.match(text)
    if m:  # 'TF 1.x (2018 ...)': a major line, no release named: the date decides
        return _Spelling("major", m.group(1), until=_date_in(raw), text=raw)
    m = _BRANCH.match(text)
    if m:
        return _Spelling("minor", m.group(1), until=_date_in(raw), text=raw)
    m = _RELEASE.match(text)
    if m:
        number = m.group(1)
        if number.count(".") == 1:  # '1.10 era (Oct 2021)': a line, and when
            return _Spelling("minor", number, until=_date_in(raw), text=raw)
        return _Spelling("release", number, text=raw)
    bare = re.sub(r"\(.*?\)", "", raw)
    if _date_in(raw) and not re.search(r"\b\d+\.x\b", raw) and (
            _DEVELOPMENT_WORD.search(raw) or not re.search(r"\d+\.\d+", bare)):
        # 'torchdynamo main (Aug 2022)', 'not visible (Jan 2026)': the development branch, or no release, at a date
        return _Spelling("development", until=_date_in(raw), text=raw)
    raise SourceError(
        f"cannot read a version from {raw!r}: expected a {framework} release (2.1.0, 2.1.0+cu121, 2.1), a source "
        f"build (2.2.0a0+git2ef35a0), a nightly (1.13.0.dev20220826) or a branch (master, main (2025-09-27))"
    )


def resolve(
    framework: str,
    version: str | None,
    settings: Settings | None = None,
    created_at: str | None = None,
    offline: bool = False,
) -> Resolution:
    """The ref whose sources a report ran, with the reason in one line; SourceError says why when none."""
    framework = normalize_framework(framework)
    spelling = read_spelling(framework, version)
    shown = spelling.text or "no version"
    offline = offline or settings is None or settings.offline
    if spelling.kind == "release":
        assert spelling.number is not None
        tag = release_tag(framework, spelling.number)
        base = tag[1:]
        local = re.search(r"\+([\w.]+)$", spelling.text)
        why = (f"{shown}: a local build (+{local.group(1)}) of release {base}" if local and "git" not in local.group(1)
               else f"{shown}: release {base}")
        return Resolution(framework, tag, base, f"{why}, tag {tag}")
    if spelling.kind == "major":
        assert spelling.number is not None
        until = _earlier(spelling.until, _timestamp(created_at))
        major = [v for v, d in release_dates(framework)
                 if v.split(".")[0] == spelling.number and (until is None or d <= until[:10])]
        if not major:
            raise SourceError(f"{shown}: no {framework} {spelling.number}.x release known to sftl"
                              + (f" out by {until[:10]}" if until else ""))
        best = max(major, key=version_key)
        tag = release_tag(framework, best)
        which = f"the newest out by {until[:10]}" if until else "no date given: the newest sftl knows"
        return Resolution(framework, tag, best, f"{shown}: a {spelling.number}.x release of no stated number; {which}, "
                          f"tag {tag}", exact=False)
    if spelling.kind == "minor":
        assert spelling.number is not None
        line = ".".join(spelling.number.split(".")[:2])
        until = _earlier(spelling.until, _timestamp(created_at))
        dated = newest_patch(framework, line, until) if until else None
        picked = ""
        if dated is None and until and spelling.earlier:
            # '1.4/1.5' in March 2020: 1.5 was not out yet, so the earlier line is what ran as a release
            picked = f"{line} was not yet released on {until[:10]}, so the earlier line {spelling.earlier}; "
            line = spelling.earlier
            dated = newest_patch(framework, line, until)
        elif spelling.earlier:
            picked = f"the later of the lines named ({spelling.earlier}, {line}), nearest the fix; "
        if dated is not None:  # '2.1' in a report of 2023-11-01 ran 2.1.0: 2.1.1 was not out yet
            tag = release_tag(framework, dated)
            return Resolution(framework, tag, dated,
                              f"{shown}: {picked}the newest {line}.x release out by {until[:10] if until else '?'}, "
                              f"tag {tag}", series=line)
        first = min((v for v, _ in release_dates(framework) if v.split(".")[:2] == line.split(".")), key=version_key,
                    default=None)
        if until and first is not None:  # named before its first release: a pre-release of it; the nearest code is that
            tag = release_tag(framework, first)
            return Resolution(framework, tag, first, f"{shown}: {picked}{line} was not yet released on {until[:10]} (a "
                              f"pre-release of it); read its first release, tag {tag}", exact=False, series=line)
        newest = newest_patch(framework, line)
        if newest is not None:
            tag = release_tag(framework, newest)
            return Resolution(framework, tag, newest, f"{shown}: the newest {line}.x release sftl knows, tag {tag}",
                              series=line)
        tag = release_tag(framework, line)
        return Resolution(framework, tag, tag[1:], f"{shown}: no {line}.x release known to sftl, tag {tag}", series=line)
    if spelling.kind == "candidate":
        assert spelling.number is not None and spelling.commit is not None
        tag = f"v{spelling.number}-{spelling.commit}"
        return Resolution(framework, tag, spelling.number, f"{shown}: a pre-release, tag {tag}")
    if spelling.kind == "commit":
        assert spelling.commit is not None
        return Resolution(framework, spelling.commit, spelling.number,
                          f"{shown}: a source build at commit {spelling.commit}, read at that commit")
    filed = _timestamp(created_at)
    when: str | None
    if spelling.kind == "nightly":
        assert spelling.until is not None
        when = _earlier(spelling.until + NIGHTLY_CUTOFF, filed) or spelling.until + NIGHTLY_CUTOFF
        what = f"{shown}: the nightly of {spelling.until}"
    else:
        when = _earlier(spelling.until, filed)
        if when is None:
            raise SourceError(
                f"the report names no {framework} version and no date, so no source of the right release can be chosen"
                if not spelling.text else f"{shown}: a development build of no known date; name a release or a commit"
            )
        what = (f"{shown}: the development branch" if spelling.text else "no version: the default branch") + (
            f" when it was filed ({when[:10]})" if when == filed else f" on {when[:10]}")
    if settings is not None:  # offline: a commit looked up before still answers (refs.json), no request
        found = commit_at(framework, when, settings, ask=not offline)
        if found is not None:
            sha, date = found
            return Resolution(framework, sha, spelling.number,
                              f"{what}: commit {sha[:10]} of {GITHUB_REPOS[framework]}, current at {date or when}")
    near = release_at(framework, when)
    if near is None:
        raise SourceError(f"{what}; {'offline, ' if offline else ''}its commit cannot be looked up and sftl knows "
                          f"no release of that date")
    tag = release_tag(framework, near)
    note = "offline, its commit cannot be looked up" if offline else "no commit of that date found"
    return Resolution(framework, tag, near, f"{what}; {note}: read {tag}, the release current on {when[:10]}", exact=False)


# -- the commit current at a date, looked up once -----------------------------------------------------


def refs_file(settings: Settings) -> Path:
    return settings.cache_dir / "sources" / "refs.json"


def _read_refs(settings: Settings) -> dict[str, list[str]]:
    try:
        data = json.loads(refs_file(settings).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, list) and len(v) == 2} if isinstance(data, dict) else {}


def commit_at(framework: str, when: str, settings: Settings, ask: bool = True) -> tuple[str, str] | None:
    """(sha, date) of the default branch's commit current at `when`, from the cache or (`ask`) one request."""
    repo = GITHUB_REPOS[framework]
    key = f"{repo} {when}"
    known = _read_refs(settings)
    if key in known:
        return known[key][0], known[key][1]
    if settings.offline or not ask:
        return None
    from sftl.github import GitHubClient  # the one HTTP door, only when a lookup is due

    try:
        with GitHubClient(settings) as client:
            found = client.commit_at(repo, when)
    except GitHubError as exc:
        raise SourceError(f"cannot look up the commit of {repo} current at {when}: {exc}") from exc
    if found is None:
        return None
    known = _read_refs(settings)  # another process may have written meanwhile: merge
    known[key] = [found[0], found[1]]
    path = refs_file(settings)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(known, indent=0, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass  # a cache: a read-only home only costs a request next time
    return found
