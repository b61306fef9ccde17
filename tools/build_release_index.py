"""Build sftl/data/release-index-v1.json.gz from folders of release wheels (sftl.sources.release_index).

usage: python tools/build_release_index.py [--scan] [--sha256] [-o OUT] WHEEL_DIR...
Each WHEEL_DIR is searched for `*.whl` (torch-*, tensorflow-*, tensorflow_gpu-*, tensorflow_cpu-*); a wheel's named
paths come from the inventory cache beside it, or (--scan) from scanning it (5-60 s per wheel: take the bench lock);
the headers a wheel ships (include/) give PyTorch's declared dispatch stubs (and, in a TH-era wheel, its TH-family
and generated ATen headers' declarations) and the types TensorFlow's GPU kernel headers' device code declares.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sftl.localize import legacy  # noqa: E402
from sftl.localize.gcrde.release import declared_stubs  # noqa: E402
from sftl.localize.gcrde.tensorflow import tf_gpu_declarations  # noqa: E402
from sftl.sources import WheelSource, inventory, release_index  # noqa: E402

BUILDER = "build_release_index 2"


def header_declarations(wheel: Path, framework: str) -> dict[str, list[str]]:
    """What the localizers read of the headers a wheel ships (include/): PyTorch's native headers with the dispatch
    stubs they declare and, in a TH-era wheel, its TH/THC/THNN/THCUNN headers and ATen's generated headers
    (legacy.th_era_declarations); TensorFlow's GPU kernel headers with the types their device code declares."""
    source = WheelSource(wheel, framework)
    files = source.list_files()
    found: dict[str, list[str]] = {}

    def keep(path: str, names: tuple[str, ...]) -> None:
        if names:
            found[path] = sorted(set(found.get(path, [])) | set(names))

    th_era = framework == "pytorch" and any(legacy.library(p) for p in files)
    for path in files:
        if framework == "tensorflow":
            if path.startswith("tensorflow/core/kernels/") and path.endswith(".h"):
                keep(path, tf_gpu_declarations(path, source.read_text(path) or ""))
            continue
        native = path.startswith("aten/src/ATen/native/") and path.endswith(".h")
        th = th_era and path.startswith("aten/src/") and path.endswith((".h", ".cuh", ".hpp"))
        if native or th:
            text = source.read_text(path) or ""  # once, for both readers
            keep(path, (declared_stubs(path, text) if native else ()) + (legacy.th_era_declarations(path, text) if th else ()))
    return found


def _framework(name: str) -> str | None:
    dist = name.split("-", 1)[0].lower()
    return "pytorch" if dist == "torch" else "tensorflow" if dist.startswith("tensorflow") else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("-o", "--out", type=Path, default=release_index.INDEX_PATH)
    ap.add_argument("--scan", action="store_true", help="scan wheels with no inventory cache beside them")
    ap.add_argument("--sha256", action="store_true", help="record each wheel's sha256 (reads every wheel)")
    args = ap.parse_args(argv)
    entries: dict[tuple[str, str], dict] = {}
    for wheel in sorted(w for d in args.dirs for w in d.rglob("*.whl")):
        fw = _framework(wheel.name)
        release = wheel.name.split("-")[1].split("+")[0]
        if fw is None or (fw, release) in entries:
            continue
        paths = inventory.wheel_named_paths(wheel, fw, build=args.scan)
        if not paths:
            print(f"skip {wheel.name}: not scanned", file=sys.stderr)
            continue
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest() if args.sha256 else None
        declarations = header_declarations(wheel, fw)
        entries[(fw, release)] = {"framework": fw, "release": release, "paths": sorted(paths), "wheel": wheel.name,
                                  "size": wheel.stat().st_size, "sha256": digest, "declarations": declarations}
        print(f"{fw} {release}: {len(paths)} paths, {len(declarations)} headers' declarations ({wheel.name})")
    doc = release_index.build_index(list(entries.values()), BUILDER, time.strftime("%Y-%m-%d", time.gmtime()))
    release_index.write_index(doc, args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
