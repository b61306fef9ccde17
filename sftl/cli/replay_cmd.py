"""CLI commands of the replay stage: `sftl replay`, `sftl bisect` and `sftl envs list|create|remove|prune|lock`."""

from __future__ import annotations

import argparse
from typing import Any

from sftl.cli import (
    EXIT_ERROR,
    EXIT_NO_RESULT,
    EXIT_OK,
    Context,
    add_common,
    add_unconfined,
    require_confinement,
)

_TARGET_HELP = "issue URL, OWNER/REPO#N, or a GitHub issue JSON file (or use --snippet)"
EXIT_ENV = 6

# verdicts that mean "it ran and answered"; anything else (env-unavailable, no-snippet, ...) exits 8
_ANSWERED = ("reproduced", "different-error", "no-error", "discrepancy", "no-discrepancy", "timeout", "resource-limit")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add this module's sub-commands to the `sftl` parser."""
    p = sub.add_parser(
        "replay",
        help="run an issue's snippet, sandboxed, in a matching environment on CPU and GPU",
        description="Replay an issue's snippet (or --snippet FILE) in an environment matching the report's "
        "version, inside the sandbox (no network, read-only system, limits), on CPU with CUDA hidden and on "
        "the GPU when there is one. Exit 0 when the replay answered, 8 when it could not (no environment, "
        "no snippet, no device), 7 when this machine cannot confine it (`sftl doctor` says why; --unconfined "
        "runs it anyway).",
    )
    p.add_argument("target", metavar="TARGET", nargs="?", help=_TARGET_HELP)
    _snippet_args(p)
    _run_args(p)
    p.add_argument("--nan-search", action="store_true",
                   help="also search the snippet's inputs for NaN/INF (PyTorch; gradient-guided, sandboxed)")
    p.add_argument("--nan-budget", type=float, default=20.0, metavar="S", help="seconds for --nan-search (default 20)")
    p.add_argument("--json", action="store_true", help="print the documented JSON object")
    add_common(p)
    p.set_defaults(handler=cmd_replay)

    p = sub.add_parser(
        "bisect",
        help="replay across framework releases: first bad, last good, fixed in",
        description="Replay the snippet on every release in --versions (e.g. 2.0..2.13 = the latest patch of "
        "each minor, or a list 1.12.1,2.0.0). Releases without an environment are reported as such.",
    )
    p.add_argument("target", metavar="TARGET", nargs="?", help=_TARGET_HELP)
    p.add_argument("--versions", required=True, metavar="RANGE", help="LO..HI (minor releases) or V1,V2,...")
    _snippet_args(p)
    _run_args(p)
    p.add_argument("--json", action="store_true", help="print the bisection as JSON")
    add_common(p)
    p.set_defaults(handler=cmd_bisect)

    p = sub.add_parser("envs", help="replay environments: list, create, remove, prune, lock",
                       description="Environments are cached under SFTL_HOME/envs and reused by every replay.")
    esub = p.add_subparsers(dest="envs_command", metavar="ACTION")
    e = esub.add_parser("list", help="release specs, built environments and the backends available here")
    e.add_argument("--json", action="store_true")
    add_common(e)
    e.set_defaults(handler=cmd_envs_list)
    e = esub.add_parser("create", help="build the environment for FRAMEWORK==VERSION (e.g. pytorch==1.13.1)")
    e.add_argument("spec", metavar="FRAMEWORK==VERSION")
    e.add_argument("--backend", choices=("auto", "conda", "venv"), default="auto")
    e.add_argument("--python", metavar="X.Y", type=_python_version, help="the Python to build with (default: newest supported that works)")
    e.add_argument("--dry-run", action="store_true", help="show the resolution and the commands; build nothing")
    e.add_argument("--json", action="store_true")
    add_common(e)
    e.set_defaults(handler=cmd_envs_create)
    e = esub.add_parser("remove", help="delete a built environment")
    e.add_argument("name", metavar="NAME")
    add_common(e)
    e.set_defaults(handler=cmd_envs_remove)
    e = esub.add_parser("prune", help="remove the least recently used environments until the rest fit in --max-size")
    e.add_argument("--max-size", required=True, metavar="SIZE", help="disk the built environments may take (e.g. 40G)")
    e.add_argument("--json", action="store_true")
    add_common(e)
    e.set_defaults(handler=cmd_envs_prune)
    e = esub.add_parser("lock", help="write conda-lock lockfiles (needs a conda solver and reachable channels)")
    e.add_argument("--json", action="store_true")
    add_common(e)
    e.set_defaults(handler=cmd_envs_lock)
    add_common(p)
    p.set_defaults(handler=cmd_envs_list, json=False)  # `sftl envs` lists, as `sftl sources` and `sftl cache` do


