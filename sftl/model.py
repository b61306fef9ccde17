"""Frozen dataclasses and small enums that cross stage boundaries; no I/O."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Category(str, enum.Enum):
    """Screening categories of the published method."""

    MME = "mme"  # missing-module errors: AttributeError / No module named, raised in framework code
    GCRDE = "gcrde"  # GPU/CPU result discrepancies
    OTHER = "other"


class Device(str, enum.Enum):
    CPU = "cpu"
    GPU = "gpu"


class Outcome(str, enum.Enum):
    """What happened to one issue at one stage; a failure is a value, not an exception."""

    # localization
    LOCATED = "located"
    ABSTAINED = "abstained"
    SKIPPED = "skipped"
    # replay
    REPRODUCED = "reproduced"
    DIFFERENT_ERROR = "different-error"
    NO_ERROR = "no-error"
    DISCREPANCY = "discrepancy"
    NO_DISCREPANCY = "no-discrepancy"
    TIMEOUT = "timeout"
    RESOURCE_LIMIT = "resource-limit"
    ENV_UNAVAILABLE = "env-unavailable"
    NO_SNIPPET = "no-snippet"
    NO_DEVICE = "no-device"


class Side(str, enum.Enum):
    """Which side of the framework a suspect file belongs to."""

    CPU = "cpu"
    CUDA = "cuda"
    PYTHON = "python"
    SHARED = "shared"  # device-generic C++ (e.g. aten/src/ATen/native/Foo.cpp)


@dataclass(frozen=True)
class Comment:
    id: int
    author: str
    body: str
    created_at: str = ""
    updated_at: str = ""


@dataclass(frozen=True)
class Issue:
    """One GitHub issue as sftl sees it, whichever intake produced it."""

    repo: str  # "owner/name"
    number: int
    title: str
    body: str
    state: str = "open"
    labels: tuple[str, ...] = ()
    author: str = ""
    created_at: str = ""
    updated_at: str = ""
    comments_count: int = 0
    comments: tuple[Comment, ...] = ()
    is_pull_request: bool = False
    html_url: str = ""

    @property
    def url(self) -> str:
        return self.html_url or f"https://github.com/{self.repo}/issues/{self.number}"

    @property
    def key(self) -> str:
        return f"{self.repo}#{self.number}"

    @property
    def fingerprint(self) -> str:
        """A hash of what the stages read: a stored result is reused only while this is unchanged."""
        import hashlib

        h = hashlib.sha256()
        for part in (self.title, self.body, *(c.body for c in self.comments)):
            h.update(part.encode("utf-8", "replace"))
            h.update(b"\0")
        return h.hexdigest()[:16]

    @property
    def text(self) -> str:
        """Title, body and comments: everything a reader of the thread sees."""
        parts = [self.title, self.body]
        parts.extend(c.body for c in self.comments)
        return "\n\n".join(p for p in parts if p)


@dataclass(frozen=True)
class Environment:
    """The environment a report describes; `missing` names what the text did not say."""

    framework: str | None = None  # "pytorch" | "tensorflow"
    version: str | None = None
    python: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    os: str | None = None
    gpu: str | None = None
    missing: tuple[str, ...] = ()
    # the version as the report's template field wrote it, when it says more than `version`
    # ('master (Dec 2018)', '1.4/1.5 era (Mar 2020)', 'r2.2 (built from source)'): sftl.releases reads it
    version_text: str | None = None


@dataclass(frozen=True)
class CodeBlock:
    """One candidate piece of code in a report, with why it was (or was not) chosen."""

    code: str
    kind: str  # "python" | "output" | "traceback" | "shell" | "log" | "cpp" | "unknown"
    source: str  # "fenced" | "indented" | "doctest" | "inline"
    parses: bool = False
    reason: str = ""


@dataclass(frozen=True)
class Snippet:
    code: str
    reason: str
    candidates: tuple[CodeBlock, ...] = ()


@dataclass(frozen=True)
class Frame:
    path: str  # as printed
    line: int | None
    function: str
    source: str = ""
    repo_path: str | None = None  # repository-relative path when the frame lies inside a framework


@dataclass(frozen=True)
class Traceback:
    frames: tuple[Frame, ...]
    exception: str  # e.g. "AttributeError"
    message: str
    cause: Traceback | None = None  # the earlier exception of a chain, if any
    chain_kind: str = ""  # "cause" | "context" | ""

    @property
    def framework_frames(self) -> tuple[Frame, ...]:
        return tuple(f for f in self.frames if f.repo_path)


@dataclass(frozen=True)
class Extraction:
    """What the extract stage read from one report."""

    snippet: Snippet | None
    traceback: Traceback | None
    environment: Environment
    error_line: str | None = None  # the final "Type: message" line, even without a full traceback
    apis: tuple[str, ...] = ()  # framework calls named in the snippet/text, e.g. "torch.histc"
    problems: tuple[str, ...] = ()  # what could not be read, in words


@dataclass(frozen=True)
class Screening:
    category: Category
    scores: dict[str, float]  # per category
    evidence: tuple[str, ...] = ()  # the words/features that decided
    method: str = "keywords"  # "keywords" | "learned"
    abstained: bool = False
    reason: str = ""


@dataclass(frozen=True)
class ReplayRun:
    device: Device
    outcome: Outcome
    exception: str | None = None
    message: str | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ReplayEnvironment:
    framework: str | None
    version: str | None
    python: str | None
    backend: str | None  # "current" | "venv" | "conda" | ...
    name: str | None
    reason: str = ""


@dataclass(frozen=True)
class Repair:
    """One change made to a reported snippet so that it runs; none changes what the code computes."""

    kind: str  # "prompts" | "notebook" | "magic" | "shell" | "print-statement" | "import" | "joined-blocks"
    detail: str


@dataclass(frozen=True)
class Replay:
    environment: ReplayEnvironment
    runs: tuple[ReplayRun, ...]
    verdict: Outcome
    reason: str
    first_divergent_op: str | None = None
    repairs: tuple[Repair, ...] = ()  # what was changed in the report's snippet before it ran
    packages: tuple[str, ...] = ()  # packages beside the framework installed for the snippet ("name==version")
    code: str = ""  # the code that ran (the snippet after its repairs)


@dataclass(frozen=True)
class Suspect:
    path: str  # repository-relative
    score: float
    side: Side | None
    reason: str
    # what the ranker read about this file (role, side, call distance, ...: sftl/localize/candidates/features.py), name -> value
    features: dict[str, float] = field(default_factory=dict, compare=False, hash=False)
    # the functions of this file to read first, best first (at most ten; empty where none was ranked)
    functions: tuple[SuspectFunction, ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class SuspectFunction:
    """A function, method or kernel inside a suspect file: its qualified name as the language spells it
    (`Class.method`, `ns::Class::Method`), its first and last line in the release read, score and reason."""

    name: str
    start: int
    end: int
    score: float
    reason: str


@dataclass(frozen=True)
class Localization:
    method: str
    suspects: tuple[Suspect, ...]
    outcome: Outcome
    reason: str
    release: str = ""  # the release whose files were read ("2.6.0"), where known: the tag functions' lines are of


@dataclass(frozen=True)
class FixRecord:
    """One fixed issue of a tracker: the fix (pull request and/or commit), its date and the source files it changed."""

    repo: str  # "owner/name"
    issue: int | None  # the issue it fixed (None: a fix known only by its PR/commit)
    pr: int | None
    commit: str | None
    title: str
    fixed_on: str  # "YYYY-MM" or "YYYY-MM-DD"
    files: tuple[str, ...]
    ops: tuple[str, ...] = ()
    kind: str = "other"  # gcrde, crash, numerics, mme, other
    device: str | None = None  # cuda, cpu, mps, both, ...
    body: str = ""
    evidence: str = ""
    issue_created_at: str = ""  # when the fixed issue was filed, when known (a crawl knows it)


@dataclass(frozen=True)
class Report:
    issue: Issue
    extraction: Extraction
    screening: Screening
    localization: Localization | None
    replay: Replay | None = None


def to_jsonable(value: Any) -> Any:
    """Dataclasses, enums and tuples to plain JSON types (for --json, the store and reports)."""
    import dataclasses

    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value
