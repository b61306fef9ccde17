"""`sftl locate`: from an issue to ranked framework source files, each with its score and reason."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from sftl.cli import (
    EXIT_NO_RESULT,
    EXIT_OK,
    Context,
    add_common,
    add_unconfined,
    check_source_root,
    positive_int,
    require_confinement,
)

if TYPE_CHECKING:
    from sftl.model import Report

METHODS = ("sftl", "paper", "vsm", "bert")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add this module's sub-commands to the `sftl` parser."""
    p = sub.add_parser(
        "locate",
        help="localize the faulty framework source file of one issue",
        description=(
            "Run intake -> extract -> screen -> localize on one issue and store the result. "
            "TARGET is an issue URL, OWNER/REPO#N, or a JSON file holding one GitHub issue object. "
            "Exit 0 when located or abstained, 8 when skipped (not an MME/GCRDE, or no sources)."
        ),
    )
    p.add_argument("target", metavar="TARGET", help="issue URL, OWNER/REPO#N, or a GitHub issue JSON file")
    p.add_argument("--source-root", metavar="DIR", help="a local tree laid out like the framework's repository")
    p.add_argument("--method", choices=METHODS, default="sftl", help="localizer (default: sftl; paper = the published method)")
    p.add_argument("--top", type=positive_int, default=10, metavar="K", help="how many files to rank (default 10)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the documented JSON object")
    out.add_argument("--format", choices=("text", "markdown"), default="text", help="output for people (default text)")
    p.add_argument("--replay", action="store_true",
                   help="also replay the snippet, confined (exit 7 where this machine cannot confine it: `sftl doctor`)")
    add_unconfined(p)
    p.add_argument("--rescreen", action="store_true", help="screen again even when a screening is stored")
    p.add_argument("--no-history", dest="history", action="store_false",
                   help="leave out the history prior (files that similar earlier fixes changed; `sftl history import`)")
    add_common(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, ctx: Context) -> int:

    from sftl.intake import load_issue
    from sftl.pipeline import locate, report_json
    from sftl.store import Store

    if args.source_root is not None:  # a typo or a wrong folder is bad input (exit 2), not a "skipped" localization
        check_source_root(args.source_root)
    if args.unconfined and not args.replay:
        from sftl.errors import InputError

        raise InputError("--unconfined is for --replay (nothing else runs report code)")
    if args.replay:
        from sftl.replay import has_cuda_device

        require_confinement(ctx, args.unconfined, gpu=has_cuda_device())
    with Store(ctx.settings.db_path) as store:
        issue = load_issue(args.target, ctx.settings, store)
        report = locate(
            issue,
            ctx.settings,
            store,
            method=args.method,
            source_root=args.source_root,
            top=args.top,
            offline=ctx.settings.offline,
            replay=args.replay,
            rescreen=args.rescreen,
            history=args.history,
            unconfined=args.unconfined,
        )
    payload = report_json(report)
    if args.json:
        ctx.print_json(payload)
    elif args.format == "markdown":
        ctx.out.write(render_markdown(payload, report))
    else:
        ctx.out.write(render_text(payload, report, cut=160 if ctx.is_terminal(ctx.out) else None))
    return EXIT_NO_RESULT if payload["outcome"] == "skipped" else EXIT_OK


def _env_line(env: dict[str, Any]) -> str:
    parts = [f"{k} {env[k]}" for k in ("framework", "version", "python", "cuda", "os") if env.get(k)]
    line = ", ".join(parts) or "nothing"
    if env.get("missing"):
        line += f"  (not stated: {', '.join(env['missing'])})"
    return line


