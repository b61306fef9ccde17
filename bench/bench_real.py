"""The real-issue benchmark: every labelled real row, composed as a GitHub issue, localized end to end by `sftl locate`.

Rows: ../shared/data/dev/real_localize.jsonl and localize.jsonl (read at run time, never copied).
Each row becomes the REST issue its reporter filed (`bench/real_compose.py`: title, snippet,
output/traceback, environment in the tracker's template; no label field), and is located with
`sftl locate ISSUE.json --offline --json --method M` as a subprocess, per method, two at a time.

Sources are the product's own choice. The bench's SFTL_HOME (`bench/real_sources.py`) holds the
release wheels (`cache/sources/wheels/<fw>-<ver>/`) and the Debian PyTorch trees 1.13.1 and 2.6.0
registered with `sftl sources add`; no `--source-root` is passed, which is what a user with those
sources cached would do. `sftl.sources.open_source` then layers, for a release without a tree of
its own, the Python files of that release's wheel over the nearest registered tree (its C++) —
the "release's Python files + nearest tree for ATen" the figures are meant to measure. The bench
asks the same function (`sftl.sources.sources_for_report`) which files those sources hold,
so a row whose truth file is absent (THC, the torchdynamo repo, TensorFlow C++ kernels: no
TensorFlow C++ tree exists offline) is reported "truth not in sources" and counted apart.

Each locate runs in its own SFTL_HOME whose `cache/` is the shared one (indexes are built once)
and whose store starts empty (or as a copy of the base store with the fix history imported,
when `sftl history` exists), so rows cannot influence each other and runs are repeatable.

Prints top-1/3/5/10 and MRR per framework x category, per method, for all rows, for rows whose
truth is in the sources, and for seen vs inferred truth; a per-row table; the wall time of
`sftl locate` on a stored issue with cached sources. `--json OUT` keeps every row's full ranked
list (scores, reasons, and whether each suspect is a truth file) for re-ranker training.

The composed reports carry no prose beyond the title (the rows keep none that was not written
knowing the fix), so screening sees less than in a real report: `--given-category` stores each
row's labelled category as its screening and measures the localization alone. Report both.

    .venv/bin/python bench/bench_real.py                       # --quick: sftl + paper on 6 rows (make bench)
    .venv/bin/python bench/bench_real.py --methods sftl,paper,vsm,bert --json OUT.json   # the full run
    .venv/bin/python bench/bench_real.py --methods sftl --given-category --compare OUT.json
    .venv/bin/python bench/bench_real.py --methods sftl --category mme --rows 'lr_scheduler|optim'
    .venv/bin/python bench/bench_real.py --methods sftl --locate-env SFTL_RANKER=/models/{safe}.json  # leave-one-out
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "dev"
HISTORY = ROOT.parent / "shared" / "data" / "history" / "pytorch_fixes.jsonl"
ROW_FILES = ("real_localize.jsonl", "localize.jsonl")
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from real_compose import compose_issue, number_anchors, repo_and_number  # noqa: E402
from real_sources import (  # noqa: E402
    DEFAULT_COMPOSITE_DIR,
    DEFAULT_HOME,
    alias_release,
    compose_tree,
    provision,
    sftl_command,
    wheels_dir,
)

ALL_METHODS = ("sftl", "paper", "vsm", "bert")
KS = (1, 3, 5, 10)
QUICK_ROWS = 6


@dataclass
class Row:
    key: str  # "owner/repo#n"
    url: str
    framework: str
    category: str
    truth: tuple[str, ...]
    inferred: bool
    raw: dict[str, Any]
    issue: dict[str, Any] = field(default_factory=dict)
    in_sources: bool | None = None  # None: could not tell
    sources_note: str = ""
    source_root: str | None = None  # --source-root-mode: the composite TREE passed to locate


@dataclass
class Result:
    row: Row
    method: str
    outcome: str  # located | abstained | skipped | error | timeout
    reason: str
    suspects: list[dict[str, Any]]
    category_screened: str
    seconds: float

    @property
    def ranked(self) -> list[str]:
        return [s["path"] for s in self.suspects] if self.outcome == "located" else []

    @property
    def rank(self) -> int | None:
        wanted = set(self.row.truth)
        for i, path in enumerate(self.ranked, 1):
            if path in wanted:
                return i
        return None


def is_inferred(row: dict[str, Any]) -> bool:
    evidence = str(row.get("truth_evidence") or "")
    return bool(row.get("truth_inferred")) or evidence.lower().startswith("inferred")


def load_rows(data: Path = DATA) -> list[Row]:
    raws: list[dict[str, Any]] = []
    for name in ROW_FILES:
        path = data / name
        if path.is_file():
            raws += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    anchors = number_anchors(raws)
    rows = []
    for raw in raws:
        repo, number = repo_and_number(raw["url"])
        rows.append(Row(
            key=f"{repo}#{number}", url=raw["url"], framework=raw.get("framework") or "pytorch",
            category=raw["category"], truth=tuple(raw.get("truth_files") or ()), inferred=is_inferred(raw),
            raw=raw, issue=compose_issue(raw, anchors),
        ))
    return rows


# -- sources ---------------------------------------------------------------------------------


def check_sources(rows: Sequence[Row], home: Path) -> None:
    """Ask the product which sources it would read for each row and whether they hold a truth file."""
    try:
        from sftl.config import load_settings
        from sftl.extract import extract
        from sftl.github import issue_from_json
        from sftl.model import Category
        from sftl.sources import sources_for_report
    except ImportError as exc:  # the tree is mid-edit: locate still runs, the sources column says why it is blank
        for row in rows:
            row.sources_note = f"could not ask sftl for the sources: {exc}"
        return

    settings = load_settings({**os.environ, "SFTL_HOME": str(home)})
    listings: dict[str, set[str]] = {}
    for row in rows:
        issue = issue_from_json(row.issue)
        try:
            extraction = extract(issue)
            env = extraction.environment
            if env.framework and env.version:
                # the user followed sftl's own advice: `sftl sources fetch fw==1.10` files 1.10.0 under 1.10
                alias_release(home, env.framework, env.version)
            found = sources_for_report(extraction, settings, offline=True, needs_cxx=row.category == Category.GCRDE.value,
                                       created_at=issue.created_at)
            source, why = found.provider, found.note
        except Exception as exc:  # noqa: BLE001 - a bench reports what it could not tell
            row.sources_note = f"could not open sources: {exc}"
            continue
        if source is None:
            row.in_sources, row.sources_note = False, why or "no sources"
            continue
        desc = str(getattr(source, "description", ""))
        if desc not in listings:
            listings[desc] = set(source.list_files())
        row.in_sources = any(t in listings[desc] for t in row.truth)
        row.sources_note = desc + (f" ({why})" if why else "")


def _wheel_layer(source: Any) -> Path | None:
    """The first wheel among a source's layers (the report's own release's, where the cache layered one)."""
    stack = [source]
    while stack:
        p = stack.pop(0)
        inner = getattr(p, "providers", None)
        if isinstance(inner, list | tuple):
            stack[:0] = list(inner)
            continue
        if getattr(p, "provider", None) is not None:
            stack.insert(0, p.provider)
            continue
        wheel = getattr(p, "wheel", None)
        if isinstance(wheel, Path):
            return wheel
    return None


