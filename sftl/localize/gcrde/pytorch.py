"""PyTorch: ops to the files defining and registering their kernels, cues applied, TH/THC era preferred, ranked."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import replace
from typing import TYPE_CHECKING

from sftl.codegraph import native as nat
from sftl.errors import SourceError
from sftl.localize import legacy
from sftl.localize.gcrde.board import (
    TFIDF,
    Board,
    lead_reason,
    rank_board,
    side_weights,
)
from sftl.localize.gcrde.cues import (
    COMPARING_OPS,
    LAUNCHER,
    LIFT,
    OWN_NAN,
    Cues,
    Divergence,
    accumulation_side,
    divergent_side,
    report_cues,
)
from sftl.localize.gcrde.dtypes import add_jiterator, add_vec_headers, report_dtypes
from sftl.localize.gcrde.features import candidate_features
from sftl.localize.gcrde.follow import (
    CALL_T,
    HEADERS,
    add_headers,
    follow_op,
)
from sftl.localize.gcrde.index import (
    kernel_index,
    release_natives,
)
from sftl.localize.gcrde.ops import (
    ENGLISH,
    OpRef,
    dunder_free,
    title_tokens,
    torch_ops,
)
from sftl.localize.gcrde.paper import paper_pytorch
from sftl.localize.gcrde.release import apply_release_names, apply_release_stubs
from sftl.localize.gcrde.roles import put_math_first
from sftl.model import Extraction, Issue, Localization, Outcome, Side

if TYPE_CHECKING:
    from sftl.sources import SourceProvider

RANK_POOL = 30  # candidates the features are computed over (the learned ranker of every suspect reads them)

def localize_pytorch(
    issue: Issue, extraction: Extraction, source: SourceProvider, method: str, top: int, divergent_op: str | None
) -> Localization:
    label = method
    files = source.list_files()
    natives, yaml_problem = release_natives(source)
    if method == "paper":
        if natives is None:
            return Localization(label, (), Outcome.ABSTAINED, yaml_problem)
        return paper_pytorch(issue, extraction, natives, files, top, divergent_op)

    kernel_files = nat.kernel_paths(files)
    if not any(f.endswith((".cpp", ".cu", ".cc", ".c")) for f in kernel_files):
        # a wheel ships ATen headers (torch/include) but no kernel sources: ranking headers alone misleads,
        # except an old release's TH/THC generic headers, which name the files defining the op (legacy.py)
        ops, _ = torch_ops(issue, extraction, set(natives) if natives else None, divergent_op, source)
        board = Board()
        if any(legacy.library(f) for f in kernel_files) and legacy.add_evidence(
                ops, kernel_index(source, files), source, natives, board.add):
            ranked = rank_board(board, side_weights(divergent_side(issue, extraction)), top, label, nat.path_side)
            return Localization(label, tuple(ranked), Outcome.LOCATED, f"ops: {', '.join(o.name for o in ops[:5])}; "
                                f"{legacy.HEADERS_ONLY}: {source.description}")
        return Localization(
            label, (), Outcome.SKIPPED,
            _no_kernels_reason(source, extraction),
        )
    index = kernel_index(source, files)
    ops, unknown = torch_ops(issue, extraction, set(natives) if natives else None, divergent_op, source)
    div = divergent_side(issue, extraction)
    heaviest = max((o.weight for o in ops), default=0.0)
    div = accumulation_side(issue, extraction, [o.name for o in ops if o.weight >= 0.7 * heaviest], div)
    board = Board()
    followed: set[str] = set()
    for op in ops:
        follow_op(op.name, op.weight, op.origin, natives, index, board, followed, depth=0)
    # TH/THC-era releases: cwrap/nn.yaml/legacy dispatch -> THCTensor_(x) and its functors (legacy.py)
    legacy.add_evidence(ops, index, source, natives, board.add)
    add_headers(index, board)
    role_notes = put_math_first(board, index.texts)
    dtypes = report_dtypes(issue, extraction)
    role_notes += add_vec_headers(board, ops, dtypes, div.side, files, source.read_text)
    role_notes += add_jiterator(board, dtypes, div.side, index.texts, files)
    cues = report_cues(issue, extraction)
    if div.side == Side.CPU and not div.stated and not cues.value_dependent:
        # a precision gap of a long float accumulation: the math the kernel sums with is where it is decided
        cues = replace(cues, value_dependent="the precision of a long float accumulation")
    cue_notes = role_notes + _apply_cues(cues, div, ops, index, board, side_weights(div, cues))
    structural = bool(board.files)
    # back-off: TF-IDF over contents with the op names, their kernels, and the title's identifiers
    terms = [o.name for o in ops if o.weight > 0.3] + [dunder_free(o.name) for o in ops if o.weight > 0.3]
    terms += [t for t in title_tokens(issue.title) if t not in ENGLISH and len(t) > 3]
    tfidf = index.tfidf(terms)
    if tfidf:
        best = max(tfidf.values())
        for path, s in sorted(tfidf.items(), key=lambda x: -x[1])[: max(top * 3, 30)]:
            board.add(path, 0.3 * s / best, f"{TFIDF} over contents ({s / best:.2f} of best)")
    context = " ".join([issue.title, issue.body, *extraction.apis,
                        extraction.snippet.code if extraction.snippet else ""])
    # a newer stand-in tree over the report's own release: that release's binding of the op decides (legacy.py)
    era_notes = _prefer_report_release(ops, div, source, board, side_weights(div, cues))
    # the release's own kernel files, named by its compiled libraries, over a tree of another release (release.py)
    era_notes += apply_release_names(board, ops, div.side, source, files)
    era_notes += apply_release_stubs(board, index, source, side_weights(div, cues))
    pool = rank_board(board, side_weights(div, cues), max(top, RANK_POOL), label, nat.path_side, context)
    feats = candidate_features(board, pool, index.texts, div.side, div.confident, ops, dtypes)
    pool = [replace(s, features=feats[s.path]) for s in pool]
    suspects = pool[:top]
    notes = list(cue_notes) + era_notes
    if yaml_problem:
        notes.append(yaml_problem + "; dispatch kernels unknown")
    if unknown:
        notes.append("not in native_functions.yaml: " + ", ".join(unknown[:5]))
    if not suspects:
        why = "no operator of the report could be followed to a kernel" if not ops else "no kernel file found"
        return Localization(label, (), Outcome.ABSTAINED, "; ".join([why, *notes]))
    lead = div.why
    if not structural:
        lead = "no operator resolved to a kernel: TF-IDF back-off only; " + lead
        if not ops:  # nothing but title words: show the guesses, but do not claim a location
            return Localization(label, tuple(suspects), Outcome.ABSTAINED,
                                "; ".join(["no operator found in the report", lead, *notes]))
    opnames = ", ".join(o.name for o in ops[:5]) or "none"
    return Localization(label, tuple(suspects), Outcome.LOCATED, "; ".join([f"ops: {opnames}", lead, *notes]))


def _prefer_report_release(ops: list[OpRef], div: Divergence, source: SourceProvider, board: Board,
                           weights: dict[Side | None, float]) -> list[str]:
    """Rank TH/THC evidence above native files only a newer layer holds, when the report's release bound the op to TH.

    Applies only to a source mixing releases (a registered newer tree over the report's wheel). The
    report-release layer's own headers say how each main op ran on the diverging device; when one ran
    in TH/THC there and none was already native, the newer layer's ATen/native files for that device
    (and device-generic ones) postdate the code the report ran: they go just below the best TH/THC
    file, order kept, and every moved file says why. Nothing moves when the headers show a native kernel,
    nor when the next release the source keeps (`successors`) already computes the op natively.
    """
    layers = legacy.report_layers(source)
    side = div.side
    if not layers or side not in (Side.CPU, Side.CUDA) or not ops:
        return []
    heaviest = max(o.weight for o in ops)
    known = [(o, b) for o in ops if o.weight >= 0.5 * heaviest
             if (b := legacy.release_binding(o.name, side, layers)) is not None]
    if not known:
        return []
    native = [b for _, b in known if b.kind == "native"]
    if native:
        return [native[0].note() + ": the newer tree's native kernels stand"]
    th = known[0][1]
    # the fix shipped in a later release: when the next release held already computes the op natively,
    # the port may predate the fix, and the report's binding no longer decides
    for successor in legacy.successor_layers(source):
        try:
            moved = [m for o, _ in known if (m := legacy.release_binding(o.name, side, [successor])) is not None]
        except SourceError:
            continue  # an unreadable later wheel only loses the op-history hint, never the localization
        if any(m.kind == "native" for m in moved):
            ported = next(m for m in moved if m.kind == "native")
            return [f"{th.note()}, but {ported.note()}: it may have been ported before the fix, "
                    "so the newer tree's native kernels stand"]
        if moved:
            break

    def effective(path: str) -> tuple[float, float, float]:  # (rank score, side weight, hits bonus) as rank_board sees it
        ev = board.files[path]
        w = weights.get(ev.side or nat.path_side(path), 0.2)
        bonus = 0.02 * min(ev.hits - 1, 3)
        return ev.score * w + bonus, w, bonus

    # TH/THC files the op's bindings reached (a TF-IDF hit on a leftover THC header of the newer tree is none)
    th_files = [p for p, ev in board.files.items() if (lib := legacy.library(p)) is not None and lib[1] == side
                and any(not r.startswith(TFIDF) for _, r in ev.reasons)]
    if not th_files:
        return [th.note() + "; no TH/THC file of the op was found to rank instead"]
    ceiling = max(effective(p)[0] for p in th_files)
    later: dict[str, str] = {}
    for path in board.files:
        if not path.startswith("aten/src/ATen/native/") or (board.files[path].side or nat.path_side(path)) not in (
                side, Side.SHARED):
            continue
        release = legacy.postdates_release(source, path)
        if release is not None:
            later[path] = release
    if not later:
        return []
    top_later = max(effective(p)[0] for p in later)
    shrink = min(1.0, 0.97 * ceiling / top_later) if top_later > 0 else 1.0
    for path, release in later.items():
        ev = board.files[path]
        eff, w, bonus = effective(path)
        if shrink < 1.0:
            ev.score = max(0.0, (eff * shrink - bonus) / max(w, 1e-6))
        short = path.removeprefix("aten/src/ATen/native/")
        lead_reason(ev, f"{th.note()}; the newer tree's ({release}) {short} postdates it")
    for path in th_files:
        lead_reason(board.files[path], th.note() + "; ranked above the newer tree's native kernels")
    return [f"{th.note()}: TH/THC evidence ranks above {len(later)} native file(s) only the newer tree holds"]



def _apply_cues(cues: Cues, div: Divergence, ops: list[OpRef], index: nat.KernelIndex, board: Board,
                weights: dict[Side | None, float]) -> list[str]:
    """Move evidence along the op's path where the report's cues say the fault lies; notes for the reason."""

    def lift(path: str) -> float:  # evidence that ranks `path` just above the best kernel, after side weights
        ev = board.files[path]
        return best * LIFT / max(weights.get(ev.side or nat.path_side(path), 0.2), 0.2)

    notes: list[str] = []
    if cues.cross_device:
        if _add_launch_path(index, board):
            notes.append(cues.cross_device + ": the op's math agrees on the default device, so its launch path "
                         "(launchers, device guards) ranks above the math")
        else:  # say so rather than let CPU/generic files pass for the answer
            notes.append(cues.cross_device + ", but the source shows no CUDA launch path of the op to rank")
        for ev in board.files.values():  # math cannot explain one GPU disagreeing with another
            if ev.reasons and all(" math" in r or "math)" in r for _, r in ev.reasons):
                ev.score *= 0.8
        return notes
    side = div.side
    best = max((ev.score for p, ev in board.files.items() if not p.endswith(HEADERS) and
                (ev.side or nat.path_side(p)) == side), default=0.0)
    if best <= 0:
        return notes
    own = f"{side.value.upper()}-only math"
    if cues.value_dependent:
        lifted = [p for p, ev in board.files.items() if any(own in r for _, r in ev.reasons)]
        for path in lifted:
            # math only the diverging device runs: the one place a value-dependent divergence can come from
            board.add(path, lift(path), f"{own}, and {cues.value_dependent}", side=board.files[path].side)
        if lifted:
            notes.append(f"{cues.value_dependent}: {own} ranks above the kernel")
    if cues.nan and any(COMPARING_OPS.search(o.name) for o in ops if o.weight >= 0.5):
        kernels = [p for p, ev in board.files.items() if not p.endswith(HEADERS) and ev.score >= 0.75 * best
                   and (ev.side or nat.path_side(p)) == side]
        if kernels and not any(OWN_NAN.search(index.texts.get(p, "")) for p in kernels):
            lifted = []
            for path, ev in list(board.files.items()):
                if path.endswith(HEADERS) and nat.path_side(path) in (side, Side.SHARED) and \
                        any("math" in r and "used by" in r for _, r in ev.reasons) and \
                        OWN_NAN.search(index.texts.get(path, "")):
                    board.add(path, lift(path), f"its comparison functors decide NaNs, and {cues.nan}",
                              side=ev.side)
                    lifted.append(path)
            if lifted:
                notes.append(f"{cues.nan}: the kernel writes no NaN comparison of its own, so the functors it "
                             "uses rank first")
    return notes


def _add_launch_path(index: nat.KernelIndex, board: Board) -> bool:
    """Credit the CUDA launcher headers the op's CUDA kernels call (gpu_kernel_with_scalars in Loops.cuh,
    gpu_reduce_kernel in Reduce.cuh), and the launchers those call in turn (gpu_kernel_impl in CUDALoops.cuh)."""
    kernels = sorted(((p, ev.score) for p, ev in board.files.items()
                      if nat.path_side(p) == Side.CUDA and not p.endswith(HEADERS)), key=lambda x: -x[1])
    if not kernels:
        return False
    best = kernels[0][1]
    kernels = [(p, sc) for p, sc in kernels if sc >= 0.5 * best][:6]
    # header -> [(launcher, kernel file, its score, call sites)]
    direct: dict[str, list[tuple[str, str, float, int]]] = defaultdict(list)
    deep: dict[str, list[tuple[str, str]]] = defaultdict(list)  # header -> [(launcher, caller)]
    for path, score in kernels:
        texts = [b for _, b in board.bodies.get(path, ())]
        for attempt in (texts, [index.texts.get(path, "")]):  # the op's kernel bodies, else its whole file
            found = False
            for name in dict.fromkeys(m.group(1) for t in attempt for m in CALL_T.finditer(t[:30000])):
                d = _launcher_def(name, path, index)
                if d is None:
                    continue
                found = True
                calls = sum(len(re.findall(r"\b" + re.escape(name) + r"\s*[<(]", t)) for t in attempt)
                direct[d.path].append((name, path, score, calls))
                todo, seen = [(name, d)], {name}
                while todo and len(seen) < 12:  # through same-header wrappers to the launch in another header
                    outer, od = todo.pop()
                    for inner in dict.fromkeys(m.group(1) for m in CALL_T.finditer(od.body[:20000])):
                        if inner in seen:
                            continue
                        seen.add(inner)
                        same = index.definition_in(inner, od.path) if LAUNCHER.search(inner) else None
                        dd = same or _launcher_def(inner, od.path, index)
                        if dd is None or dd.path == path:
                            continue
                        if dd.path == d.path:
                            todo.append((inner, dd))
                        else:
                            deep[dd.path].append((inner, outer))
            if found:
                break
    for header, uses in direct.items():
        # the header most of the op's kernels and call sites go through leads (gpu_kernel over the
        # jiterator's alternative of one kernel)
        top = max(sc for _, _, sc, _ in uses)
        files = list(dict.fromkeys(f.rsplit("/", 1)[-1] for _, f, _, _ in uses))
        names = list(dict.fromkeys(n for n, _, _, _ in uses))
        calls = sum(c for _, _, _, c in uses)
        board.add(header, top * (LIFT + 0.03) + 0.01 * min(len(files) - 1, 3) + 0.005 * min(calls - 1, 4),
                  f"defines {', '.join(names[:3])}, the launcher {', '.join(files[:3])} call", side=Side.CUDA)
    for header, inner_uses in deep.items():
        if header in direct:
            continue
        names = list(dict.fromkeys(n for n, _ in inner_uses))
        callers = list(dict.fromkeys(c for _, c in inner_uses))
        board.add(header, best * LIFT, f"defines {', '.join(names[:3])}, called by the launcher "
                  f"{', '.join(callers[:3])}", side=Side.CUDA)
    return bool(direct)


def _launcher_def(name: str, caller_path: str, index: nat.KernelIndex) -> nat.Definition | None:
    """The CUDA header defining a launcher-like function (`*kernel*`, `launch*`, `*loop*`), if one does."""
    if len(name) < 6 or not LAUNCHER.search(name) or name.isupper() or name.startswith(("C10_", "AT_", "TORCH_")):
        return None
    if index.definition_in(name, caller_path) is not None:
        return None  # the kernel file's own helper
    defs = [d for d in index.definitions(name, limit=4, tensorish=False)
            if d.path.endswith(HEADERS) and nat.path_side(d.path) == Side.CUDA]
    if not defs or len({d.path for d in defs}) > 2:
        return None
    return defs[0]


def _no_kernels_reason(source: SourceProvider, extraction: Extraction) -> str:
    """Why a source without kernel files cannot be ranked, and the commands that fix it, for this release."""
    version = extraction.environment.version or getattr(source, "version", None)
    release = (version or "VERSION").split("+", 1)[0]
    spec = f"pytorch=={release}"
    return (
        f"{source.description} holds no ATen C++/CUDA kernel sources (wheels carry headers only), so no kernel "
        f"file can be ranked; to get them: `sftl sources fetch {spec} --cxx` (online, once; GitHub API), or "
        f"`sftl sources add {spec} DIR` for a PyTorch checkout or unpacked source package (a tree of a nearby "
        "release also serves), or `--source-root DIR` for this run"
    )
