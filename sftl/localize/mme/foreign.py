"""Missing names whose owner is outside the framework (the standard library, a third-party package): the framework file that refers to them.

The owner's definition is not the framework's to fix, so the referrer is: the innermost framework
frame whose line uses the name, or, when no frame reaches the framework (a cut traceback, a
compiler error that prints generated code), the framework files that use the owner, ranked by what
the report says: the title naming the file, the file being the framework's module for that
package, the reference running at import time, and the absence of a guard.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import sys
import warnings

from sftl.localize.mme.evidence import FrameEvidence, Missing, frame_source, make_suspect
from sftl.localize.pycode import FRAMEWORK_PACKAGES, Code
from sftl.model import Frame, Issue, Suspect

# stdlib modules whose import has side effects (opens a browser, a window, prints): never imported to check a name
_NO_IMPORT = {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "__main__", "__hello__", "__phello__"}
# words of a title that name no file
_GENERIC = {
    "error", "errors", "attributeerror", "importerror", "modulenotfounderror", "object", "attribute", "module",
    "utils", "init", "torch", "tensorflow", "python", "type", "types", "when", "with", "from", "that", "this",
    "after", "before", "fails", "failed", "failure", "using", "caused", "does", "have", "into", "support",
}  # fmt: skip
# a dotted name, matched whole (no backtracking into the chain); the exception type is checked after
_DOTTED_RE = re.compile(r"(?<![\w.])([A-Za-z_]\w*)((?:\.\w+)++)")
_GUARD_RE = re.compile(r"hasattr\(|sys\.platform|platform\.system|os\.name|IS_WINDOWS|_IS_WINDOWS|is_available\(|IS_LINUX|IS_MACOS")


def is_stdlib(module: str) -> bool:
    return module.split(".")[0] in sys.stdlib_module_names


def stdlib_status(module: str, name: str) -> str:
    """What this interpreter's standard library says of `module.name`: present | submodule | absent | unknown."""
    top = module.split(".")[0]
    if top in _NO_IMPORT or not is_stdlib(module):
        return "unknown"
    with warnings.catch_warnings():  # a deprecated module (crypt) warns when imported
        warnings.simplefilter("ignore")
        try:
            # a submodule first: whether `import importlib` binds `abc` depends on what else was imported
            if importlib.util.find_spec(f"{module}.{name}") is not None:
                return "submodule"
        except Exception:  # noqa: BLE001  # finding it imports the parent, which may fail on this platform
            pass
        try:
            mod = importlib.import_module(module)
        except Exception:  # noqa: BLE001  # a platform-only module (winreg on Linux) cannot be read here
            return "unknown"
    return "present" if hasattr(mod, name) else "absent"


def foreign_package(missing: Missing, ev: FrameEvidence, issue: Issue | None, framework: str | None) -> str | None:
    """The third-party (or standard-library) package the missing name's owner belongs to, when the report shows one."""
    own = set(FRAMEWORK_PACKAGES.get(framework or "", ())) | {p for pkgs in FRAMEWORK_PACKAGES.values() for p in pkgs}
    if missing.owner_module:
        top = missing.owner_module.split(".")[0]
        return None if top in own else top
    # frames inside another package, innermost first (site-packages/triton/... raising on the framework's behalf)
    for _, frame, repo in reversed(ev.frames):
        if repo:
            break
        m = re.search(r"(?:site|dist)-packages[/\\]([A-Za-z_]\w*)[/\\]", frame.path)
        if m and m.group(1) not in own:
            return m.group(1)
    # a dotted exception type of another package wrapping the error (triton.compiler.errors.CompilationError)
    text = issue.text if issue is not None else ev.message
    for m in _DOTTED_RE.finditer(text):
        top, last = m.group(1), m.group(2).rsplit(".", 1)[-1]
        if last.endswith(("Error", "Exception")) and top not in own and top not in ("builtins", "exceptions") and not is_stdlib(top):
            return top
    return None


def raised_in(ev: FrameEvidence, package: str) -> bool:
    """Was the error raised inside `package` (its frames innermost), on behalf of the framework code that called it?"""
    if not ev.frames:
        return False
    path = ev.frames[-1][1].path.replace("\\", "/")
    return f"/{package}/" in path


def _title_words(issue: Issue | None) -> set[str]:
    if issue is None:
        return set()
    words = {w.lower().strip("_") for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]+", issue.title)}
    return {w for w in words if len(w) >= 4 and w not in _GENERIC}


