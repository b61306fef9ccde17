"""The classifier learns a real constraint (bmm's batch and inner dimensions) from real executions."""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pytest

from sftl.config import load_settings
from sftl.fuzz.execute import WorkerPool
from sftl.fuzz.features import Featurizer, ValidityClassifier, load_model, save_model
from sftl.fuzz.generate import InputGenerator
from sftl.fuzz.specs import api_spec


def _t(*shape: int) -> dict:
    return {"t": "tensor", "shape": list(shape), "dtype": "float32"}


@pytest.fixture(scope="module")
def bmm_model(tmp_path_factory: pytest.TempPathFactory):
    settings = load_settings(env={"PATH": os.environ.get("PATH", "")}, home=tmp_path_factory.mktemp("home"))
    spec = api_spec("bmm")
    gen = InputGenerator(spec, "random", rng_seed=11)
    with WorkerPool("pytorch", settings, workers=2) as pool:
        first = gen.generate(300)
        res1 = pool.run(spec, first)
        gen.adapt(first, [r.valid for r in res1])  # level weights follow what was valid
        second = gen.generate(500, offset=1)
        res2 = pool.run(spec, second)
        fresh = gen.generate(400, offset=2)
        res_fresh = pool.run(spec, fresh)
    feats = Featurizer(spec)
    train = first + second
    y = [r.valid for r in res1 + res2]
    clf = ValidityClassifier().fit(feats.transform([i.call for i in train]), y)
    return settings, spec, feats, clf, fresh, [r.valid for r in res_fresh], sum(r.valid for r in res1) / len(res1)


def test_adapted_generation_finds_more_valid_bmm_inputs(bmm_model) -> None:
    *_, fresh_valid, first_rate = bmm_model
    assert sum(fresh_valid) / len(fresh_valid) > first_rate


def test_classifier_learns_bmm_constraints_on_fresh_inputs(bmm_model) -> None:
    _, spec, feats, clf, fresh, labels, _ = bmm_model
    pred = clf.predict(feats.transform([i.call for i in fresh]))
    labels = np.asarray(labels)
    tp = int((pred & labels).sum())
    assert labels.sum() >= 10
    assert tp / max(pred.sum(), 1) >= 0.7  # precision
    assert tp / labels.sum() >= 0.8  # recall
    assert clf.name_ in ("gradient_boosting", "extra_trees", "random_forest", "logistic_regression")
    # the constraint itself: equal batch, matching inner dimension, rank 3 both
    probe = [
        {"self": _t(2, 3, 4), "mat2": _t(2, 4, 5)},
        {"self": _t(3, 2, 5), "mat2": _t(3, 5, 1)},
        {"self": _t(2, 3, 4), "mat2": _t(2, 5, 5)},  # inner mismatch
        {"self": _t(2, 3, 4), "mat2": _t(3, 4, 5)},  # batch mismatch
        {"self": _t(3, 4), "mat2": _t(4, 5)},  # rank 2
    ]
    p = clf.predict_proba(feats.transform(probe))
    assert min(p[:2]) > max(p[2:])


def test_model_is_saved_per_api_and_version(bmm_model) -> None:
    settings, spec, feats, clf, fresh, *_ = bmm_model
    path = save_model(settings.home, spec, clf, feats.names)
    assert path.exists() and "bmm" in path.name and spec.version in path.name
    loaded = load_model(settings.home, spec, feats.names)
    assert loaded is not None
    X = feats.transform([i.call for i in fresh[:50]])
    assert (loaded.predict(X) == clf.predict(X)).all()
    assert load_model(settings.home, replace(spec, version="0.0.1"), feats.names) is None
    assert load_model(settings.home, spec, feats.names[:-1]) is None


def test_too_few_valid_examples_keep_everything() -> None:
    X = np.zeros((20, 3))
    y = [1] + [0] * 19
    clf = ValidityClassifier().fit(X, y)
    assert clf.predict(X).all() and clf.name_.startswith("none")
