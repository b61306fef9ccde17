"""Fix records in and out of the store: import a JSONL history, export it (or as labelled rows), read the prior's candidates."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from sftl.errors import InputError, StoreError
from sftl.history import (
    TERMS_VERSION,
    FixIndex,
    HistoryPrior,
    blend,
    category_of_kind,
    compute_prior,
    filed_day,
    fix_key,
    fix_terms,
    fix_to_json,
    history_stats,
    parse_fix,
)
from sftl.model import Category, Extraction, FixRecord, Issue, Localization
from sftl.store import Store

# a locate with the prior asks the localizer for this many files, so the prior can lift one from below the cut
HISTORY_DEPTH = 30
_MAX_LINE_BYTES = 1 << 20

FixRow = tuple[str, str, int | None, int | None, str | None, str, str, str]


def fix_row(rec: FixRecord) -> FixRow:
    """A record as the store's fixes row (its terms computed once, here)."""
    terms = json.dumps({"v": TERMS_VERSION, "t": fix_terms(rec)}, sort_keys=True)
    record = json.dumps(fix_to_json(rec), sort_keys=True, ensure_ascii=False)
    return (rec.repo, fix_key(rec), rec.issue, rec.pr, rec.commit, rec.fixed_on, record, terms)


@dataclass
class FixImportStats:
    """What one `history import` did; `bad` holds (line, why) of every line not imported."""

    lines: int = 0
    imported: int = 0
    written: int = 0  # new or changed in the store
    bad: list[tuple[int, str]] = field(default_factory=list)


def import_fixes(path_or_dash: str | Path, store: Store, stdin: IO[bytes] | None = None) -> FixImportStats:
    """Read a JSONL history (or '-' for stdin) into the store: every good line is kept, every bad
    one is reported with its line number and reason; the good ones are written in one transaction."""
    stats = FixImportStats()
    if str(path_or_dash) == "-":
        import sys

        return _import(stdin or sys.stdin.buffer, store, stats)
    path = Path(path_or_dash).expanduser()
    try:
        with path.open("rb") as fh:
            return _import(fh, store, stats)
    except IsADirectoryError:
        raise InputError(f"{path} is a directory, not a JSONL file") from None
    except FileNotFoundError:
        raise InputError(f"no such file: {path}") from None
    except PermissionError:
        raise InputError(f"cannot read {path}: permission denied") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None


def _import(source: IO[bytes], store: Store, stats: FixImportStats) -> FixImportStats:
    rows: dict[tuple[str, str], FixRow] = {}
    for n, raw in enumerate(source, start=1):
        stats.lines = n
        if not raw.strip():
            continue
        if len(raw) > _MAX_LINE_BYTES:
            stats.bad.append((n, f"line longer than {_MAX_LINE_BYTES} bytes"))
            continue
        try:
            obj = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            stats.bad.append((n, "not UTF-8 text"))
            continue
        except json.JSONDecodeError as exc:
            stats.bad.append((n, f"malformed JSON ({exc.msg} at column {exc.colno})"))
            continue
        except RecursionError:
            stats.bad.append((n, "JSON nested too deeply"))
            continue
        try:
            rec = parse_fix(obj)
        except InputError as exc:
            stats.bad.append((n, str(exc)))
            continue
        row = fix_row(rec)
        rows[(row[0], row[1])] = row  # a record given twice: the later line wins
        stats.imported += 1
    stats.written = store.upsert_fixes(list(rows.values())) if rows else 0
    return stats


def _record(text: str) -> FixRecord:
    try:
        return parse_fix(json.loads(text))
    except (ValueError, InputError) as exc:
        raise StoreError(f"the store holds a damaged fix record ({exc}); import the history again") from None


def iter_fixes(store: Store, repo: str | None = None) -> Iterator[FixRecord]:
    for _, record, _ in store.iter_fix_rows(repo):
        yield _record(record)


