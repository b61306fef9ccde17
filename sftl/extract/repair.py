"""Minimal repairs that make a snippet as reporters paste it runnable (prompts, notebook lines, curly quotes, Python 2 prints, missing imports, split blocks), each listed."""

from __future__ import annotations

import ast
import builtins
import io
import re
import sys
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass

from sftl.extract.snippets import doctest_to_script
from sftl.model import Repair

# the aliases reporters use without importing them, and the import that defines each
FRAMEWORK_ALIASES = {
    "torch": "import torch",
    "tf": "import tensorflow as tf",
    "np": "import numpy as np",
    "nn": "import torch.nn as nn",
    "F": "import torch.nn.functional as F",
    "optim": "import torch.optim as optim",
}
_KERAS = {"tensorflow": "from tensorflow import keras"}

_PROMPT = re.compile(r"^(\s*)(>>>|\.\.\.)( |$)")
_IN_CELL = re.compile(r"^\s*In\s*\[\s*\d*\s*\]:\s?")
_OUT_CELL = re.compile(r"^\s*Out\s*\[\s*\d*\s*\]:")
_IPY_CONT = re.compile(r"^\s*\.\.\.+:\s?")
_TIME_MAGIC = re.compile(r"^(\s*)%(?:time|timeit|prun)\s+(?:-\S+\s+)*(.+)$")
_PRINT_STMT = re.compile(r"^(\s*)print(?:\s+(?!\s*[=(.\[,)])(.*?)|\s*)\s*$")


@dataclass(frozen=True)
class RepairedCode:
    """A snippet after its repairs (empty when it needed none); `original` is what the report held."""

    code: str
    original: str
    repairs: tuple[Repair, ...]


def parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return True


def strip_prompts(code: str) -> tuple[str, Repair | None]:
    """A `>>>` / `...` transcript back to its statements; the output lines between them dropped."""
    script = doctest_to_script(code)
    if script is None:
        return code, None
    dropped = sum(1 for line in code.split("\n") if line.strip() and not _PROMPT.match(line))
    detail = "removed '>>>'/'...' prompts" + (f"; dropped {dropped} output line(s)" if dropped else "")
    return script + "\n", Repair("prompts", detail)


def strip_notebook(code: str) -> tuple[str, list[Repair]]:
    """Notebook cells: `In [3]:` prompts removed, `Out[3]:` output dropped, `%magic` and `!shell` lines dropped."""
    lines = code.split("\n")
    cells = any(_IN_CELL.match(line) for line in lines)
    magics = [line for line in lines if re.match(r"^\s*[%!]", line)]
    if not cells and not magics:
        return code, []
    repairs: list[Repair] = []
    kept: list[str] = []
    dropped_out = 0
    in_output = False
    for line in lines:
        if cells and _IN_CELL.match(line):
            in_output = False
            line = _IN_CELL.sub("", line, count=1)
        elif cells and _OUT_CELL.match(line):
            in_output = True
            dropped_out += 1
            continue
        elif in_output:
            if line.strip():
                dropped_out += 1
                continue
            in_output = False
        elif cells and _IPY_CONT.match(line):
            line = _IPY_CONT.sub("", line, count=1)
        m = _TIME_MAGIC.match(line)
        if m:
            kept.append(m.group(1) + m.group(2))
            repairs.append(Repair("magic", f"ran '{line.strip()[:60]}' once as its statement"))
            continue
        if re.match(r"^\s*%%(?:time|timeit|capture)\b", line):
            repairs.append(Repair("magic", f"dropped cell magic '{line.strip()[:60]}' (its body runs once)"))
            continue
        if re.match(r"^\s*%", line):
            repairs.append(Repair("magic", f"dropped IPython magic '{line.strip()[:60]}'"))
            continue
        if re.match(r"^\s*!", line):
            repairs.append(Repair("shell", f"dropped shell line '{line.strip()[:60]}'"))
            continue
        kept.append(line)
    if cells:
        repairs.insert(0, Repair("notebook", "removed 'In [n]:' prompts" + (
            f"; dropped {dropped_out} 'Out[n]:' line(s)" if dropped_out else "")))
    new = "\n".join(kept)
    return _dedent_cells(new), repairs


