"""The learned ranker of candidate files: LightGBM LambdaRank over the named features, saved as a versioned artefact.

scikit-learn style: `__init__` stores parameters, `fit` learns from groups of (report, candidate) rows,
`predict` scores rows and is pure; `save`/`load` keep the model with its feature names, the training rows'
provenance (issue URLs only) and its validation figures. LightGBM trains; scoring walks the saved trees with
numpy (`TreeEnsemble`, the same scores), so `sftl locate` loads the model in milliseconds without importing
LightGBM and scikit-learn (seconds).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from sftl.localize.candidates.features import FEATURES

FORMAT = "sftl-ranker-v1"
T = TypeVar("T")
BUNDLED = Path(__file__).resolve().parents[2] / "data" / "candidate-ranker-v3.json"


@dataclass(frozen=True)
class TreeEnsemble:
    """LightGBM's trees as flat arrays: per node its feature, threshold, children (a negative child is ~leaf)."""

    trees: tuple[dict[str, list[float]], ...]

    @classmethod
    def from_dump(cls, dump: dict[str, Any]) -> TreeEnsemble:
        out = []
        for info in dump["tree_info"]:
            nodes: dict[str, list[float]] = {"feature": [], "threshold": [], "left": [], "right": [], "default_left": [],
                                             "leaf": []}

            def walk(node: dict[str, Any], nodes: dict[str, list[float]] = nodes) -> int:
                if "leaf_value" in node or "split_feature" not in node:
                    nodes["leaf"].append(float(node.get("leaf_value", 0.0)))
                    return ~(len(nodes["leaf"]) - 1)
                at = len(nodes["feature"])
                for key in ("feature", "threshold", "left", "right", "default_left"):
                    nodes[key].append(0.0)
                nodes["feature"][at] = float(node["split_feature"])
                nodes["threshold"][at] = float(node["threshold"])
                nodes["default_left"][at] = float(bool(node.get("default_left", True)))
                nodes["left"][at] = float(walk(node["left_child"]))
                nodes["right"][at] = float(walk(node["right_child"]))
                return at

            walk(info["tree_structure"])
            out.append(nodes)
        return cls(tuple(out))

    @classmethod
    def from_flat(cls, flat: dict[str, list[Any]]) -> TreeEnsemble:
        import numpy as np

        types = {"feature": np.int64, "left": np.int64, "right": np.int64, "roots": np.int64, "default_left": bool,
                 "threshold": np.float64, "leaves": np.float64}
        ensemble = cls(())
        object.__setattr__(ensemble, "_flat", {k: np.asarray(flat[k], dtype=t) for k, t in types.items()})
        return ensemble

    def flat(self) -> dict[str, Any]:
        """Every tree's nodes in one set of arrays (child ids global, a leaf as ~its global leaf id), built once."""
        import numpy as np

        cached = self.__dict__.get("_flat")
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        feature: list[int] = []
        threshold: list[float] = []
        left: list[int] = []
        right: list[int] = []
        default_left: list[bool] = []
        leaves: list[float] = []
        roots: list[int] = []
        for tree in self.trees:
            node_base, leaf_base = len(feature), len(leaves)

            def glob(child: float, node_base: int = node_base, leaf_base: int = leaf_base) -> int:
                c = int(child)
                return c + node_base if c >= 0 else ~(~c + leaf_base)

            roots.append(node_base if tree["feature"] else ~leaf_base)
            feature += [int(f) for f in tree["feature"]]
            threshold += [float(t) for t in tree["threshold"]]
            left += [glob(c) for c in tree["left"]]
            right += [glob(c) for c in tree["right"]]
            default_left += [bool(d) for d in tree["default_left"]]
            leaves += [float(v) for v in tree["leaf"]]
        flat = {"feature": np.asarray(feature, dtype=np.int64), "threshold": np.asarray(threshold),
                "left": np.asarray(left, dtype=np.int64), "right": np.asarray(right, dtype=np.int64),
                "default_left": np.asarray(default_left, dtype=bool), "leaves": np.asarray(leaves),
                "roots": np.asarray(roots, dtype=np.int64)}
        object.__setattr__(self, "_flat", flat)
        return flat

    def predict(self, rows: Any) -> Any:
        """The sum of every tree's leaf for each row: all trees walked at once, one level per step."""
        import numpy as np

        x = np.asarray(rows, dtype=np.float64)
        f = self.flat()
        node = np.broadcast_to(f["roots"], (len(x), len(f["roots"]))).copy()
        row = np.broadcast_to(np.arange(len(x))[:, None], node.shape)
        live = node >= 0
        while live.any():
            at = node[live]
            value = x[row[live], f["feature"][at]]
            go_left = np.where(np.isnan(value), f["default_left"][at], value <= f["threshold"][at])
            node[live] = np.where(go_left, f["left"][at], f["right"][at])
            live = node >= 0
        return f["leaves"][~node].sum(axis=1)


