"""Duplicate candidates: TF-IDF cosine similarity between reports, read without their tracker template."""

from __future__ import annotations

import math
from collections.abc import Sequence

from sftl.model import Issue
from sftl.screen.documents import prepare


def similar(target_text: str, corpus: Sequence[tuple[str, str]], top: int = 5) -> list[tuple[str, float]]:
    """The most similar corpus entries by TF-IDF cosine: duplicate candidates, best first."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    if not corpus or top <= 0:
        return []
    texts = [t or "" for _, t in corpus]
    vec = TfidfVectorizer(lowercase=True, sublinear_tf=True, token_pattern=r"(?u)\b[a-zA-Z_][\w.]+\b",
                          ngram_range=(1, 2), min_df=1, stop_words="english")
    try:
        X = vec.fit_transform(texts + [target_text or ""])
    except ValueError:  # empty vocabulary: nothing to compare
        return []
    sims = (X[:-1] @ X[-1].T).toarray().ravel()
    order = sorted(range(len(sims)), key=lambda i: -sims[i])[:top]
    return [(corpus[i][0], round(float(sims[i]), 4)) for i in order if sims[i] > 0 and not math.isnan(sims[i])]


def duplicate_text(issue: Issue) -> str:
    """What duplicate search compares: title (twice), description, code and output, not the template."""
    s = prepare(issue).sections
    return f"{s.title}\n{s.title}\n{s.description}\n{s.code}\n{s.output}"
