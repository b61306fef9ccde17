"""Argument specifications of framework APIs: PyTorch from native_functions.yaml and inspect, TensorFlow from op_defs."""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from sftl.errors import InputError

# Tensor dtypes the generator draws from when a schema does not narrow them (PyTorch schemas never do).
MAX_RANK = 6  # the input space's limits: tensors of rank <= 6, dims 0..10 (generation and hints read them)
MAX_DIM = 10

TORCH_DTYPES = ("float32", "float64", "int64", "int32", "bool", "complex64", "float16", "uint8")
# TensorFlow dtypes the worker can materialize; an op's allowed list is intersected with these.
TF_DTYPES = (
    "float32", "float64", "int32", "int64", "bool", "float16", "bfloat16", "complex64", "complex128",
    "int8", "int16", "uint8", "uint16", "uint32", "uint64",
)

# Kinds of arguments the generator understands.
KINDS = ("tensor", "tensors", "int", "ints", "float", "floats", "bool", "bools", "str", "scalar", "dtype")

# Documented string choices of common PyTorch arguments (the docs list them; schemas only say `str`).
TORCH_STR_CHOICES: dict[str, tuple[str, ...]] = {
    "reduce": ("sum", "prod", "mean", "amax", "amin"),
    "reduction": ("none", "mean", "sum"),
    "rounding_mode": ("trunc", "floor"),
    "mode": ("nearest", "bilinear", "bicubic", "linear", "reflect", "replicate", "constant", "circular"),
    "padding_mode": ("zeros", "border", "reflection"),
    "padding": ("valid", "same"),
    "approximate": ("none", "tanh"),
    "side": ("left", "right"),
    "interpolation": ("linear", "lower", "higher", "midpoint", "nearest"),
    "norm": ("forward", "backward", "ortho"),
    "ord": ("fro", "nuc"),
    "UPLO": ("L", "U"),
    "driver": ("gelsy", "gelsd", "gelss", "gels"),
    "indexing": ("ij", "xy"),
}


@dataclass(frozen=True)
class ArgSpec:
    """One argument: its kind, whether it may be None / left out, and its documented range."""

    name: str
    kind: str  # one of KINDS
    optional: bool = False  # None is a legal value
    has_default: bool = False  # may be left out
    keyword_only: bool = False
    length: int | None = None  # fixed list length (`int[2]`), None = any
    dtypes: tuple[str, ...] = ()  # tensor dtypes allowed by the schema / dtype-argument choices
    choices: tuple[str, ...] = ()  # strings
    group: str | None = None  # tensors of one group share a dtype (TensorFlow type attrs)
    min_count: int = 0  # shortest tensor list
    type_text: str = ""  # the schema's own word for the type
    role: str = ""  # "index": an integer tensor indexing another argument; "axis": an integer tensor naming a
    # dim; "per_dim": an integer vector with one entry per dim of the data (multiples, perm, paddings)


@dataclass(frozen=True)
class ApiSpec:
    """What the fuzzer knows about one API: where to call it and what it takes."""

    framework: str  # "pytorch" | "tensorflow" | "python" (test hook: stdlib callables)
    api: str  # the name asked for
    target: str  # dotted path of the callable, e.g. "torch.bmm", "tf.raw_ops.BatchMatMulV2"
    schema: str
    source: str  # "native_functions.yaml" | "inspect" | "op_def" | "manual"
    version: str
    args: tuple[ArgSpec, ...] = field(default=())
    varargs: str | None = None  # a tensor-list argument the Python binding takes as *args
    spd: bool = False  # the docs ask for symmetric positive-definite matrices (cholesky-like)

    @property
    def tensor_args(self) -> tuple[ArgSpec, ...]:
        return tuple(a for a in self.args if a.kind in ("tensor", "tensors"))


# ----------------------------------------------------------------------------------------- PyTorch

_ALIAS = re.compile(r"\([^)]*\)")


