"""A suspect file's functions ranked from a report's evidence: features, reasons, the learned ranker's artefact."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from sftl.errors import InputError
from sftl.localize.candidates.report import read_report
from sftl.localize.functions import rank_functions
from sftl.localize.functions.features import FEATURES, FunctionEvidence, function_evidence, gather_functions
from sftl.localize.functions.ranker import FunctionRanker, load_function_ranker
from sftl.model import Environment, Extraction, Issue

FILE = '''\
def interpolate(input, size=None):
    return _resize(input, size)


def _resize(x, size):
    if size is None:
        raise ValueError("either size or scale_factor should be defined")
    return x


def pad(input, value):
    return input


def unrelated_helper(a, b):
    return a + b
'''


def evidence(body: str, title: str = "interpolate fails", framework: str = "pytorch") -> FunctionEvidence:
    issue = Issue(repo=f"{framework}/{framework}", number=1, title=title, body=body)
    extraction = Extraction(None, None, Environment(framework=framework))
    return function_evidence(read_report(issue, extraction, framework), issue, extraction)


TRACE = '''```
Traceback (most recent call last):
  File "repro.py", line 3, in <module>
    F.interpolate(x)
  File "/usr/lib/python3.11/site-packages/torch/nn/functional.py", line 2, in interpolate
    return _resize(input, size)
  File "/usr/lib/python3.11/site-packages/torch/nn/functional.py", line 7, in _resize
    raise ValueError("either size or scale_factor should be defined")
ValueError: either size or scale_factor should be defined
```'''


def test_frames_names_and_messages_become_features_with_reasons() -> None:
    rows = {r.span.name: r for r in gather_functions(evidence(f"calling torch.nn.functional.interpolate\n{TRACE}"),
                                                     "torch/nn/functional.py", FILE)}
    resize, interp, pad = rows["_resize"], rows["interpolate"], rows["pad"]
    assert resize.features["frame_line"] == 1.0 and resize.features["frame_depth"] == 1.0  # the raising frame
    assert "frame 1 of the traceback" in resize.evidence["frame_line"]
    assert resize.features["message_overlap"] > 0 and "raises 'either size" in resize.evidence["message_overlap"]
    assert interp.features["frame_depth"] == 0.5 and interp.features["name_dotted"] == 1.0
    assert "defines `interpolate`, which the report calls" == interp.evidence["name_dotted"]
    assert resize.features["callee_of_evidence"] == 1.0  # what the named function delegates to
    assert not pad.features.get("frame_line") and not pad.features.get("name_dotted")
    assert len(resize.vector()) == len(FEATURES)


def test_without_a_model_functions_rank_by_bm25_at_most_ten_with_their_lines() -> None:
    many = "".join(f"def f{i}(x):\n    return x\n\n\n" for i in range(15)) + FILE
    got = rank_functions(evidence("interpolate with size None raises either size or scale_factor"),
                         "torch/nn/functional.py", many, model=None)
    assert len(got) == 10
    assert got[0].name in ("_resize", "interpolate")
    assert [f.score for f in got] == sorted((f.score for f in got), reverse=True)
    first = next(f for f in got if f.name == "_resize")
    assert (first.start, first.end) == (65, 68) and first.reason
    assert rank_functions(evidence("x"), "torch/broken.py", "def f(:\n") == ()


def synthetic_groups(seed: int) -> tuple[list[list[float]], list[int], list[int]]:
    """Groups where the function with the traceback's line is the changed one, among lexical noise."""
    rng = random.Random(seed)
    rows, labels, groups = [], [], []
    at, bm = FEATURES.index("frame_line"), FEATURES.index("bm25_all")
    for _ in range(60):
        n = rng.randint(5, 12)
        truth = rng.randrange(n)
        for i in range(n):
            row = [0.0] * len(FEATURES)
            row[bm] = rng.random()
            row[at] = float(i == truth and rng.random() < 0.8)
            rows.append(row)
            labels.append(int(i == truth))
        groups.append(n)
    return rows, labels, groups


