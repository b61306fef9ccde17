"""Pure text parsing of a bug report: code snippet, traceback, error line, environment and API calls.

The package by what it reads: `environment` (framework, version, Python, CUDA/cuDNN, OS, GPU); the
stage itself (`extract`, `extract_text`) composes them here and never raises.
"""

from __future__ import annotations

import ast
import html
import re
from dataclasses import dataclass

from sftl.extract.environment import framework_from, parse_environment
from sftl.model import CodeBlock, Environment, Extraction, Frame, Issue, Snippet, Traceback

__all__ = [
    "MAX_CHARS", "Segment", "choose_snippet", "classify_block", "code_blocks", "doctest_to_script", "extract",
    "extract_apis", "extract_text", "find_error_line", "framework_from", "map_frame_path", "parse_environment",
    "parse_tracebacks", "segments",
]

MAX_CHARS = 1_000_000  # longer bodies are cut; the problem is reported, nothing raises

# --------------------------------------------------------------------------------------------
# input hygiene
# --------------------------------------------------------------------------------------------

_CTRL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_TAG = re.compile(r"<[^>]{0,500}>")


def _clean(text: object, what: str, problems: list[str]) -> str:
    """Coerce to readable text; say what had to be dropped."""
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if not isinstance(text, str):
        problems.append(f"{what} is not text ({type(text).__name__}); ignored")
        return ""
    if len(text) > MAX_CHARS:
        problems.append(f"{what} is {len(text)} characters; only the first {MAX_CHARS} were read")
        text = text[:MAX_CHARS]
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if text:
        bad = len(_CTRL.findall(text)) + text.count("\ufffd")
        if bad > max(20, len(text) // 20):
            problems.append(f"{what} looks like binary data ({bad} unreadable characters); they were dropped")
        text = _CTRL.sub("", text).replace("\ufffd", "")
    stripped = text.lstrip()
    if stripped.startswith("<") and "```" not in text and len(_TAG.findall(text)) >= 3:
        # HTML-only bodies (old issues, mail gateways): keep <pre> as fences, drop the rest of the markup
        problems.append(f"{what} is HTML; markup was stripped")
        text = re.sub(r"(?is)<pre[^>]*>\s*(?:<code[^>]*>)?", "\n```\n", text)
        text = re.sub(r"(?is)(?:</code>\s*)?</pre>", "\n```\n", text)
        text = re.sub(r"(?i)<br\s*/?>|</p>|</div>|</li>", "\n", text)
        text = html.unescape(_TAG.sub("", text))
    return text


def _non_english(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    if len(letters) < 20:
        return False
    foreign = sum(1 for c in letters if ord(c) > 0x24F)
    return foreign / len(letters) > 0.3


# --------------------------------------------------------------------------------------------
# markdown segmentation
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    """A piece of a report body: prose, or a block of code/output with where it came from."""

    text: str
    source: str  # "prose" | "fenced" | "indented" | "doctest"
    lang: str = ""


_FENCE = re.compile(r"^(\s{0,3}(?:>\s*)?)(`{3,}|~{3,})\s*([\w+.#-]*)[^\n]*$")


def segments(body: str) -> list[Segment]:
    """Split a markdown body into prose and code segments (fenced, indented)."""
    lines = body.split("\n")
    out: list[Segment] = []
    prose: list[str] = []
    i = 0

    def flush() -> None:
        if prose:
            out.extend(_split_indented(prose))
            prose.clear()

    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m:
            marker, lang = m.group(2), m.group(3).lower()
            quote = ">" in m.group(1)
            block: list[str] = []
            i += 1
            while i < len(lines):
                line = lines[i]
                if quote:
                    line = re.sub(r"^\s{0,3}>\s?", "", line)
                if line.strip().startswith(marker[0] * 3) and line.strip().strip(marker[0]) == "":
                    break
                block.append(line)
                i += 1
            i += 1
            flush()
            out.append(Segment("\n".join(block), "fenced", lang))
            continue
        prose.append(lines[i])
        i += 1
    flush()
    return out


def _split_indented(lines: list[str]) -> list[Segment]:
    """Indented (4-space / tab) blocks after a blank line are code in markdown."""
    out: list[Segment] = []
    buf: list[str] = []
    code: list[str] = []
    prev_blank = True
    for line in lines:
        indented = line.startswith(("    ", "\t")) and line.strip() != ""
        if indented and (code or prev_blank):
            code.append(line)
        elif code and line.strip() == "":
            code.append(line)
        else:
            if code:
                if buf:
                    out.append(Segment("\n".join(buf), "prose"))
                    buf = []
                out.append(Segment(_dedent(code), "indented"))
                code = []
            buf.append(line)
        prev_blank = line.strip() == ""
    if code:
        if buf:
            out.append(Segment("\n".join(buf), "prose"))
            buf = []
        out.append(Segment(_dedent(code), "indented"))
    if buf:
        out.append(Segment("\n".join(buf), "prose"))
    return out


def _dedent(lines: list[str]) -> str:
    import textwrap

    return textwrap.dedent("\n".join(lines).expandtabs(4)).strip("\n")


# --------------------------------------------------------------------------------------------
# code vs output vs traceback vs shell
# --------------------------------------------------------------------------------------------

_TB_HEAD = "Traceback (most recent call last)"
_FRAME_RE = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>.+?))?\s*$')
_FRAME_NEW_RE = re.compile(r"^\s*File (?P<path>\S+\.py):(?P<line>\d+), in (?P<func>[\w<>.]+)")
_CELL_FRAME_RE = re.compile(r"^\s*(?P<path>Cell In\s?\[\d*\]), line (?P<line>\d+)")
_IPY_FRAME_RE = re.compile(
    r"^\s*(?:File\s+)?(?P<path>(?:[~/A-Za-z]|<ipython|\\)[^\s]*?(?:\.py|>))(?::\d+)? in (?P<func>[\w<>.]+)\s*(?:\(.*)?$"
)
_EXC_LINE = re.compile(
    r"^(?P<type>(?:[A-Za-z_][\w]*\.)*[A-Z][\w]*(?:Error|Exception|Exit|Interrupt|Warning|Failure|Exceeded))"
    r"(?::\s?(?P<msg>.*))?$"
)
# right after the frames any dotted CamelCase name is the exception (BackendCompilerFailed, KeyboardInterrupt)
_EXC_AFTER_FRAMES = re.compile(r"^(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z]\w*)(?::\s?(?P<msg>.*))?$")
# the dotted prefix is matched whole and only from where a name starts (never again from inside a chain
# of it, and never given back): `a.a.a...` over 200k characters stays linear instead of quadratic
_ERROR_ANYWHERE = re.compile(
    r"(?P<type>(?<![\w.])(?:[A-Za-z_]\w*+\.)*+[A-Z][A-Za-z]*(?:Error|Exception)):\s+(?P<msg>[^\n]+)"
)
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


