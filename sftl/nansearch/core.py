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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
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
SATURATE = 1e3  # domain probe "up": each variable scaled to this many times its typical size (within the bound)
MAX_DOMAIN_PROBES = 4
DOMAIN_PROBES = {  # per invalid domain (unsafe_ops.Margin.kind), the input transformations likeliest to reach it
    "overflow": ("up", "flip_up"),
    "positive": ("up", "flip", "flip_up"),
    "unit": ("up", "flip_up"),
    "zero": ("zeros", "up", "flip_up"),
}
RANKED_SITES = 3  # after an all-sites gradient run, the far first-order jump of this many best-ranked sites
RANDOM_DOUBLING_EVERY = 10  # random baseline: trials per scale before doubling it


@dataclass(frozen=True)
class Variable:
    name: str  # "arg0", "torch.randn@5"
    start: np.ndarray  # float64 copy of the starting value
    dtype: str  # the framework dtype name, e.g. "float32"

    @cached_property
    def top(self) -> float:
        """The start's largest magnitude."""
        return float(np.max(np.abs(self.start))) if self.start.size else 0.0

    @cached_property
    def scale(self) -> float:
        """The start's typical magnitude (its spread, or its mean size), at least 1e-3."""
        if not self.start.size:
            return 1.0
        s = float(np.std(self.start)) if self.start.size > 1 else 0.0
        return max(s, float(np.mean(np.abs(self.start))), 1e-3)


@dataclass
class Finding:
    op: str
    line: int | None
    code: str
    kind: str  # "forward" | "backward" | "python"
    inputs: list[dict[str, Any]] = field(default_factory=list)
    # copies of the op's inputs, summarized only when reported (`summary()`): not inside the timed search
    pending: list[tuple[str, Any]] = field(default_factory=list)
    summarizer: Callable[[Any, str], dict[str, Any]] | None = None

    def summary(self) -> list[dict[str, Any]]:
        """The op's inputs as JSON summaries."""
        if self.pending and self.summarizer is not None:
            return self.inputs + [self.summarizer(value, name) for name, value in self.pending]
        return self.inputs


@dataclass
class RunOutcome:
    finding: Finding | None = None
    margins: dict[str, float] = field(default_factory=dict)  # site -> smallest raw margin this run
    normalized: dict[str, float] = field(default_factory=dict)  # site -> margin / scale
    grads: list[np.ndarray | None] | None = None  # d margin(target) / d variables
    target_crossing: bool = True  # the target's invalid region lies beyond 0 (else: only at 0)
    error: str | None = None
    seconds: float = 0.0
    kinds: dict[str, str] = field(default_factory=dict)  # site -> invalid domain (unsafe_ops.Margin.kind)
    site_grads: dict[str, list[np.ndarray | None]] = field(default_factory=dict)  # target ALL_SITES: every gradient
    site_crossing: dict[str, bool] = field(default_factory=dict)
    soft_grads: list[np.ndarray | None] | None = None  # the soft-assertion guide's direction for the target
    site_soft: dict[str, list[np.ndarray | None]] = field(default_factory=dict)  # the same per site (ALL_SITES)


ALL_SITES = "*"  # as a run's target: every site's margin is differentiated (one instrumented run ranks them all)


class Backend(Protocol):
    variables: list[Variable]

    def run(self, values: list[np.ndarray], target: str | None, want_grad: bool, deadline: float,
            grad_below: float = math.inf, margins: bool = True, only_target: bool = False) -> RunOutcome:
        """One run; the target's gradient is taken only where its margin falls below `grad_below`
        (target ALL_SITES: every site's, into `site_grads`); `margins=False` (random search, probes)
        only watches for NaN/INF; `only_target` records the target's margin alone."""
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
    phase: str = ""  # what found it: "start", "domain" (a cheap probe), "gradient", "soft", "restart", "random"


def bound_for(var: Variable, bound: float) -> float:
    """Values stay within a realistic range: +-bound, or 10x the start's magnitude if larger."""
    return max(bound, 10.0 * var.top)


