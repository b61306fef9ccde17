"""PyTorch's TH/THC era (releases <= ~1.10): from an operator to the TH/THC/THNN/THCUNN functions and functors computing it.

Old releases computed many ops outside ATen/native: an op's entry in `aten/src/ATen/Declarations.cwrap`
(`name:`, `cname:`, `backends:`), `aten/src/ATen/nn.yaml` (`- name: _thnn_x(...)`, `cname: Foo`) or a
`native_functions.yaml` dispatch to `legacy::cuda::_th_x` / `_th_x` / `_thnn_x` leads to
`THCTensor_(cname)` / `THTensor_(cname)` in `THC/generic/*.cu` / `TH/generic/*.c(pp)`, or to
`THNN_(Foo_updateOutput)` in `THCUNN/generic/Foo.cu` / `THNN/generic/Foo.c(pp)`. The per-element math
often sits in a functor the definition hands to a launcher (`ReduceMax` in `THCTensorMathReduce.cuh`,
`TensorRShiftConstantOp` in `THCTensorMathPairwise.cu`).

`add_evidence` credits those files on the localizer's board. It reads what the source holds: with a
source tree, the definitions and the functors their bodies use; with only a wheel's headers, the
generic header that declares the function names its implementation file by TH/THC's fixed convention
(`generic/X.h` -> `generic/X.cu`), and the reason says the file was inferred, not read.
"""

from __future__ import annotations

import re
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from sftl.codegraph import native as nat
from sftl.model import Side

if TYPE_CHECKING:
    from sftl.sources import SourceProvider

CWRAP = "aten/src/ATen/Declarations.cwrap"
NN_YAML = "aten/src/ATen/nn.yaml"
INFERRED = "source not available; inferred from the declaring header"
HEADERS_ONLY = "only C/C++ headers of this release were available (no kernel sources)"

# (folder, kind, side): where each TH-family library keeps its code
_LIBS = (
    ("aten/src/THCUNN/", "nn", Side.CUDA),
    ("aten/src/THNN/", "nn", Side.CPU),
    ("aten/src/THCS/", "tensor", Side.CUDA),
    ("aten/src/THS/", "tensor", Side.CPU),
    ("aten/src/THC/", "tensor", Side.CUDA),
    ("aten/src/TH/", "tensor", Side.CPU),
)


class OpLike(Protocol):
    """What the localizer knows of one operator of the report (gcrde.OpRef)."""

    @property
    def name(self) -> str: ...
    @property
    def weight(self) -> float: ...
    @property
    def origin(self) -> str: ...


AddFn = Callable[[str, float, str, Side | None], None]


def library(path: str) -> tuple[str, Side] | None:
    """('tensor' | 'nn', side) of a TH/THC/THNN/THCUNN file; None for anything else."""
    for folder, kind, side in _LIBS:
        if path.startswith(folder):
            return kind, side
    return None


# --------------------------------------------------------------------------------------------
# Bindings: op -> TH function names


@dataclass(frozen=True)
class Binding:
    """One op bound to a TH/THNN function by the release's own binding files."""

    th: str  # "maxall", "rshift" (THTensor_/THCTensor_) or "BCECriterion" (THNN_(BCECriterion_updateOutput))
    kind: str  # "tensor" | "nn"
    sides: frozenset[Side]
    origin: str  # where the binding was read, for the reason


_BOTH = frozenset({Side.CPU, Side.CUDA})
_CWRAP_BLOCK = re.compile(r"^\s*\[\[\s*$(.*?)^\s*\]\]\s*$", re.M | re.S)
_KEY = re.compile(r"^(\s*)(?:-\s+)?(\w+):\s*(.*?)\s*$")
_LEGACY_DISPATCH = re.compile(r"^(?:legacy::(?:cpu|cuda)::|at::native::legacy::(?:cpu|cuda)::)?((?:s_)?_th(?:nn)?_\w+)$")


def op_aliases(name: str) -> set[str]:
    """'_th_max' / 's__th_max' / '_thnn_nll_loss_forward' / '__rshift__' -> the op names a report uses."""
    out = {name}
    bare = re.sub(r"^(?:s_)?_th(?:nn)?_", "", name)
    out.add(bare)
    for suffix in ("_forward", "_out", "_"):
        if bare.endswith(suffix) and len(bare) > len(suffix) + 2:
            out.add(bare[: -len(suffix)])
    stripped = bare.strip("_")
    out.add(stripped)
    if stripped.startswith("i") and bare.startswith("__i"):  # __irshift__ -> rshift
        out.add(stripped[1:])
    return {a for a in out if a}