def dedent(code: str) -> tuple[str, Repair | None]:
    """A snippet pasted with a common indentation (quoted from a list or a reply): the margin removed."""
    import textwrap

    if parses(code):
        return code, None
    new = textwrap.dedent(code)
    if new == code or not parses(new):
        return code, None
    return new, Repair("indentation", "removed the common indentation the snippet was pasted with")


def _dedent_cells(code: str) -> str:
    """Cells pasted with the prompt's indentation keep a common margin: remove it."""
    import textwrap

    return textwrap.dedent(code)


def fix_print_statements(code: str) -> tuple[str, Repair | None]:
    """Python 2 `print x, y` as `print(x, y)` (only when the code does not parse as Python 3 and the fix makes it parse)."""
    if parses(code):
        return code, None
    out, changed = [], 0
    for line in code.split("\n"):
        body, comment = _split_comment(line)
        m = _PRINT_STMT.match(body)
        if m and not body.lstrip().startswith("print(") and not re.match(r"^\s*print\s*\(.*\)\s*$", body):
            args = (m.group(2) or "").rstrip()
            if args.startswith(">>"):
                out.append(line)
                continue
            end = ""
            if args.endswith(","):
                args, end = args[:-1].rstrip(), ", end=' '"
            out.append(f"{m.group(1)}print({args}{end})" + (f"  {comment}" if comment else ""))
            changed += 1
        else:
            out.append(line)
    new = "\n".join(out)
    if not changed or not parses(new):
        return code, None
    return new, Repair("print-statement", f"rewrote {changed} Python 2 print statement(s) as print() calls")


def _split_comment(line: str) -> tuple[str, str]:
    """(code, '# comment') of one line, the comment found by Python's tokenizer (not inside a string)."""
    if "#" not in line:
        return line, ""
    try:
        for tok in tokenize.generate_tokens(io.StringIO(line).readline):
            if tok.type == tokenize.COMMENT:
                return line[: tok.start[1]].rstrip(), tok.string
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return line, ""


