"""Function truth from the peer formats (Denchmark's method_info, a patch's hunks) carried into `sftl eval`, and
the function-level figures: a changed function within a found file, sftl beside BM25 over functions."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

from test_candidates import write_tree

from sftl.cli import main
from sftl.evaluate import parse_label_line
from sftl.evaluate_formats import denchmark_functions, label_lines, patch_functions
from sftl.evaluate_functions import FunctionCase, figures, function_rank, same_function

PATCH = '''diff --git a/torch/_meta_registrations.py b/torch/_meta_registrations.py
--- a/torch/_meta_registrations.py
+++ b/torch/_meta_registrations.py
@@ -189,6 +189,12 @@ def meta_take(self, index):
     return x
+
+@register_meta(aten._standard_gamma)
+def meta__standard_gamma(self):
+    return self
@@ -300,3 +306,3 @@ class Foo:
-    y = 1
+    y = 2
diff --git a/test/test_meta.py b/test/test_meta.py
@@ -1,3 +1,4 @@ def test_take(self):
+    pass
'''


METHODS = '''diff --git a/torch/fx/graph_module.py b/torch/fx/graph_module.py
@@ -10,8 +10,9 @@ def recompile(self):
         x = 1
-        y = 2
+        y = 3
     def _copy_attr(self, name,
-                   value):
+                   value, strict):
         return value
@@ -40,4 +41,6 @@ def _assign_attr(self):
+    def helper():
+        pass
+
     def _assign_attr(self):
-        pass
+        return 1
'''


def test_a_patch_names_the_functions_its_changed_lines_are_in() -> None:
    got = patch_functions(PATCH)
    # the new function after meta_take, not meta_take (the header's); a class attribute is in no function
    assert got["torch/_meta_registrations.py"] == ["meta__standard_gamma"]
    assert got["test/test_meta.py"] == ["test_take"]  # an indented change in the header's function
    methods = patch_functions(METHODS)["torch/fx/graph_module.py"]
    assert methods == ["recompile", "_copy_attr", "helper", "_assign_attr"]


def test_denchmark_method_info_per_file_and_not_outside_methods() -> None:
    changed = {"file_0": {"file_new_name": "tensorflow\\core\\kernels\\conv_ops.cc", "hunks": {
        "hunk_0": {"Ismethod": 1, "method_info": {"method_name": "tensorflow::Conv2DOp::Compute"}},
        "hunk_1": {"Ismethod": 0, "method_info": {"method_name": "REGISTER_KERNEL_BUILDER"}},
        "hunk_2": {"Ismethod": 1, "method_info": {"method_name": "tensorflow::Conv2DOp::Compute"}}}}}
    assert denchmark_functions(changed) == {"tensorflow/core/kernels/conv_ops.cc": ["tensorflow::Conv2DOp::Compute"]}


def test_names_match_across_qualification_never_by_a_different_last_part() -> None:
    assert same_function("tensorflow::Conv2DOp::Compute", "Conv2DOp::Compute")
    assert same_function("Linear.forward", "forward")
    assert same_function("functor::Fill<CPUDevice, T>::operator()", "tensorflow::functor::Fill::operator()")
    assert not same_function("Conv3DOp::Compute", "tensorflow::Conv2DOp::Compute")
    assert not same_function("forward_pre", "forward")
    assert function_rank(["a", "B.c", "d"], ["c"]) == 2 and function_rank(["a"], ["z"]) is None


def test_figures_count_functions_only_within_found_files() -> None:
    cases = [FunctionCase("k1", "a.py", "after", 1, 1, 3), FunctionCase("k2", "b.py", "after", 4, 6, 2),
             FunctionCase("k3", "c.py", "after", None, None, None), FunctionCase("k4", "d.py", "after", 9, 1, 1)]
    got: dict[str, Any] = figures(cases)
    assert got["cases"] == 4 and got["file_found"] == 2
    assert got["sftl"] == {"acc@1": 0.5, "acc@5": 0.5, "mrr": round((1 + 1 / 6) / 2, 4), "both@5": 0.25}
    assert got["bm25"]["acc@5"] == 1.0 and got["bm25"]["both@5"] == 0.5


def _denchmark(folder: Path, number: int, title: str, body: str, opened: str,
               functions: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    obj = {"BR": {"BR_id": str(number), "BRopenT": opened, "BRcloseT": opened,
                  "BR_text": {"BRsummary": title, "BRdescription": body}, "comments": []},
           "commit": {"commit_id": "abc", "commitT": opened, "changed_files": {
               f"file_{i}": {"file_change_type": "MODIFY", "file_old_name": f, "file_new_name": f, "hunks": {
                   "hunk_0": {"Ismethod": 1, "method_info": {"method_name": name, "method_startline": 1,
                                                              "method_endline": 9}}}}
               for i, (f, name) in enumerate(functions.items())}}}
    (folder / f"{number}.json").write_text(json.dumps(obj))


def test_eval_reports_functions_within_found_files_beside_bm25(tmp_path: Path, sftl_home: Path) -> None:
    folder = tmp_path / "denchmark" / "tensorflow+tensorflow"
    _denchmark(folder, 9101, "tf.nn.conv2d fails on a rank-3 input",
               "`tf.nn.conv2d(x, w, 1, 'SAME')` raises InvalidArgumentError: input must be 4-dimensional",
               "2018-05-01T00:00:00Z", {"tensorflow/core/kernels/conv_ops.cc": "tensorflow::Conv2DOp::Compute"})
    _denchmark(folder, 9102, "Dataset.map hangs with num_parallel_calls=0",
               "`tf.data.Dataset.map(f, num_parallel_calls=0)` never returns",
               "2019-03-01T00:00:00Z", {"tensorflow/python/data/ops/dataset_ops.py": "DatasetV2.map"})
    lines = [json.loads(line) for line in label_lines(tmp_path / "denchmark")]
    assert lines[0]["truth_functions"] == {"tensorflow/core/kernels/conv_ops.cc": ["tensorflow::Conv2DOp::Compute"]}
    # the function truth leaves a row's key alone: file rankings kept in a checkpoint stay valid
    without = {k: v for k, v in lines[0].items() if k != "truth_functions"}
    assert parse_label_line(json.dumps(lines[0]), 1).key == parse_label_line(json.dumps(without), 1).key  # type: ignore[union-attr]
    root = write_tree(tmp_path / "tree")
    out = tmp_path / "run"
    err = io.StringIO()
    with redirect_stdout(io.StringIO()) as report, redirect_stderr(err):
        code = main(["eval", str(tmp_path / "denchmark"), "--source-root", str(root), "--method", "sftl,bm25",
                     "--split-date", "tensorflow=2019-01-01", "--out", str(out), "--offline", "--no-plots"])
    assert code == 0, err.getvalue()
    summary = json.loads((out / "summary.json").read_text())
    fig = summary["functions"]
    assert fig["all"]["cases"] == 2 and fig["all"]["file_found"] == 2
    assert fig["all"]["sftl"]["acc@5"] == 1.0 and fig["all"]["bm25"]["acc@5"] == 1.0
    assert fig["before"]["cases"] == 1 and fig["after"]["cases"] == 1  # earlier and later reports apart
    assert "## Table 6 — functions within a found file" in report.getvalue()
    kept = [json.loads(x) for x in (out / "checkpoint.jsonl").read_text().splitlines()]
    assert all("functions" in r for r in kept if r["method"] == "sftl")


def test_malformed_function_truth_skips_the_row_with_a_reason() -> None:
    from sftl.evaluate import SkippedRow

    base = {"url": "https://github.com/pytorch/pytorch/issues/1", "category": "other", "truth_files": ["torch/a.py"]}
    for bad in ([["f"]], {"torch/a.py": "f"}, {"torch/a.py": [1]}):
        got = parse_label_line(json.dumps({**base, "truth_functions": bad}), 3)
        assert isinstance(got, SkippedRow) and "'truth_functions' must map" in got.reason
    ok = parse_label_line(json.dumps({**base, "truth_functions": {"torch/a.py": ["f"]}}), 3)
    assert not isinstance(ok, SkippedRow) and ok.truth_functions == {"torch/a.py": ("f",)}


def test_eval_sets_apart_the_reports_the_rankers_learned_from(tmp_path: Path, sftl_home: Path) -> None:
    from sftl.localize.candidates.ranker import load_default
    from sftl.localize.functions.ranker import load_function_ranker

    files, functions = load_default(), load_function_ranker()
    assert files is not None and functions is not None, "the bundled rankers ship with sftl"
    both = sorted(set(files.provenance["trained_on"]) & set(functions.provenance["trained_on"]))
    seen = next(u for u in both if u.startswith("https://github.com/tensorflow/tensorflow/issues/"))
    folder = tmp_path / "denchmark" / "tensorflow+tensorflow"
    _denchmark(folder, int(seen.rsplit("/", 1)[1]), "tf.nn.conv2d fails on a rank-3 input",
               "`tf.nn.conv2d(x, w, 1, 'SAME')` raises InvalidArgumentError: input must be 4-dimensional",
               "2018-05-01T00:00:00Z", {"tensorflow/core/kernels/conv_ops.cc": "tensorflow::Conv2DOp::Compute"})
    _denchmark(folder, 990001, "Dataset.map hangs with num_parallel_calls=0",  # a number no benchmark has
               "`tf.data.Dataset.map(f, num_parallel_calls=0)` never returns",
               "2019-03-01T00:00:00Z", {"tensorflow/python/data/ops/dataset_ops.py": "DatasetV2.map"})
    out = tmp_path / "run"
    err = io.StringIO()
    with redirect_stdout(io.StringIO()) as report, redirect_stderr(err):
        code = main(["eval", str(tmp_path / "denchmark"), "--source-root", str(write_tree(tmp_path / "tree")),
                     "--method", "sftl,bm25", "--out", str(out), "--offline", "--no-plots"])
    assert code == 0, err.getvalue()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["learned_from"] == {"file_ranker": 1, "function_ranker": 1}
    exposure = summary["localization_by_exposure"]
    assert set(exposure) == {"learned", "unseen"}
    for table in exposure.values():  # one report each, every method on it
        assert {m: t["all/all"]["n"] for m, t in table.items()} == {"sftl": 1, "bm25": 1}
    assert summary["functions"]["learned"]["cases"] == 1 and summary["functions"]["unseen"]["cases"] == 1
    text = report.getvalue()
    assert "1 of these reports are among those sftl's file ranker learned from" in text
    assert "| the ranker never saw |" in text and "| the function ranker never saw |" in text


REPORTS = [  # (title, body, truth file, changed function): three kinds of report, each fixed in its own function
    ("tf.nn.conv2d fails on a rank-3 input {n}",
     "`tf.nn.conv2d(x, w, 1, 'SAME')` with data_format NHWC raises: input must be 4-dimensional ({n})",
     "tensorflow/python/ops/nn_ops.py", "conv2d"),
    ("tf.nn.max_pool2d ignores ksize {n}", "`tf.nn.max_pool2d(x, ksize=3, strides=1, padding='SAME')` pools 1x1 ({n})",
     "tensorflow/python/ops/nn_ops.py", "max_pool2d"),
    ("Dataset.map hangs with num_parallel_calls {n}", "`tf.data.Dataset.map(f, num_parallel_calls=0)` never returns",
     "tensorflow/python/data/ops/dataset_ops.py", "DatasetV2.map"),
]


def test_eval_keeps_function_features_and_model_fit_functions_trains_the_ranker_locate_uses(
        tmp_path: Path, sftl_home: Path, monkeypatch: Any) -> None:
    folder = tmp_path / "denchmark" / "tensorflow+tensorflow"
    for n in range(15):  # twelve reports before the split, three after
        title, body, path, function = REPORTS[n % 3]
        _denchmark(folder, 991000 + n, title.format(n=n), body.format(n=n),
                   f"{2018 if n < 12 else 2019}-0{1 + n % 9}-01T00:00:00Z", {path: function})
    root = write_tree(tmp_path / "tree")
    out = tmp_path / "run"
    err = io.StringIO()
    with redirect_stdout(io.StringIO()), redirect_stderr(err):
        code = main(["eval", str(tmp_path / "denchmark"), "--source-root", str(root), "--method", "sftl",
                     "--keep-features", "--out", str(out), "--offline", "--no-plots"])
    assert code == 0, err.getvalue()
    kept = [json.loads(x)["function_groups"] for x in (out / "checkpoint.jsonl").read_text().splitlines()]
    assert len(kept) == 15 and all(k["features"] and len(k["groups"]) == 1 for k in kept)
    path, names, rows, labels = kept[0]["groups"][0]
    assert path == "tensorflow/python/ops/nn_ops.py" and labels[names.index("conv2d")] == 1 and sum(labels) == 1
    assert all(len(r) == len(kept[0]["features"]) for r in rows)

    model_path = tmp_path / "functions.json"
    with redirect_stdout(io.StringIO()) as printed, redirect_stderr(err):
        code = main(["model", "fit", str(out), "--functions", "--split-date", "tensorflow=2019-01-01",
                     "--out", str(model_path), "--json"])
    assert code == 0, err.getvalue()
    figures = json.loads(printed.getvalue())
    assert figures["train_files"] == 12 and figures["validation_files"] == 3
    assert figures["train"]["n"] == 12 and set(figures["validation"]) >= {"sftl", "bm25"}
    provenance = json.loads(model_path.read_text())["provenance"]
    assert len(provenance["trained_on"]) == 12  # the later reports are not learned from without --refit-all

    issue_file = tmp_path / "issue.json"
    issue_file.write_text(json.dumps({
        "number": 991100, "title": "tf.nn.max_pool2d ignores ksize", "state": "open",
        "body": "`tf.nn.max_pool2d(x, ksize=3, strides=1, padding='SAME')` pools 1x1",
        "html_url": "https://github.com/tensorflow/tensorflow/issues/991100",
        "created_at": "2019-05-01T00:00:00Z", "user": {"login": "someone"}, "labels": []}))

    def functions_scores() -> dict[str, float]:
        with redirect_stdout(io.StringIO()) as located, redirect_stderr(io.StringIO()):
            assert main(["locate", str(issue_file), "--source-root", str(root), "--offline", "--json"]) == 0
        suspects = json.loads(located.getvalue())["suspects"]
        return {f["name"]: f["score"] for s in suspects for f in s["functions"]}

    bundled = functions_scores()
    monkeypatch.setenv("SFTL_FUNCTION_MODEL", str(model_path))
    trained = functions_scores()
    assert set(trained) == set(bundled) and trained != bundled  # the same functions, scored by the trained model
    monkeypatch.setenv("SFTL_FUNCTION_MODEL", str(tmp_path / "missing.json"))
    with redirect_stdout(io.StringIO()) as said, redirect_stderr(io.StringIO()) as failed:
        code = main(["locate", str(issue_file), "--source-root", str(root), "--offline"])
    # a model asked for by name is never replaced by another: one line, exit 2, and the stored result stays
    assert code == 2 and not said.getvalue() and "Traceback" not in failed.getvalue()
    assert failed.getvalue().count("\n") == 1 and "cannot read the model" in failed.getvalue()
    from sftl.config import load_settings
    from sftl.store import Store

    with Store(load_settings().db_path) as store:
        kept = store.get_localization("tensorflow/tensorflow", 991100)
    assert kept is not None and kept["outcome"] == "located"
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()) as failed:
        code = main(["eval", str(tmp_path / "denchmark"), "--source-root", str(root), "--method", "sftl",
                     "--out", str(tmp_path / "again"), "--offline", "--no-plots"])
    assert code == 2 and "cannot read the model" in failed.getvalue() and not (tmp_path / "again").exists()
