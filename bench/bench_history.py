"""The history prior's benchmarks: locate's cost with 10,000 fix records, the crawl of a recorded backlog, the prior alone on the real rows.

    .venv/bin/python bench/bench_history.py speed      # sftl locate with 10,000 records vs --no-history (CLI start included)
    .venv/bin/python bench/bench_history.py crawl      # history crawl of a backlog built from the shared corpus
    .venv/bin/python bench/bench_history.py prior      # the prior alone on the real rows (time rule), top-1/5
    .venv/bin/python bench/bench_history.py compare WITH.json WITHOUT.json   # two bench_real.py --json runs

`speed` builds 10,000 records by recombining the shared corpus (titles, ops, files, dates 2016-2026),
imports them into a fresh SFTL_HOME and times `sftl locate ISSUE.json --offline --json` on the demo
histc report over the mini tree, alternating with and without `--no-history`.
`crawl` serves, on the loopback GitHub of tests/ghserver.py, one closed issue per record of the shared
corpus that names its issue, each fixed the way real fixes show (a merged PR cross-referencing it, a
PR body saying Fixes #N, a commit closing it, a reverted PR and its reland, unmerged attempts, PRs of
several pages of files, one PR fixing two issues), plus 30 closed issues without a fix (half closed as not planned), and checks that
`history crawl` finds every fix exactly once; it prints the requests per fixed issue.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"
CORPUS = SHARED / "history" / "pytorch_fixes.jsonl"
DEV = SHARED / "dev"
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
SFTL = [str(ROOT / ".venv" / "bin" / "sftl")] if (ROOT / ".venv" / "bin" / "sftl").exists() else [sys.executable, "-m", "sftl"]


def corpus() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


def synthetic(n: int, seed: int = 7) -> list[dict[str, Any]]:
    """`n` records recombined from the shared corpus: its titles' words, ops, files; dates 2016-2026."""
    rng = random.Random(seed)
    base = corpus()
    words = [w for r in base for w in r["title"].split()]
    out = []
    for i in range(n):
        r = base[i % len(base)]
        title = " ".join(rng.sample(words, 8))
        out.append({**r, "issue": 200_000 + i, "pr": 400_000 + i, "commit": None, "title": title,
                    "ops": rng.sample([o for x in base for o in x["ops"]], 2),
                    "files": [rng.choice([f for x in base for f in x["files"]]) for _ in range(rng.randint(1, 3))],
                    "fixed_on": f"{rng.randint(2016, 2026)}-{rng.randint(1, 12):02d}"})
    return out


_CPU: dict[str, list[float]] = {}