def _split_top(text: str) -> list[str]:
    """Split a schema's argument list on commas outside brackets (defaults like `[0,1]`)."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


_UNSUPPORTED = ("Dimname", "Generator", "Storage", "Stream", "DeviceIndex", "Layout", "Device", "MemoryFormat")


def parse_torch_schema(func: str) -> tuple[str, str, list[ArgSpec]] | None:
    """`name.overload(args) -> ret` to (name, overload, args); None when an argument cannot be generated."""
    m = re.match(r"^([\w.]+)\((.*)\)\s*->", func)
    if not m:
        return None
    full, argtext = m.group(1), m.group(2)
    name, _, overload = full.partition(".")
    args: list[ArgSpec] = []
    kw_only = False
    for raw in _split_top(argtext):
        if raw == "*":
            kw_only = True
            continue
        clean = _ALIAS.sub("", raw)
        typ, _, rest = clean.partition(" ")
        aname, eq, default = rest.strip().partition("=")
        optional = typ.endswith("?")
        base = typ.rstrip("?")
        has_default = bool(eq)
        lm = re.match(r"^(\w+)\[(\d*)\]$", base)
        length = int(lm.group(2)) if lm and lm.group(2) else None
        elem = lm.group(1) if lm else base
        listy = lm is not None
        if elem in _UNSUPPORTED:
            if optional or has_default:
                continue  # left at its default: not an input-validity dimension worth fuzzing
            return None
        if elem == "Tensor":
            kind = "tensors" if listy else "tensor"
        elif elem in ("int", "SymInt"):
            kind = "ints" if listy else "int"
        elif elem == "float":
            kind = "floats" if listy else "float"
        elif elem == "bool":
            kind = "bools" if listy else "bool"
        elif elem == "str":
            if listy:
                return None
            kind = "str"
        elif elem == "Scalar":
            if listy:
                return None
            kind = "scalar"
        elif elem == "ScalarType":
            kind = "dtype"
        else:
            return None
        if aname.strip() == "out" or "!" in raw:
            return None  # out= variants and in-place mutation are not the API's functional form
        args.append(
            ArgSpec(
                name=aname.strip(),
                kind=kind,
                optional=optional,
                has_default=has_default,
                keyword_only=kw_only,
                length=length,
                dtypes=TORCH_DTYPES if kind in ("tensor", "tensors", "dtype") else (),
                choices=TORCH_STR_CHOICES.get(aname.strip(), ()) if kind == "str" else (),
                type_text=typ,
            )
        )
    return name, overload, args


def _native_functions_path() -> Path:
    import torchgen

    path = Path(torchgen.__file__).parent / "packaged" / "ATen" / "native" / "native_functions.yaml"
    if not path.exists():
        raise InputError(f"native_functions.yaml not found in the installed torchgen ({path})")
    return path


@lru_cache(maxsize=2)
def _native_functions(path: str) -> dict[str, list[str]]:
    """Schema name -> every `func:` string with that name (overloads in file order)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(path, encoding="utf-8") as fh:
        entries = yaml.load(fh, Loader=loader)
    table: dict[str, list[str]] = {}
    for entry in entries:
        func = entry.get("func", "")
        name = func.split("(", 1)[0].split(".", 1)[0]
        table.setdefault(name, []).append(func)
    return table


_TORCH_NAMESPACES = ("", "nn.functional.", "linalg.", "special.", "fft.")


def _resolve_torch(api: str) -> tuple[str, Any]:
    import torch

    name = api.removeprefix("torch.").removeprefix("F.")
    for ns in _TORCH_NAMESPACES:
        obj: Any = torch
        try:
            for part in (ns + name).split("."):
                obj = getattr(obj, part)
        except AttributeError:
            continue
        if callable(obj):
            return "torch." + ns + name, obj
    raise InputError(f"torch has no API named {api!r} (tried torch., torch.nn.functional., torch.linalg., ...)")


def _schema_candidates(target: str) -> list[str]:
    """Schema names a torch callable may be bound to: `torch.linalg.inv` -> linalg_inv."""
    parts = target.split(".")[1:]
    if parts[:2] == ["nn", "functional"]:
        return [parts[-1]]
    if len(parts) == 2:
        return [f"{parts[0]}_{parts[1]}", parts[1]]
    return [parts[-1]]


