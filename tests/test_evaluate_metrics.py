"""Metric functions of sftl.evaluate, checked against values worked out by hand."""

from __future__ import annotations

import pytest

from sftl.evaluate import (
    RankedResult,
    average_precision,
    confusion_matrix,
    first_hit_rank,
    localization_metrics,
    localization_table,
    screening_metrics,
    screening_table,
    threshold_curve,
    topk_curve,
)


def _r(ranked: tuple[str, ...], truth: tuple[str, ...], outcome: str = "located", **kw: str) -> RankedResult:
    return RankedResult(
        key=kw.get("key", "k"),
        method=kw.get("method", "m"),
        framework=kw.get("framework", "pytorch"),
        category=kw.get("category", "mme"),
        truth=truth,
        ranked=ranked,
        outcome=outcome,
    )


def test_confusion_rows_are_truth_and_columns_predictions() -> None:
    truth = ["mme", "mme", "gcrde", "other", "other"]
    pred = ["mme", "other", "gcrde", "gcrde", "other"]
    assert confusion_matrix(truth, pred) == [[1, 0, 1], [0, 1, 0], [0, 1, 1]]


def test_screening_metrics_per_class() -> None:
    truth = ["mme", "mme", "gcrde", "other", "other"]
    pred = ["mme", "other", "gcrde", "gcrde", "other"]
    m = screening_metrics(truth, pred)
    assert m["accuracy"] == pytest.approx(3 / 5)
    g = m["per_class"]["gcrde"]
    assert (g["precision"], g["recall"]) == (pytest.approx(0.5), pytest.approx(1.0))
    assert g["f1"] == pytest.approx(2 / 3)
    assert g["accuracy"] == pytest.approx(4 / 5)  # one-vs-rest: only the 'other'->gcrde row is wrong
    mme = m["per_class"]["mme"]
    assert (mme["precision"], mme["recall"], mme["support"]) == (1.0, 0.5, 2)
    assert m["macro"]["recall"] == pytest.approx((0.5 + 1.0 + 0.5) / 3)


def test_abstained_prediction_costs_recall_only() -> None:
    m = screening_metrics(["mme", "gcrde"], ["abstain", "gcrde"])
    assert m["abstained"] == 1
    assert m["per_class"]["mme"]["recall"] == 0.0
    assert m["per_class"]["gcrde"]["precision"] == 1.0
    assert m["confusion"] == [[0, 0, 0], [0, 1, 0], [0, 0, 0]]


def test_length_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError):
        screening_metrics(["mme"], [])


def test_threshold_curve_is_exact_at_each_distinct_score() -> None:
    truth = ["mme", "other", "mme", "other"]
    scores = [{"mme": 0.9}, {"mme": 0.8}, {"mme": 0.3}, {"mme": 0.1}]
    curve = {round(p["threshold"], 2): p for p in threshold_curve(truth, scores, "mme")}
    assert curve[0.9]["precision"] == 1.0 and curve[0.9]["recall"] == 0.5
    assert curve[0.8]["precision"] == 0.5 and curve[0.8]["recall"] == 0.5
    assert curve[0.3]["precision"] == pytest.approx(2 / 3) and curve[0.3]["recall"] == 1.0
    assert curve[0.1]["precision"] == 0.5


def test_rank_and_average_precision() -> None:
    ranked = ["a.py", "./b.py", "c.py", "d.py"]
    assert first_hit_rank(ranked, ["b.py"]) == 2
    assert first_hit_rank(ranked, ["z.py"]) is None
    # truth b (rank 2) and d (rank 4): AP = (1/2 + 2/4) / 2
    assert average_precision(ranked, ["b.py", "d.py"]) == pytest.approx(0.5)
    # a truth file never ranked halves AP
    assert average_precision(["b.py"], ["b.py", "x.py"]) == pytest.approx(0.5)
    assert first_hit_rank(["torch\\nn\\modules\\module.py"], ["torch/nn/modules/module.py"]) == 1


def test_localization_metrics_counts_abstention_as_miss() -> None:
    rows = [
        _r(("t.py", "x.py"), ("t.py",)),  # rank 1
        _r(("x.py", "y.py", "t.py"), ("t.py",)),  # rank 3
        _r(("t.py",), ("t.py",), outcome="abstained"),  # an abstention hides its list
        _r((), ("t.py",), outcome="skipped"),
    ]
    m = localization_metrics(rows)
    assert m["n"] == 4 and m["answered"] == 2 and m["abstained"] == 1 and m["skipped"] == 1
    assert m["abstention_rate"] == 0.5
    assert m["top"]["1"] == 0.25 and m["top"]["3"] == 0.5 and m["top"]["10"] == 0.5
    assert m["mrr"] == pytest.approx((1 + 1 / 3) / 4)
    assert m["map"] == pytest.approx((1 + 1 / 3) / 4)
    paper = m["paper"]
    assert paper["k"] == 1
    assert paper["accuracy"] == 0.25
    assert paper["precision"] == 0.5  # 1 right of 2 answered
    assert paper["recall"] == 0.25  # 1 right of 4 scored
    assert paper["f1"] == pytest.approx(2 * 0.5 * 0.25 / 0.75)


