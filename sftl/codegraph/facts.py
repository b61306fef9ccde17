"""What one source file contributes to a release's code graph: the ops it defines, implements or registers (per layer
and device), the public names it exports, what its Python functions create and call, its includes and dtypes.

Readers are regular expressions over the text, not a C++ parser: the edges live in registration macros
(`REGISTER_KERNEL_BUILDER(Name("X").Device(DEVICE_GPU).TypeConstraint<T>("T"), ...)`, `REGISTER_DISPATCH`,
`TORCH_IMPL_FUNC`), often inside `#define` bodies expanded by `TF_CALL_*` lists, which a parser sees as
unexpanded macro calls (tree-sitter-cpp gives ERROR nodes there) while a pattern reads them as written; and a
pattern reads TensorFlow's 13,000 C++ files in seconds. Function bodies and their spans are the parser's job
(`sftl.localize.functions`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# layers an op's code is found in; the walk reports which one a candidate file was reached through
LAYERS = ("op_def", "kernel", "xla", "tflite", "gradient", "dataset", "meta", "decomposition", "lowering", "ref",
          "dispatch", "stub", "dynamo", "wrapper")
FACTS_FORMAT = 5  # bump when what a file's facts hold changes

TF_REGISTER_OP = re.compile(r'\bREGISTER_OP\(\s*"([A-Za-z_]\w*)"\s*\)')
TF_KERNEL_NAME = re.compile(r'\bName\(\s*"([A-Za-z_]\w*)"\s*\)((?:\s*\\?\s*\.\s*\w+(?:<[^<>()]{0,80}>)?\([^()]{0,160}\))*)')
# a family macro given the op's name first: REGISTER_CPU_KERNEL_SEGMENT("SegmentSum", ...), REGISTER_LINALG_OP("MatrixSolve", ...)
TF_FAMILY_MACRO = re.compile(r'\b(REGISTER\w*|\w+_REGISTER\w*)\(\s*(?:\\\s*)?"([A-Z][A-Za-z0-9]+)"')
# the elementwise families: REGISTER5(BinaryOp, CPU, "Add", functor::add, float, ...)
TF_CWISE = re.compile(r'\bREGISTER\d*\(\s*\w+\s*,\s*(CPU|GPU)\s*,\s*"([A-Za-z_]\w*)"')
TF_XLA_OP = re.compile(r'\bREGISTER_XLA_OP\(\s*Name\(\s*"([A-Za-z_]\w*)"')
TFLITE_REGISTRATION = re.compile(r"\bTfLiteRegistration\s*\*\s*Register_([A-Z0-9_]+?)(?:_(?:REF|OPT|GENERIC_OPT|NEON_OPT|"
                                 r"GENERIC|MULTITHREADED_OPT|REFERENCE|QUANTIZED_REFERENCE|ONEDNN|VERSION\d*))?\s*\(\s*\)\s*\{")
TF_GRADIENT = re.compile(r'@ops\.RegisterGradient\(\s*"([A-Za-z_]\w*)"\s*\)')
TF_TYPE_CONSTRAINT = re.compile(r"TypeConstraint<\s*([\w:]+)\s*>")
TF_CALL = re.compile(r"\bTF_CALL_(\w+)\(")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# PyTorch
TORCH_IMPL_FUNC = re.compile(r"\bTORCH_IMPL_FUNC\(\s*(\w+)\s*\)")
TORCH_DISPATCH_REG = re.compile(r"\bREGISTER_(?:DISPATCH|ARCH_DISPATCH|AVX2_DISPATCH|AVX512_DISPATCH|CUDA_DISPATCH|"
                                r"NO_CPU_DISPATCH|HIP_DISPATCH|MPS_DISPATCH)\(\s*(\w+)")
TORCH_STUB_CALL = re.compile(r"\b(\w+_stub)\s*\(\s*(?:kCPU|kCUDA|kMPS|iter\.device_type|\w+\.device\(\)\.type\(\)|"
                             r"device_type|self\.device\(\)\.type\(\)|[\w.()]*device[\w.()]*)")
# the name a line starting at column 0 declares before its '(' (`Tensor& add_out(`, `void histc_cpu(`):
# read from the text before the parenthesis, a pattern anchored at its end (no backtracking over the line)
NAME_BEFORE_PAREN = re.compile(r"[\s*&:](\w+)\s*$")
ATEN_CALL = re.compile(r"\bat::(?:native::)?(\w+)\s*\(")
NOT_DECLARATION = ("#", "//", "/*", "*", "}", "return", "namespace", "using", "typedef", "if", "for", "while", "static_assert")
TORCH_PY_REGISTRATION = re.compile(r"@(register_meta|register_decomposition|register_lowering|register_op_impl|"
                                   r"register_fake|impl_abstract|make_fallback|register_prim|_register_jagged_func|"
                                   r"aten_impl|register_inplace)\(\s*(\[[^\]]{0,2000}\]|[^,)\n]{0,200})", re.S)
TORCH_FALLBACK = re.compile(r"\bmake_fallback\(\s*(?:aten|torch\.ops\.aten)\.(\w+)")
ATEN_NAME = re.compile(r"\b(?:aten|torch\.ops\.aten|prims)\.(\w+)")
DYNAMO_PREFIX = "dynamo:"  # the key of a Python type dynamo models, apart from the ops
DYNAMO_VARIABLE = re.compile(r"^class\s+(\w+?)Variable\b", re.M)
# Python: definitions and the calls in their bodies
PY_DEF = re.compile(r"^([ \t]*)(?:async\s+)?(def|class)\s+(\w+)")
PY_EXPORT = re.compile(r"@(?:tf|keras|estimator)_export\(([^)]{1,600})\)", re.S)
PY_QUOTED = re.compile(r"['\"]([\w.]+)['\"]")
PY_GEN_CALL = re.compile(r"\bgen_\w+?_ops\.(\w+)\s*\(|_apply_op_helper\(\s*['\"](\w+)['\"]")
PY_MODULE_CALL = re.compile(r"\b([A-Za-z_]\w*)\.([a-z_]\w*)\s*\(")
PY_LOCAL_CALL = re.compile(r"(?<![.\w])([A-Za-z_]\w*)\s*\(")
TORCH_PY_OP_CALL = re.compile(r"\b(?:torch\._C\._nn|torch\._C\._VariableFunctions|_VF|torch\._C\._linalg|torch\._C\._fft|"
                              r"torch\._C\._special|torch\.ops\.aten|torch)\.(\w+)\s*\(")
PY_KEYWORDS = frozenset({"if", "for", "while", "return", "print", "isinstance", "len", "super", "range", "str", "int",
                         "float", "list", "dict", "tuple", "set", "getattr", "setattr", "hasattr", "not", "and", "or",
                         "in", "with", "elif", "assert", "lambda", "type", "zip", "enumerate", "map", "bool", "any",
                         "all", "min", "max", "sorted", "repr", "format", "def", "class", "yield", "raise", "except"})

# dtypes a TF_CALL_* list registers (the families the kernels use most)
TF_CALL_FAMILIES: dict[str, tuple[str, ...]] = {
    "GPU_NUMBER_TYPES": ("half", "bfloat16", "float", "double"),
    "GPU_NUMBER_TYPES_NO_HALF": ("float", "double"),
    "GPU_ALL_TYPES": ("half", "bfloat16", "float", "double", "complex64", "complex128", "bool"),
    "REAL_NUMBER_TYPES": ("half", "bfloat16", "float", "double", "int8", "int16", "int32", "int64", "uint8", "uint16"),
    "NUMBER_TYPES": ("half", "bfloat16", "float", "double", "int8", "int16", "int32", "int64", "uint8", "uint16",
                     "complex64", "complex128"),
    "NUMBER_TYPES_NO_INT32": ("half", "bfloat16", "float", "double", "int8", "int16", "int64", "uint8", "complex64",
                              "complex128"),
    "ALL_TYPES": ("half", "bfloat16", "float", "double", "int8", "int16", "int32", "int64", "uint8", "uint16",
                  "complex64", "complex128", "bool", "string"),
    "POD_TYPES": ("half", "bfloat16", "float", "double", "int8", "int16", "int32", "int64", "uint8", "uint16",
                  "complex64", "complex128", "bool"),
    "FLOAT_TYPES": ("half", "bfloat16", "float", "double"),
    "COMPLEX_TYPES": ("complex64", "complex128"),
    "INTEGRAL_TYPES": ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"),
    "INTEGRAL_TYPES_NO_INT32": ("int8", "int16", "int64", "uint8", "uint16", "uint32", "uint64"),
    "QUANTIZED_TYPES": ("qint8", "quint8", "qint32", "qint16", "quint16"),
    "POD_STRING_TYPES": ("half", "bfloat16", "float", "double", "int32", "int64", "bool", "string"),
    "tstring": ("string",), "Eigen::half": ("half",),
}
DTYPE_WORDS = frozenset({"half", "bfloat16", "float", "double", "int8", "int16", "int32", "int64", "uint8", "uint16",
                         "uint32", "uint64", "complex64", "complex128", "bool", "string", "qint8", "quint8", "qint32",
                         "qint16", "quint16", "variant", "resource"})


def op_key(name: str) -> str:
    """One spelling of an op's name for every place it is written: `ResizeBilinear`, `resize_bilinear`,
    `RESIZE_BILINEAR` and `aten.resize_bilinear.default` (its overload dropped by the caller) meet."""
    return name.replace("_", "").lower()


@dataclass(frozen=True)
class PyFunction:
    """A Python function or class of a file: the ops its body creates and the functions it calls."""

    ops: tuple[str, ...]  # op keys (TensorFlow gen_*_ops calls, PyTorch torch.*/_C._nn.* calls)
    calls: tuple[str, ...]  # 'module.function' or 'function' (same file)


@dataclass(frozen=True)
class FileFacts:
    """What one file contributes to the graph."""

    sites: tuple[tuple[str, str, str], ...] = ()  # (layer, op name as written, device: 'cpu' / 'gpu' / '')
    dtypes: frozenset[str] = frozenset()  # the dtypes its kernel registrations name
    includes: tuple[str, ...] = ()  # as written in `#include "..."`
    exports: tuple[tuple[str, str], ...] = ()  # (public name, the function or class defining it)
    functions: dict[str, PyFunction] = field(default_factory=dict)  # Python: 'f', 'Class', 'Class.method'
    kernel_functions: tuple[str, ...] = ()  # PyTorch C++: functions defined (native dispatch kernels are among them)
    stub_registrations: tuple[str, ...] = ()  # PyTorch: dispatch stubs this file registers a kernel for
    stub_calls: tuple[tuple[str, str], ...] = ()  # PyTorch: (kernel function, dispatch stub it calls)
    op_calls: tuple[tuple[str, str], ...] = ()  # PyTorch: (kernel function, op key of an at:: op it calls)


def kernel_devices(path: str, text: str, op: str) -> set[str]:
    """The devices a file registers kernels of one op for ('cpu', 'gpu'; '' where the registration does not say)."""
    facts = read_facts(path, text, "tensorflow")
    key = op_key(op)
    return {device for layer, name, device in (facts.sites if facts else ())
            if layer in ("kernel", "dataset") and op_key(name) == key}


def device_of(path: str, chain: str = "") -> str:
    """The device a registration (its `.Device(...)` chain) or a file's folder is for."""
    if "DEVICE_GPU" in chain or "DEVICE_DEFAULT" in chain and "gpu" in path:
        return "gpu"
    if "DEVICE_CPU" in chain:
        return "cpu"
    low = path.lower()
    if any(m in low for m in ("/cuda/", ".cu", "_gpu", "gpu_", "/cudnn/", "/miopen/")):
        return "gpu"
    if "/cpu/" in low or low.endswith("_cpu.cc") or "/mkl" in low:
        return "cpu"
    return ""


