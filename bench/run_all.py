"""`make bench`: run every bench/bench_*.py in turn and print what each measured."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    only = sys.argv[1:]
    failed = []
    for script in sorted(here.glob("bench_*.py")):
        if only and not any(o in script.name for o in only):
            continue
        print(f"\n=== {script.name}", flush=True)
        if subprocess.run([sys.executable, str(script)], cwd=here.parent).returncode != 0:
            failed.append(script.name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    sys.exit(1 if failed else 0)
