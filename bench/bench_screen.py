"""Screening and extraction benchmark: quality on ../shared/data/dev/triage.jsonl (both modes) and speed on 10,000 issues.

    python bench/bench_screen.py [-v] [--data FILE.jsonl] [--train FILE.jsonl] [--no-speed]
    python bench/bench_screen.py --heldout [-v]   # dev set + every bench/heldout/*.jsonl, no speed part

--data scores another labelled set of the same format (title, body, error, label, framework, version)
instead of the dev set; with it, the learned mode is also trained on --train (default: the dev set)
and scored on --data, besides the cross-validation on --data itself. bench/heldout/ holds hand-written
held-out sets in the dev format (see bench/heldout/make_heldout.py): set 1 was written before the
generalisation changes, set 2 after them and scored untouched. screen3.jsonl (60) was written blind, before
its author read the screener (sftl/screen/), and scored untouched first; figures on it after the fixes it prompted are
no longer blind (docs/benchmarks.md and the commit history give both).
"""

from __future__ import annotations

import json
import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEV = ROOT.parent / "shared" / "data" / "dev" / "triage.jsonl"
CATS = ("mme", "gcrde", "other")


def load_dev(path: Path = DEV) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _opt(name: str) -> Path | None:
    if name in sys.argv:
        i = sys.argv.index(name)
        if i + 1 < len(sys.argv):
            return Path(sys.argv[i + 1])
    return None


def as_issue_body(row: dict) -> str:
    """The dev row as a report: the body, then the machine output line in a code block."""
    body = row.get("body") or ""
    if row.get("error"):
        body += f"\n\n```\n{row['error']}\n```"
    return body


def prf(truth: list[str], pred: list[str]) -> dict[str, tuple[float, float, float, int]]:
    out = {}
    for c in CATS:
        tp = sum(1 for t, p in zip(truth, pred, strict=True) if t == c and p == c)
        fp = sum(1 for t, p in zip(truth, pred, strict=True) if t != c and p == c)
        fn = sum(1 for t, p in zip(truth, pred, strict=True) if t == c and p != c)
        p = tp / (tp + fp) if tp + fp else 0.0
        r = tp / (tp + fn) if tp + fn else 0.0
        f = 2 * p * r / (p + r) if p + r else 0.0
        out[c] = (p, r, f, tp + fn)
    return out


def print_quality(name: str, truth: list[str], pred: list[str]) -> dict[str, tuple[float, float, float, int]]:
    res = prf(truth, pred)
    print(f"\n{name}")
    print(f"  {'category':<8} {'P':>6} {'R':>6} {'F1':>6} {'n':>4}")
    for c in CATS:
        p, r, f, n = res[c]
        print(f"  {c:<8} {p:6.3f} {r:6.3f} {f:6.3f} {n:4d}")
    acc = sum(t == p for t, p in zip(truth, pred, strict=True)) / len(truth)
    print(f"  accuracy {acc:.3f}")
    print("  confusion (rows = truth, cols = predicted)")
    print("  " + " " * 8 + "".join(f"{c:>7}" for c in CATS))
    for t in CATS:
        print(f"  {t:<8}" + "".join(f"{sum(1 for a, b in zip(truth, pred, strict=True) if a == t and b == p):7d}" for p in CATS))
    return res


HELDOUT = ROOT / "bench" / "heldout"


def main() -> int:
    sys.path.insert(0, str(ROOT))
    verbose = "-v" in sys.argv
    train_path = _opt("--train") or DEV
    if "--heldout" in sys.argv:
        # the dev set and every hand-written held-out set, quality and extraction only
        ok = True
        for data in [DEV, *sorted(HELDOUT.glob("*.jsonl"))]:
            print("\n" + "=" * 100)
            ok = run_set(data, train_path, verbose, speed=False) and ok
        return 0 if ok else 1
    return 0 if run_set(_opt("--data") or DEV, train_path, verbose, speed="--no-speed" not in sys.argv) else 1


