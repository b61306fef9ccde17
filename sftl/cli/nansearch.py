"""`sftl nan-search`: search a script's inputs for NaN/INF by gradient back-propagation, against random search."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sftl.cli import add_common, add_unconfined, require_confinement


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add this module's sub-commands to the `sftl` parser."""
    p = sub.add_parser(
        "nan-search",
        help="search a script's inputs for NaN/INF (gradient-guided, with a random baseline)",
        description=(
            "Steer a PyTorch (or, with --entry, TensorFlow) program's inputs towards its numerically unsafe "
            "operations (log, sqrt, div, exp, pow, acos, ...) until one produces NaN/INF; report the "
            "operation, the line that called it and the inputs, and compare with random search."
        ),
    )
    p.add_argument("script", help="the Python script to search (run in a child process)")
    p.add_argument("--entry", metavar="FUNC",
                   help="search FUNC(*example_inputs()) instead of running the whole script")
    p.add_argument("--budget", type=float, default=20.0, metavar="SECONDS",
                   help="time for the search, and again for the random baseline (default 20)")
    p.add_argument("--params", action="store_true",
                   help="with --entry: search the parameters of the script's nn.Module globals too (PyTorch)")
    p.add_argument("--soft", action="store_true",
                   help="add the soft-assertion guide beside the gradient: per-op classifiers trained on the op's "
                        "own unit runs say which way to move its input (PyTorch)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--no-baseline", action="store_true", help="skip the random-search baseline")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--allow-network", action="store_true", help="let the script reach the network (still confined otherwise)")
    add_unconfined(p)
    add_common(p)
    p.set_defaults(handler=run_nan_search)


def run_nan_search(args: argparse.Namespace, ctx: Any) -> int:
    from sftl.nansearch.search import search_script

    if not Path(args.script).is_file():  # bad input (exit 2) before a machine that cannot confine it (7)
        from sftl.errors import InputError

        raise InputError(f"no such script: {args.script}")
    require_confinement(ctx, args.unconfined)
    result = search_script(Path(args.script), ctx.settings, entry=args.entry, budget=args.budget,
                           seed=args.seed, baseline=not args.no_baseline, params=args.params,
                           allow_network=args.allow_network, soft=args.soft, unconfined=args.unconfined)
    if args.json:
        ctx.print_json(result.to_json())
        return 0
    con = ctx.console()
    name = Path(result.script).name
    if result.found:
        where = f"{name}:{result.line}" if result.line else name
        con.print(f"[bold red]NaN/INF[/] from [bold]{result.op}[/] at {where} ({result.kind})")
        if result.code:
            con.print(f"    {result.code}", markup=False)
        for arg in result.inputs.get("op", []):
            con.print(f"  op input  {_describe(arg)}", markup=False)
        for var in result.inputs.get("program", []):
            con.print(f"  program   {_describe(var)}", markup=False)
        how = {"domain": "a domain probe", "gradient": "the gradient", "soft": "the soft-assertion guide",
               "restart": "the gradient after a restart"}.get(result.phase)
        con.print(f"found after {result.steps} runs in {_seconds(result.seconds)}"
                  + (f" by {how}" if how else "") + (f" ({result.reason})" if result.reason else ""))
    else:
        con.print(f"no NaN/INF found in {name} ({result.reason}; {result.steps} runs, {result.seconds:.1f} s)")
        if result.sites:
            con.print("unsafe operations reached: " + ", ".join(result.sites), markup=False)
    base = result.baseline
    if base is not None:
        verdict = f"found after {base.steps} runs in {_seconds(base.seconds)}" if base.found else (
            f"found nothing in {base.steps} runs ({base.seconds:.1f} s)")
        line = f"random search: {verdict}"
        if result.speedup is not None:
            line += "; " + comparison(result.speedup, base.found)
        con.print(line)
    return 0


def comparison(speedup: float, baseline_found: bool) -> str:
    """How the two searches compare, in words that say something when they tie or the baseline wins."""
    if not baseline_found:
        return f"gradient search >={speedup:.1f}x faster"
    if 0.8 <= speedup <= 1.25:
        return "both about as fast"
    if speedup < 1:
        return f"random search {1 / speedup:.1f}x faster"
    return f"gradient search {speedup:.1f}x faster"


def _seconds(s: float) -> str:
    return f"{s * 1e3:.2f} ms" if s < 0.1 else f"{s:.3f} s"


def _describe(summary: dict[str, Any]) -> str:
    name = summary.get("name", "")
    if "value" in summary:
        return f"{name} = {summary['value']}"
    shape = "x".join(str(d) for d in summary.get("shape", [])) or "scalar"
    values = ", ".join(str(v) for v in summary.get("values", []))
    return (f"{name} {summary.get('dtype', '')}[{shape}] min {summary.get('min')} max {summary.get('max')}"
            f" [{values}{', ...' if len(summary.get('values', [])) >= 6 else ''}]")
