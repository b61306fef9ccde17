"""TensorFlow: API calls to raw ops, then REGISTER_KERNEL_BUILDER registrations, headers, the kernel files a wheel's libraries name, or file names."""

from __future__ import annotations

import difflib
import re
import weakref
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from sftl.codegraph.facts import kernel_devices
from sftl.localize.gcrde.board import (
    Board,
    rank_board,
    side_weights,
)
from sftl.localize.gcrde.cues import (
    COMPARING_OPS,
    LIFT,
    OWN_NAN,
    Cues,
    Divergence,
    divergent_side,
    report_cues,
)
from sftl.localize.gcrde.ops import (
    OpRef,
    api_list,
    title_tokens,
    to_snake,
)
from sftl.model import Extraction, Issue, Localization, Outcome, Side, Suspect
from sftl.sources.inventory import indexed, named_paths, release_libraries, release_wheel

if TYPE_CHECKING:
    from sftl.sources import SourceProvider

# --------------------------------------------------------------------------------------------
# TensorFlow

_TF_OPS: dict[str, tuple[str, ...]] = {
    "reduce_mean": ("Mean",), "reduce_sum": ("Sum",), "reduce_max": ("Max",), "reduce_min": ("Min",),
    "reduce_prod": ("Prod",), "reduce_any": ("Any",), "reduce_all": ("All",), "reduce_logsumexp": ("Max", "Sum", "Exp"),
    "reduce_std": ("Mean", "SquaredDifference"), "reduce_variance": ("Mean", "SquaredDifference"),
    "argmax": ("ArgMax",), "argmin": ("ArgMin",), "matmul": ("MatMul", "BatchMatMulV2", "BatchMatMul"),
    "conv2d": ("Conv2D",), "conv1d": ("Conv2D",), "conv3d": ("Conv3D",), "conv2d_transpose": ("Conv2DBackpropInput",),
    "depthwise_conv2d": ("DepthwiseConv2dNative",), "separable_conv2d": ("DepthwiseConv2dNative", "Conv2D"),
    "max_pool": ("MaxPool", "MaxPoolV2"), "max_pool2d": ("MaxPool",), "avg_pool": ("AvgPool",), "avg_pool2d": ("AvgPool",),
    "max_pool3d": ("MaxPool3D",), "avg_pool3d": ("AvgPool3D",), "softmax": ("Softmax",), "log_softmax": ("LogSoftmax",),
    "relu": ("Relu",), "relu6": ("Relu6",), "elu": ("Elu",), "selu": ("Selu",), "sigmoid": ("Sigmoid",),
    "tanh": ("Tanh",), "softplus": ("Softplus",), "leaky_relu": ("LeakyRelu",), "gelu": ("Erf", "Tanh"),
    "cumsum": ("Cumsum",), "cumprod": ("Cumprod",), "top_k": ("TopKV2",), "sort": ("TopKV2",), "argsort": ("TopKV2",),
    "unique": ("Unique",), "gather": ("GatherV2",), "gather_nd": ("GatherNd",), "scatter_nd": ("ScatterNd",),
    "tensor_scatter_nd_update": ("TensorScatterUpdate",), "tensor_scatter_nd_add": ("TensorScatterAdd",),
    "segment_sum": ("SegmentSum",), "unsorted_segment_sum": ("UnsortedSegmentSum",),
    "unsorted_segment_max": ("UnsortedSegmentMax",), "segment_mean": ("SegmentMean",),
    "resize": ("ResizeBilinear", "ResizeNearestNeighbor", "ResizeBicubic", "ScaleAndTranslate"),
    "resize_bilinear": ("ResizeBilinear",), "resize_nearest_neighbor": ("ResizeNearestNeighbor",),
    "resize_images": ("ResizeBilinear",), "crop_and_resize": ("CropAndResize",),
    "non_max_suppression": ("NonMaxSuppressionV3",), "uniform": ("RandomUniform",), "normal": ("RandomStandardNormal",),
    "truncated_normal": ("TruncatedNormal",), "floormod": ("FloorMod",), "mod": ("FloorMod",), "floordiv": ("FloorDiv",),
    "truncatediv": ("TruncateDiv",), "divide": ("RealDiv", "Div"), "truediv": ("RealDiv",), "div": ("Div",),
    "multiply": ("Mul",), "add": ("AddV2", "Add"), "subtract": ("Sub",), "pow": ("Pow",), "exp": ("Exp",),
    "log": ("Log",), "sqrt": ("Sqrt",), "rsqrt": ("Rsqrt",), "square": ("Square",), "abs": ("Abs",), "round": ("Round",),
    "cast": ("Cast",), "einsum": ("Einsum",), "svd": ("Svd",), "qr": ("Qr",), "inv": ("MatrixInverse",),
    "matrix_inverse": ("MatrixInverse",), "det": ("MatrixDeterminant",), "cholesky": ("Cholesky",),
    "bincount": ("Bincount", "DenseBincount"), "histogram_fixed_width": ("HistogramFixedWidth",),
    "clip_by_value": ("ClipByValue", "Minimum", "Maximum"), "where": ("SelectV2", "Where"),
    "fused_batch_norm": ("FusedBatchNormV3",), "batch_normalization": ("FusedBatchNormV3",),
    "batch_norm": ("FusedBatchNormV3",), "bias_add": ("BiasAdd",), "l2_normalize": ("Sum", "Rsqrt"),
    "moments": ("Mean", "SquaredDifference"), "tensordot": ("MatMul",), "transpose": ("Transpose",),
    "reverse": ("ReverseV2",), "tile": ("Tile",), "pad": ("Pad", "PadV2", "MirrorPad"), "concat": ("ConcatV2",),
    "slice": ("Slice",), "strided_slice": ("StridedSlice",), "one_hot": ("OneHot",), "range": ("Range",),
    "linspace": ("LinSpace",), "ctc_loss": ("CTCLoss",), "is_nan": ("IsNan",), "is_finite": ("IsFinite",),
    "sparse_softmax_cross_entropy_with_logits": ("SparseSoftmaxCrossEntropyWithLogits",),
    "softmax_cross_entropy_with_logits": ("SoftmaxCrossEntropyWithLogits",), "dense": ("MatMul", "BiasAdd"),
    "lstm": ("CudnnRNN", "CudnnRNNV3", "MatMul"), "gru": ("CudnnRNN", "MatMul"), "embedding": ("ResourceGather",),
    "batch_normalization_layer": ("FusedBatchNormV3",), "maximum": ("Maximum",), "minimum": ("Minimum",),
    "equal": ("Equal",), "logical_and": ("LogicalAnd",), "sign": ("Sign",), "floor": ("Floor",), "ceil": ("Ceil",),
    "erf": ("Erf",), "erfinv": ("Erfinv",), "lgamma": ("Lgamma",), "digamma": ("Digamma",), "atan2": ("Atan2",),
    "fft": ("FFT",), "ifft": ("IFFT",), "rfft": ("RFFT",), "fft2d": ("FFT2D",), "dropout": ("Mul", "RandomUniform"),
    "extract_image_patches": ("ExtractImagePatches",), "space_to_depth": ("SpaceToDepth",),
    "depth_to_space": ("DepthToSpace",), "matrix_band_part": ("MatrixBandPart",), "random_gamma": ("RandomGamma",),
    "multinomial": ("Multinomial",), "categorical": ("Multinomial",), "shuffle": ("RandomShuffle",),
}
_TF_INCIDENTAL = frozenset(
    """constant Variable convert_to_tensor device print numpy set_seed seed Session run placeholder
    global_variables_initializer ConfigProto reshape shape ones zeros ones_like zeros_like identity
    experimental_run_functions_eagerly function list_physical_devices set_memory_growth fill eye
    GradientTape gradient watch assign __init__ __call__ call build compile fit predict""".split()
)
_TF_NAMESPACE_SKIP = ("tensorflow.config.", "tensorflow.test.", "tensorflow.debugging.", "tensorflow.compat.v1.Session",
                      "tensorflow.io.", "tensorflow.data.", "tensorflow.summary.", "tensorflow.saved_model.")
