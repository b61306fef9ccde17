"""The README's Structure table and exit codes agree with the modules' docstrings and sftl/errors.py (`make readme` rewrites them)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_sections", ROOT / "tools" / "readme_sections.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("readme_sections", module)
    spec.loader.exec_module(module)
    return module


def test_every_module_has_a_one_sentence_docstring() -> None:
    tool = _tool()
    missing = [p.relative_to(ROOT).as_posix() for p in tool.modules() if not tool.responsibility(p)]
    assert not missing, f"modules without a docstring: {missing}"


def test_the_structure_table_is_the_modules_docstrings() -> None:
    tool = _tool()
    shown = tool.entries(tool.current((ROOT / "README.md").read_text(encoding="utf-8"))["structure"])
    wanted = {p.relative_to(ROOT).as_posix(): tool.responsibility(p).replace("|", "\\|") for p in tool.modules()}
    problems = [f"{m}: not in README.md's Structure table" for m in wanted if m not in shown]
    problems += [f"{m}: listed in README.md but no such module" for m in shown if m not in wanted]
    problems += [f"{m}: README says {shown[m]!r}, its docstring {wanted[m]!r}" for m in wanted
                 if m in shown and shown[m] != wanted[m]]
    assert not problems, "run `make readme` (tools/readme_sections.py --write):\n" + "\n".join(problems)


def test_the_exit_codes_are_those_of_errors_py() -> None:
    tool = _tool()
    readme = tool.current((ROOT / "README.md").read_text(encoding="utf-8"))["exit-codes"]
    assert readme == tool.exit_codes(), "README.md's exit codes differ from sftl/errors.py's docstring: run `make readme`"


def test_a_changed_docstring_is_caught(tmp_path: Path) -> None:
    """The check compares text: a row that no longer says what the module says fails it."""
    tool = _tool()
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = tool.current(text)["structure"]
    row = next(line for line in table.split("\n")[2:] if "<br>" in line)  # a package's row
    edited = text.replace(row, row.replace("<br>`", "<br>`x", 1), 1)  # a member renamed
    assert tool.entries(tool.current(edited)["structure"]) != tool.entries(tool.structure())
    assert tool.current(tool.render(edited)) == tool.expected()


def test_the_readme_stays_a_ten_minute_read() -> None:
    """At most 300 lines: detail belongs in docs/ (docs/commands.md holds every command in full)."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 300, f"README.md has {lines} lines; move detail to docs/ and link it"
