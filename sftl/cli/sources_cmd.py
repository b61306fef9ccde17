"""CLI commands of the sources stage: `sftl sources fetch` fills the cache ahead of offline use, `list` shows it, `prune` bounds it."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from typing import IO, Any

from sftl.cli import EXIT_OK, add_common


class StderrReporter:
    """Download notices (one line each, always) and a progress bar with size and rate (only on a terminal)."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self._stream = stream
        self._started: dict[str, tuple[float, int]] = {}
        self._drawn = 0.0

    @property
    def stream(self) -> IO[str]:
        return self._stream if self._stream is not None else sys.stderr  # looked up late: tests swap stderr

    def notice(self, text: str) -> None:
        self.stream.write(f"sftl: {text}\n")
        self.stream.flush()

    def progress(self, label: str, event: str, done: int, total: int | None) -> None:
        stream = self.stream
        if not (hasattr(stream, "isatty") and stream.isatty()):
            return  # no bar in pipes and logs
        now = time.monotonic()
        if event == "start":
            self._started[label] = (now, done)
        if event == "update" and now - self._drawn < 0.1:
            return
        self._drawn = now
        began, base = self._started.get(label, (now, 0))
        rate = (done - base) / max(now - began, 1e-3)
        if total:
            filled = int(30 * min(1.0, done / total))
            bar = f"[{'#' * filled}{'.' * (30 - filled)}] {done / 1e6:7.1f}/{total / 1e6:.1f} MB"
        else:
            bar = f"{done / 1e6:7.1f} MB"
        stream.write(f"\r{label}: {bar} {rate / 1e6:5.1f} MB/s ")
        if event == "end":
            stream.write("\n")
            self._started.pop(label, None)
        stream.flush()


def show_downloads(stream: IO[str]) -> None:
    """Send the notices and progress of source downloads to `stream` (the command's stderr)."""
    from sftl.sources.archive import set_reporter

    set_reporter(StderrReporter(stream))


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add this module's sub-commands to the `sftl` parser."""
    sources = sub.add_parser("sources", help="framework sources: fetch a release into the cache, list, prune, add a checkout")
    add_common(sources)
    inner = sources.add_subparsers(dest="sources_command", metavar="SUBCOMMAND")

    fetch = inner.add_parser(
        "fetch",
        help="download a release's sources (one archive: its C++/CUDA kernels and Python files)",
        description=(
            "Download the repository's archive of FRAMEWORK==VERSION at its ref (the version as a report writes "
            "it: 2.1.0+cu121, 2.2.0a0+git2ef35a0, 1.13.0.dev20220826, tf 2.16, r2.2) and keep the folders the "
            "localizers read. One request; GITHUB_TOKEN is used when set. --wheel downloads the release's wheel "
            "instead (for replay environments; `sftl locate` never needs it)."
        ),
    )
    add_common(fetch)
    fetch.add_argument("spec", metavar="FRAMEWORK==VERSION", help="e.g. pytorch==2.1.0 or tensorflow==2.6.0")
    fetch.add_argument("--wheel", action="store_true",
                       help="download the release's wheel from the package registry instead (for replay environments)")
    fetch.add_argument("--python", help="the wheel of this Python (implies --wheel; default: one the release supports)")
    fetch.add_argument("--cxx", action="store_true", help=argparse.SUPPRESS)  # older spelling: the archive has the C++
    fetch.add_argument("--json", action="store_true", help="print what was fetched as JSON")
    fetch.set_defaults(handler=_fetch)

    add = inner.add_parser(
        "add",
        help="register a local source tree (a checkout, an unpacked source package) for a release",
        description=(
            "Remember DIR as the sources of FRAMEWORK==VERSION. `sftl locate` then uses it for that release (it wins "
            "over any download), and as the nearest tree for releases whose sources are not cached (the report says so)."
        ),
    )
    add_common(add)
    add.add_argument("spec", metavar="FRAMEWORK==VERSION")
    add.add_argument("root", metavar="DIR", help="a tree laid out like the framework's repository")
    add.set_defaults(handler=_add)

    lister = inner.add_parser("list", help="list cached releases (archives, wheels, GitHub trees) and registered trees")
    add_common(lister)
    lister.add_argument("--json", action="store_true", help="print a JSON list")
    lister.set_defaults(handler=_list)

    prune = inner.add_parser("prune", help="remove release archives unused for longer than --max-age, then the least "
                             "recently used ones until they fit in --max-size")
    prune.add_argument("--max-size", metavar="SIZE", default="20G", help="e.g. 5G, 500M, 0 (default 20G)")
    prune.add_argument("--max-age", metavar="AGE", default="180d", help="e.g. 30d, 12h, none (default 180d)")
    prune.add_argument("--json", action="store_true", help="print the figures as JSON")
    add_common(prune)
    prune.set_defaults(handler=_prune)
    graph = inner.add_parser("graph", help="build (or load) a release's code graph and show its size, or what NAMEs "
                             "reach: ops, kernels, registrations")
    graph.add_argument("spec", metavar="FRAMEWORK==VERSION", help="e.g. tensorflow==2.4.0, pytorch==2.4.0")
    graph.add_argument("names", metavar="NAME", nargs="*", help="public names or ops to walk from (image.resize, "
                       "torch.histc, raw_ops.SegmentSum)")
    graph.add_argument("--source-root", metavar="DIR", help="read this tree instead of the cached release")
    graph.add_argument("--json", action="store_true", help="print the figures and walks as JSON")
    add_common(graph)
    graph.set_defaults(handler=_graph)
    sources.set_defaults(handler=_list)


