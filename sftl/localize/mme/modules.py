"""Missing module attributes, modules and imported names: the module that should bind the name, or the frame that imports it."""

from __future__ import annotations

import ast
import re
import sys

from sftl.extract import stops_at_import
from sftl.localize.mme.evidence import (
    FrameEvidence,
    Missing,
    calling_frame,
    frame_source,
    localization_of,
    make_suspect,
    user_frame,
)
from sftl.localize.mme.foreign import is_stdlib, rank_referrers, stdlib_status
from sftl.localize.mme.releases import module_history, neighbours
from sftl.localize.pycode import FRAMEWORK_PACKAGES, Code
from sftl.model import Frame, Issue, Localization, Outcome


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


def module_attribute(
    code: Code, ev: FrameEvidence, missing: Missing, version: str, top: int, framework: str | None, issue: Issue | None = None
) -> Localization:
    module, name = missing.module or "", missing.name
    own = module.split(".")[0] in FRAMEWORK_PACKAGES.get(framework or "", ())
    if not own:
        return _foreign_module_attribute(code, ev, missing, top, framework, issue)
    path, binds, sub = _module_defines(code, module, name)
    if path is None:
        return Localization("sftl", (), Outcome.ABSTAINED, f"module {module} is not in the {version} source")
    user = user_frame(ev)
    if missing.circular and not user:
        return _circular(code, ev, module, name, path, sub, top)
    if path.endswith(".pyi"):
        return _compiled_module_attribute(code, ev, module, name, path, binds, user, version, top)
    condition = _binding_condition(code, path, name) if binds else None
    if binds and condition:
        # bound only under a module-level `if` (a platform/build check): absent where it is false
        if user:
            return Localization("sftl", (), Outcome.ABSTAINED, f"{module} binds {name} only when `{condition}` ({path}); the user's build/platform does not meet it")
        caller = calling_frame(code, ev, name)
        out = [make_suspect(path, 0.45, f"{module} binds {name} only when `{condition}`, and the condition was false at run time")]
        if caller is not None:
            out.insert(0, make_suspect(caller[2], 0.6, f"traceback frame {caller[0]} ({caller[1].function}) uses {module}.{name} without checking `{condition}`"))
        return localization_of(out, top)
    if binds:
        if user:
            return Localization("sftl", (), Outcome.ABSTAINED, f"{module}.{name} exists in {version} ({path}); the error comes from user code: a different installed version or a shadowed module")
        out = [make_suspect(path, 0.4, f"{module} binds {name} in {version}, yet it was missing at run time (import order or circular import)")]
    elif sub is not None:
        if user:
            return Localization("sftl", (), Outcome.ABSTAINED, f"{module}.{name} is a submodule ({sub}) that {module} does not import; `import {module}.{name}` first (user error)")
        out = [make_suspect(path, 0.7, f"{module} ({path}) does not import its submodule {name} ({sub}), which the caller expects")]
    else:
        defs = _definers(code, module, name)
        if user:
            hint = f"; {name} is defined in {', '.join(defs)}" if defs else ""
            return Localization("sftl", (), Outcome.ABSTAINED, f"{module} has no {name} in {version} and the error comes from user code: a removed or misspelled API{hint}")
        out = [make_suspect(path, 0.8, f"{module} ({path}) neither defines nor re-exports {name}")]
        for d in defs:
            out.append(make_suspect(d, 0.45, f"{d} defines {name}, but {module} does not re-export it"))
    caller = calling_frame(code, ev, name)
    if caller is not None:
        out.append(make_suspect(caller[2], 0.35, f"traceback frame {caller[0]} ({caller[1].function}) reads {module}.{name}"))
        if not binds and sub is None:
            blame = _referrer_by_history(code, module, name, defs)
            if blame:
                out.append(make_suspect(caller[2], 0.9, f"traceback frame {caller[0]} ({caller[1].function}) reads {module}.{name}; {blame}: the reference is the fault"))
    return localization_of(out, top)


def _referrer_by_history(code: Code, module: str, name: str, defs: list[str]) -> str | None:
    """Why the code referring to `module.name` is at fault rather than `module`: the name never was the module's,
    came only later, or moved to another module; None when the module lost it (a regression in the module)."""
    history = module_history(neighbours(code.source), module, name)
    if history is None:
        return None
    kind, why = history
    if kind == "removed":
        # moved: another module of the same package (or of the framework) defines it now
        own = code.module_path(module)
        elsewhere = [d for d in defs if d != own] or [
            d for d in _definers(code, module.rpartition(".")[0] or module, name) + _definers(code, module.split(".")[0], name) if d != own
        ]
        return f"{why}, and {name} now lives in {elsewhere[0]}: it moved" if elsewhere else None
    return why