def composite_release(row: Row, home: Path) -> tuple[str, Path, str] | None:
    """(release, wheel, how) of the wheel whose Python files stand for the row's reported release in its TREE:
    the wheel of the release sftl reads from its cache (a nightly's release wheel, as the cache layers it);
    with no wheel there (the installed package, a tree of the release), the cached wheel nearest the version read."""
    from sftl.config import load_settings
    from sftl.extract import extract
    from sftl.github import issue_from_json
    from sftl.model import Category
    from sftl.releases import nearest_version
    from sftl.sources import sources_for_report

    settings = load_settings({**os.environ, "SFTL_HOME": str(home)})
    issue = issue_from_json(row.issue)
    extraction = extract(issue)
    try:
        source = sources_for_report(extraction, settings, offline=True, needs_cxx=row.category == Category.GCRDE.value,
                                    created_at=issue.created_at).provider
    except Exception:  # noqa: BLE001 - a bench reports what it could not tell
        source = None
    wheel = _wheel_layer(source) if source is not None else None
    if wheel is not None:
        return wheel.resolve().parent.name.partition("-")[2], wheel.resolve(), "the wheel sftl's cache reads"
    version = extraction.environment.version or (getattr(source, "installed_version", None) if source else None) \
        or (getattr(source, "version", None) if source else None)
    if not version:
        return None
    cached = {f.name.partition("-")[2]: f for f in wheels_dir(home).glob(f"{row.framework}-*")
              if not f.is_symlink() and any(f.glob("*.whl"))}
    best = nearest_version(version.split("+", 1)[0], cached)
    if best is None:
        return None
    return best, sorted(cached[best].glob("*.whl"))[0].resolve(), f"the cached wheel nearest {version}"


