"""Fitting and judging the suspect ranker on evaluations' kept features: train on reports filed before a date,
report the ones after it, and each training report by a model fitted without it (leave-one-out), beside BM25 and
the category localizers' hand ranking on the same rows."""

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
    lead: tuple[str, ...]  # the category localizer's own located order (the hand ranking the model replaced)
    baselines: dict[str, tuple[str, ...]]  # method -> its ranked files
    evaluation: str = ""  # the name of the evaluation's folder (figures per labelled set keep them apart)

    def labels(self) -> list[int]:
        wanted = {normalize_path(t) for t in self.truth}
        return [int(normalize_path(p) in wanted) for p in self.paths]


def read_evaluations(outs: Sequence[Path]) -> list[LabelledReport]:
    """The reports of several evaluations (a report evaluated twice is read once, from the first)."""
    seen: set[str] = set()
    reports: list[LabelledReport] = []
    for out in outs:
        for r in read_evaluation(out):
            if r.url not in seen:
                seen.add(r.url)
                reports.append(r)
    return reports


def read_evaluation(out: Path) -> list[LabelledReport]:
    """The reports of an `sftl eval --keep-features` run (its rows.csv and checkpoint.jsonl)."""
    by_url = rows_by_url(out)
    results: dict[tuple[str, str], dict[str, Any]] = {}
    for line in (out / "checkpoint.jsonl").read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            obj = json.loads(line)
            results[(obj["key"], obj["method"])] = obj
        except (ValueError, KeyError, TypeError):
            continue
    # the learned ranker's candidates; where the run read the stored history too (`--history`), those of
    # "sftl+history", which carry the prior's features as well
    kept = {key: obj for (key, method), obj in results.items() if method == "sftl" and "candidates" in obj}
    kept.update({key: obj for (key, method), obj in results.items() if method == "sftl+history" and "candidates" in obj})
    reports: list[LabelledReport] = []
    for url, key in keys_by_url(out).items():
        found, obj = by_url.get(url), kept.get(key)
        if found is None or obj is None or not found.get("truth_files"):
            continue
        row = found
        cands = obj["candidates"]
        # every other method the evaluation ran: what it located, else nothing (a miss, as `sftl eval` counts it)
        baselines = {m: tuple(s[0] for s in res["suspects"]) if res.get("outcome") == "located" else ()
                     for (k, m), res in results.items() if k == key and not m.startswith("sftl")}
        reports.append(LabelledReport(
            url=url, framework=row.get("framework", ""), category=row.get("category", ""), filed=row.get("filed", ""),
            truth=tuple(row["truth_files"].split(";")), paths=tuple(c[0] for c in cands),
            vectors=tuple(tuple(float(c[1].get(f, 0.0)) for f in FEATURES) for c in cands),
            lead=tuple(c[0] for c in sorted((c for c in cands if c[1].get(LEAD)),
                                            key=lambda c: -float(c[1].get("category_rank", 0.0)))),
            baselines=baselines, evaluation=out.name,
        ))
    return reports


def rows_by_url(out: Path) -> dict[str, dict[str, Any]]:
    """An evaluation folder's rows that ran (`rows.csv`, status ok) by URL; InputError when it holds none."""
    rows_csv, checkpoint = out / "rows.csv", out / "checkpoint.jsonl"
    if not rows_csv.is_file() or not checkpoint.is_file():
        raise InputError(f"{out} holds no evaluation (rows.csv and checkpoint.jsonl); run `sftl eval --keep-features "
                         f"--out {out} LABELS` first")
    by_url: dict[str, dict[str, Any]] = {}
    with rows_csv.open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            if row.get("status") == "ok":
                by_url[row["url"]] = row
    return by_url


def keys_by_url(out: Path) -> dict[str, str]:
    keys_file = out / "keys.json"
    if not keys_file.is_file():
        raise InputError(f"{out} has no keys.json (written by this sftl's `sftl eval`); rerun the evaluation")
    loaded: dict[str, str] = json.loads(keys_file.read_text(encoding="utf-8"))
    return loaded


def is_after(report: LabelledReport, split: dict[str, str]) -> bool:
    """Filed on or after the split day of its evaluation (a set dated apart, as the security advisories are: its
    folder's name as the key), else of its framework, else '*'."""
    return filed_after(report.evaluation, report.framework, report.filed, split)