def _importer(code: Code, ev: FrameEvidence, module: str) -> tuple[int, Frame, str] | None:
    last = module.rsplit(".", 1)[-1]
    for num, frame, path in reversed(ev.framework_frames):
        text = frame_source(code, path, frame)
        if "import" in text and (module in text or re.search(rf"\b{re.escape(last)}\b", text)):
            return num, frame, path
    fw = ev.framework_frames
    return fw[-1] if fw and ev.frames[-1][2] else None


def no_module(code: Code, ev: FrameEvidence, missing: Missing, version: str, top: int, framework: str | None) -> Localization:
    module = missing.module or missing.name
    packages = FRAMEWORK_PACKAGES.get(framework or "", ())
    user = user_frame(ev)
    importer = _importer(code, ev, module)
    if module.split(".")[0] not in packages:
        if importer is None or user:
            return Localization("sftl", (), Outcome.ABSTAINED, f"{module} is not part of {framework or 'the framework'}: a missing dependency in the environment")
        return localization_of(
            [make_suspect(importer[2], 0.5, f"traceback frame {importer[0]} imports the optional dependency {module} without a guard")],
            top,
        )
    if code.module_path(module) is not None or _compiled(code, module):
        return Localization("sftl", (), Outcome.ABSTAINED, f"{module} exists in the {version} source: an installation or build problem, not a source fault")
    parent = module.rpartition(".")[0]
    if user or importer is None:
        return Localization("sftl", (), Outcome.ABSTAINED, f"{module} does not exist in {version} and user code imports it: a removed or renamed module")
    out = [make_suspect(importer[2], 0.8, f"traceback frame {importer[0]} imports {module}, which does not exist in {version}")]
    parent_path = code.module_path(parent) if parent else None
    if parent_path:
        out.append(make_suspect(parent_path, 0.4, f"the package {parent} has no submodule {module.rsplit('.', 1)[-1]}"))
    return localization_of(out, top)


def _compiled(code: Code, module: str) -> bool:
    base = module.replace(".", "/")
    return any(code.text(base + ext) is not None for ext in (".pyi", "/__init__.pyi"))


def import_name(code: Code, ev: FrameEvidence, missing: Missing, version: str, top: int, framework: str | None) -> Localization:
    module, name = missing.module or "", missing.name
    if not module:
        # old Pythons say only "cannot import name 'X'": the importing line names the module
        for _, frame, path in reversed(ev.frames):
            m = re.search(rf"from\s+([\w.]+)\s+import\b.*\b{re.escape(name)}\b", frame_source(code, path, frame))
            if m:
                module = m.group(1)
                break
        if not module:
            return Localization("sftl", (), Outcome.ABSTAINED, f"the error does not say which module lacks {name}, and no traceback line imports it")
        missing = Missing(missing.kind, name=name, module=module, circular=missing.circular)
    if module.split(".")[0] not in FRAMEWORK_PACKAGES.get(framework or "", ()):
        return Localization("sftl", (), Outcome.ABSTAINED, f"module {module} is not part of {framework or 'the framework'}")
    path, binds, sub = _module_defines(code, module, name)
    user = user_frame(ev)
    importer = _importer(code, ev, module)
    if path is None:
        return Localization("sftl", (), Outcome.ABSTAINED, f"module {module} is not in the {version} source")
    if binds or sub is not None:
        if user and not missing.circular:
            return Localization("sftl", (), Outcome.ABSTAINED, f"{module} defines {name} in {version}; the error comes from user code: a different installed version")
        out = [make_suspect(path, 0.6, f"{module} defines {name} but was only partially initialized: a circular import")]
        if importer is not None:
            out.append(make_suspect(importer[2], 0.55, f"traceback frame {importer[0]} imports {name} from {module} during {module}'s own import"))
        return localization_of(out, top)
    defs = _definers(code, module.rpartition(".")[0] or module, name)
    if user:
        hint = f"; {name} is defined in {', '.join(defs)}" if defs else ""
        return Localization("sftl", (), Outcome.ABSTAINED, f"{module} has no {name} in {version} and user code imports it: a removed or renamed API{hint}")
    out = [make_suspect(path, 0.8, f"{module} ({path}) neither defines nor re-exports {name}")]
    if importer is not None:
        out.append(make_suspect(importer[2], 0.5, f"traceback frame {importer[0]} imports {name} from {module}"))
        blame = _referrer_by_history(code, module, name, defs)
        if blame:
            out.append(make_suspect(importer[2], 0.9, f"traceback frame {importer[0]} imports {name} from {module}; {blame}: the import is the fault"))
    for d in defs:
        out.append(make_suspect(d, 0.3, f"{d} defines {name}"))
    return localization_of(out, top)


