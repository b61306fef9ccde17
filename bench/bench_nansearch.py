"""Benchmark of `sftl nan-search` on bench/nan_suite: detection, false alarms, time to first NaN vs random search.

Each program declares `# expect: bug|clean`, optionally `# entry: FUNC`, and `# set: training` for the
millisecond-scale training programs added after the first 25 bugs (the "original" set is the rest).
For every program the gradient search and the random baseline get the same budget (default 10 s), the
same detector (the same instrumented runs; random search skips the margins, which it does not use) and
the same stop rule (the first NaN/INF), once per seed. A baseline that finds nothing counts as taking
the whole budget, so its speed-up is a lower bound (marked >=). Both start after one shared run at the
program's own inputs (it validates the script; the gradient search reads its margins, the random search
needs nothing from it); a second figure charges that run (timed again warm) to the gradient search. Searches
under 0.2 s are timed --repeats times (default 5), alternating the two kinds, and the median is kept:
sub-millisecond wall times on a shared machine are noisy. Program runs and CPU time (counted in
scheduler ticks) are reported beside it; per program the median over seeds is taken.
`--no-probes` skips the gradient search's cheap domain probes, to measure the gradient phase alone;
`--reference` also runs a random search whose scales are drawn log-uniformly up to the bound (a stronger
reference than the baseline, which doubles its scale every 10 tries); `--soft` adds the soft-assertion guide.
Usage: python bench/bench_nansearch.py [BUDGET] [--seeds N] [--repeats N] [--no-probes] [--reference] [--soft]
       [FILTER ...]
"""

from __future__ import annotations

import re
import statistics
import sys
import time
from pathlib import Path

from sftl.config import load_settings
from sftl.errors import SftlError
from sftl.nansearch.search import NanSearchResult, search_script

SUITE = Path(__file__).resolve().parent / "nan_suite"


def header(path: Path) -> tuple[str, str | None, str]:
    text = path.read_text(encoding="utf-8")
    expect = re.search(r"^# expect: (\w+)", text, re.M)
    entry = re.search(r"^# entry: (\w+)", text, re.M)
    group = re.search(r"^# set: (\w+)", text, re.M)
    return (expect.group(1) if expect else "bug"), (entry.group(1) if entry else None), (
        group.group(1) if group else "original")


def _ratio(num: float, den: float) -> float:
    return max(num, 1e-6) / max(den, 1e-6)


def main(argv: list[str]) -> int:
    args = list(argv)
    seeds, repeats = 1, 5
    if "--seeds" in args:
        i = args.index("--seeds")
        seeds = int(args[i + 1])
        del args[i : i + 2]
    probes = "--no-probes" not in args  # the gradient phase alone: what the gradient itself contributes
    reference = "--reference" in args  # also a random search with log-uniform scales
    soft = "--soft" in args  # the soft-assertion guide beside the gradient
    args = [a for a in args if a not in ("--no-probes", "--reference", "--soft")]
    if "--repeats" in args:
        i = args.index("--repeats")
        repeats = int(args[i + 1])
        del args[i : i + 2]
    budget = float(args[0]) if args and re.fullmatch(r"[\d.]+", args[0]) else 10.0
    filters = [a for a in args if not re.fullmatch(r"[\d.]+", a)]
    settings = load_settings()
    rows: list[tuple[str, str, list[NanSearchResult]]] = []
    groups: dict[str, str] = {}
    t_all = time.perf_counter()
    for path in sorted(SUITE.glob("*.py")):
        if filters and not any(f in path.name for f in filters):
            continue
        expect, entry, groups[path.stem] = header(path)
        results = []
        for seed in range(seeds):
            try:
                results.append(search_script(path, settings, entry=entry, budget=budget, seed=seed, repeats=repeats,
                                             probes=probes, reference=reference, soft=soft))
            except SftlError as exc:
                print(f"{path.stem:32} seed {seed} ERROR {exc}", flush=True)
        rows.append((path.stem, expect, results))
        for r in results:
            b = r.baseline
            assert b is not None
            g = f"{r.seconds:7.3f}s {r.cpu_seconds:6.3f}cpu {r.steps:5d} runs" if r.found else f"  none  {'':9} {r.steps:5d} runs"
            rs = f"{b.seconds:7.3f}s {b.cpu_seconds:6.3f}cpu {b.steps:5d} runs" if b.found else f"  none  {'':9} {b.steps:5d} runs"
            sp = "" if not r.found else f"{'' if b.found else '>='}{_ratio(b.seconds, r.seconds):.1f}x"
            if r.reference is not None:
                ref = r.reference
                rs += (f" | log-random {ref.seconds:7.3f}s {ref.steps:5d} runs" if ref.found
                       else f" | log-random   none  {ref.steps:5d} runs")
            what = f"{r.op} @ line {r.line} ({r.phase})" if r.found else r.reason
            print(f"{path.stem:32} {expect:5} grad {g} | random {rs} | {sp:>9} | {what}", flush=True)
    bugs = [(n, rs) for n, e, rs in rows if e == "bug"]
    ctrls = [(n, rs) for n, e, rs in rows if e == "clean"]
    pairs = [r for _, rs in bugs for r in rs]
    found = [r for r in pairs if r.found]
    base_found = [r for r in pairs if r.baseline is not None and r.baseline.found]
    alarms = sorted({n for n, rs in ctrls for r in rs if r.found} | {n for n, rs in ctrls if not rs})
    base_alarms = sorted({n for n, rs in ctrls for r in rs if r.baseline is not None and r.baseline.found})
    print()
    print(f"budget per search: {budget:g} s; seeds: {seeds}; domain probes: {'on' if probes else 'off'}; "
          f"soft guide: {'on' if soft else 'off'}; programs: {len(bugs)} with bugs, {len(ctrls)} controls")
    if pairs:
        print(f"detection (gradient search): {len(found)}/{len(pairs)} = {100 * len(found) / len(pairs):.0f}%"
              f" (program x seed)")
        print(f"detection (random search):   {len(base_found)}/{len(pairs)} = {100 * len(base_found) / len(pairs):.0f}%")
    if ctrls:
        print(f"false alarms on controls: gradient {len(alarms)}/{len(ctrls)} {alarms or ''}; "
              f"random {len(base_alarms)}/{len(ctrls)} {base_alarms or ''}")
    original = {n for n, _ in bugs if groups[n] == "original"}
    for label, names in (("original suite", original), ("training programs", {n for n, _ in bugs} - original),
                         ("whole suite", {n for n, _ in bugs})):
        if names and (label != "whole suite" or names != original):
            summary(label, [(n, rs) for n, rs in bugs if n in names])
    print(f"bench wall time: {time.perf_counter() - t_all:.0f} s")
    return 0