def _fetch(args: argparse.Namespace, ctx: Any) -> int:
    from sftl.errors import InputError, SourceError
    from sftl.releases import resolve
    from sftl.sources import fetch_wheel, parse_spec
    from sftl.sources.archive import fetch_archive, read_mark

    framework, version = parse_spec(args.spec)
    try:
        res = resolve(framework, version, ctx.settings)
    except SourceError as exc:  # a version that names no release is bad input (exit 2), never a question for pip
        raise InputError(str(exc)) from None
    release = res.version or version
    if args.wheel or args.python:  # for replay environments: the wheel alone
        ctx.err.write(f"sftl: fetching the {framework} {release} wheel ...\n")
        wheel = fetch_wheel(framework, release, ctx.settings, python=args.python)
        if args.json:
            ctx.print_json({"framework": framework, "version": release, "wheel": str(wheel)})
        else:
            ctx.out.write(f"{framework} {release}: wheel {wheel}\n")
        return EXIT_OK
    ctx.err.write(f"sftl: {res.reason}\n")
    if ctx.settings.offline:
        raise SourceError(f"offline: nothing can be fetched; run `sftl sources fetch {shlex.quote(args.spec)}` online")
    archive = fetch_archive(ctx.settings, framework, res.ref, res.version, res.reason)
    mark = read_mark(archive.folder)
    result: dict[str, Any] = {
        "framework": framework, "version": res.version, "ref": res.ref, "reason": res.reason,
        "archive": str(archive.root), "files": mark.files if mark else None,
        "size_bytes": mark.size_bytes if mark else None,
    }
    if args.json:
        ctx.print_json(result)
    else:
        size = f", {result['size_bytes'] / 1e6:.0f} MB" if result["size_bytes"] is not None else ""
        ctx.out.write(f"{framework} {release} at {res.ref}: {result['files']} files{size} in {archive.root}\n")
    return EXIT_OK


def _add(args: argparse.Namespace, ctx: Any) -> int:
    from sftl.envs import parse_version
    from sftl.sources import parse_spec, register_tree

    framework, version = parse_spec(args.spec)
    parse_version(version)
    register_tree(ctx.settings, framework, version, args.root)
    ctx.out.write(f"{framework} {version}: tree {args.root} registered\n")
    if framework == "pytorch":  # index the kernels now, so the first `sftl locate` on it is as fast as the next
        from sftl.localize.gcrde import prepare_index
        from sftl.sources import open_source

        started = time.perf_counter()
        count = prepare_index(open_source(framework, version, ctx.settings))
        ctx.err.write(f"indexed {count} ATen kernel files in {time.perf_counter() - started:.1f}s\n")
    return EXIT_OK