def test_paper_metrics_at_k_with_two_truth_files() -> None:
    m = localization_metrics([_r(("a", "b", "c"), ("a", "c"))], paper_k=3)["paper"]
    assert m["precision"] == pytest.approx(2 / 3)
    assert m["recall"] == 1.0


def test_topk_curve_is_monotone() -> None:
    rows = [_r(("x", "t"), ("t",)), _r(("t",), ("t",)), _r(("x",), ("t",))]
    assert topk_curve(rows, max_k=3) == [pytest.approx(1 / 3), pytest.approx(2 / 3), pytest.approx(2 / 3)]


def test_tables_group_by_framework_and_category() -> None:
    rows = [
        _r(("t",), ("t",), framework="pytorch", category="mme", method="vsm"),
        _r(("x",), ("t",), framework="tensorflow", category="mme", method="vsm"),
        _r(("t",), ("t",), framework="pytorch", category="gcrde", method="vsm"),
    ]
    table = localization_table(rows)["vsm"]
    assert table["pytorch/mme"]["top"]["1"] == 1.0
    assert table["tensorflow/mme"]["top"]["1"] == 0.0
    assert table["all/mme"]["n"] == 2 and table["all/mme"]["top"]["1"] == 0.5
    assert table["pytorch/all"]["n"] == 2
    assert table["all/all"]["n"] == 3
    s = screening_table([("pytorch", "mme", "mme"), ("tensorflow", "gcrde", "other")])
    assert list(s) == ["pytorch", "tensorflow", "all"]
    assert s["all"]["accuracy"] == 0.5


def test_summary_and_report_put_methods_side_by_side() -> None:
    from sftl.evaluate import SkippedRow, render_markdown, summarize

    screened = [
        {"framework": "pytorch", "category": "mme",
         "screeners": {"keywords": {"predicted": "mme", "scores": {"mme": 0.9, "gcrde": 0.0}}}},
        {"framework": "tensorflow", "category": "gcrde",
         "screeners": {"keywords": {"predicted": "other", "scores": {"mme": 0.0, "gcrde": 0.3}},
                       "learned": {"predicted": "gcrde", "scores": {"gcrde": 0.8}}}},
    ]
    results = [
        _r(("t",), ("t",), framework="pytorch", category="mme", method="sftl", key="a"),
        _r(("x", "t"), ("t",), framework="pytorch", category="mme", method="vsm", key="a"),
        _r((), ("k.cc",), outcome="abstained", framework="tensorflow", category="gcrde", method="sftl", key="b"),
        _r(("k.cc",), ("k.cc",), framework="tensorflow", category="gcrde", method="vsm", key="b"),
    ]
    summary = summarize(screened, results, [SkippedRow(7, "u", "unknown category 'x'")], ["sftl", "vsm"],
                        screeners=["keywords", "learned"])
    assert summary["topk_curves"]["vsm"]["mme"][:2] == [0.0, 1.0]
    assert summary["screening"]["keywords"]["all"]["per_class"]["gcrde"]["recall"] == 0.0
    assert summary["screening"]["learned"]["all"]["n"] == 1  # scored only where it ran
    report = render_markdown(summary)
    t2 = report.split("## Table 2")[1].split("## Table 3")[0]
    assert "| tensorflow | gcrde | keywords | 1 | 0.0 | 0.0 | 0.0 | 0.0 |" in t2
    assert "| tensorflow | gcrde | learned | 1 | 100.0 | 100.0 | 100.0 | 100.0 |" in t2
    t3 = report.split("## Table 3")[1].split("## Table 4")[0]
    assert "| pytorch | sftl | 1 | 100.0 |" in t3 and "| pytorch | vsm | 1 | 0.0 | 100.0 |" in t3
    t4 = report.split("## Table 4")[1]
    assert "| tensorflow | sftl | 1 | 0.0 |" in t4 and "| 100.0 | 0.0 | 0.0 | 0.0 | 0.0 |" in t4  # abstained
    assert "| 7 | u | unknown category 'x' |" in report
