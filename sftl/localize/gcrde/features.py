"""What the learned ranker reads about each PyTorch candidate: role, side, call distance, kind, dtype and name evidence.

Every feature is a number in [0, 1], computed from the evidence board the hand ranking built (its
reasons and call edges), the file's place in the tree and its name; nothing here reads a label.
`FEATURES` is the fixed order the ranker's artefact stores its weights in.
"""

from __future__ import annotations

import difflib
import re
from collections import deque

from sftl.codegraph import native as nat
from sftl.localize.gcrde.board import TFIDF, Board
from sftl.localize.gcrde.dtypes import FAMILY
from sftl.localize.gcrde.ops import OpRef, dunder_free
from sftl.localize.gcrde.roles import ROLES, role
from sftl.model import Side, Suspect

FEATURES: tuple[str, ...] = (
    "hand_score", "hand_rel", "hand_rr",
    *(f"role_{r.replace(' ', '_').replace('/', '_')}" for r in ROLES),
    "side_diverging", "side_shared", "side_other", "side_confident",
    "defines_dispatch", "registers_stub", "math", "lifted", "included_only", "tfidf",
    "call_distance", "kind_cu", "kind_cuh", "kind_cuda_cpp", "kind_cpu_cpp", "kind_generic_cpp", "kind_h",
    "name_sim", "op_in_name", "dtype_match", "hits", "special_layout",
)
_TFIDF_OF = re.compile(r"\((\d\.\d+) of best\)")
_STEM_NOISE = re.compile(r"kernels?|cuda|cpu|impl|utils?|ops?|_", re.I)


def _distances(board: Board) -> dict[str, int]:
    """Calls from the files defining the op's dispatch kernels: 0 there, 1 for what they call, and so on."""
    forward: dict[str, set[str]] = {}
    for dst, sources in board.edges.items():
        for src, _ in sources:
            forward.setdefault(src, set()).add(dst)
    start = [p for p, ev in board.files.items() if any("(dispatch" in r or "REGISTER_DISPATCH" in r for _, r in ev.reasons)]
    dist = {p: 0 for p in start}
    todo = deque(start)
    while todo:
        p = todo.popleft()
        for q in forward.get(p, ()):
            if q not in dist:
                dist[q] = dist[p] + 1
                todo.append(q)
    return dist


def _compact(name: str) -> str:
    return _STEM_NOISE.sub("", name).lower()


def candidate_features(board: Board, suspects: list[Suspect], texts: dict[str, str], side: Side, confident: bool,
                       ops: list[OpRef], dtypes: set[str]) -> dict[str, dict[str, float]]:
    """Features of each ranked suspect, in `FEATURES` order (a dict per path)."""
    dist = _distances(board)
    top = max((s.score for s in suspects), default=0.0) or 1.0
    heaviest = max((o.weight for o in ops), default=1.0)
    names = [dunder_free(o.name).strip("_") for o in ops if o.weight >= 0.7 * heaviest][:3]
    families = {FAMILY[d] for d in dtypes if d in FAMILY}
    out: dict[str, dict[str, float]] = {}
    for rank, s in enumerate(suspects, 1):
        ev = board.files.get(s.path)
        reasons = [r for _, r in ev.reasons] if ev is not None else []
        f = dict.fromkeys(FEATURES, 0.0)
        f["hand_score"], f["hand_rel"], f["hand_rr"] = s.score, s.score / top, 1.0 / rank
        r = role(s.path, texts.get(s.path, ""))
        f[f"role_{r.replace(' ', '_').replace('/', '_')}"] = 1.0
        fside = s.side or nat.path_side(s.path)
        f["side_diverging"] = float(fside == side)
        f["side_shared"] = float(fside == Side.SHARED)
        f["side_other"] = float(fside in (Side.CPU, Side.CUDA) and fside != side)
        f["side_confident"] = float(confident)
        f["defines_dispatch"] = float(any("(dispatch" in x for x in reasons))
        f["registers_stub"] = float(any("REGISTER_DISPATCH" in x for x in reasons))
        f["math"] = float(any("math" in x for x in reasons))
        f["lifted"] = float(any(x.startswith(("holds the", "vectorized", "the jiterator")) for x in reasons))
        f["included_only"] = float(bool(reasons) and all(x.startswith(("header included by", TFIDF)) for x in reasons))
        fr = [float(m.group(1)) for x in reasons if (m := _TFIDF_OF.search(x))]
        f["tfidf"] = max(fr, default=0.0)
        d = dist.get(s.path)
        f["call_distance"] = 1.0 if d is None else min(d, 3) / 3
        p, base = s.path, s.path.rsplit("/", 1)[-1]
        f["kind_cu"] = float(p.endswith(".cu"))
        f["kind_cuh"] = float(p.endswith(".cuh"))
        f["kind_cuda_cpp"] = float(p.endswith(".cpp") and "/cuda/" in p)
        f["kind_cpu_cpp"] = float(p.endswith(".cpp") and "/cpu/" in p)
        f["kind_generic_cpp"] = float(p.endswith(".cpp") and nat.path_side(p) == Side.SHARED)
        f["kind_h"] = float(p.endswith((".h", ".hpp")))
        stem = _compact(base.split(".", 1)[0])
        f["name_sim"] = max((difflib.SequenceMatcher(None, stem, _compact(n)).ratio() for n in names), default=0.0)
        f["op_in_name"] = float(any(len(_compact(n)) >= 3 and _compact(n) in stem for n in names))
        f["dtype_match"] = float(any(fam and fam in base.lower() for fam in families))
        f["hits"] = min(ev.hits if ev is not None else 0, 5) / 5
        f["special_layout"] = float(any(f"/{w}/" in p.lower() for w in ("quantized", "sparse", "nested", "mkldnn",
                                                                           "cudnn", "miopen", "transformers")))
        out[s.path] = {k: round(v, 4) for k, v in f.items()}
    return out