def _snippet_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--snippet", metavar="FILE.py", help="replay this file instead of an issue's snippet")
    p.add_argument("--framework", choices=("pytorch", "tensorflow"), help="framework (with --snippet, or to override)")
    p.add_argument("--version", dest="fw_version", metavar="V", help="framework version (with --snippet, or to override)")
    p.add_argument("--expect", metavar="'Type: message'", help="the error a reproduction must raise (with --snippet)")


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", choices=("cpu", "gpu", "both"), default="both")
    p.add_argument("--env", default="auto", metavar="auto|current|NAME", help="environment (default: auto)")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S", help="wall-time limit per run (default 120)")
    p.add_argument("--memory", default="4G", metavar="SIZE", help="memory limit per run (default 4G)")
    p.add_argument("--max-procs", type=int, default=256, metavar="N", help="process cap per run (default 256)")
    p.add_argument("--max-output", default="10M", metavar="SIZE", help="stdout+stderr cap per run (default 10M)")
    p.add_argument("--allow-network", action="store_true", help="let the snippet reach the network (still confined otherwise)")
    add_unconfined(p)
    p.add_argument("--build", action="store_true", help="build a missing environment (venv/conda) before replaying")
    p.add_argument("--no-cache", action="store_true", help="run again even when a stored result exists")
    p.add_argument("--no-repair", action="store_true",
                   help="replay the snippet verbatim (no prompt stripping, added imports or joined blocks)")


def _limits(args: argparse.Namespace) -> Any:
    from sftl.errors import InputError
    from sftl.sandbox import Limits, parse_size

    # `not x > 0` also refuses nan; inf would never time out, so it is refused too.
    if not 0 < args.timeout < float("inf") or args.max_procs < 1:
        raise InputError("--timeout and --max-procs must be positive")
    budget = getattr(args, "nan_budget", None)
    if budget is not None and not 0 < budget < float("inf"):
        raise InputError(f"--nan-budget must be a positive number of seconds, not {budget}")
    # limits the kernel cannot take (setrlimit overflows) failed as "cannot start the sandbox" (exit 7),
    # and --memory 0 let every run crash: refuse them as bad input
    if args.timeout > 1e6 or args.max_procs >= 2**31:
        raise InputError("--timeout is at most 1000000 seconds and --max-procs below 2147483648")
    memory = parse_size(args.memory)
    if not 0 < memory < 2**62:
        raise InputError(f"--memory {args.memory}: expected a size between 1 byte and 4E (e.g. 4G)")
    output = parse_size(args.max_output)
    if output >= 2**62:
        raise InputError(f"--max-output {args.max_output}: too large")
    return Limits(timeout=args.timeout, memory=memory, max_procs=args.max_procs, output=output)


def _confined_or_refuse(args: argparse.Namespace, ctx: Context) -> None:
    """Refuse before any work where the snippet could not run confined (a GPU run needs a memory cgroup)."""
    from sftl.replay import has_cuda_device

    gpu = args.device in ("gpu", "both") and has_cuda_device()
    require_confinement(ctx, args.unconfined, gpu=gpu, limits=_limits(args))


def _check_version(text: str | None) -> None:
    """A --version the user typed must read as a release (exit 2), unlike a report's, which may be vague."""
    if text is not None:
        from sftl.envs import parse_version

        parse_version(text)


