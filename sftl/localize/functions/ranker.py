"""The learned ranker of a suspect file's functions: LightGBM LambdaRank over (report, function) features, one
group per (report, file), saved as a versioned artefact with its feature names and provenance.

scikit-learn style, as the file ranker (`sftl.localize.candidates.ranker`): `__init__` stores parameters, `fit`
learns, `predict` is pure (the saved trees walked with numpy: no LightGBM import at `sftl locate`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sftl.localize.candidates.ranker import (
    TreeEnsemble,
    load_artefact,
    read_model,
    train_lambdarank,
    write_model,
)
from sftl.localize.functions.features import FEATURES

FORMAT = "sftl-function-ranker-v1"
BUNDLED = Path(__file__).resolve().parents[2] / "data" / "function-ranker-v1.json"
PARAMS = ("n_estimators", "learning_rate", "num_leaves", "min_child_samples", "monotone", "seed")
# evidence features whose growth may never lower a function's score: with a few hundred training files, the
# constraint keeps the trees from learning a dip in one of them that the later reports do not share
EVIDENCE_PREFIXES = ("frame", "name", "class", "kernel", "message", "bm25", "uses", "callee", "caller", "sibling",
                     "quotes", "export", "reach")


@dataclass
class FunctionRanker:
    """LambdaRank over function features; one group per (report, file)."""

    n_estimators: int = 200
    learning_rate: float = 0.05
    num_leaves: int = 7
    min_child_samples: int = 20
    monotone: bool = True
    seed: int = 0
    features: tuple[str, ...] = FEATURES
    booster: Any = None
    ensemble: TreeEnsemble | None = None
    gains: dict[str, float] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)

    def fit(self, rows: Sequence[Sequence[float]], labels: Sequence[int], groups: Sequence[int]) -> FunctionRanker:
        constraints = ({"monotone_constraints": [int(name.startswith(EVIDENCE_PREFIXES)) for name in self.features]}
                       if self.monotone else {})
        self.booster, self.ensemble, self.gains = train_lambdarank(
            self.own_columns(rows), labels, groups, self.features, rounds=self.n_estimators,
            learning_rate=self.learning_rate, num_leaves=self.num_leaves, min_data_in_leaf=self.min_child_samples,
            seed=self.seed, ndcg_eval_at=[1, 5], lambdarank_truncation_level=10, **constraints)
        return self

    def predict(self, rows: Sequence[Sequence[float]]) -> list[float]:
        """Scores of rows given in `FEATURES` order."""
        if self.ensemble is None:
            raise ValueError("the function ranker is not fitted")
        if not len(rows):
            return []
        return [float(x) for x in self.ensemble.predict(self.own_columns(rows))]

    def own_columns(self, rows: Sequence[Sequence[float]]) -> Any:
        import numpy as np

        x = np.asarray(rows, dtype=np.float64)
        return x if self.features == FEATURES else x[:, [FEATURES.index(name) for name in self.features]]

    def importances(self) -> dict[str, float]:
        return dict(self.gains)

    def save(self, path: str | Path) -> None:
        if self.booster is None or self.ensemble is None:
            raise ValueError("the function ranker is not fitted")
        payload = {
            "format": FORMAT, "features": list(self.features), "provenance": self.provenance,
            "params": {name: getattr(self, name) for name in PARAMS}, "importances": self.gains,
            "flat": {k: v.tolist() for k, v in self.ensemble.flat().items()},
            "model": self.booster.model_to_string(),
        }
        write_model(path, payload)

    @classmethod
    def load(cls, path: str | Path) -> FunctionRanker:
        payload, features, ensemble = read_model(path, FORMAT, FEATURES, "function ranker",
                                                 "bench/bench_functions.py --refit")
        params = payload.get("params") or {}
        model = cls(**{k: v for k, v in params.items() if k in PARAMS}, features=features)
        model.ensemble = ensemble
        model.gains = {str(k): float(v) for k, v in (payload.get("importances") or {}).items()}
        model.provenance = payload.get("provenance") or {}
        return model


def load_function_ranker(path: str | Path | None = None) -> FunctionRanker | None:
    """The model at `path`, else the bundled one; None when there is none (functions then rank by BM25)."""
    return load_artefact(FunctionRanker.load, path, BUNDLED)