# a generated wrapper called or picked (`transpose_fn = gen_array_ops.conjugate_transpose`)
_GEN_REF = re.compile(r"\bgen_\w+_ops\.(\w+)\b")
_LOCAL_CALL = re.compile(r"(?<![\w.])([a-z_]\w*)\s*\(")


def tf_raw_ops(api: str, source: SourceProvider | None = None) -> tuple[str, ...]:
    """'tensorflow.math.reduce_mean' -> ('Mean',): the raw op(s) the API call runs."""
    api = api.replace("tf.", "tensorflow.", 1) if api.startswith("tf.") else api
    parts = [p for p in api.split(".") if p]
    if not parts:
        return ()
    leaf = parts[-1]
    if leaf[:1].isupper() and len(parts) >= 2 and parts[-2] in ("raw_ops",):
        return (leaf,)
    snake = to_snake(leaf) if leaf[:1].isupper() else leaf
    if snake in _TF_OPS:
        return _TF_OPS[snake]
    base = snake[len("reduce_"):] if snake.startswith("reduce_") else snake
    if source is not None:
        found = _tf_ops_from_python(api, source) or _tf_gen_export(api, source)
        if found:
            return found
        generated = _tf_gen_ops(source)  # the release's gen_*_ops.py: python name -> op ("lrn" -> "LRN")
        for name in (snake, base):
            if name in generated:
                return (generated[name],)
    return ("".join(p[:1].upper() + p[1:] for p in base.split("_")),)


def _tf_ops_from_python(api: str, source: SourceProvider) -> tuple[str, ...]:
    """Read the API's Python definition (found by its tf_export name) for `gen_*_ops.x(` calls."""
    exported = api.split(".", 1)[1] if "." in api else api
    for prefix in ("compat.v1.", "compat.v2."):
        exported = exported.removeprefix(prefix)
    marker = f'"{exported}"'
    for path in (p for p in source.list_files() if p.startswith("tensorflow/python/ops/") and p.endswith(".py")
                 and not p.rsplit("/", 1)[-1].startswith("gen_")):
        text = source.read_text(path)
        if not text or marker not in text:
            continue
        pos = _exported_at(text, marker)
        m = re.compile(r"\n(?:@[^\n]*\n)*def (\w+)\(").search(text, pos) if pos >= 0 else None
        if m is None:
            continue
        end = re.compile(r"\n(?:@|def |class )").search(text, m.end())
        body = text[m.end(): end.start() if end else len(text)]
        calls = list(dict.fromkeys(c.group(1) for c in _GEN_REF.finditer(body)))
        # one level into the module's own helpers it calls: matrix_transpose returns transpose(...), whose body
        # picks gen_array_ops.conjugate_transpose or gen_array_ops.transpose
        for name in dict.fromkeys(c.group(1) for c in _LOCAL_CALL.finditer(body)):
            helper = re.compile(r"\ndef " + re.escape(name) + r"\(").search(text)
            if helper is not None and name != m.group(1):
                stop = re.compile(r"\n(?:@|def |class )").search(text, helper.end())
                inner = text[helper.end(): stop.start() if stop else len(text)]
                calls += [c.group(1) for c in _GEN_REF.finditer(inner) if c.group(1) not in calls]
        if calls:
            # the op named like the API first: matrix_transpose calls range() before transpose()
            leaf = exported.rsplit(".", 1)[-1]
            calls.sort(key=lambda c: -difflib.SequenceMatcher(None, c, leaf).ratio())
            generated = _tf_gen_ops(source)
            return tuple(generated.get(c) or "".join(p[:1].upper() + p[1:] for p in c.split("_")) for c in calls)
    return ()


