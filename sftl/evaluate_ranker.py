"""Fitting and judging the suspect ranker on an evaluation's kept features: train on reports filed before a date,
report the ones after it, beside BM25 and the untrained ranking on the same rows."""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sftl.errors import InputError
from sftl.evaluate import first_hit_rank, normalize_path
from sftl.localize.candidates.features import FEATURES
from sftl.localize.candidates.locate import LEAD, values_of
from sftl.localize.candidates.ranker import CandidateRanker

PRECISION = 0.5  # a ranking above the confidence threshold had its first file right at least this often


@dataclass(frozen=True)
class LabelledReport:
    """One evaluated report: its candidates' feature vectors, which are truth files, and the baselines' answers."""

    url: str
    framework: str
    category: str
    filed: str
    truth: tuple[str, ...]
    paths: tuple[str, ...]
    vectors: tuple[tuple[float, ...], ...]
    lead: tuple[str, ...]  # the category localizer's located order, which leads the ranking
    baselines: dict[str, tuple[str, ...]]  # method -> its ranked files

    def labels(self) -> list[int]:
        wanted = {normalize_path(t) for t in self.truth}
        return [int(normalize_path(p) in wanted) for p in self.paths]


def read_evaluation(out: Path) -> list[LabelledReport]:
    """The reports of an `sftl eval --keep-features` run (its rows.csv and checkpoint.jsonl)."""
    rows_csv, checkpoint = out / "rows.csv", out / "checkpoint.jsonl"
    if not rows_csv.is_file() or not checkpoint.is_file():
        raise InputError(f"{out} holds no evaluation (rows.csv and checkpoint.jsonl); run `sftl eval --keep-features "
                         f"--out {out} LABELS` first")
    results: dict[tuple[str, str], dict[str, Any]] = {}
    for line in checkpoint.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            obj = json.loads(line)
            results[(obj["key"], obj["method"])] = obj
        except (ValueError, KeyError, TypeError):
            continue
    by_url: dict[str, dict[str, Any]] = {}
    with rows_csv.open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            if row.get("status") == "ok":
                by_url[row["url"]] = row
    kept = {key: obj for (key, method), obj in results.items() if method == "sftl" and "candidates" in obj}
    reports: list[LabelledReport] = []
    for url, key in _keys_by_url(out).items():
        found, obj = by_url.get(url), kept.get(key)
        if found is None or obj is None or not found.get("truth_files"):
            continue
        row = found
        cands = obj["candidates"]
        baselines = {m: tuple(s[0] for s in res["suspects"])
                     for (k, m), res in results.items() if k == key and m != "sftl" and res.get("outcome") == "located"}
        reports.append(LabelledReport(
            url=url, framework=row.get("framework", ""), category=row.get("category", ""), filed=row.get("filed", ""),
            truth=tuple(row["truth_files"].split(";")), paths=tuple(c[0] for c in cands),
            vectors=tuple(tuple(float(c[1].get(f, 0.0)) for f in FEATURES) for c in cands),
            lead=tuple(c[0] for c in cands if c[1].get(LEAD)), baselines=baselines,
        ))
    return reports


def _keys_by_url(out: Path) -> dict[str, str]:
    keys_file = out / "keys.json"
    if not keys_file.is_file():
        raise InputError(f"{out} has no keys.json (written by this sftl's `sftl eval`); rerun the evaluation")
    loaded: dict[str, str] = json.loads(keys_file.read_text(encoding="utf-8"))
    return loaded


def is_after(report: LabelledReport, split: dict[str, str]) -> bool:
    day = split.get(report.framework) or split.get("*")
    return bool(day and report.filed and report.filed[: len(day)] >= day)


def ranked(report: LabelledReport, model: CandidateRanker | None) -> list[str]:
    """The report's files in the order sftl gives them with this model (its located category suspects first)."""
    values = values_of([list(v) for v in report.vectors], model) if report.vectors else []
    order = [p for _, p in sorted(zip(values, report.paths, strict=True), key=lambda vp: (-vp[0], vp[1]))]
    lead = list(report.lead)
    return lead + [p for p in order if p not in set(lead)]


def metrics(rankings: Sequence[tuple[Sequence[str], Sequence[str]]]) -> dict[str, float]:
    n = len(rankings)
    ranks = [first_hit_rank(r, t) for r, t in rankings]
    out: dict[str, float] = {"n": float(n)}
    for k in (1, 5, 10):
        out[f"top{k}"] = round(sum(1 for x in ranks if x is not None and x <= k) / n, 3) if n else 0.0
    out["mrr"] = round(sum(1.0 / x for x in ranks if x is not None) / n, 3) if n else 0.0
    return out


