"""Missing-module-error localizer: from an AttributeError/ImportError to the framework file that lacks the name.

Two methods share the evidence reading:

* `paper`: the published SFTL method — traceback files are the suspects, the modules each imports
  are scored by Needleman–Wunsch similarity against the missing owner, and the top three files'
  classes are checked for the missing attribute.
* `sftl`: resolves the owner to the class that defines it (imports, re-exports, aliases, receiver
  annotations), walks its class hierarchy to the class that should define the name, covers the
  module/import/overload variants of the error, and abstains on user errors.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field, replace

from sftl.localize.nw import nw_similarity
from sftl.localize.pycode import FRAMEWORK_PACKAGES, ClassRef, Code, dotted, module_of
from sftl.model import Extraction, Frame, Issue, Localization, Outcome, Side, Suspect, Traceback
from sftl.sources import SourceProvider

_BUILTIN_OWNERS = {
    "NoneType", "int", "float", "str", "bytes", "list", "dict", "tuple", "set", "bool", "function",
    "method", "builtin_function_or_method", "module", "type", "object", "generator", "property",
}  # fmt: skip

_ERROR_RE = re.compile(r"^\s*(?:[\w.]+\.)?(?P<exc>\w*(?:Error|Exception))\s*:\s*(?P<msg>.*)$")
_SUGGEST_RE = re.compile(r"Did you mean:?\s*'?(?P<s>[\w.]+)'?\s*\??")

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("type-attribute", re.compile(r"type object '(?P<owner>[\w.]+)' has no attribute '(?P<name>[^']+)'")),
    ("module-attribute", re.compile(r"module '(?P<module>[\w.]+)' has no attribute '(?P<name>[^']+)'")),
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
        if owner and "." in owner:
            owner = owner.rsplit(".", 1)[-1]
        return Missing(
            kind,
            name=g["name"],
            owner=owner,
            module=g.get("module"),
            suggestion=suggestion,
            circular=bool(g.get("partial")),
        )
    return None


# -- evidence shared by both methods --------------------------------------------------------------

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
    for pkg in packages:
        idx = path.find(f"/{pkg}/")
        if idx >= 0 and path.endswith(".py"):
            return _repo_layout(path[idx + 1 :])
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
class _Ev:
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


def _evidence(extraction: Extraction, framework: str | None, issue: Issue | None = None) -> _Ev | None:
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
    if not message:
        return None
    return _Ev(frames, message)


def _suspect(path: str, score: float, reason: str) -> Suspect:
    side = Side.PYTHON if path.endswith(".py") else None
    return Suspect(path=path, score=round(max(0.0, min(1.0, score)), 3), side=side, reason=reason)


def _dedupe(items: list[Suspect], top: int) -> tuple[Suspect, ...]:
    best: dict[str, Suspect] = {}
    for s in items:
        if s.path not in best or s.score > best[s.path].score:
            best[s.path] = s
    ranked = sorted(best.values(), key=lambda s: -s.score)
    return tuple(ranked[:top])


def _frame_line(code: Code, path: str, frame: Frame) -> int | None:
    return code.find_line(path, frame.line, frame.source)


def _frame_source(code: Code, path: str | None, frame: Frame) -> str:
    if frame.source:
        return frame.source
    if path and frame.line:
        text = code.text(path) or ""
        lines = text.splitlines()
        if 0 < frame.line <= len(lines):
            return lines[frame.line - 1]
    return ""


# -- the paper's method ---------------------------------------------------------------------------


def localize_paper(
    issue: Issue, extraction: Extraction, source: SourceProvider | None, top: int = 10
) -> Localization:
    """The published method: NW similarity of imported modules to the owner, then a class check of the top 3."""
    framework = (source.framework if source else None) or guess_framework(extraction, issue)
    ev = _evidence(extraction, framework, issue)
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
            out.append(_suspect(mod_file, score * 0.5, f"{path} imports {mod}; NW {score:.2f} vs {owner}; no class to check"))
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
            _suspect(
                mod_file,
                (0.5 + 0.5 * score) if lacks else 0.3 * score,
                f"traceback file {path} imports {mod.rsplit('.', 1)[-1]}; NW {score:.2f} vs {owner}; {verdict}",
            )
        )
    for rank, path in enumerate(reversed(suspects_files)):
        out.append(_suspect(path, 0.1 / (rank + 1), "framework file on the traceback"))
    suspects = _dedupe(out, top)
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


# -- our method -----------------------------------------------------------------------------------


@dataclass
class _Candidate:
    cls: ClassRef
    why: str
    weight: float  # how directly the evidence ties this class to the failing object


@dataclass
class _Ranking:
    suspects: list[Suspect] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def localize_sftl(
    issue: Issue, extraction: Extraction, source: SourceProvider | None, top: int = 10
) -> Localization:
    """Our method: resolve the owner's definition and hierarchy, cover every MME variant, abstain on user errors."""
    framework = (source.framework if source else None) or guess_framework(extraction, issue)
    ev = _evidence(extraction, framework, issue)
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
        return _attribute(code, ev, missing, version, top)
    if missing.kind == "module-attribute":
        return _module_attribute(code, ev, missing, version, top, framework)
    if missing.kind == "no-module":
        return _no_module(code, ev, missing, version, top, framework)
    return _import_name(code, ev, missing, version, top, framework)


def _located(suspects: list[Suspect], top: int, min_score: float = 0.35) -> Localization:
    ranked = _dedupe(suspects, top)
    if not ranked or ranked[0].score < min_score:
        return Localization("sftl", ranked, Outcome.ABSTAINED, "no confident suspect")
    return Localization("sftl", ranked, Outcome.LOCATED, f"{ranked[0].path}: {ranked[0].reason}")


