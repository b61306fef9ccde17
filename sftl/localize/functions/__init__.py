"""The functions of a suspect file to read first: spans of the file, (report, function) features, a learned
ranking, and reasons naming the evidence."""

from __future__ import annotations

from sftl.localize.functions.rank import attach_functions, rank_functions

__all__ = ["attach_functions", "rank_functions"]