def parse_cwrap(text: str) -> dict[str, list[Binding]]:
    """Declarations.cwrap: every `[[ name: ... ]]` block's cnames (the block name when none) and backends."""
    out: dict[str, list[Binding]] = defaultdict(list)
    for block in _CWRAP_BLOCK.finditer(text):
        name = ""
        cnames: list[str] = []
        backends: set[Side] = set()
        in_backends = False
        for line in block.group(1).splitlines():
            stripped = line.strip()
            if in_backends and stripped.startswith("- ") and ":" not in stripped:
                value = stripped[2:].strip()
                backends.update({"CPU": {Side.CPU}, "CUDA": {Side.CUDA}}.get(value, set()))
                continue
            m = _KEY.match(line)
            if m is None:
                continue
            indent, key, value = m.groups()
            in_backends = key == "backends"
            if key == "name" and not name and len(indent) <= 2:
                name = value
            elif key == "cname" and value:
                cnames.append(value)
        if not name:
            continue
        sides = frozenset(backends) or _BOTH
        origin = f"Declarations.cwrap {name}"
        for cname in dict.fromkeys(cnames or [name]):
            binding = Binding(cname, "tensor", sides, f"{origin} -> cname {cname}")
            for alias in op_aliases(name):
                out[alias].append(binding)
    return dict(out)


def parse_nn_yaml(text: str) -> dict[str, list[Binding]]:
    """nn.yaml: `- name: _thnn_binary_cross_entropy(...)` with `cname: BCECriterion` -> THNN_/THCUNN functions."""
    out: dict[str, list[Binding]] = defaultdict(list)
    for chunk in re.split(r"^- ", text, flags=re.M)[1:]:
        head = re.match(r"name:\s*(\w+)", chunk)
        cname = re.search(r"^\s*cname:\s*(\w+)", chunk, re.M)
        if head is None or cname is None:
            continue
        sides: set[Side] = set()
        backends = re.search(r"^\s*backends:\s*\n((?:\s+-\s*\w+\s*\n?)+)", chunk, re.M)
        if backends:
            sides.update({"CPU": Side.CPU, "CUDA": Side.CUDA}[b] for b in re.findall(r"(CPU|CUDA)", backends.group(1)))
        binding = Binding(cname.group(1), "nn", frozenset(sides) or _BOTH, f"nn.yaml {head.group(1)} -> cname {cname.group(1)}")
        for alias in op_aliases(head.group(1)):
            out[alias].append(binding)
    return dict(out)


# nn.yaml's `cname:`s (PyTorch 0.4-1.x): the THNN/THCUNN module of each op, for sources without a readable
# nn.yaml (a wheel ships none); a release's own nn.yaml always wins.
_NN_CNAMES = dict(pair.split(":") for pair in """binary_cross_entropy:BCECriterion l1_loss:AbsCriterion
    mse_loss:MSECriterion multi_margin_loss:MultiMarginCriterion multilabel_margin_loss:MultiLabelMarginCriterion
    nll_loss:ClassNLLCriterion nll_loss2d:SpatialClassNLLCriterion smooth_l1_loss:SmoothL1Criterion
    soft_margin_loss:SoftMarginCriterion kl_div:DistKLDivCriterion elu:ELU glu:GatedLinear hardtanh:HardTanh
    leaky_relu:LeakyReLU log_sigmoid:LogSigmoid rrelu_with_noise:RReLU softplus:SoftPlus softshrink:SoftShrink
    threshold:Threshold adaptive_avg_pool2d:SpatialAdaptiveAveragePooling
    adaptive_avg_pool3d:VolumetricAdaptiveAveragePooling adaptive_max_pool2d:SpatialAdaptiveMaxPooling
    adaptive_max_pool3d:VolumetricAdaptiveMaxPooling avg_pool2d:SpatialAveragePooling
    avg_pool3d:VolumetricAveragePooling fractional_max_pool2d:SpatialFractionalMaxPooling
    max_pool2d_with_indices:SpatialDilatedMaxPooling max_pool3d_with_indices:VolumetricDilatedMaxPooling
    max_unpool2d:SpatialMaxUnpooling max_unpool3d:VolumetricMaxUnpooling reflection_pad1d:TemporalReflectionPadding
    reflection_pad2d:SpatialReflectionPadding replication_pad1d:TemporalReplicationPadding
    replication_pad2d:SpatialReplicationPadding replication_pad3d:VolumetricReplicationPadding
    upsample_linear1d:TemporalUpSamplingLinear upsample_bilinear2d:SpatialUpSamplingBilinear
    upsample_trilinear3d:VolumetricUpSamplingTrilinear upsample_nearest1d:TemporalUpSamplingNearest
    upsample_nearest2d:SpatialUpSamplingNearest upsample_nearest3d:VolumetricUpSamplingNearest
    thnn_conv2d:SpatialConvolutionMM thnn_conv3d:VolumetricConvolutionMM
    thnn_conv_depthwise2d:SpatialDepthwiseConvolution thnn_conv_dilated2d:SpatialDilatedConvolution
    thnn_conv_transpose2d:SpatialFullDilatedConvolution""".split())


