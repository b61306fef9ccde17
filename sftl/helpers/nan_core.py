"""Framework-neutral NaN/INF search: signed-gradient descent on distance-to-invalid margins, and random search.

A backend runs the program once for given values of the search variables and reports what it saw
(`RunOutcome`): the first NaN/INF an operation produced from finite inputs (a `Finding`), the margin of
every unsafe operation site it passed, and, when asked, the gradient of one target site's margin
with respect to the variables. The gradient search (GRIST-style) picks the site closest to invalid,
steps the variables against the sign of that gradient with a growing/halving step size, and moves to
the next site when one stops improving; the random baseline resamples around the start point at
doubling scales. Runs inside the child process (numpy only, no framework import here).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

ETA0 = 1.0  # first relative signed step
ETA_GROWTH = 4.0  # per accepted signed step: overshooting into the invalid region is the goal
ETA_MAX = 64.0  # a step may multiply a value's magnitude by up to ~65
ETA_MIN = 1e-6  # below this the target site is given up
MAX_TRIES = 80  # steps on one site before moving to the next
NEWTON_OVERSHOOT = 1.25  # aim a quarter past the boundary: log(0) is -inf but sqrt(0) is still finite
NEWTON_FACTORS = (NEWTON_OVERSHOOT, 4.0)  # first-order probes: just past the boundary, then well past it
TINY = 1e-60  # well below float32's smallest subnormal (1.4e-45), where a positive value rounds to 0
SIGNED_FACTORS = (1.0, 4.0, 16.0)  # signed probes, in units of the current step size eta
RANDOM_DOUBLING_EVERY = 10  # random baseline: trials per scale before doubling it


@dataclass(frozen=True)
class Variable:
    name: str  # "arg0", "torch.randn@5"
    start: np.ndarray  # float64 copy of the starting value
    dtype: str  # the framework dtype name, e.g. "float32"


@dataclass
class Finding:
    op: str
    line: int | None
    code: str
    kind: str  # "forward" | "backward" | "python"
    inputs: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class RunOutcome:
    finding: Finding | None = None
    margins: dict[str, float] = field(default_factory=dict)  # site -> smallest raw margin this run
    normalized: dict[str, float] = field(default_factory=dict)  # site -> margin / scale
    grads: list[np.ndarray | None] | None = None  # d margin(target) / d variables
    target_crossing: bool = True  # the target's invalid region lies beyond 0 (else: only at 0)
    error: str | None = None
    seconds: float = 0.0


class Backend(Protocol):
    variables: list[Variable]

    def run(self, values: list[np.ndarray], target: str | None, want_grad: bool, deadline: float,
            grad_below: float = math.inf, margins: bool = True) -> RunOutcome:
        """One run; the target's gradient is taken only where its margin falls below `grad_below`;
        `margins=False` (random search) only watches for NaN/INF."""
        ...


@dataclass
class SearchResult:
    found: bool
    finding: Finding | None
    steps: int
    seconds: float
    values: list[np.ndarray] | None  # the variables' values at the finding
    reason: str = ""
    sites: list[str] = field(default_factory=list)
    cpu_seconds: float = 0.0  # this process's CPU time: steadier than wall time on a loaded machine


def bound_for(var: Variable, bound: float) -> float:
    """Values stay within a realistic range: +-bound, or 10x the start's magnitude if larger."""
    top = float(np.max(np.abs(var.start))) if var.start.size else 0.0
    return max(bound, 10.0 * top)


def _scale(var: Variable) -> float:
    if not var.start.size:
        return 1.0
    s = float(np.std(var.start)) if var.start.size > 1 else 0.0
    return max(s, float(np.mean(np.abs(var.start))), 1e-3)


def _done(finding: Finding | None, steps: int, t0: float, values: list[np.ndarray], sites: set[str],
          c0: float) -> SearchResult:
    return SearchResult(True, finding, steps, time.perf_counter() - t0, values, "", sorted(sites),
                        time.process_time() - c0)


