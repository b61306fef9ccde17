"""Runs one snippet inside the target environment and writes one JSON result (stdlib only; Python 3.6+).

Started by sftl.sandbox inside the sandbox, with the target environment's interpreter:

    python -I -B _harness.py --snippet snippet.py --result result.json --device cpu|gpu
           [--framework pytorch|tensorflow|none] [--repeat N] [--no-redirect] [--opdiff none|cpu|float64]

The JSON holds the exception (type, message, frames, cause), how long the snippet ran, the device
seen, stdout/stderr tails (Python-level writes), what each repeat printed, and the values of the snippet's top-level tensors/arrays/numbers,
so the caller can compare devices and repeats. With `--result -` the JSON goes to stdout.
torch / tensorflow / numpy are imported lazily: this file must import under any old Python too.
"""

# It must run under Python 3.6 too: %-formatting, no zip(strict=), no annotations.
# ruff: noqa: UP028, UP031, B905
# mypy: ignore-errors

import argparse
import io
import json
import math
import os
import random
import sys
import time
import traceback

HARNESS_VERSION = 1
MAX_VALUES = 4096  # elements kept per value
MAX_TOTAL = 65536  # elements kept per repeat
MAX_PRINTED = 1 << 20  # characters of printed output kept per repeat
MAX_FRAMES = 60
TAIL = 4000  # characters of the first run's stdout/stderr kept in the result


class _Tee(io.TextIOBase):
    """Passes writes through and keeps the first MAX_PRINTED characters."""

    def __init__(self, inner):
        self.inner = inner
        self.kept = []
        self.size = 0

    def write(self, text):
        if self.size < MAX_PRINTED:
            piece = text[: MAX_PRINTED - self.size]
            self.kept.append(piece)
            self.size += len(piece)
        return self.inner.write(text)

    def flush(self):
        self.inner.flush()

    def fileno(self):
        return self.inner.fileno()

    def isatty(self):
        return False

    def text(self):
        return "".join(self.kept)


class _Discard(io.TextIOBase):
    def write(self, text):
        return len(text)


def _frames(tb, snippet_path):
    out = []
    started = False
    for fs in traceback.extract_tb(tb):
        # everything above the snippet's first frame belongs to the harness
        if not started and fs.filename != snippet_path:
            continue
        started = True
        out.append({"path": fs.filename, "line": fs.lineno, "function": fs.name, "source": fs.line or ""})
    return out[-MAX_FRAMES:]


def _exception(exc, snippet_path, depth=0):
    kind = type(exc)
    data = {
        "exception": kind.__name__,
        "exception_module": kind.__module__,
        "message": str(exc)[:20000],
        "frames": _frames(exc.__traceback__, snippet_path),
        "cause": None,
        "chain_kind": "",
    }
    inner = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    if inner is not None and depth < 5:
        data["cause"] = _exception(inner, snippet_path, depth + 1)
        data["chain_kind"] = "cause" if exc.__cause__ is not None else "context"
    return data


# -- values ---------------------------------------------------------------------------------------


def _flat(values):
    if isinstance(values, (list, tuple)):
        for v in values:
            for x in _flat(v):
                yield x
    else:
        yield values


def _number(x):
    if isinstance(x, bool):
        return int(x)
    if isinstance(x, complex):
        return None
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return repr(x)  # 'nan' / 'inf' / '-inf': JSON has no such numbers
    return x