def export_fixes(store: Store, repo: str | None = None) -> Iterator[str]:
    """The stored history as JSONL lines in the import format."""
    for rec in iter_fixes(store, repo):
        yield json.dumps(fix_to_json(rec), ensure_ascii=False)


def export_labelled(
    store: Store, repo: str | None = None, screen: Callable[[list[Issue]], list[str | None]] | None = None,
) -> Iterator[str]:
    """Rows `sftl eval` reads: each fixed issue with its category -- its stored screening, else what
    `screen` says of the stored issue, else its fix's kind --, truth = the fix's source files, and
    the issue object when the store holds it."""
    from sftl.github import issue_to_json
    from sftl.history import is_source_file

    by_issue: dict[tuple[str, int], list[FixRecord]] = {}
    for rec in iter_fixes(store, repo):
        if rec.issue is not None:
            by_issue.setdefault((rec.repo, rec.issue), []).append(rec)
    rows: list[tuple[dict[str, Any], Issue | None]] = []
    for (name, number), recs in sorted(by_issue.items()):
        truth = list(dict.fromkeys(f for r in recs for f in r.files if is_source_file(f)))
        if not truth:
            continue
        screened = store.get_screening(name, number)
        category = screened.get("category") if isinstance(screened, dict) else None
        row: dict[str, Any] = {"url": f"https://github.com/{name}/issues/{number}", "category": category,
                               "truth_files": truth, "fixed_on": min(r.fixed_on for r in recs), "kind": recs[0].kind}
        stored = store.get_issue(name, number)
        if stored is not None:
            row["issue"] = issue_to_json(stored, store.get_raw(name, number))
        rows.append((row, stored))
    unscreened = [(row, issue) for row, issue in rows if row["category"] not in ("mme", "gcrde", "other") and issue]
    if screen is not None and unscreened:
        for (row, _), category in zip(unscreened, screen([i for _, i in unscreened if i is not None]), strict=True):
            row["category"] = category
    for row, _ in rows:
        if row["category"] not in ("mme", "gcrde", "other"):
            row["category"] = category_of_kind(row["kind"]).value
        yield json.dumps(row, ensure_ascii=False)


def stats(store: Store, repo: str | None = None) -> dict[str, Any]:
    return history_stats(iter_fixes(store, repo))


_FRAMEWORK_OWNERS = {"pytorch": "pytorch", "tensorflow": "tensorflow"}
INDEX_VERSION = 2  # 2: flat arrays
_INDEXES_KEPT = 8


def _framework_of(repo: str) -> str | None:
    return _FRAMEWORK_OWNERS.get(repo.split("/", 1)[0].lower())


def _group(repo: str) -> str:
    """Fixes are compared within their framework (or, outside the two, their repository)."""
    return _framework_of(repo) or repo.lower()


def candidates(store: Store, framework: str | None, repo: str, created_at: str) -> list[tuple[FixRecord, dict[str, float]]]:
    """The stored fixes the prior may consult for an issue: of its framework (or its repository),
    dated before it was filed (all of them for an undated issue), with their terms."""
    from sftl.history import fixed_before

    day = filed_day(created_at)
    group = framework or _group(repo)
    out: list[tuple[FixRecord, dict[str, float]]] = []
    for rec_repo, record, terms_text in store.iter_fix_rows(before=day):
        if _group(rec_repo) != group:
            continue
        rec = _record(record)
        if day is not None and not fixed_before(rec.fixed_on, day):
            continue
        out.append((rec, _terms(terms_text, rec)))
    return out


def _terms(text: str, rec: FixRecord | None) -> dict[str, float]:
    try:
        stored = json.loads(text)
    except ValueError:
        stored = None
    if isinstance(stored, dict) and stored.get("v") == TERMS_VERSION and isinstance(stored.get("t"), dict):
        return {str(k): float(v) for k, v in stored["t"].items() if isinstance(v, (int, float))}
    return fix_terms(rec) if rec is not None else {}  # another tokenizer's terms (or damaged): computed again