@dataclass
class CandidateRanker:
    """LambdaRank over candidate features; one group per report."""

    n_estimators: int = 300
    learning_rate: float = 0.05
    num_leaves: int = 15
    min_child_samples: int = 10
    seed: int = 0
    features: tuple[str, ...] = FEATURES
    booster: Any = None
    provenance: dict[str, Any] = field(default_factory=dict)
    ensemble: TreeEnsemble | None = None
    gains: dict[str, float] = field(default_factory=dict)
    # P(the first file is right) from the best score and its margin, and the threshold of low confidence
    confidence: dict[str, Any] = field(default_factory=dict)

    def fit(self, rows: Sequence[Sequence[float]], labels: Sequence[int], groups: Sequence[int]) -> CandidateRanker:
        self.booster, self.ensemble, self.gains = train_lambdarank(
            self.own_columns(rows), labels, groups, self.features, rounds=self.n_estimators,
            learning_rate=self.learning_rate, num_leaves=self.num_leaves, min_data_in_leaf=self.min_child_samples,
            seed=self.seed, ndcg_eval_at=[1, 5, 10], lambdarank_truncation_level=20)
        return self

    def predict(self, rows: Sequence[Sequence[float]]) -> list[float]:
        """Scores of rows given in `FEATURES` order (a model of fewer features reads its own columns of them)."""
        if self.ensemble is None:
            raise ValueError("the ranker is not fitted")
        if not rows:
            return []
        return [float(x) for x in self.ensemble.predict(self.own_columns(rows))]

    def own_columns(self, rows: Sequence[Sequence[float]]) -> Any:
        """Rows given in `FEATURES` order as this model's columns (a model of fewer features reads some of them)."""
        import numpy as np

        x = np.asarray(rows, dtype=np.float64)
        return x if self.features == FEATURES else x[:, [FEATURES.index(name) for name in self.features]]

    def confidence_of(self, scores: Sequence[float]) -> float | None:
        """P(the best-scored file is right) for a report's scores (None when the model carries no calibration)."""
        import math

        conf = self.confidence
        if not conf or not scores:
            return None
        best = sorted(scores, reverse=True)[:2] + [0.0]
        z = conf["intercept"] + conf["coef"][0] * best[0] + conf["coef"][1] * (best[0] - best[1])
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))

    def importances(self) -> dict[str, float]:
        """Each feature's share of the model's total gain (what moves a ranking most)."""
        return dict(self.gains)

    def save(self, path: str | Path) -> None:
        if self.booster is None or self.ensemble is None:
            raise ValueError("the ranker is not fitted")
        payload = {
            "format": FORMAT, "features": list(self.features), "provenance": self.provenance,
            "params": {"n_estimators": self.n_estimators, "learning_rate": self.learning_rate,
                       "num_leaves": self.num_leaves, "min_child_samples": self.min_child_samples, "seed": self.seed},
            "importances": self.gains,
            "confidence": self.confidence,
            # every tree's nodes as flat arrays (what scoring walks; read back without any per-tree work)
            "flat": {k: v.tolist() for k, v in self.ensemble.flat().items()},
            "model": self.booster.model_to_string(),
        }
        write_model(path, payload)

    @classmethod
    def load(cls, path: str | Path) -> CandidateRanker:
        payload, features, ensemble = read_model(path, FORMAT, FEATURES, "ranker model", "`sftl model fit`")
        params = payload.get("params") or {}
        model = cls(**{k: v for k, v in params.items() if k in ("n_estimators", "learning_rate", "num_leaves",
                                                                   "min_child_samples", "seed")}, features=features)
        model.ensemble = ensemble
        model.gains = {str(k): float(v) for k, v in (payload.get("importances") or {}).items()}
        model.confidence = dict(payload.get("confidence") or {})
        model.provenance = payload.get("provenance") or {}
        return model


