"""Static reading of framework Python sources through a provider: modules, imports, classes, members, MROs."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from sftl.sources import SourceProvider

# top-level packages that belong to each framework's repository
FRAMEWORK_PACKAGES: dict[str, tuple[str, ...]] = {
    "pytorch": ("torch", "torchgen", "functorch", "torchdynamo", "torchinductor"),
    "tensorflow": ("tensorflow", "tensorflow_core"),
}


@dataclass(frozen=True)
class ClassRef:
    """A class definition found in a file."""

    path: str
    node: ast.ClassDef

    @property
    def name(self) -> str:
        return self.node.name

    def __hash__(self) -> int:
        return hash((self.path, self.node.name, self.node.lineno))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ClassRef)
            and (self.path, self.node.name, self.node.lineno) == (other.path, other.node.name, other.node.lineno)
        )


def module_of(path: str) -> str:
    """`torch/nn/modules/module.py` -> `torch.nn.modules.module`; a package's `__init__.py` -> the package."""
    mod = path.rsplit(".", 1)[0] if path.endswith((".py", ".pyi")) else path
    if mod.endswith("/__init__"):
        mod = mod[: -len("/__init__")]
    return mod.replace("/", ".")


_CHAR_CLASS = re.compile(r"\[(?:\\.|[^\]\\])*\]")
_ESCAPE = re.compile(r"\\.")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_GROUP = re.compile(r"\((?:\?:)?([^()]*)\)")
_COMMON_WORDS = frozenset({"class", "def", "self", "import", "from", "return", "lambda", "async", "cls"})


def required_word(pattern: str) -> str | None:
    """The longest literal word every match of the regex `pattern` contains, else None.

    Conservative: character classes and escapes are no words, a word's last letter is dropped when
    a quantifier follows it, and an alternation (top level, or one group level) counts only the
    words all its branches share; an optional group, deeper nesting or inline flags give None.
    """
    if "(?i" in pattern or "(?!" in pattern or "(?<!" in pattern or re.search(r"\)[?*{]", pattern):
        return None  # a negative look-around's words are absent from a match
    plain = _ESCAPE.sub(" ", _CHAR_CLASS.sub(" ", pattern))
    plain = re.sub(r"\w(?=[?*{])", " ", plain)
    words = _required_words(plain)
    rare = words - _COMMON_WORDS or words  # "class" or "self" is in most files: the name it precedes is not
    return max(sorted(rare), key=len) if rare else None


def _required_words(plain: str) -> set[str]:
    """Words every match of `plain` (a pattern with classes and escapes blanked) holds; empty: none known."""
    branches, depth, start = [], 0, 0
    for i, ch in enumerate(plain):
        depth += (ch == "(") - (ch == ")")
        if ch == "|" and depth == 0:
            branches.append(plain[start:i])
            start = i + 1
    if branches:  # a top-level alternation: what every branch holds
        branches.append(plain[start:])
        return set.intersection(*(_required_words(b) for b in branches))
    words: set[str] = set()
    for m in _GROUP.finditer(plain):
        words |= set.intersection(*(set(_WORD.findall(b)) for b in m.group(1).split("|")))
    outside = _GROUP.sub(" ", plain)
    if "(" in outside or ")" in outside:
        return set()  # nested groups: claim nothing
    return words | set(_WORD.findall(outside))


def unanchored(pattern: str) -> re.Pattern[str] | None:
    r"""`pattern` without a leading `^\s*` / `^\s+`: it matches wherever `pattern` does (a cheap test first)."""
    for lead in ("^\\s*", "^\\s+"):
        if pattern.startswith(lead) and len(pattern) > len(lead):
            try:
                return re.compile(pattern[len(lead):])
            except re.error:
                return None
    return None


