"""Fitting and judging the function ranker on evaluations' kept function features (`sftl eval --keep-features` over
rows that name the functions their fix changed): train on the reports filed before a date, judge the ones after it
beside BM25 over the same files' functions, and the training reports 5-fold by report."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sftl.errors import InputError
from sftl.evaluate_functions import same_function
from sftl.evaluate_ranker import filed_after, keys_by_url, rows_by_url
from sftl.localize.functions.features import FEATURES, FunctionEvidence, FunctionRow, gather_functions
from sftl.localize.functions.ranker import FunctionRanker

MIN_TRAINING_FILES = 10  # fewer (report, file) groups teach a ranker nothing worth saving


@dataclass(frozen=True)
class FunctionGroup:
    """One truth file of one report: its functions' feature rows (in `FEATURES` order) and which were changed."""

    url: str
    framework: str
    filed: str
    path: str
    names: tuple[str, ...]
    rows: tuple[tuple[float, ...], ...]
    labels: tuple[int, ...]
    evaluation: str = ""  # the evaluation folder's name (a set dated apart takes its own split date)


def read_function_groups(outs: Sequence[Path]) -> list[FunctionGroup]:
    """The (report, truth file) groups of several evaluations (a report evaluated twice is read once, from the
    first); rows kept under other feature names are read by name, a feature they lack as 0."""
    seen: set[str] = set()
    groups: list[FunctionGroup] = []
    for out in outs:
        found = read_evaluation_groups(out)
        groups += [g for g in found if g.url not in seen]
        seen |= {g.url for g in found}
    return groups


def read_evaluation_groups(out: Path) -> list[FunctionGroup]:
    """The function groups of one `sftl eval --keep-features` run (its rows.csv, keys.json and checkpoint)."""
    by_url = rows_by_url(out)
    kept: dict[str, dict[str, Any]] = {}
    for line in (out / "checkpoint.jsonl").read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("method") == "sftl" and isinstance(obj.get("function_groups"), dict):
            kept[str(obj.get("key"))] = obj["function_groups"]
    groups: list[FunctionGroup] = []
    for url, key in keys_by_url(out).items():
        row, obj = by_url.get(url), kept.get(key)
        if row is None or obj is None:
            continue
        names = list(obj.get("features") or ())
        at = [names.index(f) if f in names else -1 for f in FEATURES]
        for path, functions, rows, labels in obj.get("groups") or ():
            groups.append(FunctionGroup(
                url=url, framework=row.get("framework", ""), filed=row.get("filed", ""), path=str(path),
                names=tuple(str(n) for n in functions),
                rows=tuple(tuple(float(r[i]) if i >= 0 else 0.0 for i in at) for r in rows),
                labels=tuple(int(x) for x in labels), evaluation=out.name))
    return groups


def labelled_functions(evidence: FunctionEvidence, path: str, text: str,
                       truth: Sequence[str]) -> tuple[list[FunctionRow], list[int]] | None:
    """A truth file's functions with their features and which of them the fix changed (matched by name, never by
    line); None when the release's file holds none of the changed functions (renamed, new, or none at all)."""
    rows = gather_functions(evidence, path, text) if text else []
    labels = [int(any(same_function(r.span.name, t) for t in truth)) for r in rows]
    return (rows, labels) if any(labels) else None


def truth_rank(scores: Sequence[float], labels: Sequence[int]) -> int:
    """1-based rank of the first changed function when the functions are ordered by score (ties by position)."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    return next((r for r, i in enumerate(order, 1) if labels[i]), len(scores) + 1)


def bm25_scores(group: FunctionGroup) -> list[float]:
    """BM25 of the whole report over the file's functions: the baseline, read off the kept features."""
    at = FEATURES.index("bm25_all")
    return [row[at] for row in group.rows]


def train_function_model(groups: Sequence[FunctionGroup], **params: Any) -> FunctionRanker:
    return FunctionRanker(**params).fit([list(r) for g in groups for r in g.rows],
                                        [x for g in groups for x in g.labels], [len(g.rows) for g in groups])


def figures(groups: Sequence[FunctionGroup], ranks: Sequence[int]) -> dict[str, Any]:
    """Acc@1, Acc@5 and MRR of a changed function for the ranks given and for BM25 over the same functions."""
    if not groups:
        return {"n": 0}
    baseline = [truth_rank(bm25_scores(g), g.labels) for g in groups]

    def of(rs: Sequence[int]) -> dict[str, float]:
        n = len(rs)
        return {"acc@1": round(sum(r <= 1 for r in rs) / n, 3), "acc@5": round(sum(r <= 5 for r in rs) / n, 3),
                "mrr": round(sum(1 / r for r in rs) / n, 3)}

    return {"n": len(groups), "reports": len({g.url for g in groups}), "sftl": of(ranks), "bm25": of(baseline)}


def judge(groups: Sequence[FunctionGroup], model: FunctionRanker) -> dict[str, Any]:
    return figures(groups, [truth_rank(model.predict([list(r) for r in g.rows]), g.labels) for g in groups])


def cross_validated(groups: Sequence[FunctionGroup], folds: int = 5, **params: Any) -> dict[str, Any]:
    """The figures of each group ranked by a model that did not learn from its report (folds by report)."""
    urls = sorted({g.url for g in groups})
    fold_of = {u: i % folds for i, u in enumerate(urls)}
    ranks = [0] * len(groups)
    for f in range(min(folds, len(urls))):
        model = train_function_model([g for g in groups if fold_of[g.url] != f], **params)
        for i, g in enumerate(groups):
            if fold_of[g.url] == f:
                ranks[i] = truth_rank(model.predict([list(r) for r in g.rows]), g.labels)
    return figures(groups, ranks)


def fit_functions(groups: Sequence[FunctionGroup], split: dict[str, str], refit_all: bool = False,
                  **params: Any) -> tuple[FunctionRanker, dict[str, Any]]:
    """Train on the groups of reports filed before the split; figures on the training reports (5-fold by report)
    and on the later ones, each beside BM25 over functions. `refit_all`: the model returned is fitted again on
    every group, the figures staying those of the split."""
    train = [g for g in groups if not filed_after(g.evaluation, g.framework, g.filed, split)]
    valid = [g for g in groups if filed_after(g.evaluation, g.framework, g.filed, split)]
    if len(train) < MIN_TRAINING_FILES:
        raise InputError(f"only {len(train)} truth files with a changed function were kept for reports filed before "
                         f"the split; need {MIN_TRAINING_FILES} (run `sftl eval --keep-features` on rows that name "
                         "their fix's functions)")
    started = time.perf_counter()
    model = train_function_model(train, **params)
    result: dict[str, Any] = {
        "split": split, "train_files": len(train), "validation_files": len(valid),
        "fit_seconds": round(time.perf_counter() - started, 2),
        "train": cross_validated(train, **params), "validation": judge(valid, model) if valid else {"n": 0},
        "validation_by_framework": {fw: judge([g for g in valid if g.framework == fw], model)
                                    for fw in sorted({g.framework for g in valid})},
    }
    used = train
    if refit_all and valid:  # the later reports are the nearest to the ones the model will meet
        used = list(groups)
        model = train_function_model(used, **params)
        result["refit_on_all"] = {"files": len(used)}
    model.provenance = {"trained_on": sorted({g.url for g in used}), "groups": len(used), "figures": result,
                        "trained": time.strftime("%Y-%m-%d")}
    return model, result
