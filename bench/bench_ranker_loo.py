"""Real GCRDE rows through the pipeline in-process: per-row ranks, figures per framework, and the learned ranker leave-one-out.

Each GCRDE row of ../shared/data/dev/real_localize.jsonl and localize.jsonl becomes a GitHub issue
(title, the code fenced, the observed output, the version in the tracker's template; never the
row's summary, fix or truth fields), runs through `sftl.pipeline.locate` (extract -> screen ->
sources -> localize, as `sftl locate --offline` does) against an SFTL_HOME holding the release
wheels and the Debian trees (`bench/real_sources.py` provisions one), and is scored against the
row's truth files. `--loo` also scores the learned GCRDE ranker leave-one-out: each row reranked by
a model trained on the other rows only.

Usage: `python bench/bench_ranker_loo.py [--home DIR] [--method sftl|paper] [--given] [--loo [--fit ARTEFACT]]
[--labels LABELS.jsonl | --export-labels OUT.jsonl] [--json OUT] [--rows N,M]`. `--given` localizes every row
as a GCRDE whatever the screener says (the localizer alone); without it, rows screened otherwise count as
misses. `--labels` reads an `sftl eval` label file (rows with an inline `issue`), so the ranker is
retrained from any labelled set: `--labels L.jsonl --given --loo --fit sftl/data/gcrde-ranker-v1.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "dev"
FILES = ("real_localize.jsonl", "localize.jsonl")


def rows(category: str = "gcrde") -> list[dict[str, Any]]:
    out = []
    for name in FILES:
        path = DATA / name
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                if row.get("category") == category:
                    row["_set"] = name
                    out.append(row)
    return out


def compose(row: dict[str, Any], n: int) -> dict[str, Any]:
    """The GitHub issue object a reporter would have filed: title, code, output, version; nothing the fix says."""
    fw = row.get("framework") or "pytorch"
    parts = ["### 🐛 Describe the bug" if fw == "pytorch" else "**Describe the current behavior**", ""]
    if row.get("code"):
        parts += ["```python", str(row["code"]).strip("\n"), "```", ""]
    if row.get("observed"):
        parts += ["Output:", "", "```", str(row["observed"]).strip("\n"), "```", ""]
    if row.get("traceback"):
        parts += ["```", str(row["traceback"]).strip("\n"), "```", ""]
    version = row.get("version")
    if version:
        parts += ["### Versions", "", f"{'PyTorch' if fw == 'pytorch' else 'TensorFlow'} version: {version}"]
    repo = "pytorch/pytorch" if fw == "pytorch" else "tensorflow/tensorflow"
    url = str(row.get("url") or "")
    try:
        number = int(url.rstrip("/").rsplit("/", 1)[-1])
    except ValueError:
        number = 900000 + n
    return {
        "url": f"https://api.github.com/repos/{repo}/issues/{number}",
        "repository_url": f"https://api.github.com/repos/{repo}",
        "html_url": url or f"https://github.com/{repo}/issues/{number}",
        "number": number, "title": row["title"], "body": "\n".join(parts), "state": "closed",
        "labels": [], "user": {"login": "reporter"}, "comments": 0,
        "created_at": "", "updated_at": "", "closed_at": None,
    }


def rank_of(paths: list[str], truth: list[str]) -> int | None:
    for i, p in enumerate(paths, 1):
        if p in truth:
            return i
    return None


def metrics(ranks: list[int | None]) -> dict[str, float]:
    n = len(ranks) or 1
    out = {f"top{k}": sum(1 for r in ranks if r is not None and r <= k) / n for k in (1, 3, 5, 10)}
    out["mrr"] = sum(1.0 / r for r in ranks if r is not None) / n
    out["n"] = len(ranks)
    return out


LAYERED = True
TREES_BY_YEAR = False  # --trees: a versionless row gets the tree nearest its year as --source-root
TREES = Path(os.environ.get("SFTL_TREES", "/work/cache/trees"))


def tree_for(row: dict[str, Any]) -> Path | None:
    """`--source-root` for a row whose version names no release (the tree nearest its year); None: the pipeline's own
    sources (the release's wheel layered over the nearest registered tree), and always for TensorFlow."""
    import re

    if (row.get("framework") or "pytorch") != "pytorch":
        return None
    text = str(row.get("version") or "")
    old = TREES / "pytorch-1.13.1"
    new = TREES / "pytorch-v2.6.0"
    m = re.search(r"\b(\d+)\.(\d+)", text)
    if m and int(m.group(1)) < 10 and LAYERED:
        return None
    if m and int(m.group(1)) < 10:
        return old if int(m.group(1)) < 2 else new
    y = re.search(r"\b(20\d\d)\b", text)
    if y:
        return old if int(y.group(1)) <= 2022 else new
    return new


def run_rows(selected: list[dict[str, Any]], home: Path, method: str, top: int, given: bool = False) -> list[dict[str, Any]]:
    """Each row through the pipeline; `given`: localize as a GCRDE whatever the screener says (the localizer alone)."""
    from dataclasses import replace

    from sftl.config import load_settings
    from sftl.github import issue_from_json
    from sftl.model import Category
    from sftl.pipeline import locate
    from sftl.store import Store

    try:
        from sftl.localize import ranker

        ranker.use(None)  # the hand ranking: the learned one is measured leave-one-out on top of it
    except ImportError:  # an older checkout (PYTHONPATH=...) without the learned ranker
        pass
    settings = load_settings(home=str(home), offline=True)
    results = []
    try:  # the benchmark's own composition (bench/real_compose.py), dated so the product picks the release
        sys.path.insert(0, str(ROOT / "bench"))
        from real_compose import compose_issue, number_anchors

        anchors = number_anchors(rows("gcrde") + rows("mme"))

        def composed(row: dict[str, Any], n: int) -> dict[str, Any]:
            return compose_issue(row, anchors)
    except ImportError:
        composed = compose
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "bench.db")
        for n, row in enumerate(selected):
            issue = issue_from_json(row["issue"] if row.get("issue") else composed(row, n))
            root = row.get("source_root") or (tree_for(row) if TREES_BY_YEAR else None)
            report = locate(issue, settings, store, method=method, top=top, offline=True, rescreen=True,
                            source_root=root)
            if given and report.screening.category != Category.GCRDE:
                store.save_screening(issue.repo, issue.number, replace(
                    report.screening, category=Category.GCRDE), fingerprint=issue.fingerprint)
                screened = report.screening.category
                report = locate(issue, settings, store, method=method, top=top, offline=True, source_root=root)
                report = replace(report, screening=replace(report.screening, category=screened))
            loc = report.localization
            paths = [s.path for s in loc.suspects]
            results.append({
                "url": row.get("url"), "framework": row.get("framework") or "pytorch",
                "inferred": str(row.get("truth_evidence", "")).startswith("INFERRED") or bool(row.get("truth_inferred")),
                "category": report.screening.category.value, "outcome": loc.outcome.value,
                "rank": rank_of(paths, list(row.get("truth_files") or ())), "top3": paths[:3],
                "suspects": [{"path": s.path, "score": s.score, "side": s.side.value if s.side else None,
                              "features": dict(getattr(s, "features", {}) or {}), "reason": s.reason}
                             for s in loc.suspects],
                "truth": list(row.get("truth_files") or ()), "reason": loc.reason[:300],
            })
    return results


