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
    )


def snake_case(name: str) -> str:
    """'BeamSearchDecoder' -> 'beam_search_decoder', 'Conv2DTranspose' -> 'conv2d_transpose', 'max_pool' stays."""
    out = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
    return re.sub(r"(?<=\d)_d(?=_|$)", "d", out)


def _is_code(text: str) -> bool:
    return bool(re.search(r"^\s*(?:import |from \S+ import |def |class |\w+\s*=)", text, re.M))


def _frames(text: str, extraction: Extraction) -> tuple[str, ...]:
    """Framework files the report's tracebacks run through, innermost first, each once."""
    found: list[str] = []
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
                    found.append(path)
    for m in FILE_LINE.finditer(text):  # frames in logs the traceback parser did not take as one
        path = map_frame_path(m.group(1))
        if path:
            found.append(path)
    for m in CXX_FRAME.finditer(text):  # C++ locations in log lines and check failures
        found.append(m.group(1))
    return tuple(dict.fromkeys(found))


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
