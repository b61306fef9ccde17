"""`sftl model fit`: train the candidate ranker (or, `--functions`, the function ranker) on an evaluation's kept
features, judged on later reports."""

from __future__ import annotations

import argparse
from pathlib import Path

from sftl.cli import EXIT_OK, Context, add_common


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add this module's sub-commands to the `sftl` parser."""
    p = sub.add_parser("model", help="train the learned ranker of suspects on labelled reports")
    inner = p.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    f = inner.add_parser(
        "fit", help="fit the ranker on `sftl eval --keep-features --out DIR` results",
        description="Trains LightGBM LambdaRank on the candidates' features of the reports filed before --split-date "
        "and prints its figures on those and, apart, on the reports filed after it, beside BM25 and the category "
        "localizers' hand ranking on the same rows. Saves the model with the training reports' URLs and these "
        "figures.",
    )
    f.add_argument("evaluation", metavar="DIR", nargs="+",
                   help="the --out folder of an `sftl eval --keep-features` run (several: their reports together)")
    f.add_argument("--leave-one-out", default="", metavar="CATEGORIES",
                   help="also judge each training report labelled with one of these categories (say mme,gcrde) by a "
                        "model fitted without it")
    f.add_argument("--split-date", required=True, metavar="DATE",
                   help="train on reports filed before it: YYYY-MM-DD, or per framework tensorflow=DATE,pytorch=DATE; an "
                        "evaluation folder's name takes a date of its own (a set dated apart: advisories=DATE)")
    f.add_argument("--refit-all", action="store_true",
                   help="after judging, save a model fitted on every report (the figures stay those of the split)")
    f.add_argument("--out", "-o", required=True, metavar="MODEL.json", help="where to write the model")
    f.add_argument("--rounds", type=int, default=None, metavar="N",
                   help="boosting rounds (default 300; with --functions 200)")
    f.add_argument("--functions", action="store_true",
                   help="fit the ranker of a suspect file's functions instead, on the truth files' functions the "
                        "evaluation kept (rows naming their fix's functions); use it with SFTL_FUNCTION_MODEL")
    f.add_argument("--json", action="store_true", help="print the figures as JSON")
    add_common(f)
    f.set_defaults(handler=run_fit)


def run_fit(args: argparse.Namespace, ctx: Context) -> int:
    from sftl.cli.evaluation import parse_split_date
    from sftl.evaluate_ranker import fit, read_evaluations

    split = parse_split_date(args.split_date, tuple(Path(d).name for d in args.evaluation))
    if args.functions:
        return run_fit_functions(args, ctx, split)
    reports = read_evaluations([Path(d) for d in args.evaluation])
    held = tuple(c.strip() for c in args.leave_one_out.split(",") if c.strip())
    model, figures = fit(reports, split, leave_one_out=held, refit_all=args.refit_all,
                         n_estimators=args.rounds or 300)
    model.save(args.out)
    if args.json:
        ctx.print_json(figures)
        return EXIT_OK
    lines = [f"trained on {figures['train_with_truth_in_candidates']} of {figures['train_reports']} reports filed "
             f"before the split ({figures['fit_seconds']} s); validation: {figures['validation_reports']} reports after it"]
    tables = [("train", figures["train"]), ("validation", figures["validation"])]
    tables += [(f"loo {cat}", table) for cat, table in figures.get("leave_one_out", {}).items()]
    tables += [(f"valid {cat}", table) for cat, table in figures.get("validation_by_category", {}).items()]
    for side, table in tables:
        for fw, cell in table.items():
            for method, m in cell.items():
                lines.append(f"  {side:<10} {fw:<10} {method:<9} n={int(m['n']):<4} top-1 {m['top1']:.3f}  "
                             f"top-5 {m['top5']:.3f}  top-10 {m['top10']:.3f}  MRR {m['mrr']:.3f}")
    if "refit_on_all" in figures:
        lines.append(f"saved: refitted on all {figures['refit_on_all']['reports']} reports with a truth file among "
                     f"their candidates ({figures['refit_on_all']['fit_seconds']} s); the figures above are the "
                     "fit before the split")
    ctx.out.write("\n".join(lines) + f"\nwrote {args.out}\n")
    return EXIT_OK


def run_fit_functions(args: argparse.Namespace, ctx: Context, split: dict[str, str]) -> int:
    """The function ranker fitted on the groups kept before the split, judged after it, beside BM25."""
    from sftl.evaluate_function_ranker import fit_functions, read_function_groups

    groups = read_function_groups([Path(d) for d in args.evaluation])
    model, figures = fit_functions(groups, split, refit_all=args.refit_all, n_estimators=args.rounds or 200)
    model.save(args.out)
    if args.json:
        ctx.print_json(figures)
        return EXIT_OK
    lines = [f"trained on {figures['train_files']} truth files of reports filed before the split "
             f"({figures['fit_seconds']} s); validation: {figures['validation_files']} after it. A changed function's "
             "rank among its file's functions, sftl's function ranker beside BM25 over the same functions:"]
    sides = [("train (5-fold by report)", figures["train"]), ("validation", figures["validation"])]
    sides += [(f"valid {fw}", cell) for fw, cell in figures["validation_by_framework"].items()]
    for side, cell in sides:
        for method in ("sftl", "bm25"):
            if cell.get("n"):
                m = cell[method]
                lines.append(f"  {side:<24} {method:<5} n={cell['n']:<4} acc@1 {m['acc@1']:.3f}  acc@5 {m['acc@5']:.3f}"
                             f"  MRR {m['mrr']:.3f}")
    if "refit_on_all" in figures:
        lines.append(f"saved: refitted on all {figures['refit_on_all']['files']} truth files; the figures above are "
                     "the fit before the split")
    ctx.out.write("\n".join(lines) + f"\nwrote {args.out}\n")
    return EXIT_OK
