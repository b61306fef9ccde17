"""Tracebacks in a report: frames (classic, 3.11+, IPython), chained exceptions, the final error line, framework file paths."""

from __future__ import annotations

import re

from sftl.model import Frame, Traceback

TB_HEAD = "Traceback (most recent call last)"
FRAME_RE = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>.+?))?\s*$')
FRAME_NEW_RE = re.compile(r"^\s*File (?P<path>\S+\.py):(?P<line>\d+), in (?P<func>[\w<>.]+)")
# pytest's long format, as CI logs paste it: "src\\pkg\\mod.py:1063: in _get_module", the source line indented below
_PYTEST_FRAME_RE = re.compile(r"^(?P<path>(?:[A-Za-z]:)?[^\s:<][^:]*?\.py|<[^>]+>):(?P<line>\d+): in (?P<func>[\w<>.]+)\s*$")
_CELL_FRAME_RE = re.compile(r"^\s*(?P<path>Cell In\s?\[\d*\]), line (?P<line>\d+)")
_IPY_FRAME_RE = re.compile(
    r"^\s*(?:File\s+)?(?P<path>(?:[~/A-Za-z]|<ipython|\\)[^\s]*?(?:\.py|>))(?::\d+)? in (?P<func>[\w<>.]+)\s*(?:\(.*)?$"
)
EXC_LINE = re.compile(
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

_FRAMEWORK_PKGS = (
    "torch", "tensorflow", "tensorflow_core", "keras", "tf_keras", "torchvision", "torchaudio", "torchtext",
    "caffe2", "functorch", "torchgen", "tensorboard", "tensorflow_estimator", "tensorflow_probability",
    "torchdynamo", "torchinductor",  # PyTorch's compiler before it moved into torch/_dynamo, torch/_inductor (2.0)
)
_SITE = re.compile(r"(?:site|dist)-packages/(?:[^/]+\.egg/)?(?P<rest>.+)$")
_SOURCE_TREE = re.compile(
    r"(?:^|/)(?P<rest>(?:tensorflow/(?:python|core|compiler|lite|tools|cc|stream_executor|dtensor)/.+)"
    r"|(?:torch/(?:nn|_dynamo|_inductor|onnx|jit|autograd|utils|distributed|cuda|fx|optim|_refs|_prims|"
    r"_decomp|_functorch|ao|export|_subclasses|_higher_order_ops|testing|backends|_C|csrc|lib|sparse|"
    r"linalg|fft|special|masked|amp|quantization|multiprocessing|_library|_export)/.+)"
    r"|(?:torch/(?:_tensor|functional|__init__|serialization|overrides|_ops|_utils|hub|random|storage|"
    r"_jit_internal|_torch_docs|_tensor_str|library|types)\.py)"
    r"|(?:keras/(?:src|engine|layers|backend|models|optimizers|saving|utils|api)/.+)"
    # a checkout of pytorch/torchdynamo: the innermost package folder (.../torchdynamo/torchinductor/ir.py)
    r"|(?:(?:torchdynamo|torchinductor)/(?!torchdynamo/|torchinductor/).+\.py))$"
)


_IMPORT_STATEMENT = re.compile(r"\s*(?:from\s+[\w.]+\s+)?import\s+[\w.(]")


def stops_at_import(frames: tuple[Frame, ...] | list[Frame]) -> bool:
    """The trace's innermost frame shown is an import statement: it was cut, and the error came from the module
    being imported, whose frames are not shown (pytest's collection errors, truncated pastes)."""
    return bool(frames) and _IMPORT_STATEMENT.match(frames[-1].source or "") is not None


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
        m = FRAME_RE.match(line) or FRAME_NEW_RE.match(line) or _CELL_FRAME_RE.match(line) or _PYTEST_FRAME_RE.match(line)
        if m and m.re is not FRAME_RE and m.re is not _PYTEST_FRAME_RE:
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
            while j < len(lines) and lines[j].startswith((" ", "\t")) and not (FRAME_RE.match(lines[j]) or FRAME_NEW_RE.match(lines[j])):
                s = lines[j].strip()
                if s and not src and not set(s) <= set("^~ ?"):  # pytest prints ??? for a frozen module's line
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
        is_head = TB_HEAD in s or (s.startswith("---") and "Traceback" in s)
        if is_head or FRAME_RE.match(lines[i]) or _PYTEST_FRAME_RE.match(lines[i]):
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
        s = re.sub(r"^E {2,}", "", lines[k].strip())  # pytest marks the error lines with E
        if not s:
            k += 1
            continue
        m = EXC_LINE.match(s) or (_EXC_AFTER_FRAMES.match(s) if k == j or not lines[k - 1].strip() else None)
        if m:
            etype = m.group("type").rsplit(".", 1)[-1]
            msg_lines = [m.group("msg") or ""]
            k += 1
            while k < len(lines):
                t = lines[k].rstrip()
                if not t.strip() or _CHAIN_CAUSE in t or _CHAIN_CONTEXT in t or TB_HEAD in t or t.startswith("```"):
                    break
                if len(msg_lines) > 30:
                    break
                msg_lines.append(t.strip())
                k += 1
            return etype, "\n".join(x for x in msg_lines if x is not None).strip(), k
        if FRAME_RE.match(lines[k]):
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
            if first.startswith(TB_HEAD):  # TF re-raises with the inner traceback as its message
                inner = [ln.strip() for ln in lines[1:] if EXC_LINE.match(ln.strip())]
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