def read_facts(path: str, text: str, framework: str) -> FileFacts | None:
    """The facts of one file, or None where it holds none."""
    if path.endswith(".py"):
        facts = _python_facts(path, text, framework)
    elif path.endswith((".cc", ".cpp", ".cu", ".cuh", ".h", ".hpp", ".c", ".mm", ".inl")):
        facts = _tensorflow_cxx(path, text) if framework == "tensorflow" else _pytorch_cxx(path, text)
    else:
        return None
    empty = not (facts.sites or facts.exports or facts.functions or facts.kernel_functions or facts.stub_registrations
                 or facts.stub_calls or facts.includes)
    return None if empty else facts


def _tensorflow_cxx(path: str, text: str) -> FileFacts:
    sites: list[tuple[str, str, str]] = []
    is_op_def = "/ops/" in path or path.endswith("_ops.cc")
    for m in TF_REGISTER_OP.finditer(text):
        sites.append(("op_def", m.group(1), ""))
        if m.group(1).endswith("Dataset"):
            sites.append(("dataset", m.group(1), ""))
    xla = {m.start() for m in TF_XLA_OP.finditer(text)}
    for m in TF_XLA_OP.finditer(text):
        sites.append(("xla", m.group(1), ""))
    if not is_op_def:
        for m in TF_KERNEL_NAME.finditer(text):
            if any(0 <= m.start() - x < 30 for x in xla):
                continue
            layer = "dataset" if m.group(1).endswith("Dataset") or "/data/" in path else "kernel"
            sites.append((layer, m.group(1), device_of(path, m.group(2) or "")))
        for m in TF_CWISE.finditer(text):
            sites.append(("kernel", m.group(2), m.group(1).lower()))
        for m in TF_FAMILY_MACRO.finditer(text):
            if m.group(1) in ("REGISTER_OP", "REGISTER_XLA_OP"):
                continue
            macro = m.group(1).upper()
            device = "gpu" if "GPU" in macro or "CUDA" in macro else "cpu" if "CPU" in macro else device_of(path)
            layer = "dataset" if m.group(2).endswith("Dataset") or "/data/" in path else "kernel"
            if "GRADIENT" in macro or "/gradients/" in path:
                layer = "gradient"
            sites.append((layer, m.group(2), device))
    for m in TFLITE_REGISTRATION.finditer(text):
        sites.append(("tflite", m.group(1), ""))
    dtypes: set[str] = set()
    if sites:
        for m in TF_TYPE_CONSTRAINT.finditer(text):
            word = m.group(1).rsplit("::", 1)[-1].lower()
            if word in DTYPE_WORDS:
                dtypes.add(word)
        for m in TF_CALL.finditer(text):
            family = m.group(1)
            dtypes.update(TF_CALL_FAMILIES.get(family, (family,) if family.lower() in DTYPE_WORDS else ()))
    return FileFacts(sites=tuple(dict.fromkeys(sites)), dtypes=frozenset(dtypes),
                     includes=tuple(dict.fromkeys(INCLUDE.findall(text))))


