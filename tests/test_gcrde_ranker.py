"""The learned GCRDE re-ranker: fitting, the reasons it gives, its artefact, leave-one-out, and the features on suspects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sftl.localize import ranker
from sftl.localize.gcrde import localize_gcrde
from sftl.localize.gcrde.features import FEATURES
from sftl.localize.ranker import ARTEFACT, LinearRanker, loo_ranks
from sftl.model import Environment, Extraction, Issue, Side, Suspect
from sftl.sources import LocalTree


def cand(hand: float, kernel: float) -> dict[str, float]:
    return {"hand_rel": hand, "hand_rr": hand, "role_kernel": kernel}


# in every report the fixed file is the kernel, which the hand order puts second
GROUPS = [([cand(1.0, 0.0), cand(0.9, 1.0), cand(0.5, 0.0)], [False, True, False]) for _ in range(6)]


def test_fit_learns_what_the_hand_order_misses() -> None:
    model = LinearRanker(l2=0.1, epochs=800, lr=2.0).fit(GROUPS, ("hand_rel", "hand_rr", "role_kernel"))
    assert model.weights["role_kernel"] > 0
    sus = [Suspect(f"f{i}", 0.5, Side.CUDA, "evidence", features=c) for i, c in enumerate(GROUPS[0][0])]
    top = model.rank(sus)[0]
    assert top.path == "f1"
    assert "ranker: role_kernel +" in top.reason and top.reason.startswith("evidence; ")


def test_strong_shrinkage_keeps_the_hand_order() -> None:
    model = LinearRanker(l2=1e6).fit(GROUPS, ("hand_rel", "hand_rr", "role_kernel"))
    sus = [Suspect(f"f{i}", 0.5, Side.CUDA, "", features=c) for i, c in enumerate(GROUPS[0][0])]
    assert [s.path for s in model.rank(sus)] == ["f0", "f1", "f2"]


def test_leave_one_out_never_sees_the_row_it_scores() -> None:
    rows = [{"truth": ["b"], "suspects": [{"path": "a", "features": cand(1.0, 0.0)},
                                          {"path": "b", "features": cand(0.9, 1.0)}]} for _ in range(4)]
    # one row where the kernel is wrong: the others teach 'kernel first', so LOO gets that row wrong
    rows.append({"truth": ["a"], "suspects": [{"path": "a", "features": cand(1.0, 0.0)},
                                              {"path": "b", "features": cand(0.9, 1.0)}]})
    ranks = loo_ranks(rows, l2=0.01)
    assert ranks[:4] == [1, 1, 1, 1] and ranks[4] == 2
    # a row without features (TensorFlow) keeps its hand order
    assert loo_ranks([{"truth": ["x"], "suspects": [{"path": "y"}, {"path": "x"}]}]) == [2]


def test_the_artefact_round_trips_and_checks_its_version(tmp_path: Path) -> None:
    model = LinearRanker(l2=0.1, epochs=800, lr=2.0).fit(GROUPS, ("hand_rel", "hand_rr", "role_kernel"))
    path = tmp_path / "r.json"
    path.write_text(json.dumps(model.to_json(active=True)))
    loaded, meta = ranker.load(path)
    assert loaded is not None and loaded.weights == model.weights and meta["active"]
    path2 = tmp_path / "inactive.json"
    path2.write_text(json.dumps(model.to_json(active=False)))
    assert ranker.load(path2)[0] is None  # shipped, not applied
    with pytest.raises(ValueError, match="version"):
        LinearRanker.from_json({**model.to_json(), "version": "gcrde-ranker-v0"})


def test_the_shipped_artefact_names_its_provenance_and_its_leave_one_out_figures() -> None:
    obj = json.loads(ARTEFACT.read_text())
    assert obj["version"] == "gcrde-ranker-v1" and obj["features"] == list(FEATURES)
    assert obj["trained_on"] and all(u.startswith("https://github.com/") for u in obj["trained_on"])
    assert set(obj["leave_one_out"]) == {"hand", "learned"}
    assert not {"truth", "truth_files", "summary", "fix"} & set(obj)


def test_suspects_carry_their_features(fixtures_dir: Path) -> None:
    tree = LocalTree(fixtures_dir / "gcrde_roles", "pytorch", "2.6.0")
    issue = Issue(repo="pytorch/pytorch", number=1, title="topk wrong on CUDA", body="")
    loc = localize_gcrde(issue, Extraction(None, None, Environment(framework="pytorch"), apis=("torch.topk",)), tree)
    top = loc.suspects[0]
    assert set(top.features) == set(FEATURES)
    assert top.features["role_kernel"] == 1.0 and top.features["side_diverging"] == 1.0
    wrapper = next(s for s in loc.suspects if s.path.endswith("cuda/TensorTopK.cpp"))
    assert wrapper.features["role_wrapper"] == 1.0 and wrapper.features["defines_dispatch"] == 1.0
    assert wrapper.features["call_distance"] == 0.0 and top.features["call_distance"] == pytest.approx(1 / 3, abs=1e-3)


def test_an_active_model_reorders_the_localizers_suspects_and_says_why(fixtures_dir: Path) -> None:
    tree = LocalTree(fixtures_dir / "gcrde_roles", "pytorch", "2.6.0")
    issue = Issue(repo="pytorch/pytorch", number=1, title="topk wrong on CUDA", body="")
    ex = Extraction(None, None, Environment(framework="pytorch"), apis=("torch.topk",))
    wrapper_first = LinearRanker(features=("role_wrapper", "hand_rel"), weights={"role_wrapper": 5.0, "hand_rel": 1.0})
    try:
        ranker.use(wrapper_first)
        top = localize_gcrde(issue, ex, tree).suspects[0]
        assert top.path.endswith("cuda/TensorTopK.cpp") and "ranker: role_wrapper +" in top.reason
    finally:
        ranker.reset()
    assert localize_gcrde(issue, ex, tree).suspects[0].path.endswith("cuda/TensorTopK.cu")  # the shipped one is inactive
