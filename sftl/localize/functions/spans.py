"""The functions, methods and kernels of one source file: qualified names, first and last lines, and the text a
ranker reads of each (Python with tree-sitter-python, C++ and CUDA with tree-sitter-cpp, macro-wrapped bodies
included)."""

from __future__ import annotations

import ast
import functools
import hashlib
import re
import warnings
from dataclasses import dataclass
from typing import Any

PY_SUFFIXES = (".py", ".pyi")
CXX_SUFFIXES = (".cc", ".cpp", ".cxx", ".c", ".h", ".hpp", ".hh", ".cu", ".cuh", ".inl")
# a file larger than this is generated or vendored: nobody reads it function by function
MAX_BYTES = 3_000_000
# raised whenever parsing changes, so a file's reading kept on disk by an older sftl (features.py) is not read
SPANS_VERSION = 4
# the macros that open a registration or a kernel body at namespace scope
REGISTRATION = re.compile(r"^(REGISTER\w*|TORCH_LIBRARY\w*|TF_CALL_\w+|DEFINE_DISPATCH|REGISTER_DISPATCH)$")
MACRO_NAME = re.compile(r"^[A-Z][A-Z0-9_]+$")
MACRO_CALL = re.compile(r"^[A-Z][A-Z0-9_]+\((.*)\)$")
# attribute-like macros before a declaration, which tree-sitter reads as types and then loses the function:
# blanked (same length, so lines and offsets hold) before parsing
ATTRIBUTE_MACROS = re.compile(
    rb"\b(?:C10_HOST_DEVICE|C10_DEVICE|C10_HOST|C10_API|C10_EXPORT|C10_ALWAYS_INLINE|C10_NOINLINE|TORCH_API|"
    rb"TORCH_CUDA_CPP_API|TORCH_CUDA_CU_API|TORCH_PYTHON_API|CAFFE2_API|C10_LAUNCH_BOUNDS_\d\([^()]*\)|"
    rb"__host__|__device__|__global__|__forceinline__|__inline__|EIGEN_DEVICE_FUNC|EIGEN_STRONG_INLINE|"
    rb"EIGEN_ALWAYS_INLINE|TF_EXPORT|TF_MUST_USE_RESULT|TF_ATTRIBUTE_\w+|TFLITE_ATTRIBUTE_\w+)\b")
# explicit instantiation declarations (`extern template struct Op<CPUDevice, float>;`) define nothing, and
# tree-sitter loses the definitions after them: blanked too
EXTERN_TEMPLATE = re.compile(rb"^[ \t]*extern[ \t]+template\b[^;{]*;", re.M)
STRING = re.compile(r'"((?:[^"\\\n]|\\.){4,})"' + r"|'((?:[^'\\\n]|\\.){4,})'")


@dataclass(frozen=True)
class Span:
    """One function of a file: its qualified name as the language spells it, lines (1-based, inclusive), the
    class or namespace path it sits in, its kind and its source text."""

    name: str
    start: int
    end: int
    kind: str  # "function" | "method" | "kernel" | "registration"
    text: str

    @functools.cached_property
    def leaf(self) -> str:
        """The last component: `Class.method` -> `method`, `ns::Op::Compute` -> `Compute`, `REGISTER_OP(Foo)` -> `Foo`."""
        wrapped = MACRO_CALL.match(self.name)
        if wrapped:
            return wrapped.group(1).split(",")[0].strip()
        return re.split(r"::|\.", self.name)[-1]

    @functools.cached_property
    def parts(self) -> tuple[str, ...]:
        return tuple(p for p in re.split(r"::|\.", self.name) if p)

    def literals(self) -> list[str]:
        """The string literals of the body (the messages it raises or checks)."""
        return [a or b for a, b in STRING.findall(self.text)]


