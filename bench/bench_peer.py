"""Peer benchmarks end to end: `sftl eval` on Denchmark's folders, pt-agent-bench's SWE-bench JSONL and the report
rows of ../shared/data/peer, offline, with each row's release (its wheel's Python files over the nearest Debian
tree), sftl beside BM25, VSM and the published method on the same rows, reports filed before and after the split
apart (TensorFlow 2019-01-01, PyTorch 2025-07-01: the ranker is trained on the earlier ones only).

Needs a home provisioned by `bench/real_sources.py --fetch` and `bench/peer_sources.py` (default
/work/cache/home-bench). Without ../shared it says so and exits 0 (nothing to measure).

Usage: `python bench/bench_peer.py [--home DIR] [--out DIR] [--jobs N] [--methods M,...] [--fit MODEL.json]`;
`--fit` imports the shared fix histories into the home's store, reads them in the report rows' run (`--history`:
the prior's features), also evaluates the development rows (`bench/dev_labels.py`: the 49 real mme/gcrde rows and the 25 injected
faults) keeping their features, and trains the ranker as the bundled one was (`sftl model fit` on the report rows,
the development rows and the injected ones: judged on the later reports, the labelled earlier ones leave-one-out,
then refitted on all of them: `sftl/data/candidate-ranker-v3.json`). The security advisories (`tfsa_given.jsonl`, C++
fixes) are dated apart: those shipped before 2021-06 train, the later ones validate.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEER = ROOT.parent / "shared" / "data" / "peer"
SPLIT = "tensorflow=2019-01-01,pytorch=2025-07-01"
# the security advisories' fixes shipped 2019-10...2021-11, after every Denchmark report: dated apart, their
# earlier ones train and the later ones validate
ADVISORY_SPLIT = "2021-06-01"
SETS = {"rows": PEER / "peer_given.jsonl", "denchmark": PEER / "denchmark", "swebench": PEER / "pt-agent-bench.jsonl",
        "tfsa": PEER / "tfsa_given.jsonl"}


def sftl_command() -> list[str]:
    script = Path(sys.executable).with_name("sftl")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "sftl"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, default=Path(os.environ.get("SFTL_BENCH_HOME", "/work/cache/home-bench")))
    ap.add_argument("--out", type=Path, default=Path("/work/cache/eval"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--methods", default="sftl,bm25,vsm,paper")
    ap.add_argument("--sets", default="rows,denchmark,swebench,tfsa")
    ap.add_argument("--fit", type=Path, help="train the ranker on the report rows' earlier reports, write it here")
    args = ap.parse_args(argv)
    if not PEER.is_dir():
        print(f"no peer data at {PEER}: nothing to measure")
        return 0
    env = {**os.environ, "SFTL_HOME": str(args.home), "SFTL_OFFLINE": "1"}
    if args.fit:  # the fix histories the ranker's history features read (their time rule applies per report)
        for history in (PEER / "dlfb_history.jsonl", PEER.parent / "history" / "pytorch_fixes.jsonl"):
            if history.is_file():
                subprocess.run([*sftl_command(), "history", "import", str(history)], env=env, capture_output=True,
                               check=False)
    figures = {}
    for name in args.sets.split(","):
        out = args.out / f"peer-{name}"
        split = f"tensorflow={ADVISORY_SPLIT}" if name == "tfsa" else SPLIT
        cmd = [*sftl_command(), "eval", str(SETS[name]), "--method", args.methods, "--split-date", split,
               "--out", str(out), "--no-plots", "--jobs", str(args.jobs), "--json"]
        if name in ("rows", "tfsa") and args.fit:
            cmd += ["--keep-features", "--history"]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(f"{name}: sftl eval failed ({done.returncode}): {done.stderr.strip()[-400:]}")
            return 1
        summary = json.loads(done.stdout)
        figures[name] = summary
        print(f"\n== {name}: {SETS[name].name}, {summary['issues']} reports ({len(summary['skipped'])} skipped)")
        print((out / "report.md").read_text(encoding="utf-8").split("## Table 5", 1)[-1].split("\nReading of", 1)[0])
    if args.fit:
        labels = args.out / "dev-labels"
        made = subprocess.run([sys.executable, str(ROOT / "bench" / "dev_labels.py"), str(labels)], env=env,
                              capture_output=True, text=True, check=False)
        if made.returncode != 0:
            print(f"dev_labels failed: {made.stderr.strip()[-400:]}")
            return 1
        kept = [args.out / "peer-rows", args.out / "peer-tfsa"]
        for name, methods in (("dev_real", "sftl,bm25,paper"), ("dev_injected", "sftl,bm25,paper")):
            out = args.out / name.replace("_", "-")
            done = subprocess.run([*sftl_command(), "eval", str(labels / f"{name}.jsonl"), "--method", methods,
                                   "--split-date", SPLIT, "--keep-features", "--history", "--out", str(out), "--no-plots",
                                   "--jobs", str(args.jobs), "--json"], env=env, capture_output=True, text=True,
                                  check=False)
            if done.returncode != 0:
                print(f"{name}: sftl eval failed ({done.returncode}): {done.stderr.strip()[-400:]}")
                return 1
            kept.append(out)
        fit = subprocess.run([*sftl_command(), "model", "fit", *map(str, kept), "--split-date",
                              f"{SPLIT},peer-tfsa={ADVISORY_SPLIT}",
                              "--leave-one-out", "mme,gcrde", "--refit-all", "--out", str(args.fit)],
                             env=env, capture_output=True, text=True, check=False)
        print(fit.stdout or fit.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
