"""Keyword screening: the published TF-IDF formula, template handling, rules and hard negatives on real-format reports."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from sftl.errors import InputError
from sftl.extract import extract
from sftl.github import issue_from_json
from sftl.model import Issue
from sftl.screen import (
    KEYWORDS,
    SECTION_WEIGHTS,
    KeywordScreener,
    default_screener,
    prepare,
    read_sections,
    screen,
    screen_corpus,
    similar,
)

REPORTS = Path(__file__).resolve().parent.parent / "fixtures" / "reports"
FILES = sorted(REPORTS.glob("*.json"))


def load(path: Path) -> Issue:
    return issue_from_json(json.loads(path.read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def corpus() -> list[Issue]:
    return [load(p) for p in FILES]


@pytest.fixture(scope="module")
def fitted(corpus: list[Issue]) -> KeywordScreener:
    return default_screener(corpus)


def test_tf_idf_formula_by_hand() -> None:
    kw = {"mme": {"attribute": 2.0, "no module": 1.0}, "gcrde": {"cpu": 1.0}}
    docs = [
        prepare(("a", "attribute attribute cpu")),
        prepare(("b", "no module named x")),
        prepare(("c", "plain words only here")),
        prepare(("d", "more plain words")),
    ]
    only_title = {"title": 1.0, "description": 1.0, "output": 0.0, "code": 0.0, "template": 0.0}
    s = KeywordScreener(keywords=kw, section_weights=only_title).fit(docs)
    scores = s.keyword_scores(docs)
    idf = {t: max(0.0, math.log(4 / (1 + df))) for t, df in (("attribute", 1), ("no module", 1), ("cpu", 1))}
    # doc 0: tokens a + attribute attribute cpu = 4; doc 1: b + no module named x = 5
    assert scores["mme"][0] == pytest.approx(2.0 * (2 / 4) * idf["attribute"])
    assert scores["gcrde"][0] == pytest.approx(1.0 * (1 / 4) * idf["cpu"])
    assert scores["mme"][1] == pytest.approx(1.0 * (1 / 5) * idf["no module"])
    assert scores["mme"][2] == 0.0
    assert s.n_docs_ == 4


def test_counts_equal_scikit_learn_countvectorizer(corpus: list[Issue]) -> None:
    docs = [prepare(i) for i in corpus]
    s = KeywordScreener(section_weights={"description": 1.0})
    counts, total = s._counts(docs)
    expected = s._vectorizer().transform([d.sections.description for d in docs])
    assert (counts != expected).nnz == 0
    assert total.sum() > 0


def test_fit_needs_a_corpus_and_scoring_needs_a_fit() -> None:
    with pytest.raises(InputError):
        KeywordScreener().fit([])
    with pytest.raises(InputError, match="not fitted"):
        KeywordScreener().predict(["text"])


def test_params_are_stored_untouched() -> None:
    s = KeywordScreener(thresholds={"mme": 0.5})
    assert s.thresholds == {"mme": 0.5} and s.keywords is None
    assert set(KEYWORDS) == {"mme", "gcrde"} and SECTION_WEIGHTS["template"] == 0.0


def test_templates_are_read_apart(corpus: list[Issue]) -> None:
    issue = next(i for i in corpus if "weights_only" in i.title)
    sec = read_sections(issue.title, issue.body)
    assert "Is CUDA available" in sec.template and "GPU models and configuration" in sec.template
    assert "CUDA" not in sec.description and "GPU" not in sec.description
    tf = next(i for i in corpus if "bfloat16" in i.title)
    sec = read_sections(tf.title, tf.body)
    assert "NVIDIA A100" in sec.template and "12.2/8.9" in sec.template
    assert "Mixed-precision pipelines" in sec.description


def test_template_words_would_move_the_score(corpus: list[Issue]) -> None:
    docs = [prepare(i) for i in corpus]
    idx = next(k for k, i in enumerate(corpus) if "weights_only" in i.title)
    plain = KeywordScreener().fit(docs).keyword_scores(docs)["gcrde"][idx]
    counting_template = KeywordScreener(section_weights={**SECTION_WEIGHTS, "template": 1.0}).fit(docs)
    assert counting_template.keyword_scores(docs)["gcrde"][idx] > plain


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_fixture_reports_screened_as_named(path: Path, corpus: list[Issue], fitted: KeywordScreener) -> None:
    issue = load(path)
    expected = path.stem.split("__")[0]
    result = screen(issue, extract(issue), fitted)
    assert result.category.value == expected, result.reason
    assert set(result.scores) == {"mme", "gcrde", "other"}
    assert result.method == "keywords"
    if expected != "other":
        assert result.evidence, "a positive screening names its evidence"
        assert result.scores[expected] == max(result.scores.values())


def test_bare_method_without_rules_flags_hard_negatives(corpus: list[Issue]) -> None:
    """Why the rules exist: the keyword score alone sends CPU/GPU-mentioning negatives to gcrde."""
    bare = KeywordScreener(use_rules=False).fit(corpus)
    preds = dict(zip([p.stem for p in FILES], bare.predict(corpus), strict=True))
    wrong = [k for k, v in preds.items() if k.startswith("other__hard_negative") and v != "other"]
    assert wrong, preds


def test_mme_rule_needs_a_framework_module() -> None:
    user = prepare(("import fails", "```\nModuleNotFoundError: No module named 'my_utils'\n```"))
    fw = prepare(("import fails", "```\nModuleNotFoundError: No module named 'torch._six'\n```"))
    assert not user.rules.mme and fw.rules.mme
    ipy = prepare(("x", "AttributeError: 'ImportError' object has no attribute '_render_traceback_'"))
    assert not ipy.rules.mme


def test_gcrde_rule_reads_device_comparisons() -> None:
    yes = prepare(("tf.sort differs", "On the CPU tf.sort returns [1, 2, 3], but on the GPU it returns [1, 3, 2]."))
    both = prepare(("tf.sort wrong", "tf.sort returns [1, 3, 2] on both CPU and GPU, which is wrong."))
    perf = prepare(("tf.sort slow", "tf.sort is much slower on the GPU than on the CPU."))
    env_only = prepare(("tf.sort wrong", "tf.sort returns [1, 3, 2]. CUDA 11.2, RTX 3090, CPU i7."))
    assert yes.rules.gcrde >= 2.5
    assert both.rules.gcrde < 2.5 and perf.rules.gcrde < 2.5 and env_only.rules.gcrde < 2.5


def test_screen_corpus_falls_back_to_rules_on_a_tiny_store(corpus: list[Issue]) -> None:
    out = screen_corpus(corpus[:3], corpus[:5])
    assert all(s.method == "rules" for s in out)
    assert [s.category.value for s in out] == [p.stem.split("__")[0] for p in FILES[:3]]


def test_similar_finds_the_duplicate(corpus: list[Issue]) -> None:
    target = "torch.histc counts differ between CPU and CUDA when a value is on a bin edge"
    pairs = [(i.key, f"{i.title}\n{i.body}") for i in corpus]
    found = similar(target, pairs, top=3)
    assert found[0][0] == next(i.key for i in corpus if "histc" in i.title)
    assert len(found) <= 3 and found[0][1] > found[-1][1] >= 0
    assert similar("", [], 3) == [] and similar("x", pairs, 0) == []


def _tb(last_path: str, error: str) -> str:
    return ("```\nTraceback (most recent call last):\n  File \"train.py\", line 40, in <module>\n    run()\n"
            f"  File \"{last_path}\", line 12, in f\n    x.y\n{error}\n```")


def test_mme_rule_reads_where_the_error_was_raised() -> None:
    from sftl.extract import extract_text

    def rules(body: str):
        return prepare(("t", body), extract_text("t", body)).rules

    user = rules(_tb("/home/me/data.py", "AttributeError: 'NoneType' object has no attribute 'shape'"))
    assert not user.mme and "reporter's own code" in user.mme_why
    fw = rules(_tb("/usr/lib/python3.10/site-packages/torch/onnx/utils.py",
                   "AttributeError: 'MyNet' object has no attribute 'training'"))
    assert fw.mme
    api = rules(_tb("/home/me/a.py", "AttributeError: 'Tensor' object has no attribute 'numpy'"))
    assert api.mme  # a framework object's attribute, used from the reporter's code
    ts = rules("```\nRuntimeError: Module 'Sequential' has no attribute '_modules' :\n```")
    assert not ts.mme


def test_same_on_both_devices_unless_they_differ() -> None:
    same = prepare(("torch.lgamma wrong", "lgamma(-0.5) returns nan. This happens on CPU and CUDA."))
    differ = prepare(("torch.sort", "I ran it on both CPU and GPU and got different results for equal keys."))
    assert same.rules.gcrde < 2.5 and same.rules.flags["both"] == 1.0
    assert differ.rules.gcrde >= 2.5 and differ.rules.flags["both"] == 0.0


def test_where_it_runs_is_not_a_discrepancy() -> None:
    cpu_not_gpu = prepare(("TensorFlow runs on CPU instead of GPU", "Training only uses the CPU although I have a GPU."))
    undetected = prepare(("GPU not detected", "list_physical_devices('GPU') is empty so it runs on the CPU, not the GPU."))
    metal = prepare(("Different predictions with tensorflow-metal",
                     "model.predict gives different results on the GPU (tensorflow-metal) than on the CPU."))
    assert cpu_not_gpu.rules.gcrde < 2.5 and undetected.rules.gcrde < 2.5
    assert metal.rules.gcrde >= 2.5


def test_screening_never_raises_on_odd_reports(fitted: KeywordScreener) -> None:
    import random

    rng = random.Random(3)
    pieces = ["```", "```python", ">>> ", "    ", "Traceback (most recent call last):", '  File "x.py", line 1, in f',
              "AttributeError: 'X' object has no attribute 'y'", "No module named", "CPU", "GPU", " but ", " on the ",
              "different", "\n", "\x00", "<!--", "-->", "### Versions", "PyTorch version: 2.0", "é", "cuda:0", "."]
    items = [("".join(rng.choice(pieces) for _ in range(rng.randrange(0, 40))),
              "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 120)))) for _ in range(200)]
    items += [("", ""), (None, None), ("x" * 10, "\ufffd" * 5000)]  # type: ignore[list-item]
    results = fitted.screen_docs([prepare(it) for it in items])
    assert len(results) == len(items)
    assert all(r.category.value in ("mme", "gcrde", "other") for r in results)


def test_homogeneous_corpus_does_not_silence_strong_rules() -> None:
    """Every report says CPU/GPU/different: IDF is 0 for those words, the rule evidence still decides."""
    docs = [prepare((f"op {i} gives different results on CPU and GPU",
                     "On the CPU the result is 1 but on the GPU it is 2. The outputs differ.")) for i in range(40)]
    s = KeywordScreener().fit(docs)
    assert s.keyword_scores(docs[:1])["gcrde"][0] == 0.0
    result = s.screen_docs(docs[:1])[0]
    assert result.category.value == "gcrde" and "outweighs a keyword score" in result.reason
    assert result.scores["gcrde"] > result.scores["other"]


def test_an_attribute_error_for_a_missing_op_overload_is_a_missing_module_error() -> None:
    from sftl.extract import extract_text

    body = _tb("/usr/lib/python3.11/site-packages/torch/_ops.py",
               "AttributeError: The underlying op of 'aten.rand' has no overload name 'op_overloads'")
    rules = prepare(("t", body), extract_text("t", body)).rules
    assert rules.mme and "has no overload name" in rules.mme_why
    # the same words outside an AttributeError are not one
    prose = "The docs say the op has no overload name 'default' for this schema."
    assert not prepare(("t", prose), extract_text("t", prose)).rules.mme
