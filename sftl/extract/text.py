"""A report's text made readable (control bytes, HTML-only bodies, size) and cut into prose and code segments (fenced, indented)."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

MAX_CHARS = 1_000_000  # longer bodies are cut; the problem is reported, nothing raises

# --------------------------------------------------------------------------------------------
# input hygiene
# --------------------------------------------------------------------------------------------

_CTRL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_TAG = re.compile(r"<[^>]{0,500}>")


def clean_text(text: object, what: str, problems: list[str]) -> str:
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


def non_english(text: str) -> bool:
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
