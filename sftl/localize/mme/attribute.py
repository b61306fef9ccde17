"""Missing attributes of objects and classes: the class that lacks the name, or the callers that passed the wrong object."""

from __future__ import annotations

import re

from sftl.localize.mme.classes import (
    OwnerCandidate,
    class_evidence,
    defining_class,
    is_dynamic_name,
    member_similarity,
    owner_candidates,
    receiver_classes,
    sibling_votes,
    user_call_verdict,
)
from sftl.localize.mme.evidence import (
    BUILTIN_OWNERS,
    FrameEvidence,
    Missing,
    calling_frame,
    dedupe,
    frame_line,
    frame_source,
    localization_of,
    make_suspect,
    user_frame,
)
from sftl.localize.mme.foreign import foreign_package, raised_in, rank_referrers
from sftl.localize.mme.models import model_suspects, python_type
from sftl.localize.mme.releases import attribute_history, neighbours
from sftl.localize.mme.state import skipped_setter, unpickled_without_default
from sftl.localize.pycode import ClassRef, Code
from sftl.model import Frame, Issue, Localization, Outcome, Suspect

# `torch.optim.lr_scheduler.ChainedScheduler(` or `from torch.optim.lr_scheduler import (X, ChainedScheduler)`:
# the framework module a snippet reaches a class through
_QUALIFIED = r"\b((?:torch|tensorflow|tf|keras)(?:\.\w+)*)\.{owner}\b"
_IMPORTED = r"^\s*from\s+((?:torch|tensorflow|tf|keras)(?:\.\w+)*)\s+import\s+\(?[^\n]*\b{owner}\b"


def _owner_newer_than_sources(code: Code, issue: Issue | None, owner: str, name: str, version: str) -> Suspect | None:
    """A class the sources at hand lack entirely, yet the report holds an instance of it, built from a framework
    module its snippet names (and does not define itself): the reporter's build (a nightly, a release after
    the sources) has the class, so the module's file in that build is where it lacks `name`. Else None."""
    if not owner or issue is None or not re.fullmatch(r"[A-Z]\w*", owner):
        return None
    text = issue.text
    if re.search(rf"^\s*class\s+{re.escape(owner)}\b", text, re.M):
        return None  # the user's own class
    modules = [m.group(1) for m in re.finditer(_QUALIFIED.format(owner=re.escape(owner)), text)]
    modules += [m.group(1) for m in re.finditer(_IMPORTED.format(owner=re.escape(owner)), text, re.M)]
    for dotted in dict.fromkeys(modules):
        if dotted in ("tf", "keras"):
            continue
        path = code.module_path("tensorflow" + dotted[2:] if dotted.startswith("tf.") else dotted, stubs=False)
        if path is None:
            continue
        return make_suspect(path, 0.55, f"the snippet builds a {owner} from {dotted}, which the {version} sources at hand do "
                        f"not define: the reporter's build is newer than them, and its {path} defines {owner} without {name}")
    return None


