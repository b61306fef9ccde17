"""Extraction on pathological report bodies: linear, not quadratic, time.

Cases: 20,000 blank lines between environment fields (a `^[\\s>*-]*` prefix once made this ~25 s),
a 200,000-character body, a 40,000-line snippet, and an expression nested too deep to analyse.
Goal: every case <= 5 s wall (a 40,000-line paste is read in full; the rest take milliseconds).
"""

from __future__ import annotations

import sys
import time

from sftl.extract import extract_text, parse_environment

GOAL_S = 5.0


def main() -> int:
    cases = {
        "20k blank lines between fields": lambda: parse_environment(
            "PyTorch version: 1.13.1\n" + " \n" * 20000 + "- Python version: 3.10.4\n", "pytorch"),
        "200k-character body": lambda: extract_text("t", "Is debug build: False\n" + "  \n  \n x\n" * 20000),
        "40k-line snippet": lambda: extract_text(
            "t", "```python\nimport torch\n" + "x = torch.randn(3) >> 1\n" * 40000 + "```"),
        "1200-deep expression": lambda: extract_text(
            "t", "```python\nimport torch\nx = torch.ones(1)\ny = " + " >> ".join(["x"] * 1200) + "\n```"),
    }
    worst = 0.0
    for name, run in cases.items():
        started = time.perf_counter()
        run()
        took = time.perf_counter() - started
        worst = max(worst, took)
        print(f"  {name:34s} {took * 1000:8.1f} ms")
    print(f"worst {worst:.2f} s; goal <= {GOAL_S:.0f} s: {'met' if worst <= GOAL_S else 'GOAL MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
