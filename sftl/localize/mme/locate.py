"""Our MME method: pick the release's Python files, read the error (or a cut traceback), and route it to the ranker of its kind."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from sftl.localize.mme.attribute import attribute_patterns, locate_attribute
from sftl.localize.mme.evidence import (
    FrameEvidence,
    frame_source,
    guess_framework,
    localization_of,
    make_suspect,
    parse_missing,
    read_evidence,
)
from sftl.localize.mme.foreign import foreign_package
from sftl.localize.mme.modules import import_name, module_attribute, no_module
from sftl.localize.pycode import Code
from sftl.model import Extraction, Issue, Localization, Outcome, Suspect
from sftl.sources import LayeredSource, PythonFilesOf, SourceProvider


@dataclass
class _Ranking:
    suspects: list[Suspect] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def python_files_of_the_era(source: SourceProvider) -> SourceProvider:
    """The Python files an MME is about: when no layer is of the report's own release, the cached wheel
    standing for its era (1.10.0 for a 1.10.0a0 build) is read before a stand-in tree of a later release."""
    era = getattr(source, "era_release", None)
    if not isinstance(source, LayeredSource) or era is None:
        return source
    layers = source.layers_at(era)
    if not layers:
        return source
    view = LayeredSource([PythonFilesOf(layers[0]), *source.providers], successors=source.successors)
    view.version = source.version
    view.era_release = era
    view.description = f"Python files of {layers[0].description} (the report's era) over {source.description}"
    return view


def localize_sftl(
    issue: Issue, extraction: Extraction, source: SourceProvider | None, top: int = 10
) -> Localization:
    """Our method: resolve the owner's definition and hierarchy, cover every MME variant, abstain on user errors."""
    framework = (source.framework if source else None) or guess_framework(extraction, issue)
    ev = read_evidence(extraction, framework, issue, scan=True, keep_frames=True)
    if ev is None:
        return Localization("sftl", (), Outcome.ABSTAINED, "no traceback or error line to read")
    missing = parse_missing(ev.message)
    if missing is None and not ev.message and source is not None:
        cut = _cut_traceback(Code(python_files_of_the_era(source)), ev, issue)
        if cut is not None:
            return cut
    if missing is None:
        if not ev.message:
            return Localization("sftl", (), Outcome.ABSTAINED, "the traceback ends before its error line, and its frames do not show the missing name")
        return Localization("sftl", (), Outcome.ABSTAINED, f"the error is not a missing-module error: {ev.message[:120]}")
    if source is None:
        return Localization("sftl", (), Outcome.SKIPPED, "no framework source available")
    source = python_files_of_the_era(source)
    code = Code(source)
    note = ""
    guessed = extraction.environment.version is None and missing.kind in ("attribute", "type-attribute")
    if guessed and missing.owner and not foreign_package(missing, ev, issue, framework):
        # one pass over the files for this check and the searches the attribute ranker makes
        code.defer_prefetch(attribute_patterns(missing.owner, missing.name, missing.suggestion))
        later = _release_that_has(code, source, missing.owner)
        if later is not None:
            note = (
                f" (read at {later.version}: the report names no version, and class {missing.owner} first appears "
                f"after {source.version}, the release guessed from its date)"
            )
            source, code = later, Code(later)
    version = source.version or "the reported version"
    if missing.module and missing.module.split(".")[0] == "tensorflow_core":
        # TF 1.15-2.1 wheels installed the package as tensorflow_core; the repository says tensorflow
        missing = replace(missing, module="tensorflow" + missing.module[len("tensorflow_core") :])
        if missing.kind == "no-module":
            missing = replace(missing, name=missing.module or missing.name)
    if missing.kind in ("attribute", "type-attribute", "overload"):
        loc = locate_attribute(code, ev, missing, version, top, issue, framework)
    elif missing.kind == "module-attribute":
        loc = module_attribute(code, ev, missing, version, top, framework, issue)
    elif missing.kind == "no-module":
        loc = no_module(code, ev, missing, version, top, framework)
    else:
        loc = import_name(code, ev, missing, version, top, framework)
    return replace(loc, reason=loc.reason + note) if note else loc


_MISSING_WORDS = re.compile(r"(?i)attributeerror|importerror|modulenotfounderror|has no attribute|no module named|cannot import")


def _cut_traceback(code: Code, ev: FrameEvidence, issue: Issue) -> Localization | None:
    """A traceback cut before its error line, read from its frames' source lines and the title: the innermost
    framework frame whose line reads a name the title names (the title saying it is a missing-name error)."""
    title = issue.title[:300]  # a title is short; a pasted wall of text is no title to read names from
    if not _MISSING_WORDS.search(title):
        return None
    quoted = re.findall(r"[`'\"]([A-Za-z_][\w.]*)[`'\"]", title)
    words = re.findall(r"\b([A-Za-z_]\w*(?:\.\w+)+|\w*_\w+|[a-z]+[A-Z]\w*|[A-Z][a-z]+[A-Z]\w*)\b", title)
    names = [n.rsplit(".", 1)[-1] for n in dict.fromkeys(quoted + words) if len(n.rsplit(".", 1)[-1]) >= 3]
    names = [n for n in names if not _MISSING_WORDS.fullmatch(n)]
    frames = [(n, f, p) for n, f, p in reversed(ev.framework_frames) if f.function not in ("__getattr__", "__getattribute__")]
    for num, frame, path in frames:
        line = frame_source(code, path, frame)
        for name in names:
            if re.search(rf"(\.|\bimport\s+|\bimport\b.*\b){re.escape(name)}\b", line):
                out = [make_suspect(path, 0.5, f"the traceback ends before its error line; the title names {name}, which traceback frame {num} ({frame.function}) reads: `{line.strip()[:80]}`")]
                for rank, (n2, f2, p2) in enumerate(x for x in frames if x[0] != num):
                    out.append(make_suspect(p2, 0.2 / (rank + 1), f"traceback frame {n2} ({f2.function}) leads to it"))
                return localization_of(out, 10)
    return None


def _release_that_has(code: Code, source: SourceProvider, owner: str) -> SourceProvider | None:
    """The next cached release, when the report's class is not in the release guessed from its date but is there."""
    successors = getattr(source, "successors", None) or []
    pattern = rf"^\s*class\s+{re.escape(owner)}\b"
    if not successors or code.grep(pattern):
        return None
    later = successors[0]
    if not Code(later).grep(pattern):
        return None
    view = LayeredSource([PythonFilesOf(later), source])
    view.version = later.version
    view.description = f"Python files of {later.description} over {source.description}"
    return view
