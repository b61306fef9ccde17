"""The table of numerically unsafe operations and their distance-to-invalid margins, framework-neutral.

A margin is a differentiable scalar `m` that reaches <= 0 exactly where the operation would produce
NaN/INF (log's input at 0, a divisor at 0, exp's input at the overflow threshold, ...), and a scale
so that margins of different operations can be compared when the search chooses its next target.
The arithmetic goes through a small kernel (`Kernel`) so the same table serves PyTorch and TensorFlow.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


class Kernel(Protocol):
    """The few tensor operations a margin needs, implemented once per framework."""

    def is_float_tensor(self, x: Any) -> bool: ...
    def amin(self, x: Any) -> Any: ...
    def amax(self, x: Any) -> Any: ...
    def abs(self, x: Any) -> Any: ...
    def cos(self, x: Any) -> Any: ...
    def log(self, x: Any) -> Any: ...
    def value(self, x: Any) -> float: ...
    def log_max(self, x: Any) -> float:
        """log of the largest finite value of x's dtype (exp overflows beyond it)."""
        ...


@dataclass(frozen=True)
class Margin:
    term: Any  # framework scalar in the autograd graph; <= 0 means invalid
    value: float
    scale: float
    crossing: bool = True  # invalid beyond 0 (log, sqrt, exp, acos); False: only at 0 itself (divisors, norms)
    kind: str = "positive"  # the invalid domain: "positive" (input to 0 or below), "zero" (a divisor or norm to 0),
    # "overflow" (input past log(max)), "unit" (|input| past 1): it suggests the search's first probes

    @property
    def normalized(self) -> float:
        return self.value / self.scale if self.scale > 0 else self.value


MarginFn = Callable[[Kernel, tuple[Any, ...], dict[str, Any], Any], "Margin | None"]


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], i: int, name: str) -> Any:
    if len(args) > i:
        return args[i]
    return kwargs.get(name)


def _margin(k: Kernel, term: Any, scale: float, crossing: bool = True, kind: str = "positive") -> Margin:
    value = k.value(term)
    return Margin(term, value, scale if math.isfinite(scale) and scale > 0 else 1.0, crossing, kind)