def gradient_search(
    backend: Backend, budget: float, seed: int = 0, bound: float = 1e4, start_outcome: RunOutcome | None = None
) -> SearchResult:
    """Descend one unsafe site's margin at a time (first-order steps onto the invalid side, then signed steps)."""
    t0 = time.perf_counter()
    c0 = time.process_time()
    deadline = t0 + budget
    rng = np.random.default_rng(seed)
    vars_ = backend.variables
    if not vars_:
        return SearchResult(False, None, 0, 0.0, None, "the program has no floating-point inputs to search")
    start = [v.start.copy() for v in vars_]
    limits = [bound_for(v, bound) for v in vars_]
    taus = [1e-3 * _scale(v) for v in vars_]
    seen: set[str] = set()
    steps = 0

    def run(values: list[np.ndarray], target: str | None, grad_below: float = math.inf) -> RunOutcome:
        nonlocal steps
        steps += 1
        out = backend.run(values, target, target is not None, deadline, grad_below)
        seen.update(out.margins)
        return out

    def probe(values: list[np.ndarray], target: str | None = None) -> RunOutcome:
        nonlocal steps
        steps += 1
        out = backend.run(values, target, False, deadline)
        seen.update(out.margins)
        return out

    x = start
    out = start_outcome if start_outcome is not None else run(x, None)
    seen.update(out.margins)
    if out.finding:
        return _done(out.finding, steps, t0, x, seen, c0)
    exhausted: set[str] = set()
    target: str | None = None
    eta, tries, restarts = ETA0, 0, 0
    while time.perf_counter() < deadline:
        candidates = {s: v for s, v in out.normalized.items() if s not in exhausted}
        if not candidates:
            # every reachable site is stuck: restart from a random point around the start, wider each time
            restarts += 1
            sigma = 0.5 * 2.0 ** min(restarts, 40)
            x = [
                np.clip(s + sigma * _scale(v) * rng.standard_normal(s.shape), -lim, lim)
                for s, v, lim in zip(start, vars_, limits, strict=True)
            ]
            out = probe(x)
            if out.finding:
                return _done(out.finding, steps, t0, x, seen, c0)
            exhausted.clear()
            target = None
            continue
        chosen = min(candidates, key=lambda s: candidates[s])
        fresh = chosen != target
        if fresh:
            target, eta, tries = chosen, ETA0, 0
        if fresh or out.grads is None:
            out = run(x, chosen)  # the one run per accepted point that pays for a gradient
            if out.finding:
                return _done(out.finding, steps, t0, x, seen, c0)
            if chosen not in out.margins or out.grads is None:
                exhausted.add(chosen)
                continue
        grads = out.grads
        if not any(g is not None and np.any(g) for g in grads):
            exhausted.add(chosen)
            continue
        margin = out.margins[chosen]
        best: tuple[list[np.ndarray], RunOutcome] | None = None
        # probe along the gradient with plain runs (no autograd): a first-order jump to (and past) the
        # boundary, then signed steps of growing size; the best probe becomes the next point
        for proposal in _probes(x, grads, margin, out.target_crossing, limits, taus, eta):
            if time.perf_counter() >= deadline:
                break
            new = probe(proposal, chosen)
            if new.finding:
                return _done(new.finding, steps, t0, proposal, seen, c0)
            if new.error is None and chosen in new.margins and new.margins[chosen] < (
                    best[1].margins[chosen] if best else margin):
                best = (proposal, new)
        tries += 1
        if best is not None:
            x, out = best  # out.grads is None: the next round takes the gradient there
            eta = min(eta * ETA_GROWTH, ETA_MAX)
        else:
            eta *= 0.125  # the probes spanned eta..16 eta: shrink below all of them
            if eta < ETA_MIN:
                exhausted.add(chosen)
        if tries >= MAX_TRIES:
            exhausted.add(chosen)
    reason = "budget spent; no unsafe operation reached NaN/INF" if seen else "no unsafe operation was reached"
    return SearchResult(False, None, steps, time.perf_counter() - t0, None, reason, sorted(seen),
                        time.process_time() - c0)


def _probes(
    x: list[np.ndarray], grads: list[np.ndarray | None], margin: float, crossing: bool, limits: list[float],
    taus: list[float], eta: float,
) -> Iterator[list[np.ndarray]]:
    """Points along the gradient, the likeliest first: the first-order steps just past the boundary and far
    past it (log space), then signed steps of 1, 4 and 16 eta (capped at ETA_MAX)."""
    # a margin that must cross 0 (log's input, sqrt's) is often far from linear near it (a softmax
    # probability, an exponential): its logarithm is nearly linear, and the first-order step in log space
    # to well below float32's smallest subnormal is the plain step scaled by ln(margin / TINY)
    # towards 0 (a divisor that is a sum of exponentials) likewise: the plain step there aims at 0 exactly
    factors = NEWTON_FACTORS
    if margin > 0:
        factors = (factors[0], max(factors[1], math.log(margin / TINY)))
    newton = [_newton(x, grads, margin, crossing, limits, f) for f in factors[:1]]
    newton += [_newton(x, grads, margin, True, limits, f) for f in factors[1:]]
    etas = sorted({min(eta * k, ETA_MAX) for k in SIGNED_FACTORS})

    def signed(e: float) -> list[np.ndarray]:
        return [xi if gi is None else np.clip(xi - np.sign(gi) * e * np.maximum(np.abs(xi), tau), -lim, lim)
                for xi, gi, tau, lim in zip(x, grads, taus, limits, strict=True)]

    if crossing:  # any point past 0 is invalid: the far jump first, the near one if the far one saturates
        newton.reverse()
    order: list[list[np.ndarray] | None] = [*newton, *(signed(e) for e in etas)]
    for p in order:
        if p is not None:
            yield p