def _pick_overload(funcs: list[str], overload: str | None) -> tuple[str, list[ArgSpec]] | None:
    parsed = [(f, parse_torch_schema(f)) for f in funcs]
    usable = [(f, p) for f, p in parsed if p is not None]
    if overload is not None:
        usable = [(f, p) for f, p in usable if p[1] == overload]
    if not usable:
        return None
    # the unnamed overload is the one a plain call binds first; then the most common kinds of inputs
    usable.sort(key=lambda fp: (fp[1][1] != "", fp[1][1] in ("Scalar", "Scalar_Tensor", "int", "dimname")))
    func, (_, _, args) = usable[0]
    return func, args


def _annotation_kind(ann: str, default: Any, name: str) -> str | None:
    """The generator kind of a Python annotation (`int | None`, `list[int]`, `Tensor`, `_size`)."""
    if name == "dtype":
        return "dtype"
    if ann == "None":  # BroadcastingList annotations evaluate to None at run time (F.unfold's kernel_size)
        return "ints"
    if not ann and default is None:
        return "tensor"  # an unannotated required parameter of a torch wrapper is a tensor (tensordot's a, b)
    a = ann.lower().replace("typing.", "").replace("torch.", "").replace(" ", "")
    a = a.replace("optional[", "").replace("|none", "").replace("none|", "").rstrip("]")
    if "tensor" in a and not any(w in a for w in ("list[tensor", "tuple[tensor", "sequence[tensor")):
        return "tensor"
    if any(w in a for w in ("list[tensor", "tuple[tensor", "sequence[tensor")):
        return "tensors"
    if a.startswith("bool") or isinstance(default, bool):
        return "bool"
    if a.startswith("int") or a.startswith("symint"):
        return "int"
    if any(w in a for w in ("list[int", "tuple[int", "sequence[int", "_size", "broadcastinglist")):
        return "ints"
    if a.startswith("float") or isinstance(default, float):
        return "float"
    if a.startswith("str") or isinstance(default, str):
        return "str"
    if a.startswith("dtype"):
        return "dtype"
    if isinstance(default, int):
        return "int"
    if name in ("input", "self", "weight", "bias", "target") and not a:
        return "tensor"
    return None


def _inspect_args(fn: Any) -> list[ArgSpec] | None:
    """Argument specs of a Python-level function (e.g. torch.nn.functional.*) from its signature."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    args: list[ArgSpec] = []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name.startswith("_") or p.name == "out":
            continue
        has_default = p.default is not p.empty
        if isinstance(p.annotation, str):
            ann = p.annotation
        elif p.annotation is p.empty:
            ann = ""
        elif p.annotation is None:
            ann = "None"
        elif isinstance(p.annotation, type):
            ann = p.annotation.__name__
        else:  # list[int], int | None, Optional[...]
            ann = str(p.annotation)
        d = None if not has_default else p.default
        if not ann and has_default and d is not None:
            ann = type(d).__name__
        kind = _annotation_kind(str(ann), d, p.name)
        if kind is None:
            if has_default:
                continue
            return None
        optional = (has_default and d is None) or "None" in str(ann) or "Optional" in str(ann)
        choices: tuple[str, ...] = ()
        if kind == "str":
            choices = TORCH_STR_CHOICES.get(p.name, ()) or ((d,) if isinstance(d, str) else ())
        args.append(
            ArgSpec(
                name=p.name,
                kind=kind,
                optional=bool(optional),
                has_default=has_default,
                keyword_only=p.kind == p.KEYWORD_ONLY,
                dtypes=TORCH_DTYPES if kind in ("tensor", "tensors", "dtype") else (),
                choices=choices,
                type_text=str(ann),
            )
        )
    return args if any(a.kind in ("tensor", "tensors") for a in args) else None


def _signature_disagrees(fn: Any, args: list[ArgSpec]) -> bool:
    """A Python wrapper whose parameters are not the schema's (torch.tensordot's dims=, torch.split's names)."""
    if not inspect.isfunction(fn):
        return False
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return False
    names = {p.name for p in params}
    return any(a.name not in names for a in args[1:] if not a.keyword_only and not a.has_default)