def _exported_at(text: str, marker: str) -> int:
    """Where `marker` ('"linalg.solve"') stands inside a @tf_export(...) decorator's arguments; -1 where it is only
    another string (weak_tensor_ops.py's special_handling="constant" is no export of tf.constant)."""
    pos = text.find(marker)
    while pos >= 0:
        dec = text.rfind("tf_export(", 0, pos)
        args = text[dec:pos] if dec >= 0 else ""
        if dec >= 0 and "\ndef " not in args and args.count("(") > args.count(")"):
            return pos
        pos = text.find(marker, pos + 1)
    return -1


def _tf_gen_export(api: str, source: SourceProvider) -> tuple[str, ...]:
    """An API exported straight from a generated wrapper (`@tf_export('linalg.solve', ...)` above
    `def matrix_solve(` in gen_linalg_ops.py): the raw op that wrapper runs."""
    exported = api.split(".", 1)[1] if "." in api else api
    for prefix in ("compat.v1.", "compat.v2."):
        exported = exported.removeprefix(prefix)
    decorator = re.compile(r"@tf_export\(\s*['\"]" + re.escape(exported) + r"['\"][^\n]*\n(?:@[^\n]*\n)*def (\w+)\(")
    for text in _gen_texts(source).values():
        m = decorator.search(text) if exported in text else None
        if m:
            op = _tf_gen_ops(source).get(m.group(1))
            if op:
                return (op,)
    return ()


_GEN_OP = re.compile(r'(?:_apply_op_helper\(\s*|execute\(\s*b|FastPathExecute\(\s*_ctx,\s*)"(\w+)"')


_GEN_MEMO: weakref.WeakKeyDictionary[object, dict[str, str]] = weakref.WeakKeyDictionary()


def _gen_texts(source: SourceProvider) -> dict[str, str]:
    """The release's generated `gen_*_ops.py` wrappers, read once per provider."""
    try:
        return _GEN_MEMO[source]
    except (KeyError, TypeError):
        pass
    texts = {}
    for path in source.list_files():
        base = path.rsplit("/", 1)[-1]
        if path.startswith("tensorflow/python/ops/") and base.startswith("gen_") and base.endswith(".py"):
            texts[path] = source.read_text(path) or ""
    try:
        _GEN_MEMO[source] = texts
    except TypeError:
        pass
    return texts


def _tf_gen_ops(source: SourceProvider) -> dict[str, str]:
    """Python function name -> raw op name, read from the generated `gen_*_ops.py` wrappers."""
    out: dict[str, str] = {}
    for text in _gen_texts(source).values():
        for chunk in text.split("\ndef ")[1:]:
            fname = chunk.split("(", 1)[0].strip()
            m = _GEN_OP.search(chunk)
            if m and fname and not fname.endswith("_eager_fallback"):
                out.setdefault(fname, m.group(1))
    return out


_TF_KERNEL_DIR = "tensorflow/core/kernels/"