def run_set(data: Path, train_path: Path, verbose: bool, speed: bool) -> bool:
    from sftl.extract import extract_text
    from sftl.model import Issue
    from sftl.screen import KeywordScreener, LearnedScreener, prepare
    if not data.exists():
        print(f"no labelled set at {data}; skipping the quality part")
        rows = []
    else:
        rows = load_dev(data)
        print(f"labelled set: {data} ({len(rows)} issues)")
    ok = True
    repo = {"pytorch": "pytorch/pytorch", "tensorflow": "tensorflow/tensorflow"}

    def to_docs(rs: list[dict]) -> tuple[list, list]:
        iss = [Issue(repo.get(r.get("framework") or "", ""), i + 1, r.get("title") or "", as_issue_body(r))
               for i, r in enumerate(rs)]
        return iss, [prepare(x, extract_text(x.title, x.body, x.repo)) for x in iss]

    if rows:
        truth = [r["label"] for r in rows]
        issues, docs = to_docs(rows)

        # keyword mode: IDF fitted on the whole corpus (unsupervised; labels are not used)
        kw = KeywordScreener().fit(docs)
        kw_res = kw.screen_docs(docs)
        kw_pred = [s.category.value for s in kw_res]
        res_kw = print_quality("keyword mode (published TF-IDF method + rules)", truth, kw_pred)
        paper = KeywordScreener(use_rules=False).fit(docs)
        print_quality("keyword mode without rules (the bare published method at the same thresholds)", truth,
                      paper.predict(docs))
        # the bare method with the best thresholds chosen on this very set (an upper bound for it)
        raw = paper.keyword_scores(docs)
        grid = [x / 1000 for x in range(1, 400, 3)]
        best = {}
        for c in ("mme", "gcrde"):
            cand = []
            for th in grid:
                pred_c = ["x" if v >= th else "-" for v in raw[c]]
                cand.append((prf([c if t == c else "-" for t in truth], [c if p == "x" else "-" for p in pred_c])[c][2], th))
            best[c] = max(cand)
        print("  bare method, best threshold per category chosen on this set: "
              + ", ".join(f"{c} F1 {f:.3f} at {th:g}" for c, (f, th) in best.items()))

        # learned mode: stratified 5-fold cross-validation, never scored on rows it trained on
        from sklearn.model_selection import StratifiedKFold

        pred = [""] * len(rows)
        abstained = [False] * len(rows)
        folds = max(2, min(5, *(truth.count(c) for c in CATS)))
        t_cv = time.perf_counter()
        for train, test in StratifiedKFold(folds, shuffle=True, random_state=0).split(docs, truth):
            model = LearnedScreener().fit([docs[i] for i in train], [truth[i] for i in train])
            for i, s in zip(test, model.screen_docs([docs[i] for i in test]), strict=True):
                pred[i] = s.category.value
                abstained[i] = s.abstained
        t_cv = time.perf_counter() - t_cv
        res_l = print_quality(f"learned mode ({folds}-fold stratified cross-validation)", truth, pred)
        t_fit = time.perf_counter()
        LearnedScreener().fit(docs, truth)
        t_fit = time.perf_counter() - t_fit
        print(f"  learned-mode speed: fit on all {len(docs)} issues {t_fit:.2f} s; the {folds}-fold cross-validation "
              f"(fit + screen per fold) {t_cv:.2f} s; goal: fit well under 5 s")
        if t_fit > 5:
            print("  GOAL MISSED: learned-mode fit time")
            ok = False
        if data.resolve() != train_path.resolve() and train_path.exists():
            train_rows = load_dev(train_path)
            _, train_docs = to_docs(train_rows)
            model = LearnedScreener().fit(train_docs, [r["label"] for r in train_rows])
            transfer = model.predict(docs)
            print_quality(f"learned mode trained on {train_path.name} ({len(train_rows)}), scored on {data.name}",
                          truth, transfer)
            if verbose:
                for r, p in zip(rows, transfer, strict=True):
                    if p != r["label"]:
                        print(f"  [{r['label']} learned on {train_path.name}={p}] {r['title'][:90]}")
        kept = [i for i in range(len(rows)) if not abstained[i]]
        if kept:
            print_quality(
                f"learned mode, answered only ({len(kept)}/{len(rows)}; {len(rows) - len(kept)} abstained: needs human triage)",
                [truth[i] for i in kept], [pred[i] for i in kept])
        for name, res in (("keywords", res_kw), ("learned", res_l)):
            for c in ("mme", "gcrde"):
                if res[c][2] < 0.95:
                    print(f"  GOAL MISSED: {name} F1({c}) = {res[c][2]:.3f} < 0.95")
                    ok = False
        if verbose:
            for r, s, lp in zip(rows, kw_res, pred, strict=True):
                if s.category.value != r["label"] or lp != r["label"]:
                    print(f"  [{r['label']} kw={s.category.value} learned={lp}] {r['title'][:90]}\n      {s.reason[:300]}")

        # transfer: the template-wrapped reports of fixtures/reports (collect_env, TF templates, hard
        # negatives), keyword IDF fitted on dev + them, learned mode trained on the whole dev set
        fx_files = sorted((ROOT / "fixtures" / "reports").glob("*.json"))
        if fx_files:
            from sftl.github import issue_from_json

            fx = [issue_from_json(json.loads(f.read_text(encoding="utf-8"))) for f in fx_files]
            fx_truth = [f.stem.split("__")[0] for f in fx_files]
            fx_docs = [prepare(i, extract_text(i.title, i.body, i.repo)) for i in fx]
            kw_fx = KeywordScreener().fit(docs + fx_docs).predict(fx_docs)
            full = LearnedScreener().fit(docs, truth)
            l_fx = full.predict(fx_docs)
            for name, pred_fx in (("keyword", kw_fx), ("learned (trained on dev)", l_fx)):
                right = sum(a == b for a, b in zip(fx_truth, pred_fx, strict=True))
                wrong = [f.stem for f, a, b in zip(fx_files, fx_truth, pred_fx, strict=True) if a != b]
                print(f"\ntemplate-wrapped fixture reports, {name} mode: {right}/{len(fx_truth)} right"
                      + (f"; wrong: {', '.join(wrong)}" if wrong else ""))

        # extraction: version found wherever the text states one
        stated = found = 0
        misses = []
        for r, iss in zip(rows, issues, strict=True):
            v = r.get("version")
            if not v:
                continue
            text = f"{iss.title}\n{iss.body}"
            base = re.split(r"[+]", v)[0]
            if base not in text:
                continue  # the text does not state it (the label came from elsewhere)
            stated += 1
            got = extract_text(iss.title, iss.body, iss.repo).environment.version or ""
            if got and (got.split("+")[0] == base or base.startswith(got) or got.startswith(base)):
                found += 1
            else:
                misses.append((v, got, r["title"][:60]))
        print(f"\nextraction: version found in {found}/{stated} reports whose text states it ({found / max(stated, 1):.1%})")
        for m in misses[:10]:
            print(f"  missed: stated {m[0]!r}, read {m[1]!r} ({m[2]})")
        py_err = re.compile(r"^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception): ")
        with_err = [(r, iss) for r, iss in zip(rows, issues, strict=True) if r.get("error") and py_err.match(r["error"])]
        got = sum(1 for r, iss in with_err if (extract_text(iss.title, iss.body).error_line or "").split(":")[0].rsplit(".", 1)[-1]
                  == r["error"].split(":")[0].rsplit(".", 1)[-1])
        print(f"extraction: Python error line read (right exception type) in {got}/{len(with_err)} reports that show one")

    if not speed:
        return ok
    # speed: 10,000 synthetic-but-realistic stored issues (templates, code, tracebacks)
    rng = random.Random(0)
    base = rows or [{"title": "t", "body": "b", "error": None}]
    template = (
        "### 🐛 Describe the bug\n\n{body}\n\n```python\nimport torch\nx = torch.randn(4, 4)\nprint(x.sum())\n```\n\n"
        "```\nTraceback (most recent call last):\n  File \"/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py\", "
        "line 1501, in _call_impl\n    return forward_call(*args)\n{error}\n```\n\n### Versions\n\nPyTorch version: 2.1.0+cu121\n"
        "Is debug build: False\nCUDA used to build PyTorch: 12.1\nOS: Ubuntu 22.04.3 LTS (x86_64)\nPython version: 3.10.12\n"
        "Is CUDA available: True\nGPU models and configuration: GPU 0: NVIDIA A100-SXM4-80GB\n[pip3] torch==2.1.0\n"
    )
    big = []
    big_truth = []
    for i in range(10_000):
        r = rng.choice(base)
        big_truth.append(r.get("label"))
        big.append(Issue("o/r", i + 1, r["title"], template.format(body=r["body"], error=r.get("error") or "RuntimeError: x")))
    import os

    from sftl.screen import prepare_many

    def run(workers: int) -> tuple[float, float, list]:
        w0, c0 = time.perf_counter(), time.process_time()
        docs_big = prepare_many(big, workers=workers)
        kw_big = KeywordScreener().fit(docs_big)
        res = kw_big.screen_docs(docs_big)
        return time.perf_counter() - w0, time.process_time() - c0, res

    wall1, cpu1, res = run(1)
    wall2, _, _ = run(2)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\nspeed: keyword screening of {len(big)} templated issues (read sections + rules, fit IDF, score): "
          f"one process {wall1:.2f} s wall / {cpu1:.2f} s CPU; two processes {wall2:.2f} s wall "
          f"(load average {load:.1f} on {os.cpu_count()} cores); goal <= 10 s on 2 cores; "
          f"{sum(s.category.value != 'other' for s in res)} flagged")
    if rows:
        same = sum(1 for t, sc in zip(big_truth, res, strict=True) if t == sc.category.value)
        print(f"  template robustness: the dev rows wrapped in PyTorch's template (collect_env, a torch traceback) "
              f"keep their label in {same}/{len(res)} of the 10,000 copies")
    if min(wall1, wall2, cpu1) > 10:
        ok = False
        print("  GOAL MISSED: speed")
    return ok


if __name__ == "__main__":
    sys.exit(main())
