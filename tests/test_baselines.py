"""The VSM and BERT baselines on a small source tree written for these tests (fixtures/eval/tree)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from sftl.localize import get_localizer
from sftl.localize.baselines import candidate_files, file_chunks, localize_bert, localize_vsm, side_of, tokens
from sftl.model import Category, Environment, Extraction, Issue, Outcome, Side
from sftl.sources import LocalTree

NO_EXTRACTION = Extraction(snippet=None, traceback=None, environment=Environment())


def _issue(title: str, body: str) -> Issue:
    return Issue(repo="pytorch/pytorch", number=1, title=title, body=body)


@pytest.fixture
def tree(fixtures_dir: Path, tmp_path: Path) -> LocalTree:
    # a private copy: the in-process index memo is keyed by the tree's location
    root = tmp_path / "tree"
    shutil.copytree(fixtures_dir / "eval" / "tree", root)
    return LocalTree(root, "pytorch", "2.13.0")


def _rows(cache: Path, kind: str) -> int:
    with sqlite3.connect(cache / "baselines" / "features.sqlite") as db:
        return int(db.execute("SELECT COUNT(*) FROM feats WHERE kind=?", (kind,)).fetchone()[0])


def test_candidates_follow_framework_and_category(tree: LocalTree) -> None:
    files = tree.list_files()
    mme = candidate_files(files, "pytorch", Category.MME)
    assert "torch/nn/modules/dropout.py" in mme
    assert "torch/nn/test_dropout.py" not in mme  # tests are never suspects
    assert all(p.endswith(".py") for p in mme)
    gcrde = candidate_files(files, "pytorch", Category.GCRDE)
    assert gcrde == sorted(p for p in files if p.startswith("aten/"))
    assert candidate_files(files, "pytorch", Category.OTHER) == []
    assert candidate_files(["tensorflow/core/kernels/cwise_op_gpu_floor_mod.cu.cc"], "tensorflow", "gcrde")


def test_tokens_split_identifiers() -> None:
    assert tokens("_histc_cuda RangeFactories") == [
        "_histc_cuda", "histc", "cuda", "rangefactories", "range", "factories",
    ]
    assert side_of("aten/src/ATen/native/cuda/SummaryOps.cu") is Side.CUDA
    assert side_of("aten/src/ATen/native/cpu/HistogramKernel.cpp") is Side.CPU
    assert side_of("aten/src/ATen/native/SummaryOps.cpp") is Side.SHARED


def test_vsm_ranks_the_file_sharing_the_reports_terms(tree: LocalTree, tmp_path: Path) -> None:
    issue = _issue(
        "Bernoulli logits missing",
        "AttributeError: 'Bernoulli' object has no attribute 'logits' when I sample from it",
    )
    loc = localize_vsm(issue, NO_EXTRACTION, Category.MME, tree, 3, cache_dir=tmp_path / "cache")
    assert loc.outcome is Outcome.LOCATED and loc.method == "vsm"
    assert loc.suspects[0].path == "torch/distributions/bernoulli.py"
    assert "bernoulli" in loc.suspects[0].reason and "logits" in loc.suspects[0].reason
    assert len(loc.suspects) <= 3
    assert [s.score for s in loc.suspects] == sorted((s.score for s in loc.suspects), reverse=True)

    cuda = _issue("histc differs on cuda", "torch.histc gives different bin counts on CUDA than on CPU")
    loc = localize_vsm(cuda, NO_EXTRACTION, Category.GCRDE, tree, 10, cache_dir=tmp_path / "cache")
    assert loc.suspects[0].path == "aten/src/ATen/native/cuda/SummaryOps.cu"
    assert loc.suspects[0].side is Side.CUDA
    assert all(s.path.startswith("aten/") for s in loc.suspects)


def test_vsm_cache_is_by_content_so_a_mutated_copy_reuses_it(tree: LocalTree, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    issue = _issue("SGD momentum", "the momentum buffer of SGD is wrong")
    first = localize_vsm(issue, NO_EXTRACTION, Category.MME, tree, 5, cache_dir=cache)
    assert _rows(cache, "vsm-v1") == 4  # four Python candidates (the test file excluded)
    mutated = tmp_path / "mutated"
    shutil.copytree(tree.root, mutated)
    sgd = mutated / "torch/optim/sgd.py"
    sgd.write_text(sgd.read_text().replace("nesterov=False", "nesterov=True"))
    again = localize_vsm(issue, NO_EXTRACTION, Category.MME, LocalTree(mutated, "pytorch"), 5, cache_dir=cache)
    assert _rows(cache, "vsm-v1") == 5  # only the changed file was tokenized again
    assert again.suspects[0].path == first.suspects[0].path == "torch/optim/sgd.py"


def test_vsm_abstains_when_nothing_is_shared(tree: LocalTree, tmp_path: Path) -> None:
    loc = localize_vsm(_issue("zzqx", "qqqq wwww"), NO_EXTRACTION, Category.MME, tree, 5, cache_dir=tmp_path)
    assert loc.outcome is Outcome.ABSTAINED and not loc.suspects


@pytest.mark.parametrize("fn", [localize_vsm, localize_bert])
def test_skips_are_values_with_reasons(fn, tree: LocalTree, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    issue = _issue("x", "y")
    assert fn(issue, NO_EXTRACTION, Category.OTHER, tree, 5, cache_dir=tmp_path).outcome is Outcome.SKIPPED
    no_src = fn(issue, NO_EXTRACTION, Category.MME, None, 5, cache_dir=tmp_path)
    assert no_src.outcome is Outcome.SKIPPED and "source" in no_src.reason
    tf = LocalTree(tree.root, "tensorflow", "2.21.0")  # holds no tensorflow/ files
    empty = fn(issue, NO_EXTRACTION, Category.GCRDE, tf, 5, cache_dir=tmp_path)
    assert empty.outcome is Outcome.SKIPPED and "tensorflow/core/kernels/" in empty.reason


def test_file_chunks_read_names_and_comments_not_licenses() -> None:
    text = "// Copyright 2024 Someone. Licensed under the Apache License.\n// arange on CUDA\n" \
        "Tensor& arange_cuda_out(const Scalar& start,\n    Tensor& result) {\n}\nREGISTER_DISPATCH(arange_stub, &k);\n"
    chunks = file_chunks("aten/src/ATen/native/cuda/RangeFactories.cu", text)
    joined = " ".join(chunks)
    assert "arange cuda out" in joined and "arange stub" in joined and "arange on CUDA" in joined
    assert "Copyright" not in joined
    assert joined.startswith("aten src ATen native cuda RangeFactories")


def test_registry_names_the_baselines() -> None:
    assert get_localizer("vsm") is localize_vsm
    assert get_localizer("bert") is localize_bert


def test_bert_ranks_by_meaning_with_the_packaged_model(tree: LocalTree, tmp_path: Path) -> None:
    issue = _issue(
        "Dropout gives wrong result",
        "When I use nn.Dropout with probability p=1.0 during training, the layer does not zero every element.",
    )
    cache = tmp_path / "cache"
    loc = localize_bert(issue, NO_EXTRACTION, Category.MME, tree, 5, cache_dir=cache)
    assert loc.outcome is Outcome.LOCATED and loc.method == "bert"
    assert loc.suspects[0].path == "torch/nn/modules/dropout.py"
    assert "MiniLM cosine" in loc.suspects[0].reason
    assert _rows(cache, "bert-v1") == 4
    gpu = _issue("arange length differs", "arange with a small float step returns one more element on the GPU")
    loc = localize_bert(gpu, NO_EXTRACTION, Category.GCRDE, tree, 3, cache_dir=cache)
    assert loc.suspects[0].path == "aten/src/ATen/native/cuda/RangeFactories.cu"