def render_text(payload: dict[str, Any], report: Report, cut: int | None = 160) -> str:
    """What a maintainer reads in a terminal: the error and replay lines cut at `cut` (whole when None: a pipe)."""
    iss, scr = payload["issue"], payload["screening"]
    lines = [
        f"{iss['repo']}#{iss['number']}: {iss['title']}",
        f"  category     {payload['category']}  (mme {scr['mme']:.2f}, gcrde {scr['gcrde']:.2f}; {report.screening.method})",
        f"  environment  {_env_line(payload['environment'])}",
    ]
    ex = report.extraction
    tb = ex.traceback
    err = ex.error_line or (f"{tb.exception}: {tb.message}" if tb else "")
    if err:
        lines.append(f"  error        {err.strip()[:cut]}")
    if payload["replay"] is not None:
        rep = payload["replay"]
        lines.append(f"  replay       {rep.get('verdict')}: {rep.get('reason', '')[:cut]}")
        renv = rep.get("environment") or {}
        if renv.get("backend"):
            lines.append(f"               ran in {renv.get('framework')} {renv.get('version')}, python "
                         f"{renv.get('python')} ({renv.get('backend')} {renv.get('name')})")
        for repair in rep.get("repairs") or ():
            lines.append(f"               repaired: {repair.get('detail', '')[:cut]}")
        if rep.get("packages"):
            lines.append(f"               packages: {', '.join(rep['packages'])}")
    lines.append(f"  outcome      {payload['outcome']} ({payload['method']}): {payload['reason']}")
    if payload["suspects"]:
        lines.append("  suspects")
        width = max(len(s["path"]) for s in payload["suspects"])
        for i, s in enumerate(payload["suspects"], 1):
            side = f" [{s['side']}]" if s["side"] else ""
            lines.append(f"  {i:>3}. {s['score']:.3f}  {s['path']:<{width}}{side}")
            lines.append(f"              {s['reason']}")
            for f in s.get("functions", [])[:3]:  # the functions to read first, with their lines
                lines.append(f"              - {f['name']} (lines {f['start']}-{f['end']}): {f['reason']}"[:cut])
    return "\n".join(lines) + "\n"


def render_markdown(payload: dict[str, Any], report: Report) -> str:
    """The same report, ready to paste into an issue comment."""
    iss, scr = payload["issue"], payload["screening"]
    out = [
        f"### sftl: [{iss['repo']}#{iss['number']}]({iss['url']})",
        "",
        f"- **Category:** `{payload['category']}` (mme {scr['mme']:.2f}, gcrde {scr['gcrde']:.2f})",
        f"- **Environment:** {_env_line(payload['environment'])}",
        f"- **Outcome:** {payload['outcome']} (`{payload['method']}`): {payload['reason']}",
    ]
    rep = payload.get("replay")
    if rep is not None:
        renv = rep.get("environment") or {}
        where = (f" in {renv.get('framework')} {renv.get('version')}, python {renv.get('python')} "
                 f"({renv.get('backend')})") if renv.get("backend") else ""
        out.append(f"- **Replay:** `{rep.get('verdict')}`{where}: {rep.get('reason', '')}")
        out += [f"  - repaired: {r.get('detail', '')}" for r in rep.get("repairs") or ()]
        if rep.get("packages"):
            out.append(f"  - packages: {', '.join(rep['packages'])}")
    if payload["suspects"]:
        out += ["", "| # | score | file | side | why |", "|---|---|---|---|---|"]
        for i, s in enumerate(payload["suspects"], 1):
            why = s["reason"].replace("|", "\\|")
            named = "<br>".join(function_link(payload, s["path"], f) for f in s.get("functions", [])[:3])
            out.append(f"| {i} | {s['score']:.3f} | `{s['path']}` | {s['side'] or ''} | {why}"
                       + (f"<br>functions: {named}" if named else "") + " |")
    return "\n".join(out) + "\n"


REPOSITORIES = {"pytorch": "pytorch/pytorch", "tensorflow": "tensorflow/tensorflow"}


def function_link(payload: dict[str, Any], path: str, f: dict[str, Any]) -> str:
    """A suspect function as markdown: linked to its lines at the release's tag where the release is known."""
    label = f"`{f['name']}` (lines {f['start']}-{f['end']})".replace("|", "\\|")
    repo = REPOSITORIES.get(payload["environment"].get("framework") or "")
    release = payload.get("release")
    if not repo or not release:
        return label
    return f"[{label}](https://github.com/{repo}/blob/v{release}/{path}#L{f['start']}-L{f['end']})"
