"""The pipeline's layering: a module imports only modules above it (../shared/conventions.md)."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "sftl"

# Top to bottom; a module may import from any module earlier in this list (or itself/its package).
ORDER = [
    "sftl",
    "sftl.model",
    "sftl.errors",
    "sftl.config",
    "sftl.github",
    "sftl.browser",
    "sftl.store",
    "sftl.intake",
    "sftl.extract",
    "sftl.screen",
    "sftl.releases",
    "sftl.sources",
    "sftl.envs",
    "sftl._harness",
    "sftl.sandbox",
    "sftl.replay",
    "sftl.localize",
    "sftl.fuzz",
    "sftl.nansearch",
    "sftl.evaluate",
    "sftl.history",
    "sftl.history_io",
    "sftl.history_crawl",
    "sftl.pipeline",
    "sftl.triage",
    "sftl.cli",
]


def _layer(module: str) -> int:
    best = -1
    for i, name in enumerate(ORDER):
        if module == name or module.startswith(name + "."):
            best = i
    return best


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def test_every_module_is_placed_and_imports_only_upwards() -> None:
    problems = []
    for path in sorted(PKG.rglob("*.py")):
        mod = _module_name(path)
        own = _layer(mod)
        assert own >= 0, f"{mod} is not placed in tests/test_layers.py ORDER"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module]
            for target in targets:
                if target == "sftl" or not target.startswith("sftl"):
                    continue
                if _layer(target) > own:
                    problems.append(f"{mod} imports {target} (a later stage)")
    assert not problems, "\n".join(problems)


def test_harness_is_stdlib_only() -> None:
    """_harness.py runs inside foreign environments: it may import nothing of sftl or third parties."""
    path = PKG / "_harness.py"
    if not path.exists():
        return
    tree = ast.parse(path.read_text(encoding="utf-8"))
    import sys

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module.split(".")[0]]
        else:
            continue
        for name in names:
            # torch / tensorflow are imported lazily by the harness, inside the target environment
            assert name in sys.stdlib_module_names or name in {"torch", "tensorflow", "numpy"}, name


def test_an_internal_error_is_one_line_not_a_traceback(tmp_path, monkeypatch) -> None:
    """A bug inside a handler still reaches the user as one line and exit 1; --debug shows the traceback."""
    import io

    import pytest

    from sftl import cli
    from sftl.cli import triage as triage_cli

    def broken(args, ctx):
        raise ZeroDivisionError("division by zero in a handler")

    monkeypatch.setattr(triage_cli, "run_triage", broken)
    err = io.StringIO()
    assert cli.main(["triage", "a/b", "--home", str(tmp_path)], out=io.StringIO(), err=err) == 1
    assert err.getvalue() == (
        "sftl: internal error: ZeroDivisionError: division by zero in a handler (rerun with --debug for the traceback)\n"
    )
    with pytest.raises(ZeroDivisionError):
        cli.main(["triage", "a/b", "--debug", "--home", str(tmp_path)], out=io.StringIO(), err=io.StringIO())