def known_nn_bindings() -> dict[str, list[Binding]]:
    """The fallback table as bindings, keyed like `parse_nn_yaml`'s."""
    out: dict[str, list[Binding]] = defaultdict(list)
    for op, cname in _NN_CNAMES.items():
        binding = Binding(cname, "nn", _BOTH, f"nn.yaml's cname for {op} in 0.4-1.x (sftl's table; no nn.yaml here)")
        for alias in op_aliases(op):
            out[alias].append(binding)
    return dict(out)


def bindings_for(
    op: str, tables: Mapping[str, list[Binding]], natives: Mapping[str, Sequence[nat.NativeFunction]] | None
) -> list[Binding]:
    """The TH/THNN functions computing `op` in this release, from its binding files and yaml dispatch."""
    found: list[Binding] = []
    names = op_aliases(op)
    for alias in names:
        found.extend(tables.get(alias, ()))
    if not found:  # nn.MultiLabelMarginLoss -> multi_label_margin_loss, bound as _thnn_multilabel_margin_loss
        squashed = {a.replace("_", "").removesuffix("loss") for a in names}
        for key, bs in tables.items():
            if key.replace("_", "").removesuffix("loss") in squashed:
                found.extend(bs)
                names = names | {key}
    natives = natives or {}
    entries = [e for name in sorted(names) for full in (name, f"{name}_forward", f"{name}_out")
               for e in natives.get(full, ())]
    devices = {(side, bool(_LEGACY_DISPATCH.match(k.strip()))) for e in entries for d, k in e.dispatch.items()
               if (side := nat.dispatch_side(d)) in (Side.CPU, Side.CUDA)}
    if devices:  # the yaml dispatches per device: a binding file's entry counts only where it dispatches to TH
        legacy_sides = frozenset(side for side, is_legacy in devices if is_legacy)
        found = [Binding(b.th, b.kind, b.sides & legacy_sides, b.origin) for b in found if b.sides & legacy_sides]
    for entry in entries:  # native_functions.yaml: CUDA: legacy::cuda::_th_rshift
        for dkey, kernel in entry.dispatch.items():
            m = _LEGACY_DISPATCH.match(kernel.strip())
            side = nat.dispatch_side(dkey)
            if m is None or side not in (Side.CPU, Side.CUDA):
                continue
            target = m.group(1)
            via = next((tables[a] for a in (target, *sorted(op_aliases(target))) if a in tables), None)
            kind = "nn" if "_thnn_" in target else "tensor"
            if via:
                found.extend(Binding(b.th, b.kind, frozenset({side}), f"native_functions.yaml {dkey}: {kernel}; {b.origin}")
                             for b in via)
            else:  # the binding file is not readable here: TH names the function after the op
                guess = re.sub(r"^(?:s_)?_th(?:nn)?_", "", target)
                found.append(Binding(guess, kind, frozenset({side}), f"native_functions.yaml {dkey}: {kernel}"))
    # one binding per (function, kind): the sides it is bound on merged
    merged: dict[tuple[str, str], Binding] = {}
    for b in found:
        ident = (b.th, b.kind)
        if ident in merged:
            old = merged[ident]
            origin = b.origin if "native_functions.yaml" in b.origin else old.origin  # the fuller chain
            merged[ident] = Binding(b.th, b.kind, old.sides | b.sides, origin)
        else:
            merged[ident] = b
    return list(merged.values())


# --------------------------------------------------------------------------------------------
# What the source holds, read once per index


