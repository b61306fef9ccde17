"""Metrics over labelled results: screening confusion/precision/recall/F1, localization top-k/MRR/MAP.

Pure functions over plain values; no I/O. `sftl eval` (sftl/cli/evaluation.py) collects the results
and formats what these functions compute.

How the published study's localization "accuracy / precision / recall / F1" are read here
(the paper names them without formulas; this is our reading, applied at a cut-off k, default 1):

- the files a method *reports* for one issue are its first k suspects when its outcome is
  `located`; an abstained or skipped issue reports nothing;
- **accuracy@k**: share of all scored issues where a reported file is a truth file (= top-k hit rate);
- **precision@k**: mean over issues *with a report* of |reported ∩ truth| / |reported|;
- **recall@k**: mean over *all* scored issues of |reported ∩ truth| / |truth|;
- **F1@k**: harmonic mean of the two means.

With k = 1 and one truth file per issue this is the classification reading: TP = issues located
correctly, FP = issues located wrongly, FN = issues not located; precision = TP/(TP+FP),
recall = accuracy = TP/(TP+FN+FP). Abstaining therefore costs recall but not precision.

Ranking metrics count an abstention (or a skip) as a miss: top-k accuracy, MRR and MAP are over all
scored issues, and the abstention rate is reported beside them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

CATEGORIES: tuple[str, ...] = ("mme", "gcrde", "other")
TOP_KS: tuple[int, ...] = (1, 3, 5, 10)
ALL = "all"


# -- screening ---------------------------------------------------------------------------------


def _safe_div(num: float, den: float) -> float:
    return num / den if den else 0.0


def _f1(p: float, r: float) -> float:
    return _safe_div(2 * p * r, p + r)


def confusion_matrix(
    truth: Sequence[str], predicted: Sequence[str], labels: Sequence[str] = CATEGORIES
) -> list[list[int]]:
    """Rows: true label, columns: predicted label, in the order of `labels`.

    A prediction outside `labels` (e.g. an abstention) is not counted in any column, so it costs
    recall of the true class without adding a false positive anywhere.
    """
    if len(truth) != len(predicted):
        raise ValueError(f"{len(truth)} truths but {len(predicted)} predictions")
    index = {label: i for i, label in enumerate(labels)}
    matrix = [[0] * len(labels) for _ in labels]
    for t, p in zip(truth, predicted, strict=True):
        if t in index and p in index:
            matrix[index[t]][index[p]] += 1
    return matrix


def screening_metrics(
    truth: Sequence[str], predicted: Sequence[str], labels: Sequence[str] = CATEGORIES
) -> dict[str, Any]:
    """Accuracy, per-class one-vs-rest accuracy/precision/recall/F1/support, macro averages, confusion."""
    n = len(truth)
    matrix = confusion_matrix(truth, predicted, labels)
    correct = sum(1 for t, p in zip(truth, predicted, strict=True) if t == p)
    per_class: dict[str, dict[str, float]] = {}
    for i, label in enumerate(labels):
        tp = matrix[i][i]
        support = sum(1 for t in truth if t == label)
        pred_pos = sum(1 for p in predicted if p == label)
        fp = pred_pos - tp
        fn = support - tp
        tn = n - tp - fp - fn
        precision = _safe_div(tp, pred_pos)
        recall = _safe_div(tp, support)
        per_class[label] = {
            "accuracy": _safe_div(tp + tn, n),
            "precision": precision,
            "recall": recall,
            "f1": _f1(precision, recall),
            "support": support,
            "predicted": pred_pos,
            "tp": tp,
            "fp": fp,
            "fn": fn,
        }
    present = [label for label in labels if per_class[label]["support"]]
    macro = {
        key: _safe_div(sum(per_class[label][key] for label in present), len(present))
        for key in ("precision", "recall", "f1")
    }
    return {
        "n": n,
        "accuracy": _safe_div(correct, n),
        "per_class": per_class,
        "macro": macro,
        "labels": list(labels),
        "confusion": matrix,
        "abstained": sum(1 for p in predicted if p not in labels),
    }


def threshold_curve(
    truth: Sequence[str],
    scores: Sequence[Mapping[str, float]],
    category: str,
    thresholds: Sequence[float] | None = None,
) -> list[dict[str, float]]:
    """Precision/recall/F1 of "score[category] >= t means category", one-vs-rest, for each threshold t.

    Without `thresholds`, every distinct score is a threshold (the exact curve).
    """
    if len(truth) != len(scores):
        raise ValueError(f"{len(truth)} truths but {len(scores)} score maps")
    values = [float(s.get(category, 0.0)) for s in scores]
    positives = sum(1 for t in truth if t == category)
    if thresholds is None:
        thresholds = sorted(set(values))
    curve = []
    for t in thresholds:
        tp = fp = 0
        for label, value in zip(truth, values, strict=True):
            if value >= t:
                if label == category:
                    tp += 1
                else:
                    fp += 1
        precision = _safe_div(tp, tp + fp) if tp + fp else 1.0  # empty prediction set: vacuous precision
        recall = _safe_div(tp, positives)
        curve.append({"threshold": float(t), "precision": precision, "recall": recall, "f1": _f1(precision, recall)})
    return curve


# -- localization ------------------------------------------------------------------------------


def normalize_path(path: str) -> str:
    """Repository-relative, '/'-separated, no leading './' or '/'."""
    path = path.strip().replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path.lstrip("/")


@dataclass(frozen=True)
class RankedResult:
    """One method's answer for one labelled issue, reduced to what the metrics need."""

    key: str
    method: str
    framework: str  # "pytorch" | "tensorflow" | "unknown"
    category: str  # the labelled category, else the one sftl screened the report into
    truth: tuple[str, ...]
    ranked: tuple[str, ...]  # suspects in rank order (empty when the method gave none)
    outcome: str  # "located" | "abstained" | "skipped"
    period: str = ""  # "before" / "after" a split date ("" without one)
    source: str = ""  # the benchmark the row comes from, when its label says
    learned: bool = False  # the report is among those sftl's bundled (or configured) file ranker learned from

    @property
    def answered(self) -> bool:
        return self.outcome == "located" and bool(self.ranked)

    @property
    def reported(self) -> tuple[str, ...]:
        return tuple(normalize_path(p) for p in self.ranked) if self.answered else ()


