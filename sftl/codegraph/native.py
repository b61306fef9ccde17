"""Reading PyTorch's kernel layout: native_functions.yaml entries and a content index of ATen's C++/CUDA files."""

from __future__ import annotations

import math
import os
import pickle
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from sftl.model import Side

NATIVE_YAML = "aten/src/ATen/native/native_functions.yaml"
# directories whose C++/CUDA files hold kernels (old releases kept them in TH/THC/THNN/THCUNN)
KERNEL_DIRS = (
    "aten/src/ATen/native/",
    "aten/src/THC/",
    "aten/src/TH/",
    "aten/src/THCUNN/",
    "aten/src/THNN/",
    "aten/src/THCS/",
    "aten/src/THS/",
)
_CXX_SUFFIXES = (".cpp", ".cc", ".cu", ".cuh", ".h", ".hpp", ".c", ".inl")
# backends no CPU/GPU discrepancy report is about
_OTHER_BACKENDS = ("/mps/", "/vulkan/", "/metal/", "/opencl/", "/hip/", "/xnnpack/", "/nnapi/", "/ao_sparse/")


class NativeYamlError(ValueError):
    """native_functions.yaml is missing or cannot be parsed."""


@dataclass(frozen=True)
class NativeFunction:
    """One `- func:` entry of native_functions.yaml."""

    name: str  # base name, e.g. "histc", "add_", "arange_out" (old releases used suffixes)
    overload: str  # "", "out", "Tensor", ...
    dispatch: dict[str, str] = field(default_factory=dict)  # one dispatch key -> kernel function
    structured: bool = False
    structured_delegate: str | None = None  # "add.out"

    @property
    def full_name(self) -> str:
        return f"{self.name}.{self.overload}" if self.overload else self.name


def parse_native_functions(text: str) -> dict[str, list[NativeFunction]]:
    """Entries by base name. Raises NativeYamlError on a file that is not the expected YAML list.

    A line reader for the file's fixed shape (a list of `- func:` mappings with a `dispatch:`
    sub-mapping): ten times faster than a YAML load on the 15k-line file, which matters for the
    CLI's start-to-answer time. Lines it cannot place make the file corrupt, as a YAML load would.
    """
    out: dict[str, list[NativeFunction]] = defaultdict(list)
    current: dict[str, object] | None = None
    in_dispatch = False
    entries: list[dict[str, object]] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip():
            continue
        if line.startswith("- func:"):
            current = {"func": line[len("- func:") :].strip(), "dispatch": {}}
            entries.append(current)
            in_dispatch = False
            continue
        if current is None:
            raise NativeYamlError(f"native_functions.yaml line {lineno}: expected '- func:', got {raw.strip()[:60]!r}")
        if line.startswith("- "):  # a list item that is not a func entry
            raise NativeYamlError(f"native_functions.yaml line {lineno}: entry without 'func:'")
        indent = len(line) - len(line.lstrip())
        if indent >= 2 and line.lstrip().startswith("- "):
            in_dispatch = False
            continue  # items of a nested list (precomputed:, autogen:)
        key, sep, value = line.strip().partition(":")
        if indent >= 4 and in_dispatch and sep:
            block = current["dispatch"]
            assert isinstance(block, dict)
            block[key.strip()] = value.strip()
            continue
        if indent == 2 and sep:
            in_dispatch = key == "dispatch" and not value.strip()
            if key == "dispatch" and value.strip() and value.strip() != "{}":
                current["dispatch"] = {"Default": value.strip()}
            elif key in ("structured", "structured_delegate"):
                current[key] = value.strip()
            continue
        if indent >= 4:
            continue  # other nested mappings/lists (e.g. autogen, tags) we do not need
        raise NativeYamlError(f"native_functions.yaml line {lineno}: cannot read {raw.strip()[:60]!r}")
    for entry in entries:
        func = str(entry["func"])
        if "(" not in func:
            raise NativeYamlError(f"native_functions.yaml: malformed func {func[:60]!r}")
        head = func.split("(", 1)[0].strip()
        name, _, overload = head.partition(".")
        dispatch: dict[str, str] = {}
        raw_dispatch = entry.get("dispatch")
        if isinstance(raw_dispatch, dict):
            for keys, kernel in raw_dispatch.items():
                for dkey in str(keys).split(","):
                    if dkey.strip() and kernel:
                        dispatch[dkey.strip()] = str(kernel).strip()
        delegate = str(entry.get("structured_delegate") or "") or None
        out[name].append(
            NativeFunction(
                name=name,
                overload=overload,
                dispatch=dispatch,
                structured=str(entry.get("structured", "")).lower() == "true",
                structured_delegate=delegate,
            )
        )
    if not out:
        raise NativeYamlError("native_functions.yaml holds no '- func:' entries")
    return dict(out)


