"""Who to ask about a file: the owners CODEOWNERS names and the labels `.github/labeler.yml` maps it to, read from a release's tree.

`routes_for(provider, paths)` reads the tree's `CODEOWNERS` (`.github/`, the root, `docs/`: the first found,
as GitHub does) and `.github/labeler.yml` (actions/labeler's v4 and v5 forms) once, and gives each path
its `Route`: the owners of the last CODEOWNERS rule matching it (GitHub's precedence) and every label
whose globs match it. A tree with neither file gives no routes: nothing is guessed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from sftl.sources.providers import SourceProvider

CODEOWNERS_PATHS = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS")  # GitHub's own search order
LABELER_PATHS = (".github/labeler.yml", ".github/labeler.yaml")
OWNER_FILES = CODEOWNERS_PATHS + LABELER_PATHS
_MAX_BYTES = 1_000_000  # GitHub ignores a CODEOWNERS over 3 MB; a labeler map is a few KB


@dataclass(frozen=True)
class Rule:
    """One line of CODEOWNERS: its pattern as written, the path regex it means, the owners it names."""

    pattern: str
    regex: re.Pattern[str]
    owners: tuple[str, ...]


@dataclass(frozen=True)
class Route:
    """Who to ask about one file: the CODEOWNERS rule that owns it (pattern, owners) and its labels."""

    path: str
    pattern: str = ""
    owners: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()


def glob_regex(pattern: str, anchored: bool) -> re.Pattern[str]:
    """A gitignore-style glob as a regex over '/'-separated paths: `*` within a segment, `**` across them;
    a folder pattern (`dir/`) or a bare name also owns what lies under it, `dir/*` only the folder's files."""
    body = pattern.strip("/")
    out = []
    i = 0
    while i < len(body):
        if body.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif body.startswith("**", i):
            out.append(".*")
            i += 2
        elif body[i] == "*":
            out.append("[^/]*")
            i += 1
        elif body[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(body[i]))
            i += 1
    head = "" if anchored else "(?:.*/)?"
    tail = "" if body.endswith("*") and not body.endswith("**") else "(?:/.*)?"
    return re.compile(f"^{head}{''.join(out)}{tail}$")


def parse_codeowners(text: str) -> list[Rule]:
    """CODEOWNERS lines to rules, in file order (comments, blank lines and negations skipped)."""
    rules = []
    for raw in text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()  # '#' starts a comment, but not inside a pattern
        if not line or line.startswith("!"):
            continue
        pattern, *owners = line.split()
        # a slash at the start or in the middle anchors the pattern to the root (gitignore's rule)
        anchored = "/" in pattern.rstrip("/")
        rules.append(Rule(pattern, glob_regex(pattern, anchored), tuple(owners)))
    return rules


def owners_of(rules: list[Rule], path: str) -> Rule | None:
    """The last rule matching `path` (GitHub: the later line wins), or None."""
    found = None
    for rule in rules:
        if rule.regex.match(path):
            found = rule
    return found


def parse_labeler(text: str) -> dict[str, tuple[re.Pattern[str], ...]]:
    """actions/labeler's map, label -> its path globs. v4 (`label: [glob, {any: [...]}]`) and v5
    (`label: [{changed-files: [{any-glob-to-any-file: [...]}]}]`); negated globs (`!x`) and branch
    rules (`head-branch`, `base-branch`) are left out: they say when a label does not apply, not whom."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(label): tuple(glob_regex(g, anchored=True) for g in _globs(spec)) for label, spec in data.items()}


def _globs(spec: Any) -> Iterator[str]:
    if isinstance(spec, str):
        if not spec.startswith("!"):
            yield spec
    elif isinstance(spec, list):
        for item in spec:
            yield from _globs(item)
    elif isinstance(spec, dict):
        for key, value in spec.items():
            if key not in ("head-branch", "base-branch"):
                yield from _globs(value)


def _read(provider: SourceProvider, paths: tuple[str, ...]) -> str | None:
    for path in paths:
        text = provider.read_text(path)
        if text is not None:
            return text[:_MAX_BYTES]
    return None


def routes_for(provider: SourceProvider, paths: Iterable[str]) -> tuple[Route, ...]:
    """Each path's owners and labels, in the order given; () where the tree has no CODEOWNERS and no
    labeler map, and a path neither names is left out."""
    owners_text = _read(provider, CODEOWNERS_PATHS)
    labeler_text = _read(provider, LABELER_PATHS)
    if owners_text is None and labeler_text is None:
        return ()
    rules = parse_codeowners(owners_text or "")
    labels = parse_labeler(labeler_text or "")
    out = []
    for path in dict.fromkeys(paths):
        rule = owners_of(rules, path)
        named = tuple(label for label, globs in labels.items() if any(g.match(path) for g in globs))
        if (rule is not None and rule.owners) or named:
            out.append(Route(path, rule.pattern if rule else "", rule.owners if rule else (), named))
    return tuple(out)
