"""`sftl eval` on peer benchmarks in their own formats (Denchmark's folders, SWE-bench JSONL, report rows), every
report scored, rows before and after a split date apart, and `sftl model fit` on what it kept."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from test_candidates import write_tree

from sftl.cli import main
from sftl.evaluate_formats import denchmark_text, label_lines, sniff


def _denchmark(folder: Path, number: int, title: str, body: str, opened: str, files: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    indented = "\n".join(" " + line for line in body.splitlines())
    obj = {"BR": {"BR_id": str(number), "BRopenT": opened, "BRcloseT": opened,
                  "BR_text": {"BRsummary": title, "BRdescription": indented}, "comments": []},
           "commit": {"commit_id": "abc", "commitT": opened, "changed_files": {
               f"file_{i}": {"file_change_type": "MODIFY", "file_old_name": f, "file_new_name": f, "hunks": []}
               for i, f in enumerate(files)}}}
    (folder / f"{number}.json").write_text(json.dumps(obj))


REPORTS = [  # (title, body, date, fix files): three reports a maintainer would file, at three dates
    ("tf.nn.conv2d fails on a rank-3 input",
     "<denchmark-h:h3>Describe</denchmark-h>\n<denchmark-code>\ntf.nn.conv2d(x, w, 1, 'SAME')\n</denchmark-code>\n"
     "InvalidArgumentError: input must be 4-dimensional",
     "2018-05-01T00:00:00Z", ["tensorflow/core/kernels/conv_ops.cc", "tensorflow/core/kernels/conv_ops_test.cc"]),
    ("Dataset.map hangs with num_parallel_calls=0",
     "`tf.data.Dataset.map(f, num_parallel_calls=0)` never returns; see <denchmark-link:https://x/y>this</denchmark-link>",
     "2018-09-01T00:00:00Z", ["tensorflow/python/data/ops/dataset_ops.py", "tensorflow/python/data/BUILD"]),
    ("Session.run aborts when a fetch is passed twice",
     "fetch and feed names are not unique, and the session aborts with SIGABRT.",
     "2019-02-01T00:00:00Z", ["tensorflow/core/common_runtime/direct_session.cc"]),
]


@pytest.fixture()
def bench(tmp_path: Path) -> Path:
    folder = tmp_path / "denchmark" / "tensorflow+tensorflow"
    for i, (title, body, date, files) in enumerate(REPORTS):
        _denchmark(folder, 9001 + i, title, body, date, files)
    return tmp_path / "denchmark"


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_denchmark_markup_becomes_markdown() -> None:
    text = denchmark_text(" <denchmark-h:h3>Describe</denchmark-h>\n <denchmark-code>\n x = 1\n </denchmark-code>\n"
                          " see <denchmark-link:https://a/b>here</denchmark-link>")
    assert "```\nx = 1\n" in text and "denchmark" not in text and text.startswith("Describe")


def test_each_format_is_sniffed_and_read_into_label_lines(bench: Path, tmp_path: Path) -> None:
    assert sniff(bench) == "denchmark"
    rows = [json.loads(line) for line in label_lines(bench)]
    assert [r["url"] for r in rows] == [f"https://github.com/tensorflow/tensorflow/issues/{9001 + i}" for i in range(3)]
    # tests and build files of the fix are not truth: only source files are ever suspects
    assert rows[0]["truth_files"] == ["tensorflow/core/kernels/conv_ops.cc"]
    assert rows[1]["truth_files"] == ["tensorflow/python/data/ops/dataset_ops.py"]
    assert rows[0]["category"] is None and rows[0]["issue"]["created_at"] == "2018-05-01T00:00:00Z"

    swe = tmp_path / "swe.jsonl"
    swe.write_text(json.dumps({
        "instance_id": "pytorch__pytorch-1", "repo": "pytorch/pytorch", "base_commit": "abc",
        "problem_statement": "torch.compile graph-breaks on Gamma\n\nBody text", "version": "era-abc",
        "patch": "diff --git a/torch/_meta_registrations.py b/torch/_meta_registrations.py\n", "test_patch": "",
        "issue_url": "https://github.com/pytorch/pytorch/issues/174090", "issue_created_at": "2025-12-01T00:00:00Z",
    }) + "\n")
    assert sniff(swe) == "swebench"
    (row,) = [json.loads(line) for line in label_lines(swe)]
    assert row["truth_files"] == ["torch/_meta_registrations.py"] and row["version"] is None
    assert row["issue"]["title"] == "torch.compile graph-breaks on Gamma" and row["framework"] == "pytorch"

    plain = tmp_path / "rows.jsonl"
    plain.write_text(json.dumps({"url": "https://github.com/tensorflow/tensorflow/issues/7", "framework": "tensorflow",
                                 "category": None, "title": "t", "body": "b", "created_at": "2017-01-01T00:00:00Z",
                                 "version": "1.0", "truth_files": ["tensorflow/python/ops/nn_ops.py"]}) + "\n")
    assert sniff(plain) == "rows"
    assert json.loads(label_lines(plain)[0])["version"] == "1.0"


def test_eval_scores_every_report_apart_by_date_and_model_fit_reads_it(bench: Path, tmp_path: Path,
                                                                       sftl_home: Path) -> None:
    root = write_tree(tmp_path / "tree")
    out = tmp_path / "run"
    code, report, err = _run("eval", str(bench), "--source-root", str(root), "--method", "sftl,bm25,vsm",
                             "--split-date", "tensorflow=2019-01-01", "--keep-features", "--out", str(out),
                             "--offline", "--no-plots")
    assert code == 0, err
    assert "Table 5" in report
    # every report is scored, whatever its category; the two periods are reported apart
    assert "| all rows | all | all | sftl | 3 |" in report
    assert "| filed before tensorflow 2019-01-01 | all | all | sftl | 2 |" in report
    assert "| filed on or after tensorflow 2019-01-01 | all | all | sftl | 1 |" in report
    assert "| from denchmark | all | all | bm25 | 3 |" in report  # per benchmark, too
    summary = json.loads((out / "summary.json").read_text())
    top5 = summary["localization"]["sftl"]["all/all"]["top"]["5"]
    assert top5 == 1.0, summary["localization"]["sftl"]  # three files in the tree's four: each is in the top 5
    # too few reports to train on: one clear line and a non-zero exit, never a traceback
    code, _, err = _run("model", "fit", str(out), "--split-date", "2019-01-01", "--out", str(tmp_path / "m.json"))
    assert code != 0 and "need 10" in err and "Traceback" not in err


def test_model_fit_on_a_folder_without_an_evaluation_says_what_to_run(tmp_path: Path) -> None:
    code, _, err = _run("model", "fit", str(tmp_path), "--split-date", "2019-01-01", "--out", str(tmp_path / "m.json"))
    assert code != 0 and "--keep-features" in err and len(err.strip().splitlines()) == 1


def _fake_evaluation(out: Path, reports: int = 30, misleading_every: int = 0, category: str = "unlabelled",
                     first: int = 1) -> None:
    """An `sftl eval --keep-features` folder: per report 8 candidates; the truth is the one its traceback's
    innermost frame names, while BM25 prefers another; half the reports filed before 2019, half after.
    `misleading_every`: in every such report the frame names another file (the truth is unreachable).
    A labelled `category`: its localizer located another file first (the hand order the model replaced)."""
    import csv
    import random

    rng = random.Random(1)
    out.mkdir(parents=True)
    keys, lines = {}, []
    with (out / "rows.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["line", "url", "status", "framework", "category", "filed", "truth_files"])
        for n in range(first - 1, first - 1 + reports):
            url = f"https://github.com/tensorflow/tensorflow/issues/{n + 1}"
            keys[url] = f"k{n}"
            filed = f"{2018 if n - first + 1 < reports // 2 else 2019}-06-01"
            truth = f"tensorflow/python/ops/f{n}_3.py"
            w.writerow([n + 1, url, "ok", "tensorflow", category, filed, truth])
            cands = []
            for j in range(8):
                feats = {"bm25_all": rng.random() * (0.5 if j == 3 else 1.0), "is_python": 1.0}
                framed = 5 if misleading_every and n % misleading_every == 0 else 3
                if j == framed:
                    feats.update(tb_frame=1.0, tb_innermost=1.0, tb_position=1.0)
                if category != "unlabelled" and j in (6, 3):  # the localizer's order: file 6, then the truth
                    feats.update(category_located=1.0, category_rank=1.0 if j == 6 else 0.5)
                cands.append([f"tensorflow/python/ops/f{n}_{j}.py", feats])
            lines.append({"key": f"k{n}", "method": "sftl", "outcome": "located", "top": 10, "seconds": 0.1,
                          "reason": "", "suspects": [[c[0], 0.0, "python"] for c in cands], "candidates": cands})
            ranked = sorted(cands, key=lambda c: -c[1]["bm25_all"])
            lines.append({"key": f"k{n}", "method": "bm25", "outcome": "located", "top": 10, "seconds": 0.1,
                          "reason": "", "suspects": [[c[0], c[1]["bm25_all"], "python"] for c in ranked]})
    (out / "checkpoint.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (out / "keys.json").write_text(json.dumps(keys))


def test_model_fit_trains_on_the_earlier_reports_and_judges_the_later(tmp_path: Path) -> None:
    from sftl.localize.candidates.ranker import CandidateRanker

    _fake_evaluation(tmp_path / "run")
    model = tmp_path / "model.json"
    code, out, err = _run("model", "fit", str(tmp_path / "run"), "--split-date", "tensorflow=2019-01-01",
                          "--out", str(model), "--rounds", "30", "--json")
    assert code == 0, err
    figures = json.loads(out)
    assert figures["train_reports"] == 15 and figures["validation_reports"] == 15
    valid = figures["validation"]["tensorflow"]
    # learned from the earlier reports only, the frame signal carries over to the later ones; BM25 does not
    assert valid["sftl"]["top1"] == 1.0 and valid["bm25"]["top1"] < 1.0
    loaded = CandidateRanker.load(model)
    assert len(loaded.provenance["trained_on"]) == 15
    assert all(u.endswith(tuple(f"/{n}" for n in range(1, 16))) for u in loaded.provenance["trained_on"])


def test_model_fit_judges_labelled_training_reports_leave_one_out_beside_the_hand_order(tmp_path: Path) -> None:
    _fake_evaluation(tmp_path / "peer")
    _fake_evaluation(tmp_path / "dev", reports=12, category="gcrde", first=101)
    code, out, err = _run("model", "fit", str(tmp_path / "peer"), str(tmp_path / "dev"), "--split-date",
                          "tensorflow=2019-01-01", "--leave-one-out", "gcrde", "--out", str(tmp_path / "m.json"),
                          "--rounds", "30", "--json")
    assert code == 0, err
    figures = json.loads(out)
    assert figures["train_reports"] == 15 + 6  # both folders' earlier reports
    loo = figures["leave_one_out"]["dev/gcrde"]["tensorflow"]
    # the six earlier gcrde reports, each ranked by a model fitted without it: the frame signal carries over,
    # while the localizer's hand order put another file first in every one
    assert loo["sftl"]["n"] == 6 and loo["sftl"]["top1"] == 1.0
    assert loo["hand"]["top1"] == 0.0 and loo["hand"]["top5"] == 1.0


def test_model_fit_refit_all_keeps_the_splits_figures_and_learns_from_every_report(tmp_path: Path) -> None:
    from sftl.localize.candidates.ranker import CandidateRanker

    _fake_evaluation(tmp_path / "run", reports=40, misleading_every=4)
    code, out, err = _run("model", "fit", str(tmp_path / "run"), "--split-date", "tensorflow=2019-01-01",
                          "--refit-all", "--out", str(tmp_path / "m.json"), "--rounds", "30", "--json")
    assert code == 0, err
    figures = json.loads(out)
    # the figures are the fit before the split's, judged on the 20 later reports; the model kept learned all 40
    assert figures["validation_reports"] == 20 and figures["refit_on_all"]["reports"] == 40
    model = CandidateRanker.load(tmp_path / "m.json")
    assert len(model.provenance["trained_on"]) == 40
    assert model.provenance["figures"]["validation"] == figures["validation"]
    # its confidence is chosen on the later reports, each scored by a model of the folds without it
    assert model.confidence == figures["refit_on_all"]["confidence"] and model.confidence["reports"] == 20


def test_the_fitted_ranker_says_when_its_first_file_is_unlikely(tmp_path: Path) -> None:
    from sftl.localize.candidates.ranker import CandidateRanker

    _fake_evaluation(tmp_path / "run", reports=60, misleading_every=3)
    model_path = tmp_path / "model.json"
    code, out, err = _run("model", "fit", str(tmp_path / "run"), "--split-date", "tensorflow=2019-01-01",
                          "--out", str(model_path), "--rounds", "30", "--json")
    assert code == 0, err
    conf = json.loads(out)["confidence"]
    # a third of the later reports cannot be right: the threshold keeps the ones that were, at the precision asked
    assert conf["reports"] == 30 and 0.0 < conf["threshold"] <= 1.0
    assert conf["precision"] >= conf["target_precision"] and 0.0 < conf["coverage"] <= 1.0
    model = CandidateRanker.load(model_path)
    assert model.confidence == conf
    sure, unsure = model.confidence_of([5.0, -3.0]), model.confidence_of([0.1, 0.1])
    assert sure is not None and unsure is not None and sure > unsure


def test_a_wrong_format_or_date_is_one_line_and_a_usage_error(tmp_path: Path, sftl_home: Path) -> None:
    swe = tmp_path / "swe.jsonl"
    swe.write_text(json.dumps({"instance_id": "x", "problem_statement": "t\n\nb", "repo": "pytorch/pytorch"}) + "\n")
    code, _, err = _run("eval", str(swe), "--format", "denchmark", "--offline", "--no-plots", "--out", str(tmp_path / "o"))
    assert code == 2 and "is not a Denchmark issue JSON" in err and len(err.strip().splitlines()) == 1
    code, _, err = _run("eval", str(swe), "--split-date", "2019-13-01", "--offline")
    assert code == 2 and "not a split date '2019-13-01'" in err