def classify_block(text: str, lang: str = "") -> tuple[str, bool, str]:
    """(kind, parses, why) for one block: python/output/traceback/shell/log/cpp/env/unknown."""
    stripped = text.strip()
    if not stripped:
        return "unknown", False, "empty block"
    lines = [ln for ln in stripped.split("\n") if ln.strip()]
    if _TB_HEAD in stripped or sum(1 for ln in lines if _FRAME_RE.match(ln) or _FRAME_NEW_RE.match(ln)) >= 1:
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
    if any(_EXC_LINE.match(ln.strip()) for ln in lines[-3:]):
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
        if kind == "traceback":
            code, rest = _split_code_then_traceback(seg.text)
            if code:
                blocks.append(CodeBlock(code, "python", seg.source, True, "code before a pasted traceback"))
        blocks.append(CodeBlock(seg.text.strip("\n"), kind, seg.source, ok, why))
    return blocks


def _split_code_then_traceback(text: str) -> tuple[str, str]:
    """Some reports paste the script and its traceback in one block; keep the script part."""
    idx = text.find(_TB_HEAD)
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


# --------------------------------------------------------------------------------------------
# tracebacks
# --------------------------------------------------------------------------------------------

_FRAMEWORK_PKGS = (
    "torch", "tensorflow", "tensorflow_core", "keras", "tf_keras", "torchvision", "torchaudio", "torchtext",
    "caffe2", "functorch", "torchgen", "tensorboard", "tensorflow_estimator", "tensorflow_probability",
)
_SITE = re.compile(r"(?:site|dist)-packages/(?:[^/]+\.egg/)?(?P<rest>.+)$")
_SOURCE_TREE = re.compile(
    r"(?:^|/)(?P<rest>(?:tensorflow/(?:python|core|compiler|lite|tools|cc|stream_executor|dtensor)/.+)"
    r"|(?:torch/(?:nn|_dynamo|_inductor|onnx|jit|autograd|utils|distributed|cuda|fx|optim|_refs|_prims|"
    r"_decomp|_functorch|ao|export|_subclasses|_higher_order_ops|testing|backends|_C|csrc|lib|sparse|"
    r"linalg|fft|special|masked|amp|quantization|multiprocessing|_library|_export)/.+)"
    r"|(?:torch/(?:_tensor|functional|__init__|serialization|overrides|_ops|_utils|hub|random|storage|"
    r"_jit_internal|_torch_docs|_tensor_str|library|types)\.py)"
    r"|(?:keras/(?:src|engine|layers|backend|models|optimizers|saving|utils|api)/.+))$"
)


