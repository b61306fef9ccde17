"""The published SFTL method: traceback files, their imports scored by Needleman–Wunsch similarity to the owner, a class check of the top three."""

from __future__ import annotations

from sftl.localize.mme.evidence import dedupe, guess_framework, make_suspect, parse_missing, read_evidence
from sftl.localize.nw import nw_similarity
from sftl.localize.pycode import ClassRef, Code, module_of
from sftl.model import Extraction, Issue, Localization, Outcome, Suspect
from sftl.sources import SourceProvider


def localize_paper(
    issue: Issue, extraction: Extraction, source: SourceProvider | None, top: int = 10
) -> Localization:
    """The published method: NW similarity of imported modules to the owner, then a class check of the top 3."""
    framework = (source.framework if source else None) or guess_framework(extraction, issue)
    ev = read_evidence(extraction, framework, issue)
    if ev is None:
        return Localization("paper", (), Outcome.ABSTAINED, "no traceback or error line to read")
    missing = parse_missing(ev.message)
    if missing is None:
        return Localization("paper", (), Outcome.ABSTAINED, f"the error is not a missing-module error: {ev.message[:120]}")
    if source is None:
        return Localization("paper", (), Outcome.SKIPPED, "no framework source available")
    owner = missing.owner or (missing.module or missing.name).rsplit(".", 1)[-1]
    code = Code(source)
    suspects_files = []
    for _, _, path in ev.framework_frames:
        if path not in suspects_files and code.tree(path) is not None:
            suspects_files.append(path)
    if not suspects_files:
        return Localization("paper", (), Outcome.ABSTAINED, "no framework file on the traceback (or none in the source)")
    # (score, suspect file, imported module, module file)
    scored: list[tuple[float, str, str, str]] = []
    for path in suspects_files:
        for mod, mod_file in _imported_modules(code, path):
            score = nw_similarity(owner, mod.rsplit(".", 1)[-1])
            if score > 0:  # a module with nothing in common with the owner is no candidate
                scored.append((score, path, mod, mod_file))
    scored.sort(key=lambda t: (-t[0], suspects_files.index(t[1])))
    seen: set[str] = set()
    top3: list[tuple[float, str, str, str]] = []
    for item in scored:
        if item[3] in seen:
            continue
        seen.add(item[3])
        top3.append(item)
        if len(top3) == 3:
            break
    out: list[Suspect] = []
    for score, path, mod, mod_file in top3:
        classes = code.classes(mod_file)
        if not classes:
            out.append(make_suspect(mod_file, score * 0.5, f"{path} imports {mod}; NW {score:.2f} vs {owner}; no class to check"))
            continue
        cname = max(classes, key=lambda c: nw_similarity(owner, c))
        cls = ClassRef(mod_file, classes[cname])
        lacks = missing.name not in code.members(cls)
        has_suggestion = bool(missing.suggestion) and missing.suggestion in code.members(cls)
        verdict = (
            (f"class {cname} defines {missing.suggestion} but not {missing.name}" if has_suggestion else f"class {cname} lacks {missing.name}")
            if lacks
            else f"class {cname} defines {missing.name}"
        )
        out.append(
            make_suspect(
                mod_file,
                (0.5 + 0.5 * score) if lacks else 0.3 * score,
                f"traceback file {path} imports {mod.rsplit('.', 1)[-1]}; NW {score:.2f} vs {owner}; {verdict}",
            )
        )
    for rank, path in enumerate(reversed(suspects_files)):
        out.append(make_suspect(path, 0.1 / (rank + 1), "framework file on the traceback"))
    suspects = dedupe(out, top)
    if not suspects or suspects[0].score < 0.5:
        return Localization("paper", suspects, Outcome.ABSTAINED, "no top-3 module has a class lacking the attribute")
    return Localization("paper", suspects, Outcome.LOCATED, f"{suspects[0].path}: {suspects[0].reason}")


def _imported_modules(code: Code, path: str) -> list[tuple[str, str]]:
    """(module, its file) for the file itself and every module it imports (`from m import obj` counts m)."""
    out: dict[str, str] = {module_of(path): path}
    for target in code.imports(path).values():
        for mod in (target, target.rpartition(".")[0]):
            if not mod or mod in out:
                continue
            mod_file = code.module_path(mod)
            if mod_file:
                out[mod] = mod_file
                break
    return list(out.items())