def _time(argv: list[str], env: dict[str, str], tag: str = "") -> float:
    """Wall seconds of one run; its CPU seconds (user + system, less sensitive to a busy machine) go to _CPU[tag]."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    _CPU.setdefault(tag, []).append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    if done.returncode not in (0, 8):
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.strip()[-300:]}")
    return seconds


def bench_speed(records: int, repeats: int) -> dict[str, Any]:
    issue = ROOT / "fixtures" / "demo" / "gcrde_histc_cpu_vs_cuda.json"
    tree = ROOT / "fixtures" / "sources" / "mini_pytorch"
    with tempfile.TemporaryDirectory(prefix="sftl-bench-history-") as tmp:
        home = Path(tmp) / "home"
        env = {**os.environ, "SFTL_HOME": str(home)}
        data = Path(tmp) / "fixes.jsonl"
        data.write_text("\n".join(json.dumps(r) for r in synthetic(records)) + "\n", encoding="utf-8")
        started = time.perf_counter()
        subprocess.run([*SFTL, "history", "import", str(data)], capture_output=True, env=env, check=True)
        imported = time.perf_counter() - started
        argv = [*SFTL, "locate", str(issue), "--source-root", str(tree), "--offline", "--json"]
        _time(argv, env)  # index and screening built once, outside the timing
        with_h: list[float] = []
        without: list[float] = []
        for _ in range(repeats):
            with_h.append(_time(argv, env, "with"))
            without.append(_time([*argv, "--no-history"], env, "without"))
        done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        reason = json.loads(done.stdout)["reason"]
        in_process = _prior_seconds(home, issue, tree, repeats * 3)
    med_with, med_without = statistics.median(with_h), statistics.median(without)
    return {"records": records, "import_s": round(imported, 2), "repeats": repeats,
            "with_history_s": round(med_with, 3), "without_s": round(med_without, 3),
            "overhead_s": round(med_with - med_without, 3), "target_overhead_s": 0.2,
            "overhead_best_of_s": round(min(with_h) - min(without), 3),  # the fastest run of each: least disturbed
            "prior_in_process_s": in_process,
            "cpu_with_s": round(statistics.median(_CPU["with"]), 3), "cpu_without_s": round(statistics.median(_CPU["without"]), 3),
            "cpu_overhead_s": round(statistics.median(_CPU["with"]) - statistics.median(_CPU["without"]), 3),
            "runs_with": [round(x, 3) for x in with_h], "runs_without": [round(x, 3) for x in without],
            "history_note": reason[reason.find("(history:"):][:160]}


def _prior_seconds(home: Path, issue_file: Path, tree: Path, repeats: int) -> float:
    """Median seconds of the prior itself (kept index read, similarity, mapping) in this process."""
    from sftl.config import load_settings
    from sftl.extract import extract
    from sftl.github import issue_from_json
    from sftl.history_io import history_prior
    from sftl.sources import LocalTree
    from sftl.store import Store

    settings = load_settings({}, home=home)
    issue = issue_from_json(json.loads(issue_file.read_text(encoding="utf-8")))
    extraction = extract(issue)
    files = LocalTree(tree, "pytorch").list_files()
    runs = []
    with Store(settings.db_path) as store:
        for _ in range(repeats):
            started = time.perf_counter()
            history_prior(store, issue, extraction, "pytorch", files, settings.cache_dir)
            runs.append(time.perf_counter() - started)
    return round(statistics.median(runs), 4)


# -- the crawl of a recorded backlog -------------------------------------------------------------


def serve_backlog(gh: Any, repo: str, seed: int = 11) -> dict[int, str]:
    """The shared corpus as a tracker: issue -> the fix to be found ("pr:N" / "commit:SHA")."""
    from ghserver import make_commit_event, make_cross_reference, make_issue, make_pull

    rng = random.Random(seed)
    recs = [r for r in corpus() if r.get("issue")]
    expected: dict[int, str] = {}
    issues = []
    next_pr = 900_000
    shared_pr: dict[str, Any] | None = None
    for i, r in enumerate(recs):
        n = int(r["issue"])
        if n in expected:
            continue
        issues.append(make_issue(repo, n, state="closed", title=r["title"], updated_at="2024-01-01T00:00:00Z",
                                 body=f"{', '.join(r['ops'])} misbehaves on {r.get('device') or 'cpu'}"))
        files = [*r["files"], "test/test_ops.py"]
        way = i % 6
        merged = f"{r['fixed_on'][:7]}-15T00:00:00Z"
        pr_no = int(r["pr"]) if r.get("pr") else None
        if way == 5 and r.get("commit") is None and pr_no is None or way == 4:  # a commit closed it, no PR
            sha = f"{rng.getrandbits(160):040x}"
            gh.add_commit_detail(repo, sha, merged, files)
            gh.add_timeline(repo, n, [make_commit_event("referenced", sha), make_commit_event("closed", sha)])
            expected[n] = f"commit:{sha}"
            continue
        if pr_no is None:
            next_pr += 1
            pr_no = next_pr
        if way == 3 and shared_pr is not None:  # one PR's body fixes this issue and the previous one of its kind
            shared_pr["body"] += f"\nFixes #{n}"
            gh.add_timeline(repo, n, [make_commit_event("closed", None)])
            expected[n] = f"pr:{shared_pr['number']}"
            shared_pr = None
            continue
        pull = make_pull(repo, pr_no, title=r["title"], merged_at=merged, body="" if way != 2 else f"Fixes #{n}")
        big = files + [f"aten/src/ATen/native/Extra{k}.cpp" for k in range(150)] if way == 1 else files
        gh.add_pull(repo, pull, big)
        events: list[dict[str, Any]] = []
        if way == 0:  # an unmerged attempt first
            next_pr += 1
            attempt = make_pull(repo, next_pr, title=f"Attempt: {r['title']}", merged_at=None)
            gh.add_pull(repo, attempt, ["aten/src/ATen/native/Wrong.cpp"])
            events.append(make_cross_reference(repo, attempt))
        if way == 2 and i % 12 == 2:  # merged, reverted, relanded
            next_pr += 2
            first = make_pull(repo, next_pr - 1, title=f"First go: {r['title']}", merged_at=merged)
            revert = make_pull(repo, next_pr, title=f'Revert "First go: {r["title"]}"', merged_at=merged)
            gh.add_pull(repo, first, ["aten/src/ATen/native/Old.cpp"])
            gh.add_pull(repo, revert, ["aten/src/ATen/native/Old.cpp"])
            events += [make_cross_reference(repo, first), make_commit_event("closed", None),
                       make_cross_reference(repo, revert), make_commit_event("reopened", None)]
        if way != 2:
            events.append(make_cross_reference(repo, pull))
        events.append(make_commit_event("closed", None))
        gh.add_timeline(repo, n, events)
        expected[n] = f"pr:{pr_no}"
        if way == 3 or shared_pr is None:
            shared_pr = pull if way in (0, 1) else shared_pr
    # closed issues without a fix, and open ones
    base = max(expected) + 1
    unfixed = [make_issue(repo, base + k, state="closed", updated_at="2024-01-01T00:00:00Z") for k in range(30)]
    for obj in unfixed[::2]:
        obj["state_reason"] = "not_planned"  # half of them closed as duplicates / won't fix
    issues += unfixed
    issues += [make_issue(repo, base + 100 + k, state="open") for k in range(20)]
    gh.add_issues(repo, issues)
    return expected


def bench_crawl() -> dict[str, Any]:
    from ghserver import GitHubServer

    from sftl.config import load_settings
    from sftl.history_crawl import crawl_fixes
    from sftl.history_io import iter_fixes
    from sftl.store import Store

    repo = "pytorch/pytorch"
    with GitHubServer() as gh, tempfile.TemporaryDirectory(prefix="sftl-bench-crawl-") as tmp:
        expected = serve_backlog(gh, repo)
        s = load_settings({}, home=Path(tmp), api_url=gh.url, max_retries=1, backoff_base=0.01)
        with Store(s.db_path) as store:
            started = time.perf_counter()
            stats = crawl_fixes(repo, s, store)
            seconds = time.perf_counter() - started
            got: dict[int, list[str]] = {}
            for rec in iter_fixes(store, repo):
                got.setdefault(int(rec.issue or 0), []).append(f"pr:{rec.pr}" if rec.pr else f"commit:{rec.commit}")
            rerun = crawl_fixes(repo, s, store)
    missing = sorted(n for n in expected if n not in got)
    wrong = sorted(n for n in expected if n in got and got[n] != [expected[n]])
    extra = sorted(n for n in got if n not in expected)
    return {"issues_closed": stats.issues_examined + stats.issues_not_planned, "not_planned": stats.issues_not_planned,
            "fixes_expected": len(expected), "fixes_found": stats.fixes_stored,
            "found_exactly_once": not missing and not wrong and not extra, "missing": missing[:10], "wrong": wrong[:10],
            "extra": extra[:10], "requests": stats.requests,
            "requests_per_fixed_issue": round(stats.requests_per_fixed_issue, 2), "seconds": round(seconds, 2),
            "rerun_requests": rerun.requests, "rerun_examined": rerun.issues_examined}


# -- the prior alone on the real rows ------------------------------------------------------------


def bench_prior(trees: Sequence[Path]) -> dict[str, Any]:
    """The prior's own ranking (no content evidence) on every real row: does it hold a truth file in its top 1/5?"""
    from real_compose import compose_issue, number_anchors

    from sftl.extract import extract
    from sftl.github import issue_from_json
    from sftl.history import compute_prior, fix_terms, parse_fix

    recs = [parse_fix(r) for r in corpus()]
    cands = [(r, fix_terms(r)) for r in recs]
    files: set[str] = set()
    for tree in trees:
        for dirpath, dirnames, names in os.walk(tree):
            dirnames[:] = [d for d in dirnames if d not in (".git", "third_party", "test", "docs")]
            rel = Path(dirpath).relative_to(tree).as_posix()
            files.update(f"{rel}/{n}" if rel != "." else n for n in names)
    tree_files = sorted(files)
    rows = []
    for name in ("real_localize.jsonl", "localize.jsonl"):
        raw = [json.loads(x) for x in (DEV / name).read_text(encoding="utf-8").splitlines() if x.strip()]
        anchors = number_anchors(raw)
        for row in raw:
            issue = issue_from_json(compose_issue(row, anchors))
            prior = compute_prior(issue, extract(issue), [c for c in cands if c[0].repo.startswith(row["framework"])], tree_files)
            ranked = [f.path for f in prior.files]
            truth = set(row["truth_files"])
            rank = next((i for i, p in enumerate(ranked, 1) if p in truth), None)
            rows.append({"url": row["url"], "framework": row["framework"], "category": row["category"],
                         "filed": issue.created_at[:10], "neighbours": len(prior.neighbours), "rank": rank,
                         "best": prior.neighbours[0].describe() if prior.neighbours else "",
                         "truth_changed_by_earlier_fix": bool(truth & {f for c, _ in cands for f in c.files
                                                                      if c.fixed_on < issue.created_at[:10]})})
    cells: dict[str, dict[str, Any]] = {}
    for r in rows:
        for key in (f"{r['framework']}/{r['category']}", "all"):
            c = cells.setdefault(key, {"n": 0, "with_prior": 0, "top1": 0, "top5": 0, "truth_in_earlier_fixes": 0})
            c["n"] += 1
            c["with_prior"] += r["neighbours"] > 0
            c["top1"] += r["rank"] == 1
            c["top5"] += r["rank"] is not None and r["rank"] <= 5
            c["truth_in_earlier_fixes"] += r["truth_changed_by_earlier_fix"]
    return {"cells": cells, "rows": rows}


