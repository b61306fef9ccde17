"""Composes the stages for one issue: extract -> screen -> (replay) -> localize, storing each result."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sftl.errors import ConfinementError, InputError, SftlError, StoreError
from sftl.model import Category, Extraction, Issue, Localization, Outcome, Report, Screening, to_jsonable

if TYPE_CHECKING:
    from sftl.config import Settings
    from sftl.store import Store

# Below this many stored issues the IDF of the keyword screener is meaningless (a term in every
# document weighs nothing), so the screening rules decide alone and say so.
MIN_SCREEN_CORPUS = 30


def locate(
    issue: Issue,
    settings: Settings,
    store: Store,
    method: str = "sftl",
    source_root: str | Path | None = None,
    top: int = 10,
    offline: bool = False,
    replay: bool = False,
    screener: Any = None,
    rescreen: bool = False,
    corpus_size: int | None = None,
    history: bool = True,
    unconfined: bool = False,
) -> Report:
    """Run one issue through the pipeline and store its screening and localization.

    Never raises for a property of the issue (no traceback, unknown version, sources missing
    offline): those come back as `Outcome.SKIPPED`/`ABSTAINED` with the reason. Raises
    `InputError` for an unknown method, `StoreError` when the store cannot be written. `history`:
    blend in the prior of the stored fix records (`sftl.history`; a no-op while the store holds none).
    `replay` raises ConfinementError where this machine cannot confine the snippet, unless `unconfined`.
    """
    from sftl.extract import extract
    from sftl.localize import get_localizer

    try:
        localize = get_localizer(method)  # an unknown method is the caller's mistake: fail before any work
    except ImportError as exc:
        raise InputError(f"method {method!r} is not available in this installation ({exc.name or exc})") from None
    if method == "sftl":
        from sftl.localize.candidates.locate import check_configured_models

        check_configured_models(settings)  # a ranker named that cannot be read: the caller's mistake, before any work
    extraction = extract(issue)
    screening, fresh = _screening(issue, extraction, store, screener, rescreen, corpus_size)
    if fresh:
        store.save_screening(issue.repo, issue.number, screening, fingerprint=issue.fingerprint)

    replay_result = None
    if replay:
        # -- REPLAY HOOK (issue 5): replay the snippet sandboxed; a reproduced error lends its
        # traceback, a GPU differential its first divergent operator, to the localizer
        from sftl.replay import confirm_extraction, replay_issue

        try:
            replay_result = replay_issue(issue, extraction, settings, store, unconfined=unconfined)
            extraction = confirm_extraction(extraction, replay_result)
        except ConfinementError:
            raise  # never run unconfined, never skipped quietly: the command refuses
        except SftlError as exc:  # the sandbox failed on this issue: localize without the replay, and say why
            from sftl.model import Replay, ReplayEnvironment

            env = extraction.environment
            replay_result = Replay(ReplayEnvironment(env.framework, env.version, None, None, None), (),
                                   Outcome.SKIPPED, f"replay not run: {exc}")

    category, lead = screening.category, ""
    if category == Category.OTHER:
        lead = _kernel_fault_lead(issue, extraction) or _borderline_discrepancy_lead(issue, extraction)
        category = Category.GCRDE if lead else category
    from sftl.sources import sources_for_report

    # every report is ranked: a discrepancy's and any other report's fix may be C++ (kernels, the runtime), a
    # missing-module error's is Python; where no C++ is at hand, the release's Python files alone serve
    found = sources_for_report(extraction, settings, source_root=source_root, offline=offline,
                               needs_cxx=category != Category.MME, created_at=issue.created_at)
    if found.provider is None and category == Category.OTHER:
        found = sources_for_report(extraction, settings, source_root=source_root, offline=offline,
                                   created_at=issue.created_at)
    source, why = found.provider, found.note
    if source is None:
        loc = Localization(method, (), Outcome.SKIPPED, why)
    else:
        # -- HISTORY HOOK (#18, #27): the files similar earlier fixes changed: a feature of the learned ranker, a
        # tie-break for any other method
        history = history and store.count_fixes() > 0
        try:
            if history:
                from sftl.history_io import localize_with_history

                loc = localize_with_history(localize, method, issue, extraction, category, source, top, store,
                                            settings.cache_dir)
            else:
                loc = localize(issue, extraction, category, source, top)
        except SftlError as exc:  # sources unreadable half-way: a value, not a crash
            loc = Localization(method, (), Outcome.SKIPPED, str(exc))
        if why:
            loc = replace(loc, reason=f"{loc.reason} ({why})")
        loc = replace(loc, release=release_of(source))
    if lead:
        loc = replace(loc, reason=f"{lead}; {loc.reason}"[:1000])
    report = Report(issue=issue, extraction=extraction, screening=screening, localization=loc, replay=replay_result)
    store.save_localization(issue.repo, issue.number, report_json(report))
    return report


def release_of(source: Any) -> str:
    """The release a provider's files are of ("2.6.0"; "" when it is no release, a local checkout)."""
    import re

    version = getattr(source, "installed_version", None) or getattr(source, "version", None) or ""
    m = re.match(r"\d+\.\d+(?:\.\d+)?", str(version))
    return m.group(0) if m else ""


