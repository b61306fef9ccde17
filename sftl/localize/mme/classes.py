"""Classes behind a missing attribute: the owner's definitions, its hierarchy, and the evidence each class is expected to define the name."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from sftl.localize.mme.evidence import FrameEvidence, Missing
from sftl.localize.nw import nw_similarity
from sftl.localize.pycode import ClassRef, Code, dotted, module_of


@dataclass
class OwnerCandidate:
    cls: ClassRef
    why: str
    weight: float  # how directly the evidence ties this class to the failing object


def receiver_classes(code: Code, path: str, line: int | None, source_line: str, name: str) -> list[OwnerCandidate]:
    """The class of the object whose `.name` was read on that line, inferred statically."""
    m = re.search(rf"([A-Za-z_][\w.]*)\s*\.\s*{re.escape(name)}\b", source_line)
    if not m or line is None:
        return []
    recv = m.group(1)
    klass, func = code.enclosing(path, line)
    out: list[OwnerCandidate] = []
    if recv in ("self", "cls") and klass is not None:
        out.append(OwnerCandidate(ClassRef(path, klass), f"the method {klass.name}.{func.name if func else '?'} reads self.{name}", 1.0))
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
                out.append(OwnerCandidate(ref, f"{recv} in {path} is {how} {cand}", 0.9))
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


def owner_candidates(code: Code, ev: FrameEvidence, owner: str) -> list[OwnerCandidate]:
    """Definitions of a class named `owner`: on the traceback, imported by it, then anywhere in the tree."""
    out: list[OwnerCandidate] = []
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
                out.append(OwnerCandidate(ref, f"class {owner} is defined in {p}, on the traceback", 0.8))
    for p in reversed(tb_files):
        found = code.resolve_name(p, owner)
        if found is not None and found not in seen:
            seen.add(found)
            out.append(OwnerCandidate(found, f"{p} (on the traceback) imports {owner} from {module_of(found.path)}", 0.7))
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
                out.append(OwnerCandidate(ref, f"class {owner} is defined in {p}", 0.2 if odd else 0.5))
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


def _reweighted(c: OwnerCandidate, weight: float, why: str) -> OwnerCandidate:
    return OwnerCandidate(c.cls, why, weight)


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


def defining_class(code: Code, mro: list[ClassRef], name: str, class_level: bool = False) -> ClassRef | None:
    for k in mro:
        if name in code.members(k, class_level):
            return k
    return None


def _tokens(name: str) -> set[str]:
    return {t for t in re.split(r"_+|(?<=[a-z])(?=[A-Z])", name.lower()) if t}


def member_similarity(members: frozenset[str], name: str) -> tuple[float, str]:
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


def class_evidence(code: Code, k: ClassRef, name: str, suggestion: str | None) -> tuple[float, list[str]]:
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
    sim, which = member_similarity(own, name)
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


def sibling_votes(code: Code, name: str, mro: list[ClassRef]) -> tuple[dict[ClassRef, int], int]:
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
            definer = defining_class(code, smro, name)
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


def user_call_verdict(code: Code, owner: ClassRef, mro: list[ClassRef], missing: Missing, version: str) -> str:
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
    votes, _ = sibling_votes(code, name, mro)
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


def is_dynamic_name(name: str) -> bool:
    return (name.startswith("__") and name.endswith("__")) or bool(re.search(r"[a-z_]\d+$", name))
