"""CLI commands of the intake stage: fetch, crawl, import, show, export, and cache (the HTTP cache's size and pruning)."""

from __future__ import annotations

import argparse
from typing import Any

from sftl.cli import EXIT_NO_RESULT, EXIT_OK, EXIT_USAGE, Context, add_common

_TARGET_HELP = "https://github.com/OWNER/REPO/issues/N, OWNER/REPO#N, or FILE.json (one GitHub REST issue object)"
_MAX_BAD_LINES_SHOWN = 20


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add this module's sub-commands to the `sftl` parser."""
    p = sub.add_parser("fetch", help="fetch one issue into the store and print it",
                       description="Fetch one issue (with its comments) into the store.")
    p.add_argument("target", metavar="TARGET", help=_TARGET_HELP)
    p.add_argument("--via", choices=("api", "browser"), default="api",
                   help="REST API (default) or a real headless Chromium reading the issue page")
    p.add_argument("--json", action="store_true", help="print the issue as JSON")
    add_common(p)
    p.set_defaults(handler=cmd_fetch)

    p = sub.add_parser("crawl", help="crawl a repository's issues into the store (incremental, resumable)",
                       description="List a repository's issues 100 per request into the store. Re-running "
                       "continues an interrupted crawl, or fetches only what changed since the last one.")
    p.add_argument("repo", metavar="OWNER/REPO")
    p.add_argument("--since", metavar="DATE", help="only issues updated at or after DATE (YYYY-MM-DD or ISO 8601)")
    p.add_argument("--state", choices=("open", "closed", "all"), default="open")
    p.add_argument("--labels", metavar="L", help="comma-separated labels an issue must all carry")
    p.add_argument("--limit", type=int, metavar="N", help="stop after N issues (the next run resumes)")
    p.add_argument("--json", action="store_true", help="print the crawl's figures as JSON")
    add_common(p)
    p.set_defaults(handler=cmd_crawl)

    p = sub.add_parser("import", help="import GitHub REST issue objects, one per line",
                       description="Import a JSONL file (as `gh api --paginate --jq '.[]'` writes) or '-' for stdin. "
                       "Bad lines are skipped and reported with their line numbers (exit 2).")
    p.add_argument("file", metavar="FILE.jsonl|-")
    p.add_argument("--json", action="store_true", help="print the import's figures as JSON")
    add_common(p)
    p.set_defaults(handler=cmd_import)

    p = sub.add_parser("show", help="print a stored issue (or a JSON file) without touching the network")
    p.add_argument("target", metavar="TARGET", help=_TARGET_HELP)
    p.add_argument("--json", action="store_true", help="print the issue as JSON")
    add_common(p)
    p.set_defaults(handler=cmd_show)

    p = sub.add_parser("export", help="write stored issues as JSONL (GitHub REST objects) or CSV",
                       description="jsonl lines are GitHub REST issue objects with comments inline, so "
                       "`sftl export | sftl import -` round-trips.")
    p.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    p.add_argument("--repo", metavar="OWNER/REPO", help="only this repository")
    add_common(p)
    p.set_defaults(handler=cmd_export)

    cache = sub.add_parser("cache", help="the HTTP cache of GitHub answers: how big it is, prune it",
                           description="GitHub's answers are cached under $SFTL_HOME/cache/http for ETag "
                           "revalidation and --offline. Every client that writes to it keeps it under 1 GiB "
                           "and drops entries unused for 180 days (checked at most hourly); `prune` does it now, "
                           "with the bounds you give.")
    add_common(cache)
    cache.add_argument("--json", action="store_true", help="print the figures as JSON (as `cache info --json`)")
    inner = cache.add_subparsers(dest="cache_command", metavar="ACTION")
    info = inner.add_parser("info", help="files, size and the least recent use (the default action)")
    info.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the figures as JSON")
    add_common(info)
    info.set_defaults(handler=cmd_cache_info)
    prune = inner.add_parser("prune", help="remove entries unused for longer than --max-age, then the least "
                             "recently used ones until the cache fits in --max-size")
    prune.add_argument("--max-size", metavar="SIZE", default="1G", help="e.g. 500M, 2G, 0 (default 1G)")
    prune.add_argument("--max-age", metavar="AGE", default="180d", help="e.g. 30d, 12h, 90m, none (default 180d)")
    prune.add_argument("--json", action="store_true", help="print the figures as JSON")
    add_common(prune)
    prune.set_defaults(handler=cmd_cache_prune)
    cache.set_defaults(handler=cmd_cache_info, json=False)