def _graph(args: argparse.Namespace, ctx: Any) -> int:
    from sftl.codegraph.graph import build_graph, sizes_on_disk
    from sftl.codegraph.walk import walk
    from sftl.sources import open_source, parse_spec

    framework, version = parse_spec(args.spec)
    source = open_source(framework, version, ctx.settings, source_root=args.source_root,
                         offline=ctx.settings.offline, needs_cxx=True)
    started = time.perf_counter()
    graph = build_graph(source, ctx.settings.cache_dir)
    seconds = time.perf_counter() - started
    kept = sizes_on_disk(ctx.settings.cache_dir)
    figures = {"framework": framework, "version": version, "source": source.description, "files": graph.files,
               "ops": len(graph.sites), "names": len(graph.names), "seconds": round(seconds, 2),
               "kept_bytes": sum(kept.values()), "kept_files": len(kept)}
    walks = {name: [{"path": r.path, "hops": r.hops, "layers": sorted(r.layers), "devices": sorted(r.devices),
                     "reason": r.reason} for r in walk(graph, [name], [name.rsplit(".", 1)[-1]], limit=15)]
             for name in args.names}
    if args.json:
        ctx.print_json({**figures, "walks": walks})
        return EXIT_OK
    ctx.out.write(f"{framework} {version}: {graph.files} files read, {len(graph.sites)} ops, {len(graph.names)} "
                  f"names, in {seconds:.1f} s ({source.description})\n")
    ctx.out.write(f"kept graphs and layers: {len(kept)} files, {sum(kept.values()) / 1e6:.1f} MB under "
                  f"{ctx.settings.cache_dir / 'codegraph'}\n")
    for name, reached in walks.items():
        ctx.out.write(f"\n{name}: {len(reached)} files\n" if reached else f"\n{name}: reaches no op of this release\n")
        for r in reached:
            ctx.out.write(f"  {r['hops']}  {r['path']}  -- {r['reason']}\n")
    return EXIT_OK


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, span in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= span:
            return f"{seconds / span:.0f}{unit}"
    return f"{seconds:.0f}s"


def _list(args: argparse.Namespace, ctx: Any) -> int:
    from sftl.model import to_jsonable
    from sftl.sources import list_cached

    entries = list_cached(ctx.settings)
    if getattr(args, "json", False):
        ctx.print_json(to_jsonable(entries))
        return EXIT_OK
    if not entries:
        ctx.out.write("nothing cached; run `sftl sources fetch pytorch==VERSION`\n")
        return EXIT_OK
    from rich.table import Table

    now = time.time()
    table = Table("framework", "version", "kind", "ref", "files", "size", "age", "path")
    for e in entries:
        size = f"{e.size_bytes / 1e6:.1f} MB" if e.kind != "tree" else "-"
        age = _age(now - e.fetched_at) if e.fetched_at else "-"
        table.add_row(e.framework, e.version, e.kind, e.ref or "-", str(e.files) if e.kind != "tree" else "-", size, age, e.path)
    ctx.console().print(table)
    return EXIT_OK


def _prune(args: argparse.Namespace, ctx: Any) -> int:
    from sftl.cli.intake import parse_age, parse_size
    from sftl.sources.archive import prune_archives

    removed, freed, kept, kept_bytes = prune_archives(ctx.settings, parse_size(args.max_size), parse_age(args.max_age))
    payload = {"removed": removed, "freed": freed, "releases": kept, "bytes": kept_bytes}
    if args.json:
        ctx.print_json(payload)
    else:
        ctx.out.write(f"release archives: removed {removed} ({freed / 1e6:.1f} MB); {kept} kept, {kept_bytes / 1e6:.1f} MB\n")
    return EXIT_OK


def prune_release_archives(ctx: Any, max_age_s: float | None) -> dict[str, Any]:
    """`sftl cache prune`'s part for release archives: unused for `max_age_s`, then over their bound; one line."""
    from sftl.sources.archive import SOURCES_MAX_BYTES, prune_archives

    removed, freed, kept, kept_bytes = prune_archives(ctx.settings, SOURCES_MAX_BYTES, max_age_s)
    payload = {"removed": removed, "freed": freed, "releases": kept, "bytes": kept_bytes, "max_bytes": SOURCES_MAX_BYTES}
    ctx.err.write(f"sftl: release archives: removed {removed} ({freed / 1e6:.1f} MB); {kept} kept, "
                  f"{kept_bytes / 1e6:.1f} MB (bound {SOURCES_MAX_BYTES / 1e9:.0f} GB; `sftl sources prune` to choose)\n")
    return payload
