"""The role each PyTorch candidate file plays on the op's path, and the moves that put the diverging device's math first.

Roles: ``kernel`` (a `.cu`, or a `native/cpu/` source, that computes), ``wrapper`` (a `native/cuda/*.cpp`
that checks arguments and calls a launcher elsewhere), ``helper header`` (a `.cuh`/`.h` defining what a
kernel computes with: ScanUtils.cuh's scan_dim, PersistentSoftmax.cuh), ``launcher header`` (the
generic launch machinery: Loops.cuh, Reduce.cuh), ``vec header`` (`ATen/cpu/vec/**`), ``check/meta``
(the device-generic `native/*.cpp`: shape and dtype checks, promotion, structured meta) and ``other``.

The moves, each said in the file's reason: the `.cu` a wrapper calls ranks just above the wrapper (the
wrapper only forwards to the math); the helper header a thin `.cu` (no device code of its own, a template instantiated) forwards to
ranks just above it.
"""

from __future__ import annotations

import re

from sftl.codegraph import native as nat
from sftl.localize.gcrde.board import Board
from sftl.model import Side

KERNEL = "kernel"
WRAPPER = "wrapper"
HELPER = "helper header"
LAUNCHER = "launcher header"
VEC = "vec header"
CHECK = "check/meta"
OTHER = "other"
ROLES = (KERNEL, WRAPPER, HELPER, LAUNCHER, VEC, CHECK, OTHER)

_HEADERS = (".h", ".cuh", ".hpp")
# device code written in the file itself (a wrapper only calls a launcher defined elsewhere: launch_*_kernel)
_DEVICE_CODE = re.compile(r"__global__|<<<|\bgpu_kernel\w*\s*\(|\bgpu_reduce_kernel\s*\(|\bjitted_gpu_kernel\b")
# the generic launch machinery every elementwise/reduction kernel goes through
_LAUNCH_DEFS = re.compile(r"\b(?:void|inline|static)\b[^;{]*\b(?:gpu_kernel\w*|launch_\w*kernel|gpu_reduce_kernel"
                          r"|launch_vectorized_kernel|launch_legacy_kernel|cpu_kernel\w*|cpu_serial_kernel"
                          r"|binary_kernel_reduce\w*)\s*\(")
_LIFT_OVER = 1.02  # the file holding the math ranks this much above the file that only forwards to it
_THIN_LINES = 60  # a kernel file with fewer code lines than this only instantiates a header's template


def role(path: str, text: str) -> str:
    """The role of one candidate file, from where it lies and what it holds."""
    low = path.lower()
    if "/cpu/vec/" in low:
        return VEC
    side = nat.path_side(path)
    if path.endswith(_HEADERS):
        return LAUNCHER if _LAUNCH_DEFS.search(text) else HELPER
    if path.endswith(".cu") or ".cu." in path:
        return KERNEL
    if path.endswith((".cpp", ".cc", ".c")):
        if side == Side.CUDA:
            return KERNEL if _DEVICE_CODE.search(text) else WRAPPER
        if side == Side.CPU:
            return KERNEL
        if side == Side.SHARED and path.startswith("aten/src/ATen/native/"):
            return CHECK
    return OTHER


def code_lines(text: str) -> int:
    """Lines holding code: not blank, not a comment, not an #include or a namespace brace."""
    n = 0
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith(("//", "/*", "*", "#include", "#pragma", "namespace", "}")):
            continue
        n += 1
    return n


def _thin(text: str) -> bool:
    """A kernel file that writes no device code of its own and only instantiates a header's template."""
    return code_lines(text) < _THIN_LINES and not _DEVICE_CODE.search(text)


def roles_of(board: Board, texts: dict[str, str]) -> dict[str, str]:
    return {path: role(path, texts.get(path, "")) for path in board.files}


def put_math_first(board: Board, texts: dict[str, str]) -> list[str]:
    """Rank the file holding a device's math above the file that only forwards to it; notes for the reason."""
    roles = roles_of(board, texts)
    notes: list[str] = []
    moved_cu = 0
    for dst, sources in list(board.edges.items()):
        if roles.get(dst) != KERNEL or nat.path_side(dst) != Side.CUDA:
            continue
        wrappers = [s for s, kind in sources if kind in ("calls", "registers") and roles.get(s) == WRAPPER
                    and nat.path_side(s) == Side.CUDA and s in board.files]
        if not wrappers:
            continue
        top = max(wrappers, key=lambda s: board.files[s].score)
        target = board.above(top, _LIFT_OVER)
        if board.files[dst].score < target:
            short = top.rsplit("/", 1)[-1]
            board.add(dst, target, f"holds the CUDA code {short} forwards to ({short} is a wrapper: checks and a "
                      "launcher call)")
            moved_cu += 1
    if moved_cu:
        notes.append(f"{moved_cu} .cu file(s) ranked above the native/cuda .cpp wrapper that calls them")
    moved_h = 0
    for dst, sources in list(board.edges.items()):
        if roles.get(dst) != HELPER or nat.path_side(dst) not in (Side.CUDA, Side.CPU):
            continue
        thin = [s for s, kind in sources if kind == "math" and roles.get(s) == KERNEL and s in board.files
                and nat.path_side(s) == nat.path_side(dst) and _thin(texts.get(s, ""))]
        if not thin:
            continue
        top = max(thin, key=lambda s: board.files[s].score)
        target = board.above(top, _LIFT_OVER)
        if board.files[dst].score < target:
            short = top.rsplit("/", 1)[-1]
            board.add(dst, target, f"holds the math {short} only instantiates ({short} has "
                      f"{code_lines(texts.get(top, ''))} code lines)")
            moved_h += 1
    if moved_h:
        notes.append(f"{moved_h} helper header(s) ranked above the thin kernel file that instantiates them")
    return notes
