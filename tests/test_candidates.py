"""Suspects for any report: the corpus, the evidence each candidate carries, the BM25 baseline, the learned ranker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sftl.extract import extract
from sftl.localize.candidates.corpus import build_index, is_source_path, message_shingles
from sftl.localize.candidates.features import FEATURES, gather
from sftl.localize.candidates.locate import localize_any
from sftl.localize.candidates.ranker import CandidateRanker
from sftl.localize.candidates.report import read_report
from sftl.localize.candidates.tokens import words
from sftl.model import Category, Issue, Outcome
from sftl.sources import LocalTree

NN_OPS = '''
from tensorflow.python.util.tf_export import tf_export


@tf_export("nn.conv2d", v1=["nn.conv2d"])
def conv2d(input, filters, strides, padding, data_format="NHWC"):
    """Computes a 2-D convolution."""
    return gen_nn_ops.conv2d(input, filters, strides, padding, data_format=data_format)


@tf_export("nn.max_pool2d")
def max_pool2d(input, ksize, strides, padding):
    return gen_nn_ops.max_pool(input, ksize, strides, padding)
'''
DATASET_OPS = '''
from tensorflow.python.util.tf_export import tf_export


@tf_export("data.Dataset")
class DatasetV2(object):
    def map(self, map_func, num_parallel_calls=None):
        if num_parallel_calls is not None and num_parallel_calls < 1:
            raise ValueError("num_parallel_calls must be a positive integer or AUTOTUNE, got %s" % num_parallel_calls)
        return MapDataset(self, map_func)
'''
CONV_OPS = '''
#include "tensorflow/core/framework/op_kernel.h"
namespace tensorflow {
class Conv2DOp : public OpKernel {
  void Compute(OpKernelContext* context) override {
    OP_REQUIRES(context, input.dims() == 4,
                errors::InvalidArgument("input must be 4-dimensional", input.shape().DebugString()));
  }
};
REGISTER_KERNEL_BUILDER(Name("Conv2D").Device(DEVICE_CPU), Conv2DOp);
}  // namespace tensorflow
'''
SESSION = '''
#include "tensorflow/core/common_runtime/direct_session.h"
namespace tensorflow {
Status DirectSession::Run(const RunOptions& run_options) {
  // runs the graph: executors, fetches and feeds of a session
  return errors::Internal("fetch and feed names are not unique in this session run");
}
}  // namespace tensorflow
'''


def write_tree(root: Path) -> Path:
    files = {
        "tensorflow/python/ops/nn_ops.py": NN_OPS,
        "tensorflow/python/data/ops/dataset_ops.py": DATASET_OPS,
        "tensorflow/core/kernels/conv_ops.cc": CONV_OPS,
        "tensorflow/core/common_runtime/direct_session.cc": SESSION,
        # never suspects: a test, a kernel test, test data, docs, a build file
        "tensorflow/python/ops/nn_ops_test.py": NN_OPS + "\nclass Conv2DTest: pass\n",
        "tensorflow/python/kernel_tests/conv_ops_test_base.py": NN_OPS,
        "tensorflow/core/kernels/testdata/conv.wav": "conv2d conv2d conv2d",
        "tensorflow/g3doc/conv2d.md": "conv2d data_format NHWC conv2d",
        "tensorflow/core/kernels/BUILD": "conv_ops conv2d",
    }
    return write_files(root, files)


def write_files(root: Path, files: dict[str, str]) -> Path:
    """A tree under `root` holding these files (repository-relative path -> text)."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture()
def tree(tmp_path: Path) -> LocalTree:
    return LocalTree(write_tree(tmp_path / "tf"), "tensorflow", "2.14.1")


def issue(title: str, body: str, number: int = 501) -> Issue:
    return Issue(repo="tensorflow/tensorflow", number=number, title=title, body=body,
                 created_at="2019-03-01T00:00:00Z", html_url=f"https://github.com/tensorflow/tensorflow/issues/{number}")


CONV_REPORT = issue(
    "tf.nn.conv2d raises for a 3-D input instead of a clear message",
    "Calling `tf.nn.conv2d` on a rank-3 tensor fails:\n\n```python\nimport tensorflow as tf\n"
    "x = tf.zeros([3, 3, 3])\ntf.nn.conv2d(x, tf.zeros([1, 1, 3, 3]), 1, 'SAME')\n```\n\n```\n"
    "Traceback (most recent call last):\n  File \"repro.py\", line 3, in <module>\n"
    "  File \"/usr/lib/python3.7/site-packages/tensorflow/python/ops/nn_ops.py\", line 9, in conv2d\n"
    "    return gen_nn_ops.conv2d(input, filters, strides, padding, data_format=data_format)\n"
    "tensorflow.python.framework.errors_impl.InvalidArgumentError: input must be 4-dimensional [3,3,3]\n```\n",
)