def map_frame_path(path: str) -> str | None:
    """Repository-relative path of a framework file (e.g. `torch/nn/functional.py`); None for user files."""
    if not path or not isinstance(path, str):
        return None
    p = path.strip().strip('"').replace("\\", "/")
    if p.startswith("<") or p.endswith(">"):
        return None  # <stdin>, <frozen importlib._bootstrap>, <ipython-input-...>
    p = re.sub(r"/+", "/", p)
    m = _SITE.search(p)
    if m:
        rest = m.group("rest")
        top = rest.split("/", 1)[0]
        if top in _FRAMEWORK_PKGS and "/" in rest:
            if top == "tensorflow_core":  # the 2.0/2.1 wheel layout of tensorflow/
                rest = "tensorflow/" + rest.split("/", 1)[1]
            return rest
        return None
    m = _SOURCE_TREE.search(p)
    if m:
        return m.group("rest")
    return None


def _frame_lines(lines: list[str], start: int) -> tuple[list[Frame], int]:
    frames: list[Frame] = []
    i = start
    while i < len(lines):
        line = lines[i]
        m = _FRAME_RE.match(line) or _FRAME_NEW_RE.match(line) or _CELL_FRAME_RE.match(line)
        if m and m.re is not _FRAME_RE:
            # IPython 8: "File ~/x.py:12, in f(a)" / "Cell In[3], line 2": context lines, "-> 12 code" marks the line
            j = i + 1
            src = ""
            while j < len(lines) and (lines[j].startswith((" ", "\t")) or re.match(r"-+>", lines[j])):
                mm = re.match(r"\s*-+>\s*\d+\s?(.*)", lines[j])
                if mm:
                    src = mm.group(1).strip()
                j += 1
            path = m.group("path")
            func = (m.groupdict().get("func") or "<module>").strip()
            frames.append(Frame(path, int(m.group("line")), func, src, map_frame_path(path)))
            i = j
            continue
        if m:
            src = ""
            j = i + 1
            # the source line (and, in 3.11+, the ^^^^ markers) follow the frame line
            while j < len(lines) and lines[j].startswith((" ", "\t")) and not (_FRAME_RE.match(lines[j]) or _FRAME_NEW_RE.match(lines[j])):
                s = lines[j].strip()
                if s and not src and not set(s) <= set("^~ "):
                    src = s
                j += 1
            path = m.group("path")
            func = (m.group("func") or "").strip()
            frames.append(Frame(path, int(m.group("line")), func, src, map_frame_path(path)))
            i = j
            continue
        m = _IPY_FRAME_RE.match(line)
        if m:
            lineno = None
            src = ""
            j = i + 1
            while j < len(lines) and lines[j].strip() and not _IPY_FRAME_RE.match(lines[j]):
                mm = re.match(r"\s*-+>\s*(\d+)\s*(.*)", lines[j])
                if mm:
                    lineno, src = int(mm.group(1)), mm.group(2).strip()
                j += 1
            path = m.group("path")
            frames.append(Frame(path, lineno, m.group("func"), src, map_frame_path(path)))
            i = j
            continue
        s = line.strip()
        if not s or s.startswith(("...", "[Previous line repeated")) or (frames and line.startswith((" ", "\t"))):
            i += 1
            continue
        break
    return frames, i


_CHAIN_CAUSE = "The above exception was the direct cause of the following exception"
_CHAIN_CONTEXT = "During handling of the above exception, another exception occurred"