class Code:
    """Caches of one source provider's Python files, parsed on demand (never the whole tree unless asked)."""

    def __init__(self, source: SourceProvider) -> None:
        self.source = source
        self._text: dict[str, str | None] = {}
        self._tree: dict[str, ast.Module | None] = {}
        self._imports: dict[str, dict[str, str]] = {}
        self._classes: dict[str, dict[str, ast.ClassDef]] = {}
        self._members: dict[tuple[str, int, bool], frozenset[str]] = {}
        self._py_files: list[str] | None = None
        self._grep: dict[str, list[str]] = {}
        self._deferred: list[str] = []

    # -- files ----------------------------------------------------------------------------------

    def text(self, path: str) -> str | None:
        if path not in self._text:
            self._text[path] = self.source.read_text(path)
        return self._text[path]

    def tree(self, path: str) -> ast.Module | None:
        if path not in self._tree:
            text = self.text(path)
            self._tree[path] = parse_lenient(text) if text is not None else None
        return self._tree[path]

    def module_path(self, dotted: str, stubs: bool = True) -> str | None:
        """The file defining module `dotted`, or None when the provider holds none.

        Compiled modules (`torch._C`) are read from their `.pyi` stubs when `stubs` is set, so that
        classes with C++ bases still resolve to the methods they really have.
        """
        base = dotted.replace(".", "/")
        forms = (".py", "/__init__.py", ".pyi", "/__init__.pyi") if stubs else (".py", "/__init__.py")
        for ext in forms:
            if self.text(base + ext) is not None:
                return base + ext
        return None

    def py_files(self) -> list[str]:
        """Every framework .py file the provider lists (only used for whole-tree searches)."""
        if self._py_files is None:
            packages = FRAMEWORK_PACKAGES.get(self.source.framework, ())
            files = [f for f in self.source.list_files() if f.endswith(".py")]
            own = [f for f in files if f.split("/", 1)[0] in packages]
            self._py_files = own or files
        return self._py_files

    def grep(self, pattern: str) -> list[str]:
        """Files whose text matches the regex `pattern` (a whole-tree scan, cached per pattern)."""
        if pattern not in self._grep:
            self.prefetch([pattern, *self._deferred])
            self._deferred = []
        return self._grep[pattern]

    def defer_prefetch(self, patterns: list[str]) -> None:
        """Searches to run along with the first whole-tree scan, if one is ever needed."""
        self._deferred.extend(patterns)

    def prefetch(self, patterns: list[str]) -> None:
        """Run several whole-tree searches in one pass over the files (reading is what costs)."""
        todo = [(p, re.compile(p, re.M)) for p in dict.fromkeys(patterns) if p not in self._grep]
        if not todo:
            return
        hits: dict[str, list[str]] = {p: [] for p, _ in todo}
        # a word every match must hold, tested with `in` before the regex (most files hold none), then the
        # regex without its leading `^\s*`: Python's re scans for a literal prefix fast, for a line start slowly
        needs = [(p, rx, required_word(p), unanchored(p)) for p, rx in todo]
        for path in self.py_files():
            text = self._text.get(path) or self.source.read_text(path)
            if not text:
                continue
            matched = False
            for p, rx, word, loose in needs:
                if (word is None or word in text) and (loose is None or loose.search(text)) and rx.search(text):
                    hits[p].append(path)
                    matched = True
            if matched:
                self._text[path] = text
        self._grep.update(hits)

    # -- module structure -----------------------------------------------------------------------

    def imports(self, path: str) -> dict[str, str]:
        """Local name -> the dotted object it names, for every import in the file (top level wins)."""
        if path in self._imports:
            return self._imports[path]
        out: dict[str, str] = {}
        tree = self.tree(path)
        package = module_of(path) if "/__init__.py" in path else module_of(path).rpartition(".")[0]
        if tree is not None:
            top = {id(n) for n in tree.body}
            nodes = list(tree.body) + [n for n in ast.walk(tree) if id(n) not in top]
            for node in nodes:
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.asname:
                            out.setdefault(alias.asname, alias.name)
                        else:
                            out.setdefault(alias.name.split(".")[0], alias.name.split(".")[0])
                            out.setdefault(alias.name, alias.name)
                elif isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    if node.level:
                        parts = package.split(".") if package else []
                        parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                        base = ".".join(p for p in [*parts, node.module or ""] if p)
                    for alias in node.names:
                        if alias.name == "*":
                            continue
                        out.setdefault(alias.asname or alias.name, f"{base}.{alias.name}" if base else alias.name)
        self._imports[path] = out
        return out

    def star_imports(self, path: str) -> list[str]:
        tree = self.tree(path)
        out = []
        package = module_of(path) if "/__init__.py" in path else module_of(path).rpartition(".")[0]
        for node in tree.body if tree else []:
            if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                base = node.module or ""
                if node.level:
                    parts = package.split(".") if package else []
                    parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                    base = ".".join(p for p in [*parts, node.module or ""] if p)
                out.append(base)
        return out

    def classes(self, path: str) -> dict[str, ast.ClassDef]:
        """Classes defined at module level (including inside if/try blocks), by name."""
        if path not in self._classes:
            out: dict[str, ast.ClassDef] = {}
            tree = self.tree(path)
            stack: list[ast.stmt] = list(tree.body) if tree else []
            while stack:
                node = stack.pop(0)
                if isinstance(node, ast.ClassDef):
                    out.setdefault(node.name, node)
                elif isinstance(node, (ast.If, ast.Try)):
                    stack.extend(node.body + node.orelse)
                    if isinstance(node, ast.Try):
                        for h in node.handlers:
                            stack.extend(h.body)
            self._classes[path] = out
        return self._classes[path]

    def module_names(self, path: str, depth: int = 0) -> set[str]:
        """Names a module binds at top level: defs, classes, assignments, imports, star imports."""
        tree = self.tree(path)
        names: set[str] = set(self.imports(path)) if tree else set()
        if depth < 3:
            for star in self.star_imports(path):
                star_path = self.module_path(star)
                if star_path and star_path != path:
                    names.update(n for n in self.module_names(star_path, depth + 1) if not n.startswith("_"))
        stack: list[ast.stmt] = list(tree.body) if tree else []
        while stack:
            node = stack.pop(0)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    names.update(_bound(t))
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                stack.extend(node.body + getattr(node, "orelse", []))
                for h in getattr(node, "handlers", []):
                    stack.extend(h.body)
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                call = node.value
                func = call.func
                fname = _dotted(func) or ""
                if fname.endswith("setattr") and len(call.args) >= 2:
                    # setattr(_current_module, "keras", ...): a name bound on the module itself
                    arg = call.args[1]
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        names.add(arg.value)
                elif isinstance(func, ast.Attribute) and func.attr == "update" and _dotted(func.value) in (None, "globals"):
                    names.add("*dynamic*")  # globals().update(...) binds names we cannot see
        return names

    def resolve(self, dotted: str, depth: int = 0) -> tuple[str, str] | None:
        """A dotted object name -> (file, top-level name in it), following re-exports and aliases."""
        if depth > 8 or not dotted:
            return None
        parts = dotted.split(".")
        for i in range(len(parts) - 1, 0, -1):
            path = self.module_path(".".join(parts[:i]))
            if path is None:
                continue
            rest = parts[i:]
            head = rest[0]
            if head in self.classes(path):
                return (path, head) if len(rest) == 1 else None
            target = self.imports(path).get(head)
            if target and target != dotted:
                return self.resolve(".".join([target, *rest[1:]]), depth + 1)
            for star in self.star_imports(path):
                found = self.resolve(".".join([star, *rest]), depth + 1)
                if found:
                    return found
            if head in self.module_names(path):
                return (path, head) if len(rest) == 1 else None
            return None
        return None

    def resolve_name(self, path: str, expr: str) -> ClassRef | None:
        """A (possibly dotted) class name as written in `path` -> its definition."""
        head, _, rest = expr.partition(".")
        if not rest and head in self.classes(path):
            return ClassRef(path, self.classes(path)[head])
        target = self.imports(path).get(head)
        dotted = f"{target}.{rest}" if target and rest else target
        if dotted is None:
            for star in self.star_imports(path):
                found = self.resolve(f"{star}.{expr}")
                if found:
                    return self.class_at(*found)
            return None
        found = self.resolve(dotted)
        return self.class_at(*found) if found else None

    def class_at(self, path: str, name: str) -> ClassRef | None:
        node = self.classes(path).get(name)
        return ClassRef(path, node) if node else None

    # -- classes --------------------------------------------------------------------------------

    def bases(self, cls: ClassRef) -> tuple[list[ClassRef], list[str]]:
        """Resolved base classes, and the written names of those without Python source (C, third-party)."""
        found: list[ClassRef] = []
        unresolved: list[str] = []
        for base in cls.node.bases:
            node = base.value if isinstance(base, ast.Subscript) else base
            name = _dotted(node)
            if not name or name in ("object", "Generic", "Protocol", "ABC", "abc.ABC"):
                continue
            ref = self.resolve_name(cls.path, name)
            if ref is None or ref == cls:
                unresolved.append(name)
            else:
                found.append(ref)
        return found, unresolved

    def mro(self, cls: ClassRef) -> tuple[list[ClassRef], list[str]]:
        """The class and its ancestors with source, most specific first, plus unresolved base names."""
        order: list[ClassRef] = []
        unresolved: list[str] = []
        stack = [cls]
        while stack and len(order) < 40:
            cur = stack.pop(0)
            if cur in order:
                continue
            order.append(cur)
            bases, missing = self.bases(cur)
            unresolved.extend(m for m in missing if m not in unresolved)
            stack.extend(bases)
        return order, unresolved

    def members(self, cls: ClassRef, class_level: bool = False) -> frozenset[str]:
        """Names a class itself binds: methods, class attributes, slots, and (unless `class_level`)
        `self.x =` in its methods."""
        key = (cls.path, cls.node.lineno, class_level)
        if key in self._members:
            return self._members[key]
        names: set[str] = set()
        for node in cls.node.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    names.update(_bound(t))
                    if any(isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets):
                        names.update(_strings(node.value))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
        if class_level:
            return frozenset(names)
        for node in ast.walk(cls.node):  # type: ignore[assignment]  # any node, not only statements
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for sub in ast.walk(t):
                        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id in ("self", "cls"):
                            names.add(sub.attr)
            elif isinstance(node, ast.Call):
                # setattr(self, "x", v) / object.__setattr__(self, "x", v) / super().__setattr__("x", v)
                fname = _dotted(node.func) or (node.func.attr if isinstance(node.func, ast.Attribute) else "")
                if fname.endswith("setattr") or fname.endswith("__setattr__"):
                    for arg in node.args[:2]:
                        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                            names.add(arg.value)
        self._members[key] = frozenset(names)
        return self._members[key]

    def self_refs(self, cls: ClassRef, name: str) -> int:
        """How often the class's own code reads `self.<name>` / `cls.<name>`."""
        return sum(
            1
            for n in ast.walk(cls.node)
            if isinstance(n, ast.Attribute) and n.attr == name and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls")
        )

    def class_text(self, cls: ClassRef) -> str:
        text = self.text(cls.path) or ""
        lines = text.splitlines()
        return "\n".join(lines[cls.node.lineno - 1 : (cls.node.end_lineno or cls.node.lineno)])

    def enclosing(self, path: str, line: int) -> tuple[ast.ClassDef | None, ast.FunctionDef | ast.AsyncFunctionDef | None]:
        """The innermost class and function around a line."""
        tree = self.tree(path)
        klass: ast.ClassDef | None = None
        func: ast.FunctionDef | ast.AsyncFunctionDef | None = None
        if tree is None:
            return None, None
        for node in ast.walk(tree):
            if not isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if start <= line <= (node.end_lineno or node.lineno):
                if isinstance(node, ast.ClassDef):
                    if klass is None or node.lineno > klass.lineno:
                        klass = node
                elif func is None or node.lineno > func.lineno:
                    func = node
        return klass, func

    def find_line(self, path: str, line: int | None, source: str) -> int | None:
        """The line a frame points at, re-found by its text when the file has shifted."""
        text = self.text(path)
        if text is None:
            return None
        lines = text.splitlines()
        want = source.strip()
        if line and 0 < line <= len(lines) and (not want or lines[line - 1].strip() == want):
            return line
        if want:
            hits = [i + 1 for i, ln in enumerate(lines) if ln.strip() == want]
            if hits:
                return min(hits, key=lambda i: abs(i - (line or 0)))
        return line if line and 0 < line <= len(lines) else None


