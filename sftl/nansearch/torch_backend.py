"""PyTorch backend of the NaN/INF search: a TorchFunctionMode that watches user-facing ops, computes margins and gradients.

Runs only inside the child process (it executes the user's script). Every op the program calls goes
through `_Watcher.__torch_function__` (with the mode itself disabled, so nested framework calls are not
seen twice): the op's output is checked for NaN/INF produced from finite inputs, unsafe ops get a
margin (sftl.nansearch.unsafe_ops), and the target site's margin is differentiated right away with respect
to the search variables (so later in-place updates or `backward()` calls of the program cannot spoil it).
In whole-script mode the floating-point tensors the script creates from random factories (or with
`requires_grad=True`, or `torch.tensor` data of 2+ elements) become the search variables.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import linecache
import math
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from sftl.nansearch.core import ALL_SITES, Finding, RunOutcome, Variable, summarize
from sftl.nansearch.soft_assertions import UNITS, SoftGuide, pull_back
from sftl.nansearch.unsafe_ops import UNSAFE_OPS, Margin, OpSpec, canonical

RANDOM_FACTORIES = {"randn", "rand", "normal", "randn_like", "rand_like", "uniform"}
DATA_FACTORIES = {"tensor", "as_tensor", "from_numpy"}
OTHER_FACTORIES = {
    "ones", "zeros", "full", "arange", "linspace", "logspace", "eye", "ones_like", "zeros_like",
    "full_like", "empty", "empty_like", "empty_strided", "new_empty", "new_full", "new_ones",
    "new_zeros", "new_tensor", "randint", "randperm", "randint_like", "scalar_tensor",
}
NOT_COMPUTATIONS = {"__get__", "__set__", "grad", "backward"}  # attribute access / autograd: checked apart
PYTHON_NUMERIC_ERRORS = (ZeroDivisionError, OverflowError)

torch.set_num_threads(1)  # tiny tensors: threads only add contention (and the timing would be noise)
_TORCH_DIR = str(Path(torch.__file__).resolve().parent)
_OWN_DIR = str(Path(__file__).resolve().parent)


class Found(Exception):
    """Raised inside the program's run to stop it at the first NaN/INF."""


class RunTimeout(Exception):
    pass


class TorchKernel:
    def is_float_tensor(self, x: Any) -> bool:
        return isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 0

    def amin(self, x: Any) -> Any:
        return x.amin()

    def amax(self, x: Any) -> Any:
        return x.amax()

    def abs(self, x: Any) -> Any:
        return x.abs()

    def cos(self, x: Any) -> Any:
        return x.cos()

    def log(self, x: Any) -> Any:
        return x.log()

    def value(self, x: Any) -> float:
        return float(x.detach()) if isinstance(x, torch.Tensor) else float(x)

    def log_max(self, x: Any) -> float:
        return math.log(torch.finfo(x.dtype).max)


KERNEL = TorchKernel()


def op_display(func: Any) -> str:
    """A readable name: torch.log, Tensor.div, F.softmax, torch.linalg.vector_norm."""
    name = getattr(func, "__name__", None) or str(func)
    qual = getattr(func, "__qualname__", "") or ""
    mod = getattr(func, "__module__", "") or ""
    if qual.startswith(("TensorBase.", "Tensor.", "_TensorBase.")):
        return f"Tensor.{name}"
    if mod.startswith("torch.nn.functional") or mod == "torch._C._nn":
        return f"F.{name}"
    if "linalg" in mod:
        return f"torch.linalg.{name.removeprefix('linalg_')}"
    if "special" in mod:
        return f"torch.special.{name.removeprefix('special_')}"
    return f"torch.{name}"


def _flat(obj: Any, out: list[Any], depth: int = 0) -> list[Any]:
    if depth > 3:
        return out
    if isinstance(obj, (list, tuple)):
        for item in obj:
            _flat(item, out, depth + 1)
    elif isinstance(obj, dict):
        for item in obj.values():
            _flat(item, out, depth + 1)
    else:
        out.append(obj)
    return out


def _finite(obj: Any) -> bool:
    if isinstance(obj, torch.Tensor):
        if obj.is_floating_point() or obj.is_complex():
            return bool(torch.isfinite(obj.detach()).all())
        return True
    if isinstance(obj, float):
        return math.isfinite(obj)
    return True


def _snapshot(x: Any) -> Any:
    return x.detach().clone() if isinstance(x, torch.Tensor) else x