def _user_frame(ev: _Ev) -> bool:
    """True when the code that asked for the missing name is the user's, not the framework's.

    With no frames at all (only the error line was pasted) nobody can tell, so the same caution applies.
    """
    raising = ev.raising
    return raising is None or raising[2] is None


def _caller(code: Code, ev: _Ev, name: str) -> tuple[int, Frame, str, int | None] | None:
    """The innermost framework frame whose line refers to the missing name."""
    rx = re.compile(rf"(\.|\bimport\s+|['\"]){re.escape(name)}\b")
    for num, frame, path in reversed(ev.framework_frames):
        if frame.function in ("__getattr__", "__getattribute__"):
            continue
        text = _frame_source(code, path, frame)
        if rx.search(text):
            return num, frame, path, _frame_line(code, path, frame)
    return None


def _receiver_classes(code: Code, path: str, line: int | None, source_line: str, name: str) -> list[_Candidate]:
    """The class of the object whose `.name` was read on that line, inferred statically."""
    m = re.search(rf"([A-Za-z_][\w.]*)\s*\.\s*{re.escape(name)}\b", source_line)
    if not m or line is None:
        return []
    recv = m.group(1)
    klass, func = code.enclosing(path, line)
    out: list[_Candidate] = []
    if recv in ("self", "cls") and klass is not None:
        out.append(_Candidate(ClassRef(path, klass), f"the method {klass.name}.{func.name if func else '?'} reads self.{name}", 1.0))
        return out
    annotation: ast.expr | None = None
    value: ast.expr | None = None
    if recv.startswith("self.") and klass is not None and recv.count(".") == 1:
        attr = recv.split(".", 1)[1]
        for node in ast.walk(klass):
            if isinstance(node, ast.AnnAssign) and _is_self_attr(node.target, attr):
                annotation = node.annotation
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == attr:
                annotation = node.annotation
            elif isinstance(node, ast.Assign) and any(_is_self_attr(t, attr) for t in node.targets):
                if isinstance(node.value, ast.Call):
                    value = node.value
    elif "." not in recv:
        scopes: list[ast.AST] = [s for s in (func,) if s is not None]
        tree = code.tree(path)
        if func is not None:
            for arg in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]:
                if arg.arg == recv and arg.annotation is not None:
                    annotation = arg.annotation
        if tree is not None:
            scopes.append(tree)
        for scope in scopes:
            if annotation is not None or value is not None:
                break
            body = scope.body if isinstance(scope, ast.Module) else list(ast.walk(scope))
            for node in body:
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                    if any(isinstance(t, ast.Name) and t.id == recv for t in node.targets):
                        value = node.value
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == recv:
                    annotation = node.annotation
    for expr, how in ((annotation, "annotated as"), (value.func if isinstance(value, ast.Call) else None, "built by")):
        if expr is None:
            continue
        for cand in _type_names(expr):
            ref = code.resolve_name(path, cand)
            if ref is not None:
                out.append(_Candidate(ref, f"{recv} in {path} is {how} {cand}", 0.9))
    return out


def _is_self_attr(node: ast.AST, attr: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name) and node.value.id == "self"