def test_only_source_files_are_documents() -> None:
    assert is_source_path("tensorflow/core/kernels/conv_ops.cc", "tensorflow")
    assert is_source_path("torch/_dynamo/variables/torch.py", "pytorch")
    for path in ("tensorflow/python/ops/nn_ops_test.py", "tensorflow/python/kernel_tests/conv_ops_test_base.py",
                 "tensorflow/core/kernels/testdata/conv.wav", "tensorflow/g3doc/conv2d.md",
                 "tensorflow/core/kernels/BUILD", "test/test_nn.py", "torch/testing/_internal/common_utils.py",
                 "docs/source/conf.py", "tensorflow/core/kernels/conv_ops.cc"):
        assert is_source_path(path, "tensorflow" if path.startswith("tensorflow") else "pytorch") is (
            path == "tensorflow/core/kernels/conv_ops.cc"), path


def test_words_split_identifiers_and_drop_keywords() -> None:
    got = words("def depthwise_conv2d_native(self): return tf.keras.layers.Conv2DTranspose")
    assert {"depthwise_conv2d_native", "depthwise", "native", "conv2dtranspose", "transpose", "keras"} <= set(got)
    assert "def" not in got and "self" not in got and "return" not in got


def test_a_report_is_read_for_its_frames_names_and_messages() -> None:
    report = read_report(CONV_REPORT, extract(CONV_REPORT), "tensorflow")
    assert report.frames[0] == "tensorflow/python/ops/nn_ops.py"
    assert "nn.conv2d" in report.names
    assert message_shingles("input must be 4-dimensional") <= report.message_shingles


def test_candidates_carry_the_evidence_that_brought_them(tree: LocalTree, tmp_path: Path) -> None:
    index = build_index(tree, tmp_path / "cache")
    assert sorted(index.paths) == ["tensorflow/core/common_runtime/direct_session.cc",
                                   "tensorflow/core/kernels/conv_ops.cc",
                                   "tensorflow/python/data/ops/dataset_ops.py", "tensorflow/python/ops/nn_ops.py"]
    report = read_report(CONV_REPORT, extract(CONV_REPORT), "tensorflow")
    by_path = {c.path: c for c in gather(index, report)}
    nn = by_path["tensorflow/python/ops/nn_ops.py"].features
    assert nn["tb_frame"] == 1.0 and nn["tb_innermost"] == 1.0 and nn["exports_name"] >= 1
    conv = by_path["tensorflow/core/kernels/conv_ops.cc"].features
    assert conv["message_shingles"] >= 1 and not conv.get("tb_frame")
    assert set(nn) <= set(FEATURES)
    # the index is kept on disk: a process that has not built it reads it back, and scores the same
    from sftl.localize.candidates import corpus

    corpus.forget_memo()
    again = build_index(tree, tmp_path / "cache")
    assert again is not index and again.paths == index.paths
    assert list(again.scores(report.code_words)) == list(index.scores(report.code_words))
    assert again.holds(again.paths.index("tensorflow/python/ops/nn_ops.py"), "conv2d")


def test_scores_are_bm25s_scores(tree: LocalTree, tmp_path: Path) -> None:
    """A query is scored from bm25s's own index (its weights summed per document), as bm25s scores it."""
    import bm25s

    index = build_index(tree, tmp_path / "cache")
    retriever = bm25s.BM25()
    retriever.scores = {**{k: index.weights[k] for k in ("data", "indices", "indptr")}, "num_docs": len(index.paths)}
    retriever.vocab_dict = index.vocabulary
    retriever.nonoccurrence_array = None  # the default BM25 variant adds nothing for absent words
    query = ["conv2d", "session", "fetch", "dataset", "nhwc"]
    ids = [index.vocabulary[w] for w in query if w in index.vocabulary]
    assert list(index.scores(query)) == pytest.approx(list(retriever.get_scores_from_ids(ids)), abs=1e-6)


def test_every_report_gets_suspects_with_reasons(tree: LocalTree, tmp_path: Path) -> None:
    other = issue("Session.run fails when the same fetch is passed twice",
                  "Fetching the same node twice in one session run aborts: fetch and feed names are not unique.", 502)
    loc = localize_any(other, extract(other), Category.OTHER, tree, top=3, cache_dir=tmp_path / "c",
                       ranker=None)
    assert loc.outcome == Outcome.LOCATED
    assert loc.suspects[0].path == "tensorflow/core/common_runtime/direct_session.cc"
    assert "message the report quotes" in loc.suspects[0].reason or "BM25" in loc.suspects[0].reason