def summary(label: str, bugs: list[tuple[str, list[NanSearchResult]]]) -> None:
    """Speed-up figures over the programs in `bugs`: per program the median over seeds, then the median."""
    per_prog = []  # per program, medians over seeds where the gradient search found the bug
    for name, rs in bugs:
        hits = [r for r in rs if r.found and r.baseline is not None]
        if not hits:
            continue
        per_prog.append((
            name,
            statistics.median(r.seconds for r in hits),
            statistics.median(r.steps for r in hits),
            statistics.median(_ratio(r.baseline.seconds, r.seconds) for r in hits if r.baseline),
            statistics.median(_ratio(r.baseline.cpu_seconds, r.cpu_seconds) for r in hits if r.baseline)
            if all(r.baseline and min(r.cpu_seconds, r.baseline.cpu_seconds) >= 0.02 for r in hits) else None,
            statistics.median(r.baseline.steps / max(r.steps, 1) for r in hits if r.baseline),
            all(r.baseline is not None and not r.baseline.found for r in hits),
            statistics.median(_ratio(r.baseline.seconds, r.seconds + r.start_seconds) for r in hits if r.baseline),
            [r.phase for r in hits],
            statistics.median(_ratio(r.reference.seconds, r.seconds) for r in hits if r.reference)
            if all(r.reference for r in hits) else None,
        ))
    if not per_prog:
        return
    print(f"-- {label}: {len(bugs)} programs")
    wall = [p[3] for p in per_prog]
    cpu = [p[4] for p in per_prog if p[4] is not None]
    runs = [p[5] for p in per_prog]
    charged = [p[7] for p in per_prog]
    phases = [ph for p in per_prog for ph in p[8]]
    print(f"time to first NaN (gradient): median {statistics.median(p[1] for p in per_prog):.4f} s, "
          f"max {max(p[1] for p in per_prog):.3f} s; runs median {statistics.median(p[2] for p in per_prog):.0f}")
    base_found = [r.baseline for _, rs in bugs for r in rs if r.baseline is not None and r.baseline.found]
    if base_found:
        print(f"time to first NaN (random, where found): median {statistics.median(b.seconds for b in base_found):.4f} s; "
              f"runs median {statistics.median(b.steps for b in base_found):.1f}")
    print(f"speed-up over random, wall time (censored at the budget): median {statistics.median(wall):.1f}x, "
          f"geometric mean {statistics.geometric_mean(wall):.1f}x; programs >= 10x: "
          f"{sum(w >= 10 for w in wall)}/{len(wall)}")
    print(f"  the same with the start run (whose margins the gradient search uses) charged to it: median "
          f"{statistics.median(charged):.1f}x, geometric mean {statistics.geometric_mean(charged):.1f}x; programs >= 10x: "
          f"{sum(w >= 10 for w in charged)}/{len(charged)}")
    # CPU time is accounted in scheduler ticks (4 ms here): only programs whose searches both took 20 ms or more
    if cpu:
        print(f"speed-up over random, CPU time (censored; programs where both searches took >= 20 ms CPU, "
              f"{len(cpu)}): median {statistics.median(cpu):.1f}x")
    print(f"speed-up over random, program runs: median {statistics.median(runs):.1f}x")
    refs = [p[9] for p in per_prog if p[9] is not None]
    if refs:
        print(f"speed-up over log-uniform-scale random (reference), wall time: median {statistics.median(refs):.1f}x, "
              f"geometric mean {statistics.geometric_mean(refs):.1f}x; programs >= 10x: {sum(w >= 10 for w in refs)}/{len(refs)}")
    print("found by: " + ", ".join(f"{ph} {phases.count(ph)}" for ph in sorted(set(phases))))
    only = [p[0] for p in per_prog if p[6]]
    print(f"found by gradient search only: {len(only)} {only}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
