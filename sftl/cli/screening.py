"""CLI commands of the screening stage: `sftl screen` (keywords or learned) and `sftl similar`."""

from __future__ import annotations

import argparse
import re
from typing import Any

from sftl.cli import EXIT_NO_RESULT, EXIT_OK, Context, add_common

_TARGETS_HELP = ("nothing (every stored issue), OWNER/REPO (its stored issues), or issues: "
                 "https://github.com/OWNER/REPO/issues/N, OWNER/REPO#N, FILE.json")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add this module's sub-commands to the `sftl` parser."""
    p = sub.add_parser(
        "screen", help="screen issues into mme / gcrde / other and store the result",
        description="Screen issues: keyword TF-IDF with rules (default; IDF fitted on the stored corpus) or a "
        "learned, calibrated classifier (--mode learned after --train). Results go to the store.")
    p.add_argument("targets", nargs="*", metavar="TARGET", help=_TARGETS_HELP)
    p.add_argument("--category", choices=("mme", "gcrde", "other"), help="print only issues screened into this category")
    p.add_argument("--mode", choices=("keywords", "learned"), default=None,
                   help="keywords (default) or learned (needs a model trained with --train)")
    p.add_argument("--train", metavar="LABELS.jsonl",
                   help="train the learned screener from labelled issues (title/body/error/label per line, or a "
                   "GitHub issue object with \"category\") and save it under SFTL_HOME/models")
    p.add_argument("--precision", type=float, default=0.9, metavar="P",
                   help="with --train: abstain ('needs human triage') below the confidence reaching precision P (0.9)")
    p.add_argument("--json", action="store_true", help="print the screenings as JSON")
    add_common(p)
    p.set_defaults(handler=cmd_screen)

    p = sub.add_parser("similar", help="the stored issues most similar to TARGET (duplicate candidates)",
                       description="TF-IDF cosine similarity over title, description and error output.")
    p.add_argument("target", metavar="TARGET", help="https://github.com/OWNER/REPO/issues/N, OWNER/REPO#N or FILE.json")
    p.add_argument("--top", type=int, default=5, metavar="K", help="how many to list (5)")
    p.add_argument("--json", action="store_true", help="print [{issue, score, title}] as JSON")
    add_common(p)
    p.set_defaults(handler=cmd_similar)


def _store(ctx: Context) -> Any:
    from sftl.store import Store

    return Store(ctx.settings.db_path)


def _targets(args: argparse.Namespace, ctx: Context, store: Any) -> list[Any]:
    from sftl.errors import InputError
    from sftl.intake import load_issue

    if not args.targets:
        return list(store.iter_issues())
    if len(args.targets) == 1 and re.fullmatch(r"[\w.-]+/[\w.-]+", args.targets[0]) and not args.targets[0].endswith(".json"):
        issues = list(store.iter_issues(repo=args.targets[0]))
        if not issues:
            raise InputError(f"no stored issues of {args.targets[0]}; run: sftl crawl {args.targets[0]}")
        return issues
    return [load_issue(t, ctx.settings, store) for t in args.targets]