def test_a_report_with_no_text_abstains_with_the_reason(tree: LocalTree, tmp_path: Path) -> None:
    empty = issue("", "", 503)
    loc = localize_any(empty, extract(empty), Category.OTHER, tree, cache_dir=tmp_path / "c")
    assert loc.outcome == Outcome.ABSTAINED and "no text" in loc.reason


def test_bm25_baseline_ranks_any_report(tree: LocalTree, tmp_path: Path) -> None:
    from sftl.localize.bm25 import localize_bm25

    ds = issue("Dataset.map with num_parallel_calls=0", "`tf.data.Dataset.map(f, num_parallel_calls=0)` hangs.", 504)
    loc = localize_bm25(ds, extract(ds), Category.OTHER, tree, 5, cache_dir=tmp_path / "c")
    assert loc.outcome == Outcome.LOCATED
    assert loc.suspects[0].path == "tensorflow/python/data/ops/dataset_ops.py"
    assert "shared words" in loc.suspects[0].reason


def test_the_ranker_learns_a_signal_and_round_trips(tmp_path: Path) -> None:
    """Rows whose truth always sits in the innermost traceback frame, and BM25 that points elsewhere: the
    fitted model puts the frame first; saved and loaded, it scores the same."""
    import random

    rng = random.Random(0)
    at_tb, at_bm25 = FEATURES.index("tb_innermost"), FEATURES.index("bm25_all")
    rows, labels, groups = [], [], []
    for _ in range(60):
        group = []
        for j in range(12):
            v = [0.0] * len(FEATURES)
            v[at_bm25] = rng.random()
            v[at_tb] = float(j == 0)
            group.append((v, int(j == 0)))
        rng.shuffle(group)
        rows += [v for v, _ in group]
        labels += [y for _, y in group]
        groups.append(len(group))
    model = CandidateRanker(n_estimators=40, min_child_samples=2).fit(rows, labels, groups)
    frame = [0.0] * len(FEATURES)
    frame[at_tb] = 1.0
    lexical = [0.0] * len(FEATURES)
    lexical[at_bm25] = 1.0
    assert model.predict([frame])[0] > model.predict([lexical])[0]
    # the saved trees, walked with numpy, score exactly as LightGBM does
    assert model.predict(rows[:50]) == pytest.approx(list(model.booster.predict(rows[:50])), abs=1e-9)
    model.save(tmp_path / "m.json")
    again = CandidateRanker.load(tmp_path / "m.json")
    assert again.predict([frame, lexical]) == pytest.approx(model.predict([frame, lexical]))
    assert max(again.importances(), key=again.importances().get) == "tb_innermost"  # type: ignore[arg-type]


def test_a_model_of_fewer_features_reads_its_own_columns(tmp_path: Path) -> None:
    """A model fitted before features were added scores the same rows the same way: it reads its own columns."""
    import random

    rng = random.Random(2)
    few = ("bm25_all", "tb_innermost")
    rows, labels, groups = [], [], []
    for _ in range(40):
        for j in range(6):
            v = [rng.random() for _ in FEATURES]
            v[FEATURES.index("tb_innermost")] = float(j == 0)
            rows.append(v)
            labels.append(int(j == 0))
        groups.append(6)
    model = CandidateRanker(n_estimators=20, min_child_samples=2, features=few).fit(rows, labels, groups)
    model.save(tmp_path / "few.json")
    again = CandidateRanker.load(tmp_path / "few.json")
    assert again.features == few
    shuffled = [list(r) for r in rows[:12]]
    for r in shuffled:  # columns the model does not read change nothing
        r[FEATURES.index("size")] = 99.0
    assert again.predict(shuffled) == pytest.approx(model.predict(rows[:12]))
    assert again.predict(rows[:1])[0] > again.predict(rows[1:2])[0]


def test_a_model_of_other_features_is_refused(tmp_path: Path) -> None:
    from sftl.errors import InputError

    bad = tmp_path / "old.json"
    bad.write_text(json.dumps({"format": "sftl-ranker-v1", "features": ["x"], "model": ""}))
    with pytest.raises(InputError, match="retrain"):
        CandidateRanker.load(bad)


def test_a_category_localizers_tests_and_data_never_reach_the_suspects() -> None:
    from sftl.localize.dispatch import only_code
    from sftl.model import Localization, Suspect

    loc = Localization("sftl", tuple(Suspect(p, 1.0, None, "r") for p in (
        "tensorflow/core/kernels/segment_reduction_ops_gpu.cu.cc", "tensorflow/core/kernels/spectrogram_test_data/a.wav",
        "tensorflow/python/kernel_tests/segment_reduction_ops_test.py", "aten/src/ATen/native/native_functions.yaml",
        "tensorflow/core/kernels/BUILD")), Outcome.LOCATED, "ops")
    assert [s.path for s in only_code(loc).suspects] == [
        "tensorflow/core/kernels/segment_reduction_ops_gpu.cu.cc", "aten/src/ATen/native/native_functions.yaml"]
    only_data = Localization("sftl", (Suspect("tensorflow/core/kernels/testdata/x.wav", 1.0, None, "r"),),
                             Outcome.LOCATED, "ops")
    assert only_code(only_data).outcome == Outcome.SKIPPED