def _newton(
    x: list[np.ndarray], grads: list[np.ndarray | None], margin: float, crossing: bool, limits: list[float],
    overshoot: float = NEWTON_OVERSHOOT,
) -> list[np.ndarray] | None:
    """The first-order step that takes the margin to 0 (or a little past it where the invalid side lies beyond)."""
    gsq = sum(float(np.sum(g * g)) for g in grads if g is not None)
    if not math.isfinite(gsq) or gsq <= 0 or not math.isfinite(margin):
        return None
    factor = (margin * overshoot if crossing else margin) / gsq
    proposal = []
    for xi, gi, lim in zip(x, grads, limits, strict=True):
        if gi is None:
            proposal.append(xi)
            continue
        new = xi - factor * gi
        if not np.all(np.isfinite(new)):
            return None
        proposal.append(np.clip(new, -lim, lim))
    return proposal


def random_search(
    backend: Backend, budget: float, seed: int = 0, bound: float = 1e4, start_outcome: RunOutcome | None = None
) -> SearchResult:
    """The baseline: resample the variables around the start point, doubling the scale every few trials."""
    t0 = time.perf_counter()
    c0 = time.process_time()
    deadline = t0 + budget
    rng = np.random.default_rng(seed + 1)
    vars_ = backend.variables
    if not vars_:
        return SearchResult(False, None, 0, 0.0, None, "the program has no floating-point inputs to search")
    start = [v.start.copy() for v in vars_]
    limits = [bound_for(v, bound) for v in vars_]
    scales = [_scale(v) for v in vars_]
    top = max(lim / s for lim, s in zip(limits, scales, strict=True))
    seen: set[str] = set()
    steps = 0
    k = 0
    while time.perf_counter() < deadline:
        sigma = 2.0 ** (k // RANDOM_DOUBLING_EVERY)
        if sigma > top:  # wrapped past the bound: start the growing schedule again
            k, sigma = 0, 1.0
        k += 1
        x = start if steps == 0 and start_outcome is None else [
            np.clip(s + sigma * sc * rng.standard_normal(s.shape), -lim, lim)
            for s, sc, lim in zip(start, scales, limits, strict=True)
        ]
        steps += 1
        out = backend.run(x, None, False, deadline, margins=False)  # NaN/INF watch only: no margins to pay
        seen.update(out.margins)
        if out.finding:
            return _done(out.finding, steps, t0, x, seen, c0)
    return SearchResult(False, None, steps, time.perf_counter() - t0, None, "budget spent", sorted(seen),
                        time.process_time() - c0)


def summarize(value: Any, name: str | None = None, limit: int = 6) -> dict[str, Any]:
    """A short JSON description of an array (shape, dtype, range, first values) or a scalar."""
    out: dict[str, Any] = {} if name is None else {"name": name}
    arr = np.asarray(value)
    if arr.ndim == 0 and not isinstance(value, np.ndarray):
        v = arr.item()
        out["value"] = _num(v) if isinstance(v, float) else v if isinstance(v, (int, bool, str)) else repr(v)
        return out
    out["shape"] = list(arr.shape)
    out["dtype"] = str(arr.dtype)
    if arr.size and np.issubdtype(arr.dtype, np.number):
        flat = arr.astype(np.float64).ravel()
        finite = flat[np.isfinite(flat)]
        out["min"] = _num(float(finite.min())) if finite.size else None
        out["max"] = _num(float(finite.max())) if finite.size else None
        out["nonfinite"] = int(flat.size - finite.size)
        out["values"] = [_num(float(v)) for v in flat[:limit]]
    return out


def _num(v: float) -> float | str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return float(f"{v:.6g}")