def spans_of(path: str, text: str) -> tuple[Span, ...]:
    """The functions of a file by its suffix; () for another language, a file too large, or one that fails to parse.
    Parsed once per text in a process; what scoring reads of a file, these spans included, is kept on disk by
    `features.file_functions`."""
    if len(text) > MAX_BYTES:
        return ()
    language = "py" if path.endswith(PY_SUFFIXES) else "cxx" if path.endswith(CXX_SUFFIXES) else ""
    if not language:
        return ()
    digest = hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=16).hexdigest()
    return _cached(digest, language, text)


@functools.lru_cache(maxsize=64)
def _cached(digest: str, language: str, text: str) -> tuple[Span, ...]:
    # keyed by the text's hash (the text rides along for the miss): a file read again costs nothing
    return python_spans(text) if language == "py" else cxx_spans(text)


# the statements and clauses whose blocks may hold a def (expressions and simple statements never do)
PY_CONTAINERS = frozenset((
    "block", "if_statement", "elif_clause", "else_clause", "for_statement", "while_statement",
    "try_statement", "except_clause", "except_group_clause", "finally_clause", "with_statement",
    "match_statement", "case_clause"))
# Python 2 statements tree-sitter-python reads without an error, where `ast` (and so the interpreter) fails:
# `print x`, `exec code`; `raise E, "message"` and `except E, e:` are told by their comma
PY2_STATEMENTS = frozenset(("print_statement", "exec_statement"))


def python_parser() -> Any:
    import tree_sitter
    import tree_sitter_python

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_python.language()))


@functools.lru_cache(maxsize=1)
def _python_parser() -> Any:
    return python_parser()


class _NotPython3(Exception):
    """A statement the interpreter would not parse."""


def python_spans(text: str) -> tuple[Span, ...]:
    """Every def of a Python file, `Class.method` and `outer.inner` qualified; () when it does not parse.

    Read by tree-sitter-python (half to two thirds of `ast`'s time on a large file); where its tree has an
    error or a Python 2 statement, `ast` decides: the file then has no functions unless the interpreter parses
    it (the few constructs tree-sitter's grammar lacks, `return *a, *b`, are read as the interpreter reads
    them)."""
    if "\0" in text:
        return ()  # the interpreter rejects a NUL byte anywhere
    # the interpreter ends a line at \r as well as \n; tree-sitter counts rows by \n only
    source = (text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text).encode("utf-8", "replace")
    try:
        tree = _python_parser().parse(source)
    except Exception:  # noqa: BLE001 - a parser failure on one file only loses its functions
        return ()
    root = tree.root_node
    if root.has_error:
        return ast_python_spans(text)
    lines = text.splitlines()
    out: list[Span] = []

    def walk(node: Any, scope: tuple[str, ...], in_class: bool) -> None:
        children = node.named_children
        if node.type == "try_statement":  # `ast`'s order: the body, else, finally, then the handlers
            children = ([c for c in children if not c.type.startswith("except")]
                        + [c for c in children if c.type.startswith("except")])
        for child in children:
            t = child.type
            outer = child
            if t == "decorated_definition":
                child = child.child_by_field_name("definition")
                t = child.type
            if t == "function_definition":
                name = _name(child)
                start = outer.start_point[0] + 1  # the first decorator's line
                end = _last_row(child) + 1  # the last statement's, not a comment after it
                out.append(Span(".".join((*scope, name)), start, end, "method" if in_class else "function",
                                "\n".join(lines[start - 1:end])))
                walk(child.child_by_field_name("body"), (*scope, name), False)
            elif t == "class_definition":
                walk(child.child_by_field_name("body"), (*scope, _name(child)), True)
            elif t in PY_CONTAINERS:
                if t == "except_clause" and any(c.type == "," for c in child.children):
                    raise _NotPython3
                walk(child, scope, in_class)  # defs under if/try/with blocks
            elif t in PY2_STATEMENTS or (
                    t == "raise_statement" and any(c.type == "expression_list" for c in child.named_children)):
                raise _NotPython3

    try:
        walk(root, (), False)
    except (_NotPython3, RecursionError):  # nesting past the interpreter's limits too
        return ast_python_spans(text)
    return tuple(out)


def _name(node: Any) -> str:
    name = node.child_by_field_name("name")
    return str(name.text.decode("utf-8", "replace"))