def _python_version(text: str) -> str:
    """argparse type for --python: X.Y (or X.Y.Z)."""
    import re

    if not re.fullmatch(r"[23]\.\d{1,2}(\.\d{1,2})?", text.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Python version X.Y (e.g. 3.10)")
    return text.strip()


def _inputs(args: argparse.Namespace, ctx: Context, store: Any) -> tuple[str, str | None, str | None, Any, Any]:
    """(code, framework, version, expected, issue) from --snippet or TARGET."""
    from pathlib import Path

    from sftl.errors import InputError
    from sftl.model import Traceback

    if args.snippet:
        if args.target:
            raise InputError("give either TARGET or --snippet, not both")
        try:
            code = Path(args.snippet).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read {args.snippet}: {exc}") from None
        checked = code
        if not getattr(args, "no_repair", False):  # what will run is the snippet after its repairs
            from sftl.extract.repair import repair_snippet

            checked = repair_snippet(code, args.framework).code
        try:
            compile(checked, args.snippet, "exec", dont_inherit=True)
        except SyntaxError as exc:  # its own SyntaxError is no reproduction of anything: say it never ran
            raise InputError(f"{args.snippet}:{exc.lineno or '?'}: the snippet does not parse "
                             f"(SyntaxError: {exc.msg}); it never ran") from None
        except (ValueError, RecursionError, MemoryError) as exc:
            raise InputError(f"{args.snippet}: the snippet cannot be compiled ({type(exc).__name__}); it never ran") from None
        expected = None
        if args.expect:
            kind, _, message = args.expect.partition(":")
            expected = Traceback(frames=(), exception=kind.strip(), message=message.strip())
        if not args.framework:
            raise InputError("--snippet needs --framework pytorch|tensorflow")
        _check_version(args.fw_version)
        return code, args.framework, args.fw_version, expected, None
    if not args.target:
        raise InputError("give a TARGET (issue URL, OWNER/REPO#N, FILE.json) or --snippet FILE.py")
    from sftl.extract import extract
    from sftl.intake import load_issue
    from sftl.replay import expected_error, framework_of

    issue = load_issue(args.target, ctx.settings, store)
    extraction = extract(issue)
    code = extraction.snippet.code if extraction.snippet else ""
    expected = expected_error(extraction)
    if args.expect:
        kind, _, message = args.expect.partition(":")
        expected = Traceback(frames=(), exception=kind.strip(), message=message.strip())
    framework = args.framework or framework_of(issue, extraction)
    _check_version(args.fw_version)
    version = args.fw_version or extraction.environment.version
    return code, framework, version, expected, issue


def _report_context(args: argparse.Namespace, issue: Any) -> dict[str, Any]:
    """Repair switch, the report's other Python blocks and the day it was filed, for replay_snippet."""
    ctx: dict[str, Any] = {"repair": not args.no_repair}
    if issue is not None:
        from sftl.extract import extract

        extraction = extract(issue)
        snippet = extraction.snippet
        ctx["others"] = tuple(b.code for b in snippet.candidates if b.kind == "python") if snippet else ()
        ctx["when"] = issue.created_at or None
        ctx["python"] = extraction.environment.python
    return ctx


def cmd_replay(args: argparse.Namespace, ctx: Context) -> int:
    from sftl.replay import replay_json, replay_snippet
    from sftl.store import Store

    with Store(ctx.settings.db_path) as store:
        code, framework, version, expected, issue = _inputs(args, ctx, store)
        _confined_or_refuse(args, ctx)  # bad input first (exit 2), then a machine that cannot confine it (7)
        replay = replay_snippet(
            code, framework, version, ctx.settings, device=args.device, env=args.env, expected=expected,
            limits=_limits(args), allow_network=args.allow_network, store=store, use_cache=not args.no_cache,
            build=args.build, repo=issue.repo if issue else None, number=issue.number if issue else None,
            unconfined=args.unconfined,
            **_report_context(args, issue),
        )
    nan = _nan_search(args, ctx, code, framework) if args.nan_search else None
    if args.json:
        obj = replay_json(replay)
        if args.nan_search:
            obj["nan_search"] = nan
        ctx.print_json(obj)
    else:
        _print_replay(ctx, replay)
        if args.nan_search:
            _print_nan(ctx, nan)
    return EXIT_OK if replay.verdict.value in _ANSWERED else EXIT_NO_RESULT


def _nan_search(args: argparse.Namespace, ctx: Context, code: str, framework: str | None) -> dict[str, Any]:
    """The NaN/INF search over the same snippet; a failure is reported in the result, not raised."""
    from sftl.errors import SftlError
    from sftl.nansearch.search import search_snippet

    if not code.strip():
        return {"found": False, "reason": "no snippet to search"}
    if framework not in (None, "pytorch"):
        return {"found": False, "reason": "whole-script NaN/INF search supports PyTorch snippets only"}
    try:
        result = search_snippet(code, ctx.settings, budget=args.nan_budget, allow_network=args.allow_network,
                                unconfined=args.unconfined)
    except SftlError as exc:
        return {"found": False, "reason": str(exc)}
    return dict(result.to_json(), reason=result.reason)


def _print_nan(ctx: Context, nan: dict[str, Any] | None) -> None:
    if not nan:
        return
    if nan.get("found"):
        ctx.out.write(f"nan-search: {nan.get('op')} produced NaN/INF at line {nan.get('line')} after "
                      f"{nan.get('steps')} runs ({nan.get('seconds', 0):.2f} s)\n")
    else:
        ctx.out.write(f"nan-search: nothing found{': ' + nan['reason'] if nan.get('reason') else ''}\n")


def _print_replay(ctx: Context, replay: Any) -> None:
    from sftl.sandbox import output_tail

    out = ctx.out
    cut = 160 if ctx.is_terminal(out) else None  # long lines are cut on a terminal only
    env = replay.environment
    out.write(f"verdict: {replay.verdict.value}\n  {replay.reason}\n")
    if env.backend:
        out.write(f"environment: {env.framework} {env.version}, python {env.python}, {env.backend} ({env.name})\n")
    if env.reason:
        out.write(f"  why: {env.reason}\n")
    for repair in replay.repairs:
        out.write(f"repaired: {repair.detail}\n")
    if replay.packages:
        out.write(f"packages: {', '.join(replay.packages)}\n")
    for run in replay.runs:
        line = f"{run.device.value}: {run.outcome.value}"
        if run.exception:
            line += f"  {run.exception}: {(run.message or '').splitlines()[0][:cut] if run.message else ''}"
        elif run.message:
            line += f"  {run.message}"
        out.write(line + (f"  ({run.seconds:.2f} s{', cached' if run.details.get('cached') else ''})\n"
                          if run.details.get("containment") else "\n"))
        contained = run.details.get("containment")
        if contained and contained.get("degraded"):
            out.write(f"  containment degraded: {'; '.join(contained['degraded'])}\n")
        if run.stdout_tail.strip():
            tail = output_tail(run.stdout_tail.strip(), lines=5).splitlines()  # data: bounded, escaped
            out.write("  stdout: " + "\n          ".join(t[:cut] for t in tail) + "\n")
    if replay.first_divergent_op:
        out.write(f"first divergent operator: {replay.first_divergent_op}\n")


def cmd_bisect(args: argparse.Namespace, ctx: Context) -> int:
    from sftl.errors import InputError, NoResultError
    from sftl.replay import bisect, bisect_json, expand_versions
    from sftl.store import Store

    with Store(ctx.settings.db_path) as store:
        code, framework, _version, expected, issue = _inputs(args, ctx, store)
        _confined_or_refuse(args, ctx)
        if not code.strip():
            raise NoResultError(f"{issue.key if issue else 'the report'} has no snippet to replay, so there is nothing to "
                           "bisect (give one with --snippet FILE.py)")
        if not framework:
            raise InputError("cannot tell the framework; pass --framework")
        result = bisect(
            code, framework, expand_versions(framework, args.versions), ctx.settings, device=args.device,
            env=args.env, expected=expected, limits=_limits(args), allow_network=args.allow_network, store=store,
            use_cache=not args.no_cache, build=args.build, unconfined=args.unconfined,
            repo=issue.repo if issue else None, number=issue.number if issue else None,
            **_report_context(args, issue),
        )
    if args.json:
        ctx.print_json(bisect_json(result))
    else:
        for version, replay in result.steps:
            env = replay.environment
            where = f"{env.backend} {env.name}" if env.backend else ""
            ctx.out.write(f"{version:>10}  {replay.verdict.value:<16} {where}\n")
        ctx.out.write(f"first bad: {result.first_bad or '-'}   last good: {result.last_good or '-'}   "
                      f"fixed in: {result.fixed_in or '-'}\n  {result.reason}\n")
    ran = len(result.steps) - len(result.unavailable)
    return EXIT_OK if ran else EXIT_NO_RESULT


# -- envs ----------------------------------------------------------------------------------------


def cmd_envs_list(args: argparse.Namespace, ctx: Context) -> int:
    from sftl.envs_build import EnvManager
    from sftl.model import to_jsonable

    manager = EnvManager(ctx.settings)
    specs: list[dict[str, Any]] = [
        {"framework": r.framework, "release": r.minor, "patches": list(r.patches), "pythons": list(r.pythons),
         "numpy": r.numpy, "spec": r.spec_path.name, "lockfile": manager.catalog.lockfile(r).exists()}
        for r in sorted(manager.catalog.releases, key=lambda r: (r.framework, r.key))
    ]
    built = [to_jsonable(h) for h in manager.built()]
    for b in built:
        b["python"], b["path"] = str(b["python"]), str(b["path"])
    backends = manager.backends()
    if args.json:
        ctx.print_json({"backends": backends, "built": built, "specs": specs})
        return EXIT_OK
    out = ctx.out
    out.write("backends:\n" + "".join(f"  {k:<8} {v}\n" for k, v in backends.items()))
    out.write(f"built ({manager.root}):\n")
    out.write("".join(f"  {b['name']:<36} {b['backend']:<8} python {b['python_version']}\n" for b in built) or "  (none)\n")
    out.write(f"specs ({len(specs)} in {manager.catalog.root}):\n")
    for s in specs:
        out.write(f"  {s['framework']:<10} {s['release']:<5} patches {','.join(s['patches']):<32} python "
                  f"{s['pythons'][0]}-{s['pythons'][-1]}  numpy {s['numpy']}{'  locked' if s['lockfile'] else ''}\n")
    return EXIT_OK


def _parse_spec(text: str) -> tuple[str, str | None]:
    from sftl.errors import InputError

    for sep in ("==", "=", "@", " "):
        if sep in text:
            fw, _, version = text.partition(sep)
            return fw.strip(), version.strip() or None
    if not text.strip():
        raise InputError("give FRAMEWORK==VERSION, e.g. pytorch==1.13.1")
    return text.strip(), None


def cmd_envs_create(args: argparse.Namespace, ctx: Context) -> int:
    from sftl.envs import resolve
    from sftl.envs_build import EnvManager

    framework, version = _parse_spec(args.spec)
    manager = EnvManager(ctx.settings)
    resolution = resolve(manager.catalog, framework, version)
    kind, name, commands, prefix, py = manager.plan(resolution, args.backend, python=args.python)
    if args.dry_run:
        payload = {"framework": resolution.framework, "version": resolution.version, "match": resolution.match,
                   "why": resolution.why, "backend": kind, "name": name, "python": py, "prefix": str(prefix),
                   "commands": commands}
        if args.json:
            ctx.print_json(payload)
        else:
            ctx.out.write(f"{resolution.framework} {resolution.version} ({resolution.match}: {resolution.why})\n")
            ctx.out.write(f"backend {kind}, python {py}, into {prefix}:\n")
            ctx.out.write("".join(f"  $ {' '.join(c)}\n" for c in commands))
        return EXIT_OK
    ctx.err.write(f"building {name} ({resolution.why}) ...\n")
    handle = manager.create(resolution, args.backend, python=args.python)
    if args.json:
        ctx.print_json({"name": handle.name, "backend": handle.backend, "python": str(handle.python),
                        "version": handle.version, "path": str(handle.path)})
    else:
        ctx.out.write(f"{handle.name}: {handle.framework} {handle.version}, python {handle.python_version} at {handle.path}\n")
    return EXIT_OK


def cmd_envs_remove(args: argparse.Namespace, ctx: Context) -> int:
    from sftl.envs_build import EnvManager

    path = EnvManager(ctx.settings).remove(args.name)
    ctx.err.write(f"removed {path}\n")
    return EXIT_OK


def cmd_envs_prune(args: argparse.Namespace, ctx: Context) -> int:
    from sftl.envs_build import EnvManager
    from sftl.errors import InputError
    from sftl.sandbox import parse_size

    limit = parse_size(args.max_size)
    if limit >= 2**62:
        raise InputError(f"--max-size {args.max_size}: too large")
    removed = EnvManager(ctx.settings).prune(limit)
    if args.json:
        ctx.print_json({"removed": [name for name, _ in removed], "freed": sum(size for _, size in removed)})
    else:
        for name, size in removed:
            ctx.out.write(f"removed {name} ({size / 2**20:.0f} MiB)\n")
        ctx.err.write(f"freed {sum(size for _, size in removed) / 2**20:.0f} MiB; {len(removed)} environment(s) removed\n")
    return EXIT_OK


def cmd_envs_lock(args: argparse.Namespace, ctx: Context) -> int:
    from sftl.envs_build import EnvManager

    results = EnvManager(ctx.settings).lock()
    locked = [r for r, status in results if status.startswith("locked")]
    if args.json:
        ctx.print_json([{"spec": r.spec_path.name, "status": status} for r, status in results])
    else:
        for release, status in results:
            ctx.out.write(f"{release.spec_path.name:<22} {status}\n")
    if not locked:
        reasons = {status for _, status in results}
        ctx.err.write(f"sftl: no lockfile written ({'; '.join(sorted(reasons))[:300]})\n")
        return EXIT_OK if all(s.startswith("skipped") for s in reasons) else EXIT_ERROR
    return EXIT_OK if len(locked) == len(results) else EXIT_ENV
