"""What a report offers a file search: its text by section, the framework frames it shows, the public names it
uses and the messages it quotes."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sftl.extract.tracebacks import map_frame_path, parse_tracebacks
from sftl.localize.candidates.corpus import message_shingles
from sftl.localize.candidates.tokens import word_list
from sftl.model import Extraction, Issue, Traceback

# a dotted public name as reporters write it: tf.keras.layers.Conv2D, torch.distributions.Gamma, nn.Linear
DOTTED = re.compile(r"\b(tf|tensorflow|keras|torch|nn|F|np)\.((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)")
# a CamelCase or snake_case word long enough to name a class or function on its own
NAME_LIKE = re.compile(r"\b([A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+|[a-z][a-z0-9]+(?:_[a-z0-9]+)+)\b")
FILE_LINE = re.compile(r"File \"([^\"]+)\", line (\d+)(?:, in (\S+))?")
CXX_FRAME = re.compile(r"\b((?:tensorflow|torch|aten|c10)/[\w/.-]+\.(?:cc|h|cpp|cu|cuh|py))(?::(\d+))?")
ALIASES = {"tf": "tf", "tensorflow": "tf", "keras": "keras", "torch": "torch", "nn": "torch.nn", "F": "torch.nn.functional"}
# ops a report names as ops: eager errors' [Op:X], registry errors, raw ops, aten ops, TFLite builtins
NAMED_OP = re.compile(r"\[Op:(\w+)\]|(?:Op type not registered|OpKernel was registered to support Op|kernel for op|"
                      r"No registered) '(\w+)'|\braw_ops\.(\w+)|\baten(?:::|\.)(\w+)|\bBuiltinOperator_(\w+)")
DTYPES = {"float16": "half", "half": "half", "fp16": "half", "bfloat16": "bfloat16", "bf16": "bfloat16",
          "float32": "float", "float64": "double", "double": "double", "int8": "int8", "uint8": "uint8",
          "int16": "int16", "int32": "int32", "int64": "int64", "complex64": "complex64", "complex128": "complex128",
          "qint8": "qint8", "quint8": "quint8", "bool": "bool", "tf.string": "string", "cfloat": "complex64"}
DTYPE_WORD = re.compile(r"\b(" + "|".join(re.escape(k) for k in sorted(DTYPES, key=len, reverse=True)) + r")\b")
# what kind of failure the report describes: features of the report, so the ranker learns when a fix lies below
# the Python layer (a crash in a kernel) and when in it (an exception a wrapper raises)
CUES: dict[str, re.Pattern[str]] = {
    "cue_crash": re.compile(r"segmentation fault|segfault|core dumped|sigsegv|sigabrt|aborted|abort\(\)|"
                            r"crash|floating point exception|illegal instruction|fatal python error", re.I),
    "cue_check_failed": re.compile(r"check failed|\bCHECK\b|DCHECK|assertion .* failed|internal assert", re.I),
    "cue_memory": re.compile(r"bad_alloc|heap-buffer-overflow|out of bounds|out-of-bounds|buffer overflow|"
                             r"null pointer|nullptr|use after free|memory corruption|overflow", re.I),
    "cue_hang": re.compile(r"\bhang|hangs|deadlock|stuck|never (?:returns|finishes)|freez", re.I),
    "cue_wrong_result": re.compile(r"wrong (?:result|output|value|answer)|incorrect|inconsistent|different (?:result|output)|"
                                   r"mismatch|\bnan\b|\binf\b|not equal|should be|expected .* (?:got|but)", re.I),
    "cue_gpu": re.compile(r"\bcuda\b|\bgpu\b|cudnn|\.cuda\(|device=.cuda", re.I),
    "cue_tflite": re.compile(r"tflite|tf\.lite|tensorflow lite|interpreter", re.I),
    "cue_compile": re.compile(r"torch\.compile|dynamo|inductor|torch\.export|aot_autograd|fx graph|xla|jit_compile|"
                              r"tf\.function|autograph", re.I),
    "cue_gradient": re.compile(r"gradient|backward|autograd|\bgrad\b|GradientTape", re.I),
    "cue_dataset": re.compile(r"tf\.data|dataset|dataloader|iterator", re.I),
    "cue_security": re.compile(r"\bCVE-|vulnerab|malicious|attacker|denial of service|undefined behavio", re.I),
    "cue_shape": re.compile(r"\bshape\b|dimension|rank|broadcast", re.I),
    "cue_dtype": DTYPE_WORD,
}
ERROR_LINE = re.compile(r"^\s*(?:\w+\.)*(\w*(?:Error|Exception|Warning|Failure))\b:?\s*(.*)$", re.M)


@dataclass(frozen=True)
class ReportEvidence:
    """A report read for searching files."""

    framework: str
    title_words: tuple[str, ...]
    text_words: tuple[str, ...]  # the prose
    code_words: tuple[str, ...]  # the snippet and other code blocks
    error_words: tuple[str, ...]  # error lines, tracebacks and logs
    frames: tuple[str, ...]  # framework files of the tracebacks, innermost (the raising one) first
    names: tuple[str, ...]  # public names used, as the API exports them ('nn.conv2d', 'torch.distributions.Gamma')
    leaf_names: tuple[str, ...]  # classes and functions named (the last part of a dotted name, CamelCase words)
    message_shingles: frozenset[int]  # of the errors and warnings it quotes
    snake_names: frozenset[str] = frozenset()  # the leaf names in snake_case (Conv2DTranspose -> conv2d_transpose)
    named_ops: tuple[str, ...] = ()  # ops it names as ops ([Op:ResizeBilinear], raw_ops.X, aten::x, BuiltinOperator_X)
    dtypes: frozenset[str] = frozenset()  # dtypes it uses, as kernels register them ('half', 'int64')
    cues: tuple[tuple[str, float], ...] = ()  # the failure it describes (crash, check failed, hang, wrong result, ...)
    python_exception: bool = False  # its innermost traceback frame is framework Python (the wrapper raised)


def read_report(issue: Issue, extraction: Extraction, framework: str) -> ReportEvidence:
    from sftl.extract.text import segments

    body = issue.body or ""
    prose: list[str] = []
    code: list[str] = []
    errors: list[str] = []
    for seg in segments(body):
        if seg.source == "prose":
            prose.append(seg.text)
        elif "Traceback (most recent call last)" in seg.text or ERROR_LINE.search(seg.text) and not _is_code(seg.text):
            errors.append(seg.text)
        else:
            code.append(seg.text)
    if extraction.snippet is not None and extraction.snippet.code not in code:
        code.append(extraction.snippet.code)
    if extraction.error_line:
        errors.append(extraction.error_line)
    everything = f"{issue.title}\n{body}"
    frames = _frames(everything, extraction)
    names, leaves = _names(everything, framework)
    quoted = [m.group(0) for m in ERROR_LINE.finditer("\n".join([*errors, *prose]))]
    return ReportEvidence(
        framework=framework,
        title_words=tuple(word_list(issue.title)),
        text_words=tuple(word_list("\n".join(prose))),
        code_words=tuple(word_list("\n".join(code))),
        error_words=tuple(word_list("\n".join(errors))),
        frames=frames,
        names=names,
        leaf_names=leaves,
        message_shingles=frozenset(message_shingles("\n".join(quoted))),
        snake_names=frozenset(snake_case(n) for n in leaves),
        named_ops=tuple(dict.fromkeys(next(filter(None, m.groups())) for m in NAMED_OP.finditer(everything))),
        dtypes=frozenset(DTYPES[m.group(1).lower()] for m in DTYPE_WORD.finditer(everything.lower())),
        cues=tuple((name, float(bool(pattern.search(everything)))) for name, pattern in CUES.items()),
        python_exception=bool(frames) and frames[0].endswith(".py") and bool(errors),
    )


def snake_case(name: str) -> str:
    """'BeamSearchDecoder' -> 'beam_search_decoder', 'Conv2DTranspose' -> 'conv2d_transpose', 'max_pool' stays."""
    out = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
    return re.sub(r"(?<=\d)_d(?=_|$)", "d", out)


def _is_code(text: str) -> bool:
    return bool(re.search(r"^\s*(?:import |from \S+ import |def |class |\w+\s*=)", text, re.M))


def _frames(text: str, extraction: Extraction) -> tuple[str, ...]:
    """Framework files the report's tracebacks run through, innermost first, each once."""
    found = [path for path, _, _ in frame_locations(text, extraction)]
    for m in CXX_FRAME.finditer(text):  # C++ locations in log lines and check failures
        found.append(m.group(1))
    return tuple(dict.fromkeys(found))