def _done(finding: Finding | None, steps: int, t0: float, values: list[np.ndarray], sites: set[str],
          c0: float, phase: str = "") -> SearchResult:
    return SearchResult(True, finding, steps, time.perf_counter() - t0, values, "", sorted(sites),
                        time.process_time() - c0, phase)


def domain_probes(start: list[np.ndarray], vars_: list[Variable], limits: list[float],
                  out: RunOutcome) -> list[tuple[str, list[np.ndarray]]]:
    """The cheap first guesses, from the invalid domains of the sites the start run reached (closest first).

    A saturating or overflowing op (softmax/sigmoid/tanh into log/atanh, exp) breaks when the inputs
    grow ("up": each variable scaled to SATURATE times its typical size, within the bound), a divisor
    or a norm when they vanish ("zeros"), a log/sqrt of a linear function when they change sign."""
    order = sorted(out.normalized, key=lambda s: out.normalized[s])
    lists = [DOMAIN_PROBES.get(out.kinds.get(s, "positive"), ()) for s in order]
    names: list[str] = []
    for level in range(max((len(x) for x in lists), default=0)):
        for probes in lists:
            if level < len(probes) and probes[level] not in names:
                names.append(probes[level])
    return [(name, _transform(name, start, vars_, limits)) for name in names[:MAX_DOMAIN_PROBES]]


def _transform(name: str, start: list[np.ndarray], vars_: list[Variable], limits: list[float]) -> list[np.ndarray]:
    if name == "zeros":
        return [np.zeros_like(s) for s in start]
    if name == "flip":
        return [-s for s in start]
    sign = -1.0 if name == "flip_up" else 1.0
    return [s if v.top == 0 else np.clip(s * (sign * min(SATURATE * v.scale, lim) / v.top), -lim, lim)
            for s, v, lim in zip(start, vars_, limits, strict=True)]


def rank_sites(out: RunOutcome, exhausted: set[str]) -> list[str]:
    """Sites by linearised distance to their invalid region, margin / |gradient| (a site close in value
    but insensitive to the inputs is far in input space); sites without a gradient are left out."""
    scored = []
    for site in out.site_grads.keys() | out.site_soft.keys():
        grads = out.site_grads.get(site) or []
        if site in exhausted or site not in out.margins:
            continue
        gsq = sum(float(np.sum(g * g)) for g in grads if g is not None)
        if not math.isfinite(gsq) or gsq <= 0:
            if _moves(out.site_soft.get(site)):  # flat, but the soft assertion knows a way: last
                scored.append((math.inf, site))
            continue
        scored.append((max(out.margins[site], 0.0) / math.sqrt(gsq), site))
    return [site for _, site in sorted(scored)]