def _type_names(expr: ast.expr) -> list[str]:
    """Class names in an annotation (`A | None`, `Optional[A]`, `"A"`) or a constructor call."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        try:
            expr = ast.parse(expr.value, mode="eval").body
        except SyntaxError:
            return []
    if isinstance(expr, ast.BinOp):
        return _type_names(expr.left) + _type_names(expr.right)
    if isinstance(expr, ast.Subscript):
        base = dotted(expr.value) or ""
        if base.rsplit(".", 1)[-1] in ("Optional", "Union"):
            inner = expr.slice
            parts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
            return [n for p in parts for n in _type_names(p)]
        return [base] if base else []
    name = dotted(expr)
    return [name] if name and name != "None" else []


def _owner_candidates(code: Code, ev: _Ev, owner: str) -> list[_Candidate]:
    """Definitions of a class named `owner`: on the traceback, imported by it, then anywhere in the tree."""
    out: list[_Candidate] = []
    seen: set[ClassRef] = set()
    tb_files = []
    for _, _, p in ev.framework_frames:
        if p not in tb_files:
            tb_files.append(p)
    for p in reversed(tb_files):
        if owner in code.classes(p):
            ref = ClassRef(p, code.classes(p)[owner])
            if ref not in seen:
                seen.add(ref)
                out.append(_Candidate(ref, f"class {owner} is defined in {p}, on the traceback", 0.8))
    for p in reversed(tb_files):
        found = code.resolve_name(p, owner)
        if found is not None and found not in seen:
            seen.add(found)
            out.append(_Candidate(found, f"{p} (on the traceback) imports {owner} from {module_of(found.path)}", 0.7))
    if out:
        return out
    for p in code.grep(rf"^\s*class\s+{re.escape(owner)}\b"):
        node = code.classes(p).get(owner)
        if node is not None:
            ref = ClassRef(p, node)
            if ref not in seen:
                seen.add(ref)
                # generated and test code rarely holds the class a report is about
                odd = bool(re.search(r"(_generated|_pb2|/tests?/|/testing/|_test\.py$)", p))
                out.append(_Candidate(ref, f"class {owner} is defined in {p}", 0.2 if odd else 0.5))
    if len(out) > 1:
        # several classes share the name (torch.nn.Module, torch.jit.annotations.Module): the one its
        # package re-exports is the public class a report means; namesakes step back a little (evidence
        # in their own code still decides)
        public = {id(c): _exported_as(code, c.cls) for c in out}
        if any(public.values()):
            out = [
                _reweighted(c, 0.6, f"{c.why}, exported as {public[id(c)]}") if public[id(c)] else _reweighted(c, min(c.weight, 0.45), c.why)
                for c in out
            ]
    out.sort(key=lambda c: -c.weight)
    return out


def _reweighted(c: _Candidate, weight: float, why: str) -> _Candidate:
    return _Candidate(c.cls, why, weight)


def _exported_as(code: Code, cls: ClassRef) -> str | None:
    """The shortest public dotted name (`torch.nn.Module`) under which a package re-exports the class."""
    parts = module_of(cls.path).split(".")
    for i in range(1, len(parts)):
        pkg = ".".join(parts[:i])
        if any(p.startswith("_") for p in parts[1:i]):
            continue
        if code.resolve(f"{pkg}.{cls.name}") == (cls.path, cls.name):
            return f"{pkg}.{cls.name}"
    return None


def _defines(code: Code, mro: list[ClassRef], name: str, class_level: bool = False) -> ClassRef | None:
    for k in mro:
        if name in code.members(k, class_level):
            return k
    return None


def _tokens(name: str) -> set[str]:
    return {t for t in re.split(r"_+|(?<=[a-z])(?=[A-Z])", name.lower()) if t}


def _member_similarity(members: frozenset[str], name: str) -> tuple[float, str]:
    best, which = 0.0, ""
    want = _tokens(name)
    for m in members:
        if m == name or (m.startswith("__") and m.endswith("__")):
            continue
        tok = _tokens(m)
        jac = len(want & tok) / len(want | tok) if want | tok else 0.0
        sim = max(jac, nw_similarity(name.strip("_"), m.strip("_")) ** 2)
        if sim > best:
            best, which = sim, m
    return best, which


def _class_evidence(code: Code, k: ClassRef, name: str, suggestion: str | None) -> tuple[float, list[str]]:
    """How strongly the class `k` itself is expected to define `name`, with the reasons in words."""
    score = 0.0
    why: list[str] = []
    refs = code.self_refs(k, name)
    if refs:
        score += 3.0
        why.append(f"methods of {k.name} use self.{name} ({refs}x)")
    own = code.members(k)
    if suggestion and suggestion in own:
        score += 1.5
        why.append(f"{k.name} defines {suggestion!r}, the interpreter's suggestion")
    sim, which = _member_similarity(own, name)
    if sim >= 0.3:
        score += 2.0 * sim
        why.append(f"{k.name} defines the similar {which!r} (similarity {sim:.2f})")
    body = code.class_text(k)
    # documentation, comments and calls on other objects (`dataset.as_numpy_iterator()` in a docstring);
    # its own `self.<name>` reads are counted above, definitions are not mentions
    mentions = len(re.findall(rf"(?<![\w]){re.escape(name)}\b", body)) - refs
    mentions -= len(re.findall(rf"\bdef\s+{re.escape(name)}\b", body))
    if mentions > 0:
        score += min(1.0, 0.5 * mentions)
        why.append(f"the class's documentation/comments mention {name}")
    return score, why


def _attribute(code: Code, ev: _Ev, missing: Missing, version: str, top: int) -> Localization:
    name = missing.name
    owner = missing.owner
    if owner not in _BUILTIN_OWNERS:
        # the whole-tree searches this may need, done in one pass (only run when first needed)
        code.defer_prefetch(_attribute_patterns(owner, name, missing.suggestion))
    caller = _caller(code, ev, name)
    raising = ev.raising
    hook = ev.frames[-1] if ev.frames and ev.frames[-1][1].function in ("__getattr__", "__getattribute__") else None
    candidates: list[_Candidate] = []
    if missing.kind == "overload" or (owner is None and hook and hook[2]):
        # the message names no class: the class whose __getattr__ raised is the owner
        if hook and hook[2]:
            line = _frame_line(code, hook[2], hook[1])
            klass, _ = code.enclosing(hook[2], line or 0)
            if klass is not None:
                candidates.append(_Candidate(ClassRef(hook[2], klass), f"{klass.name}.__getattr__ raised it (frame {hook[0]})", 1.0))
        owner = candidates[0].cls.name if candidates else owner
    receivers: list[_Candidate] = []
    if caller is not None:
        num, frame, cpath, cline = caller
        receivers = _receiver_classes(code, cpath, cline, _frame_source(code, cpath, frame), name)
    if owner and owner not in _BUILTIN_OWNERS:
        named = [r for r in receivers if r.cls.name == owner]
        candidates.extend(named or _owner_candidates(code, ev, owner))
    # a receiver typed as a base class of the owner (self in Optimizer.__init__ for an SGD) joins in
    others = [r for r in receivers if all(r.cls != c.cls for c in candidates)]
    out: list[Suspect] = []
    if owner in _BUILTIN_OWNERS or (owner and not candidates and not others and not missing.suggestion):
        if _user_frame(ev):
            return Localization("sftl", (), Outcome.ABSTAINED, f"'{owner}' has no '{name}' in user code: a user error, not a framework fault")
        if caller is not None:
            out.append(_suspect(caller[2], 0.5, f"frame {caller[0]} reads .{name} on a {owner}: the value is not what this code expects"))
        elif raising is not None and raising[2]:
            out.append(_suspect(raising[2], 0.4, f"frame {raising[0]} ({raising[1].function}) raised it: it got a {owner} where it expected an object with {name}"))
        return _located(out, top)
    lacking: list[tuple[_Candidate, list[ClassRef], list[str]]] = []
    having: list[tuple[_Candidate, ClassRef]] = []
    for cand in candidates:
        mro, unresolved = code.mro(cand.cls)
        # `type object 'X' has no attribute`: only what the class itself binds counts, not instance state
        definer = _defines(code, mro, name, class_level=missing.kind == "type-attribute")
        if definer is None:
            lacking.append((cand, mro, unresolved))
        else:
            having.append((cand, definer))
    if not lacking and not candidates:
        if _is_dynamic_name(name) and not _user_frame(ev) and ev.framework_frames:
            return _located(_caller_chain_unknown(code, ev, name, owner), top)
        # owner unknown in source (a generated class such as `_FooBackward`): the suggestion or receiver leads
        lacking.extend(_fallback_lacking(code, ev, missing, others))
    if not lacking:
        if having:
            cand, definer = having[0]
            where = f"{definer.name} in {definer.path}"
            if _user_frame(ev):
                return Localization(
                    "sftl",
                    (),
                    Outcome.ABSTAINED,
                    f"{owner}.{name} exists in {version} ({where}); the error comes from user code: "
                    "a user error or a different installed version, not a missing definition",
                )
            out.append(_suspect(definer.path, 0.3, f"{where} defines {name}, yet it was missing at run time (set conditionally or shadowed)"))
            if caller is not None:
                out.append(_suspect(caller[2], 0.25, f"frame {caller[0]} reads .{name} where it is not set"))
            return Localization("sftl", _dedupe(out, top), Outcome.ABSTAINED, f"{owner}.{name} exists in the source ({where}): no confident suspect")
        return Localization("sftl", (), Outcome.ABSTAINED, f"no definition of class {owner!r} found in the {version} source")
    user_note = ""
    weak = False
    if _user_frame(ev) and not any(c.weight >= 0.9 for c, _, _ in lacking):
        verdicts = [_user_call_verdict(code, c.cls, mro, missing, version) for c, mro, _ in lacking[:4]]
        # a specific user-error explanation (misspelling, a name of a subclass/sibling) wins, then a
        # located verdict, then the generic abstention
        specific = [v for v in verdicts if v.startswith("abstain:") and ("(a user error)" in v or "misspelling" in v)]
        verdict = (specific or [v for v in verdicts if not v.startswith("abstain:")] or verdicts)[0]
        if verdict.startswith("abstain:"):
            return Localization("sftl", (), Outcome.ABSTAINED, verdict.split(":", 1)[1].strip())
        if verdict.startswith("weak:"):
            weak, verdict = True, verdict.split(":", 1)[1].strip()
        user_note = verdict
    dynamic = hook is not None or _is_dynamic_name(name)
    # among the classes in the owner's hierarchy, blame the one that should define the name
    total = sum(c.weight for c, _, _ in lacking)
    for cand, mro, unresolved in lacking:
        share = cand.weight / total if total else 1.0
        scored = []
        # stubs of compiled modules (.pyi) tell what exists; they are never the file to fix
        mro = [k for k in mro if not k.path.endswith(".pyi")] or mro
        # siblings only matter when there is more than one class to choose from
        votes, own = _sibling_votes(code, name, mro) if len(mro) > 1 else ({}, 0)
        for depth, k in enumerate(mro):
            s, why = _class_evidence(code, k, name, missing.suggestion)
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
            score = conf * (0.6 + 0.4 * share)
            out.append(_suspect(k.path, min(0.34, score * 0.55) if weak else score, reason))
    if caller is not None:
        out.append(_suspect(caller[2], 0.3, f"traceback frame {caller[0]} ({caller[1].function}) refers to .{name}"))
    for num, frame, path in ev.framework_frames[-3:]:
        out.append(_suspect(path, 0.05, f"traceback frame {num} ({frame.function})"))
    # weak evidence (only user code asked, the framework merely mirrors or calls the name) is still
    # an answer, scored low so that consumers can tell it from a traceback-backed one
    return _located(out, top, min_score=0.2 if weak else 0.35)


def _attribute_patterns(owner: str | None, name: str, suggestion: str | None) -> list[str]:
    pats = [rf"self\.{re.escape(name)}\b", rf"^\s+def\s+{re.escape(name)}\b"]
    if owner:
        pats.append(rf"^\s*class\s+{re.escape(owner)}\b")
    if suggestion:
        pats.append(rf"^\s*(?:def\s+{re.escape(suggestion)}\b|{re.escape(suggestion)}\s*[:=])")
    return pats


def _sibling_votes(code: Code, name: str, mro: list[ClassRef]) -> tuple[dict[ClassRef, int], int]:
    """Other classes whose code reads `self.<name>`: votes for the ancestors they share with the owner
    when they expect to inherit the name, and a count of those that define it themselves."""
    in_mro = set(mro)
    votes: dict[ClassRef, int] = {}
    own = 0
    hits = code.grep(rf"self\.{re.escape(name)}\b")
    for path in sorted(hits, key=lambda p: -_shared_prefix(p, mro[0].path if mro else ""))[:80]:
        for node in code.classes(path).values():
            ref = ClassRef(path, node)
            if ref in in_mro or not code.self_refs(ref, name):
                continue
            smro, _ = code.mro(ref)
            shared = [k for k in smro if k in in_mro]
            if not shared:
                continue
            if name in code.members(ref):
                own += 1
                continue
            definer = _defines(code, smro, name)
            if definer is not None and definer not in in_mro:
                continue  # it gets the name from a mixin of its own
            for k in shared:
                votes[k] = votes.get(k, 0) + 1
    return votes, own


def _related_definer(code: Code, name: str, mro: list[ClassRef]) -> tuple[ClassRef, ClassRef] | None:
    """A class that defines `name` and shares an ancestor with the owner: (that class, the shared
    ancestor); the owner itself when it is a subclass of the owner."""
    in_mro = set(mro)
    hits = code.grep(rf"^\s+def\s+{re.escape(name)}\b")
    sibling: tuple[ClassRef, ClassRef] | None = None
    for path in sorted(hits, key=lambda p: -_shared_prefix(p, mro[0].path if mro else ""))[:60]:
        for node in code.classes(path).values():
            ref = ClassRef(path, node)
            if ref in in_mro or name not in code.members(ref):
                continue
            smro, _ = code.mro(ref)
            if _calls_super(code, ref, name):
                continue  # an override that defers to its base: evidence the base should have it
            if mro and mro[0] in smro[1:]:
                return ref, mro[0]
            # a sibling only explains when both derive directly from the shared base
            shared = next((k for k in smro[1:] if k in in_mro), None)
            direct = shared is not None and shared in code.bases(ref)[0] and shared in code.bases(mro[0])[0]
            if sibling is None and direct and shared is not None and not _is_hub(code, shared):
                sibling = (ref, shared)
    return sibling


def _calls_super(code: Code, cls: ClassRef, name: str) -> bool:
    """Does the class's own `name` call `super().name` / `super(X, self).name`?"""
    for node in cls.node.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            for sub in ast.walk(node):
                if (
                    isinstance(sub, ast.Attribute)
                    and sub.attr == name
                    and isinstance(sub.value, ast.Call)
                    and isinstance(sub.value.func, ast.Name)
                    and sub.value.func.id == "super"
                ):
                    return True
    return False