def _path_words(path: str) -> tuple[str, list[str]]:
    parts = path.rsplit(".", 1)[0].split("/")
    return parts[-1].strip("_").lower(), [p.strip("_").lower() for p in parts[1:-1]]


def _import_time_use(code: Code, path: str, pattern: re.Pattern[str]) -> tuple[bool, bool]:
    """(the reference runs when the module is imported: module level, a class body, a default argument
    or decorator; it sits under a guard such as `hasattr`/`sys.platform`)."""
    text = code.text(path) or ""
    lines = text.splitlines()
    hits = [i + 1 for i, ln in enumerate(lines) if pattern.search(ln)]
    tree = code.tree(path)
    if not hits or tree is None:
        return False, False
    bodies: list[tuple[int, int]] = []  # line spans of function bodies (run later, not at import)
    guards: list[tuple[int, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            body = node.body if isinstance(node.body, list) else [node.body]
            bodies.append((body[0].lineno, max(b.end_lineno or b.lineno for b in body)))
        elif isinstance(node, ast.Try) or (isinstance(node, (ast.If, ast.IfExp)) and _GUARD_RE.search(ast.unparse(node.test)[:300])):
            guards.append((node.lineno, node.end_lineno or node.lineno))  # a platform/feature test, or try/except
    at_import = any(not any(a <= h <= b for a, b in bodies) for h in hits)
    guarded = all(any(a <= h <= b for a, b in guards) or _GUARD_RE.search(lines[h - 1]) for h in hits)
    return at_import, guarded


def rank_referrers(
    code: Code,
    ev: FrameEvidence,
    issue: Issue | None,
    owner: str,
    name: str,
    why_missing: str,
    reference: str,
    users: str | None = None,
    package: str | None = None,
) -> list[Suspect]:
    """Framework files that refer to `owner`'s missing `name`, most suspect first.

    `reference`: a regex of the reference in source (`\\bsignal\\.SIGKILL\\b`); `users`: a regex of the
    files that use the owner at all (`^\\s*import triton`), searched when no file has the reference.
    """
    rx = re.compile(reference)
    out: list[Suspect] = []
    fw = [(n, f, p) for n, f, p in reversed(ev.framework_frames) if f.function not in ("__getattr__", "__getattribute__")]
    if fw:
        def refers(n: int, f: Frame, p: str) -> bool:
            line = frame_source(code, p, f)
            return bool((rx.pattern and rx.search(line)) or re.search(rf"\.{re.escape(name)}\b", line))

        referring = next(((n, f, p) for n, f, p in fw if refers(n, f, p)), None)
        first = referring or fw[0]
        n, f, p = first
        how = f"refers to {owner}.{name}" if referring else f"is the innermost framework frame, the last before {owner}'s code"
        out.append(make_suspect(p, 0.8, f"traceback frame {n} ({f.function}) {how}; {why_missing}: the framework's use is the fault"))
        for rank, (n2, f2, p2) in enumerate(x for x in fw if x is not first):
            out.append(make_suspect(p2, 0.3 / (rank + 1), f"traceback frame {n2} ({f2.function}) leads to the reference"))
        return out
    files = code.grep(reference) if reference else []
    how = f"refers to {owner}.{name}"
    if not files and users:
        files, how = code.grep(users), f"uses {package or owner}"
    title = _title_words(issue)
    import_frames = not ev.frames or any(f.function == "<module>" for _, f, _ in ev.frames)
    for path in files[:200]:
        stem, dirs = _path_words(path)
        score, why = 0.3, [f"{path} {how}; {why_missing}; no traceback frame reaches the framework"]
        if stem in title:
            score += 0.35
            why.append(f"the title names {stem}")
        named_dirs = [d for d in dirs if d in title]
        if named_dirs:
            score += min(0.2, 0.1 * len(named_dirs))
            why.append(f"the title names {'/'.join(named_dirs)}")
        if package and stem == package.lower():
            score += 0.2
            why.append(f"it is the framework's module for {package}")
        at_import, guarded = _import_time_use(code, path, rx) if rx.pattern else (False, False)
        if at_import and import_frames and how.startswith("refers"):
            score += 0.1
            why.append("the reference runs at import time")
        if guarded and how.startswith("refers"):
            score -= 0.15
            why.append("every reference is guarded")
        out.append(make_suspect(path, score, "; ".join(why)))
    return out