def _describe(value, budget):
    """A tensor/array/number as {dtype, shape, values}; None for anything else."""
    kind = type(value)
    mod = kind.__module__ or ""
    try:
        if mod.startswith("torch") and hasattr(value, "detach") and hasattr(value, "dtype"):
            t = value.detach()
            if t.is_complex() or getattr(t, "is_sparse", False) or getattr(t, "is_quantized", False):
                return None
            dtype = str(t.dtype).replace("torch.", "")
            t = t.cpu().reshape(-1)[: min(MAX_VALUES, budget)]
            if dtype == "bfloat16":
                t = t.float()
            return {"kind": "torch", "dtype": dtype, "shape": list(value.shape), "values": [_number(x) for x in t.tolist()]}
        if hasattr(value, "numpy") and (mod.startswith("tensorflow") or "EagerTensor" in kind.__name__):
            value = value.numpy()
            mod = type(value).__module__ or ""
        if mod.startswith("numpy") and hasattr(value, "dtype") and hasattr(value, "reshape"):
            if value.dtype.kind not in "biuf":
                return None
            flat = value.reshape(-1)[: min(MAX_VALUES, budget)]
            return {"kind": "numpy", "dtype": str(value.dtype), "shape": list(value.shape),
                    "values": [_number(x) for x in flat.tolist()]}
        if mod.startswith("numpy") and hasattr(value, "dtype"):  # numpy scalar
            return {"kind": "numpy", "dtype": str(value.dtype), "shape": [], "values": [_number(value.item())]}
    except Exception:  # a value that cannot be read back is simply not compared
        return None
    if isinstance(value, bool):
        return {"kind": "python", "dtype": "bool", "shape": [], "values": [int(value)]}
    if isinstance(value, int):
        return {"kind": "python", "dtype": "int64", "shape": [], "values": [value]}
    if isinstance(value, float):
        return {"kind": "python", "dtype": "float64", "shape": [], "values": [_number(value)]}
    if isinstance(value, (list, tuple)) and value and len(value) <= MAX_VALUES:
        flat = list(_flat(value))
        if all(isinstance(x, (int, float)) and not isinstance(x, complex) for x in flat):
            is_float = any(isinstance(x, float) for x in flat)
            return {"kind": "python", "dtype": "float64" if is_float else "int64", "shape": [len(flat)],
                    "values": [_number(x) for x in flat[:budget]]}
    return None


def _collect(namespace):
    out = {}
    budget = MAX_TOTAL
    for name in sorted(namespace):
        if name.startswith("_") or budget <= 0:
            continue
        desc = _describe(namespace[name], budget)
        if desc is not None:
            out[name] = desc
            budget -= len(desc["values"])
    return out


def _seed(torch_mod):
    random.seed(0)
    np = sys.modules.get("numpy")
    if np is not None:
        try:
            np.random.seed(0)
        except Exception:
            pass
    if torch_mod is not None:
        torch_mod.manual_seed(0)


# -- PyTorch: placement redirection and per-operator differential -----------------------------------


