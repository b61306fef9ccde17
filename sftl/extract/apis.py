"""The framework calls a report makes: from the snippet's parse tree (imports, aliases, tensor methods, operators), else by pattern."""

from __future__ import annotations

import ast
import re

_ROOTS = {"torch": "torch", "tensorflow": "tensorflow", "tf": "tensorflow", "keras": "keras", "torchvision": "torchvision",
          "torchaudio": "torchaudio", "tf_keras": "tf_keras"}


_NOT_TENSOR_FUNCS = {"device", "no_grad", "enable_grad", "manual_seed", "set_seed", "Session", "GradientTape", "function",
                     "compile", "jit", "load", "save", "set_printoptions", "set_default_dtype", "use_deterministic_algorithms",
                     "name_scope", "variable_scope", "get_logger", "autocast", "profile", "set_grad_enabled"}
_NOT_TENSOR_METHODS = {"numpy", "tolist", "item", "size", "dim", "shape", "numel", "data_ptr", "__len__", "keys", "items",
                       "values", "run", "fit", "compile", "predict", "evaluate", "summary", "save", "load_state_dict",
                       "state_dict", "parameters", "named_parameters", "train", "eval", "zero_grad", "step", "backward_hook"}


def extract_apis(code: str, framework: str | None = None) -> tuple[str, ...]:
    """Framework calls, resolved through imports and aliases, fully qualified, in order, deduplicated.

    Method calls on values known to be tensors (results of framework functions, their methods,
    arithmetic and indexing) are reported as `torch.Tensor.<name>` / `tensorflow.Tensor.<name>`.
    """
    if not code:
        return ()
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return apis_regex(code)
    try:
        return _apis_of_tree(tree, framework)
    except RecursionError:  # parsed, but nested deeper than the walk's stack (`x >> x >> ...` x1000): by pattern
        return apis_regex(code)


