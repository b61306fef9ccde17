"""A report prepared for screening: its sections and the rules' evidence, for one report or many."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sftl.extract import find_error_line, parse_tracebacks
from sftl.model import Environment, Extraction, Issue
from sftl.screen.rules import RuleEvidence, rule_evidence
from sftl.screen.sections import Sections, read_sections


@dataclass(frozen=True)
class Doc:
    """One report prepared for screening."""

    key: str
    sections: Sections
    rules: RuleEvidence


def prepare(item: Any, extraction: Extraction | None = None, key: str = "") -> Doc:
    """An Issue, a (title, body) pair, a dict with title/body[/error] or a plain string -> Doc."""
    title, body, error = "", "", None
    if isinstance(item, Issue):
        title, body, key = item.title, item.body, key or item.key
        own = [c.body for c in item.comments if item.author and c.author == item.author and c.body]
        if own:  # the reporter's follow-ups (output, versions) are part of the report
            body = "\n\n".join([body or "", *own])
    elif isinstance(item, dict):
        title, body, error = item.get("title") or "", item.get("body") or "", item.get("error")
        key = key or str(item.get("url") or item.get("key") or "")
    elif isinstance(item, (tuple, list)) and len(item) >= 2:
        title, body = item[0] or "", item[1] or ""
    else:
        body = item if isinstance(item, str) else ""
    if not isinstance(title, str):
        title = ""
    if not isinstance(body, str):
        body = ""
    if error and isinstance(error, str) and error not in body:
        body = f"{body}\n\n```\n{error}\n```"
    if extraction is None:
        tbs = parse_tracebacks(body) if "Traceback" in body or 'File "' in body else []
        err = find_error_line(body, tbs)
        extraction = Extraction(None, tbs[-1] if tbs else None, Environment(), err)
    sections = read_sections(title, body, None)
    return Doc(key, sections, rule_evidence(sections, extraction))


def _prepare_chunk(items: list[Any]) -> list[Doc]:
    return [prepare(it) for it in items]


def prepare_many(items: Sequence[Any], workers: int | None = None) -> list[Doc]:
    """prepare() over many reports; large batches are spread over the machine's cores."""
    import os

    items = list(items)
    n = workers if workers is not None else min(os.cpu_count() or 1, 8)
    if n <= 1 or len(items) < 2000:
        return _prepare_chunk(items)
    from concurrent.futures import ProcessPoolExecutor

    size = -(-len(items) // (n * 4))
    chunks = [items[i:i + size] for i in range(0, len(items), size)]
    try:
        with ProcessPoolExecutor(n) as pool:
            return [d for part in pool.map(_prepare_chunk, chunks) for d in part]
    except (OSError, RuntimeError):  # no process support (sandboxes): do it here
        return _prepare_chunk(items)


def as_docs(items: Iterable[Any]) -> list[Doc]:
    return [it if isinstance(it, Doc) else prepare(it) for it in items]