def _redirect_mode(torch, device):
    """A TorchFunctionMode that moves the snippet's work to `device`, or None when unavailable.

    CPU run: every CUDA placement (.cuda(), .to('cuda'), device='cuda') becomes CPU.
    GPU run: tensors created without a device are made on the CPU (same RNG stream as the CPU
    run, so both runs see identical inputs) and moved to CUDA; explicit CPU placements are kept,
    so snippets that compute both sides still do.
    """
    try:
        from torch.overrides import TorchFunctionMode
    except ImportError:
        return None
    target = torch.device("cuda" if device == "gpu" else "cpu")

    def fix(d):
        if device == "cpu":
            if isinstance(d, str) and d.startswith("cuda"):
                return "cpu"
            if isinstance(d, int) and not isinstance(d, bool):
                return "cpu"
            if isinstance(d, torch.device) and d.type == "cuda":
                return torch.device("cpu")
        return d

    def has_tensor(items):
        for a in items:
            if isinstance(a, torch.Tensor):
                return True
            if isinstance(a, (list, tuple)) and any(isinstance(b, torch.Tensor) for b in a):
                return True
        return False

    class Redirect(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            name = getattr(func, "__name__", "")
            if name == "cuda" and device == "cpu":
                return args[0]
            on_gpu = device == "gpu" and args and isinstance(args[0], torch.Tensor) and args[0].is_cuda
            if on_gpu and name in _RNG_INPLACE:
                # random init drawn from the CPU generator, as in the CPU run (weights of nn layers)
                tmp = args[0].detach().cpu()
                func(tmp, *args[1:], **kwargs)
                with torch.no_grad():
                    args[0].copy_(tmp)
                return args[0]
            if on_gpu and name in _RNG_LIKE:
                kwargs["device"] = "cpu"
                return func(args[0].cpu(), *args[1:], **kwargs).to(args[0].device)
            if on_gpu and name in _RNG_FUNCS:
                # random masks/samples from the CPU generator too (dropout in training mode,
                # multinomial, ...); .cpu()/.to() are differentiable, so autograd still flows
                cuda = args[0].device
                cpu_args = [a.cpu() if isinstance(a, torch.Tensor) else a for a in args]
                cpu_kwargs = dict((k, v.cpu() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items())
                if cpu_kwargs.get("inplace"):
                    cpu_kwargs["inplace"] = False
                out = func(*cpu_args, **cpu_kwargs)
                out = out.to(cuda) if isinstance(out, torch.Tensor) else out
                if kwargs.get("inplace") and isinstance(out, torch.Tensor):
                    args[0].copy_(out)
                    return args[0]
                return out
            if (device == "gpu" and name in _RANDOM_FACTORIES and kwargs.get("device") is not None
                    and torch.device(kwargs["device"]).type == "cuda" and not has_tensor(args)):
                # torch.randn(..., device='cuda'): the CPU run drew these from the CPU generator
                dev, grad = kwargs["device"], kwargs.pop("requires_grad", False)
                kwargs["device"] = "cpu"
                out = func(*args, **kwargs).to(dev)
                return out.requires_grad_(True) if grad else out
            if name == "numpy" and args and isinstance(args[0], torch.Tensor) and args[0].is_cuda:
                return args[0].detach().cpu().numpy()
            if "device" in kwargs:
                kwargs["device"] = fix(kwargs["device"])
            if name == "to":
                args = tuple([args[0]] + [fix(a) for a in args[1:]])
            explicit = "device" in kwargs and kwargs["device"] is not None
            result = func(*args, **kwargs)
            if (device == "gpu" and not explicit and name not in ("cpu", "to", "__get__")
                    and isinstance(result, torch.Tensor) and result.device.type == "cpu"
                    and not has_tensor(args) and not has_tensor(kwargs.values())):
                leaf = result.requires_grad and result.is_leaf
                result = result.detach().to(target).requires_grad_(True) if leaf else result.to(target)
            return result

    return Redirect()


_RNG_INPLACE = ("uniform_", "normal_", "bernoulli_", "random_", "exponential_", "geometric_", "cauchy_",
                "log_normal_")
_RNG_LIKE = ("rand_like", "randn_like", "randint_like")
_RANDOM_FACTORIES = ("rand", "randn", "randint", "randperm", "normal")
_RNG_FUNCS = ("dropout", "alpha_dropout", "feature_alpha_dropout", "dropout1d", "dropout2d", "dropout3d",
              "rrelu", "multinomial", "bernoulli", "poisson", "normal")
_RANDOM_OPS = ("rand", "normal", "uniform", "bernoulli", "dropout", "multinomial", "exponential",
               "geometric", "cauchy", "log_normal", "poisson", "random")
_SKIP_OPS = ("aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty",
             "aten::new_empty_strided", "aten::set_", "aten::resize_", "aten::detach", "aten::alias",
             "aten::lift_fresh", "aten::copy_", "aten::_to_copy", "aten::clone", "aten::view",
             "aten::_unsafe_view", "aten::as_strided", "aten::t", "aten::expand", "aten::record_stream")


def _tolerance(torch, dtype):
    """(rtol, atol) per dtype: torch.testing.assert_close's, with rtol x100 and atol x10 because the
    reference kernel (another device, or float64) accumulates in another order."""
    table = {
        torch.float16: (1e-3, 1e-5),
        torch.bfloat16: (1.6e-2, 1e-5),
        torch.float32: (1.3e-6, 1e-5),
        torch.float64: (1e-7, 1e-7),
    }
    rtol, atol = table.get(dtype, (0.0, 0.0))
    return rtol * 100, atol * 10


def _opdiff_mode(torch, reference, report):
    """A TorchDispatchMode that re-runs each aten op on a reference and records where outputs differ.

    reference="cpu": the same op on CPU copies of the inputs (the GPU run's check).
    reference="float64": the same op with floating inputs upcast to float64 (the CPU-only check).
    Each op is checked on the very inputs the run gave it, so the first divergent op is the
    kernel that disagrees, not an op downstream of it.
    """
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_flatten, tree_map
    except ImportError:
        report["status"] = "unavailable: torch %s has no TorchDispatchMode" % torch.__version__
        return None
    low = (torch.float16, torch.bfloat16, torch.float32)

    def to_ref(x):
        if isinstance(x, torch.Tensor):
            x = x.detach()
            if reference == "float64" and x.dtype in low:
                return x.to(torch.float64)
            return x.cpu().clone()
        if isinstance(x, torch.device) and reference == "cpu":
            return torch.device("cpu")
        return x

    def compare(out, ref):
        if isinstance(out, torch.Tensor) and isinstance(ref, torch.Tensor):
            if out.is_complex() or out.shape != ref.shape:
                return None if out.shape == ref.shape else (float("inf"), "shape %s vs %s" % (list(out.shape), list(ref.shape)))
            a = out.detach().cpu()
            b = ref.detach().cpu()
            rtol, atol = _tolerance(torch, a.dtype)
            if a.dtype == torch.bool or not (a.is_floating_point() or b.is_floating_point()):
                bad = a.to(torch.int64) != b.to(torch.int64)
                diff = (a.to(torch.float64) - b.to(torch.float64)).abs()
            else:
                a64, b64 = a.to(torch.float64), b.to(torch.float64)
                both_nan = torch.isnan(a64) & torch.isnan(b64)
                same_inf = torch.isinf(a64) & (a64 == b64)
                diff = (a64 - b64).abs()
                bad = ~(both_nan | same_inf | (diff <= atol + rtol * b64.abs()))
                diff = torch.where(both_nan | same_inf, torch.zeros_like(diff), diff)
            n = int(bad.sum())
            if n:
                return (float(diff[bad].max()) if n else 0.0, "%d of %d elements differ" % (n, a.numel()))
            return None
        if isinstance(out, (int, float)) and isinstance(ref, (int, float)):
            if out != ref and not (math.isnan(float(out)) and math.isnan(float(ref))):
                rtol = 1.3e-6 if isinstance(out, float) else 0.0
                if abs(out - ref) > 1e-5 * (rtol > 0) + rtol * abs(ref):
                    return (abs(out - ref), "%r vs %r" % (out, ref))
        return None

    class OpDiff(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = func._schema.name
            skip = name in _SKIP_OPS or any(r in name for r in _RANDOM_OPS) or report["checked"] >= 20000
            if not skip:
                try:
                    rargs = tree_map(to_ref, args)
                    rkwargs = tree_map(to_ref, kwargs)
                except Exception:
                    skip = True
            out = func(*args, **kwargs)
            if skip:
                return out
            try:
                ref = func(*rargs, **rkwargs)
            except Exception as exc:
                report["reference_failed"].append("%s: %s" % (name, str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__))
                return out
            report["checked"] += 1
            outs, _ = tree_flatten(out)
            refs, _ = tree_flatten(ref)
            for o, r in zip(outs, refs):
                found = compare(o, r)
                if found is not None:
                    entry = {"op": name, "index": report["checked"], "max_abs_diff": found[0], "detail": found[1],
                             "dtype": str(getattr(o, "dtype", type(o).__name__)).replace("torch.", ""),
                             "shape": list(getattr(o, "shape", []))}
                    if len(report["divergent"]) < 20:
                        report["divergent"].append(entry)
                    break
            return out

    return OpDiff()


# -- the run --------------------------------------------------------------------------------------


def _device_info(framework, device):
    info = {"requested": device, "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    torch = None
    if framework == "pytorch":
        import torch  # noqa: F811 -- lazily, inside the target environment

        info["framework_version"] = torch.__version__
        info["cuda_available"] = bool(torch.cuda.is_available())
        info["cuda_build"] = torch.version.cuda
        if info["cuda_available"]:
            info["name"] = torch.cuda.get_device_name(0)
    elif framework == "tensorflow":
        import tensorflow as tf

        info["framework_version"] = tf.__version__
        # tf.config is 1.14+, list_physical_devices 2.1+; older releases answer through tf.test
        listing = getattr(getattr(tf, "config", None), "list_physical_devices", None)
        if listing is not None:
            gpus = listing("GPU")
        elif device == "gpu" and hasattr(tf, "test") and hasattr(tf.test, "gpu_device_name"):
            gpus = [tf.test.gpu_device_name()] if tf.test.gpu_device_name() else []
        else:
            gpus = []
        info["cuda_available"] = bool(gpus)
        info["name"] = gpus[0].name if gpus else None
    return torch, info


def run(opts):
    started = time.time()
    result = {
        "harness": HARNESS_VERSION,
        "python": "%d.%d.%d" % sys.version_info[:3],
        "status": "ok",
        "exception": None,
        "message": None,
        "frames": [],
        "cause": None,
        "printed": [],
        "stdout_tail": "",
        "stderr_tail": "",
        "values": [],
        "seconds": 0.0,
        "import_seconds": 0.0,
        "redirect": "off",
        "opdiff": None,
    }
    with open(opts.snippet, encoding="utf-8") as fh:
        code = fh.read()
    snippet_path = os.path.abspath(opts.snippet)
    t0 = time.time()
    torch = None
    try:
        torch, info = _device_info(opts.framework, opts.device)
    except Exception as exc:  # the framework itself does not import: that IS the replay's answer
        result.update(_exception(exc, snippet_path))
        result["frames"] = _frames(exc.__traceback__, __file__)
        result["status"] = "error"
        result["device"] = {"requested": opts.device}
        result["seconds"] = time.time() - t0
        return result
    result["import_seconds"] = time.time() - t0
    result["device"] = info
    if opts.device == "gpu" and opts.framework != "none" and not info.get("cuda_available"):
        result["status"] = "no-device"
        result["message"] = "no CUDA device visible to %s %s" % (opts.framework, info.get("framework_version"))
        return result
    try:
        compiled = compile(code, snippet_path, "exec")
    except SyntaxError as exc:
        result.update(_exception(exc, snippet_path))
        result["status"] = "error"
        return result
    redirect = None
    if torch is not None and opts.redirect:
        try:
            redirect = _redirect_mode(torch, opts.device)
        except Exception:  # a release whose mode API differs (1.12 wants push_torch_function_mode): no redirect
            redirect = None
        if opts.device == "cpu" and not info.get("cuda_available"):
            torch.cuda.synchronize = lambda *a, **k: None  # CUDA-only housekeeping is a no-op on CPU
        result["redirect"] = "on" if redirect is not None else "unavailable: torch %s has no TorchFunctionMode" % torch.__version__
    tf_device = None
    if opts.framework == "tensorflow" and opts.redirect:
        import tensorflow as tf

        tf_device = tf.device("/GPU:0" if opts.device == "gpu" else "/CPU:0")
        result["redirect"] = "on (default tf.device)"
    real_stdout, real_stderr = sys.stdout, sys.stderr
    sys.argv = [snippet_path]
    for i in range(max(1, opts.repeat)):
        _seed(torch)
        namespace = {"__name__": "__main__", "__file__": snippet_path, "__builtins__": __builtins__}
        # repeats only need to be read back, not shown again
        tee = _Tee(real_stdout if i == 0 else _Discard())
        err_tee = _Tee(real_stderr if i == 0 else _Discard())
        sys.stdout, sys.stderr = tee, err_tee
        report = None
        contexts = []
        if redirect is not None:
            contexts.append(redirect)
        if tf_device is not None:
            contexts.append(tf_device)
        if i == 0 and torch is not None and opts.opdiff != "none":
            report = {"reference": opts.opdiff, "checked": 0, "divergent": [], "reference_failed": [], "status": "ok"}
            mode = _opdiff_mode(torch, opts.opdiff, report)
            if mode is not None:
                contexts.append(mode)
            result["opdiff"] = report
        t1 = time.time()
        error = None
        try:
            entered = []
            try:
                for ctx in contexts:
                    ctx.__enter__()
                    entered.append(ctx)
                exec(compiled, namespace)
            finally:
                for ctx in reversed(entered):
                    ctx.__exit__(None, None, None)
        except SystemExit as exc:
            if exc.code not in (None, 0):
                error = exc
        except BaseException as exc:  # the snippet's failure is the result
            error = exc
        finally:
            sys.stdout, sys.stderr = real_stdout, real_stderr
            sys.stdout.flush()
        if i == 0:
            result["seconds"] = time.time() - t1
            result["stdout_tail"] = tee.text()[-TAIL:]
            result["stderr_tail"] = err_tee.text()[-TAIL:]
        result["printed"].append(tee.text())
        if torch is not None and opts.device == "gpu":
            try:
                torch.cuda.synchronize()
            except Exception:
                pass
        if error is not None:
            if i == 0:
                result.update(_exception(error, snippet_path))
                result["status"] = "error"
            break
        result["values"].append(_collect(namespace))
    result["wall_seconds"] = time.time() - started
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description="sftl replay harness")
    parser.add_argument("--snippet", required=True)
    parser.add_argument("--result", required=True)
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--framework", choices=("pytorch", "tensorflow", "none"), default="none")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--no-redirect", dest="redirect", action="store_false")
    parser.add_argument("--opdiff", choices=("none", "cpu", "float64"), default="none")
    opts = parser.parse_args(argv)
    result = run(opts)
    text = json.dumps(result)
    if opts.result == "-":
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    else:
        tmp = opts.result + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, opts.result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