def compare(with_path: Path, without_path: Path) -> dict[str, Any]:
    """Top-1/top-5 per framework x category of two bench_real.py --json runs, and the rows that moved."""
    def load(path: Path) -> dict[str, dict[str, Any]]:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {f"{r['key']}|{r['method']}": r for r in data["results"]}

    a, b = load(with_path), load(without_path)
    cells: dict[str, dict[str, Any]] = {}
    moved = []
    for key in sorted(set(a) & set(b)):
        ra, rb = a[key], b[key]
        for cell in (f"{ra['framework']}/{ra['category']}", "all"):
            c = cells.setdefault(cell, {"n": 0, "top1_with": 0, "top1_without": 0, "top5_with": 0, "top5_without": 0})
            c["n"] += 1
            for tag, r in (("with", ra), ("without", rb)):
                rank = r.get("rank")
                c[f"top1_{tag}"] += rank == 1
                c[f"top5_{tag}"] += rank is not None and rank <= 5
        touched = [i for i, x in enumerate(ra.get("suspects") or [], 1) if "changed by " in str(x.get("reason"))]
        if ra.get("rank") != rb.get("rank") or touched:
            moved.append({"row": key, "rank_with": ra.get("rank"), "rank_without": rb.get("rank"),
                          "prior_lifted_ranks": touched})
    return {"cells": cells, "moved": moved}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    sp = sub.add_parser("speed")
    sp.add_argument("--records", type=int, default=10_000)
    sp.add_argument("--repeats", type=int, default=5)
    sub.add_parser("crawl")
    pp = sub.add_parser("prior")
    pp.add_argument("--tree", type=Path, action="append",
                    help="source trees to map the prior onto (default: the Debian 2.6.0 and 1.13.1 trees)")
    pp.add_argument("--rows", action="store_true", help="print every row")
    cp = sub.add_parser("compare")
    cp.add_argument("with_history", type=Path)
    cp.add_argument("without_history", type=Path)
    args = ap.parse_args(argv)
    if args.what == "speed":
        out = bench_speed(args.records, args.repeats)
    elif args.what == "crawl":
        out = bench_crawl()
    elif args.what == "prior":
        trees = args.tree or [Path("/work/cache/trees/pytorch-v2.6.0"), Path("/work/cache/trees/pytorch-1.13.1")]
        out = bench_prior([t for t in trees if t.is_dir()])
        if not args.rows:
            out = {"cells": out["cells"], "rows_with_a_hit": [r for r in out["rows"] if r["rank"]]}
    else:
        out = compare(args.with_history, args.without_history)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