def _pytorch_cxx(path: str, text: str) -> FileFacts:
    kernels: list[str] = []
    stub_calls: list[tuple[str, str]] = []
    op_calls: list[tuple[str, str]] = []
    if "/native/" in path:
        kernels.extend(TORCH_IMPL_FUNC.findall(text))
        current = ""
        for line in text.splitlines():  # each call belongs to the kernel defined last above it
            name = declared_name(line)
            if name is not None:
                current = name
                kernels.append(name)
                continue
            if not current:
                continue
            for m in TORCH_STUB_CALL.finditer(line):
                stub_calls.append((current, m.group(1)))
            for op in ATEN_CALL.findall(line):
                op_calls.append((current, op_key(op)))
    for m in TORCH_IMPL_FUNC.finditer(text):  # TORCH_IMPL_FUNC(name) ( ... ) { body }: its calls are the name's
        body = text[m.end(): m.end() + 3000]
        for call in TORCH_STUB_CALL.finditer(body.split("\n}", 1)[0]):
            stub_calls.append((m.group(1), call.group(1)))
    registrations = TORCH_DISPATCH_REG.findall(text)
    return FileFacts(includes=tuple(dict.fromkeys(INCLUDE.findall(text))),
                     kernel_functions=tuple(dict.fromkeys(k for k in kernels if k not in PY_KEYWORDS)),
                     stub_registrations=tuple(dict.fromkeys(registrations)), stub_calls=tuple(dict.fromkeys(stub_calls)),
                     op_calls=tuple(dict.fromkeys(op_calls)))