def locate_attribute(
    code: Code, ev: FrameEvidence, missing: Missing, version: str, top: int, issue: Issue | None = None, framework: str | None = None
) -> Localization:
    name = missing.name
    owner = missing.owner
    if owner not in BUILTIN_OWNERS:
        # the whole-tree searches this may need, done in one pass (only run when first needed)
        code.defer_prefetch(attribute_patterns(owner, name, missing.suggestion))
    caller = calling_frame(code, ev, name)
    raising = ev.raising
    hook = ev.frames[-1] if ev.frames and ev.frames[-1][1].function in ("__getattr__", "__getattribute__") else None
    candidates: list[OwnerCandidate] = []
    if missing.kind == "overload" or (owner is None and hook and hook[2]):
        # the message names no class: the class whose __getattr__ raised is the owner
        if hook and hook[2]:
            line = frame_line(code, hook[2], hook[1])
            klass, _ = code.enclosing(hook[2], line or 0)
            if klass is not None:
                candidates.append(OwnerCandidate(ClassRef(hook[2], klass), f"{klass.name}.__getattr__ raised it (frame {hook[0]})", 1.0))
        owner = candidates[0].cls.name if candidates else owner
    receivers: list[OwnerCandidate] = []
    if caller is not None:
        num, frame, cpath, cline = caller
        receivers = receiver_classes(code, cpath, cline, frame_source(code, cpath, frame), name)
    if owner and owner not in BUILTIN_OWNERS:
        named = [r for r in receivers if r.cls.name == owner]
        candidates.extend(named or owner_candidates(code, ev, owner))
    # a receiver typed as a base class of the owner (self in Optimizer.__init__ for an SGD) joins in
    others = [r for r in receivers if all(r.cls != c.cls for c in candidates)]
    out: list[Suspect] = []
    package = foreign_package(missing, ev, issue, framework) if owner and owner not in BUILTIN_OWNERS else None
    if package and (missing.owner_module or not candidates) and not (ev.framework_frames and user_frame(ev) and not caller and not raised_in(ev, package)):
        # the owner is another package's class (triton's constexpr): the framework code using it is at fault
        foreign_why = f"{owner} belongs to {package}, not to the framework, and has no {name} there"
        pkg = re.escape(package)
        users = rf"^\s*(?:import\s+{pkg}\b|from\s+{pkg}[\w.]*\s+import\b)"
        ranked = rank_referrers(code, ev, issue, owner or package, name, foreign_why, rf"\.{re.escape(name)}\b(?!\s*=)" if ev.framework_frames else "", users, package)
        if any(r.score >= 0.5 for r in ranked):
            return localization_of(ranked, top, min_score=0.5)
        # no framework file the report points at uses the package: the usual reading (a user error) stands
    if owner in BUILTIN_OWNERS or (owner and not candidates and not others and not missing.suggestion):
        if user_frame(ev):
            newer = _owner_newer_than_sources(code, issue, owner or "", name, version)
            if newer is not None:
                return localization_of([newer], top)
            return Localization("sftl", (), Outcome.ABSTAINED, f"'{owner}' has no '{name}' in user code: a user error, not a framework fault")
        if caller is not None:
            out.append(make_suspect(caller[2], 0.5, f"frame {caller[0]} reads .{name} on a {owner}: the value is not what this code expects"))
        elif raising is not None and raising[2]:
            out.append(make_suspect(raising[2], 0.4, f"frame {raising[0]} ({raising[1].function}) raised it: it got a {owner} where it expected an object with {name}"))
        if owner in BUILTIN_OWNERS or python_type(owner or "") is not None:
            out.extend(model_suspects(code, ev, owner or "", name))
        return localization_of(out, top)
    lacking: list[tuple[OwnerCandidate, list[ClassRef], list[str]]] = []
    having: list[tuple[OwnerCandidate, ClassRef]] = []
    for cand in candidates:
        mro, unresolved = code.mro(cand.cls)
        # `type object 'X' has no attribute`: only what the class itself binds counts, not instance state
        definer = defining_class(code, mro, name, class_level=missing.kind == "type-attribute")
        if definer is None:
            lacking.append((cand, mro, unresolved))
        else:
            having.append((cand, definer))
    if not lacking and not candidates:
        if is_dynamic_name(name) and not user_frame(ev) and ev.framework_frames:
            return localization_of(_caller_chain_unknown(code, ev, name, owner), top)
        # owner unknown in source (a generated class such as `_FooBackward`): the suggestion or receiver leads
        lacking.extend(_fallback_lacking(code, ev, missing, others))
    if not lacking:
        if having:
            cand, definer = having[0]
            where = f"{definer.name} in {definer.path}"
            mro, _ = code.mro(cand.cls)
            unset = skipped_setter(code, mro, definer, name) or unpickled_without_default(
                code, mro, definer, name, issue.text if issue is not None else ev.message
            )
            if unset is not None:
                # defined, but never set on this object: the class that skips it is at fault, whoever asked
                k, unset_why = unset
                out.append(make_suspect(k.path, 0.75, f"{cand.why}; {where} defines {name} as instance state; {unset_why}"))
                if k.path != definer.path:
                    out.append(make_suspect(definer.path, 0.4, f"{where} sets {name} in a method its subclasses override"))
                if caller is not None:
                    out.append(make_suspect(caller[2], 0.25, f"traceback frame {caller[0]} ({caller[1].function}) reads .{name}"))
                return localization_of(out, top)
            if user_frame(ev):
                return Localization(
                    "sftl",
                    (),
                    Outcome.ABSTAINED,
                    f"{owner}.{name} exists in {version} ({where}); the error comes from user code: "
                    "a user error or a different installed version, not a missing definition",
                )
            out.append(make_suspect(definer.path, 0.3, f"{where} defines {name}, yet it was missing at run time (set conditionally or shadowed)"))
            if caller is not None:
                out.append(make_suspect(caller[2], 0.25, f"frame {caller[0]} reads .{name} where it is not set"))
            return Localization("sftl", dedupe(out, top), Outcome.ABSTAINED, f"{owner}.{name} exists in the source ({where}): no confident suspect")
        return Localization("sftl", (), Outcome.ABSTAINED, f"no definition of class {owner!r} found in the {version} source")
    user_note = ""
    weak = False
    if user_frame(ev) and not any(c.weight >= 0.9 for c, _, _ in lacking):
        verdicts = [user_call_verdict(code, c.cls, mro, missing, version) for c, mro, _ in lacking[:4]]
        # a specific user-error explanation (misspelling, a name of a subclass/sibling) wins, then a
        # located verdict, then the generic abstention
        specific = [v for v in verdicts if v.startswith("abstain:") and ("(a user error)" in v or "misspelling" in v)]
        verdict = (specific or [v for v in verdicts if not v.startswith("abstain:")] or verdicts)[0]
        if verdict.startswith("abstain:"):
            hist = attribute_history(neighbours(code.source), code, lacking[0][0].cls, name, missing.suggestion)
            facts = f" ({hist[1]})" if hist else ""
            return Localization("sftl", (), Outcome.ABSTAINED, verdict.split(":", 1)[1].strip() + facts)
        if verdict.startswith("weak:"):
            weak, verdict = True, verdict.split(":", 1)[1].strip()
        user_note = verdict
    dynamic = hook is not None or is_dynamic_name(name)
    history = None
    if caller is not None and not weak:
        first = lacking[0][0].cls
        names_now = frozenset(n for k in lacking[0][1] for n in code.members(k))
        similar = missing.suggestion if missing.suggestion in names_now else None
        if similar is None:
            sim, which = member_similarity(names_now, name)
            similar = which if sim >= 0.5 else None
        history = attribute_history(neighbours(code.source), code, first, name, similar)
        # the owner expects the name when its own code or other framework files use it: then it lost it
        expected = any(code.self_refs(k, name) for k in lacking[0][1]) or any(
            p != caller[2] for p in code.grep(rf"\.{re.escape(name)}\b")
        )
        if history is not None and history[0] != "removed" and not expected:
            # renamed, never there, or only added later: the code still asking for it is the fault
            out.append(make_suspect(caller[2], 0.9, f"traceback frame {caller[0]} ({caller[1].function}) refers to .{name}; {history[1]}: the reference is the fault"))
    # among the classes in the owner's hierarchy, blame the one that should define the name
    total = sum(c.weight for c, _, _ in lacking)
    for cand, mro, unresolved in lacking:
        share = cand.weight / total if total else 1.0
        scored = []
        # stubs of compiled modules (.pyi) tell what exists; they are never the file to fix
        mro = [k for k in mro if not k.path.endswith(".pyi")] or mro
        # siblings only matter when there is more than one class to choose from
        votes, own = sibling_votes(code, name, mro) if len(mro) > 1 else ({}, 0)
        for depth, k in enumerate(mro):
            s, why = class_evidence(code, k, name, missing.suggestion)
            for r in others:
                if r.cls == k and r.weight < 1.0:  # typed by an annotation/constructor, not just `self`
                    s += 2.5
                    why.insert(0, r.why)
            if votes.get(k):
                s += min(4.5, 1.5 * votes[k])
                why.append(f"{votes[k]} other subclass(es) of {k.name} use self.{name} without defining it")
            if depth == 0 and own:
                s += min(2.0, 0.5 * own)
                why.append(f"{own} sibling class(es) define their own {name}")
            scored.append((s + 0.05 * depth, depth, k, why))
        best = max(scored, key=lambda t: t[0])
        if best[0] < 0.5 and dynamic:
            # nothing marks any class, and the name is looked up dynamically (a __getattr__ hook,
            # a dunder, a generated `x0`): it is data the caller expected, so the callers are suspects
            out.extend(_caller_chain(code, ev, name, cand.cls))
            continue
        if best[0] < 0.5:
            # no class is marked: the owner's own definition is the default culprit
            best = scored[0]
        for s, depth, k, why in scored:
            conf = (0.55 + 0.45 * min(1.0, s / 5.0)) if (s, depth) == (best[0], best[1]) else 0.35 * min(1.0, s / 5.0) + 0.1
            chain = " -> ".join(c.name for c in mro[: depth + 1])
            lacks = f"no class in {owner}'s hierarchy ({chain}{' ...' if depth + 1 < len(mro) else ''}) defines {name}"
            extra = f"; bases without source: {', '.join(unresolved)}" if unresolved and depth == 0 else ""
            reason = "; ".join([cand.why, lacks, *why]) + extra + (f"; {user_note}" if user_note and depth == best[1] else "")
            if history is not None and depth == best[1]:
                reason += f"; {history[1]}"
            score = conf * (0.6 + 0.4 * share)
            out.append(make_suspect(k.path, min(0.34, score * 0.55) if weak else score, reason))
    if caller is not None:
        out.append(make_suspect(caller[2], 0.3, f"traceback frame {caller[0]} ({caller[1].function}) refers to .{name}"))
    for num, frame, path in ev.framework_frames[-3:]:
        out.append(make_suspect(path, 0.05, f"traceback frame {num} ({frame.function})"))
    # weak evidence (only user code asked, the framework merely mirrors or calls the name) is still
    # an answer, scored low so that consumers can tell it from a traceback-backed one
    return localization_of(out, top, min_score=0.2 if weak else 0.35)