_TH_FN = re.compile(r"\bTH(?:C|Cuda|CS|S)?\w*Tensor_\(\s*(\w+)\s*\)\s*\(")
_NN_FN = re.compile(r"\bTHNN_\(\s*(\w+?)_(?:updateOutput|updateGradInput|accGradParameters)\s*\)\s*\(")
_STRUCT = re.compile(r"\b(?:struct|class)\s+(\w+)\s*(?:final\s*)?(?::[^;{]*)?\{")
_FUNCTOR_USE = re.compile(r"\b([A-Za-z_]\w*)\s*<[^;(){}]*>\s*[({]")
_OWN_MATH = re.compile(r"#\s*if|\b(?:pow|exp|log|sqrt|floor|ceil|fmod|powf|expf|logf)\s*\(")
_NOT_FUNCTOR = re.compile(r"^(?:THC|TH|THNN|THCUNN|Scalar|Tensor(?:Info|Arg)?$|Device|Acc|Thrust)|Numerics|Convert|Type|Info|Ptr|Traits")


@dataclass
class _Layout:
    declared: dict[tuple[str, str], list[str]]  # (kind, name) -> generic headers declaring it
    structs: dict[str, list[str]]  # struct/class name -> TH-family files defining it
    struct_lower: dict[str, list[str]]  # lower-cased name -> names
    has_kernels: bool  # any .c/.cpp/.cu source among the TH-family files


_LAYOUTS: weakref.WeakKeyDictionary[object, _Layout] = weakref.WeakKeyDictionary()


def _layout(index: nat.KernelIndex) -> _Layout:
    hit = _LAYOUTS.get(index)
    if hit is not None:
        return hit
    declared: dict[tuple[str, str], list[str]] = defaultdict(list)
    structs: dict[str, list[str]] = defaultdict(list)
    has_kernels = False
    for path, text in index.texts.items():
        lib = library(path)
        if lib is None:
            continue
        kind = lib[0]
        if path.endswith((".c", ".cpp", ".cu")):
            has_kernels = True
        for what, name in _th_names(path, text, kind):
            found = structs[name] if what == "struct" else declared[(kind, name)]
            if path not in found:
                found.append(path)
    lower: dict[str, list[str]] = defaultdict(list)
    for name in structs:
        lower[name.lower()].append(name)
    layout = _Layout(dict(declared), dict(structs), dict(lower), has_kernels)
    _LAYOUTS[index] = layout
    return layout


def _th_names(path: str, text: str, kind: str) -> Iterator[tuple[str, str]]:
    """("struct", name) for the structs a TH-family file defines, ("fn", name) for the functions its generic header
    declares (not defines): what `_layout` and the bundled index (`th_era_declarations`) read of it."""
    if "struct" in text or "class" in text:
        for m in _STRUCT.finditer(text):
            yield "struct", m.group(1)
    if "/generic/" in path and path.endswith(".h"):
        for m in (_NN_FN if kind == "nn" else _TH_FN).finditer(text):
            if nat.definition_brace(text, m.end() - 1) is None:
                yield "fn", m.group(1)


def _definition_body(index: nat.KernelIndex, path: str, kind: str, th: str) -> str:
    text = index.texts.get(path, "")
    pattern = (re.compile(r"\bTHNN_\(\s*" + re.escape(th) + r"_(?:updateOutput|updateGradInput)\s*\)\s*\(") if kind == "nn"
               else re.compile(r"\bTH\w*Tensor_\(\s*" + re.escape(th) + r"\s*\)\s*\("))
    for m in pattern.finditer(text):
        brace = nat.definition_brace(text, m.end() - 1)
        if brace is not None:
            return nat.braced_body(text, brace, limit=12000)
    return ""


def th_bound_in_headers(source: SourceProvider) -> dict[Side, set[str]]:
    """`_th_x` names the release's generated ATen headers declare per side (CUDAFloatType.h, LegacyTHFunctionsCUDA.h)."""
    out: dict[Side, set[str]] = {Side.CPU: set(), Side.CUDA: set()}
    wanted = re.compile(r"^aten/src/ATen/(?:(CUDA|CPU)FloatType|LegacyTHFunctions(CUDA|CPU))\.h$")
    for path in source.list_files():
        m = wanted.match(path)
        if m is None:
            continue
        side = Side.CUDA if "CUDA" in (m.group(1) or m.group(2) or "") else Side.CPU
        text = source.read_text(path) or ""
        out[side].update(re.findall(r"\b(?:s_)?_th(?:nn)?_(\w+?)(?:_out)?\s*\(", text))
    return out


_TABLES: weakref.WeakKeyDictionary[object, tuple[dict[str, list[Binding]], dict[Side, set[str]]]] = (
    weakref.WeakKeyDictionary()
)


