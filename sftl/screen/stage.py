"""The screening stage: one issue, many issues, or a store's targets with the keyword IDF fitted on the corpus."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sftl.model import Category, Extraction, Issue, Screening
from sftl.screen.documents import Doc, prepare, prepare_many
from sftl.screen.keywords import KeywordScreener
from sftl.screen.rules import GCRDE_RULE_MIN


def screen(issue: Issue, extraction: Extraction | None, screener: Any) -> Screening:
    """Screen one issue with a fitted screener (keyword or learned)."""
    return screener.screen_docs([prepare(issue, extraction)])[0]


def screen_many(items: Sequence[Any], screener: Any, extractions: Sequence[Extraction | None] | None = None) -> list[Screening]:
    """Screen many issues in one vectorised pass."""
    exs = list(extractions) if extractions is not None else [None] * len(items)
    docs = [prepare(it, ex) for it, ex in zip(items, exs, strict=True)]
    return screener.screen_docs(docs)


MIN_CORPUS = 30  # below this many documents the keyword IDF says nothing; the rules decide alone


def rules_screening(doc: Doc, corpus_size: int) -> Screening:
    """Screening by the rules alone, for stores too small to fit the keyword IDF."""
    r = doc.rules
    cat = Category.MME if r.mme else Category.GCRDE if r.gcrde >= GCRDE_RULE_MIN else Category.OTHER
    scores = {"mme": 1.0 if r.mme else 0.0, "gcrde": round(max(0.0, min(1.0, r.gcrde / (2 * GCRDE_RULE_MIN))), 4)}
    scores["other"] = round(1.0 - max(scores.values()), 4)
    evidence = (r.mme_why,) if cat == Category.MME else r.gcrde_why if cat == Category.GCRDE else ()
    reason = (f"only {corpus_size} issue(s) to fit the keyword IDF on (< {MIN_CORPUS}); the screening rules decided "
              f"(mme: {r.mme_why}; gcrde evidence {r.gcrde:g})")
    return Screening(cat, scores, tuple(evidence), "rules", False, reason)


def screen_corpus(targets: Sequence[Issue], corpus: Iterable[Issue], screener: Any = None) -> list[Screening]:
    """Screen `targets`; without a screener, fit the keyword IDF on `corpus` plus the targets."""
    target_docs = prepare_many(list(targets))
    if screener is not None:
        return list(screener.screen_docs(target_docs))
    keys = {t.key for t in targets}
    others = [c for c in corpus if c.key not in keys]
    all_docs = target_docs + prepare_many(others)
    if len(all_docs) < MIN_CORPUS:
        return [rules_screening(d, len(all_docs)) for d in target_docs]
    return KeywordScreener().fit(all_docs).screen_docs(target_docs)