def _kernel_fault_lead(issue: Issue, extraction: Extraction) -> str:
    """Why a report screened *other* is still localized as a CUDA kernel's fault, else "".

    A CUDA kernel failure (illegal memory access, an invalid launch configuration, a 32-bit index
    limit) with no word of the CPU is *other* by the settled definition, yet the kernel that raised
    it is where a maintainer looks: its files are ranked as the GPU side of a discrepancy would be.
    Needs a snippet (the op under test); the screening stays *other*.
    """
    from sftl.screen.one_device import cuda_kernel_fault

    if extraction.snippet is None or extraction.environment.framework not in ("pytorch", "tensorflow"):
        return ""
    fault = cuda_kernel_fault(f"{issue.title}\n{issue.body}", extraction.error_line)
    if not fault:
        return ""
    return (f"screened 'other' (a CUDA failure, {fault!r}, with no word of the CPU); "
            "ranked as a fault of the CUDA kernel that raised it")


# device-comparison points (sftl.screen.rules.gcrde_evidence) from which a report screened *other* is still ranked:
# below the screening's own bar, above what the development set's *other* reports reach (at most 1.0 of 93;
# its discrepancies score 3.0 and up)
BORDERLINE_GCRDE = 1.5


def _borderline_discrepancy_lead(issue: Issue, extraction: Extraction) -> str:
    """Why a report screened *other* is still ranked as a GPU/CPU discrepancy, else "".

    `sftl locate` was asked for this very report: one with a snippet and some device-comparison evidence (the
    screening rules' points) that fell short of the screening's bar gets a ranking marked as the weaker lead it
    is, rather than none; its screening stays *other*.
    """
    from sftl import screen as scr

    if extraction.snippet is None or extraction.environment.framework not in ("pytorch", "tensorflow"):
        return ""
    rules = scr.prepare(issue, extraction).rules
    if rules.mme or rules.gcrde < BORDERLINE_GCRDE:
        return ""
    why = "; ".join(rules.gcrde_why[:2])
    return (f"screened 'other', with device-comparison evidence {rules.gcrde:g} ({why}) short of the screening's "
            "bar; ranked as a GPU/CPU discrepancy, a weaker lead")


def _screening(
    issue: Issue, extraction: Extraction, store: Store, screener: Any, rescreen: bool, corpus_size: int | None = None
) -> tuple[Screening, bool]:
    """The stored screening when there is one (the store is the cache), else a fresh one."""
    from sftl import screen as scr

    if screener is None and not rescreen:
        stored = store.get_screening(issue.repo, issue.number)
        # only a screening of this very text: an edited report is screened again
        if stored is not None and stored.get("issue_fingerprint") == issue.fingerprint:
            try:
                return _screening_from_json(stored), False
            except (KeyError, ValueError, TypeError):
                pass  # an older/foreign payload: screen again
    if screener is None:
        screener = corpus_screener(issue, store)
    if screener is not None:
        return scr.screen(issue, extraction, screener), True
    rules = scr.prepare(issue, extraction).rules
    if rules.mme:
        cat = Category.MME
    elif rules.gcrde >= scr.GCRDE_RULE_MIN:
        cat = Category.GCRDE
    else:
        cat = Category.OTHER
    gcrde = round(max(0.0, min(1.0, rules.gcrde / (2 * scr.GCRDE_RULE_MIN))), 4)
    scores = {"mme": 1.0 if rules.mme else 0.0, "gcrde": gcrde}
    scores["other"] = round(1.0 - max(scores.values()), 4)
    evidence = tuple(x for x in ((rules.mme_why,) if rules.mme else rules.gcrde_why) if x)
    reason = (
        f"only {store.count_issues() if corpus_size is None else corpus_size} stored issue(s), too few to fit the keyword IDF; the screening rules "
        f"decided (mme: {rules.mme_why or 'no'}; gcrde evidence {rules.gcrde:g})"
    )
    return Screening(cat, scores, evidence, method="rules", reason=reason), True


