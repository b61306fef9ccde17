"""TensorFlow backend of the NaN/INF search: unsafe tf functions/operators wrapped during a run, margins under tf.GradientTape.

Runs only inside the child process. TensorFlow has no function mode, so for the length of one run the
unsafe entry points (tf.math.log, tf.sqrt, tf.divide, `a / b`, `a ** p`, tf.nn.softmax, ...) are replaced
in their namespaces by wrappers that check the output for NaN/INF produced from finite inputs and record
a margin (sftl.nansearch.unsafe_ops); the target site's smallest margin is differentiated with the tape.
Only --entry mode: FUNC(*example_inputs()).
"""

from __future__ import annotations

import contextlib
import linecache
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from sftl.nansearch.core import ALL_SITES, Finding, RunOutcome, Variable, summarize
from sftl.nansearch.torch_backend import RunTimeout, alarm, load_entry_point, quiet
from sftl.nansearch.unsafe_ops import UNSAFE_OPS, Margin, canonical

NAMESPACES = {"tf": tf, "tf.math": tf.math, "tf.nn": tf.nn, "tf.linalg": tf.linalg}
OPERATORS = ("__truediv__", "__rtruediv__", "__pow__", "__rpow__")


class Found(Exception):
    pass


class TFKernel:
    """Margin arithmetic with the original (unwrapped) functions."""

    def __init__(self) -> None:
        self._min, self._max, self._abs = tf.reduce_min, tf.reduce_max, tf.math.abs
        self._cos, self._log = tf.math.cos, tf.math.log

    def is_float_tensor(self, x: Any) -> bool:
        return isinstance(x, tf.Tensor) and x.dtype.is_floating and int(tf.size(x)) > 0

    def amin(self, x: Any) -> Any:
        return self._min(x)

    def amax(self, x: Any) -> Any:
        return self._max(x)

    def abs(self, x: Any) -> Any:
        return self._abs(x)

    def cos(self, x: Any) -> Any:
        return self._cos(x)

    def log(self, x: Any) -> Any:
        return self._log(x)

    def value(self, x: Any) -> float:
        return float(x.numpy()) if isinstance(x, tf.Tensor) else float(x)

    def log_max(self, x: Any) -> float:
        return math.log(x.dtype.max)


def _finite(obj: Any) -> bool:
    if isinstance(obj, tf.Tensor) and obj.dtype.is_floating:
        return bool(np.all(np.isfinite(obj.numpy())))
    if isinstance(obj, float):
        return math.isfinite(obj)
    return True


def _flat(obj: Any) -> list[Any]:
    if isinstance(obj, (list, tuple)):
        return [x for item in obj for x in _flat(item)]
    if isinstance(obj, dict):
        return [x for item in obj.values() for x in _flat(item)]
    return [obj]


class _State:
    def __init__(self, target: str | None, want_grad: bool) -> None:
        self.target = target
        self.want_grad = want_grad
        self.finding: Finding | None = None
        self.margins: dict[str, float] = {}
        self.normalized: dict[str, float] = {}
        self.target_term: Any = None
        self.target_best = math.inf
        self.target_crossing = True
        self.with_margins = True
        self.only_target = False
        self.kinds: dict[str, str] = {}
        self.site_terms: dict[str, Any] = {}  # target ALL_SITES: each site's smallest margin term
        self.site_crossing: dict[str, bool] = {}