def frame_locations(text: str, extraction: Extraction) -> list[tuple[str, int | None, str]]:
    """The framework frames of a report's tracebacks as (path, line, function), innermost (the raising one) first:
    the chained cause's too, and `File "..."` lines of logs the traceback parser did not take as one."""
    found: list[tuple[str, int | None, str]] = []
    traces = parse_tracebacks(text)
    if extraction.traceback is not None and extraction.traceback not in traces:
        traces.insert(0, extraction.traceback)
    for tb in traces:
        chain = []
        cur: Traceback | None = tb
        while cur is not None:  # the chain's last exception is the one raised: its frames first
            chain.append(cur)
            cur = cur.cause
        for t in chain:
            for frame in reversed(t.frames):
                path = frame.repo_path or map_frame_path(frame.path)
                if path:
                    found.append((path, frame.line, frame.function or ""))
    for m in FILE_LINE.finditer(text):
        path = map_frame_path(m.group(1))
        if path:
            found.append((path, int(m.group(2)), m.group(3) or ""))
    return found


def _names(text: str, framework: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    names: list[str] = []
    leaves: list[str] = []
    for m in DOTTED.finditer(text):
        prefix, rest = ALIASES.get(m.group(1)), m.group(2)
        if prefix is None or (framework == "pytorch" and prefix in ("tf", "keras")):
            continue
        if prefix == "tf":
            names.append(rest)  # tf_export names leave out 'tf.'
        elif prefix == "keras":
            names.append(f"keras.{rest}")
        else:
            names.append(f"{prefix}.{rest}")
        leaves.append(rest.rsplit(".", 1)[-1])
    for m in NAME_LIKE.finditer(text):
        leaves.append(m.group(1))
    return tuple(dict.fromkeys(names)), tuple(dict.fromkeys(x for x in leaves if len(x) > 2))
