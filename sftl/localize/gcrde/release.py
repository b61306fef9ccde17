"""The report's own release's kernel files, from the source paths its compiled libraries name, against a tree of another release.

A report read against the nearest tree of another release (its wheel carries no C++) meets kernels
that moved in between: the release computed `kthvalue` in `cuda/SortingKthValue.cu`, the tree has it
in `cuda/Sorting.cpp` and `Sorting.cu`; `cummax` lived in `cuda/ScanKernels.cu`, the tree splits it
into `ScanKernels.cpp` and `CumminmaxKernel.cu`. The release's `libtorch_cuda.so` keeps the paths
of the files compiled into it (`__FILE__` of TORCH_CHECK; `sftl.sources.inventory`), so:

* a file the release names and the tree lacks, under `ATen/native/`, becomes a candidate when it is
  the op's (its name holds the op's: SortingKthValue.cu for kthvalue) or shares its stem with the
  tree's file that defines or registers the op's kernel on that device (ScanKernels.cu for the
  tree's ScanKernels.cpp): it ranks just above the file it stands for; its text is not at hand,
  and the reason says so;
* a CUDA kernel file of the tree under `native/cuda/` that the release does not name, on the op's
  path, goes just below the best file of the release that defines or registers the op's kernel:
  it was most likely split off or added after the release. Only where the release names enough of
  that folder (`_MIN_NAMED`): old builds kept few paths. CPU kernels are never moved this way (each is compiled
  per CPU capability from a copy in the build folder, which the inventory drops).

* a file reached only through a dispatch stub the release's own headers (its wheel's) do not declare
  goes just below the file defining the op's kernel, which calls that stub now: the stub, and the
  kernel file registering it, came later (bicubic's CPU code sat in UpSampleBicubic2d.cpp before
  `upsample_bicubic2d_kernel` moved it to cpu/UpSampleKernel.cpp). This reads headers, so it also
  judges CPU files, which the inventory cannot.

A release with no wheel of its own (a nightly `1.7.0.dev20201001`, a local build `2.2.0a0+81ea7a4`)
reads the wheel of the same release number, or the stand-in era wheel the source layers, said so.
"""

from __future__ import annotations

import re
from typing import Any

from sftl.codegraph import native as nat
from sftl.localize.gcrde.board import TFIDF, Board, lead_reason
from sftl.localize.gcrde.ops import OpRef, dunder_free
from sftl.model import Side
from sftl.sources import inventory

NATIVE = "aten/src/ATen/native/"
CUDA_DIR = NATIVE + "cuda/"
_KINDS = (".cu", ".cpp", ".cuh")
# a release naming fewer of the tree's native/cuda files than this (or than half of them, in a small tree) kept too
# few paths to judge which files it lacked (1.0.1 names 35 of 1.13.1's 200 .cu files; 1.5-1.9 name 80-110)
_MIN_NAMED = 60
_LIFT = 1.02
_BELOW = 0.97
# a CPU kernel's per-capability copy in the build folder (cpu/X.cpp.AVX2.cpp): the tree's own X.cpp
_CAPABILITY = re.compile(r"\.cpp\.\w+\.cpp$")


def _compact(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].split(".", 1)[0]


def _on_path(reasons: list[tuple[float, str]]) -> bool:
    """Evidence from following the op (its kernel defined or registered, a function it calls), not a header
    include or the TF-IDF back-off."""
    return any(not r.startswith(("header included by", TFIDF)) for _, r in reasons)