def prepare_composites(rows: Sequence[Row], home: Path, composite_dir: Path, with_libraries: bool,
                       whole_wheel: bool = False) -> None:
    """Compose each row's TREE (one per framework x release) and ask the product what it reads from it."""
    from sftl.config import load_settings
    from sftl.extract import extract
    from sftl.github import issue_from_json
    from sftl.model import Category
    from sftl.sources import sources_for_report

    built: dict[tuple[str, str], tuple[Path, dict[str, Any]]] = {}
    empty = Path(tempfile.mkdtemp(prefix="sftl-bench-emptyhome-"))
    settings = load_settings({**os.environ, "SFTL_HOME": str(empty)})
    listings: dict[str, set[str]] = {}
    for row in rows:
        got = composite_release(row, home)
        if got is None:
            row.in_sources, row.sources_note = False, "no wheel to compose a TREE from"
            continue
        release, wheel, how = got
        key = (row.framework, release)
        if key not in built:
            base = composite_dir / f"{row.framework}-{release}"
            dest = base.with_name(base.name + ("-whole" if whole_wheel else "-libs" if with_libraries else ""))
            t0 = time.perf_counter()
            stamp = compose_tree(wheel, row.framework, release, dest, with_libraries=with_libraries,
                                 whole_wheel=whole_wheel, link_from=base.with_name(base.name + "-libs"))
            print(f"  TREE {dest}: {stamp['python_files']} Python files of {wheel.name}"
                  + (f" + C++ of the {stamp['tree_release']} tree" if stamp.get("tree_release") else "")
                  + (f" + {stamp['libraries']} libraries" if with_libraries or whole_wheel else "")
                  + (" (the whole wheel at its wheel paths)" if whole_wheel else "")
                  + f" ({time.perf_counter() - t0:.0f}s)", flush=True)
            built[key] = (dest, stamp)
        dest, stamp = built[key]
        row.source_root = str(dest)
        composed = f"TREE {release} ({how})" + (f" + C++ {stamp['tree_release']}" if stamp.get("tree_release") else "")
        issue = issue_from_json(row.issue)
        try:
            found = sources_for_report(extract(issue), settings, source_root=dest, offline=True,
                                       needs_cxx=row.category == Category.GCRDE.value, created_at=issue.created_at)
            source, why = found.provider, found.note
        except Exception as exc:  # noqa: BLE001
            row.sources_note = f"{composed}: could not open: {exc}"
            continue
        if source is None:
            row.in_sources, row.sources_note = False, f"{composed}: {why or 'no sources'}"
            continue
        desc = str(getattr(source, "description", ""))
        if desc not in listings:
            listings[desc] = set(source.list_files())
        row.in_sources = any(t in listings[desc] for t in row.truth)
        row.sources_note = f"{composed}: {desc}" + (f" ({why})" if why else "")
    shutil.rmtree(empty, ignore_errors=True)


# -- running `sftl locate` --------------------------------------------------------------------


def locate_has(flag: str) -> bool:
    done = subprocess.run([*sftl_command(), "locate", "--help"], capture_output=True, text=True, check=False)
    return flag in done.stdout


def prepare_base_store(work: Path, history: bool) -> Path | None:
    """A store to start each run from: the fix history imported when sftl can import one, else none."""
    if not history or not HISTORY.is_file():
        return None
    done = subprocess.run([*sftl_command(), "history", "--help"], capture_output=True, text=True, check=False)
    if done.returncode != 0 or "import" not in done.stdout:
        return None
    home = work / "base"
    home.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([*sftl_command(), "history", "import", str(HISTORY)], capture_output=True, text=True,
                          env={**os.environ, "SFTL_HOME": str(home)}, check=False)
    db = home / "sftl.db"
    if done.returncode != 0 or not db.is_file():
        print(f"  (history not imported: {done.stderr.strip()[-200:]})", file=sys.stderr)
        return None
    return db


def run_home(work: Path, shared_home: Path, name: str, base_db: Path | None) -> Path:
    """A fresh SFTL_HOME for one locate: the shared cache (sources, indexes), its own store."""
    home = work / name
    home.mkdir(parents=True, exist_ok=True)
    cache = home / "cache"
    if not cache.exists():
        cache.symlink_to((shared_home / "cache").resolve(), target_is_directory=True)
    if base_db is not None:
        shutil.copyfile(base_db, home / "sftl.db")
    return home


