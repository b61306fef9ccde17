"""`sftl comment`: the comment sftl would post under an issue, printed, or posted (`--post`) as its one comment there."""

from __future__ import annotations

import argparse

from sftl.cli import (
    EXIT_NO_RESULT,
    EXIT_OK,
    Context,
    add_common,
    check_source_root,
    positive_int,
    require_confinement,
)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add this module's sub-commands to the `sftl` parser."""
    p = sub.add_parser(
        "comment",
        help="render (or --post) sftl's one comment under an issue: category, suspects, replay verdict, who to ask",
        description=(
            "Locate ISSUE and render the comment a maintainer would want under it. Without --post it is printed; "
            "--post creates it through the GitHub API (token: GITHUB_TOKEN), or updates sftl's earlier comment "
            "there (found by a hidden marker), never a second one. Exit 8 when the issue could not be ranked "
            "(nothing is posted then); 9-12 when GitHub refuses the write (see `sftl --help`)."
        ),
    )
    p.add_argument("target", metavar="ISSUE", help="issue URL, OWNER/REPO#N, or a GitHub issue JSON file")
    p.add_argument("--post", action="store_true", help="create or update the comment on the issue")
    p.add_argument("--apply-labels", action="store_true",
                   help="add the labels the release's labeler map gives the suspects (only when located with confidence)")
    p.add_argument("--top", type=positive_int, default=3, metavar="K", help="suspects shown (default 3)")
    p.add_argument("--source-root", metavar="DIR", help="a local tree laid out like the framework's repository")
    p.add_argument("--replay", action="store_true",
                   help="also replay the snippet, confined (exit 7 where this machine cannot confine it); the comment "
                        "carries the verdict and exception line, never the snippet's output")
    p.add_argument("--json", action="store_true", help="print {body, labels, routes, posted} as JSON")
    add_common(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    from sftl.comment import plan_comment
    from sftl.errors import AuthError, InputError, IssueGoneError, NotFoundError, WriteAccessError
    from sftl.intake import load_issue
    from sftl.model import Outcome
    from sftl.pipeline import locate
    from sftl.store import Store

    writes = args.post or args.apply_labels
    if args.source_root is not None:
        check_source_root(args.source_root)
    if writes and ctx.settings.offline:
        raise InputError("--post and --apply-labels write to GitHub: drop --offline")
    if writes and not ctx.settings.token:  # before any work: nothing is computed that cannot be posted
        raise WriteAccessError("--post needs a token: set GITHUB_TOKEN (a workflow: `permissions: issues: write`); "
                               "nothing was written")
    if args.replay:
        from sftl.replay import has_cuda_device

        require_confinement(ctx, False, gpu=has_cuda_device())  # never unconfined beside a token
    with Store(ctx.settings.db_path) as store:
        try:
            issue = load_issue(args.target, ctx.settings, store)
        except NotFoundError as exc:
            raise IssueGoneError(str(exc) + ("; nothing was written" if writes else "")) from exc
        except AuthError as exc:  # a token that cannot even read the issue cannot write it
            if not writes:
                raise
            raise WriteAccessError(f"{exc}; nothing was written") from exc
        report = locate(issue, ctx.settings, store, source_root=args.source_root, top=max(args.top, 10),
                        offline=ctx.settings.offline, replay=args.replay)
    plan = plan_comment(report, ctx.settings, source_root=args.source_root, top=args.top)
    skipped = report.localization is None or report.localization.outcome == Outcome.SKIPPED
    posted = None
    if writes and not skipped:
        from sftl.comment import post_comment
        from sftl.github import GitHubClient

        with GitHubClient(ctx.settings) as client:
            posted = post_comment(client, issue.repo, issue.number, plan.body if args.post else None,
                                  plan.labels if args.apply_labels else ())
    if args.json:
        from sftl.model import to_jsonable

        ctx.print_json({"issue": issue.key, "body": plan.body, "labels": list(plan.labels),
                        "routes": to_jsonable(plan.routes), "posted": to_jsonable(posted)})
    elif posted is not None:
        added = f"labels added: {', '.join(posted.labels_added) or 'none'}"
        did = f"comment {posted.comment_id} {posted.action} ({posted.url}); " if posted.action != "none" else ""
        ctx.out.write(f"{issue.key}: {did}{added}\n")
    elif not writes:
        ctx.out.write(plan.body)
    if skipped:
        if writes:
            ctx.err.write(f"sftl: nothing posted on {issue.key}: it could not be ranked\n")
        return EXIT_NO_RESULT
    return EXIT_OK
