"""Functions within suspect files, learned and judged on the peer benchmarks' later reports: the function ranker
(sftl/localize/functions/) trained on the earlier reports, its Acc@1/@5 and MRR of a changed function beside BM25
over the same file's functions, validation (later reports) and training (earlier reports, 5-fold by report) apart.

Rows: Denchmark's TensorFlow reports (`method_info` of each fix hunk) and pt-agent-bench's PyTorch reports (the
patch's hunk headers and changed def lines), each truth file read at the report's release as `sftl eval` reads it
(`sources_for_report`, offline, home default /work/cache/home-bench). The truth is matched by name, never by line.
Figures are "given the truth file"; with `--eval DIR` (an `sftl eval` output folder per set: peer-denchmark,
peer-swebench) also within files sftl found among its first five suspects. Run that eval with a file ranker fitted
before the split (`SFTL_RANKER_MODEL`): the bundled one learned from these rows, and which files count as found
would then be in-sample.

Usage: `python bench/bench_functions.py [--home DIR] [--eval DIR] [--refit]`; `--refit` then trains on every row
and writes the bundled artefact sftl/data/function-ranker-v1.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PEER = ROOT.parent / "shared" / "data" / "peer"
SETS = {"denchmark": PEER / "denchmark", "swebench": PEER / "pt-agent-bench.jsonl"}
SPLIT = {"tensorflow": "2019-01-01", "pytorch": "2025-07-01"}
CXX = (".cc", ".h", ".cpp", ".cu", ".cuh", ".hpp", ".c")


def read_groups(home: Path, cache: Path) -> list[dict[str, Any]]:
    """One group per (report, truth file with a known changed function, readable at the report's release)."""
    if cache.is_file():
        return [json.loads(line) for line in cache.read_text(encoding="utf-8").splitlines() if line.strip()]
    os.environ.update(SFTL_HOME=str(home), SFTL_OFFLINE="1")
    from sftl.config import load_settings
    from sftl.errors import SftlError
    from sftl.evaluate import LabelRow, parse_labels
    from sftl.evaluate_formats import label_lines
    from sftl.evaluate_function_ranker import labelled_functions
    from sftl.extract import extract
    from sftl.github import issue_from_json
    from sftl.localize.candidates.report import read_report
    from sftl.localize.functions.features import function_evidence, gather_functions
    from sftl.sources import sources_for_report

    settings = load_settings()
    groups: list[dict[str, Any]] = []
    stats = {"rows": 0, "with_functions": 0, "unreadable": 0, "unmatched": 0, "groups": 0}
    unmatched: list[list[Any]] = []
    for name, path in SETS.items():
        rows, _ = parse_labels(label_lines(path))
        for row in rows:
            stats["rows"] += 1
            assert isinstance(row, LabelRow)
            if not row.truth_functions or row.issue is None:
                continue
            stats["with_functions"] += 1
            issue = issue_from_json(row.issue)
            extraction = extract(issue)
            env = extraction.environment
            env = replace(env, framework=row.framework or env.framework, version=row.version or env.version)
            extraction = replace(extraction, environment=env)
            framework = row.framework or "tensorflow"
            needs_cxx = any(p.endswith(CXX) for p in row.truth_functions)
            try:
                source = sources_for_report(extraction, settings, offline=True, needs_cxx=needs_cxx,
                                            created_at=row.created_at or None).provider
            except SftlError:
                source = None
            if source is None:
                stats["unreadable"] += len(row.truth_functions)
                continue
            evidence = function_evidence(read_report(issue, extraction, framework), issue, extraction)
            for file, truth in row.truth_functions.items():
                try:
                    text = source.read_text(file)
                except SftlError:
                    text = None
                if not text:
                    stats["unreadable"] += 1
                    continue
                found = labelled_functions(evidence, file, text, truth)
                if found is None:  # renamed or new since the release, or no function at all there
                    stats["unmatched"] += 1
                    unmatched.append([row.url, file, list(truth)[:4], len(gather_functions(evidence, file, text))])
                    continue
                fns, labels = found
                stats["groups"] += 1
                period = "after" if row.created_at[:10] >= SPLIT[framework] else "before"
                groups.append({"key": row.key, "set": name, "url": row.url, "path": file, "period": period,
                               "filed": row.created_at,
                               "framework": framework, "truth": list(truth), "names": [f.span.name for f in fns],
                               "rows": [f.vector() for f in fns], "labels": labels})
            print(f"\r{name}: {stats}", end="", file=sys.stderr)
    print(file=sys.stderr)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text("".join(json.dumps(g) + "\n" for g in groups), encoding="utf-8")
    (cache.with_suffix(".stats.json")).write_text(json.dumps({**stats, "unmatched_files": unmatched}, indent=0),
                                                  encoding="utf-8")
    return groups


def as_group(g: dict[str, Any]) -> Any:
    from sftl.evaluate_function_ranker import FunctionGroup

    return FunctionGroup(url=g["url"], framework=g["framework"], filed=g["filed"], path=g["path"],
                         names=tuple(g["names"]), rows=tuple(tuple(r) for r in g["rows"]), labels=tuple(g["labels"]),
                         evaluation=g["set"])


def file_ranks(eval_dir: Path) -> dict[tuple[str, str], int]:
    """(report URL, path) -> the file's rank among sftl's suspects, from `sftl eval` checkpoints of any of the peer
    sets (Denchmark's, pt-agent-bench's or the report rows' `peer_given.jsonl`: their rows' keys differ)."""
    from sftl.evaluate import LabelRow, parse_labels
    from sftl.evaluate_formats import label_lines

    url_of: dict[str, str] = {}
    for path in (*SETS.values(), PEER / "peer_given.jsonl"):
        if path.exists():
            rows, _ = parse_labels(label_lines(path))
            url_of.update({r.key: r.url for r in rows if isinstance(r, LabelRow)})
    out: dict[tuple[str, str], int] = {}
    for ck in sorted(eval_dir.glob("peer-*/checkpoint.jsonl")):
        for line in ck.read_text(encoding="utf-8").splitlines():
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            url = url_of.get(obj.get("key", ""))
            if obj.get("method") != "sftl" or url is None:
                continue
            for r, s in enumerate(obj.get("suspects") or [], 1):
                out.setdefault((url, s[0]), r)
            out.setdefault((url, ""), 0)  # the report was ranked
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, default=Path(os.environ.get("SFTL_BENCH_HOME", "/work/cache/home-bench")))
    ap.add_argument("--cache", type=Path, default=Path("/work/cache/functions/groups.jsonl"))
    ap.add_argument("--eval", type=Path, help="sftl eval output folders (peer-*/checkpoint.jsonl): the file ranks")
    ap.add_argument("--refit", action="store_true", help="train on every row and write the bundled artefact")
    args = ap.parse_args(argv)
    if not PEER.is_dir():
        print(f"no peer data at {PEER}: nothing to measure")
        return 0
    from sftl.evaluate_function_ranker import bm25_scores, fit_functions, judge, truth_rank

    groups = [as_group(g) for g in read_groups(args.home, args.cache)]
    model, figures = fit_functions(groups, SPLIT)
    report: dict[str, Any] = {
        "training (earlier reports, 5-fold by report)": figures["train"],
        "validation (later reports, given the truth file)": figures["validation"],
        **{f"validation {fw}": cell for fw, cell in figures["validation_by_framework"].items()},
    }
    if args.eval:  # only the rows the eval ranked files for count: the others' file rank is unknown
        valid = [g for g in groups if g.filed[:10] >= SPLIT[g.framework]]
        found = file_ranks(args.eval)
        seen = [g for g in valid if (g.url, "") in found]
        hit = [g for g in seen if found.get((g.url, g.path), 99) <= 5]
        within = judge(hit, model)

        def share(ranks: list[int]) -> float:  # file among the first five and function among its first five
            return round(sum(r <= 5 for r in ranks) / max(len(seen), 1), 3)

        report["validation, truth file among sftl's first five suspects"] = {
            **within, "files_ranked": len(seen), "reports_ranked": len({g.url for g in seen}),
            "both@5": {"sftl": share([truth_rank(model.predict([list(r) for r in g.rows]), g.labels) for g in hit]),
                       "bm25": share([truth_rank(bm25_scores(g), g.labels) for g in hit])}}
    print(json.dumps(report, indent=1))
    if args.refit:
        final, _ = fit_functions(groups, SPLIT, refit_all=True)
        final.provenance = {**final.provenance, "validation": figures["validation"], "split": SPLIT,
                            "script": "bench/bench_functions.py --refit"}
        target = ROOT / "sftl" / "data" / "function-ranker-v1.json"
        final.save(target)
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