def test_a_release_over_another_releases_tree_keeps_its_own_python_files(tmp_path: Path) -> None:
    """The report's release (its wheel's Python files) over a later tree: the tree's C++ is read, its Python
    files are not (one the release lacks did not exist then), and a C++ folder the release has files in says so."""
    from sftl.sources import LayeredSource, PythonFilesOf

    wheel = tmp_path / "wheel"
    for rel, text in {"tensorflow/python/ops/nn_ops.py": "def conv2d(): pass\n",
                      "tensorflow/core/kernels/conv_ops.h": "// the release's header\n"}.items():
        (wheel / rel).parent.mkdir(parents=True, exist_ok=True)
        (wheel / rel).write_text(text)
    tree = write_tree(tmp_path / "later")
    (tree / "tensorflow/python/ops/only_later.py").write_text("def added_later(): pass\n")
    (tree / "tensorflow/compiler/mlir").mkdir(parents=True)
    (tree / "tensorflow/compiler/mlir/only_later.cc").write_text("// conv2d rank 4-dimensional, added later\n")
    source = LayeredSource([PythonFilesOf(LocalTree(wheel, "tensorflow", "1.13.1")),
                            LocalTree(tree, "tensorflow", "2.14.1")])
    index = build_index(source, tmp_path / "cache")
    assert "tensorflow/python/ops/only_later.py" not in index.paths
    assert "tensorflow/python/data/ops/dataset_ops.py" not in index.paths  # the tree's Python, not the release's
    assert {"tensorflow/python/ops/nn_ops.py", "tensorflow/core/kernels/conv_ops.cc",
            "tensorflow/compiler/mlir/only_later.cc"} <= set(index.paths)
    report = read_report(CONV_REPORT, extract(CONV_REPORT), "tensorflow")
    found = {c.path: c.features for c in gather(index, report)}
    assert found["tensorflow/python/ops/nn_ops.py"]["release_dir"] == 1.0
    assert found["tensorflow/compiler/mlir/only_later.cc"]["release_dir"] == 0.0


def test_a_file_the_stand_in_tree_moved_is_named_where_the_release_compiled_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A TensorFlow 1.x report read over the 2.14 tree: the kernel the tree holds under linalg/ is named at the path
    the release's libraries give, when they name exactly one file of that name under the same top folders."""
    from types import SimpleNamespace

    from sftl.localize.candidates.locate import at_release_paths
    from sftl.model import Suspect
    from sftl.sources import inventory

    named = frozenset({"tensorflow/core/kernels/matrix_inverse_op.cc", "tensorflow/core/kernels/pad_op.cc",
                       "tensorflow/compiler/tf2xla/kernels/pad_op.cc"})
    monkeypatch.setattr(inventory, "release_named", lambda source: (named, "1.3.0"))
    source = SimpleNamespace(version="1.3.0", providers=[SimpleNamespace(version="1.3.0"),
                                                           SimpleNamespace(version="2.14.1")])
    paths = ["tensorflow/core/kernels/linalg/matrix_inverse_op.cc",  # moved: renamed
             "tensorflow/compiler/tf2xla/kernels/matrix_inverse_op.cc",  # another top folder: kept
             "tensorflow/core/kernels/image/pad_op.cc",  # two files of that name are named: ambiguous, kept
             "tensorflow/python/ops/linalg_ops.py"]  # Python comes from the release's own wheel: kept
    tree = frozenset({*paths, "tensorflow/core/kernels/linalg/matrix_inverse_op.h"})
    moved, release = inventory.release_paths(paths, source, tree)
    assert moved == {"tensorflow/core/kernels/linalg/matrix_inverse_op.cc": "tensorflow/core/kernels/matrix_inverse_op.cc"}
    suspects = [Suspect(p, 1.0, None, "r") for p in paths]
    renamed = at_release_paths(suspects, moved, release)
    assert [s.path for s in renamed] == ["tensorflow/core/kernels/matrix_inverse_op.cc", *paths[1:]]
    assert "compiled it as tensorflow/core/kernels/matrix_inverse_op.cc" in renamed[0].reason
    # a source read at its own release alone (no stand-in tree) is never renamed
    assert inventory.release_paths(paths, SimpleNamespace(version="1.3.0", providers=[]), tree) == ({}, "")
    # a file of that name the tree itself still holds at the release's path is another file, not a moved one
    assert inventory.release_paths(paths[:1], source, tree | {"tensorflow/core/kernels/matrix_inverse_op.cc"})[0] == {}
