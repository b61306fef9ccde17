"""`sftl eval`: screen and localize every issue of a label file with each method, and report the metrics.

Per-row work (intake, extraction, screening, localization with each method) is composed here;
the metrics and the report's tables are computed by `sftl.evaluate`. Every (issue, method)
result is appended to `<out>/checkpoint.jsonl` as soon as it exists, so an interrupted run picks
up where it stopped.
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sftl.cli import (
    EXIT_INTERRUPTED,
    EXIT_NO_RESULT,
    EXIT_OK,
    Context,
    add_common,
    check_source_root,
    hidden_alias,
    positive_int,
)
from sftl.errors import InputError

if TYPE_CHECKING:
    from sftl.config import Settings
    from sftl.evaluate import LabelRow, RankedResult, SkippedRow
    from sftl.localize.functions.features import FunctionEvidence
    from sftl.model import Extraction, Issue
    from sftl.sources import SourceProvider

KEPT_CANDIDATES = 400  # candidates whose features --keep-features stores per report (all sftl gathers, in practice)
METHODS = ("sftl", "paper", "vsm", "bert", "bm25")
CHECKPOINT = "checkpoint.jsonl"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add this module's sub-commands to the `sftl` parser."""
    p = sub.add_parser(
        "eval",
        help="evaluate screening and localization on a labelled issue set",
        description=(
            "Each line of LABELS.jsonl: {\"url\": ..., \"category\": \"mme|gcrde|other\", \"truth_files\": [...]} "
            "plus optionally \"issue\" (a GitHub REST issue object, so no network is needed), \"source_root\" "
            "(a source tree for that issue), \"framework\" and \"version\". Writes rows.csv, summary.json, "
            "report.md and PNG plots under --out; a rerun with the same --out resumes."
        ),
    )
    p.add_argument("labels", metavar="LABELS", help="the label file (JSONL) or a folder of Denchmark issue JSON")
    p.add_argument("--format", default="auto", choices=("auto", "sftl", "denchmark", "swebench", "rows"),
                   help="the labels' format: sftl's JSONL, Denchmark's per-issue JSON folder, SWE-bench-style JSONL, "
                   "or report rows (url, title, body, truth_files); default: sniffed")
    p.add_argument("--split-date", metavar="DATE", type=_date,
                   help="also report rows filed before DATE and from DATE on apart (a learned part trained on the "
                   "earlier ones is judged on the later ones only)")
    p.add_argument("--source-root", metavar="DIR", help="source tree for rows that name none")
    p.add_argument(
        "--method", dest="methods", default="sftl,paper,vsm,bert", type=_methods, metavar="M[,M...]",
        help=f"localizers to compare, comma-separated (default: all of {','.join(METHODS)})",
    )
    hidden_alias(p, "--methods", "methods", type=_methods)
    p.add_argument("--jobs", type=positive_int, default=1, metavar="N", help="parallel worker processes (default 1)")
    p.add_argument("--out", metavar="DIR", help="output directory (default: <home>/eval/<label file name>)")
    p.add_argument("--top", type=positive_int, default=10, metavar="K", help="suspects kept per method (default 10)")
    p.add_argument("--paper-k", type=positive_int, default=1, metavar="K",
                   help="cut-off of the study's accuracy/precision/recall/F1 (default 1)")
    p.add_argument(
        "--screeners", default="keywords", type=_screeners, metavar="S[,S...]",
        help="screeners to score: keywords (the published one; default), learned (5-fold cross-validated: "
        "five trainings, a few seconds on a few hundred issues)",
    )
    p.add_argument("--history", action="store_true",
                   help="also score each method with the history prior of the store's fix records (M+history), "
                   "time-respecting: only fixes dated before each issue was filed count")
    p.add_argument("--keep-features", action="store_true",
                   help="store every candidate's features of sftl's ranking in the checkpoint, so `sftl model fit "
                   "OUT` can train the ranker on these rows")
    p.add_argument("--restart", action="store_true", help="discard the checkpoint in --out and start over")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--json", action="store_true", help="print summary.json instead of the markdown report")
    add_common(p)
    p.set_defaults(handler=run)


