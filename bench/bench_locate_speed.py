"""Time the real `sftl locate` CLI on the demo GCRDE issue against a real PyTorch tree, cold and warm.

Target: `sftl locate` on a stored issue with cached sources <= 2 s wall, CLI start included.

Each run is a fresh process (`.venv/bin/sftl locate ... --offline`), timed from spawn to exit:
* cold: a fresh SFTL_HOME, so nothing is cached (the kernel index of the tree is built and saved);
* warm: the same SFTL_HOME again, the issue named by reference (`pytorch/pytorch#990103`, stored by
  the first run; the index and the parsed native_functions.yaml load from the cache);
for two ways of naming the tree: `--source-root DIR`, and a tree registered with `sftl sources add`
standing in (as the nearest release) for the report's own. Also the bare CLI start (`sftl --help`).
Trees: $SFTL_PYTORCH_SRC (default /work/cache/pytorch-src; bench/bench_gcrde.py fetches them).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SFTL = ROOT / ".venv" / "bin" / "sftl"
FIXTURE = ROOT / "fixtures" / "demo" / "gcrde_histc_cpu_vs_cuda.json"
SRC = Path(os.environ.get("SFTL_PYTORCH_SRC", "/work/cache/pytorch-src"))
REFERENCE = "pytorch/pytorch#990103"  # the fixture's issue, stored by the first run


def run(argv: list[str], home: Path) -> tuple[float, int, str]:
    env = {**os.environ, "SFTL_HOME": str(home)}
    t0 = time.perf_counter()
    done = subprocess.run([str(SFTL), *argv], env=env, capture_output=True, text=True, check=False)
    return time.perf_counter() - t0, done.returncode, done.stdout + done.stderr


def measure(label: str, argv: list[str], warm_runs: int, prepare: list[list[str]] | None = None,
            cold_label: str = "cold (nothing cached)") -> None:
    cold: list[float] = []
    warm: list[float] = []
    first = ""
    for _ in range(2):  # two fresh homes: cold is noisy on a shared machine
        with tempfile.TemporaryDirectory(prefix="sftl-speed-") as tmp:
            home = Path(tmp)
            for step in prepare or []:
                run(step, home)
            seconds, rc, out = run(argv, home)
            if rc not in (0, 8):
                raise SystemExit(f"{label}: sftl exited {rc}:\n{out[-2000:]}")
            first = first or out
            cold.append(seconds)
            stored = [REFERENCE if a == str(FIXTURE) else a for a in argv]  # the stored issue, by reference
            for _ in range(warm_runs):
                seconds, rc, out = run(stored, home)
                if rc not in (0, 8):
                    raise SystemExit(f"{label}: sftl exited {rc} on the stored issue:\n{out[-2000:]}")
                warm.append(seconds)
    outcome = next((line.strip() for line in first.splitlines() if line.strip().startswith("outcome")), "?")
    print(f"{label}")
    print(f"  {cold_label:22} min {min(cold):.2f} s  runs {', '.join(f'{s:.2f}' for s in cold)}")
    print(f"  warm (index cached)    median {statistics.median(warm):.2f} s  max {max(warm):.2f} s  n={len(warm)}"
          f"  {'OK' if statistics.median(warm) <= 2.0 else 'OVER'} (target <= 2 s)")
    print(f"  {outcome[:160]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", default=str(SRC / "pytorch-v2.6.0"), help="a PyTorch source tree")
    parser.add_argument("--warm-runs", type=int, default=5)
    args = parser.parse_args()
    tree = Path(args.tree)
    if not (tree / "aten/src/ATen/native/native_functions.yaml").is_file():
        if tree != SRC / "pytorch-v2.6.0":
            print(f"no PyTorch tree at {tree}", file=sys.stderr)
            return 2
        from bench_gcrde import ensure_tree  # the same Debian source package bench_gcrde reads

        tree = ensure_tree("2.6.0")
    with tempfile.TemporaryDirectory() as tmp:
        start = [run(["--help"], Path(tmp))[0] for _ in range(3)]
    print(f"CLI start (sftl --help)  median {statistics.median(start):.2f} s")
    locate = ["locate", str(FIXTURE), "--offline", "--top", "5"]
    measure(f"sftl locate --source-root {tree}", [*locate, "--source-root", str(tree)], args.warm_runs)
    measure("sftl locate with the tree registered (`sftl sources add pytorch==2.6.0 DIR`, nearest release)",
            locate, args.warm_runs, prepare=[["sources", "add", "pytorch==2.6.0", str(tree)]],
            cold_label="first after sources add")
    return 0


if __name__ == "__main__":
    sys.exit(main())
