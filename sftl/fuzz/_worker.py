"""Fuzzing worker process: reads calls as JSON lines, builds their tensors, runs them, writes one JSON result per call.

Stdlib-only at import time (torch / tensorflow / numpy are imported lazily, inside the target environment),
so it runs as a plain script: `python _worker.py pytorch`. A crash here kills only this process; the
parent sees the pipe close and attributes the crash to the first call without a result.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import re
import sys
import time
import warnings
from typing import Any

_TF_PREFIX = re.compile(r"\{\{function_node [^}]*\}\}\s*")


def _fit(vals: list[Any], shape: list[int]) -> list[Any]:
    """Explicit values repeated or cut to a shape (a mutation may have resized the tensor since)."""
    n = math.prod(shape)
    return (list(vals) * n)[:n] if vals else [0] * n


class _Torch:
    def __init__(self) -> None:
        import torch

        torch.set_num_threads(1)
        self.torch = torch
        self.version = torch.__version__
        self.cuda = bool(torch.cuda.is_available())

    def resolve(self, target: str) -> Any:
        obj: Any = self.torch
        for part in target.split(".")[1:]:
            obj = getattr(obj, part)
        return obj

    def seed(self, seed: int) -> None:
        self.torch.manual_seed(seed)

    def tensor(self, d: dict[str, Any], device: str) -> Any:
        torch = self.torch
        dt = getattr(torch, d["dtype"])
        shape = d["shape"]
        if "vals" in d:  # explicit contents (an axis given as a scalar tensor): the generator chose them
            t = torch.tensor(_fit(d["vals"], shape)).reshape(shape).to(dt)
        elif dt.is_floating_point or dt.is_complex:
            t = torch.randn(shape, dtype=dt)
            if d.get("fill") == "spd" and len(shape) >= 2 and shape[-1] == shape[-2]:
                # symmetric (Hermitian) positive-definite: X X^H + n I, for cholesky-like APIs
                t = t @ t.mH + shape[-1] * torch.eye(shape[-1], dtype=dt)
        elif dt == torch.bool:
            t = torch.randint(0, 2, shape).bool()
        else:
            # small non-negative values: valid indices are common; `hi` bounds an index into another argument
            t = torch.randint(0, max(int(d.get("hi", 3)), 1), shape, dtype=dt)
        return t.to(device) if device != "cpu" else t

    def dtype(self, name: str) -> Any:
        return getattr(self.torch, name)

    def device_scope(self, device: str) -> Any:
        import contextlib

        return contextlib.nullcontext()

    def flatten(self, out: Any) -> list[Any]:
        torch = self.torch
        if isinstance(out, torch.Tensor):
            return [out.detach().cpu()]
        if isinstance(out, (list, tuple)):
            return [t for o in out for t in self.flatten(o)]
        if isinstance(out, (int, float, bool, complex)):
            return [torch.tensor(out)]
        return []

    def diff(self, a: Any, b: Any) -> tuple[float, bool]:
        """Largest absolute difference and whether NaN/Inf positions disagree."""
        torch = self.torch
        if a.shape != b.shape:
            return math.inf, True
        if a.numel() == 0:
            return 0.0, False
        if a.dtype == torch.bool or not (a.dtype.is_floating_point or a.dtype.is_complex):
            return float((a != b).sum().item()), False
        fa, fb = torch.isfinite(a), torch.isfinite(b)
        bad = bool((fa != fb).any().item() or (torch.isnan(a) != torch.isnan(b)).any().item())
        both = fa & fb
        if not both.any():
            return 0.0, bad
        return float((a[both] - b[both]).abs().max().item()), bad


class _TF:
    def __init__(self) -> None:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import numpy as np
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        self.np = np
        self.tf = tf
        self.version = tf.__version__
        self.cuda = bool(tf.config.list_physical_devices("GPU"))
        self.rng = np.random.default_rng(0)

    def resolve(self, target: str) -> Any:
        return getattr(self.tf.raw_ops, target.rsplit(".", 1)[-1])

    def seed(self, seed: int) -> None:
        self.rng = self.np.random.default_rng(seed)

    def tensor(self, d: dict[str, Any], device: str) -> Any:
        np, tf, rng = self.np, self.tf, self.rng
        name, shape = d["dtype"], d["shape"]
        if "vals" in d:
            arr = np.asarray(_fit(d["vals"], shape)).reshape(shape).astype("float32" if name == "bfloat16" else name)
        elif name.startswith("float") or name == "bfloat16":
            arr = rng.standard_normal(shape).astype("float32")
            if d.get("fill") == "spd" and len(shape) >= 2 and shape[-1] == shape[-2]:
                arr = arr @ np.swapaxes(arr, -1, -2) + shape[-1] * np.eye(shape[-1], dtype="float32")
        elif name.startswith("complex"):
            arr = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(name)
        elif name == "bool":
            arr = rng.integers(0, 2, shape).astype(bool)
        else:
            arr = rng.integers(0, max(int(d.get("hi", 3)), 1), shape).astype(name)
        with tf.device("/GPU:0" if device == "cuda" else "/CPU:0"):
            t = tf.constant(np.asarray(arr))
            return tf.cast(t, tf.as_dtype(name)) if name in ("bfloat16", "float16", "float64") else t

    def dtype(self, name: str) -> Any:
        return self.tf.as_dtype(name)

    def device_scope(self, device: str) -> Any:
        return self.tf.device("/GPU:0" if device == "cuda" else "/CPU:0")

    def flatten(self, out: Any) -> list[Any]:
        tf = self.tf
        if isinstance(out, (tf.Tensor, tf.Variable)):
            arr = out.numpy()
            return [arr]
        if isinstance(out, (list, tuple)):
            return [t for o in out for t in self.flatten(o)]
        return []

    def diff(self, a: Any, b: Any) -> tuple[float, bool]:
        np = self.np
        if a.shape != b.shape:
            return math.inf, True
        if a.size == 0:
            return 0.0, False
        if a.dtype.kind not in "fc":
            return float((a != b).sum()), False
        fa, fb = np.isfinite(a), np.isfinite(b)
        bad = bool((fa != fb).any() or (np.isnan(a) != np.isnan(b)).any())
        both = fa & fb
        if not both.any():
            return 0.0, bad
        return float(np.abs(a[both].astype("complex128") - b[both].astype("complex128")).max()), bad


class _Python:
    """Stdlib callables: the test hook that proves a crash is contained."""

    version = sys.version.split()[0]
    cuda = False

    def resolve(self, target: str) -> Any:
        mod, _, attr = target.rpartition(".")
        return getattr(importlib.import_module(mod), attr)

    def seed(self, seed: int) -> None:
        pass

    def tensor(self, d: dict[str, Any], device: str) -> Any:
        raise TypeError("the python framework has no tensors")

    def dtype(self, name: str) -> Any:
        return name

    def device_scope(self, device: str) -> Any:
        import contextlib

        return contextlib.nullcontext()

    def flatten(self, out: Any) -> list[Any]:
        return []

    def diff(self, a: Any, b: Any) -> tuple[float, bool]:
        return 0.0, False


def _value(fw: Any, v: dict[str, Any], device: str) -> Any:
    t = v["t"]
    if t == "tensor":
        return fw.tensor(v, device)
    if t == "tensors":
        return [fw.tensor(i, device) for i in v["items"]]
    if t == "none":
        return None
    if t == "dtype":
        return fw.dtype(v["v"])
    if t in ("ints", "floats", "bools"):
        return list(v["v"])
    return v["v"]


def _run_once(fw: Any, job: dict[str, Any], device: str) -> tuple[dict[str, Any], Any]:
    fn = fw.resolve(job["target"])
    fw.seed(int(job.get("seed", 0)))
    started = time.perf_counter()
    out = None
    res: dict[str, Any]
    try:
        with fw.device_scope(device):
            pos = []
            for v in job.get("pos", []):
                if v.get("t") == "tensors" and v.get("spread"):
                    pos.extend(_value(fw, v, device))
                else:
                    pos.append(_value(fw, v, device))
            kw = {k: _value(fw, v, device) for k, v in job.get("kw", {}).items()}
            out = fn(*pos, **kw)
        res = {"ok": True}
    except Exception as exc:  # every rejection of an input is a label, not a failure
        # TensorFlow prefixes messages with "{{function_node __wrapped__Op_device_...}}": noise here
        msg = _TF_PREFIX.sub("", str(exc)).strip().splitlines()
        res = {"ok": False, "exc": type(exc).__name__, "msg": (msg[0] if msg else "")[:300]}
    res["sec"] = time.perf_counter() - started
    return res, out


def _compare(fw: Any, job: dict[str, Any]) -> dict[str, Any]:
    """Run one call on CPU and on CUDA with the same inputs and report how far the outputs differ."""
    cpu, out_cpu = _run_once(fw, job, "cpu")
    gpu, out_gpu = _run_once(fw, job, "cuda")
    res: dict[str, Any] = {"ok": cpu["ok"], "sec": cpu["sec"], "runs": {"cpu": cpu, "cuda": gpu}}  # noqa
    if cpu.get("exc"):
        res.update(exc=cpu["exc"], msg=cpu["msg"])
    if cpu["ok"] and gpu["ok"]:
        a, b = fw.flatten(out_cpu), fw.flatten(out_gpu)
        worst, bad = (math.inf, True) if len(a) != len(b) else (0.0, False)
        for x, y in zip(a, b, strict=False):
            d, nb = fw.diff(x, y)
            worst, bad = max(worst, d), bad or nb
        res["max_abs_diff"] = None if math.isinf(worst) else worst
        res["nonfinite_mismatch"] = bad
    return res


def main(argv: list[str]) -> int:
    framework = argv[1] if len(argv) > 1 else "pytorch"
    # the protocol owns the real stdout; anything the framework prints goes to stderr
    proto = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    warnings.simplefilter("ignore")
    limit = int(os.environ.get("SFTL_FUZZ_MEMORY") or 0)
    if limit:  # a runaway allocation fails inside this worker instead of starving the machine
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash is a finding, not a core file
        except (ImportError, ValueError, OSError):
            pass
    try:
        fw: Any = {"pytorch": _Torch, "tensorflow": _TF, "python": _Python}[framework]()
    except Exception as exc:
        proto.write(json.dumps({"hello": False, "error": f"{type(exc).__name__}: {exc}"}) + "\n")
        return 1
    proto.write(json.dumps({"hello": True, "version": fw.version, "cuda": fw.cuda, "pid": os.getpid()}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        try:
            if job.get("compare"):
                res = _compare(fw, job)
            else:
                res, _ = _run_once(fw, job, job.get("device", "cpu"))
        except Exception as exc:  # a bad job description: reported, the worker goes on
            res = {"ok": False, "exc": "WorkerError", "msg": f"{type(exc).__name__}: {exc}"[:300], "sec": 0.0}
        res["id"] = job["id"]
        proto.write(json.dumps(res, default=str) + "\n")
    return 0


if __name__ == "__main__":
    # run by path: this folder's generic names (specs, seed, features) must not shadow an import of the framework's
    _own = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if not p or os.path.abspath(p) != _own]
    sys.exit(main(sys.argv))