def cmd_screen(args: argparse.Namespace, ctx: Context) -> int:
    from sftl import screen as scr
    from sftl.errors import InputError
    from sftl.model import to_jsonable

    mode = args.mode or ("learned" if args.train else "keywords")
    path = scr.model_path(ctx.settings.home)
    model = None
    if args.train:
        if not 0 < args.precision <= 1:
            raise InputError(f"--precision {args.precision} is not in (0, 1]")
        try:
            docs, labels = scr.load_labels(args.train)
        except UnicodeDecodeError as exc:  # load_labels (sftl/screen.py) reads text without catching this
            raise InputError(f"{args.train} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
                             f"{exc.start})") from None
        except RecursionError:  # json.loads on absurdly nested input, also uncaught in load_labels
            raise InputError(f"{args.train}: JSON nested too deeply to be a labelled issue") from None
        model = scr.LearnedScreener(precision_target=args.precision).fit(docs, labels)
        model.save(path)
        counts = {c: labels.count(c) for c in scr.CLASSES}
        ctx.err.write(f"trained the learned screener on {len(labels)} issues ({counts}); abstains below confidence "
                      f"{model.min_confidence_:.2f}; saved to {path}\n")
        if not args.targets:
            if args.json:
                ctx.print_json({"trained": len(labels), "counts": counts, "min_confidence": model.min_confidence_,
                                "path": str(path)})
            return EXIT_OK
    elif mode == "learned":
        model = scr.LearnedScreener.load(path)
    with _store(ctx) as store:
        targets = _targets(args, ctx, store)
        if not targets:
            ctx.err.write("sftl: the store holds no issues; fetch or crawl some first (sftl fetch / sftl crawl)\n")
            return EXIT_NO_RESULT
        corpus = store.iter_issues() if model is None else ()
        screenings = scr.screen_corpus(targets, corpus, model)
        for issue, s in zip(targets, screenings, strict=True):
            store.save_screening(issue.repo, issue.number, s, fingerprint=issue.fingerprint)
    rows = [(i, s) for i, s in zip(targets, screenings, strict=True) if not args.category or s.category.value == args.category]
    if args.json:
        ctx.print_json([{"issue": i.key, "title": i.title, **to_jsonable(s)} for i, s in rows])
        return EXIT_OK
    _table(ctx, rows)
    summary = {c: sum(1 for s in screenings if s.category.value == c) for c in ("mme", "gcrde", "other")}
    abstained = sum(1 for s in screenings if s.abstained)
    ctx.err.write(f"screened {len(screenings)} issue(s) ({screenings[0].method}): "
                  + ", ".join(f"{k} {v}" for k, v in summary.items())
                  + (f", {abstained} need human triage" if abstained else "") + "\n")
    return EXIT_OK


def _cut(text: str, width: int | None) -> str:
    """One line of `text`, cut to `width` on a terminal; whole (width None) in a pipe or a file."""
    text = " ".join(text.split())
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


def _table(ctx: Context, rows: list[tuple[Any, Any]]) -> None:
    """One line per issue: long evidence and titles are cut on a terminal (whole in a pipe, and in `--json`)."""
    tty = ctx.is_terminal(ctx.out)
    body = []
    for issue, s in rows:
        cat = s.category.value + (" (needs human triage)" if s.abstained else "")
        body.append((issue.key, cat, f"{s.scores.get(s.category.value, 0.0):.2f}",
                     _cut(", ".join(s.evidence[:5]), 50 if tty else None), _cut(issue.title, 60 if tty else None)))
    head = ("issue", "category", "score", "evidence", "title")
    widths = [max(len(r[k]) for r in [head, *body]) for k in range(4)]
    for r in [head, *body]:
        ctx.out.write("  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "  " + r[4] + "\n")


def cmd_similar(args: argparse.Namespace, ctx: Context) -> int:
    from sftl.errors import InputError
    from sftl.intake import load_issue

    # from the submodule: once `sftl.screen.similar` is imported, the package's name `similar` is that module
    from sftl.screen.similar import duplicate_text, similar

    if args.top <= 0:
        raise InputError(f"--top must be positive, not {args.top}")
    with _store(ctx) as store:
        target = load_issue(args.target, ctx.settings, store)
        corpus = [i for i in store.iter_issues() if i.key != target.key]
    if not corpus:
        ctx.err.write("sftl: no other stored issues to compare with; crawl the repository first\n")
        return EXIT_NO_RESULT
    titles = {i.key: i.title for i in corpus}
    found = similar(duplicate_text(target), [(i.key, duplicate_text(i)) for i in corpus], args.top)
    if args.json:
        ctx.print_json([{"issue": k, "score": v, "title": titles[k]} for k, v in found])
        return EXIT_OK
    if not found:
        ctx.err.write(f"no stored issue shares words with {target.key}\n")
        return EXIT_NO_RESULT
    width = max(len("issue"), *(len(k) for k, _ in found))
    ctx.out.write(f"{'issue'.ljust(width)}  similarity  title\n")
    for k, v in found:
        ctx.out.write(f"{k.ljust(width)}  {v:10.3f}  {_cut(titles[k], 70 if ctx.is_terminal(ctx.out) else None)}\n")
    return EXIT_OK
