"""Triage throughput: issues per minute for screen+locate on this machine, local pool vs Ray, and the
per-issue cost profile that says how the work would split across N workers."""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from sftl import triage
from sftl.config import load_settings
from sftl.github import issue_from_json
from sftl.store import Store

ROOT = Path(__file__).resolve().parent.parent
N_ISSUES = int(sys.argv[1]) if len(sys.argv) > 1 else 120


def synthetic_backlog(n: int) -> list:
    """n issues made from the fixture backlog and the demo fixtures, each with its own number and text."""
    seeds = [json.loads(line) for line in (ROOT / "fixtures/triage/backlog.jsonl").read_text().splitlines()]
    seeds += [json.loads(p.read_text()) for p in sorted((ROOT / "fixtures/demo").glob("*.json"))]
    issues = []
    for i in range(n):
        base = issue_from_json(seeds[i % len(seeds)])
        issues.append(replace(base, number=500000 + i, body=base.body + f"\n\n(report {i})",
                              updated_at=f"2026-11-{1 + i % 28:02d}T00:00:00Z"))
    return issues


def run(executor: str, jobs: int, issues: list, home: Path) -> tuple[float, list[float]]:
    settings = load_settings(home=home, offline=True)
    with Store(settings.db_path) as store:
        screener = triage.fit_screener(issues)
        t0 = time.perf_counter()
        stats = triage.triage_issues(issues, settings, store, repo="pytorch/pytorch", executor=executor,
                                     jobs=jobs, screener=screener)
        wall = time.perf_counter() - t0
    assert stats.failed == 0, [r["reason"] for r in stats.rows if r["outcome"] == "error"][:3]
    return wall, [r["seconds"] for r in stats.rows]


def main() -> None:
    issues = synthetic_backlog(N_ISSUES)
    print(f"{len(issues)} issues (screen + locate, offline, installed torch 2.13.0 sources)")
    results = {}
    for executor, jobs in (("local", 1), ("local", 2), ("ray", 2)):
        with tempfile.TemporaryDirectory() as home:
            try:
                wall, per_issue = run(executor, jobs, issues, Path(home))
            except Exception as exc:  # e.g. Ray missing: report and go on
                print(f"{executor:5} x{jobs}: failed: {exc}")
                continue
        results[(executor, jobs)] = (wall, per_issue)
        print(f"{executor:5} x{jobs}: {wall:6.1f}s wall, {60 * len(issues) / wall:7.1f} issues/min")
    if ("local", 1) in results:
        _, per = results[("local", 1)]
        total = sum(per)
        print(f"per-issue work: median {statistics.median(per):.3f}s, p90 {sorted(per)[int(0.9 * len(per))]:.3f}s, "
              f"max {max(per):.3f}s, total {total:.1f}s")
        # the work is embarrassingly parallel; the floor is the slowest single issue
        for n in (1, 2, 4, 8, 16, 64):
            print(f"  N={n:3}: ideal {max(total / n, max(per)):6.1f}s  ({60 * len(per) / max(total / n, max(per)):8.0f} issues/min)")
    if ("local", 2) in results and ("ray", 2) in results:
        overhead = results[("ray", 2)][0] - results[("local", 2)][0]
        print(f"Ray overhead vs local pool (2 workers, start-up included): {overhead:+.1f}s")


if __name__ == "__main__":
    main()
