"""The MME localizer on fixture trees: error-line-only reports, API mirrors, receiver calls, the TF 2.1 wheel layout."""

from __future__ import annotations

from pathlib import Path

from sftl.extract import extract_text
from sftl.localize.mme import localize_sftl
from sftl.model import Issue, Localization, Outcome
from sftl.sources import LocalTree

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "mme"


def _locate(case: str, framework: str, version: str, body: str) -> Localization:
    title = body.strip().splitlines()[-1]
    issue = Issue(f"{framework}/{framework}", 1, title, body, html_url="https://github.com/o/r/issues/1")
    extraction = extract_text(issue.title, issue.body, issue.repo)
    source = LocalTree(FIXTURES / case, framework, version)
    return localize_sftl(issue, extraction, source)


def test_error_line_only_api_mirrored_by_a_subclass_is_a_low_confidence_suspect() -> None:
    loc = _locate("mirror_subclass", "pytorch", "1.13.1", "I get:\n\nAttributeError: 'Base' object has no attribute 'xpu'\n")
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert loc.suspects[0].path == "torch/nn/base.py"
    assert loc.suspects[0].score < 0.35  # weaker than a traceback-backed answer
    assert "Remote" in loc.suspects[0].reason and "low confidence" in loc.suspects[0].reason


def test_error_line_only_misspelling_still_abstains() -> None:
    loc = _locate("mirror_subclass", "pytorch", "1.13.1", "I get:\n\nAttributeError: 'Base' object has no attribute 'xup'\n")
    assert loc.outcome == Outcome.ABSTAINED
    assert "user code" in loc.reason


def test_error_line_only_name_framework_calls_on_like_named_receivers() -> None:
    loc = _locate(
        "receiver_calls", "tensorflow", "2.6.0", "Running:\n\nAttributeError: 'DatasetV2' object has no attribute 'prefetch'\n"
    )
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert loc.suspects[0].path == "tensorflow/python/data/ops/dataset_ops.py"
    assert "dataset" in loc.suspects[0].reason and "low confidence" in loc.suspects[0].reason


def test_error_line_only_unknown_api_abstains_as_removed_or_misspelled() -> None:
    loc = _locate(
        "receiver_calls", "tensorflow", "2.6.0", "Running:\n\nAttributeError: 'DatasetV2' object has no attribute 'unbatch'\n"
    )
    assert loc.outcome == Outcome.ABSTAINED
    assert "removed or misspelled" in loc.reason


def test_tf_core_wheel_layout_traceback_maps_to_repository_paths() -> None:
    site = "/usr/local/lib/python3.7/site-packages/tensorflow_core/python/ops/variables.py"
    body = (
        "```\nTraceback (most recent call last):\n"
        '  File "repro.py", line 4, in <module>\n    v.value()\n'
        f'  File "{site}", line 8, in value\n    return self._graph_element()\n'
        f'  File "{site}", line 11, in _graph_element\n    return self._as_graph_element()\n'
        "AttributeError: 'Variable' object has no attribute '_as_graph_element'\n```\n"
    )
    loc = _locate("tf_core_layout", "tensorflow", "2.1.0", body)
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert loc.suspects[0].path == "tensorflow/python/ops/variables.py"
    assert loc.suspects[0].score >= 0.5


def test_error_line_only_owner_with_a_namesake_prefers_the_exported_class() -> None:
    loc = _locate("ambiguous_owner", "pytorch", "1.13.1", "I get:\n\nAttributeError: 'Base' object has no attribute 'xpu'\n")
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert loc.suspects[0].path == "torch/nn/base.py"
    assert "exported as torch.nn.Base" in loc.suspects[0].reason
    assert [s.path for s in loc.suspects].index("torch/jit/annotations.py") > 0


def test_py2_era_source_still_parses_and_locates() -> None:
    site = "/usr/lib/python2.7/site-packages/tensorflow/python/training/queue_runner.py"
    body = (
        "```\nTraceback (most recent call last):\n"
        '  File "repro.py", line 3, in <module>\n    qr = QueueRunner(q, [op])\n'
        f'  File "{site}", line 10, in __init__\n    self._init_from_args(queue, enqueue_ops)\n'
        "AttributeError: 'QueueRunner' object has no attribute '_init_from_args'\n```\n"
    )
    loc = _locate("py2_era", "tensorflow", "1.4.0", body)
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert loc.suspects[0].path == "tensorflow/python/training/queue_runner.py"
    # read from the class itself, not only from the frame's line
    assert "QueueRunner's hierarchy" in loc.suspects[0].reason


def test_error_line_only_name_a_subclass_really_implements_is_a_user_error() -> None:
    loc = _locate(
        "subclass_extension", "tensorflow", "2.1.0", "In tf.function:\n\nAttributeError: 'Tensor' object has no attribute 'numpy'\n"
    )
    assert loc.outcome == Outcome.ABSTAINED
    assert "_EagerTensorBase" in loc.reason and "user error" in loc.reason


def test_error_line_only_public_name_of_a_private_field_is_a_lost_accessor() -> None:
    err = "AttributeError: 'TensorSpec' object has no attribute 'shape'. Did you mean: '_shape'?"
    loc = _locate("private_backing", "pytorch", "2.13.0", f"It fails:\n\n{err}\n")
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert loc.suspects[0].path == "torch/nn/spec.py"
    assert loc.suspects[0].score < 0.35 and "accessor" in loc.suspects[0].reason


def test_error_line_only_near_miss_suggestion_is_still_a_misspelling() -> None:
    err = "AttributeError: 'TensorSpec' object has no attribute 'dtpye'. Did you mean: 'dtype'?"
    loc = _locate("private_backing", "pytorch", "2.13.0", f"It fails:\n\n{err}\n")
    assert loc.outcome == Outcome.ABSTAINED
    assert "misspelling" in loc.reason
