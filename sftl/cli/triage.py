"""CLI of backlog triage: `sftl triage OWNER/REPO`."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING

from sftl.errors import InputError, NoResultError

if TYPE_CHECKING:
    from sftl.cli import Context


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from sftl.cli import add_common, positive_int

    p = sub.add_parser(
        "triage",
        help="take a repository's backlog through crawl -> screen -> locate (-> replay) and write a report",
        description=(
            "Crawl (incrementally, unless --offline), then screen and locate every stored issue of OWNER/REPO; "
            "results go to the store and a markdown + HTML report. Interrupted runs resume where they stopped."
        ),
    )
    add_common(p)
    p.add_argument("repo", metavar="OWNER/REPO")
    p.add_argument("--since", metavar="DATE|last",
                   help="only issues new or edited since this date (YYYY-MM-DD or ISO 8601), or since the store's "
                        "last crawl of the repository (`last`)")
    p.add_argument("--state", default="open", choices=["open", "closed", "all"])
    p.add_argument("--limit", type=int, help="at most this many issues")
    p.add_argument("--replay", action="store_true",
                   help="also replay each snippet, confined; refused (exit 7) where this machine cannot confine it "
                        "(`sftl doctor`): a backlog's code is never run unconfined")
    p.add_argument("--method", default="sftl", choices=["sftl", "paper", "vsm", "bert"], help="localization method (default sftl)")
    p.add_argument("--source-root", help="framework source tree to localize against")
    p.add_argument("--executor", default="local", choices=["local", "ray"])
    p.add_argument("--ray-address", help="an existing Ray cluster (default: start a local one)")
    p.add_argument("--jobs", type=positive_int, default=2, metavar="N", help="parallel workers (default 2)")
    p.add_argument("--top", type=positive_int, default=3, metavar="K", help="suspects shown per issue in the report (default 3)")
    p.add_argument("--out", default="triage-report", help="report directory (default ./triage-report)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--format", choices=("text", "markdown"), default="text",
                   help="what stdout gets: a summary (text, default) or the whole markdown report")
    p.set_defaults(handler=run_triage)


def run_triage(args: argparse.Namespace, ctx: Context) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from sftl import triage
    from sftl.store import Store

    if not re.fullmatch(r"[\w.-]+/[\w.-]+", args.repo):
        raise InputError(f"{args.repo!r} is not OWNER/REPO")
    from pathlib import Path

    from sftl.intake import check_crawl_args, normalize_since

    # refuse bad arguments before any work: a --limit of -1 sliced off the last issue, a --since that is
    # not a date filtered everything out ("no stored issues"), a missing --source-root failed every issue
    check_crawl_args(args.repo, args.state, args.limit)
    since = normalize_since(args.since) if args.since and args.since != "last" else None
    if args.source_root is not None:
        from sftl.cli import check_source_root

        check_source_root(args.source_root)
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise InputError(f"--out {args.out} is a file, not a report directory")
    if args.replay:  # before any crawl: strangers' code runs confined or not at all
        from sftl.cli import require_confinement
        from sftl.replay import has_cuda_device

        require_confinement(ctx, unconfined=False, gpu=has_cuda_device())
    settings = ctx.settings
    with Store(settings.db_path) as store:
        if args.since == "last":  # read before this run's crawl moves the mark
            from sftl.intake import last_crawl_mark

            since = last_crawl_mark(store, args.repo, args.state)
            if since is None:
                raise InputError(f"--since last: the store holds no crawl of {args.repo} ({args.state} issues) yet; "
                                 f"give a date, or run `sftl crawl {args.repo}` once first")
        if not settings.offline:
            from sftl.intake import crawl

            crawl(args.repo, settings, store, since=since, state=args.state, limit=args.limit)
        issues = list(store.iter_issues(repo=args.repo, state=args.state))
        stored = len(issues)
        if since:
            issues = [i for i in issues if i.updated_at >= since]  # GitHub's YYYY-MM-DDTHH:MM:SSZ sorts as text
        if args.limit:
            issues = issues[: args.limit]
        if not issues:
            if stored:
                raise NoResultError(f"none of the {stored} stored {args.state} issues of {args.repo} was updated "
                                    f"since {since}")
            raise NoResultError(
                f"no stored {'' if args.state == 'all' else args.state + ' '}issues for {args.repo}"
                + (" (offline: run 'sftl crawl' or 'sftl import' first)" if settings.offline else "")
            )
        screener = triage.fit_store_screener(store)
        with Progress(
            TextColumn("triage"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=ctx.console(stderr=True), transient=True,
        ) as bar:
            task = bar.add_task("triage", total=len(issues))
            stats = triage.triage_issues(
                issues, settings, store, repo=args.repo, method=args.method, replay=args.replay,
                source_root=args.source_root, executor=args.executor, jobs=args.jobs,
                ray_address=args.ray_address, screener=screener,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
            )
        report = triage.build_report(args.repo, stats.rows, triage.find_duplicates(issues), top=args.top)
        try:
            paths = triage.write_report(report, args.out)
        except OSError as exc:  # the results are stored; only the report could not be written
            raise InputError(f"cannot write the report under {args.out}: {exc.strerror or exc} "
                             "(the results are stored: rerun with another --out)") from None
    summary = {
        "repo": args.repo,
        "issues": stats.total,
        "processed": stats.done,
        "reused": stats.reused,
        "failed": stats.failed,
        "seconds": round(stats.seconds, 2),
        "executor": stats.executor,
        "counts": report.counts,
        "reports": {k: str(v) for k, v in paths.items()},
    }
    if args.json:
        ctx.print_json(summary)
    elif args.format == "markdown":
        ctx.out.write(triage.render_markdown(report))
    else:
        counts = ", ".join(f"{k} {v}" for k, v in report.counts.items())
        ctx.out.write(
            f"{args.repo}: {stats.total} issues ({stats.done} processed, {stats.reused} already done, "
            f"{stats.failed} failed) in {stats.seconds:.1f}s on {stats.executor}; {counts}\n"
            f"report: {paths['html']} and {paths['markdown']}\n"
        )
    return 0
