"""The code graph of a release: how long it takes to build cold (nothing kept) and to load warm, its size on disk,
and what a name walks to, for a TensorFlow and a PyTorch release read as sftl reads a report's (its wheel's Python
files over the nearest Debian tree).

Target (#31): a release's graph builds in <= 3 minutes here; `sftl locate` on a stored issue stays <= 1 s once it
is kept (bench/bench_locate_speed.py times locate; this times the graph's part of it).

Needs a home provisioned by `bench/real_sources.py --fetch` (default /work/cache/home-bench); without it, says so
and exits 0. Usage: `python bench/bench_graph.py [--home DIR] [--release FW==VERSION ...]`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_RELEASES = ("tensorflow==2.4.0", "pytorch==2.4.0")
WALKS = {"tensorflow": ("image.resize", "raw_ops.SegmentSum", "data.Dataset.map"),
         "pytorch": ("torch.nn.functional.interpolate", "torch.histc", "torch.nn.GroupNorm")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, default=Path(os.environ.get("SFTL_BENCH_HOME", "/work/cache/home-bench")))
    ap.add_argument("--release", action="append", help="FW==VERSION (default: tensorflow==2.4.0, pytorch==2.4.0)")
    args = ap.parse_args(argv)
    if not (args.home / "cache" / "sources").is_dir():
        print(f"no provisioned home at {args.home}: run bench/real_sources.py --fetch first; nothing measured")
        return 0
    os.environ["SFTL_HOME"] = str(args.home)
    os.environ["SFTL_OFFLINE"] = "1"
    from sftl.codegraph.graph import build_graph, sizes_on_disk
    from sftl.codegraph.walk import walk
    from sftl.config import load_settings
    from sftl.sources import open_source, parse_spec

    settings = load_settings()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for spec in args.release or DEFAULT_RELEASES:
        framework, version = parse_spec(spec)
        source = open_source(framework, version, settings, offline=True, needs_cxx=True)
        with tempfile.TemporaryDirectory(prefix="sftl-graph-") as tmp:
            started = time.perf_counter()
            cpu = time.process_time()
            graph = build_graph(source, Path(tmp))
            cold, cold_cpu = time.perf_counter() - started, time.process_time() - cpu
            sizes = sizes_on_disk(Path(tmp))
            started = time.perf_counter()
            build_graph(source, Path(tmp))  # a new process would load it: the kept file is read (no memo in memory)
            warm = time.perf_counter() - started
        composed = sum(v for k, v in sizes.items() if k.startswith("graph-"))
        layers = sum(v for k, v in sizes.items() if k.startswith("layer-"))
        print(f"\n{spec}: {graph.files} files with facts, {len(graph.sites)} ops, {len(graph.names)} names "
              f"({source.description})")
        print(f"  cold build {cold:.1f} s wall ({cold_cpu:.1f} s CPU); warm load {warm * 1000:.0f} ms")
        print(f"  on disk: the release's graph {composed / 1e6:.1f} MB, its layers' facts {layers / 1e6:.1f} MB "
              "(a tree's layer is shared by every release read over it)")
        for name in WALKS.get(framework, ()):
            reached = walk(graph, [name], [name.rsplit(".", 1)[-1]], limit=8)
            print(f"  {name}: " + ", ".join(f"{r.path.rsplit('/', 1)[-1]} ({'/'.join(sorted(r.layers))})"
                                             for r in reached[:6]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