def _super_callers(code: Code, name: str, mro: list[ClassRef]) -> list[ClassRef]:
    """Classes sharing the owner's ancestry whose `name` override calls `super().name`."""
    in_mro = set(mro)
    out = []
    for path in code.grep(rf"^\s+def\s+{re.escape(name)}\b")[:80]:
        for node in code.classes(path).values():
            ref = ClassRef(path, node)
            if ref not in in_mro and _calls_super(code, ref, name):
                smro, _ = code.mro(ref)
                if any(k in in_mro for k in smro[1:]):
                    out.append(ref)
    return out


def _is_hub(code: Code, cls: ClassRef) -> bool:
    """A base class with many subclasses (nn.Module): a sibling overriding a name says little there."""
    return len(code.grep(rf"^\s*class\s+\w+\([^)]*\b{re.escape(cls.name)}\b")) > 20


def _shared_prefix(a: str, b: str) -> int:
    """How many leading directories two paths share (nearer files are searched first)."""
    n = 0
    for x, y in zip(a.split("/")[:-1], b.split("/")[:-1], strict=False):
        if x != y:
            break
        n += 1
    return n


def _edit_distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def _user_call_verdict(code: Code, owner: ClassRef, mro: list[ClassRef], missing: Missing, version: str) -> str:
    """User code asked for a name no class in the owner's hierarchy has: a user error unless the
    framework's own code expects the name ("abstain: <why>" or a note for the located reason)."""
    name = missing.name
    # `shape` asked, `_shape` suggested: the private field of a public accessor, not a misspelling
    suggestion = missing.suggestion or ""
    backing = bool(suggestion) and suggestion != name and suggestion.lstrip("_") == name
    if missing.suggestion and not backing and _edit_distance(name, missing.suggestion) <= 2 and len(name) > 3:
        return f"abstain: {owner.name} has no {name} in {version}; the interpreter suggests {missing.suggestion!r}: a misspelling in user code"
    refs = [k for k in mro if code.self_refs(k, name)]
    if refs:
        return f"called from user code, but {refs[0].name}'s own methods use self.{name}: the framework lost it"
    votes, _ = _sibling_votes(code, name, mro)
    if sum(votes.values()) >= 2:
        return f"called from user code, but other subclasses of {max(votes, key=lambda k: votes[k]).name} use self.{name}: the framework lost it"
    supers = _super_callers(code, name, mro)
    if supers:
        return f"called from user code, but {supers[0].name}.{name} ({supers[0].path}) calls super().{name}: a base class lost it"
    # documentation calling it on the class's own objects (`dataset.as_numpy_iterator()`), not on
    # values the class merely produces (`element.numpy()` in Dataset's docs)
    call = re.compile(rf"\b(\w+)\.{re.escape(name)}\(")
    documented = [
        k for k in mro if sum(1 for m in call.finditer(code.class_text(k)) if _receiver_like(m.group(1), k.name)) >= 2
    ]
    if documented:
        return f"called from user code, but {documented[0].name}'s documentation calls .{name}(): the framework lost it"
    mirror = _mirror_subclass(code, name, mro)
    related = None if mirror is not None else _related_definer(code, name, mro)
    if mirror is not None:
        sub, shared = mirror
        return (
            f"weak: called from user code, but {sub.name} ({sub.path}) re-implements {shared} of "
            f"{owner.name}'s methods, {name} among them: {name} looks like an API {owner.name} lost (low confidence)"
        )
    if related is not None:
        other, common = related
        kin = f"a subclass of {owner.name}" if common == owner else f"a sibling of {owner.name} under {common.name}"
        return (
            f"abstain: {name} is defined on {other.name} ({other.path}), {kin}: "
            f"the object is a {owner.name}, not a {other.name} (a user error)"
        )
    used = _typed_call_sites(code, name, mro)
    if used is not None:
        cls, files = used
        return (
            f"called from user code, but framework code calls .{name}() on objects named like {cls.name} "
            f"in {len(files)} files (e.g. {files[0]}): the framework lost it"
        )
    loose = _typed_call_sites(code, name, mro, loose=True)
    if loose is not None:
        cls, files = loose
        return (
            f"weak: called from user code; framework code calls .{name}() on objects named like {cls.name} "
            f"in {len(files)} file(s) (e.g. {files[0]}): {cls.name} may have lost it (low confidence)"
        )
    holder = next((k for k in mro if backing and missing.suggestion in code.members(k)), None)
    if holder is not None:
        return (
            f"weak: called from user code; {holder.name} keeps {missing.suggestion!r} but has no public {name}: "
            f"an accessor (property) for it looks lost (low confidence)"
        )
    return f"abstain: {owner.name} has no {name} in {version} and the error comes from user code: a removed or misspelled API"