class TFProgram:
    """A TensorFlow script searched through its entry function."""

    def __init__(self, path: Path, entry: str | None, seed: int = 0) -> None:
        if entry is None:
            raise LookupError("TensorFlow programs are searched with --entry FUNC")
        self.path = path
        self.filename = str(path)
        self.entry = entry
        self.seed = seed
        self.code = compile(path.read_text(encoding="utf-8"), self.filename, "exec")
        self.kernel = TFKernel()
        self.variables: list[Variable] = []
        self.fixed: list[Any] = []
        self.var_slots: list[int] = []
        self.func: Any = None
        self._patches = self._wrappers()

    def load_entry(self) -> None:
        assert self.entry is not None
        _, func, inputs = load_entry_point(self.code, self.filename, self.path.name, self.entry)
        if not isinstance(inputs, (tuple, list)):
            inputs = (inputs,)
        self.func = func
        self.fixed = list(inputs)
        for i, x in enumerate(inputs):
            if isinstance(x, (tf.Tensor, tf.Variable)) and x.dtype.is_floating:
                self.var_slots.append(i)
                self.variables.append(Variable(f"arg{i}", np.asarray(x.numpy(), dtype=np.float64), x.dtype.name))

    # -- wrapping ---------------------------------------------------------------------------------
    def _wrappers(self) -> list[tuple[Any, str, Any, Any]]:
        """(owner, attribute, original, wrapper) for every unsafe entry point."""
        patches = []
        for ns_name, ns in NAMESPACES.items():
            for name in UNSAFE_OPS:
                original = getattr(ns, name, None)
                if callable(original):
                    patches.append((ns, name, original, self._wrap(f"{ns_name}.{name}", name, original)))
        for name in OPERATORS:
            original = getattr(tf.Tensor, name)
            patches.append((tf.Tensor, name, original, self._wrap(f"Tensor.{name}", name, original)))
        return patches

    def _wrap(self, display: str, name: str, original: Any) -> Any:
        spec = UNSAFE_OPS.get(canonical(name))
        program = self

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            st: _State | None = program._state
            result = original(*args, **kwargs)
            if st is None:
                return result
            outs = [o for o in _flat(result) if isinstance(o, tf.Tensor)]
            if outs and not all(_finite(o) for o in outs) and all(_finite(i) for i in _flat((args, kwargs))):
                line, code = program.user_line()
                inputs = [_summary(a, f"arg{i}") for i, a in enumerate(args) if isinstance(a, (tf.Tensor, float, int))]
                st.finding = Finding(display, line, code, "forward", inputs[:4])
                raise Found()
            if spec is not None and spec.margin is not None and st.with_margins:
                line, _ = program.user_line()
                site = f"{display}@{line}"
                if st.only_target and site != st.target:
                    return result
                try:
                    m: Margin | None = spec.margin(program.kernel, args, kwargs, result)
                except (TypeError, ValueError, tf.errors.InvalidArgumentError):
                    m = None
                if m is not None and math.isfinite(m.value):
                    if m.value < st.margins.get(site, math.inf):
                        st.margins[site] = m.value
                        st.normalized[site] = m.normalized
                        st.kinds[site] = m.kind
                        if st.target == ALL_SITES:
                            st.site_terms[site], st.site_crossing[site] = m.term, m.crossing
                    if site == st.target and m.value < st.target_best:
                        st.target_best, st.target_term, st.target_crossing = m.value, m.term, m.crossing
            return result

        return wrapper

    _state: _State | None = None

    @contextlib.contextmanager
    def _patched(self, state: _State) -> Any:
        self._state = state
        for owner, name, _, wrapper in self._patches:
            setattr(owner, name, wrapper)
        try:
            yield
        finally:
            for owner, name, original, _ in self._patches:
                setattr(owner, name, original)
            self._state = None

    def user_line(self) -> tuple[int | None, str]:
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == self.filename:
                return frame.f_lineno, linecache.getline(self.filename, frame.f_lineno).strip()
            frame = frame.f_back  # type: ignore[assignment]
        return None, ""

    # -- running ----------------------------------------------------------------------------------
    def run(self, values: list[np.ndarray], target: str | None, want_grad: bool, deadline: float,
            grad_below: float = math.inf, margins: bool = True, only_target: bool = False) -> RunOutcome:
        t0 = time.perf_counter()
        st = _State(target, want_grad)
        st.target_best = grad_below
        st.with_margins = margins
        st.only_target = only_target and target is not None
        tf.random.set_seed(self.seed)
        leaves = [tf.constant(v, dtype=self.fixed[slot].dtype) for v, slot in zip(values, self.var_slots, strict=True)]
        inputs = list(self.fixed)
        for leaf, slot in zip(leaves, self.var_slots, strict=True):
            inputs[slot] = leaf
        error = None
        grads: list[np.ndarray | None] | None = None
        site_grads: dict[str, list[np.ndarray | None]] = {}
        try:
            with quiet(), alarm(deadline), tf.GradientTape(persistent=target == ALL_SITES) as tape:
                for leaf in leaves:
                    tape.watch(leaf)
                with self._patched(st):
                    result = self.func(*inputs)
                outs = [o for o in _flat(result) if isinstance(o, tf.Tensor)]
                if st.finding is None and not all(_finite(o) for o in outs):
                    # an operation sftl does not wrap produced it; the function's output is where it shows
                    st.finding = Finding(f"{self.entry}() output", None, "", "forward", [_summary(o, "output") for o in outs[:2]])
            if want_grad and st.target_term is not None and st.finding is None:
                grads = _numpy_grads(tape.gradient(st.target_term, leaves))
            if want_grad and st.finding is None:
                for site, term in st.site_terms.items():
                    site_grads[site] = _numpy_grads(tape.gradient(term, leaves))
        except Found:
            pass
        except RunTimeout:
            error = "timeout"
        except Exception as exc:  # the program's own failure at this point: a rejected step
            error = f"{type(exc).__name__}: {exc}"
        return RunOutcome(st.finding, st.margins, st.normalized, grads, st.target_crossing, error,
                          time.perf_counter() - t0, st.kinds, site_grads, st.site_crossing)


def _numpy_grads(raw: list[Any]) -> list[np.ndarray | None]:
    return [None if g is None else np.asarray(tf.convert_to_tensor(g).numpy(), dtype=np.float64) for g in raw]


def _summary(x: Any, name: str) -> dict[str, Any]:
    if isinstance(x, tf.Tensor):
        out = summarize(np.asarray(x.numpy(), dtype=np.float64) if x.dtype.is_floating else x.numpy(), name)
        out["dtype"] = x.dtype.name
        return out
    return summarize(x, name)