def apply_release_names(board: Board, ops: list[OpRef], side: Side, source: Any, files: list[str]) -> list[str]:
    """Add the release's own kernel files the tree lacks, move the tree's CUDA files the release lacks; notes."""
    tree_release = tree_release_of(source)
    if tree_release is None or not board.files or not ops:
        return []
    named, release = inventory.release_named(source)
    if not named or inventory.base_release(release) == tree_release:
        return []
    have = set(files)
    heaviest = max(o.weight for o in ops)
    main = [o for o in ops if o.weight >= 0.7 * heaviest]
    notes: list[str] = []
    short = release.split(" ", 1)[0]
    if " [" in release:  # read from the bundled release index: say so, and which release
        whose = release.split(" [", 1)[1].rstrip("]").replace("'s libraries", "", 1)
    else:
        whose = release if short == release else f"{short} (its wheel standing for {getattr(source, 'version', '')})"
    # 1. the release's files the tree lacks, standing for the tree's file of the op (or named after the op)
    added: list[str] = []
    for path in sorted(named):
        if not path.startswith(NATIVE) or not path.endswith(_KINDS) or path in have or _CAPABILITY.search(path):
            continue
        pside = nat.path_side(path)
        stem = _stem(path)
        target: tuple[str, str] | None = None  # (the tree's file it stands for, why)
        for o in main:
            op = _compact(dunder_free(o.name))
            if len(op) < 4 or op not in _compact(stem):
                continue
            best = _best_of_op(board, o.name, pside)
            if best is not None and best not in named:  # a replacement: the release lacks the tree's file of the op
                target = (best, f"named after {o.name}")
                break
        if target is None:
            twins = [p for p, ev in board.files.items() if _stem(p) == stem and p != path and p not in named
                     and nat.path_side(p) == pside and _on_path(ev.reasons)]
            if twins:
                twin = max(twins, key=lambda p: board.files[p].score)
                target = (twin, f"the stem of {twin.rsplit('/', 1)[-1]}")
        if target is None:
            continue
        stand, why = target
        board.add(path, board.above(stand, _LIFT),
                  f"named by the compiled libraries of {whose} (their __FILE__ strings), not in the tree read "
                  f"({tree_release}): the release's own kernel file ({why}); the tree has the op in "
                  f"{stand.removeprefix(NATIVE)}; its source is not at hand", side=pside)
        board.edge(stand, path, "calls")
        added.append(path)
    if added:
        notes.append(f"{len(added)} kernel file(s) only {short} had, named by its libraries: "
                     + ", ".join(p.removeprefix(NATIVE) for p in added[:3]))
    # 2. the tree's CUDA kernel files the release does not name: added after it
    named_cuda = [p for p in named if p.startswith(CUDA_DIR) and p in have]
    tree_cuda = sum(1 for p in have if p.startswith(CUDA_DIR) and p.endswith((".cu", ".cpp")))
    if len(named_cuda) < min(_MIN_NAMED, tree_cuda / 2):
        return notes
    on_path = {p: ev for p, ev in board.files.items() if p.startswith(CUDA_DIR) and p.endswith((".cu", ".cpp"))
               and _on_path(ev.reasons)}
    # the ceiling: a file the release names that defines or registers the op's kernel (not a helper it calls)
    kept = [p for p, ev in on_path.items() if p in added or (p in named and any(
        "(dispatch" in r or "REGISTER_DISPATCH" in r for _, r in ev.reasons))]
    if not kept:
        return notes
    def bonus(ev: Any) -> float:  # the corroboration bonus the ranking adds (board._rank)
        return 0.02 * min(ev.hits - 1, 3)

    ceiling = max(board.files[p].score + bonus(board.files[p]) for p in kept)
    moved = []
    for path, ev in on_path.items():
        if path in named or path in added or ev.score + bonus(ev) < ceiling:
            continue
        ev.score = max(0.0, ceiling * _BELOW - bonus(ev))
        lead_reason(ev, f"not named by {short}'s compiled libraries, which name {len(named_cuda)} of this tree's "
              f"native/cuda files: most likely split off or added after {short}")
        moved.append(path)
    if moved:
        notes.append(f"{len(moved)} CUDA file(s) of the tree that {short}'s libraries do not name rank below "
                     "the op's files they do")
    return notes


def _best_of_op(board: Board, op: str, side: Side | None) -> str | None:
    """The best file of one side whose evidence follows `op` itself."""
    tag = f" for {op}"
    cands = [p for p, ev in board.files.items() if nat.path_side(p) == side and not p.endswith((".h", ".cuh"))
             and any(tag in r and not r.startswith(TFIDF) for _, r in ev.reasons)]
    return max(cands, key=lambda p: board.files[p].score) if cands else None


def tree_release_of(source: Any) -> str | None:
    """The release of the tree whose C++ the source reads, when it is not the report's; else None."""
    report = inventory.base_release(getattr(source, "version", None))
    for layer in inventory.layers(source):
        if getattr(layer, "wheel", None) is None and getattr(layer, "root", None) is not None:
            tree = inventory.base_release(getattr(layer, "version", None))
            return tree if tree and tree != report else None
    return None


# --------------------------------------------------------------------------------------------
# Dispatch stubs the report's release did not have yet

_REGISTER = re.compile(r"^REGISTER_DISPATCH\((\w+), ")
_DECLARE = re.compile(r"DECLARE_DISPATCH\(\s*[^;]*?,\s*(\w+)\s*\)")


