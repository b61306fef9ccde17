"""The pipeline's layering: a module imports only modules above it (../shared/conventions.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "sftl"

# Top to bottom; a module may import from any module earlier in this list (or itself/its package).
ORDER = [
    "sftl",
    "sftl.model",
    "sftl.errors",
    "sftl.config",
    "sftl.github_json",
    "sftl.github_cache",
    "sftl.github",
    "sftl.browser",
    "sftl.store",
    "sftl.intake",
    "sftl.extract",
    "sftl.screen",
    "sftl.releases",
    "sftl.sources",
    "sftl.codegraph",
    "sftl.envs",
    "sftl.envs_build",
    "sftl._harness",
    "sftl._confine",
    "sftl.cgroups",
    "sftl.sandbox",
    "sftl.replay",
    "sftl.history",
    "sftl.history_io",
    "sftl.history_crawl",
    "sftl.localize",
    "sftl.fuzz",
    "sftl.nansearch",
    "sftl.evaluate",
    "sftl.evaluate_formats",
    "sftl.evaluate_ranker",
    "sftl.evaluate_function_ranker",
    "sftl.pipeline",
    "sftl.comment",
    "sftl.triage",
    "sftl.cli",
]


# Inside a package, the same rule over its submodules (the first name after the package; unlisted ones,
# e.g. a module an engineer is adding, are placed only by the package's row above). A package's
# __init__ is its facade: it may re-export any of its own submodules.
INNER = {
    "sftl.extract": ["text", "tracebacks", "snippets", "environment", "apis"],
    "sftl.screen": ["sections", "one_device", "rules", "documents", "keywords", "learned", "similar", "stage"],
    "sftl.sources": ["frameworks", "providers", "owners", "inventory", "wheels", "archive", "for_report"],
    "sftl.localize": ["nw", "pycode", "legacy", "mme", "gcrde", "baselines", "dispatch"],
    "sftl.localize.mme": ["evidence", "state", "foreign", "releases", "models", "classes", "attribute", "modules", "paper", "locate"],
    "sftl.localize.gcrde": ["pyresolve", "ops", "cues", "board", "index", "roles", "dtypes", "features", "follow", "paper",
                            "tensorflow", "pytorch"],
    "sftl.fuzz": ["_worker", "specs", "hints", "pairwise", "generate", "seed", "features", "execute", "validity"],
    "sftl.nansearch": ["unsafe_ops", "core", "soft_assertions", "torch_backend", "tf_backend", "runner", "search"],
}

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


def _imports(path: Path) -> list[str]:
    """Every sftl module a file imports, at module level or inside functions."""
    targets: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets.append(node.module)
    return [t for t in targets if t != "sftl" and t.startswith("sftl.")]


def _inner_rank(package: str, module: str) -> int | None:
    """Where `module` (inside `package`) stands in the package's own order; None when unlisted."""
    rest = module[len(package) + 1:].split(".")[0] if module.startswith(package + ".") else ""
    order = INNER.get(package, [])
    return order.index(rest) if rest in order else None


def test_every_module_is_placed_and_imports_only_upwards() -> None:
    problems = []
    for path in sorted(PKG.rglob("*.py")):
        mod = _module_name(path)
        own = _layer(mod)
        assert own >= 0, f"{mod} is not placed in tests/test_layers.py ORDER"
        for target in _imports(path):
            if _layer(target) > own:
                problems.append(f"{mod} imports {target} (a later stage)")
    assert not problems, "\n".join(problems)


def test_inside_each_package_modules_import_only_upwards() -> None:
    problems = []
    for path in sorted(PKG.rglob("*.py")):
        mod = _module_name(path)
        for package in INNER:
            if path.name == "__init__.py" and mod == package:
                continue  # the facade re-exports its submodules
            own = _inner_rank(package, mod)
            if own is None:
                continue
            for target in _imports(path):
                rank = _inner_rank(package, target)
                if rank is not None and rank > own:
                    problems.append(f"{mod} imports {target} (later inside {package}: {' -> '.join(INNER[package])})")
    assert not problems, "\n".join(problems)


def test_the_inner_orders_name_modules_that_exist() -> None:
    """An order naming a module that moved away checks nothing: keep INNER in step with the tree."""
    for package, names in INNER.items():
        folder = PKG.joinpath(*package.split(".")[1:])
        gone = [n for n in names if not (folder / f"{n}.py").exists() and not (folder / n / "__init__.py").exists()]
        assert not gone, f"{package}: {gone} in INNER but not in the tree"


@pytest.mark.parametrize("relative", ["_harness.py", "fuzz/_worker.py"])
def test_harness_is_stdlib_only(relative: str) -> None:
    """_harness.py and the fuzz worker run inside foreign environments: they import nothing of sftl or third parties."""
    path = PKG / relative
    assert path.exists(), path
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


def test_no_module_is_over_a_thousand_lines() -> None:
    """A module past 1,000 lines holds more than one responsibility: split it along its seam (as sftl/envs.py was)."""
    long = {p.relative_to(PKG.parent).as_posix(): n for p in PKG.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 1000}
    assert not long, long