def store_given_screening(home: Path, row: Row) -> None:
    """Store the row's labelled category as this issue's screening, so `locate` skips screening (--given-category)."""
    from sftl.github import issue_from_json
    from sftl.model import Category, Screening
    from sftl.store import Store

    issue = issue_from_json(row.issue)
    cat = Category(row.category)
    scores = {"mme": float(cat == Category.MME), "gcrde": float(cat == Category.GCRDE), "other": 0.0}
    with Store(home / "sftl.db") as store:
        store.upsert_issue(issue, row.issue)
        stored = store.get_issue(issue.repo, issue.number) or issue
        store.save_screening(issue.repo, issue.number, Screening(cat, scores, (), method="given",
                             reason="the row's labelled category (bench_real --given-category)"),
                             fingerprint=stored.fingerprint)


def run_locate(row: Row, method: str, work: Path, shared_home: Path, base_db: Path | None,
               extra: Sequence[str], timeout: float, given_category: bool = False,
               locate_env: Sequence[str] = ()) -> Result:
    safe = re.sub(r"[^\w]+", "_", row.key)
    home = run_home(work, shared_home, f"{safe}-{method}", base_db)
    issue_file = home / "issue.json"
    issue_file.write_text(json.dumps(row.issue, indent=1), encoding="utf-8")
    if given_category:
        store_given_screening(home, row)
    argv = [*sftl_command(), "locate", str(issue_file), "--offline", "--json", "--method", method, "--top", "10", *extra]
    if row.source_root:
        argv += ["--source-root", row.source_root]
    started = time.perf_counter()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                              env={**os.environ, **row_env(locate_env, row, method), "SFTL_HOME": str(home)})
    except subprocess.TimeoutExpired:
        return Result(row, method, "timeout", f"no answer in {timeout:.0f}s", [], "", time.perf_counter() - started)
    seconds = time.perf_counter() - started
    try:
        payload = json.loads(done.stdout)
    except ValueError:
        err = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return Result(row, method, "error", f"exit {done.returncode}: {err[:300]}", [], "", seconds)
    return Result(row, method, str(payload.get("outcome")), str(payload.get("reason") or ""),
                  list(payload.get("suspects") or []), str(payload.get("category") or ""), seconds)


def row_env(assignments: Sequence[str], row: Row, method: str) -> dict[str, str]:
    """NAME=VALUE pairs for one locate; {key}, {safe} and {method} are filled in (leave-one-out: a model per row)."""
    safe = re.sub(r"[^\w]+", "_", row.key)
    out = {}
    for item in assignments:
        name, _, value = item.partition("=")
        out[name] = value.replace("{key}", row.key).replace("{safe}", safe).replace("{method}", method)
    return out


def time_stored_locate(home: Path, key: str, repeats: int = 3, extra: Sequence[str] = ()) -> list[float]:
    """Wall seconds of `sftl locate OWNER/REPO#N --offline --json` on an issue already in the store."""
    # as an installed sftl runs: with its bytecode (pip compiles it at install; PYTHONDONTWRITEBYTECODE,
    # set in some shells, would make every run compile every module again), after one warm-up run
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["SFTL_HOME"] = str(home)
    argv = [*sftl_command(), "locate", key, "--offline", "--json", *extra]
    subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        out.append(time.perf_counter() - started)
    return out


# -- figures ----------------------------------------------------------------------------------


def metrics(results: Sequence[Result]) -> dict[str, Any]:
    n = len(results)
    ranks = [r.rank for r in results]
    return {
        "n": n,
        "top": {str(k): (sum(1 for x in ranks if x is not None and x <= k) / n if n else 0.0) for k in KS},
        "mrr": sum(1.0 / x for x in ranks if x) / n if n else 0.0,
        "located": sum(r.outcome == "located" for r in results),
        "abstained": sum(r.outcome == "abstained" for r in results),
        "skipped": sum(r.outcome == "skipped" for r in results),
        "failed": sum(r.outcome not in ("located", "abstained", "skipped") for r in results),
    }


def cells(results: Sequence[Result]) -> dict[str, list[Result]]:
    out: dict[str, list[Result]] = {}
    for r in results:
        for key in (f"{r.row.framework}/{r.row.category}", f"all/{r.row.category}", "all/all"):
            out.setdefault(key, []).append(r)
    order = ["pytorch/gcrde", "tensorflow/gcrde", "all/gcrde", "pytorch/mme", "tensorflow/mme", "all/mme", "all/all"]
    return {k: out[k] for k in order if k in out}


