"""`make demo`: the main job on the bundled offline fixtures (filled in as the stages land)."""

from __future__ import annotations

import sys

from sftl.cli import main

if __name__ == "__main__":
    sys.exit(main(["--help"]))