_INDEX_NAMES = ("index", "indices")
_AXIS_NAMES = ("axis", "dim", "axes", "split_dim", "reduction_indices", "concat_dim")
# integer tensors with one entry per dim of the data (Tile's multiples, Transpose's perm, Pad's paddings)
_PER_DIM_NAMES = ("multiples", "perm", "begin", "size", "paddings", "end", "strides")
_SPD = re.compile(r"positive[- ]definite", re.I)
_INT_DTYPES = ("int64", "int32", "int16", "int8", "uint8", "uint16", "uint32", "uint64")


def with_roles(args: Sequence[ArgSpec], tensorflow: bool = False) -> tuple[ArgSpec, ...]:
    """Mark index and axis tensors by their schema names: their values, not only their shapes, decide validity."""
    out = []
    for a in args:
        role = ""
        if a.kind in ("tensor", "tensors"):
            ints_only = bool(a.dtypes) and all(d in _INT_DTYPES for d in a.dtypes)
            if a.name in _INDEX_NAMES:
                role = "index"
            elif tensorflow and a.kind == "tensor" and ints_only and a.name in _AXIS_NAMES:
                role = "axis"
            elif a.kind == "tensor" and ints_only and a.name in _PER_DIM_NAMES:
                role = "per_dim"
        out.append(replace(a, role=role) if role else a)
    return tuple(out)


def _doc_wants_spd(doc: str | None) -> bool:
    return bool(doc and _SPD.search(doc))


def torch_spec(api: str) -> ApiSpec:
    """The spec of one PyTorch API (`bmm`, `torch.linalg.inv`, `max_pool2d`, `split.sizes`)."""
    import torch

    base, _, overload = api.partition(":")
    target, fn = _resolve_torch(base)
    funcs: list[str] = []
    table = _native_functions(str(_native_functions_path()))
    for cand in _schema_candidates(target):
        if cand in table:
            funcs = table[cand]
            break
    # a Python-level nn.functional wrapper has its own signature (F.unfold is im2col, not Tensor.unfold)
    python_wrapper = inspect.isfunction(fn) and target.startswith("torch.nn.functional.")
    picked = _pick_overload(funcs, overload or None) if funcs else None
    if picked is not None and (python_wrapper or _signature_disagrees(fn, picked[1])):
        args_w = _inspect_args(fn)
        if args_w is not None:  # the wrapper's own signature is what a call goes through
            return ApiSpec("pytorch", api, target, f"{target}{inspect.signature(fn)}", "inspect",
                           torch.__version__, with_roles(args_w), spd=_doc_wants_spd(fn.__doc__))
        if python_wrapper:
            picked = None
    if picked is not None:
        func, args = picked
        varargs = None
        try:
            params = inspect.signature(fn).parameters.values()
        except (TypeError, ValueError):
            params = None  # a C binding: the schema is its signature
        if params is not None:
            if any(p.kind == p.VAR_POSITIONAL for p in params):
                varargs = next((a.name for a in args if a.kind == "tensors"), None)
            if not any(p.kind == p.VAR_KEYWORD for p in params):
                # keyword-only schema arguments the Python wrapper does not take (einsum's path=)
                names = {p.name for p in params}
                args = [a for a in args if not a.keyword_only or a.name in names]
        return ApiSpec("pytorch", api, target, func, "native_functions.yaml", torch.__version__, with_roles(args),
                       varargs=varargs, spd=_doc_wants_spd(fn.__doc__))
    args_i = _inspect_args(fn)
    if args_i is None:
        raise InputError(f"cannot build an argument spec for {api!r}: no usable schema or signature")
    return ApiSpec("pytorch", api, target, f"{target}{inspect.signature(fn)}", "inspect", torch.__version__,
                   with_roles(args_i), spd=_doc_wants_spd(fn.__doc__))


# -------------------------------------------------------------------------------------- TensorFlow