def _real_date(day: str) -> bool:
    """'2019-01-01' or '2019-01' naming a day or month that exists."""
    import datetime

    try:
        datetime.date.fromisoformat(day if len(day) == 10 else f"{day}-01")
    except ValueError:
        return False
    return len(day) in (7, 10)


def parse_split_date(text: str, sets: tuple[str, ...] = ()) -> dict[str, str]:
    """`--split-date` for a caller outside argparse: a bad date is an InputError. `sets`: names that may take a
    date of their own besides the frameworks (`sftl model fit`'s evaluation folders: a set dated apart)."""
    try:
        return _date(text, sets)
    except argparse.ArgumentTypeError as exc:
        raise InputError(str(exc)) from None


def _date(text: str, sets: tuple[str, ...] = ()) -> dict[str, str]:
    """'2019-01-01' (every framework) or 'tensorflow=2019-01-01,pytorch=2025-07-01' -> {framework or '*': date}."""

    out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        fw, _, day = part.rpartition("=")
        if not _real_date(day) or fw not in ("", "pytorch", "tensorflow", *sets):
            raise argparse.ArgumentTypeError(f"not a split date {part!r}; write YYYY-MM-DD or tensorflow=YYYY-MM-DD,...")
        out[fw or "*"] = day
    if not out:
        raise argparse.ArgumentTypeError("no split date given")
    return out


