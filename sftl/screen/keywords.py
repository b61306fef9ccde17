"""The published TF-IDF keyword screener: section-weighted keyword scores and thresholds, gated by the rules."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from sftl.errors import InputError
from sftl.model import Category, Screening
from sftl.screen.documents import Doc, as_docs
from sftl.screen.rules import GCRDE_RULE_MIN, STRONG_GCRDE_MARGIN

SECTION_WEIGHTS: dict[str, float] = {"title": 2.0, "description": 1.0, "output": 1.0, "code": 0.5, "template": 0.0}

# Keyword sets of the published method, with weights (phrases are matched as n-grams).
KEYWORDS: dict[str, dict[str, float]] = {
    "mme": {
        "attributeerror": 3.0, "has no attribute": 3.0, "no attribute": 1.5, "attribute": 1.0,
        "modulenotfounderror": 3.0, "no module named": 3.0, "no module": 1.5, "module named": 1.5,
        "importerror": 2.0, "cannot import name": 3.0, "cannot import": 2.0, "import name": 1.5,
        "not found": 0.5, "import": 0.5, "module": 0.5, "missing": 0.5, "removed": 0.5, "deprecated": 0.5,
    },
    "gcrde": {
        "cpu": 1.5, "gpu": 1.5, "cuda": 1.0, "mps": 1.0, "cpu and gpu": 3.0, "gpu and cpu": 3.0,
        "cpu and cuda": 3.0, "cuda and cpu": 3.0, "cpu vs gpu": 3.0, "cpu vs cuda": 3.0, "on cpu": 1.0,
        "on gpu": 1.0, "on cuda": 1.0, "the cpu": 1.0, "the gpu": 1.0, "result": 1.0, "results": 1.0,
        "output": 0.5, "outputs": 0.5, "different": 1.5, "differ": 1.5, "differs": 1.5, "difference": 1.0,
        "inconsistent": 2.0, "inconsistency": 2.0, "mismatch": 2.0, "discrepancy": 2.0, "disagree": 1.5,
        "wrong": 1.0, "incorrect": 1.0, "nan": 0.5, "inf": 0.5, "same": 0.5,
    },
}
# Low on purpose: TF divides by the report's length, and real reports with long tracebacks and code
# score 10x lower than short ones; the rules carry the precision.
THRESHOLDS: dict[str, float] = {"mme": 0.005, "gcrde": 0.005}

_TOKEN_PATTERN = r"(?u)\b\w+\b"


class KeywordScreener:
    """TF-IDF keyword screening with per-category weights and thresholds, gated by rules (scikit-learn style)."""

    method = "keywords"

    def __init__(
        self,
        keywords: dict[str, dict[str, float]] | None = None,
        thresholds: dict[str, float] | None = None,
        section_weights: dict[str, float] | None = None,
        gcrde_rule_min: float = GCRDE_RULE_MIN,
        use_rules: bool = True,
    ) -> None:
        self.keywords = keywords
        self.thresholds = thresholds
        self.section_weights = section_weights
        self.gcrde_rule_min = gcrde_rule_min
        self.use_rules = use_rules

    # -- fitting --------------------------------------------------------------------------------

    def vocabulary(self) -> list[str]:
        kw = self.keywords or KEYWORDS
        return sorted({t for terms in kw.values() for t in terms})

    def _vectorizer(self) -> Any:
        """The scikit-learn vectorizer these counts equal (kept for reference and for the tests)."""
        from sklearn.feature_extraction.text import CountVectorizer

        return CountVectorizer(vocabulary=self.vocabulary(), lowercase=True, token_pattern=_TOKEN_PATTERN,
                               ngram_range=(1, 3))

    def _counts(self, docs: Sequence[Doc]) -> tuple[Any, Any]:
        """Section-weighted keyword counts (docs x vocab) and weighted token totals (sum_k n_kj).

        Equal to CountVectorizer(vocabulary=..., ngram_range=(1, 3), token_pattern=r"\\b\\w+\\b") on each
        section, but only the keyword n-grams are ever built, which makes 10,000 reports take a second.
        """
        import numpy as np
        from scipy.sparse import csr_matrix

        vocab = self.vocabulary()
        index = {t: i for i, t in enumerate(vocab)}
        phrases = [(t, index[t]) for t in vocab if " " in t]
        words = {t: index[t] for t in vocab if " " not in t}
        weights = self.section_weights or SECTION_WEIGHTS
        tok = re.compile(_TOKEN_PATTERN)
        data: list[float] = []
        cols: list[int] = []
        indptr = [0]
        total = np.zeros(len(docs))
        for r, d in enumerate(docs):
            acc: dict[int, float] = {}
            for name, w in weights.items():
                if w == 0:
                    continue
                text = getattr(d.sections, name)
                if not text:
                    continue
                tokens = tok.findall(text.lower())
                total[r] += w * len(tokens)
                for t in words.keys() & set(tokens):
                    acc[words[t]] = acc.get(words[t], 0.0) + w * tokens.count(t)
                if phrases:
                    joined = " " + " ".join(tokens) + " "
                    for t, j in phrases:
                        n = joined.count(" " + t + " ")
                        if n:
                            acc[j] = acc.get(j, 0.0) + w * n
            cols.extend(acc)
            data.extend(acc.values())
            indptr.append(len(cols))
        counts = csr_matrix((np.asarray(data, dtype=float), np.asarray(cols, dtype=np.int64), np.asarray(indptr)),
                            shape=(len(docs), len(vocab)))
        return counts, total

    def fit(self, texts: Iterable[Any], y: Any = None) -> KeywordScreener:
        """Learn IDF (log(|D| / (1 + df))) of the keyword terms on a corpus."""
        import numpy as np

        docs = as_docs(texts)
        if not docs:
            raise InputError("cannot fit the screener on an empty corpus")
        counts, _ = self._counts(docs)
        return self.fit_frequencies(np.asarray((counts > 0).sum(axis=0)).ravel(), len(docs))

    def present_terms(self, texts: Iterable[Any]) -> list[list[int]]:
        """Per report, the indices (into vocabulary()) of the keyword terms it contains: its share of df."""
        counts, _ = self._counts(as_docs(texts))
        return [sorted(int(j) for j in counts.getrow(i).indices) for i in range(counts.shape[0])]

    def fit_frequencies(self, document_frequency: Any, n_docs: int) -> KeywordScreener:
        """Fit from document frequencies counted elsewhere (e.g. kept per stored report): same as fit()."""
        import numpy as np

        if n_docs <= 0:
            raise InputError("cannot fit the screener on an empty corpus")
        idf = np.log(n_docs / (1.0 + np.asarray(document_frequency, dtype=float)))
        self.idf_ = np.maximum(idf, 0.0)  # a term in every document carries no evidence, not negative evidence
        self.vocabulary_ = {t: i for i, t in enumerate(self.vocabulary())}
        self.n_docs_ = n_docs
        return self

    # -- scoring --------------------------------------------------------------------------------

    def keyword_scores(self, docs: Sequence[Doc]) -> dict[str, Any]:
        """score_c(d) = sum_t w_t * TF(t, d) * IDF(t), per category."""
        return self._scores(docs)[0]

    def _scores(self, docs: Sequence[Doc]) -> tuple[dict[str, Any], Any]:
        import numpy as np

        if not hasattr(self, "idf_"):
            raise InputError("the keyword screener is not fitted; call fit(corpus) first")
        counts, total = self._counts(docs)
        tf = counts.multiply(1.0 / np.maximum(total, 1.0)[:, None]).tocsr()
        kw = self.keywords or KEYWORDS
        out = {}
        vocab = self.vocabulary()
        index = {t: i for i, t in enumerate(vocab)}
        for cat, terms in kw.items():
            wv = np.zeros(len(vocab))
            for t, w in terms.items():
                wv[index[t]] = w
            out[cat] = np.asarray(tf @ (wv * self.idf_)).ravel()
        return out, tf

    def _evidence_words(self, tf: Any, row: int, cat: str) -> tuple[str, ...]:
        vocab = self.vocabulary()
        kw = (self.keywords or KEYWORDS)[cat]
        r = tf.getrow(row)
        contrib = [(r[0, i] * kw.get(vocab[i], 0) * self.idf_[i], vocab[i]) for i in r.indices if vocab[i] in kw]
        contrib.sort(reverse=True)
        return tuple(t for v, t in contrib[:6] if v > 0)

    def screen_docs(self, docs: Sequence[Doc]) -> list[Screening]:
        scores, tf = self._scores(docs)
        th = {**THRESHOLDS, **(self.thresholds or {})}
        out = []
        for i, d in enumerate(docs):
            raw = {c: float(scores[c][i]) for c in ("mme", "gcrde")}
            conf = {c: raw[c] / (raw[c] + th[c]) if raw[c] > 0 else 0.0 for c in raw}
            fires = {c: raw[c] >= th[c] for c in raw}
            reasons = []
            if self.use_rules:
                if not d.rules.mme:
                    fires["mme"] = False
                    conf["mme"] *= 0.25
                if d.rules.gcrde < self.gcrde_rule_min:
                    fires["gcrde"] = False
                    conf["gcrde"] *= 0.25
                reasons.append(f"mme rule: {d.rules.mme_why}")
                reasons.append(f"gcrde evidence {d.rules.gcrde:g}: {'; '.join(d.rules.gcrde_why) or 'none'}")
                # a long report (or a corpus where every report says "CUDA") dilutes TF or IDF below the
                # threshold; a stated missing-module error or strong device-comparison evidence still decides
                strong = {"mme": d.rules.mme, "gcrde": d.rules.gcrde >= self.gcrde_rule_min + STRONG_GCRDE_MARGIN}
                for c in ("mme", "gcrde"):
                    if strong[c] and not fires[c]:
                        fires[c] = True
                        conf[c] = max(conf[c], 0.5 + min(d.rules.gcrde, 8.0) / 40 if c == "gcrde" else 0.6)
                        reasons.append(f"{c}: the rule outweighs a keyword score of {raw[c]:.4f} < {th[c]:g}")
            winners = [c for c in ("mme", "gcrde") if fires[c]]
            if winners:
                cat = max(winners, key=lambda c: conf[c])
                evidence = self._evidence_words(tf, i, cat)
                if self.use_rules and cat == "mme":
                    evidence = (d.rules.mme_why, *evidence)
                elif self.use_rules and not evidence:
                    evidence = d.rules.gcrde_why[:3]
            else:
                cat = "other"
                evidence = ()
            conf["other"] = 1.0 - max(conf["mme"], conf["gcrde"]) if cat == "other" else min(
                1.0 - max(conf["mme"], conf["gcrde"]), 0.49)
            out.append(Screening(Category(cat), {k: round(v, 4) for k, v in conf.items()}, evidence,
                                 self.method, False, " | ".join(reasons)))
        return out

    def predict(self, texts: Iterable[Any]) -> list[str]:
        return [s.category.value for s in self.screen_docs(as_docs(texts))]

    def raw_scores(self, texts: Iterable[Any]) -> dict[str, list[float]]:
        scores = self.keyword_scores(as_docs(texts))
        return {k: [float(x) for x in v] for k, v in scores.items()}


def default_screener(corpus_texts: Iterable[Any]) -> KeywordScreener:
    """The standard keyword screener, IDF fitted on the given corpus."""
    return KeywordScreener().fit(corpus_texts)