def tensorflow_spec(api: str) -> ApiSpec:
    """The spec of one TensorFlow raw op (`BatchMatMulV2`, `tf.raw_ops.Conv2D`) from its op_def."""
    import tensorflow as tf
    from tensorflow.python.framework import dtypes as tf_dtypes
    from tensorflow.python.framework import op_def_registry

    name = api.removeprefix("tensorflow.").removeprefix("tf.").removeprefix("raw_ops.")
    op_def = op_def_registry.get(name)
    if op_def is None and "." in api:  # a public API (tf.nn.conv2d): the raw op its Python wrapper runs
        ops = tf_raw_ops_for(api)
        if ops:
            name = ops[0]
            op_def = op_def_registry.get(name)
    fn = getattr(tf.raw_ops, name, None)
    if op_def is None or fn is None:
        raise InputError(f"tf.raw_ops has no op named {name!r} (and {api!r} is no public TensorFlow API "
                         "whose wrapper calls one)")
    params = [p for p in inspect.signature(fn).parameters.values() if p.name != "name"]
    attrs = {a.name: a for a in op_def.attr}
    inputs = {i.name: i for i in op_def.input_arg}

    def allowed(attr_name: str | None, fixed: int) -> tuple[str, ...]:
        if attr_name is None:
            names = [tf_dtypes.as_dtype(fixed).name] if fixed else []
        else:
            a = attrs[attr_name]
            vals = list(a.allowed_values.list.type) if a.HasField("allowed_values") else []
            names = [tf_dtypes.as_dtype(v).name for v in vals] if vals else list(TF_DTYPES)
        names = ["float32" if n == "float" else "float64" if n == "double" else n for n in names]
        return tuple(n for n in names if n in TF_DTYPES)

    args: list[ArgSpec] = []
    # the Python wrapper may rename an input (Sum's reduction_indices is `axis`): such a parameter is the
    # next input not yet taken, in op_def order
    unused = [i.name for i in op_def.input_arg if i.name not in {p.name for p in params}]
    for p in params:
        has_default = p.default is not p.empty
        if p.name not in inputs and p.name not in attrs and unused:
            inputs[p.name] = inputs[unused.pop(0)]
        if p.name in inputs:
            ia = inputs[p.name]
            dts = allowed(ia.type_attr or None, ia.type)
            if not dts:
                raise InputError(f"{name}: input {p.name} takes a type the fuzzer cannot build")
            listy = bool(ia.number_attr or ia.type_list_attr)
            min_count = attrs[ia.number_attr].minimum if ia.number_attr else 1
            args.append(ArgSpec(p.name, "tensors" if listy else "tensor", dtypes=dts, group=ia.type_attr or None,
                                min_count=int(min_count), type_text=ia.type_attr or tf_dtypes.as_dtype(ia.type).name))
            continue
        a = attrs.get(p.name)
        if a is None:
            continue
        t = a.type
        choices = tuple(s.decode() for s in a.allowed_values.list.s) if a.HasField("allowed_values") else ()
        kind = {"int": "int", "float": "float", "bool": "bool", "string": "str", "type": "dtype",
                "list(int)": "ints", "list(float)": "floats", "shape": "ints"}.get(t)
        if kind is None or (kind == "str" and not choices and p.name != "equation"):
            if has_default:
                continue
            raise InputError(f"{name}: attribute {p.name} of type {t} cannot be generated")
        dts = ()
        if kind == "dtype":
            dts = allowed(p.name, 0)
        # list attrs declare a minimum length (MaxPool's ksize: 4); shorter lists are schema violations
        min_len = int(a.minimum) if a.has_minimum and kind in ("ints", "floats") else 0
        args.append(ArgSpec(p.name, kind, has_default=has_default, keyword_only=True, dtypes=dts,
                            choices=choices, type_text=t, min_count=min_len))
    schema = f"tf.raw_ops.{name}(" + ", ".join(f"{a.name}: {a.type_text}" for a in args) + ")"
    return ApiSpec("tensorflow", api, f"tf.raw_ops.{name}", schema, "op_def", tf.__version__,
                   with_roles(args, tensorflow=True), spd=_doc_wants_spd(fn.__doc__))


