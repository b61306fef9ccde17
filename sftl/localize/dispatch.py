"""The registry's `sftl` and `paper` localizers: route an issue to the MME or GCRDE ranker by its category."""

from __future__ import annotations

from sftl.model import Category, Extraction, Issue, Localization, Outcome
from sftl.sources import SourceProvider


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
    issue: Issue, extraction: Extraction, category: Category, source: SourceProvider | None, top: int = 10
) -> Localization:
    """Our localizers (default): the category's evidence where there is one, and candidates for every report."""
    from sftl.localize.candidates import localize_any

    category_loc = _route("sftl", issue, extraction, category, source, top) if category != Category.OTHER else None
    return localize_any(issue, extraction, category, source, top, category_loc=category_loc)


def localize_paper(
    issue: Issue, extraction: Extraction, category: Category, source: SourceProvider | None, top: int = 10
) -> Localization:
    """The published method, reproduced."""
    return _route("paper", issue, extraction, category, source, top)