def _receiver_like(recv: str, cls_name: str) -> bool:
    """Is a variable named like an instance of the class (`module` for Module, `writer` for SummaryWriter)?"""
    recv = recv.strip("_").rstrip("0123456789").lower()
    if recv in ("self", "cls"):
        return True
    words = [w for w in re.split(r"_+|(?<=[a-z])(?=[A-Z])", re.sub(r"V?\d+$", "", cls_name)) if w]
    last = words[-1].lower() if words else ""
    tail = recv.split("_")[-1]
    # `prof` for profile, `opt` for Optimizer, `mod` for Module: a prefix of three letters or more
    abbrev = len(tail) >= 3 and last.startswith(tail)
    return nw_similarity(recv, cls_name.strip("_").lower()) >= 0.85 or (len(last) >= 3 and (tail in (last, last + "s") or abbrev))


def _mirror_subclass(code: Code, name: str, mro: list[ClassRef]) -> tuple[ClassRef, int] | None:
    """A subclass of the owner that overrides `name` and most of the owner's public methods (a wrapper
    or a 'not supported' stub mirroring the API): it says the owner's API includes `name`."""
    if not mro:
        return None
    base_api = {m for k in mro for m in code.members(k, class_level=True) if not m.startswith("_")}
    for path in code.grep(rf"^\s+def\s+{re.escape(name)}\b")[:60]:
        for node in code.classes(path).values():
            ref = ClassRef(path, node)
            if ref in mro or name not in code.members(ref, class_level=True):
                continue
            smro, _ = code.mro(ref)
            if mro[0] not in smro[1:]:
                continue
            own = {m for m in code.members(ref, class_level=True) if not m.startswith("_") and m != name}
            shared = len(own & base_api)
            if shared >= 5 and shared >= 0.5 * len(own) and _stub_or_delegate(ref, name):
                return ref, shared
    return None