_GEN_CALL = re.compile(r"\b(gen_\w+_ops)\.(\w+)\b")  # calls, and wrappers passed on (softmax's)
_MODULE_CALL = re.compile(r"\b(\w+_ops|nn_impl|array_ops_stack)\.(\w+)\(")
_LOCAL_CALL = re.compile(r"(?<![.\w])([a-z_]\w*)\(")
_OP_NAME = re.compile(r"_apply_op_helper\(\s*[\"'](\w+)[\"']")


def _source(fn: Any) -> str:
    try:
        return inspect.getsource(inspect.unwrap(fn))
    except (OSError, TypeError, ValueError):
        return ""


@lru_cache(maxsize=512)
def tf_raw_ops_for(public: str, max_depth: int = 3) -> tuple[str, ...]:
    """The raw ops a public TensorFlow function runs (`tf.nn.conv2d` -> ("Conv2D",)), nearest call first.

    Read from the sources of its Python wrappers: calls into the generated `gen_*_ops` modules name the op
    (`_apply_op_helper("Conv2D", ...)`); calls to other functions of the ops modules are followed a few levels.
    """
    import importlib

    import tensorflow as tf

    name = public.removeprefix("tensorflow.").removeprefix("tf.")
    if name.startswith("raw_ops."):
        op = name.removeprefix("raw_ops.")
        return (op,) if hasattr(tf.raw_ops, op) else ()
    obj: Any = tf
    try:
        for part in name.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        return ()
    if not callable(obj):
        return ()
    ops: list[str] = []
    seen: set[int] = set()
    own = _OP_NAME.search(_source(obj))  # a generated wrapper exported as is (tf.tile, tf.linalg.cholesky)
    if own:
        return (own.group(1),)
    frontier: list[Any] = [inspect.unwrap(obj)]
    for _ in range(max_depth + 1):
        nxt: list[Any] = []
        for fn in frontier:
            if id(fn) in seen or len(seen) > 60:
                continue
            seen.add(id(fn))
            src = _source(fn)
            glb = getattr(fn, "__globals__", {})
            for mod, attr in _GEN_CALL.findall(src):
                try:
                    gen = importlib.import_module(f"tensorflow.python.ops.{mod}")
                except ImportError:
                    continue
                m = _OP_NAME.search(_source(getattr(gen, attr, None)))
                if m and m.group(1) not in ops:
                    ops.append(m.group(1))
            for mod, attr in _MODULE_CALL.findall(src):
                if mod.startswith("gen_"):
                    continue
                target = getattr(glb.get(mod), attr, None)
                if target is not None and inspect.isfunction(inspect.unwrap(target)):
                    nxt.append(inspect.unwrap(target))
            for attr in _LOCAL_CALL.findall(src):
                target = glb.get(attr)
                if target is not None and inspect.isfunction(inspect.unwrap(target)) and getattr(
                        target, "__module__", "").startswith("tensorflow.python.ops"):
                    nxt.append(inspect.unwrap(target))
        if ops:  # the nearest wrapper level that reaches an op is the one the API means
            break
        frontier = nxt
    # among them, the op named like the API first (softmax -> Softmax before its helpers' Range, Rank)
    tail = name.rsplit(".", 1)[-1].replace("_", "").lower()
    return tuple(sorted(ops, key=lambda op: re.sub(r"V\d+$", "", op).lower() != tail))


def python_spec(api: str, args: tuple[ArgSpec, ...] = ()) -> ApiSpec:
    """A stdlib callable (`os.abort`, `ctypes.string_at`): the test hook for crash containment."""
    import platform

    return ApiSpec("python", api, api, f"{api}(...)", "manual", platform.python_version(), args)


def api_spec(api: str, framework: str = "pytorch") -> ApiSpec:
    """Dispatch on the framework; raises InputError for unknown APIs."""
    if framework == "pytorch":
        return torch_spec(api)
    if framework == "tensorflow":
        return tensorflow_spec(api)
    raise InputError(f"unknown framework {framework!r} (pytorch or tensorflow)")
