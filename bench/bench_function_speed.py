"""What naming functions adds to `sftl locate` on a stored issue (#32: <= 100 ms), on real reports and releases.

Each report is located in a fresh process (as `sftl locate` is), the way `sftl eval` locates a peer row (its
release's sources read offline from the bench home), and the time spent attaching functions to the suspects is
taken apart from the whole. Three rounds per report:
* `first read`: the functions' kept parses emptied (`<cache>/functions/`), the release's other caches kept, so
  every suspect file not prepared beforehand is read and parsed now;
* `kept`: the same again, each file's reading kept by the round before;
and `without`: the same locate with attaching functions replaced by nothing, for the whole's difference.

Usage: `python bench/bench_function_speed.py [--home DIR] [--rows N]` (home default /work/cache/home-bench, as
bench/peer_sources.py provisions it). Prints the per-round medians and 90th percentiles in ms.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEER = ROOT.parent / "shared" / "data" / "peer" / "peer_given.jsonl"

CHILD = r"""
import json, sys, time
started = time.perf_counter()
from dataclasses import replace
from sftl.config import load_settings
from sftl.extract import extract
from sftl.github import issue_from_json
from sftl.localize import get_localizer
from sftl.model import Category
from sftl.sources import sources_for_report
import sftl.localize.functions as functions

row = json.loads(sys.argv[1])
functions_on = sys.argv[2] == "on"
spent = [0.0]
attach = functions.attach_functions

def timed(*args, **kwargs):
    t0 = time.perf_counter()
    try:
        return attach(*args, **kwargs)
    finally:
        spent[0] += time.perf_counter() - t0

functions.attach_functions = timed if functions_on else (lambda suspects, *a, **k: suspects)
settings = load_settings()
issue = issue_from_json(row["issue"])
extraction = extract(issue)
env = replace(extraction.environment, framework=row["framework"], version=row["version"] or extraction.environment.version)
extraction = replace(extraction, environment=env)
found = sources_for_report(extraction, settings, offline=True, needs_cxx=True, created_at=row["created_at"] or None)
if found.provider is None:
    print(json.dumps({"skipped": found.note}))
    raise SystemExit(0)
loc = get_localizer("sftl")(issue, extraction, Category.OTHER, found.provider, 10)
named = sum(1 for s in loc.suspects if s.functions)
print(json.dumps({"total": time.perf_counter() - started, "functions": spent[0], "files_named": named}))
"""


def rows(limit: int) -> list[dict[str, object]]:
    """Peer reports spread over both trackers: every k-th row."""
    from sftl.evaluate import LabelRow, parse_labels
    from sftl.evaluate_formats import label_lines

    parsed, _ = parse_labels(label_lines(PEER))
    usable = [r for r in parsed if isinstance(r, LabelRow) and r.issue is not None]
    step = max(1, len(usable) // limit)
    return [{"issue": r.issue, "framework": r.framework or "tensorflow", "version": r.version,
             "created_at": r.created_at} for r in usable[::step][:limit]]


def run(row: dict[str, object], mode: str, home: Path) -> dict[str, float] | None:
    env = {**os.environ, "SFTL_HOME": str(home), "SFTL_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(row), mode], env=env, capture_output=True,
                          text=True, check=False, cwd=ROOT)
    if done.returncode:
        print(done.stderr.strip().splitlines()[-1:], file=sys.stderr)
        return None
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return None if "skipped" in out else out


def summary(values: list[float]) -> str:
    if not values:
        return "none"
    ms = sorted(1000 * v for v in values)
    p90 = ms[min(len(ms) - 1, int(round(0.9 * (len(ms) - 1))))]
    return f"median {statistics.median(ms):.0f} ms, p90 {p90:.0f} ms, max {ms[-1]:.0f} ms (n={len(ms)})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, default=Path(os.environ.get("SFTL_BENCH_HOME", "/work/cache/home-bench")))
    ap.add_argument("--rows", type=int, default=20)
    args = ap.parse_args(argv)
    if not PEER.exists() or not args.home.is_dir():
        print(f"no peer data at {PEER} or no bench home at {args.home}: nothing to measure")
        return 0
    kept = args.home / "cache" / "functions"
    shutil.rmtree(kept, ignore_errors=True)
    rounds: dict[str, list[dict[str, float]]] = {"first read": [], "kept": [], "without": []}
    for row in rows(args.rows):
        run(row, "off", args.home)  # the release's other caches (sources, graph, index) warmed, not timed
        shutil.rmtree(kept, ignore_errors=True)
        first = run(row, "on", args.home)
        again = run(row, "on", args.home)
        without = run(row, "off", args.home)
        if first is None or again is None or without is None:
            continue
        rounds["first read"].append(first)
        rounds["kept"].append(again)
        rounds["without"].append(without)
        print(f"{str(row['issue'].get('html_url', ''))[-40:]:40s} first {1000 * first['functions']:5.0f} ms  "  # type: ignore[attr-defined]
              f"kept {1000 * again['functions']:5.0f} ms  locate {again['total']:.2f} s vs {without['total']:.2f} s",
              file=sys.stderr)
    print("time attaching functions (the suspects' first five files):")
    for name in ("first read", "kept"):
        print(f"  {name:10s}: {summary([r['functions'] for r in rounds[name]])}")
    print("whole locate in its process:")
    for name in ("kept", "without"):
        print(f"  {name:10s}: {summary([r['total'] for r in rounds[name]])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