def _apis_of_tree(tree: ast.Module, framework: str | None) -> tuple[str, ...]:
    """`extract_apis` over a parsed snippet (recursive: deep nesting raises RecursionError)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                if top in _ROOTS:
                    if a.asname:
                        aliases[a.asname] = a.name
                    else:
                        aliases[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            top = node.module.split(".")[0]
            if top in _ROOTS:
                for a in node.names:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    uses_tf = any(v.startswith(("tensorflow", "keras")) for v in aliases.values())
    uses_torch = any(v.startswith("torch") for v in aliases.values())
    if not aliases:  # a snippet without imports: the usual short names still mean the framework
        aliases = {"torch": "torch", "tf": "tensorflow", "F": "torch.nn.functional", "nn": "torch.nn"}
        if framework == "tensorflow":
            aliases = {"tf": "tensorflow", "keras": "keras"}
        elif framework == "pytorch":
            aliases = {"torch": "torch", "F": "torch.nn.functional", "nn": "torch.nn"}
    tf_tensors = uses_tf and not uses_torch or (not uses_torch and framework == "tensorflow")
    tensor_cls = "tensorflow.Tensor" if tf_tensors else "torch.Tensor"
    operator_ops = _OPERATOR_DUNDERS if tf_tensors else _OPERATOR_OPS

    def qualified(func: ast.AST) -> str | None:
        dotted = _dotted(func)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        if head in aliases:
            return aliases[head] + ("." + rest if rest else "")
        return None

    tensors: set[str] = set()
    instances: dict[str, str] = {}  # name -> the framework class it was made from

    def is_tensor(node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in tensors
        if isinstance(node, ast.Call):
            q = qualified(node.func)
            if q is not None:
                last = q.rsplit(".", 1)[-1]
                return bool(last[:1].islower()) and last not in _NOT_TENSOR_FUNCS
            if isinstance(node.func, ast.Attribute):
                return node.func.attr not in _NOT_TENSOR_METHODS and is_tensor(node.func.value)
            return False
        if isinstance(node, ast.BinOp):
            return is_tensor(node.left) or is_tensor(node.right)
        if isinstance(node, ast.UnaryOp):
            return is_tensor(node.operand)
        if isinstance(node, ast.Compare):  # a mask: `m = x > 0; ~m` (`x is None`, `a in b` are plain bools)
            return not any(isinstance(o, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for o in node.ops) and (
                is_tensor(node.left) or any(is_tensor(c) for c in node.comparators))
        if isinstance(node, ast.Subscript):
            return is_tensor(node.value)
        if isinstance(node, ast.Attribute):
            return node.attr in ("T", "mT", "H", "real", "imag", "grad", "data") and is_tensor(node.value)
        return False

    def bind(target: ast.AST, tensor: bool) -> None:
        if isinstance(target, ast.Name):
            (tensors.add if tensor else tensors.discard)(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                bind(t, tensor)

    out: list[str] = []
    seen: set[str] = set()

    def add(name: str) -> None:
        name = name.replace("tensorflow.compat.v1.", "tensorflow.").replace("tensorflow._api.v2.", "tensorflow.")
        if name not in seen:
            seen.add(name)
            out.append(name)

    # statements in source order, so that a name is known to be a tensor before it is used
    for stmt in sorted((n for n in ast.walk(tree) if isinstance(n, ast.stmt)), key=lambda n: (n.lineno, n.col_offset)):
        calls: list[ast.Call] = []
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.stmt):
                continue
            calls.extend(n for n in ast.walk(child) if isinstance(n, ast.Call))
        if isinstance(stmt, ast.For):
            bind(stmt.target, is_tensor(stmt.iter))
        calls.sort(key=lambda n: (n.lineno, n.col_offset))
        for call in calls:
            q = qualified(call.func)
            if q is not None:
                add(q)
            elif isinstance(call.func, ast.Attribute) and is_tensor(call.func.value):
                meth = call.func.attr
                if not meth.startswith("_"):
                    add(f"{tensor_cls}.{meth}")
            elif (isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
                  and call.func.value.id in instances and not call.func.attr.startswith("_")):
                # normal = torch.distributions.Normal(0, 1); normal.icdf(x) -> torch.distributions.Normal.icdf
                add(f"{instances[call.func.value.id]}.{call.func.attr}")
        # operator syntax on tensors (`x >> 1`, `a @ b`) is a call of the operator's op too; plain
        # + - * / are left out: nearly every snippet has them and they would drown the op at fault
        for node in sorted((n for child in ast.iter_child_nodes(stmt) if not isinstance(child, ast.stmt)
                            for n in ast.walk(child) if isinstance(n, (ast.BinOp, ast.UnaryOp))),
                           key=lambda n: (n.lineno, n.col_offset)):
            op = operator_ops.get(type(node.op))
            operands = (node.left, node.right) if isinstance(node, ast.BinOp) else (node.operand,)
            if isinstance(node.op, ast.Mod) and isinstance(operands[0], (ast.Constant, ast.JoinedStr)):
                continue  # "loss: %f" % x is string formatting, not remainder
            if op and any(is_tensor(x) for x in operands):
                add(f"{tensor_cls}.{op}")
        # advanced indexing (`x[mask]`, `x[idx] = v`): a tensor index runs the index / index_put kernels;
        # plain slices (`x[:, 1]`) are views and name no kernel
        if not tf_tensors:
            for node in sorted((n for child in ast.iter_child_nodes(stmt) if not isinstance(child, ast.stmt)
                                for n in ast.walk(child) if isinstance(n, ast.Subscript)),
                               key=lambda n: (n.lineno, n.col_offset)):
                index = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
                if is_tensor(node.value) and any(is_tensor(i) or isinstance(i, ast.List) for i in index):
                    store = isinstance(node.ctx, ast.Store)
                    add(f"{tensor_cls}.{'__setitem__' if store else '__getitem__'}")
        if isinstance(stmt, ast.AugAssign) and operator_ops.get(type(stmt.op)) and (
                is_tensor(stmt.target) or is_tensor(stmt.value)):
            add(f"{tensor_cls}.{operator_ops[type(stmt.op)]}")
        if isinstance(stmt, ast.Assign):
            t = is_tensor(stmt.value)
            made = qualified(stmt.value.func) if isinstance(stmt.value, ast.Call) else None
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    if made and made.rsplit(".", 1)[-1][:1].isupper():
                        instances[target.id] = made  # an object of a framework class
                    else:
                        instances.pop(target.id, None)
            for target in stmt.targets:
                bind(target, t or (isinstance(target, (ast.Tuple, ast.List)) and isinstance(stmt.value, ast.Call)
                                   and qualified(stmt.value.func) is not None))
        elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)) and stmt.value is not None:
            bind(stmt.target, is_tensor(stmt.value) or is_tensor(stmt.target))
    return tuple(out)


# Python operators -> the framework op they call (native_functions.yaml names for PyTorch)
_OPERATOR_OPS: dict[type, str] = {
    ast.RShift: "__rshift__", ast.LShift: "__lshift__", ast.BitAnd: "__and__", ast.BitOr: "__or__",
    ast.BitXor: "__xor__", ast.MatMult: "matmul", ast.FloorDiv: "floor_divide", ast.Mod: "remainder",
    ast.Pow: "pow", ast.Invert: "bitwise_not",
}
_OPERATOR_DUNDERS: dict[type, str] = {  # TensorFlow: the tf.Tensor method; its localizer maps it to the raw op
    **_OPERATOR_OPS, ast.MatMult: "__matmul__", ast.FloorDiv: "__floordiv__", ast.Mod: "__mod__",
    ast.Pow: "__pow__", ast.Invert: "__invert__",
}


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


_API_RE = re.compile(r"(?<![\w.])(torch|tf|tensorflow|keras|F)\.((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)(?=\s*\(|`)")


# C++ reports (extensions, libtorch): at::histc(...), torch::arange(...), at::native::foo(...)
_CXX_API_RE = re.compile(r"\b(?:at|torch)::(?:native::)?([a-z_][a-z0-9_]*)\s*\(")
# an operator's method named in prose or C++ (`x.__rshift__(n)`, "ATen __rshift__() on cuda")
_OPERATOR_DUNDER_RE = re.compile(
    r"(?<![\w])\.?(__(?:i|r)?(?:add|sub|mul|truediv|div|floordiv|mod|pow|matmul|and|or|xor|lshift|rshift|invert|neg|abs)__)"
    r"\s*\(")


def apis_regex(text: str, framework: str | None = None) -> tuple[str, ...]:
    out: list[str] = []
    roots = {"tf": "tensorflow", "F": "torch.nn.functional"}
    found = [(m.start(), f"{roots.get(m.group(1), m.group(1))}.{m.group(2)}") for m in _API_RE.finditer(text)]
    if framework != "tensorflow":
        found += [(m.start(), f"torch.{m.group(1)}") for m in _CXX_API_RE.finditer(text)]
    tensor = "tensorflow.Tensor" if framework == "tensorflow" else "torch.Tensor"
    found += [(m.start(), f"{tensor}.{m.group(1)}") for m in _OPERATOR_DUNDER_RE.finditer(text)]
    for _, name in sorted(found):
        if name not in out:
            out.append(name)
    return tuple(out)