FIX_KINDS = ("python", "cxx", "mixed")
CXX_SUFFIXES = (".cc", ".cpp", ".c", ".h", ".hpp", ".cu", ".cuh", ".mm", ".inl", ".cxx", ".hxx")


def fix_kind(truth: Iterable[str]) -> str:
    """Where a fix lies: 'python' (its source files are Python only), 'cxx' (C/C++/CUDA only) or 'mixed' (both, or
    neither: a yaml, a build file)."""
    files = list(truth)
    if files and all(f.endswith((".py", ".pyi")) for f in files):
        return "python"
    if files and all(f.endswith(CXX_SUFFIXES) for f in files):
        return "cxx"
    return "mixed"


def first_hit_rank(ranked: Sequence[str], truth: Iterable[str]) -> int | None:
    """1-based rank of the first truth file in `ranked`, or None."""
    wanted = {normalize_path(t) for t in truth}
    for i, path in enumerate(ranked, start=1):
        if normalize_path(path) in wanted:
            return i
    return None


def average_precision(ranked: Sequence[str], truth: Iterable[str]) -> float:
    """AP over the ranked list; truth files never ranked count as misses (denominator |truth|)."""
    wanted = {normalize_path(t) for t in truth}
    if not wanted:
        return 0.0
    hits = 0
    total = 0.0
    seen: set[str] = set()
    for i, path in enumerate(ranked, start=1):
        p = normalize_path(path)
        if p in wanted and p not in seen:
            seen.add(p)
            hits += 1
            total += hits / i
    return total / len(wanted)


