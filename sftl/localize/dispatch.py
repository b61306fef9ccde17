"""The registry's `sftl` and `paper` localizers: route an issue to the MME or GCRDE ranker by its category."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sftl.model import Category, Extraction, Issue, Localization, Outcome
from sftl.sources import SourceProvider

if TYPE_CHECKING:
    from sftl.history import HistoryPrior

# the category localizer's suspects that join the candidates, whatever the list's length asked for (the model
# learned from lists of this depth)
CATEGORY_POOL = 30


def _route(
    method: str, issue: Issue, extraction: Extraction, category: Category, source: SourceProvider | None, top: int
) -> Localization:
    if category == Category.MME:
        from sftl.localize import mme

        fn = mme.localize_sftl if method == "sftl" else mme.localize_paper
        return fn(issue, extraction, source, top=top)
    if category == Category.GCRDE:
        try:
            from sftl.localize.gcrde import localize_gcrde
        except ImportError:
            return Localization(method, (), Outcome.SKIPPED, "the GPU/CPU discrepancy localizer is not installed")
        return localize_gcrde(issue, extraction, source, method=method, top=top)
    return Localization(
        method, (), Outcome.SKIPPED, f"category {category.value!r}: neither a missing-module error nor a GPU/CPU discrepancy"
    )


def localize_sftl(
    issue: Issue, extraction: Extraction, category: Category, source: SourceProvider | None, top: int = 10,
    prior: HistoryPrior | None = None,
) -> Localization:
    """Our localizers (default): one learned ranking of candidates of every kind, for every report.

    A missing-module error's or a discrepancy's own localizer reads the report first; its suspects join the
    candidates and its order and evidence are features the model weighs. A missing-module error it abstained on
    with its reason (a name only the user's code refers to: no framework file to fix) keeps that answer.
    `prior`: the stored history's files of similar earlier fixes, one more feature (`sftl.history_io`).
    """
    from sftl.localize.candidates import localize_any

    category_loc = (_route("sftl", issue, extraction, category, source, CATEGORY_POOL)
                    if category != Category.OTHER else None)
    if category_loc is not None:
        category_loc = only_code(category_loc)
    # a missing-module error's abstention is a judgement (a name only the user's code refers to); a discrepancy's
    # ("no kernel file for these ops") only says its own evidence ran out, and the candidates may still go on
    if category == Category.MME and category_loc is not None and category_loc.outcome == Outcome.ABSTAINED:
        return category_loc
    return localize_any(issue, extraction, category, source, top, category_loc=category_loc, prior=prior)


def only_code(loc: Localization) -> Localization:
    """The localization without suspects that are no code a fix changes (a test, test data, docs, a build file)."""
    from dataclasses import replace

    from sftl.localize.candidates.corpus import may_be_suspect

    kept = tuple(s for s in loc.suspects if may_be_suspect(s.path))
    if len(kept) == len(loc.suspects):
        return loc
    if not kept and loc.outcome == Outcome.LOCATED:
        return replace(loc, suspects=(), outcome=Outcome.SKIPPED,
                       reason=f"{loc.reason}; its suspects were no source files (tests, data, docs)"[:1000])
    return replace(loc, suspects=kept)


def localize_paper(
    issue: Issue, extraction: Extraction, category: Category, source: SourceProvider | None, top: int = 10
) -> Localization:
    """The published method, reproduced."""
    return _route("paper", issue, extraction, category, source, top)
