"""Replay figures: sandbox + harness overhead beyond the snippet's own run, and reuse of environments and results.

    python bench/bench_replay.py [--rounds N]

Overhead = wall time of a sandboxed replay run (bubblewrap, cgroup, limits, harness, result file)
minus the wall time of the same snippet run directly with the same interpreter; goal <= 0.5 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sftl.config import load_settings
from sftl.envs import load_catalog, resolve
from sftl.envs_build import EnvManager
from sftl.replay import has_cuda_device, replay_snippet
from sftl.sandbox import Limits, Sandbox
from sftl.store import Store

SNIPPETS = {
    "plain python": ("none", "total = sum(i * i for i in range(100000))\nprint(total)\n"),
    "torch op": ("pytorch", "import torch\nx = torch.randn(256, 256)\ny = (x @ x).sum()\nprint(float(y) != 0)\n"),
}


def _pairs(box: Sandbox, framework: str, code: str, rounds: int) -> list[tuple[float, float]]:
    """(direct, sandboxed) wall times, interleaved so that load on a shared machine hits both alike."""
    pairs = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "snippet.py"
        path.write_text(code)
        for _ in range(rounds):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-I", "-B", str(path)], check=True, capture_output=True)
            direct = time.perf_counter() - t
            t = time.perf_counter()
            res = box.run_harness(Path(sys.executable), code, ["--framework", framework, "--device", "cpu"])
            pairs.append((direct, time.perf_counter() - t))
            assert res.result is not None and res.result["status"] == "ok", res
    return pairs


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    settings = load_settings()
    with tempfile.TemporaryDirectory() as home:
        settings = settings.with_overrides(home=Path(home))
        box = Sandbox(settings, Limits())
        c = box.describe()
        print(f"containment: network {c.network}; {c.filesystem}; processes {c.processes}; memory {c.memory}")
        print(f"{'snippet':<14} {'direct (s)':>11} {'sandboxed (s)':>14} {'overhead (s)':>13}   goal <= 0.5 s")
        for name, (framework, code) in SNIPPETS.items():
            pairs = _pairs(box, framework, code, args.rounds)
            direct = statistics.median(p[0] for p in pairs)
            boxed = statistics.median(p[1] for p in pairs)
            overhead = statistics.median(b - d for d, b in pairs)
            print(f"{name:<14} {direct:>11.3f} {boxed:>14.3f} {overhead:>13.3f}   "
                  f"{'ok' if overhead <= 0.5 else 'OVER'}  (median of {args.rounds} paired runs)")

        # environments: the lookup a replay does before every run, for `current` and a cached venv
        manager = EnvManager(settings)
        res = resolve(load_catalog(), "pytorch", "2.13.0")
        t = time.perf_counter()
        for _ in range(20):
            manager.find(res)
        print(f"find the `current` environment: {(time.perf_counter() - t) / 20 * 1000:.2f} ms")
        built = manager.root / "pytorch-2.13.0-py3.11-venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(built)], check=True)
        (built / "sftl-env.json").write_text(
            '{"name": "pytorch-2.13.0-py3.11-venv", "backend": "venv", "framework": "pytorch", '
            '"version": "2.13.0", "python_version": "3.11"}')
        t = time.perf_counter()
        for _ in range(20):
            handle = manager.find(res, env=built.name)
        assert handle.backend == "venv"
        print(f"reuse a cached venv (lookup; the build itself is ~1-2 min for torch): "
              f"{(time.perf_counter() - t) / 20 * 1000:.2f} ms")

        # stored results: the second replay of the same snippet is answered from the store
        code = "import torch\nprint('MARK')\ntorch.nn.Linear(2, 2).missing\n"
        with Store(settings.db_path) as store:
            t = time.perf_counter()
            first = replay_snippet(code, "pytorch", "2.13.0", settings, device="cpu", store=store)
            cold = time.perf_counter() - t
            t = time.perf_counter()
            again = replay_snippet(code, "pytorch", "2.13.0", settings, device="cpu", store=store)
            warm = time.perf_counter() - t
        assert again.runs[0].details["cached"] and again.verdict == first.verdict
        print(f"replay (cpu, torch): first {cold:.2f} s, again from the store {warm * 1000:.0f} ms")

        # a known CPU/CUDA discrepancy (torch.histc on bin edges), end to end; on a machine without a
        # GPU the per-op differential runs CPU float32 against float64 instead
        histc = "import torch\nx = torch.linspace(0, 1, 101)\nh = torch.histc(x, bins=10, min=0, max=1)\nprint(h)\n"
        t = time.perf_counter()
        rep = replay_snippet(histc, "pytorch", "2.13.0", settings)
        print(f"histc CPU/GPU replay ({'GPU present' if has_cuda_device() else 'no GPU'}): verdict {rep.verdict.value}, "
              f"first divergent op {rep.first_divergent_op}, {time.perf_counter() - t:.1f} s")
        for run in rep.runs:
            print(f"  {run.device.value}: {run.outcome.value} {run.message or ''} {run.stdout_tail.strip()[-120:]}")
        print(f"  {rep.reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
