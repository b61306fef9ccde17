"""CLI commands of the sources stage: `sftl sources fetch` fills the cache ahead of offline use, `sftl sources list` shows it."""

from __future__ import annotations

import argparse
from typing import Any

from sftl.cli import EXIT_OK, add_common


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add this module's sub-commands to the `sftl` parser."""
    sources = sub.add_parser("sources", help="framework source trees: fetch into the cache, list what is cached")
    add_common(sources)
    inner = sources.add_subparsers(dest="sources_command", metavar="SUBCOMMAND")

    fetch = inner.add_parser(
        "fetch",
        help="download a release's wheel (Python files, native_functions.yaml) and optionally its C++ kernels",
        description=(
            "Download FRAMEWORK==VERSION's wheel from the package registry (pip download, no install) into the "
            "cache; with --cxx also the C++/CUDA kernel sources through GitHub's API (set GITHUB_TOKEN: "
            "this is ~2,000 requests for PyTorch)."
        ),
    )
    add_common(fetch)
    fetch.add_argument("spec", metavar="FRAMEWORK==VERSION", help="e.g. pytorch==1.12.1 or tensorflow==2.6.0")
    fetch.add_argument("--python", help="ask for the wheel of this Python (default: one the release supports)")
    fetch.add_argument("--cxx", action="store_true", help="also fetch the C++/CUDA kernel sources from GitHub")
    fetch.add_argument("--json", action="store_true", help="print what was fetched as JSON")
    fetch.set_defaults(handler=_fetch)

    add = inner.add_parser(
        "add",
        help="register a local source tree (a checkout, an unpacked source package) for a release",
        description=(
            "Remember DIR as the sources of FRAMEWORK==VERSION. `sftl locate` then uses it for that release, and "
            "as the nearest tree for releases whose C++ sources are not cached (the report says so)."
        ),
    )
    add_common(add)
    add.add_argument("spec", metavar="FRAMEWORK==VERSION")
    add.add_argument("root", metavar="DIR", help="a tree laid out like the framework's repository")
    add.set_defaults(handler=_add)

    lister = inner.add_parser("list", help="list cached wheels, GitHub trees and registered local trees")
    add_common(lister)
    lister.add_argument("--json", action="store_true", help="print a JSON list")
    lister.set_defaults(handler=_list)
    sources.set_defaults(handler=_list)


def _fetch(args: argparse.Namespace, ctx: Any) -> int:
    from sftl.envs import parse_version
    from sftl.sources import fetch_cxx, fetch_wheel, parse_spec

    framework, version = parse_spec(args.spec)
    parse_version(version)  # 'pytorch==abc' is bad input (exit 2), not a question for pip
    ctx.err.write(f"fetching the {framework} {version} wheel ...\n")
    wheel = fetch_wheel(framework, version, ctx.settings, python=args.python)
    result: dict[str, Any] = {"framework": framework, "version": version, "wheel": str(wheel), "cxx_files": None}
    if args.cxx:
        ctx.err.write(f"fetching {framework} {version} C++/CUDA kernel sources from GitHub ...\n")
        result["cxx_files"] = fetch_cxx(framework, version, ctx.settings)
    if args.json:
        ctx.print_json(result)
    else:
        ctx.out.write(f"{framework} {version}: wheel {wheel}\n")
        if result["cxx_files"] is not None:
            ctx.out.write(f"{framework} {version}: {result['cxx_files']} C++/CUDA files newly cached\n")
    return EXIT_OK


def _add(args: argparse.Namespace, ctx: Any) -> int:
    from sftl.envs import parse_version
    from sftl.sources import parse_spec, register_tree

    framework, version = parse_spec(args.spec)
    parse_version(version)
    register_tree(ctx.settings, framework, version, args.root)
    ctx.out.write(f"{framework} {version}: tree {args.root} registered\n")
    if framework == "pytorch":  # index the kernels now, so the first `sftl locate` on it is as fast as the next
        import time

        from sftl.localize.gcrde import prepare_index
        from sftl.sources import open_source

        started = time.perf_counter()
        count = prepare_index(open_source(framework, version, ctx.settings))
        ctx.err.write(f"indexed {count} ATen kernel files in {time.perf_counter() - started:.1f}s\n")
    return EXIT_OK


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

    table = Table("framework", "version", "kind", "files", "size", "path")
    for e in entries:
        size = f"{e.size_bytes / 1e6:.1f} MB" if e.kind != "tree" else "-"
        table.add_row(e.framework, e.version, e.kind, str(e.files) if e.kind != "tree" else "-", size, e.path)
    ctx.console().print(table)
    return EXIT_OK