def filed_after(evaluation: str, framework: str, filed: str, split: dict[str, str]) -> bool:
    """A report of this evaluation folder and framework, filed on this day, is on or after its split day."""
    day = split.get(evaluation) or split.get(framework) or split.get("*")
    return bool(day and filed and filed[: len(day)] >= day)


def fix_kind(truth: Sequence[str]) -> str:
    """Where a fix lies: 'python' (Python files only), 'cxx' (C/C++/CUDA files only) or 'mixed'."""
    from sftl.evaluate import fix_kind as kind_of

    return kind_of(truth)


def ranked(report: LabelledReport, model: CandidateRanker | None, hand: bool = False) -> list[str]:
    """The report's files in the order sftl gives them with this model; `hand`: the category localizer's located
    order first (how sftl ranked a missing-module error or a discrepancy before the model replaced it)."""
    values = values_of([list(v) for v in report.vectors], model) if report.vectors else []
    order = [p for _, p in sorted(zip(values, report.paths, strict=True), key=lambda vp: (-vp[0], vp[1]))]
    lead = list(report.lead) if hand else []
    return lead + [p for p in order if p not in set(lead)]


def metrics(rankings: Sequence[tuple[Sequence[str], Sequence[str]]]) -> dict[str, float]:
    n = len(rankings)
    ranks = [first_hit_rank(r, t) for r, t in rankings]
    out: dict[str, float] = {"n": float(n)}
    for k in (1, 5, 10):
        out[f"top{k}"] = round(sum(1 for x in ranks if x is not None and x <= k) / n, 3) if n else 0.0
    out["mrr"] = round(sum(1.0 / x for x in ranks if x is not None) / n, 3) if n else 0.0
    return out


def judge(reports: Sequence[LabelledReport], model: CandidateRanker | None,
          models: dict[str, CandidateRanker] | None = None) -> dict[str, dict[str, dict[str, float]]]:
    """framework ('all' too) -> method -> top-1/5/10, MRR, on these reports. Methods: 'sftl' (the model; a report
    named in `models` by the model fitted without it), 'hand' (the category localizer's located order, then the
    model's), 'hand+bm25' (that order, then BM25: sftl before any model) and each baseline the evaluation ran."""
    models = models or {}
    table: dict[str, dict[str, dict[str, float]]] = {}
    def groups(r: LabelledReport) -> set[str]:
        """The rows of the table a report counts in: its framework, all, each split by where its fix lies, and
        its evaluation (a benchmark) where several were read."""
        kind = fix_kind(r.truth)
        out = {"all", r.framework, f"all/{kind}", f"{r.framework}/{kind}"}
        if len({x.evaluation for x in reports}) > 1:
            out |= {f"set:{r.evaluation}", f"set:{r.evaluation}/{kind}"}
        return out

    member = {r.url: groups(r) for r in reports}
    names = sorted({g for r in reports for g in member[r.url]}, key=lambda g: (g.startswith("set:"), "/" in g, g))
    for fw in names:
        mine = [r for r in reports if fw in member[r.url]]
        if not mine:
            continue
        cell = {"sftl": metrics([(ranked(r, models.get(r.url, model)), r.truth) for r in mine]),
                "hand": metrics([(ranked(r, models.get(r.url, model), hand=True), r.truth) for r in mine]),
                "hand+bm25": metrics([(ranked(r, None, hand=True), r.truth) for r in mine])}
        for method in sorted({m for r in mine for m in r.baselines}):
            cell[method] = metrics([(r.baselines.get(method, ()), r.truth) for r in mine])
        table[fw] = cell
    return table