def localize_tensorflow(
    issue: Issue, extraction: Extraction, source: SourceProvider, method: str, top: int, divergent_op: str | None
) -> Localization:
    label = method
    title = title_tokens(issue.title)
    ops: dict[str, OpRef] = {}
    for api in ([divergent_op] if divergent_op else []) + api_list(extraction, "tensorflow"):
        if api.startswith(_TF_NAMESPACE_SKIP):
            continue
        leaf = api.split(".")[-1]
        in_title = leaf.lower() in title
        weight = 1.0 if api == divergent_op or in_title else (0.15 if leaf in _TF_INCIDENTAL else 0.9)
        for i, op in enumerate(tf_raw_ops(api, source if method == "sftl" else None)):
            w = weight * (1.0 if i == 0 else 0.8)
            if op not in ops or ops[op].weight < w:
                ops[op] = OpRef(op, w, api)
    if not ops:
        return Localization(label, (), Outcome.ABSTAINED, "no TensorFlow operation found in the report")
    ordered = sorted(ops.values(), key=lambda o: -o.weight)
    files = [f for f in source.list_files() if f.startswith(_TF_KERNEL_DIR)]
    board = Board()
    div = divergent_side(issue, extraction)
    texts: dict[str, str] = {}
    if method == "sftl":
        for path in files:
            if path.endswith((".cc", ".h", ".cu.cc", ".cuh")):
                text = source.read_text(path)
                if text is not None:
                    texts[path] = text
    if texts:
        _tf_registrations(ordered, texts, board)
    registered = bool(board.files)
    cues = report_cues(issue, extraction) if method == "sftl" else Cues()
    # a header-only listing infers the implementation files even beside a registration a header holds
    inferred = method == "sftl" and _tf_header_only(files) and _tf_headers(ordered, texts, set(files), board, cues)
    # no kernel .cc at hand (a wheel, an installed package): the files the release's own libraries name
    binary = (_tf_binary_layer(source, index=not any(f.endswith((".h", ".cuh")) for f in files))
              if method == "sftl" and not any(f.endswith(".cc") for f in files) else None)
    by_binary = binary is not None and _tf_binary_named(ordered, binary, set(files), board, div, _tf_gen_ops(source))
    if not registered and not inferred and not by_binary:
        _tf_names(ordered, files, board, fuzzy_only=method == "paper")
    if not board.files:
        return Localization(label, (), Outcome.ABSTAINED,
                            f"no kernel file for {', '.join(o.name for o in ordered[:5])} in {source.description}"
                            + (f" nor among the {len(binary.kernels)} kernel files its libraries name" if binary else ""))
    weights: dict[Side | None, float] = (side_weights(div, cues if inferred or by_binary else None)
                                         if method == "sftl" else {s: 1.0 for s in Side})
    suspects = rank_board(board, weights, top, label, _tf_side)
    if method == "sftl":
        suspects = _as_release_paths(suspects, source)
    how = "REGISTER_KERNEL_BUILDER in contents" if registered and not inferred else (
        "kernel headers only: implementation files inferred from the headers declaring the op's functor or named after it"
        if inferred else "kernel file names (no registration found in the contents)" if texts
        else "kernel file names (no C++ contents in the source)")
    if by_binary and binary is not None:
        how = (f"{how if inferred else 'no kernel sources'}; kernel files named by the release's compiled libraries "
               f"({len(binary.kernels)} under {_TF_KERNEL_DIR} in {binary.wheel}: their sources are not at hand"
               + ("" if binary.gpu_build else "; a CPU-only build, so its GPU files are inferred by naming") + ")")
    return Localization(label, tuple(suspects), Outcome.LOCATED,
                        f"ops: {', '.join(o.name for o in ordered[:5])}; {how}; {div.why}")


def _as_release_paths(suspects: list[Suspect], source: SourceProvider) -> list[Suspect]:
    """Suspects read in a stand-in tree of another release, at the path the report's release compiled them from.

    A kernel file the tree moved (non_max_suppression_op.cu.cc into kernels/image/) is named by the release's
    libraries at its old path, with the same file name: that path is the release's file; the tree's text stood in."""
    from sftl.sources.inventory import release_named, stand_in_releases

    if not stand_in_releases(source):
        return suspects
    named, release = release_named(source)
    kernels = [n for n in named if n.startswith(_TF_KERNEL_DIR)]
    if not kernels:
        return suspects
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in kernels:
        by_name[path.rsplit("/", 1)[-1]].append(path)
    out: list[Suspect] = []
    seen: set[str] = set()
    for s in suspects:
        path = s.path
        same = by_name.get(path.rsplit("/", 1)[-1], [])
        if path.startswith(_TF_KERNEL_DIR) and path not in named and len(same) == 1:
            path = same[0]
            s = replace(s, path=path, reason=f"{s.reason} (the release {release} compiled it as {path}; the tree holds "
                                             f"it at {s.path})"[:1000])
        if path not in seen:
            seen.add(path)
            out.append(s)
    return out


def _tf_side(path: str) -> Side | None:
    base = path.rsplit("/", 1)[-1]
    if ".cu." in base or base.endswith((".cu", ".cuh")) or "_gpu" in base or "gpu_" in base or "/gpu/" in path:
        return Side.CUDA
    if path.startswith(_TF_KERNEL_DIR):
        return Side.SHARED
    return Side.PYTHON if path.endswith(".py") else Side.SHARED


def _tf_registrations(ops: list[OpRef], texts: dict[str, str], board: Board) -> None:
    for op in ops:
        builder = re.compile(r'Name\(\s*"' + re.escape(op.name) + r'"\s*\)')
        cwise = re.compile(r'REGISTER\d*\(\s*\w+\s*,\s*(CPU|GPU)\s*,\s*"' + re.escape(op.name) + r'"')
        for path, text in texts.items():
            if f'"{op.name}"' not in text:
                continue
            # which devices it registers the op's kernels for: the code graph's reading of registrations
            devices = {d.upper() or "?" for d in kernel_devices(path, text, op.name)}
            functors: set[str] = set()  # the functor::X the registrations run (their math, in a header)
            for m in builder.finditer(text):
                functors.update(re.findall(r"functor::(\w+)", text[m.end(): m.end() + 200].split(";", 1)[0]))
            for m in cwise.finditer(text):
                functors.update(re.findall(r"functor::(\w+)", text[m.end(): m.end() + 300].split(";", 1)[0]))
            if not devices:
                continue
            where = "/".join(sorted(devices))
            board.add(path, op.weight, f'REGISTER_KERNEL_BUILDER(Name("{op.name}")) for {where} [{op.origin}]')
            if "GPU" in devices or "?" in devices:
                stem = path[: -len(".cc")] if path.endswith(".cc") else path
                companions = [stem + "_gpu.cu.cc", stem + "_gpu.h", stem + ".h", stem + "_impl.h"]
                base = path.rsplit("/", 1)[-1]
                cm = re.match(r"cwise_op_(\w+?)(?:_\d+)?\.cc$", base)
                if cm:
                    companions.append(f"{_TF_KERNEL_DIR}cwise_op_gpu_{cm.group(1)}.cu.cc")
                companions += [stem + ".cu.cc", stem + "_gpu.cu.h"]
                # GPU kernels split by dtype (topk_op_gpu_float.cu.cc, ...)
                companions += sorted(p for p in texts if p.startswith(stem + "_gpu_") and p.endswith(".cu.cc"))
                for comp in companions:
                    if comp in texts and comp != path:
                        board.add(comp, op.weight * 0.95, f"GPU implementation beside {base} for {op.name}")
            for name in sorted(functors):
                decl = re.compile(r"\b(?:struct|class)\s+" + re.escape(name) + r"\b\s*(?:final\s*)?(?:[:{]|<)")
                for header, htext in texts.items():
                    if header.endswith(".h") and header != path and name in htext and decl.search(htext):
                        board.add(header, op.weight * 0.9,
                                  f"declares functor::{name}, the math {path.rsplit('/', 1)[-1]} registers for {op.name}")


