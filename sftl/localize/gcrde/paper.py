"""The published method for PyTorch: dispatch kernel names fuzzy-matched against kernel file names."""

from __future__ import annotations

import difflib
from collections import defaultdict
from typing import TYPE_CHECKING

from sftl.codegraph import native as nat
from sftl.localize.gcrde.board import (
    Board,
    rank_board,
)
from sftl.localize.gcrde.ops import (
    torch_ops,
)
from sftl.model import Extraction, Issue, Localization, Outcome, Side

if TYPE_CHECKING:
    pass

def paper_pytorch(
    issue: Issue, extraction: Extraction, natives: dict[str, list[nat.NativeFunction]], files: list[str],
    top: int, divergent_op: str | None,
) -> Localization:
    """The published method: dispatch kernel names fuzzy-matched against kernel file names."""
    label = "paper"
    ops, unknown = torch_ops(issue, extraction, set(natives), divergent_op, focus=False)
    # the paper takes the snippet's operators as they are: no title, no incidental filtering
    ops = [o for o in ops if "named in the title" not in o.origin or o.weight >= 0.9]
    if not ops:
        why = "no operator of the snippet is in native_functions.yaml"
        return Localization(label, (), Outcome.ABSTAINED, why + (": " + ", ".join(unknown[:5]) if unknown else ""))
    dirs = {"aten/src/ATen/native/cpu/": Side.CPU, "aten/src/ATen/native/cuda/": Side.CUDA,
            "aten/src/ATen/native/": Side.SHARED}
    names: dict[str, list[str]] = defaultdict(list)  # file stem -> paths
    for path in files:
        folder, _, base = path.rpartition("/")
        if folder + "/" in dirs and "." in base:
            names[base.split(".")[0]].append(path)
    board = Board()
    for op in ops:
        for entry in natives.get(op.name, ()):
            for dkey, kernel in entry.dispatch.items():
                if dkey not in ("CPU", "CUDA"):
                    continue
                for predicted in (kernel, _camel(kernel)):
                    for match in difflib.get_close_matches(predicted, list(names), n=3, cutoff=0.6):
                        ratio = difflib.SequenceMatcher(None, predicted, match).ratio()
                        for path in names[match]:
                            board.add(path, ratio * op.weight,
                                      f"name {match!r} ~ predicted {predicted!r} ({dkey}: {kernel}) ratio {ratio:.2f}")
    if not board.files:
        return Localization(label, (), Outcome.ABSTAINED,
                            "no kernel file name is close to the dispatch kernels of " + ", ".join(o.name for o in ops))
    suspects = rank_board(board, {Side.CPU: 1.0, Side.CUDA: 1.0, Side.SHARED: 1.0}, top, label, nat.path_side)
    return Localization(label, tuple(suspects), Outcome.LOCATED, "ops: " + ", ".join(o.name for o in ops[:5]))


def _camel(kernel: str) -> str:
    """histogram_histc_cuda -> HistogramHistc: the file name a kernel would have by convention."""
    parts = [p for p in kernel.split("_") if p and p not in ("cuda", "cpu", "out", "kernel", "impl", "template")]
    return "".join(p[:1].upper() + p[1:] for p in parts)
