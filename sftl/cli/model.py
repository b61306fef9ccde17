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
        "and prints its figures on those and, apart, on the reports filed after it, beside BM25 and the untrained "
        "ranking on the same rows. Saves the model with the training reports' URLs and these figures.",
    )
    f.add_argument("evaluation", metavar="DIR", help="the --out folder of an `sftl eval --keep-features` run")
    f.add_argument("--split-date", required=True, metavar="DATE",
                   help="train on reports filed before it: YYYY-MM-DD, or per framework tensorflow=DATE,pytorch=DATE")
    f.add_argument("--out", "-o", required=True, metavar="MODEL.json", help="where to write the model")
    f.add_argument("--rounds", type=int, default=300, metavar="N", help="boosting rounds (default 300)")
    f.add_argument("--json", action="store_true", help="print the figures as JSON")
    add_common(f)
    f.set_defaults(handler=run_fit)


def run_fit(args: argparse.Namespace, ctx: Context) -> int:
    from sftl.cli.evaluation import parse_split_date
    from sftl.evaluate_ranker import fit, read_evaluation

    split = parse_split_date(args.split_date)
    reports = read_evaluation(Path(args.evaluation))
    model, figures = fit(reports, split, n_estimators=args.rounds)
    model.save(args.out)
    if args.json:
        ctx.print_json(figures)
        return EXIT_OK
    lines = [f"trained on {figures['train_with_truth_in_candidates']} of {figures['train_reports']} reports filed "
             f"before the split ({figures['fit_seconds']} s); validation: {figures['validation_reports']} reports after it"]
    for side in ("train", "validation"):
        for fw, cell in figures[side].items():
            for method, m in cell.items():
                lines.append(f"  {side:<10} {fw:<10} {method:<9} n={int(m['n']):<4} top-1 {m['top1']:.3f}  "
                             f"top-5 {m['top5']:.3f}  top-10 {m['top10']:.3f}  MRR {m['mrr']:.3f}")
    ctx.out.write("\n".join(lines) + f"\nwrote {args.out}\n")
    return EXIT_OK