def _screeners(text: str) -> list[str]:
    names = list(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    bad = [m for m in names if m not in ("keywords", "learned")]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown screener(s) {', '.join(bad) or '(none)'}; choose keywords,learned")
    return names


def _methods(text: str) -> list[str]:
    names = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in names if m not in METHODS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown method(s) {', '.join(bad) or '(none)'}; choose from {','.join(METHODS)}")
    return list(dict.fromkeys(names))


# -- per-row work ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    """One (issue, method) localization, everything a worker process needs."""

    key: str
    method: str
    issue: Issue
    extraction: Extraction
    category: str
    framework: str | None
    version: str | None
    source_root: str | None
    top: int
    created_at: str = ""
    keep_features: bool = False
    # the functions the fix changed per truth file: sftl's and BM25's ranks of them are kept (#32)
    truth_functions: tuple[tuple[str, tuple[str, ...]], ...] = ()


def _worker_init(use_torch: bool, threads: int, parent_pid: int | None = None) -> None:
    if parent_pid is not None:  # a kill -9 of `sftl eval --jobs N` takes its workers with it
        from sftl.triage import die_with_parent

        die_with_parent(parent_pid)
    if use_torch:  # N workers on N cores: one thread each, not N each
        import torch

        torch.set_num_threads(max(1, threads))


@functools.lru_cache(maxsize=8)
def _local_tree(root: str, framework: str, version: str | None) -> SourceProvider:
    """One provider per tree and process: listing a tree costs up to a second, a task milliseconds."""
    from sftl.sources import LocalTree

    return LocalTree(root, framework, version)


def localize_task(task: Task, settings: Settings) -> dict[str, Any]:
    """Open the sources and run one localizer; any failure is a value (outcome + reason)."""
    from sftl.errors import SftlError
    from sftl.localize import get_localizer
    from sftl.model import Category, Environment
    from sftl.sources import sources_for_report

    started = time.perf_counter()
    env: Environment = task.extraction.environment
    if task.framework:
        env = replace(env, framework=task.framework)
    if task.version:
        env = replace(env, version=task.version)
    extraction = replace(task.extraction, environment=env)
    note = ""
    result: dict[str, Any]
    source: SourceProvider | None
    try:
        if task.source_root and env.framework:
            source = _local_tree(task.source_root, env.framework, env.version)
        else:  # the release's Python files, and for any report but a missing-module error the C++ under them
            found = sources_for_report(extraction, settings, source_root=task.source_root, offline=settings.offline,
                                       needs_cxx=task.category != "mme", created_at=task.created_at or None)
            source, note = found.provider, found.note
        if source is None:
            result = {"outcome": "skipped", "reason": note, "suspects": []}
        else:
            method, _, history = task.method.partition("+")  # "sftl+history": the prior blended in (#18)
            keep = task.keep_features and method == "sftl"
            depth = KEPT_CANDIDATES if keep else max(task.top, 30) if history else task.top
            if history:  # "sftl+history": the stored history's prior, a feature of the learned ranker (#18, #27)
                from sftl.history_io import localize_with_history
                from sftl.store import Store

                with Store(settings.db_path) as store:
                    loc = localize_with_history(get_localizer(method), method, task.issue, extraction,
                                                Category(task.category), source, depth, store, settings.cache_dir)
            else:
                loc = get_localizer(method)(task.issue, extraction, Category(task.category), source, depth)
            result = {
                "outcome": loc.outcome.value,
                "reason": loc.reason + (f" ({note})" if note else ""),
                "suspects": [[s.path, s.score, s.side.value if s.side else None] for s in loc.suspects[: task.top]],
                "source": source.description,
            }
            if keep:  # every candidate's features, for `sftl model fit`
                result["candidates"] = [[s.path, s.features] for s in loc.suspects]
            if method == "sftl" and task.truth_functions:
                evidence = report_evidence(task, extraction, source)
                result["functions"] = function_ranks(task, evidence, loc.suspects, source)
                if keep:  # every truth file's functions with their features, for `sftl model fit --functions`
                    result["function_groups"] = function_groups(task, evidence, source)
    except SftlError as exc:
        result = {"outcome": "skipped", "reason": str(exc), "suspects": []}
    except Exception as exc:  # a bug in one localizer must not end the run: recorded and reported as an error
        result = {"outcome": "skipped", "reason": f"error: {type(exc).__name__}: {exc}"[:500], "suspects": [],
                  "error": True}
    result.update(key=task.key, method=task.method, top=task.top, seconds=round(time.perf_counter() - started, 3))
    return result


def report_evidence(task: Task, extraction: Extraction, source: SourceProvider) -> FunctionEvidence:
    """The report read for ranking functions, once per task."""
    from sftl.localize.candidates.report import read_report
    from sftl.localize.functions.features import function_evidence

    framework = extraction.environment.framework or source.framework
    return function_evidence(read_report(task.issue, extraction, framework), task.issue, extraction)


def function_ranks(task: Task, evidence: FunctionEvidence, suspects: Sequence[Any],
                   source: SourceProvider) -> list[list[Any]]:
    """[path, file rank, sftl's rank of a changed function, BM25-over-functions' rank] for each truth file with
    known functions among the first five suspects (a rank is null beyond the ten functions named)."""
    from sftl.evaluate_functions import FILE_DEPTH, function_rank
    from sftl.localize.functions import rank_functions

    out: list[list[Any]] = []
    paths = [s.path for s in suspects[:FILE_DEPTH]]
    for path, names in task.truth_functions:
        if path not in paths:
            out.append([path, None, None, None])
            continue
        suspect = suspects[paths.index(path)]
        text = source.read_text(path) or ""
        bm25 = rank_functions(evidence, path, text, model=None)
        out.append([path, paths.index(path) + 1, function_rank([f.name for f in suspect.functions], names),
                    function_rank([f.name for f in bm25], names)])
    return out


def function_groups(task: Task, evidence: FunctionEvidence, source: SourceProvider) -> dict[str, Any]:
    """Each truth file with known changed functions, read at the report's release: its functions' names, feature
    rows and which were changed (a file the release lacks, or whose functions it has under no changed name, is left
    out), with the features' names."""
    from sftl.errors import SftlError
    from sftl.evaluate_function_ranker import labelled_functions
    from sftl.localize.functions.features import FEATURES

    groups: list[list[Any]] = []
    for path, names in task.truth_functions:
        try:
            found = labelled_functions(evidence, path, source.read_text(path) or "", names)
        except SftlError:
            continue
        if found is not None:
            rows, labels = found
            groups.append([path, [r.span.name for r in rows], [[round(v, 5) for v in r.vector()] for r in rows],
                           labels])
    return {"features": list(FEATURES), "groups": groups}


# -- checkpoint --------------------------------------------------------------------------------


def read_checkpoint(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """Finished (row key, method) results; a torn last line (an interrupted write) is ignored."""
    done: dict[tuple[str, str], dict[str, Any]] = {}
    if not path.exists():
        return done
    text = path.read_text(encoding="utf-8", errors="replace")
    if text and not text.endswith("\n"):
        # cut the torn tail so the next append starts on a line of its own
        text = text[: text.rfind("\n") + 1]
        path.write_text(text, encoding="utf-8")
    for line in text.splitlines():
        try:
            obj = json.loads(line)
            done[(obj["key"], obj["method"])] = obj
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
    return done


# -- the command -------------------------------------------------------------------------------


def _no_usable_rows(labels_path: Path, skipped: Sequence[Any]) -> str:
    """One line: the label file gave nothing to evaluate, and the first reason why."""
    if not skipped:
        return f"no label line in {labels_path} (the file is empty)"
    first = skipped[0]
    more = f" (and {len(skipped) - 1} more skipped)" if len(skipped) > 1 else ""
    return f"no usable label line in {labels_path}: line {first.line}: {first.reason}{more}"


def run(args: argparse.Namespace, ctx: Context) -> int:
    from concurrent.futures.process import BrokenProcessPool

    from sftl.errors import SftlError
    from sftl.evaluate import RankedResult, parse_labels, render_markdown, summarize
    from sftl.evaluate_formats import label_lines

    labels_path = Path(args.labels)
    if not labels_path.exists():
        raise InputError(f"cannot read {labels_path}: No such file or directory")
    lines = label_lines(labels_path, args.format)
    if args.source_root:
        check_source_root(args.source_root)
    if any(m.partition("+")[0] == "sftl" for m in args.methods):
        from sftl.localize.candidates.locate import check_configured_models

        check_configured_models(ctx.settings)  # before any row is localized with a model that is not there
    out = Path(args.out) if args.out else ctx.settings.home / "eval" / labels_path.stem
    if out.exists() and not out.is_dir():
        raise InputError(f"cannot create the report directory {out}: it is a file")
    rows, skipped = parse_labels(lines)
    if not rows:
        raise InputError(_no_usable_rows(labels_path, skipped))
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # --out names a file, or a place we may not write
        raise InputError(f"cannot create the report directory {out}: {exc.strerror or exc}") from None
    checkpoint = out / CHECKPOINT
    if args.restart and checkpoint.exists():
        checkpoint.unlink()
    console = ctx.console(stderr=True)
    if getattr(args, "history", False):
        args.methods = [*args.methods, *(f"{m}+history" for m in args.methods if "+" not in m)]

    issues = _resolve_issues(rows, skipped, ctx, labels_path.parent)
    rows = [r for r in rows if r.key in issues]
    if not rows:
        raise InputError(_no_usable_rows(labels_path, skipped))
    screened = _screen(rows, issues, args.screeners)
    # a labelled row is localized as its label says; an unlabelled one as sftl's screening says
    scored_as = {r.key: r.category or screened[r.key]["screeners"][args.screeners[0]]["predicted"] for r in rows}
    scored_as = {k: (v if v in ("mme", "gcrde", "other") else "other") for k, v in scored_as.items()}

    base_root = str(Path(args.source_root).resolve()) if args.source_root else None
    tasks = [
        Task(r.key, m, issues[r.key][0], issues[r.key][1], scored_as[r.key], r.framework, r.version,
             _root(r, labels_path.parent) or base_root, args.top, r.created_at or issues[r.key][0].created_at,
             args.keep_features, tuple(sorted(r.truth_functions.items())))
        for r in rows if r.scored_for_localization for m in args.methods
    ]
    done = read_checkpoint(checkpoint)
    # a result kept for another --top is not this run's answer
    todo = [t for t in tasks if done.get((t.key, t.method), {}).get("top") != t.top
            or (t.keep_features and t.method == "sftl" and "candidates" not in done[(t.key, t.method)])
            or (t.truth_functions and t.method == "sftl" and "functions" not in done[(t.key, t.method)]
                and done[(t.key, t.method)].get("outcome") == "located")
            or (t.truth_functions and t.keep_features and t.method == "sftl"
                and "function_groups" not in done[(t.key, t.method)] and done[(t.key, t.method)].get("source"))]
    # rows sharing a source tree run together, so each worker builds an index once
    todo.sort(key=lambda t: (t.source_root or "", t.framework or "", t.version or "", t.method, t.key))
    if len(tasks) - len(todo):
        ctx.err.write(f"resuming: {len(tasks) - len(todo)} of {len(tasks)} localizations already in {checkpoint}\n")
    try:
        for result in _progress(_execute(todo, args, ctx.settings), len(todo), console):
            with checkpoint.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(result) + "\n")
            done[(result["key"], result["method"])] = result
    except KeyboardInterrupt:
        ctx.err.write(f"sftl: interrupted; {len(done)} results kept in {checkpoint}; run the same command to resume\n")
        return EXIT_INTERRUPTED
    except BrokenProcessPool:
        raise SftlError(
            f"a worker process died (killed, or out of memory?); {len(done)} results kept in {checkpoint}; "
            "rerun the same command to resume (fewer --jobs if memory is short)"
        ) from None

    by_key = {r.key: r for r in rows}
    learned_files, learned_functions = learned_reports(ctx.settings)
    results: list[RankedResult] = []
    for t in tasks:
        res = done[(t.key, t.method)]
        row = by_key[t.key]
        results.append(RankedResult(
            key=t.key, method=t.method, framework=screened[t.key]["framework"], category=t.category,
            truth=row.truth_files, ranked=tuple(s[0] for s in res["suspects"]), outcome=res["outcome"],
            period=split_period(t.created_at, args.split_date, screened[t.key]["framework"]), source=row.source,
            learned=row.url in learned_files,
        ))
    split = ", ".join(f"{'' if fw == '*' else fw + ' '}{day}" for fw, day in (args.split_date or {}).items()) or None
    summary = summarize(list(screened.values()), results, skipped, args.methods, args.paper_k, max_k=args.top,
                        screeners=args.screeners, split_date=split)
    summary["labels"] = str(labels_path)
    summary["errors"] = [
        {"line": by_key[t.key].line, "method": t.method, "reason": done[(t.key, t.method)]["reason"]}
        for t in tasks if done[(t.key, t.method)].get("error")
    ]
    summary["functions"] = function_figures(tasks, done, args.split_date,
                                            frozenset(r.key for r in rows if r.url in learned_functions))
    summary["learned_from"] = {"file_ranker": sum(r.url in learned_files for r in rows if r.scored_for_localization),
                               "function_ranker": sum(r.url in learned_functions for r in rows if r.truth_functions)}
    summary["seconds_per_method"] = {
        m: round(sum(done[(t.key, m)]["seconds"] for t in tasks if t.method == m), 2) for m in args.methods
    }
    _write_outputs(out, rows, skipped, screened, results, done, summary, args)
    report = render_markdown(summary, title=f"sftl evaluation of {labels_path.name}")
    (out / "report.md").write_text(report, encoding="utf-8")
    if args.json:
        ctx.print_json(summary)
    else:
        ctx.out.write(report)
    ctx.err.write(f"wrote {out}/report.md, summary.json, rows.csv{'' if args.no_plots else ', topk.png, screening.png'}\n")
    if not screened:
        ctx.err.write(f"sftl: no usable label line in {labels_path} ({len(skipped)} skipped; see the report)\n")
        return EXIT_NO_RESULT
    return EXIT_OK


def split_period(created_at: str, split: dict[str, str] | None, framework: str) -> str:
    """'before' / 'after' the framework's split date ('' without one; a row with no date counts as before)."""
    day = (split or {}).get(framework) or (split or {}).get("*")
    if not day:
        return ""
    return "after" if created_at and created_at[: len(day)] >= day else "before"


def _root(row: LabelRow, base: Path) -> str | None:
    if not row.source_root:
        return None
    root = Path(row.source_root).expanduser()
    return str(root if root.is_absolute() else (base / root).resolve())


def _resolve_issues(
    rows: list[LabelRow], skipped: list[SkippedRow], ctx: Context, base: Path
) -> dict[str, tuple[Issue, Extraction]]:
    """Issue and extraction per row key; an unfetchable issue or a bad source root becomes a skipped row."""
    from sftl.errors import SftlError
    from sftl.evaluate import SkippedRow
    from sftl.extract import extract
    from sftl.github import issue_from_json

    found: dict[str, tuple[Issue, Extraction]] = {}
    store = None
    try:
        for row in rows:
            root = _root(row, base)
            if root is not None:
                try:  # an empty or unrelated tree skips its row with the reason, as --source-root is refused
                    check_source_root(root, flag="source_root")
                except InputError as exc:
                    skipped.append(SkippedRow(row.line, row.url, str(exc)))
                    continue
            try:
                if row.issue is not None:
                    issue = issue_from_json(row.issue)
                else:
                    from sftl.intake import load_issue
                    from sftl.store import Store

                    store = store or Store(ctx.settings.db_path)
                    issue = load_issue(row.url, ctx.settings, store)
            except SftlError as exc:
                skipped.append(SkippedRow(row.line, row.url, f"issue not available: {exc}"))
                continue
            found[row.key] = (issue, extract(issue))
    finally:
        if store is not None:
            store.close()
    skipped.sort(key=lambda s: s.line)
    return found


def _screen(
    rows: list[LabelRow], issues: dict[str, tuple[Issue, Extraction]], screeners: Sequence[str], folds: int = 5
) -> dict[str, dict[str, Any]]:
    """Screen every row with each screener.

    keywords: the published keyword screener, its IDF fitted on this label file's texts (labels unused).
    learned: the learned screener, scored out-of-fold (k-fold cross-validation over the label file),
    so no row is screened by a model that saw its label.
    """
    from sftl.evaluate import framework_of_repo
    from sftl.screen import LearnedScreener, default_screener, prepare

    if not rows:
        return {}
    items = [issues[r.key][0] for r in rows]
    extractions = [issues[r.key][1] for r in rows]
    docs = [prepare(i, e) for i, e in zip(items, extractions, strict=True)]
    out: dict[str, dict[str, Any]] = {}
    for row, issue, ex in zip(rows, items, extractions, strict=True):
        fw = row.framework or framework_of_repo(issue.repo) or ex.environment.framework or "unknown"
        out[row.key] = {"key": row.key, "line": row.line, "url": row.url, "framework": fw,
                        "category": row.category, "screeners": {}}
    for name in screeners:
        results: list[Any] | None
        if name == "keywords":
            results = default_screener(items).screen_docs(docs)
        else:
            results = _cross_validated(docs, [r.category for r in rows], folds, LearnedScreener)
            if results is None:
                continue  # too few labelled rows per category to train; the summary says so
        for row, s in zip(rows, results, strict=True):
            out[row.key]["screeners"][name] = {
                "predicted": "abstain" if s.abstained else s.category.value,
                "scores": {k: float(v) for k, v in s.scores.items()},
            }
    return out


def _cross_validated(docs: list[Any], labels: list[str], folds: int, factory: Any) -> list[Any] | None:
    from sklearn.model_selection import StratifiedKFold

    counts = {c: labels.count(c) for c in ("mme", "gcrde", "other")}
    if min(counts.values()) < max(folds, 6):
        return None
    results: list[Any] = [None] * len(docs)
    for train, test in StratifiedKFold(folds, shuffle=True, random_state=0).split(docs, labels):
        model = factory().fit([docs[i] for i in train], [labels[i] for i in train])
        for i, s in zip(test, model.screen_docs([docs[i] for i in test]), strict=True):
            results[i] = s
    return results


def _execute(todo: Sequence[Task], args: argparse.Namespace, settings: Settings) -> Iterator[dict[str, Any]]:
    """Results in completion order; one process when --jobs 1, else a spawn-based pool."""
    # workers never see the token: they read sources (cached or from the registry), not GitHub issues
    worker_settings = replace(settings, token=None)
    use_torch = "bert" in args.methods
    if args.jobs == 1 or len(todo) <= 1:
        for task in todo:
            yield localize_task(task, worker_settings)
        return
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    ctx = multiprocessing.get_context("spawn")  # torch and fork do not mix
    pool = ProcessPoolExecutor(
        max_workers=args.jobs, mp_context=ctx, initializer=_worker_init,
        initargs=(use_torch, 1, os.getpid()),
    )
    pending: set[Any] = set()
    queue = list(reversed(todo))
    finished_ok = False
    try:
        while queue or pending:
            while queue and len(pending) < args.jobs * 4:
                pending.add(pool.submit(localize_task, queue.pop(), worker_settings))
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                yield fut.result()
        finished_ok = True
    finally:
        # on an interrupt, do not wait for half-done localizations: the checkpoint has the rest
        pool.shutdown(wait=finished_ok, cancel_futures=True)


def _progress(results: Iterator[dict[str, Any]], total: int, console: Any) -> Iterator[dict[str, Any]]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    if total == 0:
        yield from results
        return
    with Progress(
        TextColumn("localizing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        console=console, transient=True,
    ) as bar:
        task = bar.add_task("eval", total=total)
        for result in results:
            bar.advance(task)
            yield result


# -- outputs -----------------------------------------------------------------------------------


def learned_reports(settings: Settings) -> tuple[frozenset[str], frozenset[str]]:
    """The reports (URLs) the file ranker and the function ranker in use learned from, as their artefacts'
    provenance lists them: figures on those reports are in-sample."""
    from sftl.localize.candidates.ranker import load_default
    from sftl.localize.functions.ranker import load_function_ranker

    def urls(model: Any) -> frozenset[str]:
        trained = (getattr(model, "provenance", None) or {}).get("trained_on") or ()
        return frozenset(str(u) for u in trained) if isinstance(trained, list) else frozenset()

    return urls(load_default(settings.ranker_model)), urls(load_function_ranker(settings.function_model))


def function_figures(tasks: Sequence[Task], done: dict[tuple[str, str], dict[str, Any]],
                     split: dict[str, str] | None, learned: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Function-level figures of `sftl` where the truth functions are known, reports before and after the split
    apart, and the reports the function ranker learned from (`learned`: their keys) apart from those it never
    saw (`sftl.evaluate_functions.figures`: within files found among the first five suspects, beside BM25)."""
    from sftl.evaluate_functions import FunctionCase, figures

    cases: list[FunctionCase] = []
    for t in tasks:
        res = done.get((t.key, t.method), {})
        if t.method != "sftl" or not t.truth_functions:
            continue
        kept = {path: (fr, sr, br) for path, fr, sr, br in res.get("functions") or ()}
        period = split_period(t.created_at, split, t.framework or "")
        for path, _ in t.truth_functions:
            fr, sr, br = kept.get(path, (None, None, None))
            cases.append(FunctionCase(t.key, path, period, fr, sr, br))
    if not cases:
        return {}
    out = {"all": figures(cases)}
    for period in sorted({c.period for c in cases} - {""}):
        out[period] = figures([c for c in cases if c.period == period])
    if any(c.key in learned for c in cases):
        out["learned"] = figures([c for c in cases if c.key in learned])
        out["unseen"] = figures([c for c in cases if c.key not in learned])
    return out


def _write_outputs(
    out: Path,
    rows: list[LabelRow],
    skipped: list[SkippedRow],
    screened: dict[str, dict[str, Any]],
    results: list[RankedResult],
    done: dict[tuple[str, str], dict[str, Any]],
    summary: dict[str, Any],
    args: argparse.Namespace,
) -> None:
    from sftl.evaluate import first_hit_rank

    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    # which checkpoint key is which row's (`sftl model fit OUT` reads the kept features by them)
    (out / "keys.json").write_text(json.dumps({r.url: r.key for r in rows}, indent=0) + "\n", encoding="utf-8")
    rank = {(r.key, r.method): first_hit_rank(r.reported, r.truth) for r in results}
    header = ["line", "url", "status", "framework", "category", "filed", "truth_files"]
    for name in args.screeners:
        header += [f"{name}_screened", f"{name}_mme", f"{name}_gcrde"]
    for m in args.methods:
        header += [f"{m}_outcome", f"{m}_rank", f"{m}_top1", f"{m}_seconds", f"{m}_reason"]
    with (out / "rows.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for row in rows:
            s = screened[row.key]
            line = [row.line, row.url, "ok", s["framework"], row.category or "unlabelled", row.created_at[:10],
                    ";".join(row.truth_files)]
            for name in args.screeners:
                got = s["screeners"].get(name)
                line += [got["predicted"], round(got["scores"].get("mme", 0.0), 4),
                         round(got["scores"].get("gcrde", 0.0), 4)] if got else ["", "", ""]
            for m in args.methods:
                res = done.get((row.key, m))
                if res is None or not row.scored_for_localization:
                    line += ["", "", "", "", ""]
                    continue
                top1 = res["suspects"][0][0] if res["suspects"] else ""
                line += [res["outcome"], rank.get((row.key, m)) or "", top1, res["seconds"], res["reason"]]
            w.writerow(line)
        for sk in skipped:
            w.writerow([sk.line, sk.url, f"skipped: {sk.reason}"] + [""] * (len(header) - 3))
    if not args.no_plots:
        _plots(out, summary)


def _plots(out: Path, summary: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, cat in zip(axes, ("mme", "gcrde"), strict=True):
        for method, curves in summary["topk_curves"].items():
            ys = curves.get(cat) or []
            if ys:
                ax.plot(range(1, len(ys) + 1), [100 * y for y in ys], marker="o", label=method)
        ax.set_title(f"{cat.upper()} localization")
        ax.set_xlabel("k")
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
        ax.legend()
    axes[0].set_ylabel("top-k accuracy (%)")
    fig.tight_layout()
    fig.savefig(out / "topk.png", dpi=100)
    plt.close(fig)

    if not summary.get("screening_thresholds"):
        return  # nothing was screened (every label line skipped): no threshold curve to draw
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, cat in zip(axes, ("mme", "gcrde"), strict=True):
        curve = summary["screening_thresholds"]["keywords" if "keywords" in summary["screening_thresholds"]
                                                else next(iter(summary["screening_thresholds"]))][cat]
        xs = [p["threshold"] for p in curve]
        ax.plot(xs, [p["precision"] for p in curve], label="precision")
        ax.plot(xs, [p["recall"] for p in curve], label="recall")
        ax.plot(xs, [p["f1"] for p in curve], label="F1", linestyle="--")
        ax.set_title(f"screening {cat.upper()} vs score threshold")
        ax.set_xlabel("threshold on the screener's score")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(out / "screening.png", dpi=100)
    plt.close(fig)