def _tf_names(ops: list[OpRef], files: list[str], board: Board, fuzzy_only: bool) -> None:
    """Without contents: x_op.cc, x_op_gpu.cu.cc, cwise_op_x.cc, fuzzy-matched against the listing."""
    stems: dict[str, list[str]] = defaultdict(list)
    for path in files:
        stems[path.rsplit("/", 1)[-1].split(".")[0]].append(path)
    for op in ops:
        snake = to_snake(op.name)
        predicted = [f"{snake}_op", f"{snake}_op_gpu", f"cwise_op_{snake}", f"cwise_op_gpu_{snake}", f"{snake}_ops",
                     f"reduction_ops_{snake}"] if not fuzzy_only else [f"{snake}_op", f"{snake}_op_gpu"]
        for pred in predicted:
            exact = stems.get(pred)
            if exact:
                for path in exact:
                    board.add(path, op.weight, f"file name {pred} predicted from op {op.name}")
                continue
            for match in difflib.get_close_matches(pred, list(stems), n=3, cutoff=0.6):
                ratio = difflib.SequenceMatcher(None, pred, match).ratio()
                for path in stems[match]:
                    board.add(path, op.weight * ratio * 0.9, f"name {match} ~ predicted {pred} ({ratio:.2f}) for {op.name}")


# A wheel or an installed package carries tensorflow/core/kernels/*.h but no .cc/.cu.cc: the headers declaring
# an op's functor name its implementation files by TensorFlow's fixed layout, which are inferred, never read.
_TF_FAMILIES = (  # ops whose functors a header declares under a family name, not the op's
    (re.compile(r"^(?:Sparse)?(?:Unsorted)?Segment[A-Z]"), "segment_reduction_ops"),
    (re.compile(r"^(?:Sum|Mean|Max|Min|Prod|Any|All|EuclideanNorm)$"), "reduction_ops"),
    (re.compile(r"^Cum(?:sum|prod|ulativeLogsumexp)$"), "scan_ops"),
)
_TF_DECL = re.compile(r"\b(?:struct|class)\s+(\w+)\s*(?:final\s*)?(?:[:{]|<[^;{}]*>\s*[:{])")
_TF_DECL_SUFFIX = re.compile(r"(?:Functor|Reducer|Op|GPU|Kernel|Impl)$")
_TF_IMPL_STEM = re.compile(r"^(?P<stem>\w+?_(?:ops|op|functor))(?:_(?:functor|impl|gpu|cpu|common))*$")
_TF_DEVICE_CODE = re.compile(r"__global__|<<<|GpuLaunchKernel\s*\(")
_INFERRED = "source not available; inferred from {h} by TensorFlow's naming convention"


def _tf_header_only(files: list[str]) -> bool:
    """A listing with kernel headers but no kernel .cc files: a wheel or an installed package."""
    return any(f.endswith(".h") for f in files) and not any(f.endswith(".cc") for f in files)


def _tf_stem(path: str) -> str:
    base = path.rsplit("/", 1)[-1]
    return base[: -len(".cu.h")] if base.endswith(".cu.h") else base.rsplit(".", 1)[0]


def _tf_compact(stem: str) -> str:
    """'maxpooling_op_gpu' -> 'maxpooling': the op words of a header's name."""
    words = [w for w in stem.split("_") if w not in ("op", "ops", "functor", "gpu", "cpu", "impl", "common")]
    return "".join(words)


def _tf_declaring(op: str, texts: dict[str, str]) -> list[tuple[str, float, str, str]]:
    """Headers declaring `op`'s functor: (path, strength, why, cwise functor name or "")."""
    base = re.sub(r"(?:V\d+|Native)$", "", op)
    snake = to_snake(base)
    compact = snake.replace("_", "")
    family = next((stem for rx, stem in _TF_FAMILIES if rx.match(op)), None)
    hits: list[tuple[str, float, str, str]] = []
    for path, text in texts.items():
        if not path.endswith(".h"):
            continue
        stem = _tf_stem(path)
        best, why, functor = 0.0, "", ""
        if family and stem == family:
            best, why = 1.0, f"{op} belongs to the {family} family"
        decls = set(_TF_DECL.findall(text))
        if stem == "cwise_ops" and snake in decls:
            best, why, functor = 0.95, f"declares the cwise functor functor::{snake}", snake
        for d in decls:
            core = _TF_DECL_SUFFIX.sub("", d) or d
            if core == base and 0.95 > best:
                best, why = 0.95, f"declares functor::{d}"
            elif len(core) >= 4 and base.startswith(core) and base[len(core):][:1].isupper() and 0.8 > best:
                best, why = 0.8, f"declares functor::{d}"
        c = _tf_compact(stem)
        if c == compact and 0.9 > best:
            best, why = 0.9, f"header named after {op}"
        elif len(c) >= 4 and len(compact) >= 4 and (compact.startswith(c) or c.startswith(compact)) and 0.75 > best:
            best, why = 0.75, f"header name {stem} ~ {snake}"
        if best:
            hits.append((path, best, why, functor))
    if family and any(_tf_stem(p) == family for p, *_ in hits):
        hits = [(p, s if _tf_stem(p) == family else s * 0.7, w, f) for p, s, w, f in hits]
    return hits


