"""The README's generated sections -- Structure (each module's docstring) and Exit codes (sftl/errors.py) -- printed, checked or written.

    python tools/readme_sections.py            # print the expected sections
    python tools/readme_sections.py --check    # exit 1 when README.md disagrees (what tests/test_structure_doc.py asserts)
    python tools/readme_sections.py --write    # rewrite them in README.md (`make readme`)
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "sftl"
README = ROOT / "README.md"
SECTIONS = ("structure", "exit-codes")


def docstring(path: Path) -> str:
    """A module's docstring ("" when it has none)."""
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def responsibility(path: Path) -> str:
    """A module's one-sentence responsibility: the first paragraph of its docstring, on one line."""
    first = docstring(path).strip().split("\n\n", 1)[0]
    return " ".join(line.strip() for line in first.split("\n"))


def modules() -> list[Path]:
    """Every module of the sftl package, in path order (packages' __init__ first)."""
    return sorted(PKG.rglob("*.py"), key=lambda p: p.relative_to(ROOT).with_suffix("").parts)


def _cell(text: str) -> str:
    return text.replace("|", "\\|") or "(no docstring)"


def structure() -> str:
    """One row per top-level module, one per package: its docstring, then each module's (`name.py`: ...)."""
    rows = ["| module | responsibility |", "|---|---|"]
    packages: dict[Path, list[Path]] = {}
    for path in modules():
        if path.name == "__init__.py" and path.parent != PKG:
            packages[path.parent] = []
        elif path.parent in packages:
            packages[path.parent].append(path)
    for path in modules():
        if path.parent in packages and path.name != "__init__.py":
            continue
        if path.name == "__init__.py" and path.parent in packages:
            parts = [_cell(responsibility(path))]
            parts += [f"`{m.name}`: {_cell(responsibility(m))}" for m in packages[path.parent]]
            rows.append(f"| `{path.parent.relative_to(ROOT).as_posix()}/` | {'<br>'.join(parts)} |")
        else:
            rows.append(f"| `{path.relative_to(ROOT).as_posix()}` | {_cell(responsibility(path))} |")
    return "\n".join(rows)


def entries(table: str) -> dict[str, str]:
    """A Structure table read back: module path -> the sentence shown for it."""
    out: dict[str, str] = {}
    for line in table.split("\n")[2:]:
        cells = line.strip().strip("|").split(" | ", 1)
        if len(cells) != 2:
            continue
        where, text = cells[0].strip().strip("`"), cells[1].strip()
        if not where.endswith("/"):
            out[where] = text
            continue
        head, *members = text.split("<br>")
        out[where + "__init__.py"] = head
        for member in members:
            name, _, sentence = member.partition(": ")
            out[where + name.strip("`")] = sentence
    return out


def exit_codes() -> str:
    """The exit-code table of sftl/errors.py's docstring: what follows its "Exit codes" line (else all but line one)."""
    import textwrap

    lines = docstring(PKG / "errors.py").split("\n")
    start = next((i + 1 for i, line in enumerate(lines) if line.startswith("Exit codes")), 1)
    return "```text\n" + textwrap.dedent("\n".join(lines[start:])).strip("\n") + "\n```"


def expected() -> dict[str, str]:
    return {"structure": structure(), "exit-codes": exit_codes()}


def _span(text: str, name: str) -> re.Match[str]:
    m = re.search(rf"(<!-- {name}:begin[^\n]*-->\n)(.*?)(<!-- {name}:end -->)", text, re.S)
    if m is None:
        raise SystemExit(f"README.md has no <!-- {name}:begin ... --> / <!-- {name}:end --> markers")
    return m


def current(text: str) -> dict[str, str]:
    """What README.md holds between each section's markers."""
    return {name: _span(text, name).group(2).strip("\n") for name in SECTIONS}


def render(text: str) -> str:
    """README text with every generated section replaced by what the sources say."""
    for name, body in expected().items():
        m = _span(text, name)
        text = text[: m.start(2)] + body + "\n" + text[m.end(2):]
    return text


def main(argv: list[str]) -> int:
    text = README.read_text(encoding="utf-8")
    if "--write" in argv:
        README.write_text(render(text), encoding="utf-8")
        return 0
    if "--check" in argv:
        stale = [name for name, body in expected().items() if current(text)[name] != body]
        if stale:
            print(f"README.md's {', '.join(stale)} section(s) disagree with the sources; run `make readme`", file=sys.stderr)
        return 1 if stale else 0
    for name, body in expected().items():
        print(f"<!-- {name} -->\n{body}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
