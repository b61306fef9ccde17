"""`sftl fuzz`: input-validity fuzzing of one PyTorch / TensorFlow API with a learned pre-filter."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sftl.errors import InputError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add this module's sub-commands to the `sftl` parser."""
    from sftl.cli import add_common, hidden_alias

    p = sub.add_parser(
        "fuzz",
        help="fuzz one API's inputs, learning which ones it accepts",
        description="Generate inputs for one API, label them by running them in worker processes, learn a "
        "validity classifier (saved per API and version) and compare filtered with unfiltered generation "
        "on fresh inputs. Crashes (segfaults, aborts, hangs) are reported as findings.",
    )
    p.add_argument("api", help="API name: bmm, torch.linalg.inv, nn.functional.interpolate, split:sizes; "
                               "for TensorFlow a raw op (BatchMatMulV2) or a public API (tf.nn.conv2d)")
    p.add_argument("--framework", choices=("pytorch", "tensorflow"), default=None,
                   help="default: tensorflow for tf.* names, else pytorch")
    p.add_argument("--inputs", dest="budget", type=int, default=400, metavar="N",
                   help="inputs per round (training and fresh; default 400)")
    hidden_alias(p, "--budget", "budget", type=int)  # --budget means seconds elsewhere (nan-search, replay)
    p.add_argument("--strategy", choices=("random", "pairwise"), default="random")
    p.add_argument("--seed-from", metavar="TARGET", help="an issue (URL, owner/repo#N, JSON file) or a .py "
                                                         "file whose call to API seeds the search")
    p.add_argument("--retrain", action="store_true", help="ignore a saved classifier")
    p.add_argument("--jobs", dest="workers", type=int, default=None, metavar="N",
                   help="parallel worker processes (default: up to 2)")
    hidden_alias(p, "--workers", "workers", type=int)
    p.add_argument("--replay", action="store_true", help="with --seed-from: run valid variants of the "
                                                         "reported call on CPU and GPU")
    p.add_argument("--variants", type=int, default=10, help="how many variants --replay runs (default 10)")
    p.add_argument("--seed", dest="rng_seed", type=int, default=0, help="random seed (default 0)")
    hidden_alias(p, "--rng-seed", "rng_seed", type=int)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_common(p)
    p.set_defaults(handler=run_fuzz)


def _seed_code(target: str, ctx: Any) -> str:
    path = Path(target)
    if path.suffix == ".py":
        if not path.is_file():
            raise InputError(f"{target}: no such file")
        return path.read_text(encoding="utf-8", errors="replace")
    from sftl.extract import extract
    from sftl.intake import load_issue
    from sftl.store import Store

    with Store(ctx.settings.db_path) as store:
        issue = load_issue(target, ctx.settings, store)
    snippet = extract(issue).snippet
    if snippet is None:
        raise InputError(f"{issue.key} has no code snippet to seed from")
    return snippet.code


def run_fuzz(args: argparse.Namespace, ctx: Any) -> int:
    from sftl.fuzz.validity import (
        WorkerPool,
        api_spec,
        describe_call,
        find_seed,
        fuzz,
        replay_variants,
    )

    if args.budget < 20 or args.budget > 100_000:
        raise InputError(f"--inputs {args.budget}: expected 20..100000")
    if args.workers is not None and args.workers < 1:
        raise InputError(f"--jobs {args.workers}: expected at least 1")
    if args.variants < 1:
        raise InputError(f"--variants {args.variants}: expected at least 1")
    if args.replay and not args.seed_from:
        raise InputError("--replay needs --seed-from (the call whose variants are replayed)")
    framework = args.framework or ("tensorflow" if args.api.startswith(("tf.", "tensorflow.")) else "pytorch")
    if framework == "tensorflow" and not getattr(args, "debug", False):
        from sftl.cli import import_quietly

        import_quietly("tensorflow")  # its absl/oneDNN start-up lines would bury sftl's own
    spec = api_spec(args.api, framework)
    seed = None
    if args.seed_from:
        code = _seed_code(args.seed_from, ctx)
        seed = find_seed(code, spec)
        if seed is None:
            raise InputError(f"{args.seed_from}: no call to {spec.target} found in its code")
        if not args.json:
            ctx.err.write(f"seed: {describe_call(spec, seed.call)} (line {seed.line})"
                          + (f"; not read: {', '.join(seed.unresolved)}" if seed.unresolved else "") + "\n")
    with WorkerPool(spec.framework, ctx.settings, workers=args.workers) as pool:
        report = fuzz(spec, ctx.settings, pool, budget=args.budget, strategy=args.strategy, seed=seed,
                      retrain=args.retrain, rng_seed=args.rng_seed)
    if args.replay and seed is not None:
        from dataclasses import replace

        from sftl.fuzz.features import Featurizer, load_model

        clf = load_model(ctx.settings.home, spec, Featurizer(spec).names)
        variants, note = replay_variants(spec, ctx.settings, seed, clf, count=args.variants, rng_seed=args.rng_seed)
        report = replace(report, variants=variants, device_note=note)
    if args.json:
        ctx.print_json(report.as_json())
        return 0
    _print(report, ctx)
    return 0


def _print(r: Any, ctx: Any) -> None:
    from rich.table import Table

    con = ctx.console()
    con.print(f"[bold]{r.target}[/bold]  {r.framework} {r.version}  ({r.strategy}; spec from {r.schema})")
    t = Table(show_header=True, header_style="bold")
    t.add_column("")
    t.add_column("unfiltered", justify="right")
    t.add_column("filtered", justify="right")
    t.add_row("pass rate", f"{r.pass_rate_unfiltered:.1%}", f"{r.pass_rate_filtered:.1%}")
    t.add_row("valid / s", f"{r.valid_per_second_unfiltered:.0f}", f"{r.valid_per_second_filtered:.0f}")
    d = r.details
    t.add_row("executed (fresh)", str(d["fresh"]), str(d["kept"]))
    con.print(t)
    c = r.classifier
    con.print(f"classifier: {c['name']} (precision {r.precision:.1%}, recall {r.recall:.1%} on fresh inputs; "
              f"trained on {c['trained_on']} inputs, {c['trained_valid']} valid"
              f"{'; loaded from the saved model' if c.get('cached') else ''})")
    con.print(f"generated {r.generated}, executed {r.executed}, valid {r.valid}")
    if r.seed:
        con.print(f"seeded from: {r.seed['call']}")
    for e in r.examples[:3]:
        con.print(f"  valid: {e}")
    for msg, n in r.errors[:3]:
        con.print(f"  rejected x{n}: {msg}")
    if r.crashes:
        con.print(f"[bold red]{len(r.crashes)} crash(es)[/bold red]")
        for cr in r.crashes[:10]:
            con.print(f"  {cr['kind']} {cr['signal'] or ''}: {cr['input']}")
            if cr.get("message"):
                con.print(f"    {cr['message']}", markup=False)
    else:
        con.print("no crashes")
    if r.variants is not None:
        con.print(f"variants of the reported call: {r.device_note}")
        for v in r.variants:
            gpu = "n/a" if v.gpu is None else v.gpu
            diff = "" if v.max_abs_diff is None else f" max|cpu-gpu|={v.max_abs_diff:.3g}"
            con.print(f"  {'DIFF ' if v.discrepant else ''}{v.call}: cpu {v.cpu}, gpu {gpu}{diff}")