def tf_inferred(header: str, op: str, functor: str) -> list[tuple[str, Side | None]]:
    """The implementation files TensorFlow's layout puts beside a declaring header, with their side."""
    folder, stem = header.rsplit("/", 1)[0] + "/", _tf_stem(header)
    if stem == "cwise_ops":  # cwise_op_floor_div.cc, cwise_op_gpu_floor_div.cu.cc; only through a functor's name
        return [(f"{folder}cwise_op_gpu_{functor}.cu.cc", Side.CUDA),
                (f"{folder}cwise_op_{functor}.cc", Side.SHARED)] if functor else []
    if stem == "reduction_ops":  # one .cc per reduction (reduction_ops_mean.cc); GPU files go by dtype
        return [(f"{folder}reduction_ops_{to_snake(op)}.cc", Side.SHARED)]
    m = _TF_IMPL_STEM.match(stem)
    if m is None:
        return []
    impl = m.group("stem")
    return [(f"{folder}{impl}_gpu.cu.cc", Side.CUDA), (f"{folder}{impl}.cc", Side.SHARED)]


def _tf_gpu_companions(header: str, texts: dict[str, str]) -> list[str]:
    """GPU-side headers of the same kernel family in the same folder (bias_op.h -> bias_op_gpu.h)."""
    folder, stem = header.rsplit("/", 1)[0] + "/", _tf_stem(header)
    m = _TF_IMPL_STEM.match(stem)
    prefix = re.sub(r"_(?:ops|op|functor)$", "", m.group("stem")) if m else stem
    return [p for p in texts if p != header and p.startswith(folder) and "/" not in p[len(folder):]
            and _tf_stem(p).startswith(prefix + "_") and "gpu" in _tf_stem(p)]


def _tf_headers(ops: list[OpRef], texts: dict[str, str], known: set[str], board: Board, cues: Cues) -> bool:
    """Rank the headers declaring each op's functor and the implementation files they name by convention."""
    found = False
    declared = {p: d for p, t in texts.items() if (d := tf_gpu_declarations(p, t))}
    for op in ops:
        hits = _tf_declaring(op.name, texts)
        if not hits:
            continue
        found = True
        top = max(s for _, s, _, _ in hits)
        # a header that registers the op's GPU kernel itself (matmul_op_impl.h) holds it: no .cu.cc to infer
        gpu_reg = re.compile(r'Name\(\s*"' + re.escape(op.name) + r'"\s*\)\s*\.Device\(\s*DEVICE_GPU')
        gpu_in_header = any(gpu_reg.search(t) for p, t in texts.items() if p.endswith(".h"))
        for header, strength, why, functor in hits:
            if strength < top * 0.75:
                continue  # a weaker name likeness beside a header that declares the op
            w = op.weight * strength
            name = header.rsplit("/", 1)[-1]
            board.add(header, w * 0.94, f"{name}: {why} [{op.origin}]")
            for path, side in tf_inferred(header, op.name, functor):
                if path in known or (side is Side.CUDA and gpu_in_header):
                    continue  # listed, so not inferred (never the case in a wheel); or registered in a header
                score = w if side is Side.CUDA else w * 0.97
                board.add(path, score, f"{_INFERRED.format(h=header)} ({name}: {why}) [{op.origin}]", side)
            comps = [c for c in _tf_gpu_companions(header, texts)
                     if "grad" not in c.rsplit("/", 1)[-1] or "Grad" in op.name]  # backward headers: not a forward op's
            for comp in comps:
                board.add(comp, w * 0.96, f"GPU-side header beside {name} for {op.name}", Side.CUDA)
                if _TF_DEVICE_CODE.search(texts.get(comp, "")):
                    # the GPU kernels are written in the header; the inferred .cu.cc only instantiates them
                    board.add(comp, w * 1.01, f"{comp.rsplit('/', 1)[-1]} holds the GPU kernels (device code) of "
                              f"{op.name}; the .cu.cc beside it only instantiates them", Side.CUDA)
            if cues.nan and COMPARING_OPS.search(to_snake(op.name)):
                # the headers whose code handles NaN (isnan, x != x, a NaN-propagating functor) hold the comparison
                for path in [header, *comps]:
                    if OWN_NAN.search(texts[path]) or "NaN" in texts[path]:
                        board.add(path, w * LIFT, f"{cues.nan}: {path.rsplit('/', 1)[-1]} handles NaN for {op.name}",
                                  Side.CUDA if path in comps else None)
            elif cues.value_dependent and functor:
                board.add(header, w * LIFT, f"{cues.value_dependent}: the math is the functor in {name}")
        _tf_gpu_headers_of(op, declared, op.weight * top, board)
    return found


