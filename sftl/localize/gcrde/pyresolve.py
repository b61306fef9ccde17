"""nn modules and functionals to the aten ops they call, read from the release's own Python sources.

`torch.nn.GroupNorm` -> its `forward` -> `F.group_norm(...)` -> `torch.group_norm(...)`: the class is
found in `torch/nn/modules/*.py` (its bases in the same file when it has no `forward` of its own), the
functional in `torch/nn/functional.py` (through `boolean_dispatch(if_true=..., if_false=...)`), and
the ops are the `torch._C._nn.x(`, `torch.x(`, `_VF.x(` and `torch.ops.aten.x` calls of the body.
Argument-dependent choices are kept to the branch the snippet takes: a call under `if mode == "bicubic"`
counts only when the snippet passes that mode (or passes none).
"""

from __future__ import annotations

import re
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sftl.sources import SourceProvider

FUNCTIONAL = "torch/nn/functional.py"
MODULES = "torch/nn/modules/"
_OP_CALL = re.compile(r"\b(?:torch\._C\._nn|torch\._C\._VariableFunctions|torch|_VF|torch\.ops\.aten)\.(\w+)\s*\(")
_F_CALL = re.compile(r"\b(?:F|functional|torch\.nn\.functional)\.(\w+)\s*\(")
_DOCSTRING = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'')
_INPUT_METHOD = re.compile(r"\binput\.(\w+)\s*\(")
_LOCAL_CALL = re.compile(r"(?<![\w.])(_\w+)\s*\(")
_DISPATCH = re.compile(r"boolean_dispatch\((?P<args>[^)]*)\)", re.S)
_NOT_OPS = frozenset(
    "jit _jit_internal overrides has_torch_function handle_torch_function is_tensor is_grad_enabled empty zeros "
    "ones tensor _assert device dtype Size finfo iinfo get_default_dtype is_autocast_enabled sym_int sym_float "
    "_C _overrides no_grad _check _check_value _infer_size _enum_to_reduction dim size numel contiguous view "
    "reshape new_empty new_zeros new_full to type is_floating_point is_complex unsqueeze squeeze expand "
    "floor ceil are_deterministic_algorithms_enabled arange linspace logspace eye full empty_like zeros_like "
    "ones_like".split()  # shape arithmetic, flags and helper tensors, not the op's kernel
)
_MEMO: weakref.WeakKeyDictionary[object, dict[str, str | None]] = weakref.WeakKeyDictionary()


def _read(source: SourceProvider, path: str) -> str | None:
    try:
        memo = _MEMO.setdefault(source, {})
    except TypeError:
        memo = {}
    if path not in memo:
        try:
            memo[path] = source.read_text(path)
        except Exception:  # noqa: BLE001 - an unreadable Python file only loses this hint
            memo[path] = None
    return memo[path]


def _block(text: str, header: re.Pattern[str]) -> str | None:
    """The indented body following the last line `header` matches (the implementation after `@overload` stubs)."""
    found = list(header.finditer(text))
    if not found:
        return None
    m = found[-1]
    start = text.find("\n", m.end())
    if start < 0:
        return ""
    indent = len(m.group(0)) - len(m.group(0).lstrip(" "))
    out = []
    for line in text[start + 1:].split("\n"):
        if line.strip() and len(line) - len(line.lstrip(" ")) <= indent and not line.lstrip().startswith((")", "#")):
            break
        out.append(line)
    return "\n".join(out)


def _branch(body: str, pos: int, mode: str | None) -> bool | None:
    """Whether the call at `pos` lies on the branch the snippet's `mode=` takes; None: under no mode condition."""
    if mode is None:
        return None
    line_start = body.rfind("\n", 0, pos) + 1
    indent = len(body[line_start:pos]) - len(body[line_start:pos].lstrip(" "))
    for line in reversed(body[:line_start].split("\n")):
        stripped = line.lstrip(" ")
        if not stripped:
            continue
        ind = len(line) - len(stripped)
        if ind < indent and stripped.startswith(("if ", "elif ", "else")):
            named = re.findall(r"""mode\s*(?:==|in)\s*[(\[]?\s*((?:['"][\w-]+['"]\s*,?\s*)+)""", stripped)
            if named:
                modes = set(re.findall(r"['\"]([\w-]+)['\"]", " ".join(named)))
                return mode in modes
            indent = ind
        elif ind < indent:
            indent = ind
        if ind == 0:
            break
    return None


def _branch_ok(body: str, pos: int, mode: str | None) -> bool:
    return _branch(body, pos, mode) is not False


