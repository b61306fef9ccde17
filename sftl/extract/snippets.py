"""The code blocks of a report, each classified (python, output, traceback, shell, log, C++, env), and the snippet a maintainer would run."""

from __future__ import annotations

import ast
import re

from sftl.extract.text import segments
from sftl.extract.tracebacks import EXC_LINE, FRAME_NEW_RE, FRAME_RE, TB_HEAD
from sftl.model import CodeBlock, Snippet

_LOG_LINE = re.compile(
    r"^\s*(?:\d{4}-\d\d-\d\d[ T]\d\d:\d\d|[IWEF]\d{4} \d\d:\d\d|\[[IWEF] |[IWEF] (?:tensorflow|external|\S+\.cc:\d+\])"
    r"|WARNING:|INFO:|ERROR:|THCudaCheck|\[W |\[E |Epoch \d+|\d+/\d+ \[)"
)
_SHELL_LINE = re.compile(
    r"^\s*(?:\$ |# |\(\w+\) \S*\$ |pip3? |conda |python3? -|python3? \S+\.py|git |cmake |make |bazel |sudo |apt(?:-get)? |"
    r"export |cd |nvidia-smi|nvcc |docker |source |ls |mkdir |wget |curl )"
)
_OUTPUT_CALL = re.compile(r"^\s*(?:tensor|array|tf\.Tensor|Tensor|Parameter|<tf\.Tensor|torch\.Size|TensorShape)\b")
_CPP_LINE = re.compile(r"^\s*(?:#include\b|std::|template\s*<|namespace\b|int main\s*\(|using namespace\b)")
_ENV_KEYS = ("PyTorch version:", "Is debug build:", "CUDA used to build PyTorch", "Versions of relevant libraries",
             "Collecting environment information")


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return True


def _looks_like_program(tree: ast.Module) -> bool:
    """A parse tree of real code, not a printed value such as `tensor([1., 2.])` or a bare word."""
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and node.value is None:
            continue  # "cpu: tensor([1., 2.])" is a printed label, not an annotation
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.FunctionDef,
                             ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.While, ast.With, ast.If, ast.Try,
                             ast.Delete, ast.Assert, ast.Raise)):
            return True
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = node.value.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("tensor", "array", "Tensor", "Parameter", "Size", "TensorShape"):
                continue  # printed values look like calls
            return True
    return False


def doctest_to_script(text: str) -> str | None:
    """Turn a `>>>` / `...` session back into a script; None when the text is not a session."""
    lines = text.split("\n")
    if not any(line.lstrip().startswith(">>>") for line in lines):
        return None
    code: list[str] = []
    for line in lines:
        s = line.lstrip()
        if s.startswith(">>> ") or s == ">>>":
            code.append(s[4:])
        elif s.startswith("... ") or s == "...":
            code.append(s[4:])
    script = "\n".join(code).strip("\n")
    return script or None


_IN_PROMPT = re.compile(r"^\s*In\s*\[\s*\d*\s*\]:\s?")
_CONT_PROMPT = re.compile(r"^\s*\.\.\.+:\s?")


def ipython_to_script(text: str) -> str | None:
    """An IPython terminal session (`In [n]:` and `...:` lines amid output and tracebacks) back into its
    statements; None when the text is not such a session. Magics are left for the replay's repairs."""
    lines = text.split("\n")
    if not any(_IN_PROMPT.match(line) for line in lines):
        return None
    code: list[str] = []
    in_cell = False
    for line in lines:
        m = _IN_PROMPT.match(line)
        if m:
            code.append(line[m.end():])
            in_cell = True
        elif in_cell and _CONT_PROMPT.match(line):
            code.append(_CONT_PROMPT.sub("", line, count=1))
        else:
            in_cell = False  # output, a warning or a traceback
    script = "\n".join(ln for ln in code).strip("\n")
    return script or None