def parse_tracebacks(text: str) -> list[Traceback]:
    """Every traceback in the text; chained ones are folded (the last printed is the outer one)."""
    lines = [re.sub(r"^\s{0,3}>\s?", "", ln) if ln.lstrip().startswith(">") and not ln.lstrip().startswith(">>>") else ln
             for ln in text.split("\n")]
    found: list[tuple[Traceback, str]] = []  # (traceback, chain marker seen before it)
    pending_chain = ""
    i = 0
    while i < len(lines):
        s = lines[i].strip()
        if _CHAIN_CAUSE in s:
            pending_chain = "cause"
            i += 1
            continue
        if _CHAIN_CONTEXT in s:
            pending_chain = "context"
            i += 1
            continue
        is_head = _TB_HEAD in s or (s.startswith("---") and "Traceback" in s)
        if is_head or _FRAME_RE.match(lines[i]):
            start = i + 1 if is_head else i
            frames, j = _frame_lines(lines, start)
            exc, msg, j = _exception_after(lines, j)
            if frames or exc:
                found.append((Traceback(tuple(frames), exc or "", msg), pending_chain))
            pending_chain = ""
            i = max(j, i + 1)
            continue
        i += 1
    # fold chains: each traceback preceded by a chain marker wraps the one before it
    result: list[Traceback] = []
    for tb, chain in found:
        if chain and result:
            prev = result.pop()
            tb = Traceback(tb.frames, tb.exception, tb.message, cause=prev, chain_kind=chain)
        result.append(tb)
    return result


def _exception_after(lines: list[str], j: int) -> tuple[str | None, str, int]:
    """The `Type: message` line(s) ending a traceback; tolerates a few junk lines before it."""
    k = j
    while k < len(lines) and k < j + 8:
        s = lines[k].strip()
        if not s:
            k += 1
            continue
        m = _EXC_LINE.match(s) or (_EXC_AFTER_FRAMES.match(s) if k == j or not lines[k - 1].strip() else None)
        if m:
            etype = m.group("type").rsplit(".", 1)[-1]
            msg_lines = [m.group("msg") or ""]
            k += 1
            while k < len(lines):
                t = lines[k].rstrip()
                if not t.strip() or _CHAIN_CAUSE in t or _CHAIN_CONTEXT in t or _TB_HEAD in t or t.startswith("```"):
                    break
                if len(msg_lines) > 30:
                    break
                msg_lines.append(t.strip())
                k += 1
            return etype, "\n".join(x for x in msg_lines if x is not None).strip(), k
        if _FRAME_RE.match(lines[k]):
            return None, "", k
        k += 1
    return None, "", j


def find_error_line(text: str, tracebacks: list[Traceback]) -> str | None:
    """The final `Type: message` line: from the outer traceback, else the last bare error line in the text."""
    if tracebacks:
        tb = tracebacks[-1]
        if tb.exception:
            lines = tb.message.split("\n")
            first = lines[0]
            if first.startswith(_TB_HEAD):  # TF re-raises with the inner traceback as its message
                inner = [ln.strip() for ln in lines[1:] if _EXC_LINE.match(ln.strip())]
                if inner:
                    return inner[-1][:1000]
            return f"{tb.exception}: {first}"[:1000] if first else tb.exception
    best = None
    for m in _ERROR_ANYWHERE.finditer(text):
        msg = m.group("msg").strip()
        if m.start() > 0 and text[m.start() - 1] not in "\n `'\"(>":
            continue
        if msg.startswith(("`", "...")) and len(msg) < 4:
            continue
        line_start = text.rfind("\n", 0, m.start()) + 1
        if text[line_start:m.start()].strip():  # mid-sentence in prose: the message ends with the sentence
            msg = re.split(r"(?<=[\w'\")\]])\.\s+(?=[A-Z])|(?<=['\"])[,;]\s+(?=[a-z])", msg)[0]
        best = f"{m.group('type')}: {msg}".rstrip("`").rstrip()
        if best.endswith(".") and not best.endswith(".."):
            best = best[:-1]
    return best[:1000] if best else None


# --------------------------------------------------------------------------------------------
# API calls
# --------------------------------------------------------------------------------------------

_ROOTS = {"torch": "torch", "tensorflow": "tensorflow", "tf": "tensorflow", "keras": "keras", "torchvision": "torchvision",
          "torchaudio": "torchaudio", "tf_keras": "tf_keras"}


_NOT_TENSOR_FUNCS = {"device", "no_grad", "enable_grad", "manual_seed", "set_seed", "Session", "GradientTape", "function",
                     "compile", "jit", "load", "save", "set_printoptions", "set_default_dtype", "use_deterministic_algorithms",
                     "name_scope", "variable_scope", "get_logger", "autocast", "profile", "set_grad_enabled"}