def tf_gpu_declarations(path: str, text: str) -> tuple[str, ...]:
    """The types a GPU-side kernel header's device code declares (conv_2d_gpu.h: SwapDimension1And2InTensor3,
    TransposeElemType, ...); () for any other file. What the bundled release index keeps of a wheel's headers."""
    if not path.endswith(".h") or _tf_side(path) is not Side.CUDA or not _TF_DEVICE_CODE.search(text):
        return ()
    return tuple(sorted(set(_TF_DECL.findall(text))))


def _tf_gpu_headers_of(op: OpRef, declared: Mapping[str, Sequence[str]], weight: float, board: Board,
                       whence: str = "") -> bool:
    """GPU headers named otherwise whose device code declares types named after the op: the GPU transpose's
    tiles live in conv_2d_gpu.h (BatchNarrowMatrixTransposeDispatcher, TransposeElemType), not in a transpose file.
    `declared`: header -> its device code's declared types (`tf_gpu_declarations`), read or from the index."""
    base = re.sub(r"(?:V\d+|Native)$", "", op.name)
    if len(base) < 5:
        return False  # Sum, Max, Mean: too short a word to tell one header from another
    word = re.compile(re.escape(base) + r"(?![a-z])")
    found = False
    for path, names in declared.items():
        named = sorted(d for d in names if word.search(d))
        if named:
            found = True
            board.add(path, weight * 0.9, f"{path.rsplit('/', 1)[-1]}: its GPU device code declares "
                      f"{', '.join(named[:2])}, named after {op.name}{whence} [{op.origin}]", Side.CUDA)
    return found


# --------------------------------------------------------------------------------------------
# The kernel files a release's compiled libraries name (sftl.sources.inventory): a wheel carries no kernel .cc,
# but its libraries' CHECK/LOG strings name the kernel files built into them. Those are known to exist in the
# reported release (their text is not at hand); matched to the op by TensorFlow's naming (`<op>_op.cc`,
# `<op>_op_gpu.cu.cc`, `<op>_op_gpu.h`, `cwise_op_<op>.cc`, `reduction_ops_<op>.cc`, subfolders image/, linalg/...).


@dataclass(frozen=True)
class _BinaryLayer:
    wheel: str  # the wheel's file name (or how many libraries on disk), for reasons
    kernels: tuple[str, ...]  # the named paths under tensorflow/core/kernels/
    gpu_build: bool  # the libraries name GPU files (.cu.cc): a GPU build; else the GPU files cannot be named
    # from the bundled index, for a source without the headers' text: GPU header -> its device code's declared types
    declarations: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def _tf_binary_layer(source: SourceProvider, index: bool) -> _BinaryLayer | None:
    """The report's release's wheel, else its compiled libraries on disk (an unpacked wheel given as a tree), else
    (`index`: no kernel C++ at hand, not even headers: a tree of Python files) sftl's bundled index of the release."""
    wheel = release_wheel(source)
    libraries = release_libraries(source) if wheel is None else None
    declarations: Mapping[str, tuple[str, ...]] = {}  # a wheel's headers are read as text (_tf_headers) instead
    if wheel is not None and wheel[1] == "tensorflow":
        origin, named = wheel[0].name, named_paths(source)
    elif libraries is not None and libraries[1] == "tensorflow":
        n = len(libraries[0])
        origin, named = f"{n} compiled librar{'y' if n == 1 else 'ies'} on disk", named_paths(source)
    else:
        # neither at hand (a --source-root tree of Python files): the kernel files sftl's bundled index holds for
        # the release (or the nearest indexed one before it), which says which release it read
        hit = indexed(source) if index else None
        if hit is None or hit.framework != "tensorflow":
            return None
        origin, named = hit.origin, hit.paths
        declarations = hit.declarations
    kernels = tuple(sorted(p for p in named if p.startswith(_TF_KERNEL_DIR)))
    if not kernels:
        return None
    return _BinaryLayer(origin, kernels, any(p.endswith((".cu.cc", ".cu.h")) for p in kernels), declarations)


# stem words that say what kind of file it is, not which op: dropped before comparing a file with an op
_TF_FILE_NOISE = frozenset(
    "op ops gpu cpu impl functor functors kernel kernels cu common cwise lib util utils base "
    "float double half bfloat16 int8 int16 int32 int64 uint8 complex complex64 complex128 real bool".split()
)
_TF_FUZZY = 88.0  # rapidfuzz ratio (0-100) for a file name that is the op's with a letter or two off
_GPU_INFERRED = "not named by the release's libraries, a CPU-only build that names no GPU file: inferred from {cc}"
_GPU_UNNAMED = ("not named by the release's libraries, a GPU build that names only the GPU files holding checks: "
                "inferred from {cc}")


def _tf_file_stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].split(".", 1)[0]  # x_op_gpu.cu.cc -> x_op_gpu


def _tf_op_words(stem: str) -> str:
    """'non_max_suppression_op_gpu' -> 'nonmaxsuppression': the op words of a kernel file's name."""
    return "".join(w for w in stem.split("_") if w and w not in _TF_FILE_NOISE and not w.isdigit())


def _tf_op_keys(op: str, gen_names: dict[str, str]) -> set[str]:
    """The compact names a kernel file of `op` may carry: the op's (version suffix off), its gen_*_ops function's."""
    keys = {_tf_op_words(to_snake(re.sub(r"(?:V\d+|Native)$", "", op)))}
    for fname, raw in gen_names.items():
        if raw == op:
            keys.add(_tf_op_words(re.sub(r"_v\d+$", "", fname.strip("_"))))
    return {k for k in keys if len(k) >= 3}