def declared_name(line: str) -> str | None:
    """The function a line starting at column 0 declares (`Tensor& add_out(`, `void histc_cpu(`), else None."""
    if not line or line[0].isspace() or line.startswith(NOT_DECLARATION):
        return None
    paren = line.find("(")
    if paren <= 0 or line.rstrip().endswith(";"):
        return None
    m = NAME_BEFORE_PAREN.search(line[:paren])
    return m.group(1) if m is not None and not m.group(1).isupper() else None


def _python_facts(path: str, text: str, framework: str) -> FileFacts:
    sites: list[tuple[str, str, str]] = []
    if framework == "tensorflow":
        for m in TF_GRADIENT.finditer(text):
            sites.append(("gradient", m.group(1), ""))
    else:
        layer_of = {"register_meta": "meta", "register_fake": "meta", "impl_abstract": "meta",
                    "register_decomposition": "decomposition", "register_lowering": "lowering",
                    "make_fallback": "lowering", "register_op_impl": "meta", "register_prim": "ref",
                    "_register_jagged_func": "dispatch", "aten_impl": "dispatch", "register_inplace": "lowering"}
        for m in TORCH_PY_REGISTRATION.finditer(text):
            layer = layer_of.get(m.group(1), "meta")
            if "_refs/" in path or "_prims" in path:
                layer = "ref" if layer == "decomposition" else layer
            for name in ATEN_NAME.findall(m.group(2)):
                sites.append((layer, name.split(".")[0], ""))
        for name in TORCH_FALLBACK.findall(text):
            sites.append(("lowering", name, ""))
        if "_dynamo/variables/" in path:
            for name in DYNAMO_VARIABLE.findall(text):  # keyed apart: `ListVariable` is no op named `list`
                sites.append(("dynamo", f"{DYNAMO_PREFIX}{name}", ""))
    functions, exports = _python_functions(text, framework, generated=path.rsplit("/", 1)[-1].startswith("gen_"))
    return FileFacts(sites=tuple(dict.fromkeys(sites)), exports=exports, functions=functions)


