"""The shape abstraction of a call (ranks, dims, cross-argument dim relations, values, codes) and the validity classifier."""

from __future__ import annotations

import math
import pickle
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from sftl.fuzz.generate import Call
from sftl.fuzz.specs import MAX_RANK, ApiSpec, ArgSpec

MAX_LIST = 6  # list elements / tensor-list items looked at individually
MAX_ITEMS = 3  # tensor-list items that take part in cross-argument relations
FORMAT = 6  # bump when the feature layout changes: saved models of another format are retrained


def _dims(t: dict[str, Any] | None) -> list[int] | None:
    return None if t is None else list(t["shape"])


def _broadcastable(a: Sequence[int], b: Sequence[int]) -> bool:
    for x, y in zip(reversed(a), reversed(b), strict=False):
        if x != y and x != 1 and y != 1:
            return False
    return True


def _expand(vals: list[int], length: int | None) -> list[int]:
    """`int[2]` given one value means that value twice (PyTorch expands it)."""
    return vals * length if length and len(vals) == 1 else vals


def _log(n: float) -> float:
    return math.log1p(max(n, 0))


class Featurizer:
    """Fixed-length numeric features for one API's calls; the names say what each column means."""

    def __init__(self, spec: ApiSpec) -> None:
        self.spec = spec
        self.names: list[str] = []
        self._build_names()

    # -- layout
    def _entities(self) -> list[str]:
        out = []
        for a in self.spec.args:
            if a.kind == "tensor":
                out.append(a.name)
            elif a.kind == "tensors":
                out.extend(f"{a.name}[{i}]" for i in range(MAX_ITEMS))
        return out

    def _build_names(self) -> None:
        n = self.names
        for arg in self.spec.args:
            p = arg.name
            n += [f"{p}.present", f"{p}.none"]
            if arg.kind == "tensor":
                n += self._tensor_names(p, arg)
            elif arg.kind == "tensors":
                n += [f"{p}.len", f"{p}.rank_min", f"{p}.rank_max", f"{p}.same_rank", f"{p}.same_shape",
                      f"{p}.diff_axis"]
                for i in range(MAX_ITEMS):
                    n += self._tensor_names(f"{p}[{i}]", arg)
            elif arg.kind in ("ints", "floats", "bools"):
                n += [f"{p}.len", f"{p}.min", f"{p}.max", f"{p}.neg", f"{p}.zero", f"{p}.unique", f"{p}.logprod"]
                n += [f"{p}[{i}]" for i in range(MAX_LIST)]
            elif arg.kind == "str":
                n += [f"{p}=={c}" for c in arg.choices]
                if arg.name == "equation":
                    n += [f"{p}.terms", f"{p}.terms==tensors", f"{p}.rank_mismatch", f"{p}.size_conflict",
                          f"{p}.arrow", f"{p}.out_unknown", f"{p}.out_repeat"]
            elif arg.kind == "dtype":
                n += [f"{p}=={d}" for d in arg.dtypes]
            else:  # int, float, bool, scalar
                n += [f"{p}.value", f"{p}.is_float", f"{p}.nonfinite"]
        ents = self._entities()
        for i, ea in enumerate(ents):
            for eb in ents[i + 1:]:
                q = f"{ea}~{eb}"
                n += [f"{q}.rank_eq", f"{q}.broadcast", f"{q}.shape_eq", f"{q}.dtype_eq", f"{q}.le", f"{q}.ge",
                      f"{q}.d0==rank_b", f"{q}.rank_a==d0"]
                n += [f"{q}.d{x}=={y}" for x in range(MAX_RANK) for y in range(MAX_RANK)]
                n += [f"{q}.d-{x}==-{y}" for x in (1, 2, 3) for y in (1, 2, 3)]
        ints = _int_args(self.spec)
        lists = [a for a in self.spec.args if a.kind == "ints"]
        for t in self.spec.args:  # concat: the one axis where a list's shapes differ is the `dim` argument
            if t.kind == "tensors":
                n += [f"{a.name}@{t.name}.diff_axis_eq" for a in ints]
        for e in ents:
            for a in ints:
                q = f"{a.name}@{e}"
                n += [f"{q}.valid_dim", f"{q}.valid_dim_incl", f"{q}-last", f"{q}-first", f"{q}<=last",
                      f"{q}<=numel", f"{q}-max"]
                for b in ints:
                    if b is not a:
                        n += [f"{q}<=size[{b.name}]", f"{q}-size[{b.name}]"]
            for a in lists:
                q = f"{a.name}@{e}"
                n += [f"{q}.len-rank", f"{q}.valid_dims", f"{q}.dims_unique", f"{q}.broadcast_to",
                      f"{q}.prod==numel", f"{q}.fits_trailing", f"{q}.half_fits_trailing"]
        for i, a in enumerate(lists):
            for b in lists[i + 1:]:
                q = f"{a.name}~{b.name}"
                n += [f"{q}.len_eq", f"{q}.le", f"{q}.twice_le", f"{q}.twice_ge"]

    @staticmethod
    def _tensor_names(p: str, a: ArgSpec) -> list[str]:
        out = [f"{p}.rank", f"{p}.logn", f"{p}.zero_dim", f"{p}.min_dim", f"{p}.max_dim"]
        out += [f"{p}.d{i}" for i in range(MAX_RANK)] + [f"{p}.d-{i}" for i in (1, 2, 3)]
        out += [f"{p}.d-1==d-2", f"{p}.d-1==d-3", f"{p}.d-2==d-3", f"{p}.d0==d1", f"{p}.all_dims_eq"]
        out += [f"{p}.float", f"{p}.int", f"{p}.bool", f"{p}.complex", f"{p}.half"]
        out += [f"{p}.dtype=={d}" for d in a.dtypes]
        out += [f"{p}.bound", f"{p}.spd", f"{p}.value"]
        return out

    # -- values
    @staticmethod
    def _tensor_feats(t: dict[str, Any] | None, a: ArgSpec) -> list[float]:
        if t is None:
            return [-1.0] * (5 + MAX_RANK + 3 + 5 + 5 + len(a.dtypes)) + [-1.0, -1.0, -99.0]
        s = t["shape"]
        r = len(s)
        n = 1
        for d in s:
            n *= d
        dt = t["dtype"]
        f: list[float] = [r, _log(n), float(0 in s), min(s) if s else -1, max(s) if s else -1]
        f += [s[i] if i < r else -1 for i in range(MAX_RANK)]
        f += [s[-i] if i <= r else -1 for i in (1, 2, 3)]
        # relations inside one tensor: square matrices (inv, det, cholesky), equal spatial dims
        f += [float(s[-1] == s[-2]) if r >= 2 else -1.0, float(s[-1] == s[-3]) if r >= 3 else -1.0,
              float(s[-2] == s[-3]) if r >= 3 else -1.0, float(s[0] == s[1]) if r >= 2 else -1.0,
              float(len(set(s)) <= 1)]
        f += [float(dt.startswith(("float", "bfloat"))), float(dt.startswith(("int", "uint"))),
              float(dt == "bool"), float(dt.startswith("complex")), float(dt in ("float16", "bfloat16"))]
        f += [float(dt == d) for d in a.dtypes]
        # contents the generator chose: an index bound, positive-definite matrices, an explicit scalar (axis)
        vals = t.get("vals")
        f += [float(t.get("hi", -1)), float(t.get("fill") == "spd"),
              float(vals[0]) if vals and n == 1 else -99.0]
        return f

    def transform_one(self, call: Call) -> list[float]:
        f: list[float] = []
        ents: dict[str, dict[str, Any] | None] = {}
        values: dict[str, float | None] = {}
        lists: dict[str, list[int] | None] = {}
        v: Any
        tensor_ranks: list[int] = []
        diff_axes: dict[str, tuple[int, int]] = {}  # tensor list -> (differing axis, rank)
        for a in self.spec.args:
            v = call.get(a.name)
            present = v is not None
            none = present and v.get("t") == "none"
            f += [float(present), float(none)]
            real: Any = v if present and not none else None
            if a.kind == "tensor":
                ents[a.name] = real
                f += self._tensor_feats(real, a)
                if real is not None:
                    tensor_ranks.append(len(real["shape"]))
                if a.role == "axis":
                    tv = real.get("vals") if real is not None else None
                    values[a.name] = float(tv[0]) if tv and len(tv) == 1 else None
            elif a.kind == "tensors":
                items = real["items"] if real is not None else []
                ranks = [len(i["shape"]) for i in items]
                tensor_ranks.extend(ranks)
                dax = _list_diff_axis([i["shape"] for i in items])
                diff_axes[a.name] = (dax, ranks[0] if ranks else 0)
                f += [len(items) if real is not None else -1, min(ranks, default=-1), max(ranks, default=-1),
                      float(len(set(ranks)) <= 1), float(len({tuple(i["shape"]) for i in items}) <= 1), dax]
                for i in range(MAX_ITEMS):
                    it = items[i] if i < len(items) else None
                    ents[f"{a.name}[{i}]"] = it
                    f += self._tensor_feats(it, a)
            elif a.kind in ("ints", "floats", "bools"):
                vals = [float(x) for x in real["v"]] if real is not None else None
                if a.kind == "ints":
                    lists[a.name] = [int(x) for x in vals] if vals is not None else None  # type: ignore[assignment]
                if vals is None:
                    f += [-1.0, 0, 0, -1, -1, -1, -1] + [0.0] * MAX_LIST
                else:
                    prod = 1.0
                    for x in vals:
                        prod *= abs(x)
                    f += [len(vals), min(vals, default=0), max(vals, default=0), float(any(x < 0 for x in vals)),
                          float(any(x == 0 for x in vals)), float(len(set(vals)) == len(vals)), _log(prod)]
                    f += [vals[i] if i < len(vals) else 0.0 for i in range(MAX_LIST)]
            elif a.kind == "str":
                s = real["v"] if real is not None else None
                f += [float(s == c) for c in a.choices]
                if a.name == "equation":
                    f += self._equation_feats(s, call)
            elif a.kind == "dtype":
                d = real["v"] if real is not None else None
                f += [float(d == x) for x in a.dtypes]
            else:
                raw = real["v"] if real is not None else None
                num = float(raw) if isinstance(raw, (int, float)) else 0.0
                finite = math.isfinite(num)
                values[a.name] = num if real is not None and finite else None
                f += [num if finite else 0.0, float(isinstance(raw, float)), float(not finite)]
        names = list(ents)
        for i, a_name in enumerate(names):
            ta = ents[a_name]
            for b_name in names[i + 1:]:
                tb = ents[b_name]
                if ta is None or tb is None:
                    f += [-1.0] * (8 + MAX_RANK * MAX_RANK + 9)
                    continue
                sa, sb = ta["shape"], tb["shape"]
                same = len(sa) == len(sb)
                # elementwise size order (gather/scatter: index no larger than self outside `dim`)
                f += [float(same), float(_broadcastable(sa, sb)), float(sa == sb), float(ta["dtype"] == tb["dtype"]),
                      float(same and all(x <= y for x, y in zip(sa, sb, strict=True))),
                      float(same and all(x >= y for x, y in zip(sa, sb, strict=True))),
                      # a vector with one entry per dim of the other tensor (multiples, perm, paddings)
                      float(sa[0] == len(sb)) if sa else -1.0, float(sb[0] == len(sa)) if sb else -1.0]
                f += [(float(sa[x] == sb[y]) if x < len(sa) and y < len(sb) else -1.0)
                      for x in range(MAX_RANK) for y in range(MAX_RANK)]
                f += [(float(sa[-x] == sb[-y]) if x <= len(sa) and y <= len(sb) else -1.0)
                      for x in (1, 2, 3) for y in (1, 2, 3)]
        int_args = _int_args(self.spec)
        list_args = [a for a in self.spec.args if a.kind == "ints"]
        for t_arg in self.spec.args:
            if t_arg.kind != "tensors":
                continue
            dax, rank = diff_axes.get(t_arg.name, (-3, 0))
            for a in int_args:
                v = values.get(a.name)
                if v is None or dax == -3 or rank == 0:
                    f.append(-1.0)
                elif dax == -1:  # all shapes equal: any axis in range concatenates
                    f.append(2.0 if -rank <= v < rank else 0.0)
                else:
                    f.append(float(dax >= 0 and -rank <= v < rank and int(v) % rank == dax))
        for e in names:
            t = ents[e]
            s = t["shape"] if t is not None else None
            for a in int_args:
                v = values.get(a.name)
                if s is None or v is None:
                    f += [-1.0] * (7 + 2 * (len(int_args) - 1))
                    continue
                r = len(s)
                last = s[-1] if s else 1
                first = s[0] if s else 1
                numel = 1
                for d in s:
                    numel *= d
                f += [float(-r <= v < r), float(-max(r, 1) <= v < max(r, 1)), v - last, v - first,
                      float(v <= last), float(v <= numel), v - max(s, default=1)]
                for b in int_args:
                    if b is a:
                        continue
                    w = values.get(b.name)
                    if w is None or not (-max(r, 1) <= w < max(r, 1)) or w != int(w):
                        f += [-1.0, -99.0]
                        continue
                    size = s[int(w)] if s else 1
                    f += [float(v <= size), v - size]
            for a in list_args:
                ivals = lists.get(a.name)
                if s is None or ivals is None:
                    f += [-9.0] * 7
                    continue
                r = len(s)
                numel = 1
                for d in s:
                    numel *= d
                prod = 1
                for x in ivals:
                    prod *= x
                valid = all(-max(r, 1) <= x < max(r, 1) for x in ivals)
                norm = {x % max(r, 1) for x in ivals} if valid else set()
                bto = len(ivals) >= r and all(
                    y == x or x == 1 for x, y in zip(reversed(s), reversed(ivals), strict=False)
                ) and all(y >= 0 for y in ivals)
                ev = _expand(ivals, a.length)
                k = len(ev)
                trailing = s[r - k:] if 0 < k <= r else []
                fits = float(bool(trailing) and all(0 < x <= d for x, d in zip(ev, trailing, strict=False)))
                half = float(bool(trailing) and all(0 <= x <= d // 2 for x, d in zip(ev, trailing, strict=False)))
                f += [len(ivals) - r, float(valid), float(valid and len(norm) == len(ivals)), float(bto),
                      float(prod == numel), fits, half]
        for i, a in enumerate(list_args):  # list against list: padding <= kernel / 2, stride <= kernel, ...
            for b in list_args[i + 1:]:
                va, vb = lists.get(a.name), lists.get(b.name)
                if va is None or vb is None:
                    f += [-1.0] * 4
                    continue
                xa, xb = _expand(va, a.length), _expand(vb, b.length)
                same = len(xa) == len(xb)
                f += [float(same), float(same and all(x <= y for x, y in zip(xa, xb, strict=False))),
                      float(same and all(2 * x <= y for x, y in zip(xa, xb, strict=False))),
                      float(same and all(2 * y <= x for x, y in zip(xa, xb, strict=False)))]
        return f

    @staticmethod
    def _equation_feats(eq: str | None, call: Call) -> list[float]:
        if not eq:
            return [-1.0] * 7
        ranks: list[list[int]] = []
        for v in call.values():
            if v.get("t") == "tensors":
                ranks = [i["shape"] for i in v["items"]]
        lhs, arrow, rhs = eq.partition("->")
        terms = lhs.split(",")
        mismatch = sum(1 for t, s in zip(terms, ranks, strict=False) if len(t) != len(s))
        sizes: dict[str, set[int]] = {}
        for t, s in zip(terms, ranks, strict=False):
            for c, d in zip(t, s, strict=False):
                sizes.setdefault(c, set()).add(d)
        conflict = sum(1 for v in sizes.values() if len(v - {1}) > 1 or len(v) > 1 and 1 not in v)
        letters = set(re.sub(r"[^a-zA-Z]", "", lhs))
        return [len(terms), float(len(terms) == len(ranks)), mismatch, conflict, float(bool(arrow)),
                float(any(c not in letters for c in rhs)), float(len(set(rhs)) != len(rhs))]

    def transform(self, calls: Sequence[Call]) -> Any:
        import numpy as np

        return np.asarray([self.transform_one(c) for c in calls], dtype=float).reshape(len(calls), len(self.names))


def _int_args(spec: ApiSpec) -> list[ArgSpec]:
    """Integer-valued arguments: ints and scalars, and axes given as scalar tensors."""
    return [a for a in spec.args if a.kind in ("int", "scalar") or a.role == "axis"]


def _list_diff_axis(shapes: Sequence[Sequence[int]]) -> int:
    """The only axis where a list's shapes differ; -1 when all are equal, -2 when ranks or several axes differ."""
    if not shapes:
        return -1
    first = shapes[0]
    if any(len(s) != len(first) for s in shapes):
        return -2
    axes = {i for s in shapes for i, (x, y) in enumerate(zip(first, s, strict=True)) if x != y}
    return -1 if not axes else (axes.pop() if len(axes) == 1 else -2)


# ------------------------------------------------------------------------------------- classifier

@lru_cache(maxsize=1)
def _controller() -> Any:
    """Finding the loaded thread pools takes ~20 ms; limiting them afterwards takes microseconds."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _one_thread() -> Any:
    return _controller().limit(limits=1)


CANDIDATES = ("gradient_boosting", "extra_trees", "random_forest", "logistic_regression")


def _make(name: str, random_state: int) -> Any:
    from sklearn.ensemble import ExtraTreesClassifier, HistGradientBoostingClassifier, RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if name == "gradient_boosting":
        return HistGradientBoostingClassifier(max_iter=60, learning_rate=0.2, max_leaf_nodes=15,
                                              random_state=random_state)
    if name == "extra_trees":
        return ExtraTreesClassifier(n_estimators=60, min_samples_leaf=1, random_state=random_state, n_jobs=1)
    if name == "random_forest":
        return RandomForestClassifier(n_estimators=60, random_state=random_state, n_jobs=1)
    if name == "logistic_regression":
        return make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=300))
    raise ValueError(f"unknown classifier {name!r}")


@dataclass(frozen=True)
class Choice:
    """How a candidate did in cross-validation at its recall-targeted threshold."""

    name: str
    precision: float
    recall: float
    threshold: float


def _f2(c: Choice) -> float:
    """F-beta with beta 2: recall counts more than precision (a filter must not hide valid inputs)."""
    return 5 * c.precision * c.recall / max(4 * c.precision + c.recall, 1e-12)


class ValidityClassifier:
    """Predicts whether an input is valid; candidates compared by cross-validated F2 at a recall-targeted threshold."""

    def __init__(self, candidates: Sequence[str] = CANDIDATES, cv: int = 3, target_recall: float = 0.95,
                 min_class: int = 6, random_state: int = 0) -> None:
        self.candidates = tuple(candidates)
        self.cv = cv
        self.target_recall = target_recall
        self.min_class = min_class
        self.random_state = random_state

    def fit(self, X: Any, y: Any) -> ValidityClassifier:
        # one thread: OpenMP spinning on a busy machine makes gradient boosting 10x slower, not faster
        with _one_thread():
            return self._fit(X, y)

    def _fit(self, X: Any, y: Any) -> ValidityClassifier:
        import numpy as np
        from sklearn.model_selection import StratifiedKFold, cross_val_predict

        y = np.asarray(y, dtype=int)
        pos, neg = int(y.sum()), int(len(y) - y.sum())
        self.n_train_ = len(y)
        self.n_valid_ = pos
        self.cv_results_: list[Choice] = []
        self.constant_: int | None
        if pos < self.min_class or neg < self.min_class:
            # too few of one class to learn from: keep everything (recall 1) or, if nothing was ever
            # valid, still keep everything: the filter must never hide the rare valid input
            self.name_ = f"none (only {pos} valid and {neg} invalid training inputs)"
            self.constant_ = 1
            self.threshold_ = 0.5
            self.model_ = None
            return self
        self.constant_ = None
        folds = StratifiedKFold(n_splits=min(self.cv, pos, neg), shuffle=True, random_state=self.random_state)
        best: Choice | None = None
        for name in self.candidates:
            proba = cross_val_predict(_make(name, self.random_state), X, y, cv=folds, method="predict_proba")[:, 1]
            choice = self._at_recall(name, proba, y)
            self.cv_results_.append(choice)
            if best is None or (_f2(choice), choice.precision) > (_f2(best), best.precision):
                best = choice
        assert best is not None
        self.name_ = best.name
        self.threshold_ = best.threshold
        self.model_ = _make(best.name, self.random_state).fit(X, y)
        return self

    def _at_recall(self, name: str, proba: Any, y: Any) -> Choice:
        """The highest threshold whose out-of-fold recall reaches the target, and its precision."""
        import numpy as np

        pos = proba[y == 1]
        # a small margin below the k-th largest valid score, so near-ties are kept
        k = max(1, math.ceil(self.target_recall * len(pos)))
        thr = float(np.sort(pos)[::-1][k - 1]) - 1e-9
        thr = min(thr, 0.5)
        keep = proba >= thr
        tp = int((keep & (y == 1)).sum())
        prec = tp / max(int(keep.sum()), 1)
        return Choice(name, prec, tp / max(len(pos), 1), thr)

    def predict_proba(self, X: Any) -> Any:
        import numpy as np

        if self.constant_ is not None:
            return np.full(len(X), float(self.constant_))
        assert self.model_ is not None
        with _one_thread():
            return self.model_.predict_proba(X)[:, 1]

    def predict(self, X: Any) -> Any:
        return self.predict_proba(X) >= self.threshold_

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name_,
            "threshold": round(self.threshold_, 4),
            "trained_on": self.n_train_,
            "trained_valid": self.n_valid_,
            "cross_validation": [
                {"name": c.name, "precision": round(c.precision, 4), "recall": round(c.recall, 4)}
                for c in self.cv_results_
            ],
        }


# ------------------------------------------------------------------------------------ persistence


def model_path(home: Path, spec: ApiSpec) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.+-]", "_", f"{spec.api}")
    return home / "fuzz" / "models" / spec.framework / f"{safe}-{spec.version}.pkl"


def save_model(home: Path, spec: ApiSpec, clf: ValidityClassifier, feature_names: list[str]) -> Path:
    """Atomic write of the fitted classifier with what it was trained for (API, version, feature layout)."""
    import sklearn

    path = model_path(home, spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    blob = {"format": FORMAT, "sklearn": sklearn.__version__, "framework": spec.framework, "api": spec.api,
            "version": spec.version, "schema": spec.schema, "features": feature_names, "classifier": clf}
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as fh:
        pickle.dump(blob, fh)
    tmp.replace(path)
    return path


def load_model(home: Path, spec: ApiSpec, feature_names: list[str]) -> ValidityClassifier | None:
    """The saved classifier if it was trained for this API, version, scikit-learn and feature layout."""
    import sklearn

    path = model_path(home, spec)
    if not path.exists():
        return None
    try:
        with open(path, "rb") as fh:
            blob = pickle.load(fh)  # our own artefact under settings.home
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        return None
    if (blob.get("format"), blob.get("sklearn"), blob.get("version"), blob.get("schema"), blob.get("features")) != (
        FORMAT, sklearn.__version__, spec.version, spec.schema, feature_names
    ):
        return None
    clf = blob.get("classifier")
    return clf if isinstance(clf, ValidityClassifier) else None
