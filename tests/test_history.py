"""The history prior: importing fix records (bad lines reported, good ones kept), the time rule, mapping onto a tree, the blend, locate end to end."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

import pytest

from sftl.cli import main
from sftl.history import (
    TIE_BAND,
    FilePrior,
    HistoryPrior,
    SimilarFix,
    blend,
    compute_prior,
    fix_terms,
    fixed_before,
    parse_fix,
)
from sftl.history_io import candidates, history_prior, import_fixes
from sftl.model import Environment, Extraction, FixRecord, Issue, Localization, Outcome, Suspect
from sftl.store import SCHEMA_VERSION, Store

ROOT = Path(__file__).resolve().parent.parent
MINI = ROOT / "fixtures" / "sources" / "mini_pytorch"
HISTC = ROOT / "fixtures" / "demo" / "gcrde_histc_cpu_vs_cuda.json"  # filed 2026-11-04


def fix(number: int, fixed_on: str, files: list[str], title: str, ops: list[str] | None = None, **kw: object) -> dict[str, object]:
    return {"repo": "pytorch/pytorch", "issue": number, "pr": number + 1, "commit": None, "title": title,
            "ops": ops or [], "kind": "gcrde", "device": "cuda", "fixed_on": fixed_on, "files": files, **kw}


def write_jsonl(path: Path, lines: list[object]) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def issue_of(title: str, body: str = "", created_at: str = "2024-06-15T10:00:00Z", apis: tuple[str, ...] = ()) -> tuple[Issue, Extraction]:
    issue = Issue("pytorch/pytorch", 5, title, body, created_at=created_at)
    return issue, Extraction(None, None, Environment(framework="pytorch"), apis=apis)


def test_import_of_a_corrupt_file_reports_each_bad_line_and_keeps_the_good_ones(sftl_home: Path, tmp_path: Path) -> None:
    good1 = fix(10, "2021-02", ["aten/src/ATen/native/cuda/SummaryOps.cu"], "histc drops the upper edge on CUDA", ["torch.histc"])
    good2 = fix(20, "2022-03-09", ["aten/src/ATen/native/cuda/Sorting.cu"], "sort wrong on CUDA for large inputs")
    path = write_jsonl(tmp_path / "h.jsonl", [
        good1,
        '{"repo": "pytorch/pytorch", "issue": 3,',  # cut off
        {**good1, "issue": 11, "files": []},
        {**good1, "issue": 12, "fixed_on": "2021-13"},
        {**good1, "issue": 13, "commit": "not-a-sha"},
        [1, 2],
        "\xff\xfe",
        good2,
    ])
    code, out, err = run("history", "import", str(path))
    assert code == 2
    lines = err.strip().splitlines()
    assert [ln.split(":")[2] for ln in lines] == ["2", "3", "4", "5", "6", "7"]  # one message per bad line, by number
    assert "'files' must be a non-empty list" in lines[1] and "'fixed_on' must be YYYY-MM" in lines[2]
    assert "2 fix records read" in out
    code, out, _ = run("history", "export")
    assert code == 0
    assert [json.loads(x)["issue"] for x in out.splitlines()] == [10, 20]
    assert json.loads(out.splitlines()[0]) == good1  # export writes the import format back
    # importing again changes nothing; the export re-imports cleanly
    again = write_jsonl(tmp_path / "again.jsonl", out.splitlines())
    code, out, _ = run("history", "import", str(again), "--json")
    assert code == 0 and json.loads(out)["written"] == 0 and json.loads(out)["stored_total"] == 2


def test_another_benchmarks_root_cause_kind_is_read_as_other_and_kept_in_words(sftl_home: Path, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "h.jsonl", [{**fix(1, "2021-10", ["tensorflow/core/kernels/gpu_utils.h"], "segfault"),
                                               "repo": "tensorflow/tensorflow", "kind": "API Misuse",
                                               "evidence": "DLFrameworkBugsData: PR #52305 patch_file"}])
    assert run("history", "import", str(path))[0] == 0
    code, out, _ = run("history", "export")
    record = json.loads(out.splitlines()[0])
    assert record["kind"] == "other" and record["evidence"].startswith("root cause: API Misuse; DLFrameworkBugsData")
    bad = write_jsonl(tmp_path / "bad.jsonl", [{**fix(2, "2021-10", ["a.cc"], "x"), "kind": 3}])
    code, _, err = run("history", "import", str(bad))
    assert code != 0 and "'kind' must be one of" in err and "Traceback" not in err


def test_stats_count_per_repository_kind_and_directory(sftl_home: Path, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "h.jsonl", [
        fix(1, "2020-01", ["aten/src/ATen/native/cuda/A.cu", "aten/src/ATen/native/cuda/B.cu"], "a"),
        {**fix(2, "2020-02", ["torch/nn/modules/module.py"], "b"), "kind": "mme"},
        {**fix(3, "2020-03", ["tensorflow/core/kernels/x.cc"], "c"), "repo": "tensorflow/tensorflow"},
    ])
    assert run("history", "import", str(path))[0] == 0
    code, out, _ = run("history", "stats", "--json")
    figures = json.loads(out)
    assert figures["fixes"] == 3 and figures["repos"] == {"pytorch/pytorch": 2, "tensorflow/tensorflow": 1}
    assert figures["kinds"] == {"gcrde": 2, "mme": 1}
    assert figures["directories"]["aten/src/ATen/native"] == 1  # a fix counts once per directory
    assert figures["first"] == "2020-01" and figures["last"] == "2020-03"


def test_the_time_rule_a_fix_after_the_issue_was_filed_never_counts() -> None:
    files = ["aten/src/ATen/native/cuda/SummaryOps.cu", "aten/src/ATen/native/cpu/HistogramKernel.cpp",
             "aten/src/ATen/native/Histogram.cpp"]
    recs = [
        parse_fix(fix(1, "2024-05", [files[0]], "histc counts differ between CPU and CUDA", ["torch.histc"])),
        parse_fix(fix(2, "2024-06", [files[1]], "histc counts differ between CPU and CUDA", ["torch.histc"])),  # same month
        parse_fix(fix(3, "2024-06-14", [files[2]], "histc counts differ between CPU and CUDA", ["torch.histc"])),  # the day before
        parse_fix(fix(4, "2024-06-15", [files[2]], "histc counts differ between CPU and CUDA", ["torch.histc"])),  # that day
        parse_fix(fix(5, "2025-01", ["aten/src/ATen/native/ReduceOps.cpp"], "histc counts differ between CPU and CUDA",
                      ["torch.histc"])),
    ]
    issue, ex = issue_of("torch.histc counts differ on CPU and CUDA", apis=("torch.histc",))
    prior = compute_prior(issue, ex, [(r, fix_terms(r)) for r in recs], files + ["aten/src/ATen/native/ReduceOps.cpp"])
    assert sorted(n.record.issue for n in prior.neighbours) == [1, 3]  # a month-only fix counts from the next month
    assert {f.path for f in prior.files} == {files[0], files[2]}
    assert prior.considered == 2
    assert fixed_before("2024-05", "2024-06-01") and not fixed_before("2024-06", "2024-06-30")
    assert fixed_before("2024-06-29", "2024-06-30") and not fixed_before("2024-06-30", "2024-06-30")


def test_the_store_reads_only_fixes_before_the_issue(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "h.jsonl", [
        fix(1, "2019-01", ["a.cu"], "x"), fix(2, "2019-02-10", ["b.cu"], "y"), fix(3, "2019-02", ["c.cu"], "z"),
        {**fix(4, "2018-01", ["d.py"], "w"), "repo": "tensorflow/tensorflow"},
    ])
    with Store(tmp_path / "s.db") as store:
        assert not import_fixes(path, store).bad
        got = candidates(store, "pytorch", "pytorch/pytorch", "2019-02-11T00:00:00Z")
        assert sorted(r.issue or 0 for r, _ in got) == [1, 2]  # not the other framework, not the month-only one
        assert len(candidates(store, "pytorch", "pytorch/pytorch", "")) == 3  # an undated issue: every fix


def test_files_are_mapped_onto_the_tree_by_name_or_dropped_and_the_notes_say_so() -> None:
    rec = parse_fix(fix(7, "2019-03", ["aten/src/THC/THCTensorMathPairwise.cu", "aten/src/ATen/native/cuda/Histogram.cu",
                                       "test/test_torch.py", "docs/source/torch.rst"],
                        "histc wrong bins on CUDA", ["torch.histc"]))
    tree = ["aten/src/ATen/native/cuda/SummaryOps.cu", "aten/src/ATen/native/cuda/linalg/Histogram.cu",
            "aten/src/ATen/native/mps/Histogram.cu"]
    issue, ex = issue_of("torch.histc wrong bins on CUDA", apis=("torch.histc",))
    prior = compute_prior(issue, ex, [(rec, fix_terms(rec))], tree)
    assert [f.path for f in prior.files] == ["aten/src/ATen/native/cuda/linalg/Histogram.cu"]  # the nearest folder of that name
    assert prior.files[0].mapped_from == "aten/src/ATen/native/cuda/Histogram.cu"
    assert "then aten/src/ATen/native/cuda/Histogram.cu" in prior.files[0].reason
    assert any("dropped" in n and "THCTensorMathPairwise.cu" in n for n in prior.notes)
    assert not any("test_torch.py" in n or "torch.rst" in n for n in prior.notes)  # tests and docs are no source


def test_only_a_device_in_common_lends_nothing() -> None:
    rec = parse_fix(fix(8, "2019-03", ["aten/src/ATen/native/cuda/Loss.cu"], "nll_loss on CUDA", ["torch.nn.functional.nll_loss"]))
    issue, ex = issue_of("torch.histc on CUDA", apis=("torch.histc",))
    assert compute_prior(issue, ex, [(rec, fix_terms(rec))], ["aten/src/ATen/native/cuda/Loss.cu"]).files == ()


def test_locate_gives_the_ranker_the_files_similar_earlier_fixes_changed_and_says_why(
    sftl_home: Path, tmp_path: Path,
) -> None:
    """The stored history's prior is a feature of the learned ranker: the file an earlier similar fix changed carries
    its support and the fix in its reason; a fix made after the report was filed never counts; --no-history reads
    none of it."""
    target = "aten/src/ATen/native/cpu/HistogramKernel.cpp"
    base = ["locate", str(HISTC), "--source-root", str(MINI), "--offline", "--json", "--top", "10"]
    history = write_jsonl(tmp_path / "h.jsonl", [
        fix(87657, "2024-02", [target], "torch.histc puts values on the upper edge in the wrong bin",
            ["torch.histc"], device="cpu", kind="gcrde"),
        # as similar, but fixed after the report was filed: never counts
        fix(99001, "2026-12", ["aten/src/ATen/native/cpu/Loops.h"], "torch.histc upper edge wrong bin", ["torch.histc"]),
    ])
    assert run("history", "import", str(history))[0] == 0
    code, out, _ = run(*base)
    assert code == 0
    suspects = {s["path"]: s for s in json.loads(out)["suspects"]}
    assert suspects[target]["features"]["history_support"] > 0
    assert "changed by the fix of #87657 (similar: histc" in suspects[target]["reason"]
    assert not any("99001" in s["reason"] or s["features"].get("history_support") for p, s in suspects.items()
                   if p != target)
    code, out, _ = run(*base, "--no-history")
    assert not any(s["features"].get("history_support") for s in json.loads(out)["suspects"])


def _loc(*scores: tuple[str, float]) -> Localization:
    return Localization("sftl", tuple(Suspect(p, v, None, "content") for p, v in scores), Outcome.LOCATED, "ops: x")


def _prior(*supports: tuple[str, float], similarity: float = 0.9) -> HistoryPrior:
    near = SimilarFix(parse_fix(fix(7, "2019-03", [p for p, _ in supports], "histc wrong bins")), similarity, ("histc",))
    top = max(v for _, v in supports)
    return HistoryPrior(tuple(FilePrior(p, v / top, (near,), None, v) for p, v in supports), (near,), 1)


def test_the_prior_reads_a_learned_rankers_scores_as_odds_against_the_leader() -> None:
    # scores of any sign: a leader far ahead stays; a near tie (a twentieth apart in log-odds) is broken
    far = blend(_loc(("a.cu", 2.0), ("b.cpp", -2.0), ("c.h", -2.2)), _prior(("c.h", 0.9)), top=3)
    assert [s.path for s in far.suspects] == ["a.cu", "c.h", "b.cpp"]
    near = blend(_loc(("a.cu", -1.0), ("b.cpp", -1.05), ("c.h", -3.0)), _prior(("b.cpp", 0.9)), top=3)
    assert [s.path for s in near.suspects] == ["b.cpp", "a.cu", "c.h"]
    assert near.suspects[0].score > near.suspects[1].score  # the blended score keeps the order it gives


def test_the_prior_breaks_a_near_tie_among_content_candidates_and_says_why() -> None:
    loc = _loc(("a.cu", 0.80), ("b.cpp", 0.79), ("c.h", 0.50))
    got = blend(loc, _prior(("b.cpp", 0.9)), top=3)
    assert [s.path for s in got.suspects] == ["b.cpp", "a.cu", "c.h"]
    assert "changed by the fix of #7 (similar: histc; 0.90)" in got.suspects[0].reason
    assert got.suspects[1] == loc.suspects[0]  # the content suspects it does not support are left as they were
    assert "history: 1 similar earlier fix(es) of 1, 1 suspect(s) they changed" in got.reason


@pytest.mark.parametrize("support", [0.25, 0.5, 1.0])
def test_a_confident_content_leader_is_never_displaced_by_the_prior(support: float) -> None:
    # the runner-up trails by exactly the band: no support, however strong, lifts it past the leader
    loc = _loc(("a.cu", 0.80), ("b.cpp", 0.80 * (1 - TIE_BAND)), ("c.h", 0.30))
    got = blend(loc, _prior(("b.cpp", support), ("c.h", support)), top=3)
    assert [s.path for s in got.suspects] == ["a.cu", "b.cpp", "c.h"]


def test_weakly_similar_fixes_overturn_only_a_smaller_gap() -> None:
    loc = _loc(("a.cu", 0.80), ("b.cpp", 0.78))  # 2.5% apart
    assert [s.path for s in blend(loc, _prior(("b.cpp", 0.2)), top=2).suspects] == ["a.cu", "b.cpp"]  # lifts 2%
    assert [s.path for s in blend(loc, _prior(("b.cpp", 0.4)), top=2).suspects] == ["b.cpp", "a.cu"]  # lifts 4%


def test_a_file_only_the_prior_names_enters_after_every_content_suspect() -> None:
    loc = _loc(("a.cu", 0.80), ("b.cpp", 0.05))
    prior = _prior(("new.cu", 1.0), ("other.cu", 0.5))
    got = blend(loc, prior, top=4)
    assert [s.path for s in got.suspects] == ["a.cu", "b.cpp", "new.cu", "other.cu"]
    assert [s.score for s in got.suspects] == sorted((s.score for s in got.suspects), reverse=True)
    assert [s.path for s in blend(loc, prior, top=2).suspects] == ["a.cu", "b.cpp"]  # never above a content suspect


def test_support_is_absolute_a_weakly_similar_fix_stays_weak_for_its_best_file() -> None:
    rec = parse_fix(fix(8, "2019-03", ["aten/src/ATen/native/cuda/SummaryOps.cu", "aten/src/ATen/native/Histogram.cpp",
                                       "aten/src/ATen/native/cpu/HistogramKernel.cpp", "aten/src/ATen/native/Loss.cpp"],
                        "histc and nll_loss and cross_entropy and bincount fail with bfloat16 inputs",
                        ["torch.histc", "torch.nn.functional.nll_loss", "torch.bincount"]))
    issue, ex = issue_of("torch.histc counts on CUDA", apis=("torch.histc",))
    prior = compute_prior(issue, ex, [(rec, fix_terms(rec))], list(rec.files))
    sim = prior.neighbours[0].similarity
    assert sim < 0.9
    assert all(f.score == 1.0 for f in prior.files)  # relative: each is the issue's best
    assert all(abs(f.support - sim / 2) < 1e-3 for f in prior.files)  # absolute: the similarity, shared by 4 files


def test_an_older_store_gains_the_history_tables_and_keeps_its_issues(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with Store(db) as store:
        store.upsert_issue(Issue("o/r", 1, "t", "b", created_at="2020-01-01T00:00:00Z", updated_at="2020-01-01T00:00:00Z"))
    con = sqlite3.connect(db)
    con.executescript("DROP TABLE fixes; DROP TABLE fix_crawls; UPDATE meta SET value='3' WHERE key='schema_version';")
    con.close()
    with Store(db) as store:
        assert store.get_issue("o/r", 1) is not None
        assert store.count_fixes() == 0
        assert store._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)


def test_a_history_of_ten_thousand_records_imports_and_the_prior_finds_the_similar_ones(tmp_path: Path) -> None:
    ops = ["histc", "sort", "topk", "cumsum", "index_add", "group_norm", "interpolate", "unique", "scatter", "bmm"]
    lines = [fix(100 + i, f"{2015 + i % 10}-{1 + i % 12:02d}", [f"aten/src/ATen/native/cuda/K{i % 300}.cu"],
                 f"{ops[i % 10]} wrong on CUDA, case {i}", [f"torch.{ops[i % 10]}"]) for i in range(10_000)]
    lines.append(fix(50, "2019-05", ["aten/src/ATen/native/cuda/Special.cu"], "bincount weights ignored for int64 minlength",
                     ["torch.bincount"]))
    path = write_jsonl(tmp_path / "big.jsonl", lines)
    with Store(tmp_path / "s.db") as store:
        stats = import_fixes(path, store)
        assert stats.imported == 10_001 and store.count_fixes() == 10_001
        issue, ex = issue_of("torch.bincount ignores weights with minlength", created_at="2021-01-01T00:00:00Z",
                             apis=("torch.bincount",))
        tree = ["aten/src/ATen/native/cuda/Special.cu", "aten/src/ATen/native/cuda/K1.cu"]
        got = candidates(store, "pytorch", "pytorch/pytorch", issue.created_at)
        prior = compute_prior(issue, ex, got, tree)
        assert [f.path for f in prior.files] == ["aten/src/ATen/native/cuda/Special.cu"]
        assert prior.neighbours[0].record.issue == 50 and prior.neighbours[0].similarity > 0.5
        # what locate reads: the kept index, the same answer
        indexed = history_prior(store, issue, ex, "pytorch", tree, tmp_path / "cache")
        assert indexed.files == prior.files and indexed.considered == prior.considered == len(got)


@pytest.mark.parametrize("bad", ["{}", '{"repo": "x"}', "[]"])
def test_a_file_of_only_bad_lines_stores_nothing(sftl_home: Path, tmp_path: Path, bad: str) -> None:
    code, _, err = run("history", "import", str(write_jsonl(tmp_path / "b.jsonl", [bad])))
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert json.loads(run("history", "stats", "--json")[1])["fixes"] == 0


def test_importing_a_missing_file_is_one_line(sftl_home: Path, tmp_path: Path) -> None:
    code, _, err = run("history", "import", str(tmp_path / "nope.jsonl"))
    assert code == 2 and err.strip() == f"sftl: no such file: {tmp_path / 'nope.jsonl'}"


def test_records_round_trip_through_the_record_type() -> None:
    rec = parse_fix({**fix(1, "2020-01-05", ["./aten/x.cu"], " t "), "commit": "ABCDEF1", "body": "b"})
    assert isinstance(rec, FixRecord)
    assert rec.files == ("aten/x.cu",) and rec.title == "t" and rec.commit == "abcdef1" and rec.body == "b"


def test_the_issue_own_fix_never_counts_even_for_an_undated_issue() -> None:
    own = parse_fix(fix(5, "2019-03", ["aten/src/ATen/native/cuda/SummaryOps.cu"], "torch.histc wrong bins", ["torch.histc"]))
    other = parse_fix(fix(6, "2019-03", ["aten/src/ATen/native/Histogram.cpp"], "torch.histc wrong bins", ["torch.histc"]))
    issue, ex = issue_of("torch.histc wrong bins", created_at="", apis=("torch.histc",))  # issue #5, no date
    prior = compute_prior(issue, ex, [(own, fix_terms(own)), (other, fix_terms(other))],
                          ["aten/src/ATen/native/cuda/SummaryOps.cu", "aten/src/ATen/native/Histogram.cpp"])
    assert [n.record.issue for n in prior.neighbours] == [6]


@pytest.mark.parametrize(("fixed_on", "counted"), [("2024-02", True), ("2026-12", False)])
def test_eval_history_gives_the_prior_time_respectingly(sftl_home: Path, tmp_path: Path, fixed_on: str, counted: bool) -> None:
    target = "aten/src/ATen/native/cpu/HistogramKernel.cpp"
    issue = json.loads(HISTC.read_text(encoding="utf-8"))  # filed 2026-11-04
    labels = write_jsonl(tmp_path / "labels.jsonl", [{"url": issue["html_url"], "category": "gcrde", "truth_files": [target],
                                                      "issue": issue, "source_root": str(MINI)}])
    history = write_jsonl(tmp_path / "h.jsonl", [fix(87657, fixed_on, [target], "torch.histc puts values on the upper edge "
                                                     "in the wrong bin", ["torch.histc"], device="cpu")])
    assert run("history", "import", str(history))[0] == 0
    code, out, err = run("eval", str(labels), "--methods", "sftl", "--history", "--keep-features", "--no-plots", "--json",
                         "--out", str(tmp_path / "o"))
    assert code == 0, err
    assert set(json.loads(out)["localization"]) == {"sftl", "sftl+history"}
    lines = (tmp_path / "o" / "checkpoint.jsonl").read_text(encoding="utf-8").splitlines()
    kept = {obj["method"]: dict(obj["candidates"]) for obj in map(json.loads, lines)}
    # the prior reaches the ranker's features only in the run that reads the history, and only from an earlier fix
    assert not kept["sftl"][target].get("history_support")
    assert bool(kept["sftl+history"][target].get("history_support")) == counted


def test_the_kept_index_follows_the_store_and_a_damaged_one_is_rebuilt(tmp_path: Path) -> None:
    from sftl.history_io import index_path, load_index

    cache = tmp_path / "cache"
    with Store(tmp_path / "s.db") as store:
        import_fixes(write_jsonl(tmp_path / "a.jsonl", [fix(1, "2020-01", ["a.cu"], "histc")]), store)
        assert len(load_index(store, "pytorch", cache)) == 1
        import_fixes(write_jsonl(tmp_path / "b.jsonl", [fix(2, "2020-02", ["b.cu"], "sort")]), store)
        assert len(load_index(store, "pytorch", cache)) == 2  # a new history, a new index
        path = index_path([*store.fixes_stamp(), *_versions()], cache)
        assert path.is_file()
        path.write_bytes(b"\x00garbage")
        assert len(load_index(store, "pytorch", cache)) == 2 and path.read_bytes() != b"\x00garbage"
        assert len(load_index(store, "tensorflow", cache)) == 0


def _versions() -> list[int]:
    from sftl.history import TERMS_VERSION
    from sftl.history_io import INDEX_VERSION

    return [TERMS_VERSION, INDEX_VERSION]


def test_labelled_rows_carry_the_screened_category_of_stored_issues(sftl_home: Path, tmp_path: Path) -> None:
    from sftl.config import load_settings
    from sftl.github import issue_from_json

    raw = json.loads(HISTC.read_text(encoding="utf-8"))
    histc = issue_from_json(raw)
    with Store(load_settings({}, home=sftl_home).db_path) as store:
        store.upsert_issue(histc, raw)
        for n in range(1, 40):  # a corpus big enough for the keyword screener's IDF
            store.upsert_issue(Issue("pytorch/pytorch", n, f"docs typo number {n}", "The docs say foo; they mean bar.",
                                     state="closed", created_at="2020-01-01T00:00:00Z", updated_at="2020-01-01T00:00:00Z"))
    history = write_jsonl(tmp_path / "h.jsonl", [
        {**fix(histc.number, "2026-12", ["aten/src/ATen/native/cuda/SummaryOps.cu"], histc.title), "kind": "other"},
        {**fix(700, "2020-02", ["docs/x.rst", "torch/x.py"], "docs typo"), "kind": "mme"},  # not stored: its kind decides
    ])
    assert run("history", "import", str(history))[0] == 0
    code, out, _ = run("history", "export", "--labelled")
    rows = {json.loads(x)["url"].rsplit("/", 1)[1]: json.loads(x) for x in out.splitlines()}
    assert rows[str(histc.number)]["category"] == "gcrde" and rows[str(histc.number)]["issue"]["number"] == histc.number
    assert rows["700"]["category"] == "mme" and rows["700"]["truth_files"] == ["torch/x.py"] and "issue" not in rows["700"]
