"""`sftl model fit`: train the candidate ranker on an evaluation's kept features, judged on later reports."""

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
    f.add_argument("--rounds", type=int, default=300, metavar="N", help="boosting rounds (default 300)")
    f.add_argument("--json", action="store_true", help="print the figures as JSON")
    add_common(f)
    f.set_defaults(handler=run_fit)


def run_fit(args: argparse.Namespace, ctx: Context) -> int:
    from sftl.cli.evaluation import parse_split_date
    from sftl.evaluate_ranker import fit, read_evaluations

    split = parse_split_date(args.split_date, tuple(Path(d).name for d in args.evaluation))
    reports = read_evaluations([Path(d) for d in args.evaluation])
    held = tuple(c.strip() for c in args.leave_one_out.split(",") if c.strip())
    model, figures = fit(reports, split, leave_one_out=held, refit_all=args.refit_all, n_estimators=args.rounds)
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