def corpus_screener(issue: Issue | None, store: Store) -> Any:
    """The keyword screener fitted on the stored corpus (every other stored report plus this issue's
    current text; with no issue, the stored reports alone), or None when the corpus is too small for an IDF.

    Fitting needs each report's keyword terms; those are kept in the store, keyed by a hash of the
    text screening reads, so only new or edited reports are read again (10,000 stored reports: ~5 s
    of reading once, a fraction of a second afterwards). The result equals fitting from scratch.
    """
    import hashlib
    import json

    import numpy as np

    from sftl import screen as scr

    screener = scr.KeywordScreener()
    vocab = screener.vocabulary()
    kind = "keyword-terms"
    key = hashlib.sha256(json.dumps([vocab, scr.SECTION_WEIGHTS], sort_keys=True).encode()).hexdigest()[:16]
    try:
        payload = store.get_result(kind, key)
    except StoreError:  # the kept terms are only a cache: a damaged row is read again and overwritten
        payload = None
    cached = payload.get("terms") if isinstance(payload, dict) else None
    # a damaged payload (wrong types, indices out of the vocabulary) is ignored entry by entry and read again
    known: dict[str, list[int]] = {
        d: t for d, t in (cached.items() if isinstance(cached, dict) else ())
        if isinstance(t, list) and all(type(i) is int and 0 <= i < len(vocab) for i in t)
    }
    corpus: list[str] = []
    unread: dict[str, tuple[str, str]] = {}
    for repo, number, title, body, own in store.iter_report_texts():
        if issue is not None and (repo, number) == (issue.repo, issue.number):
            continue  # this issue counts once, with the text being located
        text = "\n\n".join([body or "", *own]) if own else body  # as screen.prepare reads an Issue
        digest = _report_digest(title, text)
        corpus.append(digest)
        if digest not in known:
            unread[digest] = (title, text)
    extra = 0 if issue is None else 1
    if len(corpus) + extra < MIN_SCREEN_CORPUS:
        return None
    terms = dict(known)
    if unread:
        docs = scr.prepare_many(list(unread.values()))
        terms.update(zip(unread, screener.present_terms(docs), strict=True))
    df = np.zeros(len(vocab))
    for digest in corpus:
        df[terms[digest]] += 1
    if issue is not None:
        df[screener.present_terms([issue])[0]] += 1
    keep = {d: terms[d] for d in corpus}
    if keep.keys() != known.keys():
        store.save_result(kind, key, {"terms": keep})
    return screener.fit_frequencies(df, len(corpus) + extra)


def _report_digest(title: str, text: str) -> str:
    import hashlib

    return hashlib.blake2b(f"{title}\0{text}".encode("utf-8", "replace"), digest_size=12).hexdigest()


def _screening_from_json(obj: dict[str, Any]) -> Screening:
    return Screening(
        category=Category(obj["category"]),
        scores={str(k): float(v) for k, v in obj["scores"].items()},
        evidence=tuple(obj.get("evidence") or ()),
        method=str(obj.get("method") or "keywords"),
        abstained=bool(obj.get("abstained")),
        reason=str(obj.get("reason") or ""),
    )


def report_json(report: Report) -> dict[str, Any]:
    """The `sftl locate --json` object (documented in the README; keep it stable)."""
    issue, env, loc = report.issue, report.extraction.environment, report.localization
    scores = report.screening.scores
    return {
        "issue": {"url": issue.url, "repo": issue.repo, "number": issue.number, "title": issue.title},
        "category": report.screening.category.value,
        "screening": {"mme": float(scores.get("mme", 0.0)), "gcrde": float(scores.get("gcrde", 0.0))},
        "environment": {
            "framework": env.framework,
            "version": env.version,
            "python": env.python,
            "cuda": env.cuda,
            "os": env.os,
            "missing": list(env.missing),
        },
        "replay": to_jsonable(report.replay) if report.replay is not None else None,
        "suspects": [
            {"path": s.path, "score": s.score, "side": s.side.value if s.side else None, "reason": s.reason,
             "functions": [{"name": f.name, "start": f.start, "end": f.end, "score": f.score, "reason": f.reason}
                           for f in s.functions[:10]],
             **({"features": dict(s.features)} if s.features else {})}
            for s in (loc.suspects if loc else ())
        ],
        "outcome": loc.outcome.value if loc else Outcome.SKIPPED.value,
        "reason": loc.reason if loc else "not localized",
        "method": loc.method if loc else "",
        "release": (loc.release or None) if loc else None,
    }