def attribute_patterns(owner: str | None, name: str, suggestion: str | None) -> list[str]:
    pats = [rf"self\.{re.escape(name)}\b", rf"^\s+def\s+{re.escape(name)}\b"]
    if owner:
        pats.append(rf"^\s*class\s+{re.escape(owner)}\b")
    if suggestion:
        pats.append(rf"^\s*(?:def\s+{re.escape(suggestion)}\b|{re.escape(suggestion)}\s*[:=])")
    return pats


def _chain_frames(code: Code, ev: FrameEvidence, name: str) -> list[tuple[int, Frame, str, str]]:
    """Framework frames from the innermost caller outwards, each with why it is suspect.

    When the innermost caller reads the name generically (`getattr(obj, field)`, the name not on its
    line), it only forwarded an object built further out: the first frame of another file then
    leads, the forwarding file follows.
    """
    frames = [(n, f, p) for n, f, p in reversed(ev.framework_frames) if f.function not in ("__getattr__", "__getattribute__")]
    if not frames:
        return []
    literal = re.compile(rf"(\.|['\"]){re.escape(name)}\b")
    first_num, first, first_path = frames[0]
    out = [(n, f, p, "") for n, f, p in frames]
    if not literal.search(frame_source(code, first_path, first)):
        outer = next((i for i, (_, _, p) in enumerate(frames) if p != first_path), None)
        if outer is not None:
            n, f, p = frames[outer]
            note = (
                f"frame {first_num} ({first.function}) only forwards the object it was given "
                f"(the name is not on its line); frame {n} ({f.function}) in another file supplied it"
            )
            out = [(n, f, p, note)] + [(a, b, c, "") for i, (a, b, c) in enumerate(frames) if i != outer]
    return out


