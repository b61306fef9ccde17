"""Suspects for any report: gather candidates with their evidence, score them with the learned ranker, give reasons."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from sftl.codegraph.graph import build_graph
from sftl.localize.candidates.corpus import build_index, default_cache_dir
from sftl.localize.candidates.features import FEATURES, Candidate, gather
from sftl.localize.candidates.ranker import CandidateRanker, load_default
from sftl.localize.candidates.report import read_report
from sftl.model import Category, Extraction, Issue, Localization, Outcome, Suspect
from sftl.sources import SourceProvider
from sftl.sources.inventory import release_paths

if TYPE_CHECKING:
    from sftl.config import Settings
    from sftl.history import HistoryPrior

# the evidence a reason names, in words, and the feature that carries it
LEAD = "category_located"
EVIDENCE_ORDER = ("category_rank", "tb_frame", "message_shingles", "graph_rank", "exports_name", "exports_prefix",
                  "module_of_name", "defines_name", "history_support")


def localize_any(
    issue: Issue,
    extraction: Extraction,
    category: Category,
    source: SourceProvider | None,
    top: int = 10,
    category_loc: Localization | None = None,
    ranker: CandidateRanker | None = None,
    cache_dir: Path | None = None,
    method: str = "sftl",
    prior: HistoryPrior | None = None,
) -> Localization:
    """Rank the source files of `source` for one report, whatever its category.

    `category_loc`: what the missing-module or discrepancy localizer found; its suspects are candidates, its order
    and evidence features the model weighs with the rest (the model, not the localizer's hand order, ranks).
    `prior`: the stored history's files of similar earlier fixes, candidates with their support as a feature.
    """
    if source is None:
        return category_loc or Localization(method, (), Outcome.SKIPPED, "no sources of the report's release")
    framework = source.framework
    report = read_report(issue, extraction, framework)
    if not (report.title_words or report.text_words or report.code_words or report.error_words or report.frames):
        return category_loc or Localization(method, (), Outcome.ABSTAINED, "the report has no text to go on")
    cache = cache_dir if cache_dir is not None else default_cache_dir()
    index = build_index(source, cache)
    if not index.paths:
        return category_loc or Localization(method, (), Outcome.SKIPPED,
                                            f"no {framework} source files in {source.description}")
    screening = {"mme": float(category == Category.MME), "gcrde": float(category == Category.GCRDE)}
    candidates = gather(index, report, category_loc, screening, prior, build_graph(source, cache))
    model = ranker if ranker is not None else load_default(configured_model())
    scored = score(candidates, model)
    suspects = [to_suspect(c, s, model) for c, s in scored]
    moved, release = release_paths([s.path for s in suspects], source, index.paths)
    if moved:  # a stand-in tree's C++ file the report's release compiled from another folder: named as it had it
        suspects = at_release_paths(suspects, moved, release)
    if category_loc is not None and category_loc.outcome == Outcome.LOCATED and category_loc.suspects:
        # LEAD marks the category localizer's own order in the features an evaluation keeps: what the model is
        # judged against (`sftl model fit`'s "hand" ranking), never a feature the model reads
        lead = {s.path for s in category_loc.suspects}
        suspects = [replace(s, features={**s.features, LEAD: 1.0}) if s.path in lead else s for s in suspects]
    how = "the learned ranker" if model is not None else "BM25 (no ranker model)"
    reason = f"{len(candidates)} candidate files of {len(index.paths)} ranked by {how}"
    calibration = model.confidence if model is not None else {}
    confidence = model.confidence_of([v for _, v in scored]) if model is not None else None
    if confidence is not None and confidence < calibration.get("threshold", 0.0):
        reason = (f"low confidence: {confidence:.2f} that the first file is right (below "
                  f"{calibration['threshold']:.2f}, above which the first file of reports it had not learned from was right "
                  f"{calibration['precision']:.0%} of the time); {reason}")
    if category_loc is not None and category_loc.reason:
        # the category localizer's reading of the report (the missing name's owner, the diverging op) comes first
        reason = f"{category.value} localizer: {category_loc.reason}; {reason}"[:1000]
    if not suspects:
        return Localization(method, (), Outcome.ABSTAINED, "no candidate file")
    # -- FUNCTIONS HOOK (#32): the first suspects name the functions to read first
    from sftl.localize.functions import attach_functions
    from sftl.localize.functions.features import function_evidence
    from sftl.localize.functions.ranker import load_function_ranker

    suspects = attach_functions(suspects[:top], function_evidence(report, issue, extraction), source,
                                model=load_function_ranker(configured_function_model()),
                                cache_dir=cache_dir if cache_dir is not None else default_cache_dir())
    return Localization(method, tuple(suspects), Outcome.LOCATED, reason)


def at_release_paths(suspects: list[Suspect], moved: dict[str, str], release: str) -> list[Suspect]:
    """The suspects with each moved file at the path the report's release had it (the first of two that would meet
    at one path keeps it), each saying so."""
    taken = {s.path for s in suspects if s.path not in moved}
    out = []
    for s in suspects:
        old = moved.get(s.path)
        if old is not None and old not in taken:
            taken.add(old)
            s = replace(s, path=old, reason=f"{s.reason} (the release {release} compiled it as {old}; the tree "
                                            f"read holds it at {s.path})"[:1000])
        out.append(s)
    return out


def configured_model() -> Path | None:
    """The ranker a maintainer trained (`SFTL_RANKER_MODEL`), if any."""
    from sftl.config import load_settings

    return load_settings().ranker_model


def check_configured_models(settings: Settings) -> None:
    """InputError when a ranker named by SFTL_RANKER_MODEL or SFTL_FUNCTION_MODEL cannot be read: the caller's
    mistake, said before any work (and before a stored result is replaced by a skipped one)."""
    from sftl.localize.functions.ranker import load_function_ranker

    if settings.ranker_model:
        load_default(settings.ranker_model)
    if settings.function_model:
        load_function_ranker(settings.function_model)


def configured_function_model() -> Path | None:
    """The function ranker a maintainer trained (`SFTL_FUNCTION_MODEL`), if any."""
    from sftl.config import load_settings

    return load_settings().function_model


def values_of(vectors: list[list[float]], model: CandidateRanker | None) -> list[float]:
    """Each candidate's score: the model's, else (no model) BM25 of the whole report."""
    if model is not None:
        return model.predict(vectors)
    at = FEATURES.index("bm25_all")
    return [v[at] for v in vectors]


def score(candidates: list[Candidate], model: CandidateRanker | None) -> list[tuple[Candidate, float]]:
    """Candidates with their scores, best first (ties by path, so the order is stable)."""
    values = values_of([c.vector() for c in candidates], model)
    return sorted(zip(candidates, values, strict=True), key=lambda cs: (-cs[1], cs[0].path))


def to_suspect(cand: Candidate, value: float, model: CandidateRanker | None) -> Suspect:
    from sftl.localize.baselines import side_of

    return Suspect(cand.path, round(float(value), 4), side_of(cand.path), reason_of(cand, model),
                   features={k: round(v, 4) for k, v in cand.features.items() if v})


def reason_of(cand: Candidate, model: CandidateRanker | None) -> str:
    """The evidence that brought the file, in words a maintainer can check: the structural evidence it has (a
    frame, a message, a name it exports or defines), heaviest in the model first, then its best lexical match."""
    weight = model.importances() if model is not None else {}
    found = [(weight.get(name, 0.0), cand.evidence[name]) for name in EVIDENCE_ORDER
             if name in cand.evidence and cand.features.get(name)]
    found.sort(key=lambda p: -p[0])
    parts = [text for _, text in found[:3]]
    lexical = [(cand.features.get(f"bm25_{name}_rank", 0.0), name) for name in ("all", "title", "code", "error")]
    best_rank, best_field = max(lexical)
    if best_rank:
        what = "the whole report" if best_field == "all" else f"its {best_field}"
        parts.append(f"BM25 rank {round(1 / best_rank)} for {what}")
    return "; ".join(parts) or "lexical match"
