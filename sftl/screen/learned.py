"""The learned screener: calibrated logistic regression over TF-IDF and rule features, abstaining below a precision target."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from sftl.errors import InputError
from sftl.model import Category, Screening
from sftl.screen.documents import Doc, as_docs, prepare
from sftl.screen.keywords import THRESHOLDS, KeywordScreener
from sftl.screen.rules import GCRDE_RULE_MIN

ARTEFACT_FORMAT = "sftl-screener"
ARTEFACT_VERSION = 1

FEATURE_NAMES = (
    "mme_match", "mme_veto", "mme_user", "mme_torchscript", "title_both", "title_diff", "title_one_device",
    "sent_both", "pair", "adjacent", "output_both", "code_both", "code_gpu_text_cpu", "narr_both", "narr_diff", "asym", "both", "perf",
    "oom", "nondet", "setup", "axis", "build", "placement", "gcrde_points", "mme_rule", "gcrde_rule",
)
CLASSES = ("gcrde", "mme", "other")


class LearnedScreener:
    """Calibrated logistic regression over section TF-IDF + rule features; abstains below a precision target."""

    method = "learned"

    def __init__(self, precision_target: float = 0.9, C: float = 1.0, calibration_cv: int = 3,
                 random_state: int = 0, rule_weight: float = 2.0) -> None:
        self.precision_target = precision_target
        self.C = C
        self.rule_weight = rule_weight  # rule features (0/1) count as much as a few strong words
        self.calibration_cv = calibration_cv
        self.random_state = random_state

    @staticmethod
    def _text(d: Doc) -> str:
        s = d.sections
        return f"{s.title}\n{s.title}\n{s.description}\n{s.output}\n{s.code}"

    def _features(self, docs: Sequence[Doc]) -> Any:
        import numpy as np
        from scipy.sparse import csr_matrix, hstack

        rows = []
        for d in docs:
            f = dict(d.rules.flags)
            f["mme_rule"] = float(d.rules.mme)
            f["gcrde_rule"] = float(d.rules.gcrde >= GCRDE_RULE_MIN)
            f["gcrde_points"] = max(-4.0, min(f.get("gcrde_points", 0.0), 8.0)) / 4.0
            rows.append([f.get(n, 0.0) for n in FEATURE_NAMES])
        kw = self.keywords_.keyword_scores(docs)
        kwm = np.column_stack([np.minimum(kw["mme"] / THRESHOLDS["mme"], 5.0), np.minimum(kw["gcrde"] / THRESHOLDS["gcrde"], 5.0)]) / 5.0
        dense = np.hstack([np.asarray(rows) * self.rule_scale_, kwm])
        tfidf = self.tfidf_.transform([self._text(d) for d in docs])
        return hstack([tfidf, csr_matrix(dense)]).tocsr()

    def fit(self, items: Iterable[Any], labels: Sequence[str]) -> LearnedScreener:
        from threadpoolctl import threadpool_limits  # a scikit-learn dependency

        # One BLAS thread: on a few hundred reports L-BFGS (LogisticRegression, the sigmoid calibration)
        # makes thousands of tiny BLAS calls, and waking OpenBLAS's threads for each cost 10-20x the
        # work itself (minutes of a 5-fold evaluation on a busy machine, against well under a second).
        with threadpool_limits(limits=1, user_api="blas"):
            return self._fit(items, labels)

    def _fit(self, items: Iterable[Any], labels: Sequence[str]) -> LearnedScreener:
        import numpy as np
        from sklearn.calibration import CalibratedClassifierCV
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import StratifiedKFold, cross_val_predict

        docs = as_docs(items)
        y = np.asarray([str(lbl) for lbl in labels])
        bad = sorted(set(y) - set(CLASSES))
        if bad:
            raise InputError(f"unknown labels {bad}; expected mme, gcrde or other")
        counts = {c: int((y == c).sum()) for c in CLASSES}
        if min(counts.values()) < max(2, self.calibration_cv):
            raise InputError(f"too few labelled issues per category to train ({counts}); need >= {max(2, self.calibration_cv)} each")
        self.keywords_ = KeywordScreener().fit(docs)
        self.rule_scale_ = self.rule_weight
        self.tfidf_ = TfidfVectorizer(lowercase=True, ngram_range=(1, 2), min_df=2, sublinear_tf=True,
                                      token_pattern=r"(?u)\b[a-zA-Z_][\w]+\b", max_features=20000)
        self.tfidf_.fit([self._text(d) for d in docs])
        X = self._features(docs)

        def make() -> Any:
            base = LogisticRegression(C=self.C, class_weight="balanced", max_iter=2000)
            cv = min(self.calibration_cv, min(counts.values()))
            return CalibratedClassifierCV(base, method="sigmoid", cv=cv)

        self.model_ = make().fit(X, y)
        # abstention: the lowest confidence whose predictions reached the precision target out-of-fold
        folds = min(5, min(counts.values()))
        proba = cross_val_predict(make(), X, y, cv=StratifiedKFold(folds, shuffle=True, random_state=self.random_state),
                                  method="predict_proba")
        classes = np.asarray(self.model_.classes_)
        pred = classes[proba.argmax(1)]
        conf = proba.max(1)
        self.min_confidence_ = 0.0
        order = np.argsort(-conf)
        correct = (pred == y)[order]
        prec = np.cumsum(correct) / np.arange(1, len(correct) + 1)
        ok = np.where(prec >= self.precision_target)[0]
        if len(ok) and prec[-1] < self.precision_target:
            self.min_confidence_ = float(conf[order][ok[-1]])
        self.classes_ = tuple(classes)
        return self

    def screen_docs(self, docs: Sequence[Doc]) -> list[Screening]:
        if not hasattr(self, "model_"):
            raise InputError("the learned screener is not trained; run `sftl screen --train LABELS.jsonl`")
        if not docs:
            return []
        import numpy as np

        X = self._features(docs)
        proba = self.model_.predict_proba(X)
        # the averaged coefficients and the feature names once per batch, not once per report
        coef = np.mean([est.estimator.coef_ for est in self.model_.calibrated_classifiers_], axis=0)
        names = (list(self.tfidf_.get_feature_names_out()) + [f"rule:{n}" for n in FEATURE_NAMES]
                 + ["keyword score:mme", "keyword score:gcrde"])
        out = []
        for i, d in enumerate(docs):
            scores = {c: round(float(p), 4) for c, p in zip(self.classes_, proba[i], strict=True)}
            cat = max(scores, key=lambda c: scores[c])
            evidence = self._evidence(X, i, cat, d, coef, names)
            abstain = scores[cat] < self.min_confidence_
            reason = (f"needs human triage: confidence {scores[cat]:.2f} < {self.min_confidence_:.2f} "
                      f"(precision target {self.precision_target:g})") if abstain else f"confidence {scores[cat]:.2f}"
            out.append(Screening(Category(cat), {k: scores.get(k, 0.0) for k in ("mme", "gcrde", "other")},
                                 evidence, self.method, bool(abstain), reason))
        return out

    def _evidence(self, X: Any, i: int, cat: str, d: Doc, coef: Any, names: list[str]) -> tuple[str, ...]:
        """The words and rule features that pushed this report towards its category most."""
        k = list(self.model_.classes_).index(cat)
        row = X.getrow(i)
        contrib = sorted(((row[0, j] * coef[k, j], names[j]) for j in row.indices), reverse=True)
        words = [n for v, n in contrib if v > 0][:6]
        if cat == "mme" and d.rules.mme:
            words.insert(0, d.rules.mme_why)
        return tuple(words)

    def predict(self, items: Iterable[Any]) -> list[str]:
        return [s.category.value for s in self.screen_docs(as_docs(items))]

    def predict_proba(self, items: Iterable[Any]) -> Any:
        return self.model_.predict_proba(self._features(as_docs(items)))

    # -- artefact -------------------------------------------------------------------------------

    def save(self, path: str | Path) -> Path:
        import os
        import tempfile

        import joblib
        import sklearn

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = {"format": ARTEFACT_FORMAT, "version": ARTEFACT_VERSION, "sklearn": sklearn.__version__, "model": self}
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        os.close(fd)
        joblib.dump(payload, tmp)
        os.replace(tmp, path)  # atomic: a crash never leaves half a model
        return path

    @staticmethod
    def load(path: str | Path) -> LearnedScreener:
        import joblib
        import sklearn

        path = Path(path)
        if not path.exists():
            raise InputError(f"no trained screener at {path}; run `sftl screen --train LABELS.jsonl` first")
        try:
            payload = joblib.load(path)
        except Exception as exc:
            raise InputError(f"the screener artefact {path} is unreadable ({type(exc).__name__}); retrain it") from exc
        if not isinstance(payload, dict) or payload.get("format") != ARTEFACT_FORMAT:
            raise InputError(f"{path} is not an sftl screener artefact")
        if payload.get("version") != ARTEFACT_VERSION or payload.get("sklearn") != sklearn.__version__:
            raise InputError(
                f"the screener at {path} was saved by artefact v{payload.get('version')} / scikit-learn "
                f"{payload.get('sklearn')}; this sftl needs v{ARTEFACT_VERSION} / {sklearn.__version__}: retrain it"
            )
        model = payload["model"]
        if not isinstance(model, LearnedScreener):
            raise InputError(f"{path} does not hold a learned screener")
        return model


def model_path(home: str | Path) -> Path:
    """Where the learned screener lives under settings.home."""
    return Path(home) / "models" / f"screener-v{ARTEFACT_VERSION}.joblib"


def load_labels(path: str | Path) -> tuple[list[Doc], list[str]]:
    """A labelled JSONL: lines with title/body[/error]/label, or a GitHub issue object plus "category"."""
    import json

    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    docs: list[Doc] = []
    labels: list[str] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}:{n}: not JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise InputError(f"{path}:{n}: expected a JSON object")
        label = obj.get("label") or obj.get("category")
        if isinstance(label, dict):
            label = label.get("name")
        if label not in CLASSES:
            raise InputError(f"{path}:{n}: label {label!r} is not mme, gcrde or other")
        docs.append(prepare({"title": obj.get("title") or "", "body": obj.get("body") or "",
                             "error": obj.get("error"), "url": obj.get("html_url") or obj.get("url") or f"line {n}"}))
        labels.append(str(label))
    if not docs:
        raise InputError(f"{path} holds no labelled issues")
    return docs, labels