_PY2_EXCEPT = re.compile(r"^(\s*)except\s+([\w.()]+(?:\s*,\s*[\w.]+)*?)\s*,\s*(\w+)\s*:", re.M)
_PY2_PRINT = re.compile(r"^(\s*)print(?:\s*>>|\s+(?![(=]))\S.*$", re.M)


def parse_lenient(text: str, attempts: int = 25) -> ast.Module | None:
    """Parse old releases' files too: `async` as a name (TF 1.x) needs the 3.6 grammar; Python 2
    statements (`print x`, `except E, e`) are blanked line by line so the classes around them survive."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        pass
    # the commonest Python 2 statements, rewritten to their Python 3 forms (line numbers kept)
    text = _PY2_EXCEPT.sub(r"\1except \2 as \3:", text)
    text = _PY2_PRINT.sub(r"\1pass", text)
    for version in ((3, 6), None):
        try:
            return ast.parse(text, feature_version=version) if version else ast.parse(text)
        except (SyntaxError, ValueError):
            pass
    lines = text.splitlines()
    blanked: set[int] = set()
    for _ in range(attempts):
        try:
            return ast.parse("\n".join(lines) + "\n")
        except SyntaxError as exc:
            n = (exc.lineno or 0) - 1
            if not 0 <= n < len(lines) or n in blanked:
                return None
            blanked.add(n)
            line = lines[n]
            indent = line[: len(line) - len(line.lstrip())]
            # an `except E, e:` opens a block: keep a block opener so its body still parses
            lines[n] = indent + ("if True:" if line.rstrip().endswith(":") else "pass")
        except ValueError:
            return None
    return None


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def _bound(target: ast.AST) -> list[str]:
    """Names an assignment target binds (`a`, `a, b`), not the bases of `a.x = ...`."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in _bound(elt)]
    if isinstance(target, ast.Starred):
        return _bound(target.value)
    return []


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def dotted(node: ast.AST) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    return _dotted(node)