def gradient_search(
    backend: Backend, budget: float, seed: int = 0, bound: float = 1e4, start_outcome: RunOutcome | None = None,
    probes: bool = True,
) -> SearchResult:
    """Cheap domain probes, then gradient descent of one unsafe site's margin at a time, the site nearest
    to invalid (linearised) first: first-order steps onto the invalid side, then signed steps.

    `probes=False` skips the domain probes (to see the gradient phase alone)."""
    t0 = time.perf_counter()
    c0 = time.process_time()
    deadline = t0 + budget
    vars_ = backend.variables
    if not vars_:
        return SearchResult(False, None, 0, 0.0, None, "the program has no floating-point inputs to search")
    start = [v.start for v in vars_]  # never modified in place: every step builds new arrays
    limits = [bound_for(v, bound) for v in vars_]
    seen: set[str] = set()
    steps = 0

    def run(values: list[np.ndarray], target: str | None, want_grad: bool = True,
            margins: bool = True) -> RunOutcome:
        nonlocal steps
        steps += 1
        out = backend.run(values, target, want_grad, deadline, margins=margins,
                          only_target=target is not None and target != ALL_SITES and not want_grad)
        seen.update(out.margins)
        return out

    x = start
    out = start_outcome if start_outcome is not None else run(x, None, False)
    seen.update(out.margins)
    if out.finding:
        return _done(out.finding, steps, t0, x, seen, c0, "start")
    # 1. the invalid domains' cheap guesses: plain runs that only watch for NaN/INF, no margins, no autograd
    for _, proposal in domain_probes(start, vars_, limits, out) if probes else ():
        if time.perf_counter() >= deadline:
            break
        new = run(proposal, None, False, margins=False)
        if new.finding:
            return _done(new.finding, steps, t0, proposal, seen, c0, "domain")
    # 2. gradient descent: one instrumented run differentiates every site's margin and ranks the sites
    rng: np.random.Generator | None = None
    taus = [1e-3 * v.scale for v in vars_]
    exhausted: set[str] = set()
    ranking: list[str] = []  # from the last all-sites run at x; empty: take a new one
    target: str | None = None
    grads: list[np.ndarray | None] | None = None
    soft: list[np.ndarray | None] | None = None  # the soft-assertion guide's direction (a backend with one)
    margin, crossing = math.inf, True
    eta, tries, restarts = ETA0, 0, 0
    while time.perf_counter() < deadline:
        if target is None:
            if not ranking:
                out = run(x, ALL_SITES)
                if out.finding:
                    return _done(out.finding, steps, t0, x, seen, c0, "restart" if restarts else "gradient")
                ranking = rank_sites(out, exhausted)
                if not ranking:
                    # every reachable site is stuck: restart from a random point around the start, wider each
                    # time (the next round's ranking run there watches for NaN/INF too)
                    restarts += 1
                    rng = rng or np.random.default_rng(seed)
                    sigma = 0.5 * 2.0 ** min(restarts, 40)
                    x = [np.clip(s + sigma * v.scale * rng.standard_normal(s.shape), -lim, lim)
                         for s, v, lim in zip(start, vars_, limits, strict=True)]
                    exhausted.clear()
                    continue
                # the far first-order jump of the next best sites too: the nearest is not always the easiest
                for site in ranking[1:RANKED_SITES]:
                    if site not in out.site_grads:
                        continue
                    jump = _newton(x, out.site_grads[site], out.margins[site], True, limits,
                                   _log_jump(out.margins[site]))
                    if jump is not None and time.perf_counter() < deadline:
                        new = run(jump, None, False, margins=False)
                        if new.finding:
                            return _done(new.finding, steps, t0, jump, seen, c0, "gradient")
            target = ranking.pop(0)
            grads, soft = out.site_grads.get(target) or [None] * len(vars_), out.site_soft.get(target)
            margin, crossing = out.margins[target], out.site_crossing.get(target, True)
            eta, tries = ETA0, 0
        elif grads is None:
            out = run(x, target)  # the one gradient run per accepted point
            if out.finding:
                return _done(out.finding, steps, t0, x, seen, c0, "gradient")
            if target not in out.margins or out.grads is None or not (_moves(out.grads) or _moves(out.soft_grads)):
                exhausted.add(target)
                target, ranking = None, []
                continue
            grads, margin, crossing = out.grads, out.margins[target], out.target_crossing
            soft = out.soft_grads
        assert grads is not None
        best: tuple[list[np.ndarray], float] | None = None
        guides = [("gradient", _probes(x, grads, margin, crossing, limits, taus, eta))]
        if soft is not None:
            # the second guide, beside the gradient: signed steps along the direction the op's soft assertion
            # gives every element of its input; the best probe of either guide is the next point
            guides.append(("soft", (_signed(x, soft, e, taus, limits) for e in _etas(eta))))
        for phase, proposals in guides:
            for proposal in proposals:
                if time.perf_counter() >= deadline:
                    break
                new = run(proposal, target, False)
                if new.finding:
                    return _done(new.finding, steps, t0, proposal, seen, c0, phase)
                m = new.margins.get(target)
                if new.error is None and m is not None and m < (best[1] if best else margin):
                    best = (proposal, m)
        tries += 1
        if best is not None:
            x, margin = best
            grads = None  # the next round takes the gradient there
            ranking = []  # other sites' ranks were measured at the old point
            eta = min(eta * ETA_GROWTH, ETA_MAX)
        else:
            eta *= 0.125  # the probes spanned eta..16 eta: shrink below all of them
        if eta < ETA_MIN or tries >= MAX_TRIES:
            exhausted.add(target)
            target, grads = None, None
    reason = "budget spent; no unsafe operation reached NaN/INF" if seen else "no unsafe operation was reached"
    return SearchResult(False, None, steps, time.perf_counter() - t0, None, reason, sorted(seen),
                        time.process_time() - c0)


