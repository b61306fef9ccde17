"""`sftl history`: the tracker's fixed issues and the files their fixes changed -- import, export, stats, crawl."""

from __future__ import annotations

import argparse
from typing import Any

from sftl.cli import EXIT_OK, EXIT_USAGE, Context, add_common, positive_int

_MAX_BAD_LINES_SHOWN = 20


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add this module's sub-commands to the `sftl` parser."""
    hist = sub.add_parser(
        "history",
        help="fix records (fixed issues and the files their fixes changed): the history prior of `sftl locate`",
        description="The history `sftl locate` learns from: fixed issues and the source files their fixes changed. "
        "`locate` uses the files that similar fixes, dated before the issue, changed to break near-ties between "
        "content suspects (--no-history: off). With no action: stats.",
    )
    add_common(hist)
    inner = hist.add_subparsers(dest="history_command", metavar="ACTION")

    p = inner.add_parser("import", help="import fix records, one JSON object per line",
                         description="Each line: repo, issue, pr, commit, title, ops, kind, device, fixed_on "
                         "(YYYY-MM or YYYY-MM-DD), files; optionally body, evidence. Bad lines are reported with "
                         "their line numbers and skipped (exit 2); the good ones are kept.")
    p.add_argument("file", metavar="FILE.jsonl|-")
    p.add_argument("--json", action="store_true", help="print the import's figures as JSON")
    add_common(p)
    p.set_defaults(handler=cmd_import)

    p = inner.add_parser("export", help="write the stored fix records as JSONL (or labelled rows for `sftl eval`)")
    p.add_argument("--repo", metavar="OWNER/REPO", help="only this repository")
    p.add_argument("--labelled", action="store_true",
                   help="rows `sftl eval` reads: the fixed issue, its screened category (the fix's kind when the "
                   "store holds too few issues to screen), truth_files = the fix's source files")
    add_common(p)
    p.set_defaults(handler=cmd_export)

    p = inner.add_parser("stats", help="how many fixes per repository, kind and directory")
    p.add_argument("--repo", metavar="OWNER/REPO", help="only this repository")
    p.add_argument("--top", type=positive_int, default=15, metavar="N", help="directories shown (default 15)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    add_common(p)
    p.set_defaults(handler=cmd_stats)

    p = inner.add_parser("crawl", help="mine a repository's closed issues for their fixes (incremental, resumable)",
                         description="Crawl closed issues (as `sftl crawl --state closed`), then find each one's fix: "
                         "a merged pull request that cross-references it or says 'Fixes #N' / 'Closes #N', or the "
                         "commit that closed it; store the fix's changed source files (tests and docs dropped). "
                         "A rerun examines only issues updated since.")
    p.add_argument("repo", metavar="OWNER/REPO")
    p.add_argument("--since", metavar="DATE", help="only issues updated at or after DATE (YYYY-MM-DD or ISO 8601)")
    p.add_argument("--limit", type=positive_int, metavar="N", help="examine at most N issues in this run (the next run goes on)")
    p.add_argument("--json", action="store_true", help="print the crawl's figures as JSON (requests included)")
    add_common(p)
    p.set_defaults(handler=cmd_crawl)
    # no action: the figures, as `sftl sources` and `sftl cache` show theirs
    hist.set_defaults(handler=cmd_stats, repo=None, top=15, json=False)


def _store(ctx: Context) -> Any:
    from sftl.store import Store

    return Store(ctx.settings.db_path)


def cmd_import(args: argparse.Namespace, ctx: Context) -> int:
    from sftl.history_io import import_fixes, load_index
    from sftl.model import to_jsonable

    with _store(ctx) as store:
        stats = import_fixes(args.file, store)
        total = store.count_fixes()
        if stats.written:
            load_index(store, "", ctx.settings.cache_dir)  # built now, so the next locate need not
    name = "stdin" if args.file == "-" else args.file
    for line, reason in stats.bad[:_MAX_BAD_LINES_SHOWN]:
        ctx.err.write(f"sftl: {name}:{line}: {reason}\n")
    if len(stats.bad) > _MAX_BAD_LINES_SHOWN:
        ctx.err.write(f"sftl: ... and {len(stats.bad) - _MAX_BAD_LINES_SHOWN} more bad lines\n")
    if args.json:
        payload = to_jsonable(stats)
        payload["stored_total"] = total
        ctx.print_json(payload)
    else:
        ctx.out.write(f"{stats.imported} fix records read ({stats.written} new or changed), {len(stats.bad)} bad "
                      f"line(s) skipped; {total} stored\n")
    return EXIT_USAGE if stats.bad else EXIT_OK


def cmd_export(args: argparse.Namespace, ctx: Context) -> int:
    from sftl.github import parse_repo
    from sftl.history_io import export_fixes, export_labelled

    repo = parse_repo(args.repo) if args.repo else None
    with _store(ctx) as store:
        lines = export_labelled(store, repo, _screener(store)) if args.labelled else export_fixes(store, repo)
        for line in lines:
            ctx.out.write(line + "\n")
    return EXIT_OK


def _screener(store: Any) -> Any:
    """Categories of stored issues by the keyword screener fitted on the store's corpus (None: too few)."""
    def screen(issues: list[Any]) -> list[str | None]:
        from sftl.extract import extract
        from sftl.pipeline import corpus_screener
        from sftl.screen import screen_many

        screener = corpus_screener(None, store)
        if screener is None:
            return [None] * len(issues)
        return [s.category.value for s in screen_many(issues, screener, [extract(i) for i in issues])]

    return screen


def cmd_stats(args: argparse.Namespace, ctx: Context) -> int:
    from sftl.github import parse_repo
    from sftl.history import history_stats
    from sftl.history_io import iter_fixes

    repo = parse_repo(args.repo) if args.repo else None
    with _store(ctx) as store:
        figures = history_stats(iter_fixes(store, repo), top_dirs=args.top)
    if args.json:
        ctx.print_json(figures)
        return EXIT_OK
    out = ctx.out
    span = f", fixed {figures['first']} .. {figures['last']}" if figures["fixes"] else ""
    out.write(f"{figures['fixes']} fixes ({figures['with_issue']} with their issue){span}\n")
    for title, key in (("repository", "repos"), ("kind", "kinds"), ("directory (files changed)", "directories")):
        if figures[key]:
            out.write(f"  per {title}\n")
            width = max(len(k) for k in figures[key])
            for k, n in figures[key].items():
                out.write(f"    {k:<{width}}  {n}\n")
    return EXIT_OK


def cmd_crawl(args: argparse.Namespace, ctx: Context) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    from sftl.github import parse_repo
    from sftl.history_crawl import FixCrawlProgress, crawl_fixes
    from sftl.history_io import load_index
    from sftl.intake import normalize_since
    from sftl.model import to_jsonable

    repo = parse_repo(args.repo)
    since = normalize_since(args.since) if args.since else None
    bar = ctx.progress_bar(
        TextColumn("[bold]history[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("· {task.fields[found]} fixes"), TimeElapsedColumn(),
    )
    with bar, _store(ctx) as store:
        task = bar.add_task(repo, total=None, found=0)

        def progress(p: FixCrawlProgress) -> None:
            bar.update(task, description=f"{repo} {p.phase}", completed=p.done, total=p.total, found=p.found)

        stats = crawl_fixes(repo, ctx.settings, store, since=since, limit=args.limit, progress=progress)
        total = store.count_fixes(repo)
        if stats.fixes_stored:
            load_index(store, "", ctx.settings.cache_dir)
    if args.json:
        payload = to_jsonable(stats)
        payload["requests_per_fixed_issue"] = round(stats.requests_per_fixed_issue, 3)
        payload["stored_total"] = total
        ctx.print_json(payload)
        return EXIT_OK
    ctx.out.write(
        f"{repo}: {stats.issues_examined} closed issues examined ({stats.issues_skipped - stats.issues_not_planned} "
        f"unchanged since the last crawl, {stats.issues_not_planned} closed as not planned skipped), "
        f"{stats.issues_fixed} with a fix found ({stats.fixes_stored} fix records: {stats.by_pull} by pull request, "
        f"{stats.by_commit} by commit); {stats.requests} requests ({stats.requests_per_fixed_issue:.2f} per fixed issue) "
        f"in {stats.seconds:.1f} s; {total} fixes stored" + ("" if stats.done else "; not finished: run again to continue")
        + "\n"
    )
    return EXIT_OK