_TYPOGRAPHIC = {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'}


def fix_typographic_quotes(code: str) -> tuple[str, Repair | None]:
    """Curly quotes a text editor or the tracker put in for straight ones (only when the code then parses)."""
    if parses(code) or not any(q in code for q in _TYPOGRAPHIC):
        return code, None
    new = code
    for curly, straight in _TYPOGRAPHIC.items():
        new = new.replace(curly, straight)
    if not parses(new):
        return code, None
    count = sum(code.count(q) for q in _TYPOGRAPHIC)
    return new, Repair("quotes", f"replaced {count} typographic quote(s) with straight ones")


class _Names(ast.NodeVisitor):
    """Names a module reads and names it binds anywhere (a conservative view: any binding counts)."""

    def __init__(self) -> None:
        self.loaded: list[str] = []
        self.bound: set[str] = set()

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.loaded.append(node.id)
        else:
            self.bound.add(node.id)

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.bound.add(a.asname or a.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for a in node.names:
            if a.name == "*":
                self.bound.add("*")
            self.bound.add(a.asname or a.name)

    def _def(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.bound.add(node.name)
        self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _def

    def visit_arg(self, node: ast.arg) -> None:
        self.bound.add(node.arg)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.bound.add(node.name)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        self.bound.update(node.names)


def free_names(code: str) -> list[str]:
    """Names the code reads but never binds and Python does not provide, in order of first use."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return []
    names = _Names()
    names.visit(tree)
    if "*" in names.bound:
        return []  # a star import may define anything
    seen: list[str] = []
    for n in names.loaded:
        if n not in names.bound and not hasattr(builtins, n) and n not in seen and n != "__file__":
            seen.append(n)
    return seen


def add_missing_imports(code: str, framework: str | None) -> tuple[str, Repair | None]:
    """Imports for `torch`, `tf`, `np`, `nn`, `F` ... when the fragment uses them and never imports them."""
    aliases = dict(FRAMEWORK_ALIASES)
    if framework in _KERAS:
        aliases["keras"] = _KERAS[framework]
    if framework == "tensorflow":
        for torch_only in ("nn", "F", "optim"):
            aliases.pop(torch_only)
    free = free_names(code)
    used_as_module = _attribute_bases(code)
    for name in free:  # `functools.partial(...)` in a fragment that never imports functools
        if name in sys.stdlib_module_names and name in used_as_module and not name.startswith("_"):
            aliases.setdefault(name, f"import {name}")
    missing = [n for n in free if n in aliases]
    if not missing:
        return code, None
    lines = [aliases[n] for n in missing]
    if any(n in ("nn", "F", "optim") for n in missing) and "torch" not in missing:
        pass  # `import torch.nn as nn` binds nn only; the fragment did not use `torch` itself
    head, body = _split_future(code)
    new = head + "\n".join(lines) + "\n" + body
    return new, Repair("import", "added " + "; ".join(lines) + f" (the snippet uses {', '.join(missing)} and never imports "
                       + ("it)" if len(missing) == 1 else "them)"))


def _attribute_bases(code: str) -> set[str]:
    """Names read as `name.attribute` somewhere in the code."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return set()
    return {n.value.id for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}


def _split_future(code: str) -> tuple[str, str]:
    """(`from __future__` lines and a leading docstring, the rest): imports go after the former."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return "", code
    end = 0
    for i, node in enumerate(tree.body):
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            end = node.end_lineno or end
        elif i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            end = node.end_lineno or end
        else:
            break
    lines = code.split("\n")
    head = "\n".join(lines[:end])
    return (head + "\n" if head else ""), "\n".join(lines[end:])


def join_blocks(code: str, others: Sequence[str]) -> tuple[str, Repair | None]:
    """Put first the report's other Python blocks that define what the snippet uses but lacks (a class, a model, an input)."""
    free = [n for n in free_names(code) if n not in FRAMEWORK_ALIASES]
    if not free:
        return code, None
    chosen: list[str] = []
    provided: set[str] = set()
    for block in others:
        if block.strip() == code.strip() or not parses(block):
            continue
        names = _Names()
        names.visit(ast.parse(block))
        gives = {n for n in free if n in names.bound} - provided
        if gives:
            chosen.append(block)
            provided |= gives
    if not chosen:
        return code, None
    new = "\n\n".join([*(b.strip("\n") for b in chosen), code.strip("\n")]) + "\n"
    if not parses(new):
        return code, None
    return new, Repair("joined-blocks", f"put {len(chosen)} earlier block(s) of the report first: they define "
                       + ", ".join(sorted(provided)))


def repair_snippet(code: str, framework: str | None = None, others: Sequence[str] = ()) -> RepairedCode:
    """Every repair the snippet needs, in order; none changes what the code computes."""
    repairs: list[Repair] = []
    new = code
    new, r = strip_prompts(new)
    repairs += [r] if r else []
    new, rs = strip_notebook(new)
    repairs += rs
    new, r = dedent(new)
    repairs += [r] if r else []
    new, r = fix_typographic_quotes(new)
    repairs += [r] if r else []
    new, r = fix_print_statements(new)
    repairs += [r] if r else []
    new, r = join_blocks(new, others)
    repairs += [r] if r else []
    new, r = add_missing_imports(new, framework)
    repairs += [r] if r else []
    if not repairs:
        return RepairedCode(code, code, ())
    return RepairedCode(new, code, tuple(repairs))


def imported_modules(code: str) -> list[str]:
    """Top-level modules the code imports, in order ('torch.utils.tensorboard' kept whole: it needs tensorboard)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return []
    found: list[str] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module]
        for name in names:
            key = name if name.startswith("torch.utils.tensorboard") else name.split(".")[0]
            key = "torch.utils.tensorboard" if key.startswith("torch.utils.tensorboard") else key
            if key not in found:
                found.append(key)
    return found