def _python_functions(text: str, framework: str, generated: bool = False
                      ) -> tuple[dict[str, PyFunction], tuple[tuple[str, str], ...]]:
    """Each function's and class's ops and calls (a class's are its methods'), and the public names its export
    decorators give: one pass over the lines, a stack of the open definitions by indentation."""
    lines = text.splitlines()
    export_at: dict[int, list[str]] = {}  # line of the decorator's end -> names
    for m in PY_EXPORT.finditer(text):
        names = [n for n in PY_QUOTED.findall(m.group(1)) if not n.startswith("v1")]
        export_at.setdefault(text.count("\n", 0, m.end()), []).extend(names)
    ops: dict[str, list[str]] = {}
    calls: dict[str, list[str]] = {}
    exports: list[tuple[str, str]] = []
    stack: list[tuple[int, str]] = []  # (indent, qualified name)
    pending: list[str] = []
    gen_call = PY_GEN_CALL if framework == "tensorflow" else TORCH_PY_OP_CALL
    in_docstring = False
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        if i in export_at:
            pending.extend(export_at[i])
        quotes = stripped.count('"""') + stripped.count("'''")
        # a docstring's examples (`>>> torch.randn(...)`) are not what the function calls
        if in_docstring or quotes % 2:
            if quotes % 2:
                in_docstring = not in_docstring
            continue
        if quotes and stripped.lstrip("rRbuU").startswith(('"""', "'''")):
            continue
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(stripped)
        definition = PY_DEF.match(line)
        if definition is not None or not stripped.startswith((")", "]", "}", "@")):
            while stack and indent <= stack[-1][0] and not stripped.startswith((")", "]", "}")):
                stack.pop()
        if definition is not None:
            qualified = f"{stack[-1][1]}.{definition.group(3)}" if stack else definition.group(3)
            stack.append((indent, qualified))
            ops.setdefault(qualified, [])
            calls.setdefault(qualified, [])
            if generated and not stack[:-1] and not definition.group(3).startswith("_"):
                ops[qualified].append(op_key(definition.group(3)))  # a generated wrapper is its op (gen_math_ops.segment_sum)
            for name in pending:
                exports.append((name, qualified))
            pending = []
            continue
        if stripped.startswith("@"):
            continue
        if not stack:
            continue
        found_ops = [op_key(x if isinstance(x, str) else next(filter(None, x), "")) for x in gen_call.findall(line)]
        found_calls = [f"{a}.{b}" for a, b in PY_MODULE_CALL.findall(line) if a != "self"]
        found_calls += [c for c in PY_LOCAL_CALL.findall(line) if c not in PY_KEYWORDS]
        if not (found_ops or found_calls):
            continue
        for _, name in stack:  # a nested function's or method's code is its class's and outer function's too
            ops[name].extend(found_ops)
            calls[name].extend(found_calls)
    functions = {name: PyFunction(tuple(dict.fromkeys(ops[name])), tuple(dict.fromkeys(calls[name]))[:80])
                 for name in ops if ops[name] or calls[name]}
    return functions, tuple(dict.fromkeys(exports))