def _declaring_headers(index: nat.KernelIndex, stub: str) -> list[str]:
    return [p for p in index.files_with(stub) if p.startswith(NATIVE) and p.endswith(".h")
            and re.search(r"DECLARE_DISPATCH\([^;]*\b" + re.escape(stub) + r"\b", index.texts.get(p, ""))]


def declared_stubs(path: str, text: str) -> tuple[str, ...]:
    """The dispatch stubs a native header declares (DECLARE_DISPATCH); () for any other file. What the bundled
    release index keeps of a wheel's headers, for a source without them."""
    if not (path.startswith(NATIVE) and path.endswith(".h")):
        return ()
    return tuple(sorted(set(_DECLARE.findall(text))))


def _release_lacks(stub: str, index: nat.KernelIndex, layers: list[Any], memo: dict[str, str],
                   indexed: Any = None) -> bool:
    """Whether the report's release's own headers never declare `stub` though they hold the header the tree declares
    it in (the registration was added later); an unknown header decides nothing. Without the release's headers,
    the stubs the bundled index keeps of them (`indexed`: release_index.IndexedRelease) answer."""
    headers = _declaring_headers(index, stub)
    own = [t for h in headers for layer in layers if (t := layer.read_text(h)) is not None]
    if not own and indexed is not None and indexed.declarations:
        if not any(h in indexed.declarations for h in headers):
            return False  # the release had none of the headers the tree declares it in: nothing to judge by
        return not any(stub in names for names in indexed.declarations.values())
    if not own or any(stub in t for t in own):
        return False
    if "all" not in memo:  # moved to another header? read the release's headers once, only now
        memo["all"] = "\n".join(t for layer in layers for f in layer.list_files()
                                if f.startswith(NATIVE) and f.endswith(".h") and (t := layer.read_text(f)))
    return stub not in memo["all"]


def apply_release_stubs(board: Board, index: nat.KernelIndex, source: Any,
                        weights: dict[Side | None, float]) -> list[str]:
    """A file reached only through a dispatch stub the report's release did not declare goes just below the file that
    defines the op's kernel and calls the stub there (bicubic's CPU code was in UpSampleBicubic2d.cpp before
    upsample_bicubic2d_kernel moved it to cpu/UpSampleKernel.cpp); notes."""
    from sftl.localize import legacy

    layers = legacy.report_layers(source)
    if not layers:
        return []
    memo: dict[str, str] = {}
    lacking: dict[str, bool] = {}
    moved: list[str] = []
    indexed = inventory.indexed(source)  # no wheel nor libraries at hand: the stubs the bundled index keeps

    def effective(path: str) -> float:
        ev = board.files[path]
        return ev.score * weights.get(ev.side or nat.path_side(path), 0.2) + 0.02 * min(ev.hits - 1, 3)

    for path, ev in list(board.files.items()):
        if any("(dispatch" in r for _, r in ev.reasons):
            continue
        # the registrations that give the file its rank (a lesser op's stub beside them keeps only its own weight)
        leading = [(sc, m.group(1)) for sc, r in ev.reasons if (m := _REGISTER.match(r)) and sc >= 0.9 * ev.score]
        stubs = {stub for _, stub in leading}
        if not stubs:
            continue
        callers = [src for src, kind in board.edges.get(path, ()) if kind == "stub" and src in board.files]
        if not callers:
            continue
        for stub in stubs:
            if stub not in lacking:
                lacking[stub] = _release_lacks(stub, index, layers, memo, indexed)
        if not all(lacking[s] for s in stubs):
            continue
        caller = max(callers, key=effective)
        ceiling = effective(caller)
        if effective(path) < ceiling:
            continue
        w = weights.get(ev.side or nat.path_side(path), 0.2)
        rest = max((sc for sc, r in ev.reasons if not ((m := _REGISTER.match(r)) and m.group(1) in stubs)), default=0.0)
        ev.score = max(rest, (ceiling * _BELOW - 0.02 * min(ev.hits - 1, 3)) / max(w, 1e-6))
        release = getattr(source, "era_release", None) or getattr(source, "version", "")
        whose = f"{release}'s own headers" if indexed is None else f"{release}'s headers ({indexed.origin})"
        lead_reason(ev, f"registers {', '.join(sorted(stubs))}, which {whose} do not declare: the op's "
              f"code then sat in {caller.removeprefix(NATIVE)}, which calls the stub now")
        moved.append(path)
    if not moved:
        return []
    return [f"{len(moved)} file(s) reached through a dispatch stub the report's release did not declare rank below "
            "the op's kernel file"]
