"""A small learned re-ranker of GCRDE candidates: a linear model over their features, fitted on real labelled rows.

scikit-learn style: `LinearRanker(l2=...)` stores parameters, `fit(groups)` learns from groups of
candidates (one group per labelled report: each candidate's feature mapping and whether it is a file
the fix changed), `score` is pure. It learns pairwise (RankNet-style logistic loss on the difference
between a fixed file and every other candidate of the same report, each report weighing the same),
so it ranks within a report and needs no calibration across reports. The weights are shrunk toward
the hand ranking (`HAND_PRIOR`), not toward zero: what it learns is a correction of that order. Linear and small (one weight
per feature), so a suspect's reason can name the features that moved it.

The artefact (`sftl/data/gcrde-ranker-v1.json`) holds the weights, the feature order, the training
rows' provenance (issue URLs only, never their fix text) and the leave-one-out figures measured when
it was fitted; `ARTEFACT_VERSION` is checked on load. A model whose leave-one-out figures did not beat
the hand ranking is shipped with `"active": false` and is not applied.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sftl.model import Suspect

ARTEFACT_VERSION = "gcrde-ranker-v1"
ARTEFACT = Path(__file__).resolve().parent.parent / "data" / "gcrde-ranker-v1.json"

# the hand ranking as a weight vector: with no evidence (or a large l2) the model keeps the hand order
HAND_PRIOR: dict[str, float] = {"hand_rel": 8.0, "hand_rr": 2.0}
Group = tuple[Sequence[Mapping[str, float]], Sequence[bool]]  # candidates' features, which are the truth


@dataclass
class LinearRanker:
    """Pairwise logistic ranker: score(x) = w . x."""

    l2: float = 1.0
    epochs: int = 400
    lr: float = 0.5
    prior: dict[str, float] = field(default_factory=lambda: dict(HAND_PRIOR))
    features: tuple[str, ...] = ()
    weights: dict[str, float] = field(default_factory=dict)

    def fit(self, groups: Iterable[Group], features: Sequence[str] | None = None) -> LinearRanker:
        groups = list(groups)
        names = list(features) if features is not None else sorted({k for g, _ in groups for c in g for k in c})
        pairs: list[tuple[list[float], float]] = []  # (x_truth - x_other, weight)
        for cands, truth in groups:
            good = [c for c, t in zip(cands, truth, strict=True) if t]
            bad = [c for c, t in zip(cands, truth, strict=True) if not t]
            if not good or not bad:
                continue
            wt = 1.0 / (len(good) * len(bad))
            for g in good:
                for b in bad:
                    pairs.append(([g.get(n, 0.0) - b.get(n, 0.0) for n in names], wt))
        import numpy as np

        w0 = np.array([self.prior.get(n, 0.0) for n in names])  # shrunk toward the hand ranking, not toward 0
        w = w0.copy()
        if pairs:
            x = np.array([p for p, _ in pairs], dtype=float)
            pw = np.array([q for _, q in pairs], dtype=float)
            pw = pw / pw.sum()
            step = self.lr / (1.0 + self.l2 / len(groups))  # stable however strong the shrinkage
            for _ in range(self.epochs):  # full-batch gradient descent on the weighted pairwise logistic loss
                z = np.clip(x @ w, -30.0, 30.0)
                grad = -(x * (pw / (1.0 + np.exp(z)))[:, None]).sum(axis=0) + self.l2 * (w - w0) / len(groups)
                w -= step * grad
        self.features = tuple(names)
        self.weights = {n: round(float(v), 5) for n, v in zip(names, w, strict=True)}
        return self

    def score(self, feats: Mapping[str, float]) -> float:
        return sum(self.weights.get(n, 0.0) * feats.get(n, 0.0) for n in self.features)

    def contributions(self, feats: Mapping[str, float], baseline: Mapping[str, float] | None = None,
                      k: int = 3) -> list[tuple[str, float]]:
        """The features that moved this candidate most against the baseline (the list's mean): (name, w * dx)."""
        base = baseline or {}
        parts = [(n, self.weights.get(n, 0.0) * (feats.get(n, 0.0) - base.get(n, 0.0))) for n in self.features]
        return sorted((p for p in parts if abs(p[1]) >= 0.01), key=lambda p: -abs(p[1]))[:k]

    def rank(self, suspects: Sequence[Suspect]) -> list[Suspect]:
        """The suspects in the model's order, each reason naming the features that set it apart from the others."""
        n = max(len(suspects), 1)
        mean = {f: sum(s.features.get(f, 0.0) for s in suspects) / n for f in self.features}
        scored = sorted(enumerate(suspects), key=lambda iv: (-self.score(iv[1].features), iv[0]))
        out = []
        for _, s in scored:
            why = ", ".join(f"{f} {'+' if c > 0 else '-'}{abs(c):.2f}" for f, c in self.contributions(s.features, mean))
            out.append(replace(s, reason=f"{s.reason}; ranker: {why}" if why else s.reason))
        return out

    def to_json(self, **meta: Any) -> dict[str, Any]:
        return {"version": ARTEFACT_VERSION, "features": list(self.features), "weights": self.weights,
                "l2": self.l2, **meta}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> LinearRanker:
        if obj.get("version") != ARTEFACT_VERSION:
            raise ValueError(f"ranker artefact version {obj.get('version')!r}, expected {ARTEFACT_VERSION!r}")
        return cls(l2=float(obj.get("l2", 1.0)), features=tuple(obj["features"]),
                   weights={str(k): float(v) for k, v in obj["weights"].items()})


_LOADED: dict[Path, tuple[LinearRanker | None, dict[str, Any]]] = {}


def load(path: Path = ARTEFACT) -> tuple[LinearRanker | None, dict[str, Any]]:
    """The shipped model when it is active (it beat the hand ranking leave-one-out), and its artefact's metadata."""
    if path in _LOADED:
        return _LOADED[path]
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
        model: LinearRanker | None = LinearRanker.from_json(obj)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        model, obj = None, {}
    result = (model if obj.get("active") else None, obj)
    _LOADED[path] = result
    return result


def use(model: LinearRanker | None, path: Path = ARTEFACT) -> None:
    """Replace the shipped model in this process (None: the hand ranking): benchmarks measure the hand order so."""
    _LOADED[path] = (model, {"active": model is not None})


def reset() -> None:
    """Forget models loaded or set by `use`: the artefact is read again on the next `load`."""
    _LOADED.clear()


def rank_of(paths: Sequence[str], truth: Iterable[str]) -> int | None:
    wanted = set(truth)
    return next((i for i, p in enumerate(paths, 1) if p in wanted), None)


def groups_from_results(results: Sequence[Mapping[str, Any]]) -> list[Group]:
    """Training groups from ranked results: each row's suspects (with `features`) against its `truth` files."""
    out: list[Group] = []
    for r in results:
        sus = [s for s in r.get("suspects", ()) if s.get("features")]
        truth = set(r.get("truth", ()))
        out.append(([s["features"] for s in sus], [s["path"] in truth for s in sus]))
    return out


def loo_ranks(results: Sequence[Mapping[str, Any]], l2: float = 1.0, top: int = 10) -> list[int | None]:
    """Leave-one-out: each row reranked by a model fitted on every other row; the rank of its first truth file."""
    groups = groups_from_results(results)
    ranks: list[int | None] = []
    for i, r in enumerate(results):
        model = LinearRanker(l2=l2).fit(g for j, g in enumerate(groups) if j != i)
        sus = list(r.get("suspects", ()))
        if not all(s.get("features") for s in sus):  # no features (a TensorFlow row): the hand order stands
            ranks.append(rank_of([s["path"] for s in sus][:top], r.get("truth", ())))
            continue
        order = sorted(range(len(sus)), key=lambda k: (-model.score(sus[k]["features"]), k))
        paths = [sus[k]["path"] for k in order][:top]
        ranks.append(rank_of(paths, r.get("truth", ())))
    return ranks