def table(title: str, results: Sequence[Result], methods: Sequence[str]) -> list[str]:
    lines = [title, f"  {'cell':<17}{'method':<7}{'n':>4}  {'top1':>5} {'top3':>5} {'top5':>5} {'top10':>5}  {'MRR':>5}  located/abst/skip/FAILED"]
    for method in methods:
        for name, cell in cells([r for r in results if r.method == method]).items():
            m = metrics(cell)
            t = m["top"]
            lines.append(f"  {name:<17}{method:<7}{m['n']:>4}  {t['1']:>5.2f} {t['3']:>5.2f} {t['5']:>5.2f} {t['10']:>5.2f}"
                         f"  {m['mrr']:>5.2f}  {m['located']}/{m['abstained']}/{m['skipped']}/{m['failed']}")
    return lines


def sources_short(note: str) -> str:
    """'wheel 1.9.0 + tree 1.13.1' from the provider's description (what the product chose to read)."""
    if note.startswith("TREE "):  # --source-root-mode: the composed TREE
        return note.split(":", 1)[0]
    parts = []
    note = re.sub(r"\(later release consulted[^)]*\)", "", note)
    m = re.search(r"(?<!cached )\bwheel (?:torch|tensorflow\w*)-(\d[\w.]*?)-(?:\d+-)?cp", note)
    if m:
        parts.append(f"wheel {m.group(1)}")
    m = re.search(r"nearest cached wheel (?:torch|tensorflow\w*)-(\d[\w.]*?)-(?:\d+-)?cp", note)
    if m:
        parts.append(f"era wheel {m.group(1)}")
    m = re.search(r"registered tree \w+ (\S+)", note)
    if m:
        parts.append(f"tree {m.group(1)}")
    m = re.match(r"local tree (\S+)", note)
    if m:
        parts.append(f"tree {Path(m.group(1)).name} (registered for the release)")
    m = re.search(r"installed \w+ (\S+)", note)
    if m:
        parts.append(f"installed {m.group(1)}")
    if not parts:
        return "none" if note.startswith(("no ", "could not")) else note[:40]
    return " + ".join(parts)


def outcome_text(r: Result) -> str:
    if r.outcome == "located":
        return "located"
    return f"{r.outcome}: {r.reason[:90]}"


def row_table(results: Sequence[Result], methods: Sequence[str]) -> list[str]:
    lines = ["per row (rank of the first truth file; '-' = not in the list; [src-] = truth not in the sources; *inferred truth)"]
    by_row: dict[str, dict[str, Result]] = {}
    for r in results:
        by_row.setdefault(r.row.key, {})[r.method] = r
    for per in by_row.values():
        row = next(iter(per.values())).row
        flags = ("*" if row.inferred else " ") + ("[src-]" if row.in_sources is False else "      ")
        ranks = "  ".join(f"{m}={per[m].rank or '-'}" for m in methods if m in per)
        lines.append(f"  {row.url}  {row.framework[:2]}/{row.category:<5} {flags} {ranks}   [{sources_short(row.sources_note)}]")
        for m in methods:
            if m not in per:
                continue
            r = per[m]
            top3 = ", ".join(p.rsplit("/", 1)[-1] for p in r.ranked[:3]) or "-"
            lines.append(f"      {m:<6} {outcome_text(r):<60.60} top3: {top3}")
    return lines


def result_json(r: Result) -> dict[str, Any]:
    truth = set(r.row.truth)
    return {
        "key": r.row.key, "url": r.row.url, "framework": r.row.framework, "category": r.row.category,
        "method": r.method, "inferred_truth": r.row.inferred, "truth_in_sources": r.row.in_sources,
        "sources": r.row.sources_note, "screened": r.category_screened, "outcome": r.outcome, "reason": r.reason,
        "rank": r.rank, "seconds": round(r.seconds, 2),
        "suspects": [{**s, "is_truth": s.get("path") in truth} for s in r.suspects],
        "issue": r.row.issue,  # the composed report (no label field), to recompute a re-ranker's features
    }


def headline(results: Sequence[Result], timings: dict[str, float], given: bool) -> list[str]:
    """Issue #13's closing figures in one place (all rows; a row whose truth the sources lack is a miss)."""
    def top(method: str, category: str, framework: str | None = None, k: str = "1") -> str:
        cell = [r for r in results if r.method == method and r.row.category == category
                and (framework is None or r.row.framework == framework)]
        return f"{metrics(cell)['top'][k]:.2f}" if cell else "n/a"

    mode = "screening given" if given else "end to end"
    lines = [f"HEADLINE ({mode}; done when: GCRDE top-1 >= 0.60, top-5 >= 0.85; MME top-1 >= 0.75 and >= paper; <= 1 s)"]
    if any(r.method == "sftl" for r in results):
        lines.append(f"  GCRDE sftl top-1 {top('sftl', 'gcrde')} (PyTorch {top('sftl', 'gcrde', 'pytorch')}, "
                     f"TensorFlow {top('sftl', 'gcrde', 'tensorflow')}), top-5 {top('sftl', 'gcrde', k='5')} "
                     f"(PyTorch {top('sftl', 'gcrde', 'pytorch', '5')}, TensorFlow {top('sftl', 'gcrde', 'tensorflow', '5')})")
        lines.append(f"  MME   sftl top-1 {top('sftl', 'mme')}" + (f" vs paper {top('paper', 'mme')}"
                                                                    if any(r.method == "paper" for r in results) else ""))
    if timings:
        lines.append("  stored-issue locate " + ", ".join(f"{k} {v:.2f}s" for k, v in timings.items()))
    return lines