def dispatch_side(key: str) -> Side | None:
    """Which side a dispatch key runs on; None for backends a CPU/GPU report is not about."""
    if key in ("CPU", "SparseCPU", "QuantizedCPU", "SparseCsrCPU", "NestedTensorCPU", "MkldnnCPU"):
        return Side.CPU
    if key in ("CUDA", "SparseCUDA", "QuantizedCUDA", "SparseCsrCUDA", "NestedTensorCUDA"):
        return Side.CUDA
    if key.startswith("Composite") or key in ("Math", "DefaultBackend", "Default"):
        return Side.SHARED
    return None


def is_dense_key(key: str) -> bool:
    return key in ("CPU", "CUDA") or key.startswith("Composite") or key in ("Math", "DefaultBackend", "Default")


def path_side(path: str) -> Side | None:
    """The side a kernel file belongs to, from where it lies; None for other backends."""
    low = "/" + path.lower()
    if any(b in low for b in _OTHER_BACKENDS):
        return None
    if "/cuda/" in low or "/cudnn/" in low or "/miopen/" in low or "/thc" in low or "/thcunn/" in low:
        return Side.CUDA
    if path.endswith((".cu", ".cuh")) or ".cu." in path:
        return Side.CUDA
    if "/cpu/" in low or "/mkldnn/" in low or "/th/" in low or "/thnn/" in low or "/ths/" in low:
        return Side.CPU
    return Side.SHARED


# --------------------------------------------------------------------------------------------
# The content index

_REGISTER = re.compile(r"\bREGISTER_(?:[A-Z0-9]+_)*DISPATCH\s*\(\s*(\w+)\s*,\s*&?\s*([\w:]+)?")
_IMPL_FUNC = re.compile(r"\bTORCH_IMPL_FUNC\s*\(\s*(\w+)\s*\)")
_TH_DEF = re.compile(r"\bTH(?:C|CUDA|Cuda)?\w*Tensor_\(\s*(\w+)\s*\)\s*\(")
_THNN_DEF = re.compile(r"\bTHNN_\(\s*(\w+?)_(?:updateOutput|updateGradInput|accGradParameters)\s*\)\s*\(")
# old releases bound TH/THNN functions in these files: `name:` (the op) and `cname:` (the TH function)
_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
_STUB_CALL = re.compile(r"\b(\w+_stub)\s*\(")
_AT_CALL = re.compile(r"\b(?:at::|native::|at::native::|at::_ops::)(\w+)\s*[(<]")
_METHOD_CALL = re.compile(r"\.\s*(\w+)\s*\(")
_TENSORISH = re.compile(r"Tensor|Scalar|TensorIterator|IntArrayRef|SymInt")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_TYPE_HEAD = re.compile(r"\b(?:struct|class|union)\s+$")
_CONST_HEAD = re.compile(r"\b(?:const|constexpr|static|auto)\b[^;{}()=]*$")
_DEFINE_HEAD = re.compile(r"^\s*#\s*define\s+$")
_ASSIGN = re.compile(r"\s*=")
_AFTER_NAME = re.compile(r"\s*(?:<[^;{}()]*>)?\s*\(")
_LOWER_IDENT = re.compile(r"[a-z_][a-z0-9_]*")


@dataclass
class Definition:
    path: str
    start: int  # offset of the name
    body: str  # the function body (braces included), bounded


