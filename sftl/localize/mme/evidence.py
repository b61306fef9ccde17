"""What a missing-module error says and where it was raised: the parsed message, the framework frames, shared scoring helpers."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sftl.localize.pycode import FRAMEWORK_PACKAGES, Code
from sftl.model import Extraction, Frame, Issue, Localization, Outcome, Side, Suspect, Traceback

BUILTIN_OWNERS = {
    "NoneType", "int", "float", "str", "bytes", "list", "dict", "tuple", "set", "bool", "function",
    "method", "builtin_function_or_method", "module", "type", "object", "generator", "property",
}  # fmt: skip


_ERROR_RE = re.compile(r"^\s*(?:[\w.]+\.)?(?P<exc>\w*(?:Error|Exception))\s*:\s*(?P<msg>.*)$")


_SUGGEST_RE = re.compile(r"Did you mean:?\s*'?(?P<s>[\w.]+)'?\s*\??")


_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("type-attribute", re.compile(r"type object '(?P<owner>[\w.]+)' has no attribute '(?P<name>[^']+)'")),
    (
        "module-attribute",
        re.compile(r"(?P<partial>partially initialized )?module '(?P<module>[\w.]+)' has no attribute '(?P<name>[^']+)'"),
    ),
    ("attribute", re.compile(r"'(?P<owner>[\w.<>]+)' object has no attribute '(?P<name>[^']+)'")),
    ("overload", re.compile(r"underlying op of '(?P<module>[\w.]+)' has no overload name '(?P<name>[^']+)'")),
    ("no-module", re.compile(r"No module named '?(?P<module>[\w.]+)'?")),
    (
        "import-name",
        re.compile(r"cannot import name '(?P<name>\w+)' from (?P<partial>partially initialized module )?'(?P<module>[\w.]+)'"),
    ),
    ("import-name", re.compile(r"cannot import name '?(?P<name>\w+)'?")),
    ("attribute", re.compile(r"'(?P<owner>[\w.]+)'(?: '[^']*')? object has no attribute '(?P<name>[^']+)'")),
    ("attribute", re.compile(r"'(?P<owner>[\w.]+)' has no attribute '(?P<name>[^']+)'")),
)


@dataclass(frozen=True)
class Missing:
    """What the final error line says is missing."""

    kind: str  # attribute | type-attribute | module-attribute | overload | no-module | import-name
    name: str  # the missing attribute / module / imported name
    owner: str | None = None  # class name for attribute kinds
    module: str | None = None  # dotted module for module kinds
    suggestion: str | None = None  # the interpreter's "Did you mean"
    circular: bool = False  # "partially initialized module"
    owner_module: str | None = None  # the dotted prefix of a qualified owner ('triton.language' of 'triton.language.constexpr')


def parse_missing(message: str) -> Missing | None:
    """Read the missing owner and name from an error message (with or without the `XError:` prefix)."""
    msg = message.strip().splitlines()[-1] if message.strip() else ""
    m = _ERROR_RE.match(msg)
    if m:
        msg = m.group("msg")
    sug = _SUGGEST_RE.search(msg)
    suggestion = sug.group("s") if sug else None
    for kind, rx in _PATTERNS:
        hit = rx.search(msg)
        if not hit:
            continue
        g = hit.groupdict()
        if kind == "no-module":
            return Missing(kind, name=g["module"], module=g["module"])
        owner = g.get("owner")
        owner_module = None
        if owner and "." in owner:
            owner_module, owner = owner.rsplit(".", 1)
        return Missing(
            kind,
            name=g["name"],
            owner=owner,
            module=g.get("module"),
            suggestion=suggestion,
            circular=bool(g.get("partial")),
            owner_module=owner_module,
        )
    return None


_SITE_RE = re.compile(r"(?:site|dist)-packages[/\\](.+)$")


def frame_repo_path(frame: Frame, framework: str | None) -> str | None:
    """The repository-relative path of a frame inside the framework, else None."""
    if frame.repo_path:
        return frame.repo_path
    path = frame.path.replace("\\", "/")
    packages = [p for fw, pkgs in FRAMEWORK_PACKAGES.items() if framework in (None, fw) for p in pkgs]
    site = _SITE_RE.search(path)
    rel = site.group(1) if site else None
    if rel and rel.split("/", 1)[0] in packages and rel.endswith(".py"):
        return _repo_layout(rel)
    # the innermost package folder: a checkout of torchdynamo holds the torchinductor package (.../torchdynamo/torchinductor/ir.py)
    found = max((path.rfind(f"/{pkg}/") for pkg in packages), default=-1)
    if found >= 0 and path.endswith(".py"):
        return _repo_layout(path[found + 1 :])
    return None


def _repo_layout(rel: str) -> str:
    """TF 1.15-2.1 wheels installed the code as tensorflow_core/; the repository (and ground truth) says tensorflow/."""
    return "tensorflow/" + rel[len("tensorflow_core/") :] if rel.startswith("tensorflow_core/") else rel


def guess_framework(extraction: Extraction, issue: Issue) -> str | None:
    if extraction.environment.framework:
        return extraction.environment.framework
    tb = extraction.traceback
    if tb:
        for f in tb.frames:
            rp = frame_repo_path(f, None)
            if rp:
                return "tensorflow" if rp.startswith("tensorflow") else "pytorch"
    text = issue.text.lower()
    if "tensorflow" in text or "import tf" in text or "tf." in text:
        return "tensorflow"
    if "torch" in text:
        return "pytorch"
    return None


@dataclass
class FrameEvidence:
    """Framework frames (innermost last) with their repository paths."""

    frames: list[tuple[int, Frame, str | None]]  # (1-based frame number, frame, repo path or None)
    message: str

    @property
    def framework_frames(self) -> list[tuple[int, Frame, str]]:
        return [(i, f, p) for i, f, p in self.frames if p]

    @property
    def raising(self) -> tuple[int, Frame, str | None] | None:
        """The innermost frame that is not an attribute hook (`__getattr__` raises on its caller's behalf)."""
        for item in reversed(self.frames):
            if item[1].function not in ("__getattr__", "__getattribute__", "<listcomp>", "<genexpr>"):
                return item
        return self.frames[-1] if self.frames else None


def read_evidence(
    extraction: Extraction, framework: str | None, issue: Issue | None = None, scan: bool = False, keep_frames: bool = False
) -> FrameEvidence | None:
    """The frames and the error message; `scan`: when the reported error is not a missing-name error
    (a compiler error wrapping it, a cut traceback), the last line of the report that is one;
    `keep_frames`: frames without any error message (a traceback cut before its last line) still count."""
    tb = extraction.traceback
    message = ""
    frames: list[tuple[int, Frame, str | None]] = []
    if tb is not None:
        # the last exception of a chain is the one reported; frames of the chain's cause come first
        chain: list[Traceback] = []
        cur: Traceback | None = tb
        while cur is not None and len(chain) < 5:
            chain.append(cur)
            cur = cur.cause
        for t in reversed(chain):
            for f in t.frames:
                frames.append((len(frames) + 1, f, frame_repo_path(f, framework)))
        message = f"{tb.exception}: {tb.message}" if tb.exception else tb.message
    if not message and extraction.error_line:
        message = extraction.error_line
    if not message and issue is not None:
        # the extractor found no error line (pasted without its `XError:` prefix, or in prose)
        for line in issue.text.splitlines():
            if parse_missing(line) is not None:
                message = line.strip()
                break
    if scan and issue is not None and (not message or parse_missing(message) is None):
        # `CompilationError: ...` wrapping `AttributeError("'x' object has no attribute 'y'")`, or an
        # error line that is not the final one: the report's last missing-name line says what is missing
        found = [ln.strip() for ln in issue.text.splitlines() if parse_missing(ln) is not None]
        if found:
            message = found[-1]
    if not message:
        return FrameEvidence(frames, "") if keep_frames and frames else None
    return FrameEvidence(frames, message)


def make_suspect(path: str, score: float, reason: str) -> Suspect:
    side = Side.PYTHON if path.endswith(".py") else None
    return Suspect(path=path, score=round(max(0.0, min(1.0, score)), 3), side=side, reason=reason)


def dedupe(items: list[Suspect], top: int) -> tuple[Suspect, ...]:
    best: dict[str, Suspect] = {}
    for s in items:
        if s.path not in best or s.score > best[s.path].score:
            best[s.path] = s
    ranked = sorted(best.values(), key=lambda s: -s.score)
    return tuple(ranked[:top])


def frame_line(code: Code, path: str, frame: Frame) -> int | None:
    return code.find_line(path, frame.line, frame.source)


def frame_source(code: Code, path: str | None, frame: Frame) -> str:
    if frame.source:
        return frame.source
    if path and frame.line:
        text = code.text(path) or ""
        lines = text.splitlines()
        if 0 < frame.line <= len(lines):
            return lines[frame.line - 1]
    return ""


def localization_of(suspects: list[Suspect], top: int, min_score: float = 0.35) -> Localization:
    ranked = dedupe(suspects, top)
    if not ranked or ranked[0].score < min_score:
        return Localization("sftl", ranked, Outcome.ABSTAINED, "no confident suspect")
    return Localization("sftl", ranked, Outcome.LOCATED, f"{ranked[0].path}: {ranked[0].reason}")


def user_frame(ev: FrameEvidence) -> bool:
    """True when the code that asked for the missing name is the user's, not the framework's.

    With no frames at all (only the error line was pasted) nobody can tell, so the same caution applies.
    """
    raising = ev.raising
    return raising is None or raising[2] is None


def calling_frame(code: Code, ev: FrameEvidence, name: str) -> tuple[int, Frame, str, int | None] | None:
    """The innermost framework frame whose line refers to the missing name."""
    rx = re.compile(rf"(\.|\bimport\s+|['\"]){re.escape(name)}\b")
    for num, frame, path in reversed(ev.framework_frames):
        if frame.function in ("__getattr__", "__getattribute__"):
            continue
        text = frame_source(code, path, frame)
        if rx.search(text):
            return num, frame, path, frame_line(code, path, frame)
    return None