def _tf_name_match(op: str, keys: set[str], path: str) -> tuple[float, str]:
    """How well a kernel file's name says it is `op`'s: (strength, why); (0, "") for no likeness."""
    stem = _tf_file_stem(path)
    family = next((fam for rx, fam in _TF_FAMILIES if rx.match(op)), None)
    # the family's files (reduction_ops_sum.cc, scan_ops_gpu.h), and its GPU kernels' (reduction_gpu_kernels.cu.h)
    if family and (stem.startswith(family) or stem.startswith(family.removesuffix("_ops") + "_gpu")):
        rest = stem[len(family):].strip("_") if stem.startswith(family) else ""
        if rest and _tf_op_words(rest) in keys:
            return 1.0, f"the {family} family's file for {op}"
        return 0.9, f"{op} belongs to the {family} family"
    words = _tf_op_words(stem)
    if not words:
        return 0.0, ""
    if words in keys:
        return 1.0, f"file name {stem} is {op}'s by TensorFlow's naming"
    # imported here: its 60 ms are paid only by a report read through a wheel's libraries
    from rapidfuzz import fuzz

    best = max(fuzz.ratio(words, k) for k in keys)
    if best >= _TF_FUZZY:
        return 0.6 * best / 100, f"file name {stem} ~ {op} ({best / 100:.2f})"
    if any(words.startswith(k) and len(k) >= 5 for k in keys):
        return 0.55, f"file name {stem} starts with {op}'s name"
    return 0.0, ""


def _tf_binary_named(
    ops: list[OpRef], binary: _BinaryLayer, listed: set[str], board: Board, div: Divergence, gen_names: dict[str, str]
) -> bool:
    """Rank the kernel files the release's libraries name by how their names match each op; with a CPU-only build,
    the op's GPU files are inferred beside its named .cc (first when the report surely blames CUDA)."""
    found = False
    gpu_first = div.side is Side.CUDA and div.confident
    for op in ops:
        keys = _tf_op_keys(op.name, gen_names)
        if not keys:
            continue
        hits = [(p, *_tf_name_match(op.name, keys, p)) for p in binary.kernels]
        hits = [h for h in hits if h[1] > 0]
        top = max((s for _, s, _ in hits), default=1.0)
        if binary.declarations and op.weight >= 0.5:
            found |= _tf_gpu_headers_of(op, binary.declarations, op.weight * top, board,
                                        " (its text is not at hand: the types sftl's bundled index keeps of the "
                                        "release's headers)")
        if not hits:
            continue
        found = True
        kept = [h for h in hits if h[1] >= top * 0.75]  # a likeness beside a file that is the op's is noise
        # the op's GPU-side files at hand: named by the libraries, or listed (a wheel's headers: topk_op_gpu.h)
        gpu_known = [p for p in {h[0] for h in kept} | listed
                     if _tf_side(p) is Side.CUDA and _tf_name_match(op.name, keys, p)[0] >= top * 0.75]
        guessed: set[str] = set()
        # the .cc first: a guess says the file it was made from, the op's .cc rather than a header beside it
        for path, strength, why in sorted(kept, key=lambda h: (not h[0].endswith(".cc"), -h[1], h[0])):
            w = op.weight * strength
            board.add(path, w, f"{path.rsplit('/', 1)[-1]}: named by the release's compiled libraries ({binary.wheel}); "
                      f"its source is not at hand; {why} [{op.origin}]", _tf_side(path))
            impl = _TF_IMPL_STEM.match(_tf_file_stem(path))
            if gpu_known or impl is None or _tf_side(path) is Side.CUDA or path in listed:
                # the op's GPU file is named; a GPU file; or a header at hand, whose text the header rules read
                # (matmul_op_impl.h registers the GPU kernel itself)
                continue
            if op.weight < 0.5:
                continue  # an incidental call (tf.constant building the input): its named file is enough noise
            folder, stem = path.rsplit("/", 1)[0] + "/", impl.group("stem")
            # a guessed file below the one known to exist, unless CUDA is blamed; a GPU build naming no GPU file of
            # the op names only the GPU files holding checks: argmax_op_gpu.cu.cc exists unnamed, yet the linalg ops
            # keep their GPU code in the .cc (matrix_solve_op.cc), so its guesses stay below the .cc even then
            factor = 0.6 if binary.gpu_build else 0.9 if gpu_first else 0.75
            inferred = _GPU_UNNAMED if binary.gpu_build else _GPU_INFERRED
            # TensorFlow's three layouts of an op's GPU code: topk_op_gpu.cu.cc, non_max_suppression_op.cu.cc,
            # and the kernels written in a header the .cu.cc instantiates (topk_op_gpu.h, scan_ops_gpu.h); from
            # the op's named .cc, or its named header (relu_op.h) where no .cc is named
            for i, guess in enumerate((f"{folder}{stem}_gpu.cu.cc", f"{folder}{stem}.cu.cc", f"{folder}{stem}_gpu.h")):
                if guess in guessed or guess in binary.kernels:
                    continue
                guessed.add(guess)
                board.add(guess, w * factor * (1.0 - 0.03 * i),
                          f"{inferred.format(cc=path.rsplit('/', 1)[-1])} by TensorFlow's naming convention; "
                          f"source not available [{op.origin}]", Side.CUDA)
    return found