def summary(results: list[dict[str, Any]], key: str = "rank") -> dict[str, dict[str, float]]:
    out = {}
    for fw in ("pytorch", "tensorflow"):
        out[fw] = metrics([r[key] for r in results if r["framework"] == fw])
    out["all"] = metrics([r[key] for r in results])
    return out


def label_rows(path: Path) -> list[dict[str, Any]]:
    """GCRDE rows of a label file in the format `sftl eval` reads (url, category, truth_files, issue, source_root)."""
    from sftl.evaluate import parse_labels

    good, _ = parse_labels(path.read_text(encoding="utf-8").splitlines())
    return [{"url": r.url, "framework": r.framework or ("tensorflow" if "tensorflow" in r.url else "pytorch"),
             "category": r.category, "truth_files": list(r.truth_files), "issue": r.issue,
             "source_root": r.source_root, "title": (r.issue or {}).get("title", "")}
            for r in good if r.category == "gcrde" and r.truth_files]


def export_labels(selected: list[dict[str, Any]], out: Path) -> None:
    """The rows as an `sftl eval` label file (issue composed inline): what `--labels` retrains from."""
    try:
        sys.path.insert(0, str(ROOT / "bench"))
        from real_compose import compose_issue, number_anchors

        anchors = number_anchors(rows("gcrde") + rows("mme"))
        issue_of = lambda row, n: compose_issue(row, anchors)  # noqa: E731
    except ImportError:
        issue_of = compose
    with out.open("w", encoding="utf-8") as fh:
        for n, row in enumerate(selected):
            fh.write(json.dumps({"url": row.get("url"), "category": "gcrde", "truth_files": row.get("truth_files"),
                                 "framework": row.get("framework"), "issue": issue_of(row, n)}) + "\n")