def _caller_chain(code: Code, ev: FrameEvidence, name: str, cls: ClassRef) -> list[Suspect]:
    """Framework frames from the innermost caller outwards, for attributes that are data, not definitions."""
    out: list[Suspect] = []
    for rank, (num, frame, path, note) in enumerate(_chain_frames(code, ev, name)):
        why = (
            f"traceback frame {num} ({frame.function}) asked a {cls.name} for {name!r}, which no class in its "
            "hierarchy is expected to define (looked up dynamically): the caller chain built or passed the wrong object"
        )
        out.append(make_suspect(path, 0.5 / (1 + 0.5 * rank), f"{note}; {why}" if note else why))
    out.append(make_suspect(cls.path, 0.15, f"{cls.name} is defined here and has no {name}"))
    return out


def _caller_chain_unknown(code: Code, ev: FrameEvidence, name: str, owner: str | None) -> list[Suspect]:
    out = []
    for rank, (num, frame, path, note) in enumerate(_chain_frames(code, ev, name)):
        why = f"traceback frame {num} ({frame.function}) asked a {owner} for {name!r}, a name no class defines statically"
        out.append(make_suspect(path, 0.5 / (1 + 0.5 * rank), f"{note}; {why}" if note else why))
    return out


def _fallback_lacking(
    code: Code, ev: FrameEvidence, missing: Missing, receivers: list[OwnerCandidate]
) -> list[tuple[OwnerCandidate, list[ClassRef], list[str]]]:
    out = []
    cands = list(receivers)
    if missing.suggestion:
        pat = rf"^\s*(?:def\s+{re.escape(missing.suggestion)}\b|{re.escape(missing.suggestion)}\s*[:=])"
        tb_files = {p for _, _, p in ev.framework_frames}
        hits = code.grep(pat)
        for p in sorted(hits, key=lambda p: p not in tb_files):
            for cname, node in code.classes(p).items():
                ref = ClassRef(p, node)
                if missing.suggestion in code.members(ref) and missing.name not in code.members(ref):
                    near = " (on the traceback)" if p in tb_files else ""
                    cands.append(OwnerCandidate(ref, f"{missing.owner} is not in the source; {cname} in {p}{near} defines the suggested {missing.suggestion!r}", 0.8 if near else 0.4))
    for c in cands[:6]:
        mro, unresolved = code.mro(c.cls)
        if defining_class(code, mro, missing.name) is None:
            out.append((c, mro, unresolved))
    return out