class KernelIndex:
    """ATen/TH kernel files, their text, registrations and definitions, built once per source tree."""

    def __init__(self, files: dict[str, str]) -> None:
        self.texts = files
        self.registrations: dict[str, list[tuple[str, str]]] = defaultdict(list)  # stub -> [(path, fn)]
        self.impl_funcs: dict[str, list[str]] = defaultdict(list)  # x_out -> [path]
        self.th_defs: dict[str, list[str]] = defaultdict(list)  # THCTensor_(name) -> [path]
        self.includes: dict[str, list[str]] = {}
        self.includers: dict[str, int] = defaultdict(int)
        by_base: dict[str, list[str]] = defaultdict(list)
        for path in files:
            by_base[path.rsplit("/", 1)[-1]].append(path)
        self._by_base = by_base
        for path, text in files.items():
            if "DISPATCH" in text:
                for m in _REGISTER.finditer(text):
                    if "##" not in text[m.start() : m.end() + 2]:  # a macro's template, handled below
                        self.registrations[m.group(1)].append((path, (m.group(2) or "").split("::")[-1]))
                for stub, fn in macro_registrations(text):
                    self.registrations[stub].append((path, fn))
            if "TORCH_IMPL_FUNC" in text:
                for m in _IMPL_FUNC.finditer(text):
                    self.impl_funcs[m.group(1)].append(path)
            if "Tensor_(" in text:
                for m in _TH_DEF.finditer(text):
                    if definition_brace(text, m.end() - 1):
                        self.th_defs[m.group(1)].append(path)
            if "THNN_(" in text:
                for m in _THNN_DEF.finditer(text):
                    if definition_brace(text, m.end() - 1) and path not in self.th_defs[m.group(1)]:
                        self.th_defs[m.group(1)].append(path)
            incs = []
            last = text.rfind("#include")
            head = text[: text.find("\n", last) + 1] if last >= 0 else ""
            for m in _INCLUDE.finditer(head):
                target = self.resolve_include(m.group(1), path)
                if target and target != path:
                    incs.append(target)
                    self.includers[target] += 1
            self.includes[path] = incs
        self._doc_freq: dict[str, int] = {}
        self._lower: dict[str, str] = {}
        self._defs: dict[tuple[str, int, bool], list[Definition]] = {}
        self._tokens: dict[str, list[str]] | None = None
        self._lower_tokens: tuple[str, dict[str, list[str]]] | None = None
        self._def_in: dict[tuple[str, str], Definition | None] = {}
        self._defines_memo: dict[tuple[str, str], bool] = {}

    @classmethod
    def from_source(cls, source: object, paths: Iterable[str]) -> KernelIndex:
        texts: dict[str, str] = {}
        read = source.read_text  # type: ignore[attr-defined]
        for path in paths:
            text = read(path)
            if text is not None:
                texts[path] = text
        return cls(texts)

    _FORMAT = "sftl-kernel-index-3"

    def save(self, path: Path, key: str) -> None:
        """Write the index (with its token index) for the next process; best effort, atomic."""
        self.files_with("")  # build the token index so it is saved too
        skip = ("_lower", "_defs", "_doc_freq", "_lower_tokens", "_def_in", "_defines_memo")
        state = {k: v for k, v in self.__dict__.items() if k not in skip}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + f".tmp{os.getpid()}")
            with tmp.open("wb") as fh:
                pickle.dump((self._FORMAT, key, state), fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except OSError:
            pass  # a cache, not a result: a read-only cache dir only costs time

    @classmethod
    def load(cls, path: Path, key: str) -> KernelIndex | None:
        """The saved index when it was built from the same file list, else None."""
        try:
            with path.open("rb") as fh:
                fmt, saved_key, state = pickle.load(fh)  # noqa: S301 - our own cache file
        except Exception:  # a damaged cache file (OverflowError, MemoryError, IndexError, ... from pickle): rebuild
            return None
        if fmt != cls._FORMAT or saved_key != key or not isinstance(state, dict):
            return None
        index = cls.__new__(cls)
        index.__dict__.update(state)
        index._lower, index._defs, index._doc_freq, index._lower_tokens = {}, {}, {}, None
        index._def_in, index._defines_memo = {}, {}
        return index

    def resolve_include(self, include: str, from_path: str) -> str | None:
        """'ATen/native/cuda/Loops.cuh' or 'THCNumerics.cuh' -> a path of this index."""
        base = include.rsplit("/", 1)[-1]
        candidates = self._by_base.get(base)
        if not candidates:
            return None
        for cand in candidates:
            if cand.endswith(include):
                return cand
        folder = from_path.rsplit("/", 1)[0]
        for cand in candidates:
            if cand.rsplit("/", 1)[0] == folder:
                return cand
        # a bare name ("THCNumerics.cuh") may be found anywhere; "ATen/Context.h" is not vulkan/api/Context.h
        return candidates[0] if len(candidates) == 1 and "/" not in include else None

    def definition_in(self, name: str, path: str) -> Definition | None:
        """The definition of `name` inside one file (a same-file helper), if there is one."""
        memo = self._def_in
        key = (name, path)
        if key in memo:
            return memo[key]
        found: Definition | None = None
        text = self.texts.get(path)
        # str.find, not a regex per name: this runs for every identifier a kernel body names
        start = text.find(name) if text else -1
        while text and start >= 0:
            end = start + len(name)
            prev = text[start - 1] if start else " "
            nxt = text[end] if end < len(text) else " "
            if not (prev.isalnum() or prev in "_.>" or nxt.isalnum() or nxt == "_"):
                m = _AFTER_NAME.match(text, end)
                if m is not None:
                    brace = definition_brace(text, m.end() - 1)
                    if brace is not None:
                        found = Definition(path, start, braced_body(text, brace))
                        break
            start = text.find(name, end)
        memo[key] = found
        return found

    def defines(self, path: str, name: str) -> bool:
        """Whether a file defines `name`: a function, a struct/class, a constant (jiterator string) or a macro."""
        key = (name, path)
        if key not in self._defines_memo:
            self._defines_memo[key] = self._find_definition(path, name)
        return self._defines_memo[key]

    def _find_definition(self, path: str, name: str) -> bool:
        text = self.texts.get(path, "")
        start = text.find(name)
        seen = 0
        while start >= 0 and seen < 200:
            seen += 1
            end = start + len(name)
            prev = text[start - 1] if start else "\n"
            nxt = text[end] if end < len(text) else " "
            if not (prev.isalnum() or prev == "_" or nxt.isalnum() or nxt == "_"):
                line = text[text.rfind("\n", 0, start) + 1 : start]
                if _TYPE_HEAD.search(line):
                    brace, semi = text.find("{", end), text.find(";", end)
                    if brace >= 0 and (semi < 0 or brace < semi):
                        return True
                if _CONST_HEAD.search(line) and _ASSIGN.match(text, end):
                    return True
                if _DEFINE_HEAD.match(line):
                    return True
            start = text.find(name, end)
        return self.definition_in(name, path) is not None

    def definitions(self, name: str, limit: int = 12, tensorish: bool = True) -> list[Definition]:
        """Where a C++ function `name` is defined (not merely declared or called).

        With `tensorish`, only definitions whose signature mentions Tensor/Scalar/TensorIterator
        count: a kernel named `max` is not the `__device__ int max(int, int)` helper.
        """
        memo_key = (name, limit, tensorish)
        if memo_key in self._defs:
            return self._defs[memo_key]
        found: list[Definition] = []
        # the name first, so the regex engine can scan for the literal; the char before is checked by hand
        pattern = re.compile(re.escape(name) + r"\s*(?:<[^;{}()]*>)?\s*\(")
        for path in self.files_with(name):
            text = self.texts[path]
            per_file = 0
            for m in pattern.finditer(text):
                prev = text[m.start() - 1] if m.start() else " "
                if prev.isalnum() or prev in "_.>":
                    continue
                brace = definition_brace(text, m.end() - 1)
                if brace is not None and (not tensorish or _TENSORISH.search(text, max(0, m.start() - 120), brace)):
                    found.append(Definition(path, m.start(), braced_body(text, brace)))
                    per_file += 1
                    if per_file >= 6:  # overloads: std(self), std(self, dim, ...), ...
                        break
            if len(found) >= limit:
                break
        for path in self.impl_funcs.get(name, ()):  # TORCH_IMPL_FUNC(name) defines `name`
            text = self.texts[path]
            pos = text.find(f"TORCH_IMPL_FUNC({name})")
            # the structured kernel itself, even when the file also defines same-named overloads
            # (special_zeta_out(Scalar, Tensor) beside TORCH_IMPL_FUNC(special_zeta_out))
            if not any(d.path == path and d.start == max(pos, 0) for d in found):
                brace = text.find("{", pos) if pos >= 0 else -1
                found.append(Definition(path, max(pos, 0), braced_body(text, brace) if brace >= 0 else ""))
        self._defs[memo_key] = found
        return found

    def mentions(self, name: str, limit: int = 40) -> list[str]:
        """Files whose text names the identifier (macro-generated kernels are only found this way)."""
        return self.files_with(name)[:limit]

    def files_with(self, identifier: str) -> list[str]:
        """Files containing the identifier as a whole token (an inverted index, built on first use)."""
        if self._tokens is None:
            tokens: dict[str, list[str]] = defaultdict(list)
            for path, text in self.texts.items():
                for tok in set(_IDENT.findall(text)):
                    tokens[tok].append(path)
            self._tokens = dict(tokens)
        return self._tokens.get(identifier, [])

    def lower(self, path: str) -> str:
        text = self._lower.get(path)
        if text is None:
            text = self._lower[path] = self.texts[path].lower()
        return text

    def doc_freq(self, term: str) -> int:
        if term not in self._doc_freq:
            self._doc_freq[term] = len(self.files_containing(term))
        return self._doc_freq[term]

    def files_containing(self, term: str) -> list[str]:
        """Files whose lower-cased text contains the lower-cased term (a substring, not a token).

        An identifier-shaped term can only occur inside identifier tokens, so the token index
        answers it without scanning every file's text (the slow part of a query otherwise).
        """
        low = term.lower()
        if not _LOWER_IDENT.fullmatch(low):
            # 'torch.histc': only files holding every identifier part can hold the whole
            parts = [m.group(0) for m in _LOWER_IDENT.finditer(low) if m.start() == 0 or not low[m.start() - 1].isdigit()]
            if parts:
                pool = set.intersection(*(set(self.files_containing(part)) for part in parts))
                return [p for p in self.texts if p in pool and low in self.lower(p)]
            return [p for p in self.texts if low in self.lower(p)]
        if self._lower_tokens is None:
            self.files_with("")  # the token index
            assert self._tokens is not None
            grouped: dict[str, list[str]] = defaultdict(list)
            for tok in self._tokens:
                grouped[tok.lower()].append(tok)
            self._lower_tokens = ("\n".join(grouped), grouped)
        joined, grouped = self._lower_tokens
        found: set[str] = set()
        start = joined.find(low)
        while start >= 0:  # one C-speed scan of all distinct tokens, not a Python loop over them
            line_start = joined.rfind("\n", 0, start) + 1
            line_end = joined.find("\n", start)
            line_end = len(joined) if line_end < 0 else line_end
            for tok in grouped[joined[line_start:line_end]]:
                found.update(self._tokens.get(tok, ()))  # type: ignore[union-attr]
            start = joined.find(low, line_end)
        return [p for p in self.texts if p in found]

    def tfidf(self, terms: Iterable[str], paths: Iterable[str] | None = None) -> dict[str, float]:
        """A plain TF-IDF of query terms over file contents (log tf, smoothed idf, length-normalised)."""
        n = max(1, len(self.texts))
        scores: dict[str, float] = defaultdict(float)
        wanted = set(paths) if paths is not None else None
        for term in set(t for t in terms if len(t) > 2):
            holders = self.files_containing(term)
            df = len(holders)
            if df == 0:
                continue
            idf = math.log((n + 1) / (df + 1)) + 1.0
            low_term = term.lower()
            for path in holders:
                if wanted is not None and path not in wanted:
                    continue
                tf = self.lower(path).count(low_term)
                if tf:
                    scores[path] += (1 + math.log(tf)) * idf
        for path in list(scores):
            scores[path] /= math.sqrt(1 + len(self.texts[path]) / 20000)
        return dict(scores)


_NOT_KERNELS = ("/test/", "/tests/", "/benchmark", "/bench/", "/third_party/", "/qnnpack/", "/pytorch_qnnpack/")


_MACRO_DEF = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)\(\s*(\w+)\s*\)((?:[^\n]*\\\n)*[^\n]*)", re.M)


