"""`make demo`: run `sftl locate` offline on the bundled fixture issues (fixtures/demo/) and print the reports."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from sftl.cli import main

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "demo"
MINI_ATEN = ROOT / "fixtures" / "sources" / "mini_pytorch"


def run() -> int:
    cases = sorted(FIXTURES.glob("*.json"))
    if not cases:
        print(f"no fixtures in {FIXTURES}", file=sys.stderr)
        return 1
    worst = 0
    # a throw-away state directory: the demo never touches the user's store or the network
    with tempfile.TemporaryDirectory(prefix="sftl-demo-") as home:
        for case in cases:
            extra: list[str] = []
            if case.name.startswith("gcrde") and MINI_ATEN.is_dir():
                # wheels carry no C++ kernels and a fresh machine has none cached: read the miniature
                # ATen tree bundled for the tests (real use: `sftl sources fetch pytorch==X --cxx`)
                extra = ["--source-root", str(MINI_ATEN)]
            shown = " ".join(["--source-root", str(MINI_ATEN.relative_to(ROOT))] if extra else [])
            print(f"\n$ sftl locate fixtures/demo/{case.name} --offline {shown}".rstrip())
            code = main(["locate", str(case), "--offline", *extra, "--home", home, "--api-url", "http://127.0.0.1:9"])
            print(f"(exit {code})")
            if code not in (0, 8):
                worst = code
    return worst


if __name__ == "__main__":
    sys.exit(run())