def release_tables(source: SourceProvider) -> tuple[dict[str, list[Binding]], dict[Side, set[str]]]:
    """The release's TH bindings (Declarations.cwrap + nn.yaml) and the `_th_` ops its generated headers declare."""
    try:
        return _TABLES[source]
    except (KeyError, TypeError):
        pass
    tables: dict[str, list[Binding]] = defaultdict(list)
    for path, parse in ((CWRAP, parse_cwrap), (NN_YAML, parse_nn_yaml)):
        text = source.read_text(path)
        if text:
            for op, found in parse(text).items():
                tables[op].extend(found)
        elif path == NN_YAML:
            for op, found in known_nn_bindings().items():
                tables[op].extend(found)
    result = (dict(tables), th_bound_in_headers(source))
    try:
        _TABLES[source] = result
    except TypeError:
        pass
    return result


# --------------------------------------------------------------------------------------------
# Evidence


def _guesses(op: str) -> list[str]:
    """TH names a release would give the op when no binding file says: rshift, maxall, cmax."""
    base = op.strip("_").rstrip("_")
    head, *rest = base.split("_")
    camel = head + "".join(w[:1].upper() + w[1:] for w in rest)  # index_add -> indexAdd, masked_fill -> maskedFill
    names = [base, base + "all", "c" + base, base.replace("_", ""), camel]
    return [n for n in dict.fromkeys(names) if n]


def _impl_by_convention(header: str, kind: str, th: str, version: str | None) -> str | None:
    """The implementation file TH/THC's layout fixes for a generic header's declaration."""
    folder, _, base = header.rpartition("/generic/")
    stem = base.rsplit(".", 1)[0]
    old_c = _older_than(version, (1, 0))  # TH's and THNN's generic sources were C (.c) until 1.0
    if kind == "nn":  # THCUNN.h / THNN.h declare every module; each lives in generic/<Module>.cu|.c(pp)
        return f"{folder}/generic/{th}.cu" if folder.endswith("THCUNN") else f"{folder}/generic/{th}.{'c' if old_c else 'cpp'}"
    if folder.endswith(("THC", "THCS")):
        return f"{folder}/generic/{stem}.cu"
    if folder.endswith(("TH", "THS")):
        return f"{folder}/generic/{stem}.{'c' if old_c else 'cpp'}"
    return None


def _older_than(version: str | None, bound: tuple[int, int]) -> bool:
    m = re.match(r"(\d+)\.(\d+)", version or "")
    return m is not None and (int(m.group(1)), int(m.group(2))) < bound


def _functor_related(functor: str, names: Iterable[str]) -> bool:
    low = functor.lower()
    return any(len(n) >= 3 and n.lower() in low for n in names)


def _bases(op: str, th: str) -> set[str]:
    """Names a functor of this op would contain: 'max' for maxall/cmax, 'rshift' for __rshift__."""
    out = {op.strip("_"), th}
    # nn cnames: BCECriterion -> bce (bce_functor), SpatialUpSamplingBilinear -> upsamplingbilinear
    out.add(re.sub(r"^(?:Spatial|Volumetric|Temporal)|Criterion$", "", th))
    for name in list(out):
        if name.endswith("all") and len(name) > 5:
            out.add(name[:-3])
        if name.startswith("c") and len(name) > 3:
            out.add(name[1:])
    return {n for n in out if len(n) >= 3}