def compare_lines(results: Sequence[Result], previous: Path) -> list[str]:
    """Rows whose rank moved since an earlier `--json` run (same method): what a change won and lost."""
    try:
        old = {(r["key"], r["method"]): r for r in json.loads(previous.read_text(encoding="utf-8"))["results"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [f"cannot compare with {previous}: {exc}"]
    better: list[str] = []
    worse: list[str] = []
    for r in results:
        before = old.get((r.row.key, r.method))
        if before is None:
            continue
        was, now = before.get("rank"), r.rank
        if was == now:
            continue
        line = f"  {r.method:<6} {r.row.key:<32} {was or '-'} -> {now or '-'}"
        (better if (now or 99) < (was or 99) else worse).append(line)
    return ([f"compared with {previous}: {len(better)} rows better, {len(worse)} worse"]
            + (["better:", *better] if better else []) + (["worse:", *worse] if worse else []))


# -- main -------------------------------------------------------------------------------------


def select(rows: Iterable[Row], pattern: str | None, category: str | None) -> list[Row]:
    out = []
    for row in rows:
        if category and row.category != category:
            continue
        if pattern and not re.search(pattern, f"{row.url} {row.key} {row.raw.get('title', '')}", re.I):
            continue
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default=None, help=f"comma-separated (default {','.join(ALL_METHODS)}; --quick: sftl,paper)")
    ap.add_argument("--rows", metavar="PATTERN", help="only rows whose URL or title matches this regex")
    ap.add_argument("--category", choices=("gcrde", "mme"))
    ap.add_argument("--quick", action="store_true",
                    help=f"sftl and paper on {QUICK_ROWS} rows (the default with no arguments, as `make bench` runs it)")
    ap.add_argument("--json", metavar="OUT", type=Path, help="write every row's result (full ranked lists) here")
    ap.add_argument("--home", type=Path, default=DEFAULT_HOME, help=f"the provisioned SFTL_HOME (default {DEFAULT_HOME})")
    ap.add_argument("--no-history", action="store_true", help="no fix history in the store (passed to locate when it has the flag)")
    ap.add_argument("--jobs", type=int, default=2, choices=(1, 2), help="parallel locates (at most 2)")
    ap.add_argument("--deadline", type=float, default=0.0, metavar="SECONDS",
                    help="start no locate after this long; the figures say how many were not run (default: none)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per locate (default 600)")
    ap.add_argument("--warm-timeout", type=float, default=1800.0,
                    help="seconds for the first locate over each source, which builds its indexes (default 1800)")
    ap.add_argument("--given-category", action="store_true",
                    help="store each row's labelled category as its screening: measures localization alone")
    ap.add_argument("--locate-env", action="append", default=[], metavar="NAME=VALUE",
                    help="set for each locate; {key}/{safe}/{method} are filled in, e.g. a leave-one-out model "
                         "SFTL_X=/models/{safe}.json (repeatable)")
    ap.add_argument("--compare", metavar="PREV.json", type=Path, help="list the rows whose rank moved since that --json run")
    ap.add_argument("--keep", metavar="DIR", type=Path, help="keep the per-run homes and issue files here")
    ap.add_argument("--source-root-mode", action="store_true",
                    help="as issue #13's evaluator runs sftl: each row's TREE composed under --composite-dir (the "
                         "release's wheel's Python files + the nearest Debian tree's C++, linked) passed as "
                         "--source-root, in a home whose cache starts empty (no wheels, no trees)")
    ap.add_argument("--with-libraries", action="store_true",
                    help="--source-root-mode: the TREE also holds the wheel's compiled libraries (*.so*)")
    ap.add_argument("--whole-wheel", action="store_true",
                    help="--source-root-mode: the TREE holds the whole wheel at its wheel paths (headers under "
                         "torch/include/, torchgen/packaged/, libraries), as an unzipped wheel")
    ap.add_argument("--composite-dir", type=Path, default=DEFAULT_COMPOSITE_DIR,
                    help=f"where --source-root-mode composes the TREEs (default {DEFAULT_COMPOSITE_DIR})")
    argv = sys.argv[1:] if argv is None else argv
    args = ap.parse_args(argv)
    if not argv:
        args.quick = True
        print("bench_real --quick (no arguments, as `make bench` runs it); any option, e.g. --methods, runs every row")

    if not DATA.is_dir():
        print(f"bench_real: no {DATA} (the shared data set); nothing to measure")
        return 0
    methods = [m.strip() for m in (args.methods or ("sftl,paper" if args.quick else ",".join(ALL_METHODS))).split(",") if m.strip()]
    rows = select(load_rows(), args.rows, args.category)
    if not rows:
        print("bench_real: no row matches")
        return 1

    got = provision(args.home)
    print(f"SFTL_HOME {got['home']}: trees {', '.join(got['trees']) or 'none'}; {len(got['wheels'])} wheels")
    check_sources(rows, args.home)
    if (args.with_libraries or args.whole_wheel) and not args.source_root_mode:
        ap.error("--with-libraries and --whole-wheel need --source-root-mode")
    if args.source_root_mode:
        prepare_composites(rows, args.home, args.composite_dir, args.with_libraries, args.whole_wheel)
    if args.quick and not args.rows:
        # a spread: each category, rows whose truth the sources hold, every other one (several releases)
        held = [r for r in rows if r.in_sources]
        rows = [r for r in held if r.category == "gcrde"][::2][:QUICK_ROWS // 2] + \
            [r for r in held if r.category == "mme"][::2][:QUICK_ROWS // 2]

    extra: list[str] = []
    history_flag = locate_has("--no-history")
    if args.no_history and history_flag:
        extra.append("--no-history")
    work = args.keep or Path(tempfile.mkdtemp(prefix="sftl-bench-real-"))
    work.mkdir(parents=True, exist_ok=True)
    base_db = prepare_base_store(work, history=not args.no_history)
    # the evaluator's home: nothing cached (no wheels, no trees); its cache is shared by the run's locates, so
    # the indexes sftl builds of a TREE are built once, as in one evaluator home
    run_home_of = args.home
    if args.source_root_mode:
        run_home_of = work / "evaluator-home"
        (run_home_of / "cache").mkdir(parents=True, exist_ok=True)
    print(f"{len(rows)} rows x {len(methods)} methods ({', '.join(methods)}); history "
          f"{'imported' if base_db else 'none'}{'; --no-history passed' if '--no-history' in extra else ''}", flush=True)

    # the first locate over a tree builds its index: warm each source once, then two at a time
    jobs = [(row, m) for m in methods for row in rows]
    results: list[Result] = []
    started = time.perf_counter()
    seen_sources: set[tuple[str, str]] = set()
    warm: list[tuple[Row, str]] = []
    rest: list[tuple[Row, str]] = []
    for row, m in jobs:
        tag = (row.sources_note, m)
        (rest if tag in seen_sources else warm).append((row, m))
        seen_sources.add(tag)
    not_run: list[tuple[Row, str]] = []

    first_over_source = {(row.key, m) for row, m in warm}

    def job(row_method: tuple[Row, str]) -> Result | None:
        row, method = row_method
        if args.deadline and time.perf_counter() - started > args.deadline:
            not_run.append(row_method)
            return None
        # the first locate over a source builds its indexes (BERT embeds a whole release): it gets longer
        limit = args.warm_timeout if (row.key, method) in first_over_source else args.timeout
        return run_locate(row, method, work, run_home_of, base_db, extra, limit, args.given_category, args.locate_env)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for batch in (warm, rest):
            for r in pool.map(job, batch):
                if r is None:
                    continue
                results.append(r)
                print(f"  {r.method:<6} {r.row.key:<32} rank {r.rank or '-':>2}  {r.seconds:5.1f}s  {outcome_text(r)[:70]}", flush=True)
        # a crash of sftl itself (no JSON; e.g. a module of the shared tree caught mid-edit) is retried once
        failed = [i for i, r in enumerate(results) if r.outcome == "error"]
        if failed:
            time.sleep(5)
            retried = list(pool.map(lambda i: job((results[i].row, results[i].method)), failed))
            for i, r in zip(failed, retried, strict=True):
                if r is not None:
                    results[i] = r
            still = sum(1 for i in failed if results[i].outcome == "error")
            print(f"  retried {len(failed)} failed locates once: {len(failed) - still} recovered, {still} still failing", flush=True)
    elapsed = time.perf_counter() - started
    if not_run:
        print(f"  --deadline {args.deadline:.0f}s: {len(not_run)} locates not run, left out of every figure below: "
              + ", ".join(f"{m} {r.key}" for r, m in not_run[:12]) + (" ..." if len(not_run) > 12 else ""))
    order = {(row.key, m): i for i, (row, m) in enumerate((row, m) for row in rows for m in methods)}
    results.sort(key=lambda r: order[(r.row.key, r.method)])

    out: list[str] = ["", f"bench_real: {len(rows)} real rows ({', '.join(ROW_FILES)}), sftl locate --offline --json, "
                      f"{elapsed:.0f}s for {len(results)} locates"
                      + ("; screening GIVEN (the labelled category): localization alone" if args.given_category
                         else "; end to end (screening included)")
                      + ("; SOURCE-ROOT MODE (evaluator: --source-root TREE per release, composed under "
                         f"{args.composite_dir}{', with the wheels libraries' if args.with_libraries else ''}"
                         f"{', the whole wheel unzipped' if args.whole_wheel else ''}; "
                         "empty cache, no wheels or trees)" if args.source_root_mode else "; sources: sftl's cache")]
    out += table("all rows (a row whose truth the sources lack counts as a miss)", results, methods)
    in_sources = [r for r in results if r.row.in_sources]
    out += table(f"rows whose truth file is in the sources ({len({r.row.key for r in in_sources})} rows)", in_sources, methods)
    out += table("rows with seen truth", [r for r in results if not r.row.inferred], methods)
    out += table("rows with inferred truth", [r for r in results if r.row.inferred], methods)
    for method in methods[:1] if not args.given_category else ():
        for category in ("gcrde", "mme"):
            screened: dict[str, int] = {}
            for r in results:
                if r.method == method and r.row.category == category:
                    screened[r.category_screened or r.outcome] = screened.get(r.category_screened or r.outcome, 0) + 1
            if screened:
                out.append(f"screening ({method}): {category} rows screened as "
                           + ", ".join(f"{k} {v}" for k, v in sorted(screened.items(), key=lambda kv: -kv[1])))
    missing = [row for row in rows if row.in_sources is False]
    out.append(f"truth not in sources: {len(missing)} rows")
    for row in missing:
        out.append(f"  {row.url}  {', '.join(row.truth)[:80]}  (sources: {row.sources_note[:90]})")
    out += row_table(results, methods)

    # CLI wall time on a stored issue with cached sources (issue #13 target: <= 1 s), one row per category
    timings: dict[str, float] = {}
    start = []
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([*sftl_command(), "--version"], capture_output=True, check=False)
        start.append(time.perf_counter() - t0)
    out.append(f"CLI start alone (sftl --version): median {statistics.median(start):.2f}s; load average "
               f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs (timings inflate under load)")
    for category in ("gcrde", "mme"):
        sample = next((r for r in results if r.method == "sftl" and r.outcome == "located" and r.row.category == category), None)
        if sample is None:
            continue
        safe = re.sub(r"[^\w]+", "_", sample.row.key)
        times = time_stored_locate(work / f"{safe}-sftl", sample.row.key,
                                   extra=["--source-root", sample.row.source_root] if sample.row.source_root else [])
        timings[sample.row.key] = statistics.median(times)
        out.append(f"sftl locate {sample.row.key} --offline --json ({category}), stored issue, cached sources: "
                   f"median {statistics.median(times):.2f}s wall, CLI start included "
                   f"(runs {', '.join(f'{t:.2f}' for t in times)}; target <= 1 s)")
    out += headline(results, timings, args.given_category)
    crashed = [r for r in results if r.outcome not in ("located", "abstained", "skipped")]
    if crashed:
        out.append(f"WARNING: {len(crashed)} locates FAILED (sftl crashed or timed out; counted as misses), e.g. "
                   f"{crashed[0].method} {crashed[0].row.key}: {crashed[0].reason[:160]}")
    if args.compare is not None:
        out += compare_lines(results, args.compare)
    print("\n".join(out))
    if args.json:
        args.json.write_text(json.dumps({
            "methods": methods, "history": bool(base_db), "elapsed_s": round(elapsed, 1),
            "given_category": args.given_category, "stored_locate_s": timings,
            "source_root_mode": args.source_root_mode, "with_libraries": args.with_libraries,
            "whole_wheel": args.whole_wheel,
            "not_run": [{"key": r.key, "method": m} for r, m in not_run],
            "results": [result_json(r) for r in results],
        }, indent=1), encoding="utf-8")
        print(f"wrote {args.json}")
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