def _stub_or_delegate(cls: ClassRef, name: str) -> bool:
    """Is the class's `name` a 'not supported' stub or a call forwarded to a wrapped object
    (`return self._optimizer.name(...)`)? A real implementation may be a genuine extension instead."""
    for node in cls.node.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            body = [b for b in node.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
            if len(body) > 3:
                return False
            for sub in (n for b in body for n in ast.walk(b)):
                if isinstance(sub, ast.Raise):
                    return True
                if isinstance(sub, ast.Call):
                    fname = dotted(sub.func) or ""
                    if re.search(r"(?i)not_?supported|unsupported|notimplemented", fname):
                        return True
                    if isinstance(sub.func, ast.Attribute) and sub.func.attr == name and (fname.startswith("self.") and fname.count(".") == 2):
                        return True
    return False


def _typed_call_sites(code: Code, name: str, mro: list[ClassRef], loose: bool = False) -> tuple[ClassRef, list[str]] | None:
    """Framework files calling `.name(` on a receiver whose identifier is the class's name
    (`module.state_dict()` for Module): the name is an API of that class, used across the code.

    `loose`: the receiver may be the class name's last word (`writer` for SummaryWriter, `dataset`
    for DatasetV2), and two files suffice: weaker evidence, reported with low confidence.
    """
    call = re.compile(rf"\b([A-Za-z_]\w*)\.{re.escape(name)}\(")
    chained = re.compile(rf"\.([A-Za-z_]\w*)\([^()]*\)\.{re.escape(name)}\(")
    best: tuple[ClassRef, list[str]] | None = None
    for k in mro:
        want = k.name.strip("_").lower()
        # the last word of the name without a version suffix: DatasetV2 -> dataset, SummaryWriter -> writer
        words = [w for w in re.split(r"_+|(?<=[a-z])(?=[A-Z])", re.sub(r"V?\d+$", "", k.name)) if w]
        last = words[-1].lower() if words else ""
        if len(want) < 4:
            continue
        files = []
        for path in code.grep(rf"\.{re.escape(name)}\("):
            text = code.text(path) or ""
            hit = False
            for m in call.finditer(text):
                recv = m.group(1).strip("_").rstrip("0123456789").lower()
                if nw_similarity(recv, want) >= 0.85 or (loose and len(last) >= 4 and recv.split("_")[-1] in (last, last + "s")):
                    hit = True
                    break
            if loose and not hit:
                # a call chained on another method of the class: `ds.batch(32).prefetch(2)`
                api = set(code.members(k, class_level=True))
                hit = any(m.group(1) in api for m in chained.finditer(text))
            if hit:
                files.append(path)
        if len(files) >= (2 if loose else 3) and (best is None or len(files) > len(best[1])):
            best = (k, files)
    return best


def _is_dynamic_name(name: str) -> bool:
    return (name.startswith("__") and name.endswith("__")) or bool(re.search(r"[a-z_]\d+$", name))


def _chain_frames(code: Code, ev: _Ev, name: str) -> list[tuple[int, Frame, str, str]]:
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
    if not literal.search(_frame_source(code, first_path, first)):
        outer = next((i for i, (_, _, p) in enumerate(frames) if p != first_path), None)
        if outer is not None:
            n, f, p = frames[outer]
            note = (
                f"frame {first_num} ({first.function}) only forwards the object it was given "
                f"(the name is not on its line); frame {n} ({f.function}) in another file supplied it"
            )
            out = [(n, f, p, note)] + [(a, b, c, "") for i, (a, b, c) in enumerate(frames) if i != outer]
    return out


def _caller_chain(code: Code, ev: _Ev, name: str, cls: ClassRef) -> list[Suspect]:
    """Framework frames from the innermost caller outwards, for attributes that are data, not definitions."""
    out: list[Suspect] = []
    for rank, (num, frame, path, note) in enumerate(_chain_frames(code, ev, name)):
        why = (
            f"traceback frame {num} ({frame.function}) asked a {cls.name} for {name!r}, which no class in its "
            "hierarchy is expected to define (looked up dynamically): the caller chain built or passed the wrong object"
        )
        out.append(_suspect(path, 0.5 / (1 + 0.5 * rank), f"{note}; {why}" if note else why))
    out.append(_suspect(cls.path, 0.15, f"{cls.name} is defined here and has no {name}"))
    return out


def _caller_chain_unknown(code: Code, ev: _Ev, name: str, owner: str | None) -> list[Suspect]:
    out = []
    for rank, (num, frame, path, note) in enumerate(_chain_frames(code, ev, name)):
        why = f"traceback frame {num} ({frame.function}) asked a {owner} for {name!r}, a name no class defines statically"
        out.append(_suspect(path, 0.5 / (1 + 0.5 * rank), f"{note}; {why}" if note else why))
    return out


def _fallback_lacking(
    code: Code, ev: _Ev, missing: Missing, receivers: list[_Candidate]
) -> list[tuple[_Candidate, list[ClassRef], list[str]]]:
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
                    cands.append(_Candidate(ref, f"{missing.owner} is not in the source; {cname} in {p}{near} defines the suggested {missing.suggestion!r}", 0.8 if near else 0.4))
    for c in cands[:6]:
        mro, unresolved = code.mro(c.cls)
        if _defines(code, mro, missing.name) is None:
            out.append((c, mro, unresolved))
    return out


def _module_defines(code: Code, module: str, name: str) -> tuple[str | None, bool, str | None]:
    """(the module's file, whether it binds `name`, a submodule file named `name` if one exists)."""
    path = code.module_path(module)
    if path is None:
        return None, False, None
    names = code.module_names(path)
    sub = code.module_path(f"{module}.{name}")
    tree = code.tree(path)
    lazy = tree is not None and any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in tree.body)
    return path, name in names or lazy or "*dynamic*" in names, sub