def tensor_summary(x: Any, name: str | None = None) -> dict[str, Any]:
    if isinstance(x, torch.Tensor):
        t = x.detach().cpu()
        arr = t.to(torch.float64).numpy() if t.is_floating_point() else t.numpy()
        out = summarize(arr, name)
        out["dtype"] = str(t.dtype).removeprefix("torch.")
        return out
    return summarize(x, name)


@dataclass
class RunState:
    """What one run of the program accumulates."""

    values: list[np.ndarray] | None  # None: discovery run (record the variables)
    target: str | None
    want_grad: bool
    script: str
    leaves: list[torch.Tensor | None] = field(default_factory=list)
    discovered: list[tuple[str, torch.Tensor]] = field(default_factory=list)
    factory_count: int = 0
    finding: Finding | None = None
    margins: dict[str, float] = field(default_factory=dict)
    normalized: dict[str, float] = field(default_factory=dict)
    grads: list[np.ndarray | None] | None = None
    target_best: float = math.inf
    target_crossing: bool = True
    with_margins: bool = True
    only_target: bool = False  # a probe along the target's gradient: no other site's margin is needed
    kinds: dict[str, str] = field(default_factory=dict)
    site_grads: dict[str, list[np.ndarray | None]] = field(default_factory=dict)  # target ALL_SITES
    site_crossing: dict[str, bool] = field(default_factory=dict)
    soft_grads: list[np.ndarray | None] | None = None  # the soft assertion's direction, pulled back (target)
    site_soft: dict[str, list[np.ndarray | None]] = field(default_factory=dict)  # the same, target ALL_SITES


