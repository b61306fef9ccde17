"""Instance state a class hierarchy promises but an object never got: an override that skips the base's setter, an unpickled object without a default.

The name *is* defined in the owner's hierarchy (a base's method assigns `self.<name>`), so no
definition is missing; the object still lacks it when

* a class between the owner and that base overrides the assigning method (`__init__`, `step`)
  without calling the base's, so the assignment never runs for the owner's objects; or
* the object was unpickled (`torch.load`, `pickle`, `load_state_dict`, `copy.deepcopy`), which skips `__init__`,
  and no `__setstate__` in the hierarchy gives the name a default (an object saved by an older
  release, before the attribute existed).
"""

from __future__ import annotations

import ast
import re

from sftl.localize.pycode import ClassRef, Code, dotted

_UNPICKLED_RE = re.compile(
    # `checkpoint` alone is no evidence: torch.utils.checkpoint recomputes activations, it unpickles nothing
    r"\btorch\.load\b|\b(?:c?pickle|cloudpickle|dill)\.loads?\b|\bjoblib\.load\b|__setstate__|\bload_state_dict\b"
    r"|\bunpickl|\bdeepcopy\b",
    re.I,
)


def _methods(cls: ClassRef) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {n.name: n for n in cls.node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _assigns_self(node: ast.AST, name: str) -> bool:
    for sub in ast.walk(node):
        targets: list[ast.expr] = []
        if isinstance(sub, ast.Assign):
            targets = sub.targets
        elif isinstance(sub, (ast.AnnAssign, ast.AugAssign)):
            targets = [sub.target]
        for t in targets:
            for leaf in ast.walk(t):
                if isinstance(leaf, ast.Attribute) and leaf.attr == name and isinstance(leaf.value, ast.Name) and leaf.value.id == "self":
                    return True
        if isinstance(sub, ast.Call):
            fname = dotted(sub.func) or ""
            if fname.endswith(("setattr", "__setattr__", "__dict__.update", "__dict__.setdefault")):
                if any(isinstance(a, ast.Constant) and a.value == name for a in sub.args):
                    return True
    return False


def _calls_base(node: ast.FunctionDef | ast.AsyncFunctionDef, method: str, bases: set[str]) -> bool:
    """Does the method call the overridden one: `super().m(...)`, `super(X, self).m(...)`, `Base.m(self, ...)`?"""
    for sub in ast.walk(node):
        if not (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == method):
            continue
        recv = sub.func.value
        if isinstance(recv, ast.Call) and isinstance(recv.func, ast.Name) and recv.func.id == "super":
            return True
        if (dotted(recv) or "").rsplit(".", 1)[-1] in bases:
            return True
    return False


def skipped_setter(code: Code, mro: list[ClassRef], definer: ClassRef, name: str) -> tuple[ClassRef, str] | None:
    """A class between the owner and `definer` overriding the method that sets `self.<name>` without calling it."""
    if name in code.members(definer, class_level=True) or definer not in mro:
        return None  # a class-level binding every object sees
    setters = [m for m, node in _methods(definer).items() if _assigns_self(node, name)]
    below = mro[: mro.index(definer)]
    bases = {k.name for k in mro}
    for k in below:
        own = _methods(k)
        for m in setters:
            node = own.get(m)
            if node is not None and not _calls_base(node, m, bases) and not _assigns_self(node, name):
                return k, (
                    f"{k.name}.{m} ({k.path}) overrides {definer.name}.{m}, which sets self.{name}, without calling it: "
                    f"{k.name} objects never get {name}"
                )
    return None


def unpickled_without_default(
    code: Code, mro: list[ClassRef], definer: ClassRef, name: str, report_text: str
) -> tuple[ClassRef, str] | None:
    """An object restored by unpickling (which skips `__init__`) with no `__setstate__` default for `name`."""
    if not _UNPICKLED_RE.search(report_text):
        return None
    init = _methods(definer).get("__init__")
    if init is None or not _assigns_self(init, name):
        return None
    for k in mro:
        setstate = _methods(k).get("__setstate__")
        if setstate is None:
            continue
        text = ast.unparse(setstate)
        if re.search(rf"['\"]{re.escape(name)}['\"]|\bself\.{re.escape(name)}\b", text):
            return None  # it gives the name a default
        return k, (
            f"the object was restored by unpickling, which skips __init__ (where {definer.name} sets self.{name}); "
            f"{k.name}.__setstate__ ({k.path}) gives {name} no default, so objects saved by an older release lack it"
        )
    return definer, (
        f"the object was restored by unpickling, which skips __init__ (where {definer.name} sets self.{name}), "
        f"and no class in its hierarchy defines __setstate__ to give {name} a default for objects saved by an older release"
    )