_NOT_TENSOR_METHODS = {"numpy", "tolist", "item", "size", "dim", "shape", "numel", "data_ptr", "__len__", "keys", "items",
                       "values", "run", "fit", "compile", "predict", "evaluate", "summary", "save", "load_state_dict",
                       "state_dict", "parameters", "named_parameters", "train", "eval", "zero_grad", "step", "backward_hook"}


def extract_apis(code: str, framework: str | None = None) -> tuple[str, ...]:
    """Framework calls, resolved through imports and aliases, fully qualified, in order, deduplicated.

    Method calls on values known to be tensors (results of framework functions, their methods,
    arithmetic and indexing) are reported as `torch.Tensor.<name>` / `tensorflow.Tensor.<name>`.
    """
    if not code:
        return ()
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return _apis_regex(code)
    try:
        return _apis_of_tree(tree, framework)
    except RecursionError:  # parsed, but nested deeper than the walk's stack (`x >> x >> ...` x1000): by pattern
        return _apis_regex(code)


def _apis_of_tree(tree: ast.Module, framework: str | None) -> tuple[str, ...]:
    """`extract_apis` over a parsed snippet (recursive: deep nesting raises RecursionError)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                if top in _ROOTS:
                    if a.asname:
                        aliases[a.asname] = a.name
                    else:
                        aliases[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            top = node.module.split(".")[0]
            if top in _ROOTS:
                for a in node.names:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    uses_tf = any(v.startswith(("tensorflow", "keras")) for v in aliases.values())
    uses_torch = any(v.startswith("torch") for v in aliases.values())
    if not aliases:  # a snippet without imports: the usual short names still mean the framework
        aliases = {"torch": "torch", "tf": "tensorflow", "F": "torch.nn.functional", "nn": "torch.nn"}
        if framework == "tensorflow":
            aliases = {"tf": "tensorflow", "keras": "keras"}
        elif framework == "pytorch":
            aliases = {"torch": "torch", "F": "torch.nn.functional", "nn": "torch.nn"}
    tf_tensors = uses_tf and not uses_torch or (not uses_torch and framework == "tensorflow")
    tensor_cls = "tensorflow.Tensor" if tf_tensors else "torch.Tensor"
    operator_ops = _OPERATOR_DUNDERS if tf_tensors else _OPERATOR_OPS

    def qualified(func: ast.AST) -> str | None:
        dotted = _dotted(func)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        if head in aliases:
            return aliases[head] + ("." + rest if rest else "")
        return None

    tensors: set[str] = set()
    instances: dict[str, str] = {}  # name -> the framework class it was made from

    def is_tensor(node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in tensors
        if isinstance(node, ast.Call):
            q = qualified(node.func)
            if q is not None:
                last = q.rsplit(".", 1)[-1]
                return bool(last[:1].islower()) and last not in _NOT_TENSOR_FUNCS
            if isinstance(node.func, ast.Attribute):
                return node.func.attr not in _NOT_TENSOR_METHODS and is_tensor(node.func.value)
            return False
        if isinstance(node, ast.BinOp):
            return is_tensor(node.left) or is_tensor(node.right)
        if isinstance(node, ast.UnaryOp):
            return is_tensor(node.operand)
        if isinstance(node, ast.Compare):  # a mask: `m = x > 0; ~m` (`x is None`, `a in b` are plain bools)
            return not any(isinstance(o, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for o in node.ops) and (
                is_tensor(node.left) or any(is_tensor(c) for c in node.comparators))
        if isinstance(node, ast.Subscript):
            return is_tensor(node.value)
        if isinstance(node, ast.Attribute):
            return node.attr in ("T", "mT", "H", "real", "imag", "grad", "data") and is_tensor(node.value)
        return False

    def bind(target: ast.AST, tensor: bool) -> None:
        if isinstance(target, ast.Name):
            (tensors.add if tensor else tensors.discard)(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                bind(t, tensor)

    out: list[str] = []
    seen: set[str] = set()

    def add(name: str) -> None:
        name = name.replace("tensorflow.compat.v1.", "tensorflow.").replace("tensorflow._api.v2.", "tensorflow.")
        if name not in seen:
            seen.add(name)
            out.append(name)

    # statements in source order, so that a name is known to be a tensor before it is used
    for stmt in sorted((n for n in ast.walk(tree) if isinstance(n, ast.stmt)), key=lambda n: (n.lineno, n.col_offset)):
        calls: list[ast.Call] = []
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.stmt):
                continue
            calls.extend(n for n in ast.walk(child) if isinstance(n, ast.Call))
        if isinstance(stmt, ast.For):
            bind(stmt.target, is_tensor(stmt.iter))
        calls.sort(key=lambda n: (n.lineno, n.col_offset))
        for call in calls:
            q = qualified(call.func)
            if q is not None:
                add(q)
            elif isinstance(call.func, ast.Attribute) and is_tensor(call.func.value):
                meth = call.func.attr
                if not meth.startswith("_"):
                    add(f"{tensor_cls}.{meth}")
            elif (isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
                  and call.func.value.id in instances and not call.func.attr.startswith("_")):
                # normal = torch.distributions.Normal(0, 1); normal.icdf(x) -> torch.distributions.Normal.icdf
                add(f"{instances[call.func.value.id]}.{call.func.attr}")
        # operator syntax on tensors (`x >> 1`, `a @ b`) is a call of the operator's op too; plain
        # + - * / are left out: nearly every snippet has them and they would drown the op at fault
        for node in sorted((n for child in ast.iter_child_nodes(stmt) if not isinstance(child, ast.stmt)
                            for n in ast.walk(child) if isinstance(n, (ast.BinOp, ast.UnaryOp))),
                           key=lambda n: (n.lineno, n.col_offset)):
            op = operator_ops.get(type(node.op))
            operands = (node.left, node.right) if isinstance(node, ast.BinOp) else (node.operand,)
            if isinstance(node.op, ast.Mod) and isinstance(operands[0], (ast.Constant, ast.JoinedStr)):
                continue  # "loss: %f" % x is string formatting, not remainder
            if op and any(is_tensor(x) for x in operands):
                add(f"{tensor_cls}.{op}")
        # advanced indexing (`x[mask]`, `x[idx] = v`): a tensor index runs the index / index_put kernels;
        # plain slices (`x[:, 1]`) are views and name no kernel
        if not tf_tensors:
            for node in sorted((n for child in ast.iter_child_nodes(stmt) if not isinstance(child, ast.stmt)
                                for n in ast.walk(child) if isinstance(n, ast.Subscript)),
                               key=lambda n: (n.lineno, n.col_offset)):
                index = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
                if is_tensor(node.value) and any(is_tensor(i) or isinstance(i, ast.List) for i in index):
                    store = isinstance(node.ctx, ast.Store)
                    add(f"{tensor_cls}.{'__setitem__' if store else '__getitem__'}")
        if isinstance(stmt, ast.AugAssign) and operator_ops.get(type(stmt.op)) and (
                is_tensor(stmt.target) or is_tensor(stmt.value)):
            add(f"{tensor_cls}.{operator_ops[type(stmt.op)]}")
        if isinstance(stmt, ast.Assign):
            t = is_tensor(stmt.value)
            made = qualified(stmt.value.func) if isinstance(stmt.value, ast.Call) else None
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    if made and made.rsplit(".", 1)[-1][:1].isupper():
                        instances[target.id] = made  # an object of a framework class
                    else:
                        instances.pop(target.id, None)
            for target in stmt.targets:
                bind(target, t or (isinstance(target, (ast.Tuple, ast.List)) and isinstance(stmt.value, ast.Call)
                                   and qualified(stmt.value.func) is not None))
        elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)) and stmt.value is not None:
            bind(stmt.target, is_tensor(stmt.value) or is_tensor(stmt.target))
    return tuple(out)


# Python operators -> the framework op they call (native_functions.yaml names for PyTorch)
_OPERATOR_OPS: dict[type, str] = {
    ast.RShift: "__rshift__", ast.LShift: "__lshift__", ast.BitAnd: "__and__", ast.BitOr: "__or__",
    ast.BitXor: "__xor__", ast.MatMult: "matmul", ast.FloorDiv: "floor_divide", ast.Mod: "remainder",
    ast.Pow: "pow", ast.Invert: "bitwise_not",
}
_OPERATOR_DUNDERS: dict[type, str] = {  # TensorFlow: the tf.Tensor method; its localizer maps it to the raw op
    **_OPERATOR_OPS, ast.MatMult: "__matmul__", ast.FloorDiv: "__floordiv__", ast.Mod: "__mod__",
    ast.Pow: "__pow__", ast.Invert: "__invert__",
}


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


_API_RE = re.compile(r"(?<![\w.])(torch|tf|tensorflow|keras|F)\.((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)(?=\s*\(|`)")


# C++ reports (extensions, libtorch): at::histc(...), torch::arange(...), at::native::foo(...)
_CXX_API_RE = re.compile(r"\b(?:at|torch)::(?:native::)?([a-z_][a-z0-9_]*)\s*\(")
# an operator's method named in prose or C++ (`x.__rshift__(n)`, "ATen __rshift__() on cuda")
_OPERATOR_DUNDER_RE = re.compile(
    r"(?<![\w])\.?(__(?:i|r)?(?:add|sub|mul|truediv|div|floordiv|mod|pow|matmul|and|or|xor|lshift|rshift|invert|neg|abs)__)"
    r"\s*\(")


def _apis_regex(text: str, framework: str | None = None) -> tuple[str, ...]:
    out: list[str] = []
    roots = {"tf": "tensorflow", "F": "torch.nn.functional"}
    found = [(m.start(), f"{roots.get(m.group(1), m.group(1))}.{m.group(2)}") for m in _API_RE.finditer(text)]
    if framework != "tensorflow":
        found += [(m.start(), f"torch.{m.group(1)}") for m in _CXX_API_RE.finditer(text)]
    tensor = "tensorflow.Tensor" if framework == "tensorflow" else "torch.Tensor"
    found += [(m.start(), f"{tensor}.{m.group(1)}") for m in _OPERATOR_DUNDER_RE.finditer(text)]
    for _, name in sorted(found):
        if name not in out:
            out.append(name)
    return tuple(out)


# --------------------------------------------------------------------------------------------
# the stage
# --------------------------------------------------------------------------------------------


def extract_text(title: str, body: str, repo: str = "") -> Extraction:
    """Read a report given as title and body; never raises, `problems` says what could not be read."""
    problems: list[str] = []
    try:
        return _extract(title, body, repo, problems)
    except Exception as exc:  # a parser bug must not take a batch down; say so instead
        problems.append(f"extraction failed: {type(exc).__name__}: {exc}")
        return Extraction(None, None, Environment(missing=("framework", "version", "python", "cuda", "cudnn", "os", "gpu")),
                          problems=tuple(problems))


def extract(issue: Issue) -> Extraction:
    """Read one issue (title, body and the reporter's follow-up comments)."""
    body = issue.body if isinstance(issue.body, str) else ""
    author_comments = [c.body for c in issue.comments if issue.author and c.author == issue.author and c.body]
    if author_comments:
        body = body + "\n\n" + "\n\n".join(author_comments)
    return extract_text(issue.title, body, issue.repo)


def _extract(title: object, body: object, repo: str, problems: list[str]) -> Extraction:
    title_s = _clean(title, "title", problems).replace("\n", " ")
    body_s = _clean(body, "body", problems)
    if not body_s.strip():
        problems.append("the body is empty")
    elif _non_english(title_s + " " + " ".join(g.text for g in segments(body_s) if g.source == "prose")):
        problems.append("most of the text is not English; only code, errors and versions were read")
    blocks = code_blocks(body_s) if body_s else []
    snippet = choose_snippet(blocks)
    if snippet is None or not snippet.code:
        problems.append("no runnable Python snippet")
    tbs = parse_tracebacks(body_s) if body_s else []
    traceback = tbs[-1] if tbs else None
    error_line = find_error_line(body_s, tbs) or find_error_line(title_s, [])
    code = snippet.code if snippet else ""
    framework = framework_from(repo, code, f"{title_s}\n{body_s}")
    env = parse_environment(f"{title_s}\n{body_s}", framework)
    if len(code) > 200_000:  # a pasted dump, not a repro: read its calls by pattern
        problems.append(f"the snippet is {len(code)} characters; its API calls were read by pattern")
        apis = _apis_regex(code[:200_000])
    else:
        apis = extract_apis(code, env.framework) if code else ()
    if not apis:
        inline = " ".join(re.findall(r"`([^`\n]+)`", body_s))
        apis = _apis_regex(f"{title_s} {inline} {body_s}", env.framework)
    return Extraction(snippet, traceback, env, error_line, apis, tuple(problems))

