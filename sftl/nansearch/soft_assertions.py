"""Soft assertions for the NaN/INF search: per unsafe op, a small classifier trained on the op's own unit runs says which way to move its input towards NaN/INF.

The second guide beside the margin gradient (after "Soft Assertions", which trains one model per unstable
function on unit-level runs of that function): for each unary unsafe op (and the divisor of a division)
the op alone is run on many inputs, each moved up and down along a ladder of step sizes, and each input is
labelled with the direction whose smallest step produced NaN/INF first (or none). The classifier is a
table over (sign, decade of |x|) holding the majority label of its training inputs, the nearest filled
cell answering for empty ones. At search time it labels each element of the op's actual input, and that
direction field is pulled back to the program's inputs (a vector-Jacobian product), which needs no
hand-written distance. Runs inside the child process; training is done once per (op, dtype) before the
timed search, as the op-level models of the paper are trained offline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

DECADES = np.arange(-8, 7)  # log10 |x| cells of the table; inputs outside are clipped to the end cells
LADDER = 10.0 ** np.arange(-8.0, 6.5, 0.5)  # absolute step sizes tried in each direction
RELATIVE = np.array([0.1, 0.5, 0.9, 1.0, 1.1, 2.0, 10.0, 100.0, 1e3])  # and steps relative to |x| (1.0: to 0)
SAMPLES = 600  # unit runs' inputs per op (each tried at every ladder step, both ways: one batched call)

# op name -> (index of the input the assertion watches, keyword name, the op on that input alone)
UNITS: dict[str, tuple[int, str, Callable[[torch.Tensor], torch.Tensor]]] = {
    "log": (0, "input", torch.log),
    "log2": (0, "input", torch.log2),
    "log10": (0, "input", torch.log10),
    "log1p": (0, "input", torch.log1p),
    "sqrt": (0, "input", torch.sqrt),
    "rsqrt": (0, "input", torch.rsqrt),
    "exp": (0, "input", torch.exp),
    "expm1": (0, "input", torch.expm1),
    "exp2": (0, "input", torch.exp2),
    "cosh": (0, "input", torch.cosh),
    "sinh": (0, "input", torch.sinh),
    "acos": (0, "input", torch.acos),
    "arccos": (0, "input", torch.acos),
    "asin": (0, "input", torch.asin),
    "arcsin": (0, "input", torch.asin),
    "atanh": (0, "input", torch.atanh),
    "arctanh": (0, "input", torch.atanh),
    "acosh": (0, "input", torch.acosh),
    "arccosh": (0, "input", torch.acosh),
    "erfinv": (0, "input", torch.erfinv),
    "logit": (0, "input", torch.logit),
    "tan": (0, "input", torch.tan),
    "reciprocal": (0, "input", torch.reciprocal),
    "div": (1, "other", torch.reciprocal),
    "divide": (1, "other", torch.reciprocal),
    "true_divide": (1, "other", torch.reciprocal),
    "__truediv__": (1, "other", torch.reciprocal),
    "__div__": (1, "other", torch.reciprocal),
    "__rtruediv__": (0, "input", torch.reciprocal),
    "__rdiv__": (0, "input", torch.reciprocal),
}


@dataclass
class SoftAssertion:
    """The classifier of one (op, dtype): `predict` maps input values to -1 (move down), 0, +1 (move up)."""

    op: str
    dtype: torch.dtype
    table: np.ndarray = field(default_factory=lambda: np.zeros((2, len(DECADES)), dtype=np.int8))
    accuracy: float = 0.0  # on held-out unit runs

    def fit(self, unit: Callable[[torch.Tensor], torch.Tensor], rng: np.random.Generator) -> SoftAssertion:
        x = _samples(rng, SAMPLES)
        y = label(unit, x, self.dtype)
        held = len(x) // 4
        self.table = _tabulate(x[held:], y[held:])
        self.accuracy = float(np.mean(self.predict(x[:held]) == y[:held])) if held else 0.0
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        sign = (x < 0).astype(int)
        cell = _cell(x)
        return self.table[sign, cell]


def _samples(rng: np.random.Generator, n: int) -> np.ndarray:
    magnitude = 10.0 ** rng.uniform(DECADES[0], DECADES[-1] + 1, n)
    x = np.where(rng.random(n) < 0.5, -magnitude, magnitude)
    x[rng.random(n) < 0.05] = 0.0  # exact zeros occur (a dead ReLU, an empty mask)
    return x


def _cell(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        decade = np.floor(np.log10(np.abs(x)))
    decade = np.where(np.isfinite(decade), decade, DECADES[0])
    return (np.clip(decade, DECADES[0], DECADES[-1]) - DECADES[0]).astype(int)


def label(unit: Callable[[torch.Tensor], torch.Tensor], x: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """Unit runs: for each input, the direction (+1 up, -1 down) whose smallest ladder step makes `unit`
    NaN/INF from a finite input first; 0 where neither does (or the input itself already breaks it)."""
    steps = np.concatenate([np.broadcast_to(LADDER, (len(x), len(LADDER))), np.abs(x)[:, None] * RELATIVE], 1)
    with torch.no_grad():
        base_ok = torch.isfinite(unit(torch.tensor(x, dtype=dtype))).numpy()
        first = []
        for sign in (1.0, -1.0):
            t = torch.tensor(x[:, None] + sign * steps, dtype=dtype)
            bad = (~torch.isfinite(unit(t)) & torch.isfinite(t)).numpy()
            first.append(np.where(bad, steps, np.inf).min(1))  # the smallest step that breaks it
    up, down = first
    y = np.where(up < down, 1, np.where(down < up, -1, 0))
    return np.where(base_ok, y, 0).astype(np.int8)


def _tabulate(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Majority label per (sign, decade); empty cells copy the nearest filled cell of the same sign."""
    table = np.zeros((2, len(DECADES)), dtype=np.int8)
    sign, cell = (x < 0).astype(int), _cell(x)
    for s in (0, 1):
        filled: dict[int, int] = {}
        for c in range(len(DECADES)):
            votes = y[(sign == s) & (cell == c)]
            if votes.size:
                values, counts = np.unique(votes, return_counts=True)
                filled[c] = int(values[np.argmax(counts)])
        for c in range(len(DECADES)):
            if filled:
                table[s, c] = filled[min(filled, key=lambda f: (abs(f - c), f))]
    return table