def train_lambdarank(columns: Any, labels: Sequence[int], groups: Sequence[int], features: Sequence[str],
                     rounds: int, **params: Any) -> tuple[Any, TreeEnsemble, dict[str, float]]:
    """LightGBM LambdaRank over one group per query (the learned rankers' shared recipe; `params`: what each sets,
    learning rate, leaves, seed, ...): the booster, its trees for numpy scoring, each feature's share of the gain."""
    import lightgbm as lgb
    import numpy as np

    data = lgb.Dataset(columns, label=np.asarray(labels), group=list(groups), feature_name=list(features),
                       free_raw_data=True)
    booster = lgb.train({"objective": "lambdarank", "metric": "ndcg", "feature_fraction": 0.8, "bagging_fraction": 0.8,
                         "bagging_freq": 1, "deterministic": True, "num_threads": 1, "verbose": -1, **params},
                        data, num_boost_round=rounds)
    gains = booster.feature_importance(importance_type="gain")
    total = float(sum(gains)) or 1.0
    return (booster, TreeEnsemble.from_dump(booster.dump_model()),
            {name: float(g) / total for name, g in zip(features, gains, strict=True)})


def write_model(path: str | Path, payload: dict[str, Any]) -> None:
    """A learned ranker's artefact, written whole or not at all (a temporary file, then renamed)."""
    from sftl.errors import InputError

    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    try:
        tmp.write_text(json.dumps(payload, separators=(",", ":")) + "\n", encoding="utf-8")
        tmp.replace(target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"cannot write the model to {target}: {exc.strerror or exc}") from None


def read_model(path: str | Path, fmt: str, known: Sequence[str], what: str, retrain: str
               ) -> tuple[dict[str, Any], tuple[str, ...], TreeEnsemble]:
    """A learned ranker's artefact checked: its payload, the features it was trained on (each one this sftl
    computes) and its trees; an InputError saying how to retrain it otherwise."""
    from sftl.errors import InputError

    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the {what} {path}: {exc}") from None
    if not isinstance(payload, dict) or payload.get("format") != fmt:
        raise InputError(f"{path} is not an sftl {what} ({fmt})")
    features = tuple(payload.get("features") or ())
    unknown = [name for name in features if name not in known]
    if not features or unknown:
        raise InputError(f"{path} was trained on features this sftl does not compute ({', '.join(unknown[:3])}); "
                         f"retrain it ({retrain})")
    try:
        ensemble = TreeEnsemble.from_flat(payload["flat"])
    except (KeyError, TypeError, ValueError):
        raise InputError(f"{path} holds no trees; retrain it ({retrain})") from None
    return payload, features, ensemble


def load_default(path: str | Path | None = None) -> CandidateRanker | None:
    """The model at `path`, else the bundled one; None when there is none (ranking falls back to BM25).

    Read once per process and file version (a batch of reports reads it once; a replaced file is read again).
    """
    return load_artefact(CandidateRanker.load, path, BUNDLED)


def load_artefact(load: Callable[[str], T], path: str | Path | None, bundled: Path) -> T | None:
    """A learned artefact read with `load`: the one at `path` (its errors raised), else the bundled one (None when
    it is missing or unreadable). Read once per process and file version: a replaced file is read again."""
    from sftl.errors import InputError

    where = Path(path) if path else bundled
    try:
        stamp = where.stat().st_mtime_ns
    except OSError as exc:
        if path:  # a model asked for by name (SFTL_RANKER_MODEL, SFTL_FUNCTION_MODEL) is never silently replaced
            raise InputError(f"cannot read the model {where}: {exc.strerror or exc}") from None
        return None
    try:
        loaded: T = _load_once(load, str(where), stamp)
        return loaded
    except InputError:
        if path:
            raise
        return None


@functools.lru_cache(maxsize=8)
def _load_once(load: Callable[[str], Any], path: str, stamp: int) -> Any:
    return load(path)