def _store(ctx: Context) -> Any:
    from sftl.store import Store

    return Store(ctx.settings.db_path)


def _print_issue(ctx: Context, issue: Any, as_json: bool, full: bool = True) -> None:
    from sftl.model import to_jsonable

    if as_json:
        ctx.print_json(to_jsonable(issue))
        return
    out = ctx.out
    out.write(f"{issue.key}  [{issue.state}]  {issue.title}\n")
    out.write(f"  {issue.url}\n")
    meta = [f"by {issue.author}" if issue.author else "", f"opened {issue.created_at}" if issue.created_at else "",
            f"updated {issue.updated_at}" if issue.updated_at else "", f"{issue.comments_count} comments"]
    out.write("  " + " · ".join(m for m in meta if m) + "\n")
    if issue.labels:
        out.write("  labels: " + ", ".join(issue.labels) + "\n")
    if not full:
        return
    if issue.body:
        out.write("\n" + issue.body.rstrip() + "\n")
    for c in issue.comments:
        out.write(f"\n--- {c.author or '?'} commented {c.created_at}\n{c.body.rstrip()}\n")


def cmd_fetch(args: argparse.Namespace, ctx: Context) -> int:
    from sftl.intake import load_issue

    with _store(ctx) as store:
        issue = load_issue(args.target, ctx.settings, store, via=args.via, stored_on_failure=False)
    _print_issue(ctx, issue, args.json, full=False)
    return EXIT_OK


def cmd_show(args: argparse.Namespace, ctx: Context) -> int:
    from sftl.github import parse_target
    from sftl.intake import read_issue_file

    target = parse_target(args.target)
    if target.kind == "file":
        assert target.path is not None
        issue, _ = read_issue_file(target.path)
    else:
        assert target.repo is not None and target.number is not None
        with _store(ctx) as store:
            found = store.get_issue(target.repo, target.number)
        if found is None:
            ctx.err.write(f"sftl: {target.key} is not in the store; run: sftl fetch {target.key}\n")
            return EXIT_NO_RESULT
        issue = found
    _print_issue(ctx, issue, args.json)
    return EXIT_OK


def cmd_crawl(args: argparse.Namespace, ctx: Context) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    from sftl.intake import CrawlProgress, check_crawl_args, crawl, normalize_since
    from sftl.model import to_jsonable

    since = normalize_since(args.since) if args.since else None
    check_crawl_args(args.repo, args.state, args.limit)  # before the progress bar draws anything
    # a progress bar only on a terminal: piped stderr gets the one-line summary and errors only
    bar = ctx.progress_bar(
        TextColumn("[bold]crawl[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("pages · {task.fields[issues]} issues"), TimeElapsedColumn(),
    )
    with bar, _store(ctx) as store:
        task = bar.add_task(args.repo, total=None, issues=0)

        def progress(p: CrawlProgress) -> None:
            name = args.repo if p.phase == "issues" else f"{args.repo} comments"
            bar.update(task, description=name, completed=p.page, total=p.total_pages, issues=p.issues_seen)

        stats = crawl(args.repo, ctx.settings, store, since=since, state=args.state, labels=args.labels,
                      limit=args.limit, progress=progress)
        total = store.count_issues(stats.repo)
    if args.json:
        payload = to_jsonable(stats)
        payload["requests_per_issue"] = round(stats.requests_per_issue, 4)
        payload["stored_total"] = total
        ctx.print_json(payload)
        return EXIT_OK
    how = "resumed" if stats.resumed else f"since {stats.since}" if stats.since else "full"
    ctx.out.write(
        f"{stats.repo}: {stats.issues_seen} issues listed ({how}), {stats.issues_written} written, "
        f"{stats.pulls_skipped} pull requests skipped, {stats.comment_threads} comment threads fetched"
        + (f" + {stats.comments_listed} comments from {stats.comment_pages} repository-wide comment pages"
           if stats.comment_pages else "")
        + "; "
        f"{stats.requests} requests ({stats.requests_per_issue:.3f}/issue, {stats.not_modified} not modified, "
        f"{stats.retries} retried) in {stats.seconds:.1f} s; {total} issues stored"
        + ("" if stats.done else "; not finished: run again to continue")
        + "\n"
    )
    return EXIT_OK


def cmd_import(args: argparse.Namespace, ctx: Context) -> int:
    from sftl.intake import import_jsonl
    from sftl.model import to_jsonable

    with _store(ctx) as store:
        stats = import_jsonl(args.file, store)
    name = "stdin" if args.file == "-" else args.file
    for line, reason in stats.bad[:_MAX_BAD_LINES_SHOWN]:
        ctx.err.write(f"sftl: {name}:{line}: {reason}\n")
    if len(stats.bad) > _MAX_BAD_LINES_SHOWN:
        ctx.err.write(f"sftl: ... and {len(stats.bad) - _MAX_BAD_LINES_SHOWN} more bad lines\n")
    if args.json:
        ctx.print_json(to_jsonable(stats))
    else:
        ctx.out.write(
            f"{name}: {stats.imported} issues imported, "
            + (f"{stats.comments_added} with new comments, " if stats.comments_added else "")
            + f"{stats.unchanged} unchanged, "
            f"{stats.pulls_skipped} pull requests skipped, {len(stats.bad)} bad lines\n"
        )
    return EXIT_USAGE if stats.bad else EXIT_OK


def cmd_export(args: argparse.Namespace, ctx: Context) -> int:
    from sftl.intake import export_issues

    with _store(ctx) as store:
        for line in export_issues(store, args.format, args.repo):
            ctx.out.write(line + "\n")
    return EXIT_OK


_SIZE_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_AGE_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}


