"""A name used by another module is public: no file imports, or reaches through a module for, another sftl module's
private name (../shared/conventions.md, rule 10)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


# Crossings left on purpose, each with who removes it; the test fails too when one of them is gone (drop it here).
PENDING: set[str] = set()


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_module(dotted: str) -> bool:
    """Whether `dotted` names an sftl module or package (not a name defined inside one)."""
    folder = ROOT.joinpath(*dotted.split("."))
    return folder.with_suffix(".py").is_file() or (folder / "__init__.py").is_file()


def _crossings(source: str, own: str) -> list[str]:
    """Each private name of another sftl module that module `own` imports or reads through an imported module."""
    found: list[str] = []
    modules: dict[str, str] = {}  # a local name bound to an sftl module -> that module
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not alias.name.startswith("sftl."):
                    continue
                if any(_private(part) for part in alias.name.split(".")):
                    found.append(f"import {alias.name}")
                if alias.asname:
                    modules[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module != "sftl" and not node.module.startswith("sftl."):
                continue
            if any(_private(part) for part in node.module.split(".")) and node.module != own:
                found.append(f"from {node.module} import ...")
            for alias in node.names:
                target = f"{node.module}.{alias.name}"
                if _is_module(target):
                    modules[alias.asname or alias.name] = target
                if _private(alias.name) and node.module != own:
                    found.append(f"{node.module}.{alias.name}")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _private(node.attr):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in modules:  # `nat._x`
            module = modules[node.value.id]
        else:  # `sftl.model._x` after `import sftl.model`
            module = ast.unparse(node.value)
            if not module.startswith("sftl.") or not _is_module(module):
                continue
        if module != own:
            found.append(f"{module}.{node.attr}")
    return found


def crossings() -> list[str]:
    """`file: module.name` for every private name that crosses a module in sftl, tests and bench."""
    out: list[str] = []
    for folder in ("sftl", "tests", "bench"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            names = set(_crossings(path.read_text(encoding="utf-8"), _module_name(path)))
            out += [f"{path.relative_to(ROOT).as_posix()}: {name}" for name in sorted(names)]
    return out


def test_no_private_name_crosses_a_module() -> None:
    found = crossings()
    new = [x for x in found if x not in PENDING]
    assert not new, f"{len(new)} private names used by another module (make them public):\n" + "\n".join(new)
    gone = sorted(PENDING - set(found))
    assert not gone, f"no longer crossing, take them out of PENDING: {gone}"


def test_the_check_sees_each_way_of_reaching_a_private_name() -> None:
    """The reader itself: a from-import (parenthesised too), a private module, an attribute read through an
    imported module; a module's own names, dunders and private aliases of public names are no crossings."""
    source = (
        "from sftl.localize.gcrde.board import (\n    Board,\n    _Hidden,\n)\n"
        "from sftl.localize import dispatch as d\n"
        "from sftl.fuzz import _worker\n"
        "import sftl.model as m\n"
        "import sftl.config\n"
        "from sftl.extract import extract as _extract\n"
        "from sftl.localize.nw import _own\n"
        "x = d._hidden, m._other, m.__doc__, sftl.config._dotted\n"
    )
    assert sorted(_crossings(source, "sftl.localize.nw")) == [
        "sftl.config._dotted", "sftl.fuzz._worker", "sftl.localize.dispatch._hidden", "sftl.localize.gcrde.board._Hidden",
        "sftl.model._other",
    ]