def classify_block(text: str, lang: str = "") -> tuple[str, bool, str]:
    """(kind, parses, why) for one block: python/output/traceback/shell/log/cpp/env/unknown."""
    stripped = text.strip()
    if not stripped:
        return "unknown", False, "empty block"
    lines = [ln for ln in stripped.split("\n") if ln.strip()]
    if TB_HEAD in stripped or sum(1 for ln in lines if FRAME_RE.match(ln) or FRAME_NEW_RE.match(ln)) >= 1:
        return "traceback", False, "contains a Python traceback"
    if any(k in stripped for k in _ENV_KEYS):
        return "env", False, "environment report (collect_env)"
    if lang in ("cpp", "c++", "c", "cuda", "cu", "h", "hpp") or sum(1 for ln in lines if _CPP_LINE.match(ln)) >= 1 and not _parses(stripped):
        return "cpp", False, f"C/C++ source ({lang or 'detected'})"
    if lang in ("bash", "sh", "shell", "console", "zsh", "powershell", "cmd", "bat"):
        # TensorFlow's issue form fences "Standalone code to reproduce the issue" as ```shell by default:
        # a block that parses as a Python program and holds no shell commands is the reporter's script
        if (lang == "shell" and not any(_SHELL_LINE.match(ln) for ln in lines) and _parses(stripped)
                and _looks_like_program(ast.parse(stripped))):
            return "python", True, "marked as shell but parses as a Python program"
        return "shell", False, f"marked as {lang}"
    if _parses(stripped):
        tree = ast.parse(stripped)
        if _looks_like_program(tree):
            return "python", True, "parses as Python with statements/calls"
        return "output", True, "parses but holds only printed values"
    log = sum(1 for ln in lines if _LOG_LINE.match(ln))
    shell = sum(1 for ln in lines if _SHELL_LINE.match(ln))
    if log and log >= len(lines) / 3:
        return "log", False, "log lines (timestamps / level prefixes)"
    if shell and shell >= len(lines) / 2:
        return "shell", False, "shell commands"
    if any(EXC_LINE.match(ln.strip()) for ln in lines[-3:]):
        return "output", False, "ends in an exception line"
    if sum(1 for ln in lines if _OUTPUT_CALL.match(ln)) >= 1:
        return "output", False, "printed tensors/arrays"
    if lang in ("python", "py", "python3", "ipython", "pycon"):
        # marked Python that does not parse (Python 2, pasted prompt, half a script): keep it as python
        import_like = any(re.match(r"\s*(?:import |from \S+ import |def |class |\w+\s*=)", ln) for ln in lines)
        if import_like:
            return "python", False, "marked python; does not parse"
        return "output", False, "marked python but reads as output"
    if lang in ("", "text", "txt", "log", "output", "shell-session"):
        n_imports = sum(1 for ln in lines if re.match(r"\s*(?:import \w|from [\w.]+ import )", ln))
        if n_imports:
            return "python", False, "imports but does not parse"
        return "output", False, "text that is not Python"
    return "unknown", False, f"language {lang!r}"


def code_blocks(body: str) -> list[CodeBlock]:
    """Every code-like block of a body, classified, in order of appearance (doctests as scripts)."""
    blocks: list[CodeBlock] = []
    for seg in segments(body):
        if seg.source == "prose":
            script = doctest_to_script(seg.text)
            if script:
                blocks.append(CodeBlock(script, "python", "doctest", _parses(script), "`>>>` session turned into a script"))
            continue
        script = doctest_to_script(seg.text)
        if script is not None and sum(1 for ln in seg.text.split("\n") if ln.lstrip().startswith(">>>")) >= 1:
            ok = _parses(script)
            blocks.append(CodeBlock(script, "python", "doctest", ok, "`>>>` session turned into a script"))
            continue
        kind, ok, why = classify_block(seg.text, seg.lang)
        session = ipython_to_script(seg.text) if kind in ("traceback", "output", "unknown", "log") else None
        if session is not None:
            blocks.append(CodeBlock(session, "python", "ipython", _parses(session), "IPython session: its 'In [n]:' cells"))
        elif kind == "traceback":
            code, rest = _split_code_then_traceback(seg.text)
            if code:
                blocks.append(CodeBlock(code, "python", seg.source, True, "code before a pasted traceback"))
        blocks.append(CodeBlock(seg.text.strip("\n"), kind, seg.source, ok, why))
    return blocks


def _split_code_then_traceback(text: str) -> tuple[str, str]:
    """Some reports paste the script and its traceback in one block; keep the script part."""
    idx = text.find(TB_HEAD)
    if idx <= 0:
        return "", text
    head = text[:idx].rstrip()
    if head and _parses(head) and _looks_like_program(ast.parse(head)):
        return head, text[idx:]
    return "", text


_FRAMEWORK_IMPORT = re.compile(r"^\s*(?:import|from)\s+(torch|tensorflow|keras|tf_keras|torchvision|torchaudio|jax|numpy)\b", re.M)


def choose_snippet(blocks: list[CodeBlock]) -> Snippet | None:
    """The block (or joined blocks) a maintainer would run; every candidate keeps its reason."""
    pys = [b for b in blocks if b.kind == "python"]
    if not pys:
        return None if not blocks else Snippet("", "no Python code among the blocks", tuple(blocks))
    # a program split over several blocks: later blocks without imports continue the first one
    joined: list[CodeBlock] = []
    for b in pys:
        if joined and not _FRAMEWORK_IMPORT.search(b.code) and _FRAMEWORK_IMPORT.search(joined[0].code):
            joined.append(b)
        elif not joined and _FRAMEWORK_IMPORT.search(b.code):
            joined.append(b)
        elif joined:
            break
    scored = []
    for i, b in enumerate(pys):
        s = 0.0
        s += 3 if _FRAMEWORK_IMPORT.search(b.code) else 0
        s += 2 if b.parses else 0
        s += min(len(b.code.split("\n")), 40) / 20
        s += 0.5 if b.source == "fenced" else 0
        s -= i * 0.1
        scored.append((s, i, b))
    scored.sort(key=lambda t: (-t[0], t[1]))
    best = scored[0][2]
    if len(joined) > 1:
        code = "\n\n".join(b.code for b in joined)
        if _parses(code) or not best.parses:
            reason = f"joined {len(joined)} python blocks: the first imports the framework, the rest continue it"
            return Snippet(code, reason, tuple(blocks))
    bits = ["imports the framework" if _FRAMEWORK_IMPORT.search(best.code) else "no framework import"]
    bits.append("parses" if best.parses else "does not parse")
    reason = f"{best.source} python block ({', '.join(bits)}); best of {len(pys)} python candidate(s)"
    return Snippet(best.code, reason, tuple(blocks))