def test_the_ranker_learns_from_groups_and_its_artefact_scores_the_same(tmp_path: Path) -> None:
    rows, labels, groups = synthetic_groups(0)
    model = FunctionRanker(n_estimators=30, min_child_samples=5).fit(rows, labels, groups)
    test_rows, test_labels, test_groups = synthetic_groups(1)
    scores = model.predict(test_rows)
    hits, start = 0, 0
    for n in test_groups:
        best = max(range(start, start + n), key=lambda i: scores[i])
        hits += test_labels[best]
        start += n
    assert hits / len(test_groups) > 0.7  # the frame's line, not the noise, decides
    path = tmp_path / "fr.json"
    model.provenance = {"trained_on": ["https://github.com/pytorch/pytorch/issues/1"]}
    model.save(path)
    again = FunctionRanker.load(path)
    assert again.predict(test_rows) == pytest.approx(scores)
    assert again.provenance == model.provenance and again.importances()["frame_line"] > 0
    assert load_function_ranker(path) is not None


def test_a_bad_model_file_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    with pytest.raises(InputError, match="not an sftl function ranker"):
        FunctionRanker.load(bad)
    with pytest.raises(InputError, match="cannot read the function ranker"):
        FunctionRanker.load(tmp_path / "missing.json")
    unknown = tmp_path / "unknown.json"
    unknown.write_text('{"format": "sftl-function-ranker-v1", "features": ["no_such_feature"]}')
    with pytest.raises(InputError, match="retrain it"):
        FunctionRanker.load(unknown)
    with pytest.raises(InputError, match="cannot read the model"):  # a model named is never quietly none at all
        load_function_ranker(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="not fitted"):
        FunctionRanker().predict([[0.0] * len(FEATURES)])
    rows, labels, groups = synthetic_groups(1)
    fitted = FunctionRanker(n_estimators=5).fit(rows, labels, groups)
    with pytest.raises(InputError, match="cannot write the model to"):  # a folder that is not there
        fitted.save(tmp_path / "no-such-folder" / "model.json")


def test_markdown_links_a_function_to_its_lines_only_at_a_known_release() -> None:
    from sftl.cli.locate import function_link

    f = {"name": "Linear.forward", "start": 10, "end": 20, "score": 1.0, "reason": "r"}
    known = {"environment": {"framework": "pytorch"}, "release": "2.6.0"}
    assert function_link(known, "torch/nn/modules/linear.py", f) == (
        "[`Linear.forward` (lines 10-20)](https://github.com/pytorch/pytorch/blob/v2.6.0/"
        "torch/nn/modules/linear.py#L10-L20)")
    unknown = {"environment": {"framework": "pytorch"}, "release": None}
    assert function_link(unknown, "torch/nn/modules/linear.py", f) == "`Linear.forward` (lines 10-20)"


class Provider:
    """A source provider of a few files; reading `torch/bad.py` fails as an unreadable archive member would."""

    framework = "pytorch"
    version: str | None = "2.6.0"
    description = "test files"

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.read: list[str] = []

    def list_files(self) -> list[str]:
        return list(self.files)

    def read_text(self, path: str) -> str | None:
        from sftl.errors import SourceError

        self.read.append(path)
        if path == "torch/bad.py":
            raise SourceError("cannot read torch/bad.py")
        return self.files.get(path)


def test_only_the_first_suspects_files_are_read_and_a_bad_one_names_no_function(tmp_path: Path) -> None:
    from sftl.localize.functions import attach_functions
    from sftl.model import Suspect

    paths = ["torch/nn/functional.py", "torch/bad.py", "torch/broken.py", "torch/missing.py", "README.md",
             "torch/sixth.py"]
    source = Provider({"torch/nn/functional.py": FILE, "torch/broken.py": "def f(:\n", "README.md": "def f(): pass\n",
                       "torch/sixth.py": FILE})
    suspects = [Suspect(p, 1.0 - i / 10, None, "r") for i, p in enumerate(paths)]
    got = attach_functions(suspects, evidence("interpolate raises"), source, cache_dir=tmp_path)
    assert source.read == paths[:5]  # the sixth is never opened
    assert [len(s.functions) for s in got] == [4, 0, 0, 0, 0, 0]
    assert [s.path for s in got] == paths and got[0].functions[0].name in ("interpolate", "_resize")


