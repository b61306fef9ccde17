"""The dtypes a report uses, and the dtype-specific code they reach: CPU vectorized headers, the jiterator's code generation.

* CPU side, complex / half / bfloat16 inputs: the CPU kernel's elementwise math runs through
  `ATen/cpu/vec/vec256|vec512/vec*_<dtype>*.h` (`Vectorized<c10::complex<float>>::exp`), so the vec
  headers of that dtype that define the op's method rank just above the CPU kernel.
* CUDA side, a kernel built by the jiterator (`jitted_gpu_kernel`) and a dtype the jiterator must
  name in the code it generates at run time (uint16/32/64, complex32, float8): `cuda/jit_utils.cpp`,
  which maps dtypes to C++ type names, ranks just above the kernel.
"""

from __future__ import annotations

import re

from sftl.codegraph import native as nat
from sftl.localize.gcrde.board import Board
from sftl.localize.gcrde.ops import OpRef, dunder_free
from sftl.model import Extraction, Issue, Side

VEC_DIR = "aten/src/ATen/cpu/vec/"
JIT_UTILS = "aten/src/ATen/native/cuda/jit_utils.cpp"

_DTYPE = re.compile(
    r"\b(?:torch\.)?(u?int(?:8|16|32|64)|float(?:16|32|64)|half|bfloat16|complex(?:32|64|128)|cfloat|cdouble|chalf"
    r"|float8\w*|bool)\b", re.I)
_COMPLEX_LITERAL = re.compile(r"(?<![\w.])\d+(?:\.\d*)?(?:e[-+]?\d+)?j\b|\bcomplex\s*\(|\+\s*\d*\.?\d*j\b", re.I)
FAMILY = {"complex32": "complex", "complex64": "complex", "complex128": "complex", "cfloat": "complex",
           "cdouble": "complex", "chalf": "complex", "float16": "half", "half": "half", "bfloat16": "bfloat16"}
_JIT_RARE = re.compile(r"^(?:uint(?:16|32|64)|complex32|chalf|float8\w*)$")
_LIFT = 1.03
_OTHER_ARCH = re.compile(r"/(?:vsx|zarch|sve|neon)/|_vsx\.h$|_neon\.h$", re.I)  # x86 builds compile none of these


def report_dtypes(issue: Issue, extraction: Extraction) -> set[str]:
    """Dtype names the report writes (torch.uint16, 'complex64', a complex literal 1+2j)."""
    code = extraction.snippet.code if extraction.snippet else ""
    text = "\n".join([issue.title, issue.body or "", code])
    found = {m.group(1).lower() for m in _DTYPE.finditer(text)}
    if _COMPLEX_LITERAL.search(code) or re.search(r"\bcomplex\b", issue.title, re.I):
        found.add("complex64")
    return found


def _best(board: Board, side: Side, headers: bool = False) -> tuple[str, float] | None:
    cands = [(p, ev.score) for p, ev in board.files.items()
             if nat.path_side(p) == side and (headers or not p.endswith((".h", ".cuh", ".hpp")))]
    return max(cands, key=lambda x: x[1]) if cands else None


def add_vec_headers(board: Board, ops: list[OpRef], dtypes: set[str], side: Side, files: list[str],
                    read: object) -> list[str]:
    """CPU side: the vectorized headers of the report's dtype family that define the op's method."""
    families = {FAMILY[d] for d in dtypes if d in FAMILY}
    if side != Side.CPU or not families or not ops:
        return []
    best = _best(board, Side.CPU)
    if best is None:
        return []
    heaviest = max(o.weight for o in ops)
    names = [dunder_free(o.name).strip("_") for o in ops if o.weight >= 0.7 * heaviest]
    methods = [re.compile(r"\b" + re.escape(n) + r"\s*\(\s*\)\s*const\b") for n in names if len(n) >= 2]
    added = []
    for path in files:
        base = path.rsplit("/", 1)[-1].lower()
        if not path.startswith(VEC_DIR) or not base.endswith(".h") or _OTHER_ARCH.search(path):
            continue
        family = next((f for f in families if f in base), None)
        if family is None:
            continue
        text = read(path) or ""  # type: ignore[operator]
        hit = next((n for n, rx in zip(names, methods, strict=False) if rx.search(text)), None)
        if hit is None:
            continue
        board.add(path, board.above(best[0], _LIFT), f"vectorized {family} {hit}() for the CPU ({family} inputs in the report); "
                  f"the CPU kernel {best[0].rsplit('/', 1)[-1]} runs it", side=Side.CPU)
        board.edge(best[0], path, "math")
        added.append(path)
    return [f"{len(added)} CPU vectorized {'/'.join(sorted(families))} header(s) define the op"] if added else []


def add_jiterator(board: Board, dtypes: set[str], side: Side, texts: dict[str, str], files: list[str]) -> list[str]:
    """CUDA side, a jiterator-built kernel and a dtype the jiterator must name: its code generation."""
    rare = sorted(d for d in dtypes if _JIT_RARE.match(d))
    if side != Side.CUDA or not rare or JIT_UTILS not in files:
        return []
    jitted = [(p, ev.score) for p, ev in board.files.items() if p.endswith(".cu")
              and "jitted_gpu_kernel" in texts.get(p, "") and any("dispatch" in r or "REGISTER_DISPATCH" in r
                                                                  for _, r in ev.reasons)]
    if not jitted:
        return []
    path, score = max(jitted, key=lambda x: x[1])
    board.add(JIT_UTILS, board.above(path, _LIFT), f"the jiterator generates {path.rsplit('/', 1)[-1]}'s code at run time "
              f"and names its dtypes here ({', '.join(rare)} in the report)", side=Side.CUDA)
    board.edge(path, JIT_UTILS, "calls")
    return [f"{', '.join(rare)} through a jiterator kernel: its code generation (jit_utils.cpp) ranks first"]
