"""Ranked `SuspectFunction`s for a suspect file, and the suspects of a localization with theirs attached."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from sftl.errors import SftlError
from sftl.localize.functions.features import FEATURES, FunctionEvidence, FunctionRow, gather_functions
from sftl.localize.functions.ranker import FunctionRanker, load_function_ranker
from sftl.model import Suspect, SuspectFunction
from sftl.sources import SourceProvider

TOP = 10  # functions named per suspect
FILES = 5  # suspects whose files are read (the ones a maintainer opens first)
# the evidence a reason names, strongest kind first where the model gives no weights
EVIDENCE_ORDER = ("frame_line", "frame_name_here", "message_overlap", "quotes_code", "kernel_named", "export_named",
                  "name_dotted", "name_used", "frame_name_any", "class_named", "callee_of_evidence",
                  "reach_distance", "name_in_title", "bm25_all_rank")


def scores_of(rows: list[FunctionRow], model: FunctionRanker | None) -> list[float]:
    """Each function's score: the model's, else (no model) BM25 of the whole report."""
    if model is not None:
        return model.predict([r.vector() for r in rows])
    at = FEATURES.index("bm25_all")
    return [r.vector()[at] for r in rows]


def rank_functions(evidence: FunctionEvidence, path: str, text: str, model: FunctionRanker | None = None,
                   top: int = TOP, cache_dir: Path | None = None) -> tuple[SuspectFunction, ...]:
    """The functions of `path` (its `text` as the release has it) best first, at most `top`, each with a reason.
    `model` None: ranked by BM25 of the whole report (the baseline)."""
    rows = gather_functions(evidence, path, text, cache_dir)
    if not rows:
        return ()
    values = scores_of(rows, model)
    order = sorted(range(len(rows)), key=lambda i: (-values[i], rows[i].span.start))
    weight = model.importances() if model is not None else {}
    out = []
    for i in order[:top]:
        r = rows[i]
        out.append(SuspectFunction(r.span.name, r.span.start, r.span.end, round(float(values[i]), 4),
                                   reason_of(r, weight)))
    return tuple(out)


def reason_of(row: FunctionRow, weight: dict[str, float]) -> str:
    """The evidence that points at the function, in words: a traceback frame first (the line it ran, else its
    name), then its other structural evidence heaviest in the model first, then its lexical rank; at most three."""
    found = [name for name in EVIDENCE_ORDER if name in row.evidence and name != "bm25_all_rank"]
    frames = [name for name in found if name.startswith("frame_")]
    found = sorted((name for name in found if not name.startswith("frame_")),
                   key=lambda name: (-weight.get(name, 0.0), EVIDENCE_ORDER.index(name)))
    found = frames[:1] + found
    parts = list(dict.fromkeys(row.evidence[name] for name in found))[:2]
    if "bm25_all_rank" in row.evidence:
        parts.append(row.evidence["bm25_all_rank"])
    return "; ".join(parts[:3]) or "lexical match"


def attach_functions(suspects: list[Suspect], evidence: FunctionEvidence, source: SourceProvider,
                     model: FunctionRanker | None = None, files: int = FILES,
                     cache_dir: Path | None = None) -> list[Suspect]:
    """The suspects with the first `files` carrying their ranked functions (a file the source cannot read, or
    one in another language, carries none). `model` None: the bundled ranker."""
    ranker = model if model is not None else load_function_ranker()
    out = []
    for n, s in enumerate(suspects):
        if n < files:
            try:
                text = source.read_text(s.path)
            except (SftlError, OSError, ValueError, UnicodeDecodeError):  # an unreadable file names no function
                text = None
            if text:
                s = replace(s, functions=rank_functions(evidence, s.path, text, ranker, cache_dir=cache_dir))
        out.append(s)
    return out
