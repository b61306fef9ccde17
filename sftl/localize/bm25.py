"""The BM25 baseline: the report's whole text against every source file's contents and path (BugLocator-style).

What a maintainer would otherwise use: lexical retrieval (`bm25s`) over the release's source files, any
category, tests and docs left out; it shares the corpus (and its cache) with sftl's candidate ranker.
"""

from __future__ import annotations

from pathlib import Path

from sftl.localize.baselines import side_of
from sftl.localize.candidates.corpus import build_index, default_cache_dir
from sftl.localize.candidates.tokens import word_list
from sftl.model import Category, Extraction, Issue, Localization, Outcome, Suspect
from sftl.sources import SourceProvider


def localize_bm25(
    issue: Issue,
    extraction: Extraction,
    category: Category,
    source: SourceProvider | None,
    top: int,
    *,
    cache_dir: Path | None = None,
) -> Localization:
    """Rank the release's source files by BM25 of the whole report (title, body, comments)."""
    import numpy as np

    if source is None:
        return Localization("bm25", (), Outcome.SKIPPED, "no sources of the report's release")
    index = build_index(source, cache_dir if cache_dir is not None else default_cache_dir())
    if not index.paths:
        return Localization("bm25", (), Outcome.SKIPPED, f"no {source.framework} source files in {source.description}")
    query = word_list(issue.text)
    scores = index.scores(query)
    order = np.argsort(-scores, kind="stable")[: max(top, 1)]
    asked = set(query)
    suspects = []
    for d in order:
        if scores[d] <= 0:
            break
        shared = sorted(w for w in asked if index.holds(int(d), w))[:4]
        suspects.append(Suspect(index.paths[int(d)], round(float(scores[d]), 4), side_of(index.paths[int(d)]),
                                f"BM25 {scores[d]:.2f} with the report; shared words: {', '.join(shared)}"))
    if not suspects:
        return Localization("bm25", (), Outcome.ABSTAINED, "no source file shares a word with the report")
    return Localization("bm25", tuple(suspects), Outcome.LOCATED,
                        f"BM25 over {len(index.paths)} source files of {source.description}")
