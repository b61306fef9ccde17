"""Our MME method: route the parsed error to the ranker of its kind (attribute, module attribute, missing module, imported name)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sftl.localize.mme.attribute import _attribute
from sftl.localize.mme.evidence import _evidence, guess_framework, parse_missing
from sftl.localize.mme.modules import _import_name, _module_attribute, _no_module
from sftl.localize.pycode import Code
from sftl.model import Extraction, Issue, Localization, Outcome, Suspect
from sftl.sources import SourceProvider


@dataclass
class _Ranking:
    suspects: list[Suspect] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def localize_sftl(
    issue: Issue, extraction: Extraction, source: SourceProvider | None, top: int = 10
) -> Localization:
    """Our method: resolve the owner's definition and hierarchy, cover every MME variant, abstain on user errors."""
    framework = (source.framework if source else None) or guess_framework(extraction, issue)
    ev = _evidence(extraction, framework, issue, scan=True)
    if ev is None:
        return Localization("sftl", (), Outcome.ABSTAINED, "no traceback or error line to read")
    missing = parse_missing(ev.message)
    if missing is None:
        return Localization("sftl", (), Outcome.ABSTAINED, f"the error is not a missing-module error: {ev.message[:120]}")
    if source is None:
        return Localization("sftl", (), Outcome.SKIPPED, "no framework source available")
    code = Code(source)
    version = source.version or "the reported version"
    if missing.module and missing.module.split(".")[0] == "tensorflow_core":
        # TF 1.15-2.1 wheels installed the package as tensorflow_core; the repository says tensorflow
        missing = replace(missing, module="tensorflow" + missing.module[len("tensorflow_core") :])
        if missing.kind == "no-module":
            missing = replace(missing, name=missing.module or missing.name)
    if missing.kind in ("attribute", "type-attribute", "overload"):
        return _attribute(code, ev, missing, version, top, issue, framework)
    if missing.kind == "module-attribute":
        return _module_attribute(code, ev, missing, version, top, framework, issue)
    if missing.kind == "no-module":
        return _no_module(code, ev, missing, version, top, framework)
    return _import_name(code, ev, missing, version, top, framework)