def add_evidence(
    ops: Sequence[OpLike],
    index: nat.KernelIndex,
    source: SourceProvider,
    natives: Mapping[str, Sequence[nat.NativeFunction]] | None,
    add: AddFn,
) -> int:
    """Credit the TH/THC/THNN/THCUNN files computing the report's ops; returns how many credits were given.

    A no-op on releases without those libraries. Scores are relative to each op's weight:
    a definition 0.92, an op-specific functor its definition only hands to a launcher 0.95 (the
    math lives there), one used beside the definition's own math 0.85, a file inferred from the
    declaring header 0.85, a read functor named after the op 0.9 when no definition was readable,
    non-generic companions 0.7, the declaring header 0.3; x0.85 when the binding is only guessed.
    """
    if not any(library(p) for p in index.texts):
        return 0  # a release without TH/THC/THNN/THCUNN
    layout = _layout(index)
    tables, bound = release_tables(source)
    files = set(source.list_files())
    headers_only = not layout.has_kernels
    given = 0

    def credit(path: str, score: float, reason: str, side: Side | None) -> None:
        nonlocal given
        given += 1
        add(path, score, reason, side)

    for op in ops:
        bindings = bindings_for(op.name, tables, natives)
        confirmed = {s for s in (Side.CPU, Side.CUDA) if op_aliases(op.name) & bound[s]}
        variant = "c" + op.name.strip("_")  # cmax, crshift: the tensor-tensor variant, rarely the one reported
        if bindings:
            candidates = [(b, 0.9 if b.th == variant else 1.0) for b in bindings]
        else:
            candidates = [(Binding(g, kind, _BOTH, "TH name guessed from the op"), 0.75 if g == variant else 0.85)
                          for g in _guesses(op.name) for kind in ("tensor", "nn")]
        defined = False
        for binding, factor in candidates:
            w = op.weight * factor
            label = _label(binding)
            why = binding.origin + (f"; the release's ATen headers bind _th_{op.name.strip('_')} on "
                                    + "/".join(sorted(s.value.upper() for s in confirmed)) if confirmed else "")
            defs = [p for p in index.th_defs.get(binding.th, ())
                    if (lib := library(p)) is not None and lib[0] == binding.kind and lib[1] in binding.sides]
            for path in defs:
                side = _side(path)
                credit(path, w * 0.92, f"defines {label} [{why}] for {op.name} ({op.origin})", side)
                body = _definition_body(index, path, binding.kind, binding.th)
                _credit_functors(op.name, binding, path, body, layout, w, credit)
                _credit_companions(path, binding, index, w, side, credit)
            if defs:
                defined = True
                continue
            for header in layout.declared.get((binding.kind, binding.th), ()):
                side = _side(header)
                if side not in binding.sides:
                    continue
                hname = header.split("/generic/")[-1]
                credit(header, w * 0.3, f"declares {label} (header) for {op.name}", side)
                impl = _impl_by_convention(header, binding.kind, binding.th, source.version)
                if impl is not None:
                    note = (f"{impl.rsplit('/', 1)[-1]} is present but its definition was not found in the text"
                            if impl in files else INFERRED)
                    # TH spreads generic/THTensorMath.h over THTensorMath/MoreMath/EvenMoreMath: a weaker guess
                    split = hname == "THTensorMath.h" and _lib_name(header) == "TH"
                    if split:
                        note += " (TH also defines THTensorMath.h's functions in THTensorMoreMath/EvenMoreMath)"
                    credit(impl, w * (0.7 if split else 0.85), f"implements {label} by {_lib_name(header)}'s convention: "
                           f"generic/{hname} declares it [{why}] for {op.name} ({op.origin}); {note}", side)
                # the functors of the declaring header's family (generic/X.h -> X.cuh), read where shipped
                family = header.replace("/generic/", "/").rsplit(".", 1)[0] + ".cuh"
                for name in _named_functors(op.name, binding.th, layout):
                    if family in layout.structs[name]:
                        where = ("as sftl's bundled release index keeps the release's headers" if _declared_only(
                            source, family) else "read from the release's header" if headers_only else "read")
                        credit(family, w * 0.9, f"defines {name}, the functor named after {op.name} beside "
                               f"generic/{hname}, which declares {label} ({where}) [{why}]", side)
        if not defined:  # functors named after the op elsewhere: weaker, nothing says which function uses them
            for name in _named_functors(op.name, op.name.strip("_"), layout):
                for path in layout.structs[name]:
                    credit(path, op.weight * 0.6, f"defines {name}, a functor named after {op.name}", _side(path))
    return given


def _declared_only(source: SourceProvider, path: str) -> bool:
    """Whether `path` is read from the declarations the bundled index keeps (release_index.DeclaredHeaders), not a text."""
    layer_of = getattr(source, "layer_of", None)
    layer = layer_of(path) if callable(layer_of) else source
    return bool(getattr(layer, "declarations_only", False))


def _side(path: str) -> Side:
    lib = library(path)
    return lib[1] if lib else Side.SHARED


def _label(binding: Binding) -> str:
    if binding.kind == "nn":
        return f"THNN_({binding.th}_updateOutput)"
    return f"TH*Tensor_({binding.th})"


def _lib_name(path: str) -> str:
    return path.split("/")[2] if path.count("/") >= 2 else "TH"


def _named_functors(op: str, th: str, layout: _Layout) -> list[str]:
    out: list[str] = []
    for base in _bases(op, th):
        b = base.lower()
        for key in (f"reduce{b}", f"tensor{b}op", f"tensor{b}constantop", f"{b}op", f"{b}functor", f"tensor{b}valueop"):
            out.extend(layout.struct_lower.get(key, ()))
    return list(dict.fromkeys(out))