def _positive(index: int, name: str = "input", offset: float = 0.0) -> MarginFn:
    """Invalid at or below -offset (log: x <= 0; log1p: x <= -1; sqrt/rsqrt: x < 0 / <= 0)."""

    def fn(k: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Margin | None:
        x = _arg(args, kwargs, index, name)
        if not k.is_float_tensor(x):
            return None
        term = k.amin(x) + offset
        return _margin(k, term, max(k.value(k.amax(k.abs(x))), abs(offset), 1e-30))

    return fn


def _nonzero(index: int, name: str = "other") -> MarginFn:
    """A divisor: invalid at 0."""

    def fn(k: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Margin | None:
        y = _arg(args, kwargs, index, name)
        if not k.is_float_tensor(y):
            return None
        a = k.abs(y)
        return _margin(k, k.amin(a), max(k.value(k.amax(a)), 1e-30), crossing=False, kind="zero")

    return fn


def _overflow(index: int = 0, factor: float = 1.0, symmetric: bool = False, extra: float = 0.0) -> MarginFn:
    """exp-like: invalid once factor * x exceeds log(max finite value)."""

    def fn(k: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Margin | None:
        x = _arg(args, kwargs, index, "input")
        if not k.is_float_tensor(x):
            return None
        limit = (k.log_max(x) + extra) / factor
        top = k.amax(k.abs(x)) if symmetric else k.amax(x)
        return _margin(k, limit - top, limit, kind="overflow")

    return fn


def _unit(index: int = 0) -> MarginFn:
    """acos/asin/atanh/erfinv: invalid beyond |x| = 1."""

    def fn(k: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Margin | None:
        x = _arg(args, kwargs, index, "input")
        if not k.is_float_tensor(x):
            return None
        return _margin(k, 1.0 - k.amax(k.abs(x)), 1.0, kind="unit")

    return fn


def _at_least_one(k: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Margin | None:
    """acosh: invalid below 1."""
    x = _arg(args, kwargs, 0, "input")
    if not k.is_float_tensor(x):
        return None
    return _margin(k, k.amin(x) - 1.0, max(k.value(k.amax(k.abs(x))), 1.0))


def _probability(k: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Margin | None:
    """logit: invalid outside (0, 1)."""
    x = _arg(args, kwargs, 0, "input")
    if not k.is_float_tensor(x):
        return None
    low, high = k.amin(x), 1.0 - k.amax(x)
    return _margin(k, low if k.value(low) < k.value(high) else high, 1.0)


def _tan(k: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Margin | None:
    x = _arg(args, kwargs, 0, "input")
    if not k.is_float_tensor(x):
        return None
    return _margin(k, k.amin(k.abs(k.cos(x))), 1.0, crossing=False, kind="zero")


def _output_positive(k: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Margin | None:
    """norm: its gradient is NaN at a zero vector, and dividing by it is INF/NaN there."""
    if not k.is_float_tensor(out):
        return None
    return _margin(k, k.amin(out), max(k.value(k.amax(k.abs(out))), 1e-30), crossing=False, kind="zero")


def _pow(k: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Margin | None:
    base = _arg(args, kwargs, 0, "input")
    exponent = _arg(args, kwargs, 1, "exponent")
    if not k.is_float_tensor(base):
        return None
    if isinstance(exponent, bool) or not isinstance(exponent, (int, float)):
        if k.is_float_tensor(exponent):
            return _positive(0)(k, args, kwargs, out)  # negative base ** fractional tensor exponent
        return None
    e = float(exponent)
    if e != int(e):  # fractional: a negative base is NaN (and 0 ** negative is INF)
        return _positive(0)(k, args, kwargs, out)
    if e < 0:
        return _nonzero(0, "input")(k, args, kwargs, out)
    if e > 1:  # overflow: |base| ** e beyond max
        limit = k.log_max(base) / e
        return _margin(k, limit - k.log(k.amax(k.abs(base)) + 1e-30), limit, kind="overflow")
    return None


def _rpow(k: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Margin | None:
    """c ** x (Tensor.__rpow__(x, c)): exp(x ln c) overflows."""
    x, c = _arg(args, kwargs, 0, "input"), _arg(args, kwargs, 1, "other")
    if not k.is_float_tensor(x) or isinstance(c, bool) or not isinstance(c, (int, float)) or c <= 0 or c == 1:
        return None
    lc = math.log(c)
    limit = k.log_max(x) / abs(lc)
    top = k.amax(x) if lc > 0 else -k.amin(x)
    return _margin(k, limit - top, limit, kind="overflow")


@dataclass(frozen=True)
class OpSpec:
    name: str  # canonical name
    margin: MarginFn | None  # None: checked for NaN/INF but no margin to descend (stable given finite input)


def _specs() -> dict[str, OpSpec]:
    table: dict[str, MarginFn | None] = {
        "log": _positive(0),
        "log2": _positive(0),
        "log10": _positive(0),
        "log1p": _positive(0, offset=1.0),
        "sqrt": _positive(0),
        "rsqrt": _positive(0),
        "div": _nonzero(1),
        "divide": _nonzero(1),
        "true_divide": _nonzero(1),
        "truediv": _nonzero(1),
        "__truediv__": _nonzero(1),
        "__div__": _nonzero(1),
        "__rdiv__": _nonzero(0, "input"),
        "__rtruediv__": _nonzero(0, "input"),
        "reciprocal": _nonzero(0, "input"),
        "fmod": _nonzero(1),
        "remainder": _nonzero(1),
        "exp": _overflow(),
        "expm1": _overflow(),
        "exp2": _overflow(factor=math.log(2.0)),
        "cosh": _overflow(symmetric=True, extra=math.log(2.0)),
        "sinh": _overflow(symmetric=True, extra=math.log(2.0)),
        "pow": _pow,
        "__pow__": _pow,
        "float_power": _pow,
        "__rpow__": _rpow,
        "acos": _unit(),
        "arccos": _unit(),
        "asin": _unit(),
        "arcsin": _unit(),
        "atanh": _unit(),
        "arctanh": _unit(),
        "erfinv": _unit(),
        "acosh": _at_least_one,
        "arccosh": _at_least_one,
        "logit": _probability,
        "tan": _tan,
        "norm": _output_positive,
        "vector_norm": _output_positive,
        "linalg_vector_norm": _output_positive,
        "softmax": None,
        "log_softmax": None,
        "cross_entropy": None,
        "nll_loss": None,
        "binary_cross_entropy": None,
        "softmax_cross_entropy_with_logits": None,
        "sparse_softmax_cross_entropy_with_logits": None,
    }
    return {name: OpSpec(name, fn) for name, fn in table.items()}


UNSAFE_OPS: dict[str, OpSpec] = _specs()


def canonical(name: str) -> str:
    """`__truediv__`/`true_divide`/`divide` and friends keep their own entries; strip in-place '_'."""
    if name.endswith("_") and not name.endswith("__") and name[:-1] in UNSAFE_OPS:
        return name[:-1]
    return name