def macro_registrations(text: str) -> list[tuple[str, str]]:
    """(stub, kernel) registered by same-file macros: `IMPLEMENT_FLOAT_KERNEL(erfinv)` expanding to
    `REGISTER_DISPATCH(op##_stub, &CPU_CAPABILITY::op##_kernel)` registers erfinv_stub -> erfinv_kernel."""
    if "##" not in text or "#define" not in text.replace("# define", "#define"):
        return []
    out: list[tuple[str, str]] = []
    for m in _MACRO_DEF.finditer(text):
        macro, param, body = m.group(1), m.group(2), m.group(3)
        if "DISPATCH" not in body:
            continue
        reg = re.search(r"REGISTER_(?:[A-Z0-9]+_)*DISPATCH\s*\(\s*([\w#]+)\s*,\s*&?\s*([\w:#]+)", body)
        if reg is None or (f"{param}##" not in reg.group(1) and f"##{param}" not in reg.group(1)):
            continue
        stub_t, fn_t = reg.group(1), reg.group(2).split("::")[-1]
        for call in re.finditer(r"^[ \t]*" + re.escape(macro) + r"\s*\(\s*(\w+)\s*\)", text, re.M):
            op = call.group(1)
            out.append((stub_t.replace(f"{param}##", op).replace(f"##{param}", op),
                        fn_t.replace(f"{param}##", op).replace(f"##{param}", op)))
    return out


