"""Function-level figures: where a changed function ranks among a correctly found file's functions (Acc@1/@5,
MRR, and file and function right together), sftl's ranking beside BM25 over the file's functions. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

FILE_DEPTH = 5  # a file counts as found when it is among the first five suspects
TEMPLATE = re.compile(r"<[^<>]*>")


def name_parts(name: str) -> tuple[str, ...]:
    """A qualified name's components, across languages: `ns::Op<T>::Compute` and `Class.method` alike."""
    plain = name
    for _ in range(3):  # nested template arguments
        plain = TEMPLATE.sub("", plain)
    plain = re.sub(r"\(.*$", "", plain) if not re.match(r"^[A-Z][A-Z0-9_]+\(", plain) else plain
    return tuple(p for p in re.split(r"::|\.", plain.strip()) if p)


def same_function(name: str, truth: str) -> bool:
    """The two names one function: the shorter's components end the longer's (`Op::Compute` is
    `tensorflow::Op::Compute`; `forward` is `Linear.forward`). Never by line numbers: the truth is the fix
    commit's file, the ranking the report's release."""
    a, b = name_parts(name), name_parts(truth)
    if not a or not b:
        return False
    n = min(len(a), len(b))
    return a[-n:] == b[-n:]


def function_rank(ranked: Sequence[str], truth: Iterable[str]) -> int | None:
    """1-based rank of the first function that is one of the truth's, or None."""
    wanted = tuple(truth)
    for i, name in enumerate(ranked, 1):
        if any(same_function(name, t) for t in wanted):
            return i
    return None


@dataclass(frozen=True)
class FunctionCase:
    """One (report, truth file) with a known changed function: the file's rank among the suspects (None: not
    found) and the rank of a changed function in sftl's and in BM25's ordering of the file's functions."""

    key: str
    path: str
    period: str
    file_rank: int | None
    sftl_rank: int | None
    bm25_rank: int | None


def figures(cases: Sequence[FunctionCase], depth: int = FILE_DEPTH) -> dict[str, object]:
    """Acc@1/@5 and MRR of a changed function within a found file (file among the first `depth`), for sftl and
    BM25 over functions, and 'both right together' over every case (file first-five and function first-five)."""
    found = [c for c in cases if c.file_rank is not None and c.file_rank <= depth]
    out: dict[str, object] = {"cases": len(cases), "file_found": len(found)}
    for method in ("sftl", "bm25"):
        ranks = [getattr(c, f"{method}_rank") for c in found]
        out[method] = {
            "acc@1": share(r is not None and r <= 1 for r in ranks),
            "acc@5": share(r is not None and r <= 5 for r in ranks),
            "mrr": round(sum(1.0 / r for r in ranks if r) / len(ranks), 4) if ranks else None,
            "both@5": share(c.file_rank is not None and c.file_rank <= depth and (getattr(c, f"{method}_rank") or 99) <= 5
                            for c in cases),
        }
    return out


def share(flags: Iterable[bool]) -> float | None:
    values = list(flags)
    return round(sum(values) / len(values), 4) if values else None


def render_functions(table: dict[str, Any], split: str | None) -> list[str]:
    """Table 6 of the report: the function-level figures by period, sftl beside BM25 over functions."""
    out = ["", "## Table 6 — functions within a found file", "",
           f"Reports whose fix names its changed functions; a truth file counts when it is among sftl's first "
           f"{FILE_DEPTH} suspects. Acc@k and MRR: of a changed function among that file's functions as ranked; "
           f"'both@5': file among the first {FILE_DEPTH} and a changed function among its first five, over every "
           "truth file with known functions. Figures in %.", "",
           "| rows | method | truth files | found | acc@1 | acc@5 | MRR | both@5 |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for period, fig in table.items():
        label = ("all rows" if period == "all" else
                 "the function ranker learned from (in-sample)" if period == "learned" else
                 "the function ranker never saw" if period == "unseen" else
                 f"filed {'before' if period == 'before' else 'on or after'} {split}" if split else period)
        for method, name in (("sftl", "sftl"), ("bm25", "BM25 over functions")):
            m = fig[method]
            out.append(f"| {label} | {name} | {fig['cases']} | {fig['file_found']} | {pct(m['acc@1'])} | "
                       f"{pct(m['acc@5'])} | {pct(m['mrr'], 3)} | {pct(m['both@5'])} |")
    return out


def pct(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "—"
    return f"{value:.3f}" if digits else f"{100 * value:.1f}"