def fit_artefact(results: list[dict[str, Any]], figures: dict[str, Any], out: Path, l2: float) -> dict[str, Any]:
    """Fit on every row and write the versioned artefact: weights, provenance (URLs only), LOO figures, active flag."""
    from sftl.localize.gcrde.features import FEATURES
    from sftl.localize.ranker import LinearRanker, groups_from_results

    model = LinearRanker(l2=l2).fit(groups_from_results(results), FEATURES)
    hand, loo = figures["hand"]["pytorch"], figures["learned (LOO)"]["pytorch"]
    beats = (loo["top1"], loo["mrr"]) > (hand["top1"], hand["mrr"])
    obj = model.to_json(
        active=beats,
        trained_on=[r["url"] for r in results if r["framework"] == "pytorch"],
        training="real GCRDE rows (../shared/data/dev real_localize.jsonl + localize.jsonl), PyTorch, through "
                 "sftl.pipeline.locate with the hand ranking's 30 candidates; pairwise logistic, shrunk to the hand order",
        leave_one_out={"hand": hand, "learned": loo},
        note=("applied: it beat the hand ranking leave-one-out" if beats else
              "not applied: leave-one-out it does not beat the hand ranking (kept for retraining on more rows)"),
    )
    out.write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return obj


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", default=os.environ.get("SFTL_BENCH_HOME", "/work/cache/home-gcrde"))
    ap.add_argument("--method", default="sftl", choices=("sftl", "paper"))
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--rows", default="", help="comma-separated row indexes to run")
    ap.add_argument("--given", action="store_true", help="localize every row as a GCRDE (the localizer alone)")
    ap.add_argument("--loo", action="store_true", help="also score the learned ranker leave-one-out")
    ap.add_argument("--json", default="", help="write per-row results here")
    ap.add_argument("--trees", action="store_true", help="versionless rows: the tree nearest their year")
    ap.add_argument("--labels", default="", help="an `sftl eval` label file to read the rows from instead")
    ap.add_argument("--export-labels", default="", help="write the rows as an `sftl eval` label file and stop")
    ap.add_argument("--fit", default="", help="with --loo: fit on all rows and write the ranker artefact here")
    ap.add_argument("--l2", type=float, default=3.0, help="the ranker's shrinkage toward the hand order")
    args = ap.parse_args(argv)
    global TREES_BY_YEAR
    TREES_BY_YEAR = args.trees
    selected = label_rows(Path(args.labels)) if args.labels else rows()
    if args.rows:
        keep = {int(x) for x in args.rows.split(",")}
        selected = [r for i, r in enumerate(selected) if i in keep]
    if args.export_labels:
        export_labels(selected, Path(args.export_labels))
        return 0
    results = run_rows(selected, Path(args.home), args.method, args.top, given=args.given)
    for i, r in enumerate(results):
        print(f"{i:2d} {r['framework'][:2]} {r['category']:5s} {str(r['rank']):>4s} {r['url'].rsplit('/', 1)[-1] if r['url'] else '':>6s}"
              f"  truth={','.join(t.rsplit('/', 1)[-1] for t in r['truth'])[:60]}  top3={', '.join(p.rsplit('/', 1)[-1] for p in r['top3'])}")
    figures = {"hand": summary(results)}
    if args.loo:
        from sftl.localize.ranker import loo_ranks

        for r, lr in zip(results, loo_ranks(results, l2=args.l2), strict=True):
            r["loo_rank"] = lr
        figures["learned (LOO)"] = summary(results, "loo_rank")
    for name, fig in figures.items():
        for fw, m in fig.items():
            print(f"{args.method} {name:14s} {fw:10s} n={m['n']:2.0f} top1={m['top1']:.2f} top3={m['top3']:.2f} "
                  f"top5={m['top5']:.2f} top10={m['top10']:.2f} mrr={m['mrr']:.3f}")
    if args.fit and args.loo:
        obj = fit_artefact(results, figures, Path(args.fit), args.l2)
        print(f"wrote {args.fit}: {obj['note']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"figures": figures, "rows": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