def judge(reports: Sequence[LabelledReport], model: CandidateRanker | None) -> dict[str, dict[str, dict[str, float]]]:
    """framework ('all' too) -> method ('sftl', 'untrained', each baseline) -> top-1/5/10, MRR, on these reports."""
    table: dict[str, dict[str, dict[str, float]]] = {}
    for fw in sorted({r.framework for r in reports}) + ["all"]:
        mine = [r for r in reports if fw in ("all", r.framework)]
        if not mine:
            continue
        cell = {"sftl": metrics([(ranked(r, model), r.truth) for r in mine]),
                "untrained": metrics([(ranked(r, None), r.truth) for r in mine])}
        for method in sorted({m for r in mine for m in r.baselines}):
            cell[method] = metrics([(r.baselines.get(method, ()), r.truth) for r in mine])
        table[fw] = cell
    return table


def fit(reports: Sequence[LabelledReport], split: dict[str, str], **params: Any) -> tuple[CandidateRanker, dict[str, Any]]:
    """Train on the reports filed before the split; the figures on both sides, apart."""
    train = [r for r in reports if not is_after(r, split)]
    valid = [r for r in reports if is_after(r, split)]
    usable = [r for r in train if any(r.labels())]
    if len(usable) < 10:
        raise InputError(f"only {len(usable)} training reports have a truth file among their candidates; need 10")
    started = time.perf_counter()
    rows: list[list[float]] = []
    labels: list[int] = []
    groups: list[int] = []
    for r in usable:
        rows.extend(list(v) for v in r.vectors)
        labels.extend(r.labels())
        groups.append(len(r.vectors))
    model = CandidateRanker(**params).fit(rows, labels, groups)
    seconds = time.perf_counter() - started
    model.confidence = calibrate(valid or train, model)
    figures = {"split": split, "train_reports": len(train), "train_with_truth_in_candidates": len(usable),
               "validation_reports": len(valid), "fit_seconds": round(seconds, 2),
               "train": judge(train, model), "validation": judge(valid, model) if valid else {},
               "confidence": model.confidence}
    model.provenance = {"trained_on": sorted(r.url for r in usable), "figures": figures,
                        "trained": time.strftime("%Y-%m-%d")}
    return model, figures


def top_scores(report: LabelledReport, model: CandidateRanker) -> tuple[list[float], list[str]]:
    """The model's two best scores for a report and its ranked files."""
    values = model.predict([list(v) for v in report.vectors]) if report.vectors else []
    best = sorted(values, reverse=True)[:2] + [0.0, 0.0]
    return best[:2], ranked(report, model)


def calibrate(reports: Sequence[LabelledReport], model: CandidateRanker, precision: float = PRECISION) -> dict[str, Any]:
    """P(top-1 right) from the best score and its margin over the second (a logistic fit on these reports), and the
    lowest probability at which the reports above it were right at least `precision` of the time: the threshold
    below which a ranking says it has low confidence. Fitted and chosen on the reports given (the later ones)."""
    from sklearn.linear_model import LogisticRegression

    xs, ys = [], []
    for r in reports:
        if not r.vectors:
            continue
        (top, second), order = top_scores(r, model)
        xs.append([top, top - second])
        ys.append(int(bool(order) and first_hit_rank(order[:1], r.truth) == 1))
    if len(set(ys)) < 2:
        return {}
    fitted = LogisticRegression().fit(xs, ys)
    probs = fitted.predict_proba(xs)[:, 1]
    threshold, kept_precision, coverage = 1.0, 0.0, 0.0
    for t in sorted(set(round(float(p), 3) for p in probs), reverse=True):
        chosen = [y for p, y in zip(probs, ys, strict=True) if p >= t]
        if chosen and sum(chosen) / len(chosen) >= precision:
            threshold, kept_precision, coverage = t, sum(chosen) / len(chosen), len(chosen) / len(ys)
    return {"coef": [float(c) for c in fitted.coef_[0]], "intercept": float(fitted.intercept_[0]),
            "threshold": threshold, "precision": round(kept_precision, 3), "coverage": round(coverage, 3),
            "target_precision": precision, "reports": len(ys)}
