"""The framework's models of Python types (dynamo's `ListVariable` for `list`): when a builtin-typed object lacks a name, the model may be at fault.

A tracer that stands in for Python's own objects (torch._dynamo's `*Variable` classes) reports
`'list' object has no attribute ...` for names a real list has, or when its model of the type does
not implement what the program asked. The model classes are found by name (a class whose name
holds the type's and ends in `Variable`) among the packages the traceback runs through.
"""

from __future__ import annotations

import builtins
import re
import types

from sftl.localize.mme.evidence import FrameEvidence, make_suspect
from sftl.localize.pycode import Code
from sftl.model import Suspect

# the runtime type behind each name an AttributeError prints for builtin objects
_TYPES: dict[str, type] = {
    "function": types.FunctionType,
    "method": types.MethodType,
    "builtin_function_or_method": types.BuiltinFunctionType,
    "module": types.ModuleType,
    "generator": types.GeneratorType,
    "NoneType": type(None),
}


def python_type(owner: str) -> type | None:
    found = _TYPES.get(owner) or getattr(builtins, owner, None)
    return found if isinstance(found, type) else None


def model_suspects(code: Code, ev: FrameEvidence, owner: str, name: str) -> list[Suspect]:
    """Files defining the framework's model of Python's `owner` type, under the packages on the traceback."""
    if not ev.framework_frames:
        return []
    word = {"NoneType": "None", "builtin_function_or_method": "Builtin"}.get(owner, owner)
    stem = word[:1].upper() + word[1:]
    if len(stem) < 3:
        return []
    # packages the traceback runs through, two levels deep (torch/_dynamo, torch/_inductor)
    packages = {"/".join(p.split("/")[:2]) + "/" for _, _, p in ev.framework_frames if p.count("/") >= 2}
    pattern = rf"^class\s+(\w*{re.escape(stem)}\w*Variable)\b"
    files = [p for p in code.grep(pattern) if any(p.startswith(pkg) for pkg in packages)]
    if not files:
        return []
    real = python_type(owner)
    has = real is not None and hasattr(real, name)
    out = []
    for rank, path in enumerate(files[:3]):
        classes = [c for c in code.classes(path) if re.fullmatch(rf"\w*{re.escape(stem)}\w*Variable", c)]
        what = ", ".join(classes[:3]) or "its classes"
        if has:
            why = f"Python's {owner} has {name}, so the object was the framework's model of a {owner} ({what} in {path}), which lacks it"
            score = 0.7
        else:
            why = f"{path} models Python's {owner} ({what}) for the traced program; its model may need {name}"
            score = 0.3
        out.append(make_suspect(path, score / (1 + 0.3 * rank), why))
    return out
