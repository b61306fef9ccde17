"""`sftl doctor`: what confinement this machine gives report code, property by property, and what provides a missing one."""

from __future__ import annotations

import argparse

from sftl.cli import EXIT_OK, Context, add_common


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add this module's sub-commands to the `sftl` parser."""
    p = sub.add_parser(
        "doctor",
        help="say what confinement this machine gives report code (replay, bisect, nan-search)",
        description="Probe, for real, the sandbox that runs report code here: bubblewrap, else user namespaces "
        "(unshare), else none; and each property it must give (no network, read-only filesystem, hidden "
        "environment, process, memory, time and output caps): yes or no, and how; and the filesystem it sees, "
        "mount by mount (read-only or writable). Exit 0 when report code can "
        "run confined (on the GPU too, where there is one), 7 when a property is missing (the commands that run "
        "report code then refuse).",
    )
    p.add_argument("--json", action="store_true", help="print the properties as JSON")
    add_common(p)
    p.set_defaults(handler=run_doctor)


def run_doctor(args: argparse.Namespace, ctx: Context) -> int:
    from sftl.errors import ConfinementError, SandboxError
    from sftl.replay import has_cuda_device
    from sftl.sandbox import NOBODY, Limits, guards, probe, refusal, sample_view

    caps = probe(ctx.settings)
    limits = Limits()
    gpu = has_cuda_device()  # GPU runs need a memory cgroup (RLIMIT_AS breaks CUDA): judged where there is a GPU
    rows = guards(caps, limits, gpu=gpu)
    missing = tuple(g for g in rows if not g.held)
    cpu_missing = tuple(g for g in guards(caps, limits, gpu=False) if not g.held)
    try:
        view = sample_view(ctx.settings, caps, gpu)
        mounts, no_view = view.mounts, ""
    except SandboxError as exc:  # sftl's own interpreter lies where no view can show it alone
        mounts, no_view = (), str(exc)
    if args.json:
        ctx.print_json({
            "backend": caps.backend, "why": list(caps.why), "confined": not missing, "confined_cpu": not cpu_missing,
            "gpu": gpu,
            "guards": [{"name": g.name, "held": g.held, "how": g.how, "provide": g.provide or None} for g in rows],
            "view": [{"path": m.path, "access": m.access, "source": m.source, "why": m.why} for m in mounts],
            "user": {"uid": NOBODY, "gid": NOBODY, "capabilities": []},
        })
    else:
        backend = {"bubblewrap": f"bubblewrap ({caps.bwrap})", "unshare": "user namespaces (unshare, no bubblewrap)"}
        ctx.out.write(f"sandbox: {backend.get(caps.backend or '', 'NONE')}\n")
        for why in caps.why:
            ctx.out.write(f"  ({why})\n")
        if caps.bwrap and caps.unshare:
            ctx.out.write("  (the fallback, user namespaces, works here too)\n")
        width = max(len(g.name) for g in rows)
        for g in rows:
            ctx.out.write(f"  {g.name:<{width}}  {'yes' if g.held else 'NO '}  {g.how}\n")
            if g.provide:
                ctx.out.write(f"  {'':<{width}}       provided by: {g.provide}\n")
        if mounts:
            ctx.out.write("what report code sees (nothing else of this machine; the same on both backends; shown "
                          "for sftl's own interpreter, a replay environment's folders take its place):\n")
            for line in view.lines():
                ctx.out.write(f"  {line}\n")
            ctx.out.write(f"  it runs as nobody (uid and gid {NOBODY}), with no capabilities\n")
        else:
            ctx.out.write(f"what report code sees: {no_view}\n")
        if not missing:
            ctx.out.write(f"report code runs confined here ({'CPU and GPU runs' if gpu else 'CPU runs; no GPU here'})\n")
        elif not cpu_missing:
            ctx.out.write("report code runs confined on CPU; GPU runs are refused\n")
    if missing:
        raise ConfinementError(refusal(missing))
    return EXIT_OK