def _credit_functors(op: str, binding: Binding, path: str, body: str, layout: _Layout, w: float, credit: AddFn) -> None:
    """Functors the definition hands to a launcher (THC_reduceAll(..., ReduceMax<T>{}, ...)) and where they live."""
    if not body:
        return
    own_math = bool(_OWN_MATH.search(body))
    bases = _bases(op, binding.th)
    for m in dict.fromkeys(x.group(1) for x in _FUNCTOR_USE.finditer(body)):
        if _NOT_FUNCTOR.search(m) or m not in layout.structs:
            continue
        related = _functor_related(m, bases)
        if related and not own_math:
            score, how = 0.95, "the math it only hands to the launcher"
        elif related:
            score, how = 0.85, "beside its own math"
        else:
            score, how = 0.6, "a functor not named after the op"
        for fpath in layout.structs[m]:
            if fpath == path:
                continue
            credit(fpath, w * score, f"defines {m}, used by {_label(binding)} in {path.rsplit('/', 1)[-1]} ({how})",
                   _side(fpath))


def _credit_companions(path: str, binding: Binding, index: nat.KernelIndex, w: float, side: Side, credit: AddFn) -> None:
    """generic/X.cu is compiled through X.cu (THCGenerateAllTypes); X.cuh beside it holds X's shared functors."""
    if "/generic/" not in path:
        return
    folder, _, fname = path.rpartition("/generic/")
    stem = fname.rsplit(".", 1)[0]
    for ext in (".cuh", ".cu", ".h", ".cpp", ".c"):
        companion = f"{folder}/{stem}{ext}"
        if companion in index.texts and companion != path:
            credit(companion, w * 0.7, f"non-generic companion of generic/{fname} ({_label(binding)})", side)


# --------------------------------------------------------------------------------------------
# Mixed releases: a newer stand-in tree layered over the report's own release


@dataclass(frozen=True)
class ReleaseBinding:
    """How one op was bound on one device at the report's own release, read from that release's layer."""

    op: str  # the op as the report names it, bare ("rshift", "max")
    side: Side
    release: str
    kind: str  # "th" (TH/THC/THNN/THCUNN) | "native" (an ATen/native kernel of that device)
    evidence: str  # "_th_rshift in CUDAFloatType.h", "arange_cuda_out in NativeFunctions.h"
    library: str = ""  # "THC", "TH", "THCUNN", "THNN" when kind == "th"

    def note(self) -> str:
        how = f"bound to {self.library}" if self.kind == "th" else "already a native kernel"
        return f"at {self.release} {self.side.value.upper()} {self.op} was {how} ({self.evidence})"


_SIDE_TYPE_HEADER = re.compile(
    r"^aten/src/ATen/(?:(CUDA|CPU)FloatType|(CUDA|CPU)Type|LegacyTHFunctions(CUDA|CPU))\.h$")
_TH_DECL = re.compile(r"\b((?:s_)?_th(?:nn)?_\w+?)\s*\(")


_NATIVE_DEVICE_DECL = re.compile(r"\b(_?\w+?_(?:cuda|cpu)(?:_out|_)?)\s*\(")


def th_era_declarations(path: str, text: str) -> tuple[str, ...]:
    """What this module reads of a TH-era release's headers, kept by sftl's bundled release index for a source
    without them (`release_index.DeclaredHeaders` writes it back as header lines): the functions a TH/THC/THNN/THCUNN
    generic header declares (`fn:max`, `nn:BCECriterion`), the structs a TH-family header defines (`struct:ReduceMax`),
    the `_th_` bindings and native device kernels ATen's generated headers declare (`decl:_th_max`); () otherwise."""
    names: set[str] = set()
    lib = library(path)
    if lib is not None and path.endswith((".h", ".cuh", ".hpp")):
        for what, name in _th_names(path, text, lib[0]):
            names.add(f"{'nn' if what == 'fn' and lib[0] == 'nn' else what}:{name}")
    elif _SIDE_TYPE_HEADER.match(path):
        names.update(f"decl:{m.group(1)}" for m in _TH_DECL.finditer(text))
    elif path == "aten/src/ATen/NativeFunctions.h":
        names.update(f"decl:{m.group(1)}" for m in _NATIVE_DEVICE_DECL.finditer(text))
    return tuple(sorted(names))


def report_layers(source: SourceProvider) -> list[SourceProvider]:
    """The layers of the report's own release when a source mixes releases (a newer tree over its wheel); else []."""
    from sftl.sources import LayeredSource

    if not isinstance(source, LayeredSource) or source.version is None:
        return []
    if len(set(source.releases())) < 2:
        return []
    return source.layers_at(source.era_release or source.version)


def successor_layers(source: SourceProvider) -> list[SourceProvider]:
    """Providers of releases after the report's that a layered source keeps only for op history (a later wheel)."""
    from sftl.sources import LayeredSource

    return list(source.successors) if isinstance(source, LayeredSource) else []


