"""Reads a report's own call to an API out of its snippet (ast, never executed) as a seed for the fuzzer."""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from typing import Any

from sftl.fuzz.generate import Call
from sftl.fuzz.specs import ApiSpec

_FACTORIES = {"randn", "rand", "zeros", "ones", "empty", "normal", "uniform", "random_normal", "random_uniform",
              "full", "randint", "eye", "arange", "tensor", "constant", "as_tensor", "from_numpy", "array",
              "convert_to_tensor", "rand_like", "randn_like", "zeros_like", "ones_like", "Variable"}
_DTYPES = {"float": "float32", "float32": "float32", "float64": "float64", "double": "float64", "half": "float16",
           "float16": "float16", "bfloat16": "bfloat16", "int": "int32", "int32": "int32", "int64": "int64",
           "long": "int64", "bool": "bool", "complex64": "complex64", "cfloat": "complex64",
           "complex128": "complex128", "cdouble": "complex128", "uint8": "uint8", "int8": "int8", "int16": "int16"}


@dataclass(frozen=True)
class SeedCall:
    """The reported call: argument values the fuzzer understood, and what it could not read."""

    call: Call
    line: int
    source: str
    unresolved: tuple[str, ...] = ()


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


class _Reader:
    """Evaluates the small language of snippet arguments: literals, names, tensor factories, dtype casts."""

    def __init__(self, tree: ast.Module) -> None:
        self.env: dict[str, ast.AST] = {}
        self.tree = tree

    def bind(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            t = stmt.targets[0]
            if isinstance(t, ast.Name):
                self.env[t.id] = stmt.value
            elif isinstance(t, (ast.Tuple, ast.List)) and isinstance(stmt.value, (ast.Tuple, ast.List)):
                for a, b in zip(t.elts, stmt.value.elts, strict=False):
                    if isinstance(a, ast.Name):
                        self.env[a.id] = b
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            self.env[stmt.target.id] = stmt.value

    def value(self, node: ast.AST, depth: int = 0) -> Any:
        """A Python value, a tensor descriptor, or raises ValueError."""
        if depth > 20:
            raise ValueError("too deep")
        if isinstance(node, ast.Name) and node.id in self.env:
            return self.value(self.env[node.id], depth + 1)
        if isinstance(node, (ast.Constant, ast.UnaryOp, ast.List, ast.Tuple)):
            if isinstance(node, (ast.List, ast.Tuple)):
                return [self.value(e, depth + 1) for e in node.elts]
            return ast.literal_eval(node)
        if isinstance(node, ast.Attribute):
            name = _dotted(node)
            tail = name.rsplit(".", 1)[-1]
            if tail in _DTYPES and name.split(".")[0] in ("torch", "tf", "np", "numpy", "tensorflow"):
                return {"t": "dtype", "v": _DTYPES[tail]}
            if tail == "shape":  # x.shape of a tensor we know
                base = self.value(node.value, depth + 1)
                if isinstance(base, dict) and base.get("t") == "tensor":
                    return list(base["shape"])
            raise ValueError(f"cannot read {name}")
        if isinstance(node, ast.Call):
            return self._call(node, depth)
        if isinstance(node, ast.BinOp):
            return ast.literal_eval(ast.unparse(node))
        raise ValueError(f"cannot read {ast.unparse(node)[:40]}")

    def _call(self, node: ast.Call, depth: int) -> Any:
        fn = _dotted(node.func)
        tail = fn.rsplit(".", 1)[-1]
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        if isinstance(node.func, ast.Attribute) and tail in ("to", "double", "float", "half", "long", "int",
                                                              "bool", "cuda", "cpu", "contiguous", "clone",
                                                              "detach", "requires_grad_", "numpy", "type"):
            base = self.value(node.func.value, depth + 1)
            if isinstance(base, dict) and base.get("t") == "tensor":
                dt = None
                if tail in _DTYPES:
                    dt = _DTYPES[tail]
                elif tail in ("to", "type") and node.args:
                    try:
                        arg = self.value(node.args[0], depth + 1)
                    except ValueError:
                        arg = None
                    if isinstance(arg, dict) and arg.get("t") == "dtype":
                        dt = arg["v"]
                if "dtype" in kw:
                    d = self.value(kw["dtype"], depth + 1)
                    dt = d["v"] if isinstance(d, dict) else dt
                return dict(base, dtype=dt or base["dtype"])
            raise ValueError(f"cannot read {fn}")
        if tail not in _FACTORIES:
            raise ValueError(f"cannot read a call to {fn}")
        dtype = "float32"
        if "dtype" in kw:
            d = self.value(kw["dtype"], depth + 1)
            if isinstance(d, dict) and d.get("t") == "dtype":
                dtype = d["v"]
            elif isinstance(d, str):
                dtype = _DTYPES.get(d, d)
        args = [self.value(a, depth + 1) for a in node.args]
        if tail in ("tensor", "constant", "as_tensor", "array", "convert_to_tensor", "Variable", "from_numpy"):
            data = args[0] if args else self.value(kw.get("value") or kw["data"], depth + 1)
            if isinstance(data, dict) and data.get("t") == "tensor":
                return dict(data, dtype=dtype if "dtype" in kw else data["dtype"])
            shape, leaves = _nested_shape(data)
            if "dtype" not in kw:
                dtype = "bool" if leaves and all(isinstance(x, bool) for x in leaves) else (
                    "float32" if any(isinstance(x, float) for x in leaves) else "int64")
            if "shape" in kw:
                shape = list(self.value(kw["shape"], depth + 1))
            return {"t": "tensor", "shape": shape, "dtype": dtype}
        if tail.endswith("_like"):
            base = args[0]
            return dict(base, dtype=dtype if "dtype" in kw else base["dtype"])
        if tail == "arange":
            nums = [a for a in args if isinstance(a, (int, float))]
            lo, hi = (0, nums[0]) if len(nums) == 1 else (nums[0], nums[1])
            step = nums[2] if len(nums) > 2 else 1
            if "dtype" not in kw and all(isinstance(x, int) for x in nums):
                dtype = "int64"
            return {"t": "tensor", "shape": [max(0, int((hi - lo + step - 1) // step))], "dtype": dtype}
        if tail == "eye":
            n = int(args[0])
            return {"t": "tensor", "shape": [n, int(args[1]) if len(args) > 1 else n], "dtype": dtype}
        if tail == "randint":
            size = args[2] if len(args) > 2 else (self.value(kw["size"], depth + 1) if "size" in kw else args[-1])
            return {"t": "tensor", "shape": [int(s) for s in size], "dtype": dtype if "dtype" in kw else "int64"}
        if tail == "full":
            shape = args[0]
            return {"t": "tensor", "shape": [int(s) for s in shape], "dtype": dtype}
        # randn(2, 3) / randn((2, 3)) / zeros(shape=[2, 3]) / tf.random.normal([2, 3])
        if "size" in kw or "shape" in kw:
            shape = self.value(kw.get("size") or kw["shape"], depth + 1)
        elif len(args) == 1 and isinstance(args[0], list):
            shape = args[0]
        else:
            shape = [a for a in args if isinstance(a, int)]
        if isinstance(shape, int):
            shape = [shape]
        return {"t": "tensor", "shape": [int(s) for s in shape], "dtype": dtype}


def _nested_shape(data: Any) -> tuple[list[int], list[Any]]:
    if isinstance(data, list):
        if not data:
            return [0], []
        inner, leaves = _nested_shape(data[0])
        all_leaves = list(leaves)
        for d in data[1:]:
            all_leaves.extend(_nested_shape(d)[1])
        return [len(data)] + inner, all_leaves
    return [], [data]


def _literal_tensor(v: Any, dtypes: tuple[str, ...]) -> dict[str, Any] | None:
    """A Python number or list given where the API takes a tensor (tf.gather(x, [1, 0])): its values kept."""
    shape, leaves = _nested_shape(v)
    if not leaves or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in leaves):
        return None
    if all(isinstance(x, int) for x in leaves):
        dt = next((d for d in ("int32", "int64") if d in dtypes), "int64" if not dtypes else dtypes[0])
    else:
        dt = next((d for d in ("float32", "float64") if d in dtypes), "float32")
    return {"t": "tensor", "shape": shape, "dtype": dt, "vals": leaves}


def _to_value(v: Any, kind: str, dtypes: tuple[str, ...] = ()) -> dict[str, Any] | None:
    if v is None:
        return {"t": "none"}
    if kind == "tensor" and not isinstance(v, dict):
        return _literal_tensor(v, dtypes)
    if isinstance(v, dict):
        if kind == "tensors" and v.get("t") == "tensor":
            return {"t": "tensors", "items": [v]}
        return v
    if kind == "tensors" and isinstance(v, list) and all(isinstance(i, dict) for i in v):
        return {"t": "tensors", "items": v}
    if isinstance(v, bool):
        return {"t": "bool", "v": v}
    if isinstance(v, int) and kind in ("ints",):
        return {"t": "ints", "v": [v]}
    if isinstance(v, int):
        return {"t": "int", "v": v}
    if isinstance(v, float):
        return {"t": "float", "v": v}
    if isinstance(v, str):
        return {"t": "str", "v": v}
    if isinstance(v, list) and all(isinstance(x, bool) for x in v) and kind == "bools":
        return {"t": "bools", "v": v}
    if isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return {"t": "ints", "v": v}
    if isinstance(v, list) and all(isinstance(x, (int, float)) for x in v):
        return {"t": "floats", "v": [float(x) for x in v]}
    return None


def _public_tf(fn: str, spec: ApiSpec) -> bool:
    """`tf.nn.conv2d` / `tf.linalg.matmul` calls the spec's raw op (read from their Python wrappers)."""
    if spec.framework != "tensorflow" or fn.split(".")[0] not in ("tf", "tensorflow") or ".raw_ops." in fn:
        return False
    from sftl.fuzz.specs import tf_raw_ops_for

    return spec.target.rsplit(".", 1)[-1] in tf_raw_ops_for(fn)


def _matches(fn: str, spec: ApiSpec) -> bool:
    target_tail = spec.target.rsplit(".", 1)[-1]
    parts = fn.split(".")
    if parts[-1] == target_tail or (fn == spec.api and "." in fn):
        # torch.bmm / F.max_pool2d / torch.linalg.inv / tf.raw_ops.X / a method call x.bmm(...)
        return True
    return _public_tf(fn, spec)


# public TensorFlow argument names -> the raw op's (tf.math.reduce_sum's input_tensor is Sum's input)
_TF_ALIASES = {"input_tensor": "input", "keepdims": "keep_dims", "filters": "filter", "tensor": "input",
               "values": "values", "k": "k", "multiples": "multiples"}
_WINDOW = ("strides", "dilations", "ksize")


def _public_call(node: ast.Call, fn: str, spec: ApiSpec, reader: _Reader) -> SeedCall:
    """A call of a public TensorFlow API read as its raw op's arguments: names mapped, window lists widened."""
    import difflib

    import tensorflow as tf

    obj: Any = tf
    for part in fn.split(".")[1:]:
        obj = getattr(obj, part)
    params = [p for p in inspect.signature(obj).parameters.values() if p.name != "name"]
    given: dict[str, ast.AST] = {p.name: a for p, a in zip(params, node.args, strict=False)}
    given.update({k.arg: k.value for k in node.keywords if k.arg})
    by_name = {a.name: a for a in spec.args}
    call: Call = {}
    unresolved: list[str] = []
    loose: list[dict[str, Any]] = []  # tensors under public names the op does not use (a, b -> x, y)
    for pub, expr in given.items():
        raw = _TF_ALIASES.get(pub, pub)
        if raw not in by_name:
            close = difflib.get_close_matches(raw, list(by_name), n=1, cutoff=0.75)
            raw = close[0] if close else ""
        try:
            val = reader.value(expr)
        except (ValueError, KeyError, IndexError, TypeError, SyntaxError):
            val = None
        if not raw:
            if isinstance(val, dict) and val.get("t") == "tensor":
                loose.append(val)
            continue
        v = _to_value(val, by_name[raw].kind, by_name[raw].dtypes) if val is not None else None
        if v is None:
            unresolved.append(raw)
        else:
            call[raw] = v
    for a in spec.args:  # unnamed tensors fill the op's tensor inputs in order
        if a.kind == "tensor" and a.name not in call and loose:
            call[a.name] = loose.pop(0)
    _widen_windows(call)
    return SeedCall(call, node.lineno, ast.unparse(node), tuple(unresolved))


def _widen_windows(call: Call) -> None:
    """Public strides=2 or [2, 2] are the raw op's [1, 2, 2, 1] (NHWC) or [1, 1, 2, 2] (NCHW)."""
    first = next((v for v in call.values() if v.get("t") == "tensor"), None)
    rank = len(first["shape"]) if first else 4
    fmt = call.get("data_format", {}).get("v", "NHWC")
    spatial = max(rank - 2, 1)
    for name in _WINDOW:
        v = call.get(name)
        if v is None or v.get("t") != "ints" or len(v["v"]) not in (1, spatial) or len(v["v"]) == rank:
            continue
        vals = list(v["v"]) * (spatial if len(v["v"]) == 1 else 1)
        v["v"] = [1, 1, *vals] if str(fmt).startswith("NC") else [1, *vals, 1]


def find_seed(code: str, spec: ApiSpec) -> SeedCall | None:
    """The first call of `spec`'s API in `code`, with the values of its arguments where they can be read."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    reader = _Reader(tree)
    found: list[tuple[ast.Call, bool]] = []

    class Visit(ast.NodeVisitor):
        def visit_Call(self, node: ast.Call) -> None:
            if not found and _matches(_dotted(node.func), spec):
                fn = _dotted(node.func)
                head = fn.split(".")[0]
                method = isinstance(node.func, ast.Attribute) and head not in ("torch", "tf", "F", "tensorflow",
                                                                                 "nn", "functional", "np")
                found.append((node, method))
            self.generic_visit(node)

    # statements in order: bindings before the call are visible to it
    for stmt in _flat_statements(tree.body):
        Visit().visit(stmt)
        if found:
            break
        reader.bind(stmt)
    if not found:
        return None
    node, method = found[0]
    fn_name = _dotted(node.func)
    if spec.framework == "tensorflow" and not method and _public_tf(fn_name, spec) and ".raw_ops." not in fn_name:
        try:
            return _public_call(node, fn_name, spec, reader)
        except (AttributeError, TypeError, ValueError):
            pass  # a signature we cannot read: fall back to the positional reading below
    positional = [a for a in spec.args if not a.keyword_only]
    values: list[tuple[ast.AST, Any]] = []
    if method:
        assert isinstance(node.func, ast.Attribute)
        values.append((node.func.value, None))
    values.extend((a, None) for a in node.args)
    call: Call = {}
    unresolved: list[str] = []
    by_name = {a.name: a for a in spec.args}
    aliases = {"input": positional[0].name if positional else "input"}
    if spec.varargs and len(values) > 0:
        # torch.einsum("ij,jk", a, b): the Python wrapper's *args feed the tensor list
        names = [a.name for a in positional]
        idx = names.index(spec.varargs)
        head_vals, rest = values[:idx], values[idx:]
        single_list = len(rest) == 1 and isinstance(rest[0][0], (ast.List, ast.Tuple))
        spread: list[tuple[ast.AST, Any]] = [rest[0]] if single_list else [
            (ast.List(elts=[r[0] for r in rest if isinstance(r[0], ast.expr)]), None)]
        values = head_vals + spread
    for (expr, _), a in zip(values, positional, strict=False):
        try:
            v = _to_value(reader.value(expr), a.kind, a.dtypes)
        except (ValueError, KeyError, IndexError, TypeError, SyntaxError):
            v = None
        if v is None:
            unresolved.append(a.name)
        else:
            call[a.name] = v
    for k in node.keywords:
        name = aliases.get(k.arg or "", k.arg or "")
        if name not in by_name:
            continue
        try:
            v = _to_value(reader.value(k.value), by_name[name].kind, by_name[name].dtypes)
        except (ValueError, KeyError, IndexError, TypeError, SyntaxError):
            v = None
        if v is None:
            unresolved.append(name)
        else:
            call[name] = v
    return SeedCall(call, node.lineno, ast.unparse(node), tuple(unresolved))


def _flat_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Module statements with the bodies of with/if/for/def/try inlined, in source order."""
    out: list[ast.stmt] = []
    for s in body:
        if isinstance(s, (ast.With, ast.If, ast.For, ast.While, ast.FunctionDef, ast.Try)):
            out.append(ast.Expr(value=ast.Constant(None)))  # placeholder keeps order simple
            out.extend(_flat_statements(list(s.body)))
            if isinstance(s, ast.Try):
                for h in s.handlers:
                    out.extend(_flat_statements(list(h.body)))
        else:
            out.append(s)
    return out