def _foreign_module_attribute(
    code: Code, ev: FrameEvidence, missing: Missing, top: int, framework: str | None, issue: Issue | None
) -> Localization:
    """`module 'signal' has no attribute 'SIGKILL'` from framework code: the framework's reference is the fault."""
    module, name = missing.module or "", missing.name
    not_ours = f"module {module} is not part of {framework or 'the framework'}"
    # a trace that stops at an import statement was cut: the module being imported, whose frames are not
    # shown, asked for the name, and it may be the framework's; the framework's references to it then decide
    cut_in_import = stops_at_import([f for _, f, _ in ev.frames])
    if not cut_in_import and ((ev.frames and not ev.framework_frames) or (ev.framework_frames and user_frame(ev))):
        return Localization("sftl", (), Outcome.ABSTAINED, f"{not_ours}, and code outside the framework asked for {name}")
    if is_stdlib(module):
        status = stdlib_status(module, name)
        detail = {
            "present": f"{module}.{name} exists in this Python ({sys.platform}) but was missing where the report ran: "
            "it is defined only on some platforms or Python versions",
            "submodule": f"{module}.{name} is a submodule that `import {module}` does not bind",
            "absent": f"the standard library's {module} has no {name}",
            "unknown": f"the standard library's {module} had no {name} where the report ran",
        }[status]
        why = f"{module} is the standard library's, not the framework's; {detail}"
        if issue is not None and re.search(r"(?i)\bwindows\b|\b[A-Z]:\\", issue.text):
            why += " (the report runs on Windows)"
    else:
        why = f"{module} is a third-party package, not the framework; it has no {name} in the reporter's installation"
    mod = re.escape(module)
    reference = rf"\b{mod}\.{re.escape(name)}\b|^\s*from\s+{mod}\s+import\b[^\n]*\b{re.escape(name)}\b"
    ranked = rank_referrers(code, ev, issue, module, name, why, reference)
    if not ranked:
        return Localization("sftl", (), Outcome.ABSTAINED, f"{not_ours}, and no framework file refers to {module}.{name}")
    return localization_of(ranked, top, min_score=0.5)


def _compiled_module_attribute(
    code: Code, ev: FrameEvidence, module: str, name: str, stub: str, declared: bool, user: bool, version: str, top: int
) -> Localization:
    """`module 'torch._C' has no attribute '_cuda_getDeviceCount'`: a compiled module has no Python source to fix.

    Its stub declaring the name says some builds (CUDA, distributed, a platform) bind it and the one
    that ran did not: the framework code calling it without a build check is the fault.
    """
    what = (
        f"{module} is compiled; its stub ({stub}) declares {name}, so only some builds of {version} bind it"
        if declared
        else f"{module} is compiled and its stub ({stub}) does not declare {name}"
    )
    if user:
        return Localization("sftl", (), Outcome.ABSTAINED, f"{what}; the error comes from user code: the installed build lacks it")
    caller = calling_frame(code, ev, name)
    frames = [(n, f, p) for n, f, p in reversed(ev.framework_frames) if not p.endswith(".pyi")]
    referrer = (caller[0], caller[1], caller[2]) if caller is not None else (frames[0] if frames else None)
    if referrer is None:
        return Localization("sftl", (), Outcome.ABSTAINED, f"{what}; no framework frame calls it")
    n, f, p = referrer
    out = [make_suspect(p, 0.7, f"traceback frame {n} ({f.function}) uses {module}.{name} without checking the build; {what}")]
    out.append(make_suspect(stub, 0.1, f"the stub of {module}; the binding itself is C++"))
    return localization_of(out, top)


def _circular(code: Code, ev: FrameEvidence, module: str, name: str, path: str, sub: str | None, top: int) -> Localization:
    """`partially initialized module 'torch' has no attribute 'optim'`: the import that closed the cycle.

    When `module.name` is itself a module still executing on the traceback (its frame's line is an
    import), that import ran code needing `module.name` before it was bound: it closes the cycle.
    """
    frames = [(n, f, p) for n, f, p in ev.framework_frames if f.function not in ("__getattr__", "__getattribute__")]
    out = []
    raising = frames[-1] if frames else None
    closer = None
    if sub is not None:
        closer = next(
            ((n, f, p) for n, f, p in reversed(frames) if p == sub and re.search(r"\bimport\b", frame_source(code, p, f))), None
        )
    if closer is not None:
        n, f, p = closer
        out.append(make_suspect(p, 0.8, f"{module}.{name} ({p}) was still initializing when its line at frame {n} imported code that reads {module}.{name}: that import closes the circular import"))
    if raising is not None and raising is not closer:
        n, f, p = raising
        out.append(make_suspect(p, 0.6 if closer else 0.7, f"traceback frame {n} ({f.function}) reads {module}.{name} while {module} is only partially initialized"))
    out.append(make_suspect(path, 0.35, f"{module} ({path}) binds {name} only after the import that needed it"))
    return localization_of(out, top)