def _functional_ops(name: str, text: str, mode: str | None, depth: int = 0) -> list[str]:
    if depth > 3:
        return []
    disp = re.search(rf"^{re.escape(name)}\s*=\s*boolean_dispatch\(", text, re.M)
    if disp:
        args = _DISPATCH.search(text, disp.start())
        targets = re.findall(r"if_(?:true|false)\s*=\s*(\w+)", args.group("args")) if args else []
        return [op for t in targets for op in _functional_ops(t, text, mode, depth + 1)]
    alias = re.search(rf"^{re.escape(name)}\s*=\s*_add_docstr\(\s*torch\.[\w.]*?(\w+)\s*,", text, re.M)
    if alias:  # avg_pool2d = _add_docstr(torch._C._nn.avg_pool2d, ...): the C function itself
        return [alias.group(1)]
    body = _block(text, re.compile(rf"^def {re.escape(name)}\(", re.M))
    if body is None:
        return []
    ops: list[str] = []
    body = _DOCSTRING.sub('""', body)  # the docstring's examples (>>> torch.randn(...)) are no calls
    for m in _INPUT_METHOD.finditer(body):  # input.log_softmax(dim): the Tensor method of that op
        if m.group(1) not in _NOT_OPS and _branch_ok(body, m.start(), mode):
            ops.append(m.group(1))
    for m in _OP_CALL.finditer(body):
        if m.group(1) not in _NOT_OPS and _branch_ok(body, m.start(), mode):
            ops.append(m.group(1))
    for m in _LOCAL_CALL.finditer(body):  # private helpers of functional.py (_max_pool2d, _pad)
        if m.group(1) != name and _branch_ok(body, m.start(), mode) and re.search(rf"^def {m.group(1)}\(", text, re.M):
            ops += _functional_ops(m.group(1), text, mode, depth + 1)
    for m in _F_CALL.finditer(body):
        if m.group(1) != name and _branch_ok(body, m.start(), mode):
            ops += _functional_ops(m.group(1), text, mode, depth + 1)
    matched = [m.group(1) for m in _OP_CALL.finditer(body) if _branch(body, m.start(), mode) is True
               and m.group(1) not in _NOT_OPS]
    if matched:  # the branch the mode takes returns: the calls outside every mode branch are not reached
        return list(dict.fromkeys(matched))
    return list(dict.fromkeys(ops))


def _module_ops(cls: str, source: SourceProvider, functional: str, mode: str | None) -> list[str]:
    for path in (p for p in source.list_files() if p.startswith(MODULES) and p.endswith(".py")):
        text = _read(source, path) or ""
        m = re.search(rf"^class {re.escape(cls)}\(([^)]*)\)", text, re.M)
        if m is None:
            continue
        chain = [cls] + [b.strip().split(".")[-1] for b in m.group(1).split(",") if b.strip()]
        for name in chain:  # the class itself, then its bases defined in the same file
            body = _block(text, re.compile(rf"^class {re.escape(name)}\(", re.M))
            forward = _block(body, re.compile(r"^\s+def forward\(", re.M)) if body else None
            if forward is None:
                continue
            forward = _DOCSTRING.sub('""', forward)
            for helper in re.findall(r"\bself\.(_\w+)\s*\(", forward):  # self._conv_forward(...)
                extra = _block(body or "", re.compile(rf"^\s+def {re.escape(helper)}\(", re.M))
                forward += "\n" + _DOCSTRING.sub('""', extra or "")
            ops: list[str] = []
            for c in _F_CALL.finditer(forward):
                ops += _functional_ops(c.group(1), functional, mode)
            ops += [c.group(1) for c in _OP_CALL.finditer(forward) if c.group(1) not in _NOT_OPS]
            if ops:
                return list(dict.fromkeys(ops))
        return []
    return []


def python_ops(api: str, source: SourceProvider | None, mode: str | None = None) -> tuple[str, ...]:
    """The aten ops `torch.nn.X` / `torch.nn.functional.x` calls in this release's Python sources ((): unknown)."""
    if source is None:
        return ()
    parts = api.replace("::", ".").split(".")
    if len(parts) < 3 or parts[0] != "torch" or parts[1] != "nn":
        return ()
    functional = _read(source, FUNCTIONAL)
    if not functional:
        return ()
    leaf = parts[-1]
    if parts[2] == "functional" and len(parts) == 4:
        return tuple(_functional_ops(leaf, functional, mode))
    if len(parts) == 3 and leaf[:1].isupper():
        return tuple(_module_ops(leaf, source, functional, mode))
    return ()
