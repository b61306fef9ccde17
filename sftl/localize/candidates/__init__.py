"""Suspects for every report, whatever its category: candidates with their evidence as features, one learned ranking.

`localize_any(issue, extraction, category, source, top, category_loc=...)` is the entry; the missing-module
and discrepancy localizers' suspects enter as candidates like any other evidence.
"""

from sftl.localize.candidates.locate import localize_any

__all__ = ["localize_any"]