def localization_metrics(
    results: Sequence[RankedResult], ks: Sequence[int] = TOP_KS, paper_k: int = 1
) -> dict[str, Any]:
    """Top-k accuracy, MRR, MAP, abstention rate and the paper's accuracy/precision/recall/F1 @ paper_k."""
    n = len(results)
    top = {k: 0 for k in ks}
    rr = ap = 0.0
    answered = abstained = skipped = 0
    prec_sum = rec_sum = 0.0
    paper_hits = 0
    for r in results:
        ranked = r.reported
        if r.answered:
            answered += 1
        elif r.outcome == "skipped":
            skipped += 1
        else:
            abstained += 1
        rank = first_hit_rank(ranked, r.truth)
        for k in ks:
            if rank is not None and rank <= k:
                top[k] += 1
        if rank is not None:
            rr += 1.0 / rank
        ap += average_precision(ranked, r.truth)
        cut = ranked[:paper_k]
        wanted = {normalize_path(t) for t in r.truth}
        overlap = len(set(cut) & wanted)
        if cut:
            prec_sum += overlap / len(cut)
        if wanted:
            rec_sum += overlap / len(wanted)
        paper_hits += overlap > 0
    precision = _safe_div(prec_sum, answered)
    recall = _safe_div(rec_sum, n)
    return {
        "n": n,
        "answered": answered,
        "abstained": abstained,
        "skipped": skipped,
        "abstention_rate": _safe_div(abstained + skipped, n),
        "top": {str(k): _safe_div(v, n) for k, v in top.items()},
        "mrr": _safe_div(rr, n),
        "map": _safe_div(ap, n),
        "paper": {
            "k": paper_k,
            "accuracy": _safe_div(paper_hits, n),
            "precision": precision,
            "recall": recall,
            "f1": _f1(precision, recall),
        },
    }


def topk_curve(results: Sequence[RankedResult], max_k: int = 20) -> list[float]:
    """Hit rate at k = 1..max_k (abstentions are misses)."""
    n = len(results)
    ranks = [first_hit_rank(r.reported, r.truth) for r in results]
    return [_safe_div(sum(1 for x in ranks if x is not None and x <= k), n) for k in range(1, max_k + 1)]


def group_keys(framework: str, category: str) -> list[tuple[str, str]]:
    """The (framework, category) cells one row counts in: its own, its framework's and the totals."""
    return [(framework, category), (framework, ALL), (ALL, category), (ALL, ALL)]


def grouped(
    items: Iterable[Any], key: Callable[[Any], tuple[str, str]]
) -> dict[tuple[str, str], list[Any]]:
    """Bucket items into every (framework, category) cell they count in (see `group_keys`)."""
    cells: dict[tuple[str, str], list[Any]] = {}
    for item in items:
        for cell in group_keys(*key(item)):
            cells.setdefault(cell, []).append(item)
    return cells


def localization_table(
    results: Sequence[RankedResult], ks: Sequence[int] = TOP_KS, paper_k: int = 1
) -> dict[str, dict[str, dict[str, Any]]]:
    """method -> "framework/category" -> metrics, for every cell that has rows."""
    table: dict[str, dict[str, dict[str, Any]]] = {}
    by_method: dict[str, list[RankedResult]] = {}
    for r in results:
        by_method.setdefault(r.method, []).append(r)
    for method, rows in by_method.items():
        cells = grouped(rows, lambda r: (r.framework, r.category))
        table[method] = {
            f"{fw}/{cat}": localization_metrics(cell, ks, paper_k) for (fw, cat), cell in sorted(cells.items())
        }
    return table


def screening_table(
    rows: Sequence[tuple[str, str, str]], labels: Sequence[str] = CATEGORIES
) -> dict[str, dict[str, Any]]:
    """rows of (framework, truth, predicted) -> framework ("all" too) -> `screening_metrics`."""
    frameworks: dict[str, list[tuple[str, str]]] = {ALL: []}
    for fw, t, p in rows:
        frameworks.setdefault(fw, []).append((t, p))
        frameworks[ALL].append((t, p))
    return {
        fw: screening_metrics([t for t, _ in pairs], [p for _, p in pairs], labels)
        for fw, pairs in sorted(frameworks.items(), key=lambda kv: (kv[0] == ALL, kv[0]))
        if pairs
    }


# -- label files -------------------------------------------------------------------------------