CHAIN = '''\
@tf_export("where", v1=[])
def where_v2(condition, x=None, y=None, name=None):
    return _select(condition, x, y)


def _select(condition, x, y):
    return _broadcast_select(condition, x, y)


def _broadcast_select(condition, x, y):
    return _shape_check(condition)


def _shape_check(condition):
    return condition


def _never_called(a, b):
    return a
'''


def test_a_decorator_export_and_the_calls_from_it_become_features() -> None:
    body = "```python\nimport tensorflow as tf\nout = tf.where(cond, fill_value=0, broadcast_shapes=True)\n```"
    rows = {r.span.name: r for r in gather_functions(evidence(body, title="tf.where is wrong", framework="tensorflow"),
                                                     "tensorflow/python/ops/array_ops.py", CHAIN)}
    where = rows["where_v2"]
    assert where.features["export_named"] == 1.0  # named `where_v2`, exported as `where`
    assert where.evidence["export_named"] == "exported or registered as `where`, which the report names"
    assert where.features["reach_distance"] == 1.0  # the function the report points at
    # the calls from it, followed: one call, two, three; an uncalled function is not reached
    assert rows["_select"].features["reach_distance"] == 0.5
    assert rows["_broadcast_select"].features["reach_distance"] == pytest.approx(1 / 3)
    assert rows["_broadcast_select"].evidence["reach_distance"] == "2 calls from `where_v2`"
    assert rows["_shape_check"].features["reach_distance"] == 0.25
    assert "reach_distance" not in rows["_never_called"].features
    # the neighbour's lexical score: a function called by one the report's words match
    assert all(r.features.get("bm25_neighbour", 0.0) >= 0 for r in rows.values())


def test_without_a_decorator_nothing_is_exported_and_without_evidence_nothing_is_reached() -> None:
    undecorated = CHAIN.replace('@tf_export("where", v1=[])\n', "")
    rows = gather_functions(evidence("tf.where of some words", framework="tensorflow"), "m.py", undecorated)
    assert not any(r.features.get("export_named") or r.features.get("reach_distance") for r in rows)


def test_a_files_reading_is_kept_on_disk_and_read_back_the_same(tmp_path: Path) -> None:
    from sftl.localize.functions import features

    text = CHAIN + FILE
    first = features.file_functions("pkg/mod.py", text, tmp_path)
    kept = list((tmp_path / "functions").rglob("*.pickle"))
    assert len(kept) == 1
    features.forget_readings()  # a new process: nothing in memory
    again = features.file_functions("pkg/mod.py", text, tmp_path)
    assert again is not first and again == first  # spans with their bodies, postings, calls, decorators
    assert again.spans[0].text.startswith("@tf_export") and again.decorators[0] >= {"where"}
    kept[0].write_bytes(b"not a pickle")  # a damaged cache entry is read again from the text
    features.forget_readings()
    assert features.file_functions("pkg/mod.py", text, tmp_path) == first
    # a quoted line found through the kept digests of the file's lines
    quoted = evidence("```\n    return _broadcast_select(condition, x, y)\n```")
    rows = {r.span.name: r for r in gather_functions(quoted, "pkg/mod.py", text, tmp_path)}
    assert rows["_select"].features["quotes_code"] > 0 and "quotes_code" not in rows["where_v2"].features


def test_the_reason_names_the_export_and_the_calls_that_reach_a_function() -> None:
    body = "```python\nimport tensorflow as tf\nout = tf.where(cond)\n```"
    got = {f.name: f.reason for f in rank_functions(evidence(body, title="tf.where is wrong", framework="tensorflow"),
                                                    "tensorflow/python/ops/array_ops.py", CHAIN, model=None)}
    assert "exported or registered as `where`, which the report names" in got["where_v2"]
    assert "called by `where_v2`" in got["_select"]
    assert "2 calls from `where_v2`" in got["_broadcast_select"]
