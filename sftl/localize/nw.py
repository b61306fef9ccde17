"""Needleman–Wunsch global alignment score of two strings, normalised to [0, 1] (our own implementation)."""

from __future__ import annotations


def nw_score(a: str, b: str, match: int = 1, mismatch: int = -1, gap: int = -1) -> int:
    """The raw optimal global alignment score of `a` and `b` (linear gap penalty)."""
    if not a:
        return gap * len(b)
    if not b:
        return gap * len(a)
    # one rolling row: O(len(a) * len(b)) time, O(len(b)) memory
    prev = [gap * j for j in range(len(b) + 1)]
    for i, ca in enumerate(a, 1):
        cur = [gap * i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            diag = prev[j - 1] + (match if ca == cb else mismatch)
            cur[j] = max(diag, prev[j] + gap, cur[j - 1] + gap)
        prev = cur
    return prev[-1]


def nw_similarity(
    a: str, b: str, match: int = 1, mismatch: int = -1, gap: int = -1, case_sensitive: bool = False
) -> float:
    """`nw_score` divided by the score of a perfect alignment of the longer string, clipped to [0, 1].

    1.0 only for identical strings; 0.0 when the best alignment scores nothing or less.
    """
    if match <= 0 or match <= mismatch or match <= gap:
        raise ValueError("a match must score positive and higher than a mismatch or a gap")
    if not case_sensitive:
        a, b = a.lower(), b.lower()
    if not a and not b:
        return 1.0
    raw = nw_score(a, b, match, mismatch, gap)
    return max(0.0, min(1.0, raw / (match * max(len(a), len(b)))))