def kernel_paths(files: Iterable[str]) -> list[str]:
    return [
        f for f in files
        if f.startswith(KERNEL_DIRS) and f.endswith(_CXX_SUFFIXES) and not any(x in f for x in _NOT_KERNELS)
    ]


def definition_brace(text: str, open_paren: int) -> int | None:
    """Given the '(' after a name, the offset of the body's '{' when this is a definition."""
    depth = 0
    i = open_paren
    end = min(len(text), open_paren + 4000)
    while i < end:
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                break
        i += 1
    else:
        return None
    # after the parameter list: qualifiers, a trailing return type or an initializer list, then '{'
    tail = text[i + 1 : i + 300]
    # (attribute macros such as `__ubsan_ignore_float_divide_by_zero__` may stand before the body)
    m = re.match(r"\s*(?:const\s*)?(?:noexcept\s*)?(?:override\s*)?(?:__\w+__\s*)*(?:->\s*[\w:<>,\s&*]+?)?\s*"
                 r"(\{|:[^;{]*\{)", tail)
    if m is None:
        return None
    return i + 1 + m.end() - 1


def braced_body(text: str, brace: int, limit: int = 30000) -> str:
    depth = 0
    end = min(len(text), brace + limit)
    for i in range(brace, end):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[brace : i + 1]
    return text[brace:end]


_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


def stub_calls(body: str, registered: dict[str, list[tuple[str, str]]] | None = None) -> list[str]:
    """Dispatch stubs a body calls: `x_stub(...)`, or any registered stub (GroupNormKernel, where_kernel)."""
    names = [m.group(1) for m in _STUB_CALL.finditer(body)]
    if registered:
        names += [m.group(1) for m in _CALL.finditer(body) if m.group(1) in registered]
    return list(dict.fromkeys(names))


def local_calls(body: str) -> list[str]:
    """Plain function calls in a body (candidates for same-file helpers such as std_var_out)."""
    return list(dict.fromkeys(m.group(1) for m in _CALL.finditer(body)))


def op_calls(body: str) -> list[str]:
    """at::foo(...) / native::foo(...) / x.foo(...) calls in a body: the ops a composite uses."""
    names = [m.group(1) for m in _AT_CALL.finditer(body)]
    names += [m.group(1) for m in _METHOD_CALL.finditer(body)]
    return list(dict.fromkeys(names))


def identifiers(text: str) -> list[str]:
    return _IDENT.findall(text)