def _last_row(node: Any) -> int:
    """The row where a node's last token other than a comment ends (tree-sitter keeps the comments after a
    block's last statement in the block; the interpreter ends a def at its last statement)."""
    while node.child_count:
        children = node.children
        i = len(children) - 1
        while i > 0 and children[i].type == "comment":
            i -= 1
        node = children[i]
    return int(node.end_point[0])


# the statements whose bodies may hold a def, for `ast_python_spans`
AST_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.With, ast.AsyncWith, ast.ExceptHandler,
                ast.Match, ast.match_case, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))


def ast_python_spans(text: str) -> tuple[Span, ...]:
    """`python_spans` by `ast`: only for a file tree-sitter's tree has an error in (or a Python 2 statement),
    which is then read as the interpreter reads it, or found not to parse: ()."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes in an old release's strings are not our concern
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    lines = text.splitlines()
    out: list[Span] = []

    def walk(node: ast.AST, scope: tuple[str, ...], in_class: bool) -> None:
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            for child in getattr(node, field, None) or ():
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    end = child.end_lineno or child.lineno
                    out.append(Span(".".join((*scope, child.name)), start, end, "method" if in_class else "function",
                                    "\n".join(lines[start - 1:end])))
                    walk(child, (*scope, child.name), False)
                elif isinstance(child, ast.ClassDef):
                    walk(child, (*scope, child.name), True)
                elif isinstance(child, AST_COMPOUND):
                    walk(child, scope, in_class)  # defs under if/try/with blocks

    walk(tree, (), False)
    return tuple(out)


def cxx_parser() -> Any:
    import tree_sitter
    import tree_sitter_cpp

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_cpp.language()))


@functools.lru_cache(maxsize=1)
def _parser() -> Any:
    return cxx_parser()


def cxx_spans(text: str) -> tuple[Span, ...]:
    """Every function body of a C++/CUDA file, `ns::Class::Method` qualified; macro-wrapped definitions
    (`TORCH_IMPL_FUNC(name)(...) {}`) by the name they wrap, registration statements by what they register."""
    try:
        source = text.encode("utf-8", "replace")
        tree = _parser().parse(blanked(source))
    except Exception:  # noqa: BLE001 - a parser failure on one file only loses its functions
        return ()
    out: list[Span] = []

    def node_text(n: Any) -> str:
        return source[n.start_byte:n.end_byte].decode("utf-8", "replace")

    def add(name: str, n: Any, kind: str) -> None:
        out.append(Span(name, n.start_point[0] + 1, n.end_point[0] + 1, kind, node_text(n)))

    def walk(node: Any, scope: tuple[str, ...], depth: int, in_class: bool = False) -> None:
        if depth > 60:
            return
        for child in node.named_children:
            t = child.type
            if t == "namespace_definition":
                name = child.child_by_field_name("name")
                body = child.child_by_field_name("body")
                inner = (*scope, *node_text(name).split("::")) if name is not None else scope
                if body is not None:
                    walk(body, inner, depth + 1)
            elif t in ("class_specifier", "struct_specifier"):
                name = child.child_by_field_name("name")
                body = child.child_by_field_name("body")
                if body is not None:
                    walk(body, (*scope, _plain(node_text(name))) if name is not None else scope, depth + 1, True)
            elif t in ("template_declaration", "linkage_specification", "declaration_list", "field_declaration_list",
                       "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "export_declaration"):
                walk(child, scope, depth + 1, in_class)
            elif t == "function_definition":
                name, kind = _function_name(child, node_text)
                if name:
                    qualified = name if MACRO_CALL.match(name) else "::".join((*scope, name))
                    kind = "kernel" if kind == "function" and _is_kernel(qualified) else kind
                    if kind == "function" and (in_class or "::" in name):
                        kind = "method"
                    add(qualified, child, kind)
                # a class defined inside a function body is rare; its methods are read with the function
            elif t == "expression_statement":
                call = child.named_children[0] if child.named_children else None
                if call is not None and call.type == "call_expression":
                    head = _call_head(call, node_text)
                    if head and REGISTRATION.match(head):
                        add(f"{head}({_first_argument(call, node_text)})", child, "registration")
            elif t == "ERROR" or t.startswith("preproc_"):
                walk(child, scope, depth + 1, in_class)  # what a macro left unparsed may still hold definitions

    walk(tree.root_node, (), 0)
    return tuple(out)


def blanked(source: bytes) -> bytes:
    """The source with what misleads the parser replaced by spaces (newlines kept: lines and offsets hold)."""
    def blank(m: re.Match[bytes]) -> bytes:
        return re.sub(rb"[^\n]", b" ", m.group(0))

    return EXTERN_TEMPLATE.sub(blank, ATTRIBUTE_MACROS.sub(blank, source))


def _plain(name: str) -> str:
    """A class name without its template arguments: `Functor<CPUDevice, T>` -> `Functor`."""
    return name.split("<", 1)[0].strip()


def _is_kernel(name: str) -> bool:
    leaf = name.rsplit("::", 1)[-1]
    return leaf in ("Compute", "ComputeAsync", "operator()") or name.startswith(("TORCH_IMPL_FUNC(", "REGISTER_"))


def _function_name(node: Any, node_text: Any) -> tuple[str, str]:
    """The name a function definition declares, and its kind: a macro-wrapped definition
    (`TORCH_IMPL_FUNC(histc_out)(...)`, `TF_LITE_KERNEL(...)`) by the macro and what it names."""
    decl = node.child_by_field_name("declarator")
    while decl is not None and decl.type != "function_declarator":
        # a pointer or reference return (`Tensor& f(...)`) wraps the function's declarator, named or not
        inner = decl.child_by_field_name("declarator") or next(
            (c for c in decl.named_children if c.type.endswith("declarator")), None)
        if inner is None:
            break
        decl = inner
    if decl is None or decl.type != "function_declarator":
        return "", ""
    target = decl.child_by_field_name("declarator")
    if target is None:
        return "", ""
    if target.type == "function_declarator":  # MACRO(name)(params) { ... }
        macro = target.child_by_field_name("declarator")
        args = target.child_by_field_name("parameters")
        head = node_text(macro) if macro is not None else ""
        inside = node_text(args)[1:-1].strip() if args is not None else ""
        return f"{head}({inside.split(',')[0].strip()})", "kernel"
    name = re.sub(r"\s+", "", node_text(target))
    if MACRO_NAME.match(name) and node.child_by_field_name("type") is None:
        # a registration block read as a function: TORCH_LIBRARY_IMPL(aten, CPU, m) { ... }
        params = decl.child_by_field_name("parameters")
        inside = node_text(params)[1:-1] if params is not None else ""
        return f"{name}({', '.join(a.strip() for a in inside.split(','))})", "registration"
    return name, "function"


def _call_head(call: Any, node_text: Any) -> str:
    """The leftmost called name of a call chain: `REGISTER_OP("Foo").Input(...)` -> `REGISTER_OP`."""
    fn = call.child_by_field_name("function")
    while fn is not None:
        if fn.type == "identifier":
            return str(node_text(fn))
        if fn.type == "field_expression":
            inner = fn.child_by_field_name("argument")
            fn = inner.child_by_field_name("function") if inner is not None and inner.type == "call_expression" else inner
            continue
        return ""
    return ""


def _first_argument(call: Any, node_text: Any) -> str:
    """The first argument of the innermost call of a chain, unquoted (the registered op or kernel's name)."""
    fn = call
    while True:
        head = fn.child_by_field_name("function")
        if head is not None and head.type == "field_expression":
            arg = head.child_by_field_name("argument")
            if arg is not None and arg.type == "call_expression":
                fn = arg
                continue
        break
    args = fn.child_by_field_name("arguments")
    if args is None or not args.named_children:
        return ""
    first = node_text(args.named_children[0])
    m = re.search(r'"([^"]+)"', first)
    return m.group(1) if m else first.strip()[:60]
