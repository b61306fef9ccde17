"""Benchmark `sftl eval`: 1,000 labelled issues with cached sources, every method, 2 worker processes.

The label lines are synthesized at run time from ../shared/data/dev/ (bench/dev_labels.py: the
164 screening rows, the 6 real localization rows, the 25 injected faults with their mutated
trees), repeated under fresh issue numbers up to 1,000. A first, untimed `sftl eval` over the 195
dev rows fills the caches (sources, baseline features); then the 1,000 are evaluated from
scratch (new --out, so no checkpoint helps) and timed. Goal: <= 600 s on 2 cores.
The very first warm-up on a machine embeds every candidate file of torch 2.13.0, tensorflow 2.21.0
and the Debian PyTorch tree for BERT (about 7,000 files: tens of minutes on 2 busy cores); it is
resumable, and --home keeps those caches for later runs.

    .venv/bin/python bench/bench_eval.py [--n 1000] [--jobs 2] [--methods sftl,paper,vsm,bert]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import dev_labels  # noqa: E402

GOAL_S = 600.0


def synthesize(lines: list[dict], n: int) -> list[dict]:
    """n label lines cycling through `lines`, each copy under its own issue number."""
    out = []
    for i in range(n):
        line = json.loads(json.dumps(lines[i % len(lines)]))
        copy = i // len(lines)
        if copy:
            issue = line["issue"]
            number = issue["number"] + 10_000_000 * copy
            repo = issue["repository_url"].split("/repos/", 1)[1]
            issue["number"] = number
            issue["html_url"] = line["url"] = f"https://github.com/{repo}/issues/{number}"
            issue.pop("url", None)
        out.append(line)
    return out


def sftl_eval(labels: Path, out: Path, jobs: int, methods: str, home: Path) -> tuple[float, int]:
    env = dict(os.environ, SFTL_HOME=str(home))
    cmd = [str(ROOT / ".venv" / "bin" / "sftl"), "eval", str(labels), "--offline", "--jobs", str(jobs),
           "--methods", methods, "--out", str(out), "--no-plots", "--json"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        print(proc.stderr[-2000:])
    return time.perf_counter() - t0, proc.returncode


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--methods", default="sftl,paper,vsm,bert")
    ap.add_argument("--home", default=str(Path(tempfile.gettempdir()) / "sftl-bench-eval-home"),
                    help="SFTL_HOME kept between bench runs, so its caches stay warm")
    ap.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "sftl-bench-eval"),
                    help="where the dev label files, mutated trees and the warm-up run live (kept between runs)")
    args = ap.parse_args()
    if not dev_labels.DEV.exists():
        print(f"skip: {dev_labels.DEV} not found")
        return 0
    work = Path(args.work)
    paths = dev_labels.build(work)
    dev = [json.loads(x) for x in paths["all"].read_text().splitlines()]
    home = Path(args.home)

    warm_s, rc = sftl_eval(paths["all"], work / "warm", args.jobs, args.methods, home)
    print(f"warm-up: {len(dev)} dev rows in {warm_s:.1f} s (fills the source and feature caches; resumable)")
    if rc != 0:
        return 1

    labels = work / f"synth_{args.n}.jsonl"
    labels.write_text("".join(json.dumps(x) + "\n" for x in synthesize(dev, args.n)))
    out = Path(tempfile.mkdtemp(prefix="sftl-bench-eval-run-"))
    wall, rc = sftl_eval(labels, out, args.jobs, args.methods, home)
    summary = json.loads((out / "summary.json").read_text()) if rc == 0 else {}
    n_loc = sum(1 for x in synthesize(dev, args.n) if x["truth_files"])
    print(f"{args.n} labelled issues ({n_loc} localized x {len(args.methods.split(','))} methods), "
          f"--jobs {args.jobs}: {wall:.1f} s wall  (goal <= {GOAL_S:.0f} s: {'PASS' if wall <= GOAL_S and rc == 0 else 'FAIL'})")
    for method, seconds in summary.get("seconds_per_method", {}).items():
        print(f"  {method:<6} {seconds:8.1f} s of worker time ({1000 * seconds / max(n_loc, 1):.0f} ms per issue)")
    if summary.get("errors"):
        print(f"  {len(summary['errors'])} localizer errors, first: {summary['errors'][0]}")
    return 0 if rc == 0 and wall <= GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())