def _binding_condition(code: Code, path: str, name: str) -> str | None:
    """The test of the module-level `if` under which `name` is bound, when it is bound nowhere else."""
    tree = code.tree(path)
    if tree is None:
        return None

    def binds(stmts: list[ast.stmt]) -> bool:
        for node in stmts:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
                return True
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                return True
            if isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return True
            if isinstance(node, (ast.ImportFrom)) and any(a.name == "*" for a in node.names):
                return True
        return False

    if binds(tree.body):
        return None
    for node in tree.body:
        if isinstance(node, ast.If) and binds(node.body) and not binds(node.orelse):
            return ast.unparse(node.test)[:80]
    return None


def _definers(code: Code, package: str, name: str) -> list[str]:
    """Files under a package that define `name` at top level."""
    prefix = package.replace(".", "/") + "/"
    pat = rf"^(?:def|class)\s+{re.escape(name)}\b|^{re.escape(name)}\s*="
    return [p for p in code.grep(pat) if p.startswith(prefix)][:5]


def _module_attribute(code: Code, ev: _Ev, missing: Missing, version: str, top: int, framework: str | None) -> Localization:
    module, name = missing.module or "", missing.name
    own = module.split(".")[0] in FRAMEWORK_PACKAGES.get(framework or "", ())
    if not own:
        return Localization("sftl", (), Outcome.ABSTAINED, f"module {module} is not part of {framework or 'the framework'}")
    path, binds, sub = _module_defines(code, module, name)
    if path is None:
        return Localization("sftl", (), Outcome.ABSTAINED, f"module {module} is not in the {version} source")
    user = _user_frame(ev)
    condition = _binding_condition(code, path, name) if binds else None
    if binds and condition:
        # bound only under a module-level `if` (a platform/build check): absent where it is false
        if user:
            return Localization("sftl", (), Outcome.ABSTAINED, f"{module} binds {name} only when `{condition}` ({path}); the user's build/platform does not meet it")
        caller = _caller(code, ev, name)
        out = [_suspect(path, 0.45, f"{module} binds {name} only when `{condition}`, and the condition was false at run time")]
        if caller is not None:
            out.insert(0, _suspect(caller[2], 0.6, f"traceback frame {caller[0]} ({caller[1].function}) uses {module}.{name} without checking `{condition}`"))
        return _located(out, top)
    if binds:
        if user:
            return Localization("sftl", (), Outcome.ABSTAINED, f"{module}.{name} exists in {version} ({path}); the error comes from user code: a different installed version or a shadowed module")
        out = [_suspect(path, 0.4, f"{module} binds {name} in {version}, yet it was missing at run time (import order or circular import)")]
    elif sub is not None:
        if user:
            return Localization("sftl", (), Outcome.ABSTAINED, f"{module}.{name} is a submodule ({sub}) that {module} does not import; `import {module}.{name}` first (user error)")
        out = [_suspect(path, 0.7, f"{module} ({path}) does not import its submodule {name} ({sub}), which the caller expects")]
    else:
        defs = _definers(code, module, name)
        if user:
            hint = f"; {name} is defined in {', '.join(defs)}" if defs else ""
            return Localization("sftl", (), Outcome.ABSTAINED, f"{module} has no {name} in {version} and the error comes from user code: a removed or misspelled API{hint}")
        out = [_suspect(path, 0.8, f"{module} ({path}) neither defines nor re-exports {name}")]
        for d in defs:
            out.append(_suspect(d, 0.45, f"{d} defines {name}, but {module} does not re-export it"))
    caller = _caller(code, ev, name)
    if caller is not None:
        out.append(_suspect(caller[2], 0.35, f"traceback frame {caller[0]} ({caller[1].function}) reads {module}.{name}"))
    return _located(out, top)