def fit(reports: Sequence[LabelledReport], split: dict[str, str], leave_one_out: Sequence[str] = (),
        refit_all: bool = False, **params: Any) -> tuple[CandidateRanker, dict[str, Any]]:
    """Train on the reports filed before the split; the figures on both sides, apart. The training reports of the
    categories in `leave_one_out` (say the labelled mme and gcrde rows) are also judged each by a model fitted on
    the other training reports: figures on reports the judging model did not learn from. `refit_all`: the model
    returned is then fitted again on every report, the figures staying those of the fit before the split."""
    train = [r for r in reports if not is_after(r, split)]
    valid = [r for r in reports if is_after(r, split)]
    usable = [r for r in train if any(r.labels())]
    if len(usable) < 10:
        raise InputError(f"only {len(usable)} training reports have a truth file among their candidates; need 10")
    started = time.perf_counter()
    model = train_model(usable, **params)
    seconds = time.perf_counter() - started
    if valid:
        model.confidence = calibrate(valid, model)
    else:  # no later reports: calibrated on the training reports, each scored by a model fitted without its fold
        model.confidence = calibrate(train, model, cross_fitted(usable, **params))
    figures: dict[str, Any] = {
        "split": split, "train_reports": len(train), "train_with_truth_in_candidates": len(usable),
        "validation_reports": len(valid), "fit_seconds": round(seconds, 2),
        "train": judge(train, model), "validation": judge(valid, model) if valid else {},
        "confidence": model.confidence}
    held = [r for r in train if r.category in set(leave_one_out)]
    if held:
        # a report without its truth among the candidates was never learned from: the model itself judges it
        without = {r.url: train_model([u for u in usable if u.url != r.url], **params)
                   for r in held if any(r.labels())}
        figures["leave_one_out"] = {key: judge([r for r in held if set_of(r) == key], model, without)
                                    for key in sorted({set_of(r) for r in held})}
    later = [r for r in valid if r.category in set(leave_one_out)]
    if later:  # the same categories' later reports, which no model here learned from
        figures["validation_by_category"] = {key: judge([r for r in later if set_of(r) == key], model)
                                             for key in sorted({set_of(r) for r in later})}
    if refit_all and valid:
        # the figures above are the procedure's, judged on reports it did not learn from; the model kept learns from
        # every report (the later ones are the nearest to the reports it will meet)
        usable = [r for r in reports if any(r.labels())]
        started = time.perf_counter()
        model = train_model(usable, **params)
        figures["refit_on_all"] = {"reports": len(usable), "fit_seconds": round(time.perf_counter() - started, 2)}
        # chosen, as before the refit, on the later reports: each scored by a model of the folds without it
        model.confidence = calibrate(valid, model, cross_fitted(usable, **params))
        figures["refit_on_all"]["confidence"] = model.confidence
    model.provenance = {"trained_on": sorted(r.url for r in usable), "figures": figures,
                        "trained": time.strftime("%Y-%m-%d")}
    return model, figures


def cross_fitted(reports: Sequence[LabelledReport], folds: int = 5, **params: Any) -> dict[str, CandidateRanker]:
    """report URL -> a model fitted on the other folds (every `folds`-th report in filing order held out together)."""
    ordered = sorted(reports, key=lambda r: (r.filed, r.url))
    out: dict[str, CandidateRanker] = {}
    for k in range(folds):
        held = {r.url for r in ordered[k::folds]}
        model = train_model([r for r in ordered if r.url not in held], **params)
        out.update(dict.fromkeys(held, model))
    return out


def set_of(report: LabelledReport) -> str:
    """'EVALUATION/CATEGORY': a labelled report's set in the figures (development rows apart from injected ones)."""
    return f"{report.evaluation}/{report.category}" if report.evaluation else report.category


def train_model(reports: Sequence[LabelledReport], **params: Any) -> CandidateRanker:
    """A ranker fitted on these reports' candidates (one group each)."""
    rows: list[list[float]] = []
    labels: list[int] = []
    groups: list[int] = []
    for r in reports:
        rows.extend(list(v) for v in r.vectors)
        labels.extend(r.labels())
        groups.append(len(r.vectors))
    return CandidateRanker(**params).fit(rows, labels, groups)


def top_scores(report: LabelledReport, model: CandidateRanker | None) -> tuple[list[float], list[str]]:
    """The model's two best scores for a report and its ranked files."""
    values = values_of([list(v) for v in report.vectors], model) if report.vectors else []
    best = sorted(values, reverse=True)[:2] + [0.0, 0.0]
    return best[:2], ranked(report, model)


def calibrate(reports: Sequence[LabelledReport], model: CandidateRanker,
              models: dict[str, CandidateRanker] | None = None, precision: float = PRECISION) -> dict[str, Any]:
    """P(top-1 right) from the best score and its margin over the second (a logistic fit on these reports), and the
    lowest probability at which the reports above it were right at least `precision` of the time: the threshold
    below which a ranking says it has low confidence. Fitted and chosen on the reports given (the later ones), each
    scored by `model` or, where `models` names it, by the model fitted without it."""
    from sklearn.linear_model import LogisticRegression

    xs, ys = [], []
    for r in reports:
        if not r.vectors:
            continue
        (top, second), order = top_scores(r, (models or {}).get(r.url, model))
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
