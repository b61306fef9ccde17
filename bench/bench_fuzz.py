"""Benchmark of `sftl fuzz`: learned validity filters over >= 30 PyTorch APIs and >= 10 TensorFlow raw ops.

Per API: train on generated inputs labelled by execution (three rounds; after the first and second, level
weights follow what was valid and lean towards the relations the rejection messages state), then on FRESH inputs (another random stream, training inputs excluded) measure the
classifier's precision and recall, the pass rate of unfiltered vs filtered generation, and valid inputs
per second with and without the filter (wall clock: generation + featurization + prediction + execution).
Crashes (aborts, segfaults, hangs of a worker) are counted as findings.

    python bench/bench_fuzz.py [--quick] [--train N] [--fresh N] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

TORCH_APIS = [
    "bmm", "broadcast_to", "cartesian_prod", "max_pool2d", "linalg.inv", "topk", "split", "index_select", "dot",
    "addcmul", "einsum", "matmul", "mm", "mv", "addmm", "outer", "cat", "stack", "gather", "cross", "kron",
    "diag", "tril", "flip", "roll", "cumsum", "narrow", "transpose", "permute", "reshape", "unsqueeze",
    "movedim", "take_along_dim", "avg_pool2d", "conv2d", "linalg.cholesky", "linalg.det", "chunk", "tensordot",
    "nn.functional.pad",
]
TF_OPS = [
    "BatchMatMulV2", "MatMul", "BiasAdd", "Softmax", "MatrixInverse", "Cross", "AddV2", "Pack", "Cholesky",
    "TopKV2", "ConcatV2", "Tile", "Cumsum", "Einsum", "MaxPool", "Conv2D",
]
PAIRWISE_APIS = ["bmm", "topk", "addcmul", "max_pool2d", "index_select"]


def _run(framework: str, apis: list[str], settings, n_train: int, n_fresh: int, strategy: str) -> list[dict]:
    from sftl.fuzz.validity import WorkerPool, api_spec, fuzz

    rows = []
    # a crash restarts a worker (seconds for TensorFlow): the bench stops a run after 3 of them
    with WorkerPool(framework, settings, max_crashes=3) as pool:
        pool.info()
        for api in apis:
            t0 = time.perf_counter()
            try:
                spec = api_spec(api, framework)
                r = fuzz(spec, settings, pool, budget=n_fresh, train_budget=n_train, strategy=strategy,
                         retrain=True, save=False, rng_seed=7)
            except Exception as exc:  # one API's failure is a row, not the end of the bench
                rows.append({"api": api, "framework": framework, "error": f"{type(exc).__name__}: {exc}"})
                print(f"  {api:22} ERROR {type(exc).__name__}: {exc}", flush=True)
                continue
            d = r.details
            row = {
                "api": api, "framework": framework, "strategy": strategy, "classifier": r.classifier["name"],
                "trained_valid": r.classifier["trained_valid"], "pass_rate_first_round": d["pass_rate_first_round"],
                "pass_rate_unfiltered": r.pass_rate_unfiltered, "pass_rate_filtered": r.pass_rate_filtered,
                "precision": r.precision, "recall": r.recall,
                "vps_unfiltered": r.valid_per_second_unfiltered, "vps_filtered": r.valid_per_second_filtered,
                "fresh": d["fresh"], "kept": d["kept"], "valid_unfiltered": d["valid_unfiltered"],
                "valid_filtered": d["valid_filtered"],
                "seconds_unfiltered": d["seconds_generate"] + d["seconds_run_all"],
                "seconds_filtered": d["seconds_generate"] + d["seconds_predict"] + d["seconds_run_kept"],
                "crashes": [{"input": c["input"], "signal": c["signal"], "kind": c["kind"], "message": c["message"]}
                            for c in r.crashes],
                "seconds": time.perf_counter() - t0,
            }
            rows.append(row)
            print(f"  {api:22} {row['classifier'][:18]:18} first {row['pass_rate_first_round']:5.1%}  "
                  f"unfilt {row['pass_rate_unfiltered']:5.1%}  filt {row['pass_rate_filtered']:5.1%}  "
                  f"P {row['precision']:5.1%}  R {row['recall']:5.1%}  valid/s {row['vps_unfiltered']:6.0f} -> "
                  f"{row['vps_filtered']:6.0f}  crashes {len(row['crashes'])}  ({row['seconds']:.1f}s)", flush=True)
    return rows


def _summary(rows: list[dict], label: str) -> dict:
    ok = [r for r in rows if "error" not in r]
    learned = [r for r in ok if not r["classifier"].startswith("none")]
    if not ok:
        return {"label": label, "apis": 0}
    su = sum(r["seconds_unfiltered"] for r in ok)
    sf = sum(r["seconds_filtered"] for r in ok)
    s = {
        "label": label,
        "apis": len(ok),
        "errors": len(rows) - len(ok),
        "with_learned_filter": len(learned),
        "mean_pass_rate_first_round": statistics.mean(r["pass_rate_first_round"] for r in ok),
        "mean_pass_rate_unfiltered": statistics.mean(r["pass_rate_unfiltered"] for r in ok),
        "mean_pass_rate_filtered": statistics.mean(r["pass_rate_filtered"] for r in ok),
        "mean_precision": statistics.mean(r["precision"] for r in ok),
        "mean_recall": statistics.mean(r["recall"] for r in ok),
        "median_recall": statistics.median(r["recall"] for r in ok),
        "apis_recall_ge_85": sum(r["recall"] >= 0.85 for r in ok),
        "apis_filtered_ge_75": sum(r["pass_rate_filtered"] >= 0.75 for r in ok),
        "valid_per_second_unfiltered": sum(r["valid_unfiltered"] for r in ok) / max(su, 1e-9),
        "valid_per_second_filtered": sum(r["valid_filtered"] for r in ok) / max(sf, 1e-9),
        "apis_faster_filtered": sum(r["vps_filtered"] > r["vps_unfiltered"] for r in ok),
        "crashes": sum(len(r["crashes"]) for r in ok),
    }
    return s


def _print_summary(s: dict) -> None:
    if not s.get("apis"):
        print(f"{s['label']}: nothing measured")
        return
    print(f"\n{s['label']}: {s['apis']} APIs ({s['errors']} failed to build), learned filter on {s['with_learned_filter']}")
    print(f"  pass rate: first (plain random) round {s['mean_pass_rate_first_round']:.1%}, unfiltered "
          f"{s['mean_pass_rate_unfiltered']:.1%}, filtered {s['mean_pass_rate_filtered']:.1%} (mean over APIs)")
    print(f"  classifier on fresh inputs: precision {s['mean_precision']:.1%}, recall {s['mean_recall']:.1%} "
          f"(median {s['median_recall']:.1%}); recall >= 85% on {s['apis_recall_ge_85']}/{s['apis']}, "
          f"filtered pass rate >= 75% on {s['apis_filtered_ge_75']}/{s['apis']}")
    print(f"  valid inputs/s (all APIs pooled): unfiltered {s['valid_per_second_unfiltered']:.0f}, filtered "
          f"{s['valid_per_second_filtered']:.0f}; filtered faster on {s['apis_faster_filtered']}/{s['apis']} APIs")
    print(f"  crashes found: {s['crashes']}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="5 PyTorch APIs, 3 TensorFlow ops")
    ap.add_argument("--train", type=int, default=600)
    ap.add_argument("--fresh", type=int, default=400)
    ap.add_argument("--no-tf", action="store_true")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    from sftl.config import load_settings

    torch_apis = TORCH_APIS[:5] if a.quick else TORCH_APIS
    tf_ops = [] if a.no_tf else (TF_OPS[:3] if a.quick else TF_OPS)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as home:
        settings = load_settings(home=home)
        print(f"PyTorch: {len(torch_apis)} APIs, {a.train} training + {a.fresh} fresh inputs each (random)", flush=True)
        rows = _run("pytorch", torch_apis, settings, a.train, a.fresh, "random")
        pw_apis = PAIRWISE_APIS[:2] if a.quick else PAIRWISE_APIS
        print(f"PyTorch, pairwise strategy: {len(pw_apis)} APIs", flush=True)
        pw_rows = _run("pytorch", pw_apis, settings, a.train, a.fresh, "pairwise")
        tf_rows = []
        if tf_ops:
            print(f"TensorFlow: {len(tf_ops)} raw ops", flush=True)
            tf_rows = _run("tensorflow", tf_ops, settings, a.train, a.fresh, "random")
    summaries = [_summary(rows, "PyTorch (random)"), _summary(pw_rows, "PyTorch (pairwise)"),
                 _summary(tf_rows, "TensorFlow (random)"), _summary(rows + tf_rows, "All (random)")]
    for s in summaries:
        _print_summary(s)
    findings = [(r["framework"], c) for r in rows + pw_rows + tf_rows if "error" not in r for c in r["crashes"]]
    for fw, c in findings[:20]:
        print(f"  crash [{fw}] {c['kind']} {c['signal']}: {c['input']}\n      {c['message'][:160]}")
    print(f"\nbench_fuzz took {time.perf_counter() - started:.0f}s")
    if a.json:
        a.json.write_text(json.dumps({"summaries": summaries, "rows": rows + pw_rows + tf_rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