class _Watcher(TorchFunctionMode):
    def __init__(self, state: RunState, program: TorchProgram) -> None:
        super().__init__()
        self.state = state
        self.program = program

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if self.program.whole_script and (name in RANDOM_FACTORIES or name in DATA_FACTORIES
                                          or name in OTHER_FACTORIES):
            return self.program.factory(self.state, func, name, args, kwargs)
        if name == "backward":
            return self._backward(func, args, kwargs)
        if name in NOT_COMPUTATIONS or name in OTHER_FACTORIES or name in DATA_FACTORIES:
            return func(*args, **kwargs)
        spec = UNSAFE_OPS.get(canonical(name)) if self.state.with_margins else None
        # an in-place op overwrites its input: judge the input (and the margin) before it runs
        in_place = name.endswith("_") and not name.endswith("__")
        finite_before = in_place and all(_finite(i) for i in _flat((args, kwargs), []))
        if in_place and spec is not None and spec.margin is not None:
            self._margin(func, spec, args, kwargs, None)
        summary = None  # what an unsafe in-place op's inputs were, for the report
        if finite_before and spec is not None:
            summary = [tensor_summary(a, f"arg{i}") for i, a in enumerate(args[:2])]
        result = func(*args, **kwargs)
        outs = [o for o in _flat(result, []) if isinstance(o, torch.Tensor)]
        if outs and not all(_finite(o) for o in outs):
            if finite_before or (not in_place and all(_finite(i) for i in _flat((args, kwargs), []))):
                self._found(func, "forward", args, kwargs, summary)
        if not in_place and spec is not None and spec.margin is not None:
            self._margin(func, spec, args, kwargs, result)
        return result

    def _found(self, func: Any, kind: str, args: tuple[Any, ...], kwargs: dict[str, Any],
               summary: list[dict[str, Any]] | None = None) -> None:
        line, code = self.program.user_line()
        if summary is not None:
            pending = []
        else:  # copies now (the program could change them), summaries when reported
            pending = [(f"arg{i}", _snapshot(a)) for i, a in enumerate(args) if isinstance(a, (torch.Tensor, float, int))]
        pending += [(k, _snapshot(v)) for k, v in kwargs.items() if isinstance(v, (torch.Tensor, float, int))]
        inputs = summary or []
        self.state.finding = Finding(op_display(func), line, code, kind, inputs[:4], pending[:4 - len(inputs[:4])],
                                     tensor_summary)
        raise Found()

    def _margin(self, func: Any, spec: OpSpec, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any) -> None:
        st = self.state
        line, _ = self.program.user_line()
        site = f"{op_display(func)}@{line}"
        if st.only_target and site != st.target:
            return
        every = st.target == ALL_SITES
        # only the target's margin (every site's in a ranking run) is differentiated: no graph for the others
        differentiate = st.want_grad and (every or site == st.target)
        fn = spec.margin
        try:
            with torch.enable_grad() if differentiate else torch.no_grad():
                m: Margin | None = fn(KERNEL, args, kwargs, result)  # type: ignore[misc]
        except (RuntimeError, TypeError, ValueError):
            return
        if m is None or not math.isfinite(m.value):
            return
        previous = st.margins.get(site, math.inf)
        if m.value < previous:
            st.margins[site] = m.value
            st.normalized[site] = m.normalized
            st.kinds[site] = m.kind
        if not differentiate or m.value >= (previous if every else st.target_best):
            return
        grads = self._grads(m.term)
        soft = self._soft(spec.name, args, kwargs)
        if every:
            if grads is not None:
                st.site_grads[site] = grads
                st.site_crossing[site] = m.crossing
            if soft is not None:
                st.site_soft[site] = soft
            return
        if soft is not None:
            st.soft_grads = soft
        st.target_best = m.value
        st.target_crossing = m.crossing
        if grads is not None:
            st.grads = grads
        elif st.grads is None:
            st.grads = [None for _ in st.leaves]

    def _soft(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[np.ndarray | None] | None:
        """The soft assertion's direction on the op's input, pulled back to the variables (negated, as a
        gradient to descend), or None without a guide, a trained op, or a way to get there."""
        guide = self.program.soft
        if guide is None:
            return None
        x = guide.watched(name, args, kwargs)
        if x is None or not x.requires_grad:
            return None
        direction = guide.direction(name, x)
        leaves = [leaf for leaf in self.state.leaves if leaf is not None]
        pulled = None if direction is None else pull_back(x, direction, leaves)
        if pulled is None or all(g is None for g in pulled):
            return None
        it = iter(pulled)
        return [
            (None if (g := next(it)) is None else -g.detach().to(torch.float64).cpu().numpy())
            if leaf is not None else None
            for leaf in self.state.leaves
        ]

    def _grads(self, term: Any) -> list[np.ndarray | None] | None:
        """d term / d variables, right away (the program may later modify its tensors in place)."""
        st = self.state
        leaves = [leaf for leaf in st.leaves if leaf is not None]
        if not (isinstance(term, torch.Tensor) and term.requires_grad and leaves):
            return None
        try:
            grads = torch.autograd.grad(term, leaves, retain_graph=True, allow_unused=True)
        except RuntimeError:
            return None
        it = iter(grads)
        return [
            (None if (g := next(it)) is None else g.detach().to(torch.float64).cpu().numpy())
            if leaf is not None else None
            for leaf in st.leaves
        ]

    def _backward(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run the program's backward(), then check the gradients it produced for NaN/INF."""
        root = args[0] if args else None
        leaves: list[torch.Tensor] = []
        if isinstance(root, torch.Tensor) and root.grad_fn is not None:
            todo: list[Any] = [root.grad_fn]
            seen: set[int] = set()
            while todo and len(seen) < 100_000:
                node = todo.pop()
                if node is None or id(node) in seen:
                    continue
                seen.add(id(node))
                var = getattr(node, "variable", None)
                if isinstance(var, torch.Tensor):
                    leaves.append(var)
                todo.extend(n for n, _ in node.next_functions)
        before = [leaf.grad is None or _finite(leaf.grad) for leaf in leaves]
        result = func(*args, **kwargs)
        for leaf, ok in zip(leaves, before, strict=True):
            if ok and leaf.grad is not None and not _finite(leaf.grad):
                if _finite(root):
                    self._found(func, "backward", (root,), {})
        return result


class TorchProgram:
    """A user script loaded for searching: an entry function with example inputs, or the whole script."""

    def __init__(self, path: Path, entry: str | None, seed: int = 0, params: bool = False, soft: bool = False) -> None:
        self.path = path
        self.params = params  # entry mode: also search the parameters of the script's nn.Module globals
        self.param_tensors: list[torch.Tensor] = []
        self.filename = str(path)
        self.entry = entry
        self.whole_script = entry is None
        self.seed = seed
        self.code = compile(path.read_text(encoding="utf-8"), self.filename, "exec")
        self.variables: list[Variable] = []
        self.func: Any = None
        self.fixed: list[Any] = []  # entry mode: the example inputs (non-float ones are passed unchanged)
        self.var_slots: list[int] = []  # entry mode: which example inputs are variables
        self.requires_grad: list[bool] = []
        # the soft-assertion guide: its op models are trained here, before any timed search
        self.soft = SoftGuide(seed) if soft else None
        if self.soft is not None:
            self.soft.train(list(UNITS), [torch.float32, torch.float64])

    # -- loading ----------------------------------------------------------------------------
    def load_entry(self) -> None:
        """Execute the script's definitions (not its __main__ block) and read example_inputs()."""
        assert self.entry is not None
        ns, func, inputs = load_entry_point(self.code, self.filename, self.path.name, self.entry)
        if isinstance(inputs, torch.Tensor) or not isinstance(inputs, (tuple, list)):
            inputs = (inputs,)
        self.func = func
        self.fixed = list(inputs)
        for i, x in enumerate(inputs):
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                self.var_slots.append(i)
                self.requires_grad.append(bool(x.requires_grad))
                self.variables.append(Variable(f"arg{i}", _to_numpy(x), str(x.dtype).removeprefix("torch.")))
        if self.params:
            seen: set[int] = set()
            for gname, obj in ns.items():
                if not isinstance(obj, torch.nn.Module):
                    continue
                for pname, param in obj.named_parameters():
                    if id(param) in seen or not param.is_floating_point() or not param.requires_grad:
                        continue
                    seen.add(id(param))
                    self.param_tensors.append(param)
                    self.variables.append(Variable(f"{gname}.{pname}", _to_numpy(param),
                                                   str(param.dtype).removeprefix("torch.")))

    # -- running ----------------------------------------------------------------------------
    def user_line(self) -> tuple[int | None, str]:
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == self.filename:
                line = frame.f_lineno
                return line, linecache.getline(self.filename, line).strip()
            frame = frame.f_back  # type: ignore[assignment]
        return None, ""

    def _caller_is_script(self) -> bool:
        """The nearest frame outside torch, sftl and the stdlib is the script's."""
        frame = sys._getframe(2)
        stdlib = os.path.dirname(os.__file__)
        while frame is not None:
            fn = frame.f_code.co_filename
            if fn == self.filename:
                return True
            if not (fn.startswith((_TORCH_DIR, _OWN_DIR, stdlib)) or fn.startswith("<")):
                return False
            frame = frame.f_back  # type: ignore[assignment]
        return False

    def factory(self, st: RunState, func: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        result = func(*args, **kwargs)
        if not (isinstance(result, torch.Tensor) and result.is_floating_point() and result.numel() > 0):
            return result
        wants_grad = bool(kwargs.get("requires_grad", False))
        eligible = name in RANDOM_FACTORIES or wants_grad or (name in DATA_FACTORIES and result.numel() >= 2)
        if not eligible or not self._caller_is_script():
            return result
        index = st.factory_count
        st.factory_count += 1
        if st.values is None:  # discovery: this tensor becomes a variable
            line, _ = self.user_line()
            st.discovered.append((f"torch.{name}@{line}", result.detach().clone()))
            self.requires_grad.append(wants_grad)
            return result
        if index >= len(st.values) or tuple(st.values[index].shape) != tuple(result.shape):
            st.leaves.append(None)
            return result
        return self._make_input(st, st.values[index], result.dtype, self.requires_grad[index])

    def _make_input(self, st: RunState, value: np.ndarray, dtype: torch.dtype, orig_grad: bool) -> torch.Tensor:
        leaf = torch.tensor(value, dtype=dtype)
        if st.want_grad or orig_grad:
            leaf.requires_grad_(True)
            st.leaves.append(leaf if st.want_grad else None)
            # a clone keeps the program free to modify its input in place; the gradient still reaches the leaf
            return leaf if orig_grad else leaf.clone()
        st.leaves.append(None)
        return leaf

    def discover(self, deadline: float) -> RunOutcome:
        """Run the whole script once as written; its eligible factory tensors become the variables."""
        st = RunState(None, None, False, self.filename)
        out = self._execute(st, deadline)
        self.variables = [
            Variable(name, _to_numpy(t), str(t.dtype).removeprefix("torch.")) for name, t in st.discovered
        ]
        return out

    def run(self, values: list[np.ndarray], target: str | None, want_grad: bool, deadline: float,
            grad_below: float = math.inf, margins: bool = True, only_target: bool = False) -> RunOutcome:
        st = RunState(values, target, want_grad, self.filename, target_best=grad_below, with_margins=margins,
                      only_target=only_target and target is not None)
        return self._execute(st, deadline)

    def _execute(self, st: RunState, deadline: float) -> RunOutcome:
        t0 = time.perf_counter()
        error = None
        _reseed(self.seed)
        try:
            with quiet(), alarm(deadline), _Watcher(st, self):
                if self.whole_script:
                    ns = {"__name__": "__main__", "__file__": self.filename, "__builtins__": builtins}
                    exec(self.code, ns)
                else:
                    inputs = list(self.fixed)
                    for j, slot in enumerate(self.var_slots):
                        assert st.values is not None
                        inputs[slot] = self._make_input(st, st.values[j], self.fixed[slot].dtype,
                                                        self.requires_grad[j])
                    assert st.values is not None
                    for j, param in enumerate(self.param_tensors, start=len(self.var_slots)):
                        with torch.no_grad():
                            param.copy_(torch.as_tensor(st.values[j], dtype=param.dtype))
                        param.grad = None
                        st.leaves.append(param if st.want_grad else None)
                    self.func(*[x.clone() if isinstance(x, torch.Tensor) and i not in self.var_slots else x
                                for i, x in enumerate(inputs)])
        except Found:
            pass
        except RunTimeout:
            error = "timeout"
        except PYTHON_NUMERIC_ERRORS as exc:
            line, code = self.user_line_of(exc)
            if line is not None and st.finding is None:
                st.finding = Finding(f"python {type(exc).__name__}", line, code, "python", [])
            else:
                error = f"{type(exc).__name__}: {exc}"
        except ValueError as exc:
            line, code = self.user_line_of(exc)
            if "math domain error" in str(exc) and line is not None and st.finding is None:
                st.finding = Finding("python math domain error", line, code, "python", [])
            else:
                error = f"{type(exc).__name__}: {exc}"
        except SystemExit:
            pass
        except Exception as exc:  # the program's own failure at this point: a rejected step, not ours
            error = f"{type(exc).__name__}: {exc}"
        n = len(self.variables)

        def align(grads: list[np.ndarray | None]) -> list[np.ndarray | None]:
            # with the variables: a whole-script run may create fewer or more factory tensors
            return (grads + [None] * n)[:n]

        return RunOutcome(st.finding, st.margins, st.normalized, None if st.grads is None else align(st.grads),
                          st.target_crossing, error, time.perf_counter() - t0, st.kinds,
                          {site: align(g) for site, g in st.site_grads.items()}, st.site_crossing,
                          None if st.soft_grads is None else align(st.soft_grads),
                          {site: align(g) for site, g in st.site_soft.items()})

    def user_line_of(self, exc: BaseException) -> tuple[int | None, str]:
        tb = exc.__traceback__
        line = None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == self.filename:
                line = tb.tb_lineno
            tb = tb.tb_next
        return line, (linecache.getline(self.filename, line).strip() if line else "")


def _reseed(seed: int) -> None:
    """torch.manual_seed without its CUDA lazy-init bookkeeping (a stack capture per call) unless CUDA is up."""
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().to(torch.float64).numpy().copy()


def load_entry_point(code: Any, filename: str, name: str, entry: str) -> tuple[dict[str, Any], Any, Any]:
    """Execute a script's definitions (not its __main__ block): (namespace, FUNC, example_inputs()).

    Shared by the PyTorch and TensorFlow backends; LookupError names what the script lacks."""
    ns: dict[str, Any] = {"__name__": "__sftl_nan_search__", "__file__": filename, "__builtins__": builtins}
    with quiet():
        exec(code, ns)
    func = ns.get(entry)
    if not callable(func):
        raise LookupError(f"{name} defines no function {entry}()")
    make = ns.get("example_inputs")
    if not callable(make):
        raise LookupError(f"{name} defines no example_inputs() (needed with --entry)")
    with quiet():
        inputs = make()
    return ns, func, inputs


@contextlib.contextmanager
def quiet() -> Any:
    """The program's prints would drown the runner's one JSON line."""
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        yield


@contextlib.contextmanager
def alarm(deadline: float) -> Any:
    """Interrupt a run that outlives the search's deadline (an endless loop in the program)."""
    remaining = deadline - time.perf_counter()

    def fire(signum: int, frame: Any) -> None:
        raise RunTimeout()

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, max(remaining, 0.05))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
