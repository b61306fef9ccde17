"""Benchmark of `sftl nan-search` on bench/nan_suite: detection, false alarms, time to first NaN vs random search.

Each program declares `# expect: bug|clean` and optionally `# entry: FUNC`. For every program the
gradient search and the random baseline get the same budget (argv[1] seconds, default 10). A baseline
that finds nothing counts as taking the whole budget, so its speed-up is a lower bound (marked >=).
Usage: python bench/bench_nansearch.py [BUDGET] [NAME-FILTER ...]
"""

from __future__ import annotations

import re
import statistics
import sys
import time
from pathlib import Path

from sftl.config import load_settings
from sftl.errors import SftlError
from sftl.helpers.nansearch import search_script

SUITE = Path(__file__).resolve().parent / "nan_suite"


def header(path: Path) -> tuple[str, str | None]:
    text = path.read_text(encoding="utf-8")
    expect = re.search(r"^# expect: (\w+)", text, re.M)
    entry = re.search(r"^# entry: (\w+)", text, re.M)
    return (expect.group(1) if expect else "bug"), (entry.group(1) if entry else None)


def main(argv: list[str]) -> int:
    budget = float(argv[0]) if argv and re.fullmatch(r"[\d.]+", argv[0]) else 10.0
    filters = [a for a in argv if not re.fullmatch(r"[\d.]+", a)]
    settings = load_settings()
    rows = []
    t_all = time.perf_counter()
    programs = sorted(SUITE.glob("*.py"))
    for path in programs:
        if filters and not any(f in path.name for f in filters):
            continue
        expect, entry = header(path)
        try:
            r = search_script(path, settings, entry=entry, budget=budget)
        except SftlError as exc:
            print(f"{path.stem:32} ERROR {exc}", flush=True)
            rows.append((path.stem, expect, None))
            continue
        rows.append((path.stem, expect, r))
        b = r.baseline
        assert b is not None
        g = f"{r.seconds:7.3f}s {r.steps:5d} runs" if r.found else f"  none  {r.steps:5d} runs"
        rs = f"{b.seconds:7.3f}s {b.steps:5d} runs" if b.found else f"  none  {b.steps:5d} runs"
        sp = "" if not r.found else (f"{'' if b.found else '>='}{b.seconds / max(r.seconds, 1e-6):.1f}x")
        what = f"{r.op} @ line {r.line}" if r.found else r.reason
        print(f"{path.stem:32} {expect:5} grad {g} | random {rs} | {sp:>9} | {what}", flush=True)
    bugs = [(n, r) for n, e, r in rows if e == "bug"]
    ctrls = [(n, r) for n, e, r in rows if e == "clean"]
    found = [(n, r) for n, r in bugs if r is not None and r.found]
    base_found = [(n, r) for n, r in bugs if r is not None and r.baseline is not None and r.baseline.found]
    alarms = [n for n, r in ctrls if r is None or r.found]
    base_alarms = [n for n, r in ctrls if r is not None and r.baseline is not None and r.baseline.found]
    speedups = [r.baseline.seconds / max(r.seconds, 1e-6) for _, r in found if r.baseline is not None]
    cpu_speedups = [max(r.baseline.cpu_seconds, 1e-6) / max(r.cpu_seconds, 1e-6) for _, r in found if r.baseline is not None]
    step_ratio = [r.baseline.steps / max(r.steps, 1) for _, r in found if r.baseline is not None]
    print()
    print(f"budget per search: {budget:g} s; programs: {len(bugs)} with bugs, {len(ctrls)} controls")
    if bugs:
        print(f"detection (gradient search): {len(found)}/{len(bugs)} = {100 * len(found) / len(bugs):.0f}%")
        print(f"detection (random search):   {len(base_found)}/{len(bugs)} = {100 * len(base_found) / len(bugs):.0f}%")
    if ctrls:
        print(f"false alarms on controls: gradient {len(alarms)}/{len(ctrls)} {alarms or ''}; "
              f"random {len(base_alarms)}/{len(ctrls)} {base_alarms or ''}")
    if found:
        times = [r.seconds for _, r in found]
        print(f"time to first NaN (gradient): median {statistics.median(times):.3f} s, max {max(times):.3f} s; "
              f"runs median {statistics.median(r.steps for _, r in found):.0f}")
        btimes = [r.baseline.seconds for _, r in base_found if r.baseline is not None]
        if btimes:
            print(f"time to first NaN (random, where found): median {statistics.median(btimes):.3f} s")
        print(f"speed-up over random (time, censored at the budget): median {statistics.median(speedups):.1f}x, "
              f"geometric mean {statistics.geometric_mean(speedups):.1f}x, min {min(speedups):.1f}x")
        print(f"speed-up over random (CPU time, censored): median {statistics.median(cpu_speedups):.1f}x, "
              f"geometric mean {statistics.geometric_mean(cpu_speedups):.1f}x")
        print(f"speed-up in runs: median {statistics.median(step_ratio):.1f}x")
        hard = [n for n, r in found if r.baseline is not None and not r.baseline.found]
        print(f"found by gradient search only: {len(hard)} {hard}")
    print(f"bench wall time: {time.perf_counter() - t_all:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