def index_path(stamp: list[Any], cache_dir: Path) -> Path:
    """Named after the history's stamp (count, latest write, versions): copies of one store share it."""
    import hashlib

    ident = hashlib.sha1(json.dumps(stamp).encode()).hexdigest()[:16]
    return cache_dir / "history" / f"index-{ident}.marshal"


def load_index(store: Store, group: str, cache_dir: Path | None) -> FixIndex:
    """The history index of one framework: read from the cache file while the store's history is
    unchanged (its count and latest write), else built from the store (and the file rewritten)."""
    import marshal
    import os
    import tempfile

    stamp = [*store.fixes_stamp(), TERMS_VERSION, INDEX_VERSION]
    path = index_path(stamp, cache_dir) if cache_dir is not None else None
    if path is not None:
        try:
            data = marshal.loads(path.read_bytes())
            if isinstance(data, dict) and data.get("stamp") == stamp:
                got = data["groups"].get(group)
                return FixIndex.from_data(got) if got is not None else FixIndex.build(())
        except (OSError, ValueError, EOFError, TypeError, KeyError):
            pass  # no index yet, or a damaged one: built again
    rows: dict[str, list[tuple[str, str, dict[str, float]]]] = {}
    for repo, key, fixed_on, terms_text in store.iter_fix_terms():
        terms = _terms(terms_text, None)
        if not terms:
            rec = store.get_fix_records([(repo, key)]).get((repo, key))
            terms = fix_terms(_record(rec)) if rec else {}
        rows.setdefault(_group(repo), []).append((f"{repo}\0{key}", fixed_on, terms))
    groups = {g: FixIndex.build(r) for g, r in rows.items()}
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as fh:
                fh.write(marshal.dumps({"stamp": stamp, "groups": {g: i.to_data() for g, i in groups.items()}}))
            os.replace(tmp, path)  # atomic: a reader sees the old index or the new one
            kept = sorted(path.parent.glob("index-*.marshal"), key=lambda p: p.stat().st_mtime, reverse=True)
            for old in kept[_INDEXES_KEPT:]:  # those of earlier histories (or other stores sharing the cache)
                old.unlink(missing_ok=True)
        except OSError:
            pass  # an index that cannot be kept is only built again next time
    return groups.get(group) or FixIndex.build(())


def _loader(store: Store) -> Any:
    def load(keys: list[str]) -> dict[str, FixRecord]:
        pairs = [(k.split("\0", 1)[0], k.split("\0", 1)[1]) for k in keys]
        return {f"{repo}\0{key}": _record(text) for (repo, key), text in store.get_fix_records(pairs).items()}

    return load


def history_prior(
    store: Store, issue: Issue, extraction: Extraction, framework: str | None, tree_files: list[str],
    cache_dir: Path | None = None,
) -> HistoryPrior:
    """The prior of one issue over the stored history (time rule applied)."""
    index = load_index(store, framework or _group(issue.repo), cache_dir)
    return compute_prior(issue, extraction, None, tree_files, index=index, load=_loader(store))


def localize_with_history(
    localize: Callable[..., Localization], method: str, issue: Issue, extraction: Extraction, category: Category,
    source: Any, top: int, store: Store, cache_dir: Path | None = None,
) -> Localization:
    """A localization that reads the stored history: for the learned ranker (`sftl`) the prior's files are
    candidates and their support a feature it weighs; any other method's ranking gets the prior blended in as a
    tie-break among near-equal suspects (`sftl.history.blend`)."""
    prior = history_prior(store, issue, extraction, source.framework, source.list_files(), cache_dir)
    if method == "sftl":
        return localize(issue, extraction, category, source, top, prior=prior)
    loc = localize(issue, extraction, category, source, max(top, HISTORY_DEPTH))
    return blend(loc, prior, top) if loc.suspects else loc