@dataclass(frozen=True)
class LabelRow:
    """One valid line of a label file (`sftl eval`)."""

    line: int
    key: str  # content hash of the line: checkpoints survive reordering and edits elsewhere
    url: str
    category: str  # "" for an unlabelled row: scored under the category sftl screens it into
    truth_files: tuple[str, ...]
    issue: dict[str, Any] | None = None  # a GitHub REST issue object, inline
    source_root: str | None = None
    framework: str | None = None
    version: str | None = None

    created_at: str = ""  # when the report was filed (for --split-date), from the row or its issue
    source: str = ""  # the benchmark the row comes from (a peer benchmark's name), when it says
    # the functions the fix changed, per truth file (names as the benchmark gives them), where it says
    truth_functions: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False, hash=False)

    @property
    def scored_for_localization(self) -> bool:
        """Every row with the files its fix changed is scored: sftl ranks files for any report."""
        return bool(self.truth_files)


@dataclass(frozen=True)
class SkippedRow:
    line: int
    url: str
    reason: str


_FRAMEWORKS = {"pytorch": "pytorch", "torch": "pytorch", "tensorflow": "tensorflow", "tf": "tensorflow"}


def framework_of_repo(repo_or_url: str) -> str | None:
    """pytorch/pytorch (or its URL) -> pytorch; tensorflow/tensorflow -> tensorflow."""
    low = repo_or_url.lower()
    for owner, fw in (("pytorch/", "pytorch"), ("tensorflow/", "tensorflow")):
        if owner in low:
            return fw
    return None


