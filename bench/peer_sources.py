"""Provision the bench SFTL_HOME with the releases the peer-benchmark rows report (../shared/data/peer).

Each row is read, as `sftl eval` reads it, at its stated version or else at the release current when it
was filed; a user of that release has its wheel's Python files, and sftl layers them over the nearest
registered Debian tree (PyTorch 1.13.1/2.6.0, TensorFlow 2.14.1) for the C++. This fetches the wheel of
each release the rows need (`pip download`, never installed), once, into `<home>/cache/sources/wheels/`,
and registers the Debian trees (`bench/real_sources.py` fetches them).

TensorFlow up to 2.0 is fetched as `tensorflow` (its CPU build then), later as `tensorflow-cpu`: only the
Python files are read for these rows, and the CPU wheels are a third of the size.

Usage: `python bench/peer_sources.py [--home DIR] [--rows FILE] [--dry-run]`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from real_sources import DEFAULT_HOME, DEFAULT_TREES_DIR, fetch_wheel, register_trees, wheels_dir  # noqa: E402

PEER_ROWS = Path(__file__).resolve().parents[2] / "shared" / "data" / "peer" / "peer_given.jsonl"


def python_for(framework: str, version: str) -> str:
    """The CPython a wheel of that release was built for (the newest it supports, within reason)."""
    major, minor = (int(x) for x in version.split(".")[:2])
    if framework == "tensorflow":
        if (major, minor) < (1, 2):
            return "3.5"
        if (major, minor) < (2, 1):
            return "3.6" if (major, minor) < (1, 13) else "3.7"
        return "3.8"
    return "3.9" if (major, minor) < (2, 8) else "3.11"


def wanted_releases(rows: list[dict[str, object]]) -> set[tuple[str, str]]:
    """(framework, X.Y.Z) for every row: the stated release, a line's .0 (or the patch the cache already
    serves the line with), and for a row with no version the release current when it was filed."""
    from sftl.releases import release_at

    out: set[tuple[str, str]] = set()
    for row in rows:
        fw = str(row["framework"])
        version = row.get("version")
        if not isinstance(version, str) or not version:
            version = release_at(fw, str(row["created_at"])) or ""
        if not re.match(r"\d+\.\d+", version):
            continue
        parts = version.split(".")
        out.add((fw, ".".join(parts[:3]) if len(parts) >= 3 else f"{parts[0]}.{parts[1]}.0"))
    return out


def package_for(framework: str, version: str) -> str:
    if framework == "pytorch":
        return "torch"
    major, minor = (int(x) for x in version.split(".")[:2])
    return "tensorflow" if (major, minor) <= (2, 0) else "tensorflow-cpu"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, default=DEFAULT_HOME)
    ap.add_argument("--rows", type=Path, default=PEER_ROWS)
    ap.add_argument("--trees", type=Path, default=DEFAULT_TREES_DIR)
    ap.add_argument("--dry-run", action="store_true", help="print the releases, fetch nothing")
    args = ap.parse_args(argv)
    rows = [json.loads(line) for line in args.rows.read_text(encoding="utf-8").splitlines() if line.strip()]
    releases = sorted(wanted_releases(rows), key=lambda fv: (fv[0], [int(x) for x in fv[1].split(".")]))
    missing = []
    for fw, version in releases:
        if args.dry_run:
            print(fw, version, package_for(fw, version), python_for(fw, version))
            continue
        if not fetch_wheel(args.home, fw, package_for(fw, version), version, python_for(fw, version)):
            missing.append(f"{fw}-{version}")
    if not args.dry_run:
        register_trees(args.home, args.trees, fetch=True)
        have = sorted(p.name for p in wheels_dir(args.home).iterdir() if any(p.glob("*.whl")))
        print(f"wheels: {len(have)}; not served: {', '.join(missing) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