def postdates_release(source: SourceProvider, path: str) -> str | None:
    """The release of the stand-in layer `path` is read from, when the report's own release does not hold it."""
    from sftl.sources import LayeredSource

    if not isinstance(source, LayeredSource) or source.version is None:
        return None
    own_release = source.era_release or source.version
    release = source.release_of(path)
    if release is None or release == own_release:
        return None
    own = source.layers_at(own_release)
    if any(layer.read_text(path) is not None for layer in own):
        return None
    return release


_NATIVES_BY_TEXT: dict[str, dict[str, list[nat.NativeFunction]]] = {}


def _parsed_natives(text: str) -> dict[str, list[nat.NativeFunction]]:
    """A release's native_functions.yaml parsed once per process (each op of a report asks again; ~0.25 s a parse)."""
    import hashlib

    key = hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()
    if key not in _NATIVES_BY_TEXT:
        try:
            _NATIVES_BY_TEXT[key] = nat.parse_native_functions(text)
        except nat.NativeYamlError:
            _NATIVES_BY_TEXT[key] = {}
        while len(_NATIVES_BY_TEXT) > 4:  # a few releases at most in one process
            del _NATIVES_BY_TEXT[next(iter(_NATIVES_BY_TEXT))]
    return _NATIVES_BY_TEXT[key]


def release_binding(op: str, side: Side, layers: Sequence[SourceProvider]) -> ReleaseBinding | None:
    """How `op` was computed on `side` at these layers' release, from its generated headers; None if they do not say.

    A native device kernel wins (`arange_cuda_out` in NativeFunctions.h, or a native_functions.yaml
    dispatch that is not `legacy::`), since a release could keep a stale `_th_` binding beside its port;
    else a `_th_<op>` / `_thnn_<op>` in the side's type header (CUDAFloatType.h in 1.0, CUDAType.h,
    LegacyTHFunctionsCUDA.h in 1.2-1.8) says the op ran in TH/THC (THNN/THCUNN) there.
    """
    if not layers:
        return None
    release = layers[0].version or "?"
    aliases = {a for a in op_aliases(op) if len(a) >= 2}
    bare = re.sub(r"^_+|_+$", "", op) or op
    dev = side.value.lower()
    files = [f for layer in layers for f in layer.list_files()]
    text = _first_text(layers, nat.NATIVE_YAML)
    if text:
        natives = _parsed_natives(text)
        for alias in sorted(aliases):
            for entry in natives.get(alias, ()):
                for dkey, kernel in entry.dispatch.items():
                    if nat.dispatch_side(dkey) is not side:
                        continue
                    if _LEGACY_DISPATCH.match(kernel.strip()):
                        lib = ("THC" if side is Side.CUDA else "TH") if "_thnn_" not in kernel else (
                            "THCUNN" if side is Side.CUDA else "THNN")
                        return ReleaseBinding(bare, side, release, "th", f"{dkey}: {kernel.strip()} in native_functions.yaml",
                                              lib)
                    return ReleaseBinding(bare, side, release, "native", f"{dkey}: {kernel.strip()} in native_functions.yaml")
    declared = _first_text(layers, "aten/src/ATen/NativeFunctions.h") or ""
    for alias in sorted(aliases, key=len, reverse=True):
        m = re.search(r"\b(_?" + re.escape(alias) + r"(?:_out)?_" + dev + r"(?:_out|_)?)\s*\(", declared)
        if m:
            return ReleaseBinding(bare, side, release, "native", f"{m.group(1)} in NativeFunctions.h")
    for path in sorted(set(files)):
        hm = _SIDE_TYPE_HEADER.match(path)
        if hm is None or (hm.group(1) or hm.group(2) or hm.group(3)).lower() != dev:
            continue
        for dm in _TH_DECL.finditer(_first_text(layers, path) or ""):
            if aliases & op_aliases(dm.group(1)):
                nn = "_thnn_" in dm.group(1)
                lib = ("THCUNN" if nn else "THC") if side is Side.CUDA else ("THNN" if nn else "TH")
                name = re.sub(r"^s_|_out$", "", dm.group(1))  # s__th_rshift_out -> _th_rshift: the binding, not a variant
                return ReleaseBinding(bare, side, release, "th", f"{name} in {path.rsplit('/', 1)[-1]}", lib)
    return None


def _first_text(layers: Sequence[SourceProvider], path: str) -> str | None:
    for layer in layers:
        text = layer.read_text(path)
        if text is not None:
            return text
    return None