def parse_label_line(text: str, line: int) -> LabelRow | SkippedRow:
    """Validate one label line; a bad line becomes a `SkippedRow` with the reason, never an exception."""
    import hashlib
    import json

    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return SkippedRow(line, "", f"malformed JSON ({exc.msg} at column {exc.colno})")
    except RecursionError:  # the C decoder recurses per nesting level
        return SkippedRow(line, "", "JSON nested too deeply")
    if not isinstance(obj, dict):
        from sftl.github import json_type

        return SkippedRow(line, "", f"expected a JSON object, got {json_type(obj)}")
    issue = obj.get("issue")
    url = obj.get("url")
    if not isinstance(url, str) or not url.strip():
        url = issue.get("html_url") if isinstance(issue, dict) else None
    if not isinstance(url, str) or not url.strip():
        return SkippedRow(line, "", "no 'url' (and no inline issue with an html_url)")
    url = url.strip()
    category = obj.get("category", obj.get("label"))
    if category is None and obj.get("truth_files"):
        category = ""  # unlabelled (a peer benchmark's row): sftl's screening says which category it counts in
    elif category is None:
        return SkippedRow(line, url, "no category and no truth files (an unlabelled row needs the files its fix changed)")
    elif not isinstance(category, str) or category.lower() not in CATEGORIES:
        return SkippedRow(line, url, f"unknown category {category!r} (expected mme, gcrde or other)")
    truth = obj.get("truth_files", [])
    if not isinstance(truth, list) or not all(isinstance(t, str) and t.strip() for t in truth):
        return SkippedRow(line, url, "'truth_files' must be a list of repository-relative paths")
    if issue is not None and not isinstance(issue, dict):
        return SkippedRow(line, url, "'issue' must be a GitHub REST issue object")
    root = obj.get("source_root")
    if root is not None and not isinstance(root, str):
        return SkippedRow(line, url, "'source_root' must be a path")
    fw = obj.get("framework")
    framework = _FRAMEWORKS.get(fw.lower()) if isinstance(fw, str) else None
    if isinstance(fw, str) and framework is None:
        return SkippedRow(line, url, f"unknown framework {fw!r} (expected pytorch or tensorflow)")
    version = obj.get("version")
    created = obj.get("created_at") or (issue.get("created_at") if isinstance(issue, dict) else None)
    functions = obj.get("truth_functions")
    if functions is not None and (not isinstance(functions, dict) or not all(
            isinstance(v, list) and all(isinstance(n, str) for n in v) for v in functions.values())):
        return SkippedRow(line, url, "'truth_functions' must map a truth file to a list of function names")
    # the key leaves the function truth out: a row's checkpointed file rankings stay valid when it gains one
    keyed = {k: v for k, v in obj.items() if k != "truth_functions"}
    key = hashlib.sha1(json.dumps(keyed, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]
    return LabelRow(
        line=line,
        key=key,
        url=url,
        category=category.lower(),
        truth_files=tuple(normalize_path(t) for t in truth),
        issue=issue,
        source_root=root,
        framework=framework or framework_of_repo(url),
        version=str(version) if isinstance(version, (str, int, float)) and version != "" else None,
        created_at=created if isinstance(created, str) else "",
        source=str(obj.get("source") or ""),
        truth_functions={normalize_path(str(p)): tuple(v) for p, v in (functions or {}).items()},
    )


def parse_labels(lines: Iterable[str]) -> tuple[list[LabelRow], list[SkippedRow]]:
    """All lines of a label file -> valid rows and skipped ones (blank lines ignored, duplicates skipped)."""
    rows: list[LabelRow] = []
    skipped: list[SkippedRow] = []
    seen: dict[str, int] = {}
    for n, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        parsed = parse_label_line(text, n)
        if isinstance(parsed, SkippedRow):
            skipped.append(parsed)
        elif parsed.url in seen:
            skipped.append(SkippedRow(n, parsed.url, f"duplicate of line {seen[parsed.url]}"))
        else:
            seen[parsed.url] = n
            rows.append(parsed)
    return rows, skipped


# -- the summary and the report ----------------------------------------------------------------


def summarize(
    screened: Sequence[Mapping[str, Any]],
    results: Sequence[RankedResult],
    skipped: Sequence[SkippedRow],
    methods: Sequence[str],
    paper_k: int = 1,
    max_k: int = 10,
    screeners: Sequence[str] = ("keywords",),
    split_date: str | None = None,
) -> dict[str, Any]:
    """The JSON summary of one evaluation run.

    `screened`: one mapping per evaluated issue with framework, category (truth) and
    `screeners: {name: {predicted, scores}}`. `results`: one `RankedResult` per (issue scored for
    localization, method).
    """
    screening: dict[str, Any] = {}
    thresholds: dict[str, Any] = {}
    for name in screeners:
        # unlabelled rows (a peer benchmark's) have no true category to score a screener against
        have = [s for s in screened if name in s["screeners"] and s["category"] in CATEGORIES]
        if not have:
            screening[name] = None  # could not run (e.g. too few labelled rows to train)
            continue
        screening[name] = screening_table(
            [(s["framework"], s["category"], s["screeners"][name]["predicted"]) for s in have]
        )
        thresholds[name] = {
            cat: threshold_curve(
                [s["category"] for s in have], [s["screeners"][name]["scores"] for s in have], cat,
                [i / 20 for i in range(21)],
            )
            for cat in ("mme", "gcrde")
        }
    curves: dict[str, dict[str, list[float]]] = {}
    for method in methods:
        mine = [r for r in results if r.method == method]
        curves[method] = {
            cat: topk_curve([r for r in mine if r.category == cat], max_k) for cat in CATEGORIES
        }
    return {
        "issues": len(screened),
        "skipped": [{"line": s.line, "url": s.url, "reason": s.reason} for s in skipped],
        "methods": list(methods),
        "screening": screening,
        "screening_thresholds": thresholds,
        "localization": localization_table(results, paper_k=paper_k),
        "split_date": split_date,
        "localization_by_source": {
            source: localization_table([r for r in results if r.source == source], paper_k=paper_k)
            for source in sorted({r.source for r in results if r.source})
        },
        "localization_by_period": {
            period: localization_table([r for r in results if r.period == period], paper_k=paper_k)
            for period in ("before", "after") if split_date and any(r.period == period for r in results)
        },
        # figures on reports the ranker learned from are in-sample: those it never saw apart, every method on both
        "localization_by_exposure": {
            exposure: localization_table([r for r in results if r.learned == (exposure == "learned")],
                                         paper_k=paper_k)
            for exposure in ("learned", "unseen")
        } if any(r.learned for r in results) else {},
        # where the fix lies (Python files only, C/C++/CUDA only, both), and that within each period
        "localization_by_fix": {
            f"{kind}{'' if period == ALL else f', filed {period}'}": localization_table(
                [r for r in results if fix_kind(r.truth) == kind and period in (ALL, r.period)], paper_k=paper_k)
            for kind in FIX_KINDS for period in (ALL, "before", "after")
            if any(fix_kind(r.truth) == kind and period in (ALL, r.period) for r in results)
            and (period == ALL or split_date)
        },
        "topk_curves": curves,
        "paper_k": paper_k,
    }


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def render_markdown(summary: Mapping[str, Any], title: str = "sftl evaluation") -> str:
    """The report, laid out like the study's tables 2-4 with every method side by side."""
    out = [f"# {title}", ""]
    n_skipped = len(summary["skipped"])
    out.append(
        f"{summary['issues']} issues evaluated, {n_skipped} skipped. Screening: 'keywords' is the published "
        "keyword screener (its IDF fitted on this label file's texts, labels unused); 'learned', when asked "
        "for, is the learned screener scored out-of-fold (5-fold cross-validation over this file). Localization is scored on the issues "
        "labelled mme/gcrde that name truth files, each localized *as its labelled category* "
        "(so screening errors do not leak into Tables 3-4). Figures in %."
    )
    learned = summary.get("learned_from") or {}
    if learned.get("file_ranker") or learned.get("function_ranker"):
        out += ["", f"{learned.get('file_ranker', 0)} of these reports are among those sftl's file ranker learned "
                f"from, {learned.get('function_ranker', 0)} among the function ranker's: sftl's figures on them are "
                "in-sample. Tables 5 and 6 give the reports it never saw apart, every method on the same rows."]
    out += ["", "## Table 2 — screening", ""]
    out.append("| framework | category | screener | support | accuracy | precision | recall | F1 |")
    out.append("|---|---|---|---:|---:|---:|---:|---:|")
    tables = {name: t for name, t in summary["screening"].items() if t}
    frameworks = list(next(iter(tables.values()))) if tables else []
    for fw in frameworks:
        for cat in (*CATEGORIES, "overall"):
            for name, table in tables.items():
                m = table.get(fw)
                if m is None:
                    continue
                if cat == "overall":
                    out.append(
                        f"| {fw} | **overall** | {name} | {m['n']} | {_pct(m['accuracy'])} | "
                        f"{_pct(m['macro']['precision'])} | {_pct(m['macro']['recall'])} | {_pct(m['macro']['f1'])} |"
                    )
                    continue
                c = m["per_class"][cat]
                if not c["support"] and not c["predicted"]:
                    continue  # a category absent from truth and predictions says nothing
                out.append(
                    f"| {fw} | {cat} | {name} | {c['support']} | {_pct(c['accuracy'])} | {_pct(c['precision'])} | "
                    f"{_pct(c['recall'])} | {_pct(c['f1'])} |"
                )
    for name, table in summary["screening"].items():
        if not table:
            why = ("too few labelled issues per category to cross-validate it" if name == "learned"
                   else "no labelled issue to score it on")  # the keyword screener is fitted, never cross-validated
            out += ["", f"Screener '{name}' not scored: {why}."]
            continue
        m = table[ALL]
        out += ["", f"Confusion of '{name}' (all frameworks; rows = truth, columns = screened"
                + (f"; {m['abstained']} abstained" if m["abstained"] else "") + "):", ""]
        out.append("| truth \\ screened | " + " | ".join(m["labels"]) + " |")
        out.append("|---|" + "---:|" * len(m["labels"]))
        for label, row in zip(m["labels"], m["confusion"], strict=True):
            out.append(f"| {label} | " + " | ".join(str(v) for v in row) + " |")
    k = summary["paper_k"]
    for number, cat, name in ((3, "mme", "missing-module errors (MME)"), (4, "gcrde", "GPU/CPU discrepancies (GCRDE)")):
        out += ["", f"## Table {number} — localization of {name}", ""]
        out.append(
            f"| framework | method | n | top-1 | top-3 | top-5 | top-10 | MRR | MAP | abstain | "
            f"acc@{k} | P@{k} | R@{k} | F1@{k} |"
        )
        out.append("|---|---|---:|" + "---:|" * 11)
        frameworks = sorted(
            {cell.split("/")[0] for cells in summary["localization"].values() for cell in cells
             if cell.endswith("/" + cat) and not cell.startswith(ALL)}
        ) + [ALL]
        any_row = False
        for fw in frameworks:
            for method in summary["methods"]:
                m = summary["localization"].get(method, {}).get(f"{fw}/{cat}")
                if not m:
                    continue
                any_row = True
                p = m["paper"]
                out.append(
                    f"| {fw} | {method} | {m['n']} | {_pct(m['top']['1'])} | {_pct(m['top']['3'])} | "
                    f"{_pct(m['top']['5'])} | {_pct(m['top']['10'])} | {m['mrr']:.3f} | {m['map']:.3f} | "
                    f"{_pct(m['abstention_rate'])} | {_pct(p['accuracy'])} | {_pct(p['precision'])} | "
                    f"{_pct(p['recall'])} | {_pct(p['f1'])} |"
                )
        if not any_row:
            out.append("| — | — | 0 | | | | | | | | | | | |")
    periods = [("all rows", summary["localization"])]
    for source, table in (summary.get("localization_by_source") or {}).items():
        periods.append((f"from {source}", table))
    split = summary.get("split_date")
    for period, table in (summary.get("localization_by_period") or {}).items():
        periods.append((f"filed {'before' if period == 'before' else 'on or after'} {split}", table))
    exposure = summary.get("localization_by_exposure") or {}
    for name, label in (("learned", "the ranker learned from (in-sample)"), ("unseen", "the ranker never saw")):
        if name in exposure:
            periods.append((label, exposure[name]))
    for kind, table in (summary.get("localization_by_fix") or {}).items():
        periods.append((f"fix in {kind.replace('before', f'before {split}').replace('after', f'on or after {split}')}",
                        table))
    out += ["", "## Table 5 — localization of every report, by the category it counts in", "",
            "Rows without a label count in the category sftl screened them into; every row with truth files is "
            "scored, so a method that ranks nothing for a category scores 0 there.", ""]
    out.append("| rows | framework | category | method | n | top-1 | top-5 | top-10 | MRR | MAP | answered |")
    out.append("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, table in periods:
        cells = sorted({cell for cells in table.values() for cell in cells},
                       key=lambda c: (c.split("/")[0] == ALL, c.split("/")[0], c.split("/")[1] == ALL, c))
        for cell in cells:
            fw, cat = cell.split("/")
            for method in summary["methods"]:
                m = table.get(method, {}).get(cell)
                if not m:
                    continue
                out.append(
                    f"| {label} | {fw} | {cat} | {method} | {m['n']} | {_pct(m['top']['1'])} | {_pct(m['top']['5'])} | "
                    f"{_pct(m['top']['10'])} | {m['mrr']:.3f} | {m['map']:.3f} | {m['answered']} |"
                )
    out += [
        "",
        "Reading of the study's localization metrics (sftl/evaluate.py): a method *reports* its first "
        f"{k} suspect(s) when it locates, nothing when it abstains or is skipped; accuracy = share of issues "
        "whose report holds a truth file; precision = mean |report ∩ truth| / |report| over issues with a "
        "report; recall = mean |report ∩ truth| / |truth| over all issues; F1 = harmonic mean. Top-k, MRR "
        "and MAP count abstentions as misses.",
    ]
    if summary.get("functions"):
        from sftl.evaluate_functions import render_functions

        out += render_functions(summary["functions"], summary.get("split_date"))
    if summary["skipped"]:
        out += ["", "## Skipped", "", "| line | url | reason |", "|---:|---|---|"]
        for s in summary["skipped"]:
            out.append(f"| {s['line']} | {s['url'] or '—'} | {s['reason']} |")
    return "\n".join(out) + "\n"
