"""Pairwise input generation: IPOG covering arrays of strength 2 over an API's parameter levels, and a check of their coverage."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any


def pairwise_rows(levels: Sequence[Sequence[Any]], rng: random.Random) -> list[list[Any]]:
    """A covering array of strength 2 (IPOG): every pair of levels of every two parameters is in some row."""
    n = len(levels)
    if n == 0:
        return [[]]
    sizes = [len(lv) for lv in levels]
    if n == 1:
        return [[v] for v in levels[0]]
    order = sorted(range(n), key=lambda i: -sizes[i])  # largest first keeps the array small
    sz = [sizes[i] for i in order]
    rows: list[list[int | None]] = [[a, b] + [None] * (n - 2) for a in range(sz[0]) for b in range(sz[1])]
    for i in range(2, n):
        uncovered = {(j, a, b) for j in range(i) for a in range(sz[j]) for b in range(sz[i])}
        for row in rows:  # horizontal growth: the level of the new parameter covering most new pairs
            choices = list(range(sz[i]))
            rng.shuffle(choices)
            best = max(choices, key=lambda b, row=row: sum(  # type: ignore[misc]
                1 for j in range(i) if row[j] is not None and (j, row[j], b) in uncovered))
            row[i] = best
            for j in range(i):
                uncovered.discard((j, row[j], best))
        extra: list[list[int | None]] = []
        for j, a, b in sorted(uncovered):  # vertical growth: new rows for pairs still missing
            for r in extra:
                if r[i] == b and r[j] is None:
                    r[j] = a
                    break
            else:
                r = [None] * n
                r[j], r[i] = a, b
                extra.append(r)
        rows.extend(extra)
    out: list[list[Any]] = []
    for row in rows:
        full: list[Any] = [None] * n
        for pos, idx in enumerate(order):
            k = row[pos]
            full[idx] = levels[idx][k if k is not None else rng.randrange(sizes[idx])]
        out.append(full)
    return out


def uncovered_pairs(levels: Sequence[Sequence[Any]], rows: Sequence[Sequence[Any]]) -> list[tuple[int, Any, int, Any]]:
    """Pairs of (parameter, level) not present in any row: empty for a covering array."""
    missing = []
    n = len(levels)
    seen = {(i, repr(r[i]), j, repr(r[j])) for r in rows for i in range(n) for j in range(i + 1, n)}
    for i in range(n):
        for j in range(i + 1, n):
            for a in levels[i]:
                for b in levels[j]:
                    if (i, repr(a), j, repr(b)) not in seen:
                        missing.append((i, a, j, b))
    return missing