class SoftGuide:
    """The soft assertions of every op in UNITS, trained lazily per (op, dtype) and kept for the process."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.models: dict[tuple[str, torch.dtype], SoftAssertion] = {}

    def watched(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor | None:
        """The input of op `name` its assertion watches, when it is a floating-point tensor."""
        spec = UNITS.get(name)
        if spec is None:
            return None
        index, key, _ = spec
        x = args[index] if len(args) > index else kwargs.get(key)
        return x if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 0 else None

    def model(self, name: str, dtype: torch.dtype) -> SoftAssertion:
        key = (name, dtype)
        if key not in self.models:
            rng = np.random.default_rng(self.seed + len(self.models))
            self.models[key] = SoftAssertion(name, dtype).fit(UNITS[name][2], rng)
        return self.models[key]

    def train(self, names: list[str], dtypes: list[torch.dtype]) -> None:
        """Train up front (outside the timed search) what a program is likely to need."""
        for name in names:
            if name in UNITS:
                for dtype in dtypes:
                    self.model(name, dtype)
        # the first autograd.grad with grad_outputs imports half a second of torch modules: not inside a run,
        # whose time limit could interrupt the import halfway
        leaf = torch.ones(2, requires_grad=True)
        pull_back(leaf * 2.0, torch.ones(2), [leaf])

    def direction(self, name: str, x: torch.Tensor) -> torch.Tensor | None:
        """Per element: +1 / -1 (move up / down towards NaN/INF), 0; None where no element can get there."""
        labels = self.model(name, x.dtype).predict(x.detach().to(torch.float64).cpu().numpy().ravel())
        if not np.any(labels):
            return None
        # on x's device: autograd rejects grad_outputs on another device, which would switch the guide off on CUDA
        return torch.tensor(labels.reshape(tuple(x.shape)), dtype=x.dtype, device=x.device)


def pull_back(x: torch.Tensor, direction: torch.Tensor, leaves: list[torch.Tensor]) -> list[Any] | None:
    """The direction field on the op's input, pulled back to the leaves: d<direction, x>/d leaves."""
    if not x.requires_grad or not leaves:
        return None
    try:
        return list(torch.autograd.grad(x, leaves, grad_outputs=direction, retain_graph=True, allow_unused=True))
    except RuntimeError:
        return None


def describe(model: SoftAssertion) -> str:
    """One line per model, for debugging: the label of each (sign, decade) cell."""
    cells = " ".join(f"{int(d):+d}:{'+' if u > 0 else '-' if u < 0 else '.'}{'+' if v > 0 else '-' if v < 0 else '.'}"
                     for d, u, v in zip(DECADES, model.table[0], model.table[1], strict=True))
    return f"{model.op}[{str(model.dtype).removeprefix('torch.')}] acc {model.accuracy:.2f} {cells}"
