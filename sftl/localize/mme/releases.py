"""The missing name across releases: was it on its owner in the cached release before the report's, and in the one after?

A name the owner had in the release before and lost in the report's is a regression in the owner
(an injected deletion looks the same). A name that no release defines, or that moved elsewhere
(renamed, or now bound by another module), was never the owner's to lose: the code that still
refers to it is the fault. The neighbours are the cached wheels next to the report's own (the
`<framework>-<version>/` folders of the wheel cache); sources that are no cached wheel have none,
unless they name their wheel cache (`release_wheels`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from sftl.errors import SftlError
from sftl.localize.pycode import ClassRef, Code
from sftl.releases import version_key
from sftl.sources import LayeredSource, PythonFilesOf, SourceProvider, WheelSource


def _wheels_of(source: SourceProvider) -> list[Path]:
    """The wheel files a provider reads (itself, its layers, the providers its views wrap)."""
    out: list[Path] = []
    stack: list[object] = [source]
    while stack:
        cur = stack.pop()
        if isinstance(cur, WheelSource):
            out.append(cur.wheel)
        elif isinstance(cur, PythonFilesOf):
            stack.append(cur.provider)
        elif isinstance(cur, LayeredSource):
            stack.extend(cur.providers)
    return out


@dataclass
class Neighbours:
    """The cached releases just before and just after the report's, read lazily."""

    version: str | None
    before: SourceProvider | None = None
    after: SourceProvider | None = None
    _codes: dict[int, Code] = field(default_factory=dict)

    def code(self, provider: SourceProvider) -> Code:
        if id(provider) not in self._codes:
            self._codes[id(provider)] = Code(provider)
        return self._codes[id(provider)]

    def class_members(self, provider: SourceProvider | None, path: str, owner: str) -> dict[str, str] | None:
        """What class `owner` (at `path`, else wherever that release defines it) binds in its hierarchy there,
        each name with its definition's shape (a method's body, an assigned value); None when that release
        has no such class (or no such release is cached)."""
        if provider is None:
            return None
        code = self.code(provider)
        node = code.classes(path).get(owner)
        if node is None:
            hits = [p for p in code.grep(rf"^\s*class\s+{owner}\b") if owner in code.classes(p)]
            if not hits:
                return None
            path, node = hits[0], code.classes(hits[0])[owner]
        return definitions(code, ClassRef(path, node))

    def module_binds(self, provider: SourceProvider | None, module: str, name: str) -> bool | None:
        """Does `module` bind `name` (or hold a submodule of that name) there? None when it has no such module."""
        if provider is None:
            return None
        code = self.code(provider)
        path = code.module_path(module)
        if path is None:
            return None
        return name in code.module_names(path) or code.module_path(f"{module}.{name}") is not None


def neighbours(source: SourceProvider) -> Neighbours:
    """The cached wheels of the releases next to the source's (none when it reads no cached wheel)."""
    version = getattr(source, "era_release", None) or source.version
    found = Neighbours(version)
    wheels = _wheels_of(source)
    # <cache>/sources/wheels/<framework>-<version>/<file>.whl; a provider that is no wheel (an installed
    # release with a fault injected) may name the wheel cache it belongs with as `release_wheels`
    root = wheels[0].parent.parent if wheels else getattr(source, "release_wheels", None)
    if not isinstance(root, Path) or not version:
        return found
    own = version_key(version)
    releases: list[tuple[tuple[int, ...], Path]] = []
    for folder in root.glob(f"{source.framework}-*"):
        if folder.name.endswith(".partial") or not folder.is_dir():
            continue
        wheel = next(iter(sorted(folder.glob("*.whl"))), None)
        if wheel is not None:
            releases.append((version_key(folder.name.partition("-")[2]), wheel))
    earlier = [r for r in releases if r[0] < own]
    later = [r for r in releases if r[0] > own]
    for attr, pick in (("before", max(earlier) if earlier else None), ("after", min(later) if later else None)):
        if pick is None:
            continue
        try:
            setattr(found, attr, WheelSource(pick[1], source.framework, pick[1].parent.name.partition("-")[2]))
        except SftlError:
            pass  # an unreadable neighbour only loses that evidence
    return found


def definitions(code: Code, cls: ClassRef) -> dict[str, str]:
    """Every name the class's hierarchy binds, with the shape of its first definition (most specific class first):
    a method's body, or the value assigned (`self.x = False`, `x = 1`); `""` where the shape is unknown."""
    out: dict[str, str] = {}
    mro, _ = code.mro(cls)
    for k in mro:
        for name in code.members(k):
            out.setdefault(name, "")
        for node in ast.walk(k.node):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node in k.node.body:
                if not out.get(node.name):
                    out[node.name] = ast.dump(ast.Module(body=node.body, type_ignores=[]))
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    target = t.attr if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self" else (
                        t.id if isinstance(t, ast.Name) and node in k.node.body else None
                    )
                    if target and not out.get(target):
                        out[target] = ast.dump(node.value)
    return out


def release_name(provider: SourceProvider | None) -> str:
    return (provider.version or "?") if provider is not None else "?"


def attribute_history(
    nb: Neighbours, code: Code, cls: ClassRef, name: str, similar: str | None
) -> tuple[str, str] | None:
    """How `cls`'s hierarchy came to lack `name`: ("removed" | "renamed" | "never" | "added", why in words).

    `similar`: a member the class has now that may be the name's new spelling (the interpreter's
    suggestion, or the most similar member); it counts as a rename when the release before had
    `name` and not it."""
    before = nb.class_members(nb.before, cls.path, cls.name)
    after = nb.class_members(nb.after, cls.path, cls.name)
    if before is None and after is None:
        return None
    b, a = release_name(nb.before), release_name(nb.after)
    if before is not None and name in before:
        now = definitions(code, cls)
        # a rename keeps the definition: the same body or value under the new name
        if similar and similar not in before and before[name] and now.get(similar) == before[name]:
            return "renamed", f"{cls.name} had {name} (not {similar}) in {b} and defines the same as {similar} (not {name}) in {nb.version}: renamed"
        return "removed", f"{cls.name} had {name} in {b} and lost it in {nb.version}: a regression in {cls.name}"
    if after is not None and name in after:
        return "added", f"{cls.name} gains {name} only in {a}: it is not {nb.version}'s"
    seen = ", ".join(r for r, m in ((b, before), (nb.version or "?", True), (a, after)) if m is not None)
    return "never", f"no release read ({seen}) defines {cls.name}.{name} ({cls.path})"


def module_history(nb: Neighbours, module: str, name: str) -> tuple[str, str] | None:
    """How `module` came to lack `name`: ("removed" | "never" | "added", why in words), None without neighbours."""
    before = nb.module_binds(nb.before, module, name)
    after = nb.module_binds(nb.after, module, name)
    if before is None and after is None:
        return None
    b, a = release_name(nb.before), release_name(nb.after)
    if before:
        return "removed", f"{module} bound {name} in {b} and does not in {nb.version}"
    if after:
        return "added", f"{module} binds {name} only from {a} on"
    seen = ", ".join(r for r, m in ((b, before), (nb.version or "?", True), (a, after)) if m is not None)
    return "never", f"no release read ({seen}) binds {module}.{name}"