def _moves(grads: list[np.ndarray | None] | None) -> bool:
    return grads is not None and any(g is not None and bool(np.any(g)) for g in grads)


def _log_jump(margin: float) -> float:
    """The overshoot of the far first-order jump: ln(margin / TINY) (see _probes)."""
    return max(NEWTON_FACTORS[1], math.log(margin / TINY)) if margin > 0 else NEWTON_FACTORS[1]


def _probes(
    x: list[np.ndarray], grads: list[np.ndarray | None], margin: float, crossing: bool, limits: list[float],
    taus: list[float], eta: float,
) -> Iterator[list[np.ndarray]]:
    """Points along the gradient, the likeliest first: the first-order steps just past the boundary and far
    past it (log space), then signed steps of 1, 4 and 16 eta (capped at ETA_MAX); built lazily."""
    # a margin that must cross 0 (log's input, sqrt's) is often far from linear near it (a softmax
    # probability, an exponential): its logarithm is nearly linear, and the first-order step in log space
    # to well below float32's smallest subnormal is the plain step scaled by ln(margin / TINY)
    # towards 0 (a divisor that is a sum of exponentials) likewise: the plain step there aims at 0 exactly
    near = (NEWTON_FACTORS[0], crossing)
    far = (_log_jump(margin), True)
    for factor, cross in ((far, near) if crossing else (near, far)):
        p = _newton(x, grads, margin, cross, limits, factor)
        if p is not None:
            yield p
    for e in _etas(eta):
        yield _signed(x, grads, e, taus, limits)


def _etas(eta: float) -> list[float]:
    return sorted({min(eta * k, ETA_MAX) for k in SIGNED_FACTORS})


def _signed(x: list[np.ndarray], grads: list[np.ndarray | None], e: float, taus: list[float],
            limits: list[float]) -> list[np.ndarray]:
    """A step against the sign of `grads`, e times each value's size (at least tau)."""
    return [xi if gi is None else np.clip(xi - np.sign(gi) * e * np.maximum(np.abs(xi), tau), -lim, lim)
            for xi, gi, tau, lim in zip(x, grads, taus, limits, strict=True)]


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
    backend: Backend, budget: float, seed: int = 0, bound: float = 1e4, start_outcome: RunOutcome | None = None,
    log_scales: bool = False,
) -> SearchResult:
    """The baseline: resample the variables around the start point, doubling the scale every few trials.

    `log_scales` (a reference for the benchmark, not the baseline): each trial draws its scale log-uniformly
    between 1 and the bound, so large scales come as early as small ones."""
    t0 = time.perf_counter()
    c0 = time.process_time()
    deadline = t0 + budget
    rng = np.random.default_rng(seed + 1)
    vars_ = backend.variables
    if not vars_:
        return SearchResult(False, None, 0, 0.0, None, "the program has no floating-point inputs to search")
    start = [v.start for v in vars_]
    limits = [bound_for(v, bound) for v in vars_]
    scales = [v.scale for v in vars_]
    top = max(lim / s for lim, s in zip(limits, scales, strict=True))
    seen: set[str] = set()
    steps = 0
    k = 0
    while time.perf_counter() < deadline:
        sigma = 2.0 ** (k // RANDOM_DOUBLING_EVERY)
        if sigma > top:  # wrapped past the bound: start the growing schedule again
            k, sigma = 0, 1.0
        k += 1
        if log_scales:
            sigma = math.exp(rng.uniform(0.0, math.log(max(top, 1.0))))
        x = start if steps == 0 and start_outcome is None else [
            np.clip(s + sigma * sc * rng.standard_normal(s.shape), -lim, lim)
            for s, sc, lim in zip(start, scales, limits, strict=True)
        ]
        steps += 1
        out = backend.run(x, None, False, deadline, margins=False)  # NaN/INF watch only: no margins to pay
        seen.update(out.margins)
        if out.finding:
            return _done(out.finding, steps, t0, x, seen, c0, "random-log" if log_scales else "random")
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