def _importer(code: Code, ev: _Ev, module: str) -> tuple[int, Frame, str] | None:
    last = module.rsplit(".", 1)[-1]
    for num, frame, path in reversed(ev.framework_frames):
        text = _frame_source(code, path, frame)
        if "import" in text and (module in text or re.search(rf"\b{re.escape(last)}\b", text)):
            return num, frame, path
    fw = ev.framework_frames
    return fw[-1] if fw and ev.frames[-1][2] else None


def _no_module(code: Code, ev: _Ev, missing: Missing, version: str, top: int, framework: str | None) -> Localization:
    module = missing.module or missing.name
    packages = FRAMEWORK_PACKAGES.get(framework or "", ())
    user = _user_frame(ev)
    importer = _importer(code, ev, module)
    if module.split(".")[0] not in packages:
        if importer is None or user:
            return Localization("sftl", (), Outcome.ABSTAINED, f"{module} is not part of {framework or 'the framework'}: a missing dependency in the environment")
        return _located(
            [_suspect(importer[2], 0.5, f"traceback frame {importer[0]} imports the optional dependency {module} without a guard")],
            top,
        )
    if code.module_path(module) is not None or _compiled(code, module):
        return Localization("sftl", (), Outcome.ABSTAINED, f"{module} exists in the {version} source: an installation or build problem, not a source fault")
    parent = module.rpartition(".")[0]
    if user or importer is None:
        return Localization("sftl", (), Outcome.ABSTAINED, f"{module} does not exist in {version} and user code imports it: a removed or renamed module")
    out = [_suspect(importer[2], 0.8, f"traceback frame {importer[0]} imports {module}, which does not exist in {version}")]
    parent_path = code.module_path(parent) if parent else None
    if parent_path:
        out.append(_suspect(parent_path, 0.4, f"the package {parent} has no submodule {module.rsplit('.', 1)[-1]}"))
    return _located(out, top)


def _compiled(code: Code, module: str) -> bool:
    base = module.replace(".", "/")
    return any(code.text(base + ext) is not None for ext in (".pyi", "/__init__.pyi"))


def _import_name(code: Code, ev: _Ev, missing: Missing, version: str, top: int, framework: str | None) -> Localization:
    module, name = missing.module or "", missing.name
    if not module:
        # old Pythons say only "cannot import name 'X'": the importing line names the module
        for _, frame, path in reversed(ev.frames):
            m = re.search(rf"from\s+([\w.]+)\s+import\b.*\b{re.escape(name)}\b", _frame_source(code, path, frame))
            if m:
                module = m.group(1)
                break
        if not module:
            return Localization("sftl", (), Outcome.ABSTAINED, f"the error does not say which module lacks {name}, and no traceback line imports it")
        missing = Missing(missing.kind, name=name, module=module, circular=missing.circular)
    if module.split(".")[0] not in FRAMEWORK_PACKAGES.get(framework or "", ()):
        return Localization("sftl", (), Outcome.ABSTAINED, f"module {module} is not part of {framework or 'the framework'}")
    path, binds, sub = _module_defines(code, module, name)
    user = _user_frame(ev)
    importer = _importer(code, ev, module)
    if path is None:
        return Localization("sftl", (), Outcome.ABSTAINED, f"module {module} is not in the {version} source")
    if binds or sub is not None:
        if user and not missing.circular:
            return Localization("sftl", (), Outcome.ABSTAINED, f"{module} defines {name} in {version}; the error comes from user code: a different installed version")
        out = [_suspect(path, 0.6, f"{module} defines {name} but was only partially initialized: a circular import")]
        if importer is not None:
            out.append(_suspect(importer[2], 0.55, f"traceback frame {importer[0]} imports {name} from {module} during {module}'s own import"))
        return _located(out, top)
    defs = _definers(code, module.rpartition(".")[0] or module, name)
    if user:
        hint = f"; {name} is defined in {', '.join(defs)}" if defs else ""
        return Localization("sftl", (), Outcome.ABSTAINED, f"{module} has no {name} in {version} and user code imports it: a removed or renamed API{hint}")
    out = [_suspect(path, 0.8, f"{module} ({path}) neither defines nor re-exports {name}")]
    if importer is not None:
        out.append(_suspect(importer[2], 0.5, f"traceback frame {importer[0]} imports {name} from {module}"))
    for d in defs:
        out.append(_suspect(d, 0.3, f"{d} defines {name}"))
    return _located(out, top)