def parse_size(text: str) -> int | None:
    """`500M`, `2G`, `1024`, `0` -> bytes; `none` -> no bound."""
    import re

    from sftl.errors import InputError

    raw = text.strip()
    if raw.lower() in ("none", "unlimited"):
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?", raw, re.IGNORECASE)
    if not m:
        raise InputError(f"--max-size {text!r} is not a size: use e.g. 500M, 2G, 1024 or none")
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2).upper()])


def parse_age(text: str) -> float | None:
    """`30d`, `12h`, `90m`, `3600` (seconds) -> seconds; `none` -> no bound."""
    import re

    from sftl.errors import InputError

    raw = text.strip()
    if raw.lower() in ("none", "unlimited"):
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhdw]?)", raw)
    if not m:
        raise InputError(f"--max-age {text!r} is not a duration: use e.g. 30d, 12h, 90m or none")
    return float(m.group(1)) * _AGE_UNITS[m.group(2)]


def _cache_payload(usage: Any) -> dict[str, Any]:
    from datetime import UTC, datetime

    from sftl.model import to_jsonable

    payload = to_jsonable(usage)
    payload["oldest_used"] = (
        datetime.fromtimestamp(usage.oldest_used, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if usage.oldest_used else None
    )
    return payload


def cmd_cache_info(args: argparse.Namespace, ctx: Context) -> int:
    from sftl.github_cache import cache_usage

    usage = cache_usage(ctx.settings)
    payload = _cache_payload(usage)
    if getattr(args, "json", False):
        ctx.print_json({k: payload[k] for k in ("path", "files", "bytes", "oldest_used")})
        return EXIT_OK
    ctx.out.write(f"{usage.path}: {usage.files} entries, {usage.bytes / 1e6:.1f} MB"
                  + (f", least recently used {payload['oldest_used']}" if usage.oldest_used else "") + "\n")
    return EXIT_OK


def cmd_cache_prune(args: argparse.Namespace, ctx: Context) -> int:
    from sftl.cli.sources_cmd import prune_release_archives
    from sftl.github_cache import prune_cache

    usage = prune_cache(ctx.settings, parse_size(args.max_size), parse_age(args.max_age))
    sources = prune_release_archives(ctx, parse_age(args.max_age))  # release archives: by age, and their own bound
    if args.json:
        ctx.print_json({**_cache_payload(usage), "sources": sources})
        return EXIT_OK
    ctx.out.write(f"{usage.path}: removed {usage.removed} entries ({usage.freed / 1e6:.1f} MB); "
                  f"{usage.files} entries, {usage.bytes / 1e6:.1f} MB left\n")
    return EXIT_OK
