"""Evidence per file (score, reasons, side) and its ranking into `Suspect`s with the side weights."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sftl.localize.gcrde.cues import (
    Cues,
    Divergence,
)
from sftl.model import Side, Suspect

if TYPE_CHECKING:
    pass

# --------------------------------------------------------------------------------------------
# Evidence bookkeeping


@dataclass
class _Evidence:
    score: float = 0.0
    reasons: list[tuple[float, str]] = field(default_factory=list)
    hits: int = 0
    side: Side | None = None  # the device whose code this file is here, when its location does not say

    def add(self, score: float, reason: str, side: Side | None = None) -> None:
        self.hits += 1
        if score > self.score:
            self.score = score
            self.side = side
        self.reasons.append((score, reason))

    def reason(self) -> str:
        seen: list[str] = []
        for _, r in sorted(self.reasons, key=lambda x: -x[0]):
            if r not in seen:
                seen.append(r)
            if len(seen) == 3:
                break
        return "; ".join(seen)


class Board:
    def __init__(self) -> None:
        self.files: dict[str, _Evidence] = defaultdict(_Evidence)
        # path -> (function, body) of the op's kernels defined there: where its launchers are called
        self.bodies: dict[str, list[tuple[str, str]]] = defaultdict(list)
        # path -> {(the file that leads here, how)}: "calls" (a function defined here), "registers" (the stub's
        # function), "math" (a header defining what the kernel computes with), "stub" (REGISTER_DISPATCH here)
        self.edges: dict[str, set[tuple[str, str]]] = defaultdict(set)

    def edge(self, src: str, dst: str, kind: str) -> None:
        if src != dst:
            self.edges[dst].add((src, kind))

    def body(self, path: str, fn: str, body: str) -> None:
        if (fn, body) not in self.bodies[path]:
            self.bodies[path].append((fn, body))

    def add(self, path: str, score: float, reason: str, side: Side | None = None) -> None:
        self.files[path].add(score, reason, side)

    def above(self, path: str, lift: float) -> float:
        """Evidence that ranks a file of the same side just above `path`, its corroboration bonus included."""
        ev = self.files[path]
        return ev.score * lift + 0.025 * min(ev.hits - 1, 3)



_SPECIAL_LAYOUTS = ("quantized", "sparse", "nested", "mkldnn", "cudnn", "miopen", "transformers", "ao_sparse")


def rank_board(board: Board, side_weight: dict[Side | None, float], top: int, label: str,
          path_side: object, context: str = "") -> list[Suspect]:
    ranked: list[tuple[float, str, Side | None, str]] = []
    low = context.lower()
    for path, ev in board.files.items():
        side = ev.side or path_side(path)  # type: ignore[operator]
        score = ev.score * side_weight.get(side, 0.2) + 0.02 * min(ev.hits - 1, 3)
        special = next((w for w in _SPECIAL_LAYOUTS if f"/{w}/" in path.lower()), None)
        if special and special.rstrip("s") not in low and not (special in ("cudnn", "miopen") and "conv" in low):
            score *= 0.5  # a quantized/sparse/nested kernel, for a report about none of these
        ranked.append((score, path, side, ev.reason()))
    ranked.sort(key=lambda x: (-x[0], x[1]))
    return [Suspect(path, _unit(score), side, reason) for score, path, side, reason in ranked[:top]]


# Raw evidence tops out near 1.3 (an op named in the title, defined on the diverging device, lifted by a
# cue, plus corroborating hits); scores are reported on [0, 1] by this fixed scale, so they compare
# across reports and keep the ranking's order.
_SCORE_SCALE = 1.3


def _unit(raw: float) -> float:
    return round(min(1.0, max(0.0, raw / _SCORE_SCALE)), 4)


def side_weights(div: Divergence, cues: Cues | None = None) -> dict[Side | None, float]:
    if cues is not None and cues.cross_device:
        # the CPU agrees with the default GPU: CPU code is out; device-generic code (structured meta,
        # TensorIterator set-up) still decides which device runs the kernel
        return {Side.CUDA: 1.0, Side.SHARED: 0.85, Side.CPU: 0.45, None: 0.2}
    other = Side.CPU if div.side == Side.CUDA else Side.CUDA
    return {div.side: 1.0, Side.SHARED: 0.82, other: 0.66 if div.confident else 0.78, None: 0.2}



TFIDF = "TF-IDF back-off"


def lead_reason(ev: _Evidence, reason: str) -> None:
    """Put a reason first in the file's explanation without changing its score (reasons sort by score, stably)."""
    ev.reasons.insert(0, (max((r[0] for r in ev.reasons), default=ev.score), reason))
