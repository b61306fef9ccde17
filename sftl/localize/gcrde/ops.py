"""The operators a report is about: API names to aten ops and TensorFlow-agnostic name helpers, weighted by role."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sftl.localize.gcrde.pyresolve import python_ops
from sftl.model import Extraction, Issue

if TYPE_CHECKING:
    from sftl.sources import SourceProvider

# --------------------------------------------------------------------------------------------
# Operators named by a report


@dataclass(frozen=True)
class OpRef:
    """One operator a report uses, as the framework names it, with how much it counts."""

    name: str  # aten op ("histc", "upsample_bilinear2d") or TF raw op ("Mean")
    weight: float
    origin: str  # e.g. "torch.nn.Conv2d in the snippet"


TORCH_INCIDENTAL = frozenset(
    """tensor Tensor as_tensor from_numpy randn rand randint rand_like randn_like manual_seed seed
    zeros ones empty full zeros_like ones_like empty_like full_like cuda to cpu numpy item tolist print
    device dtype float double half long int bool byte char short size shape dim numel clone detach
    contiguous requires_grad_ backward allclose equal isclose is_tensor set_default_dtype get_default_dtype
    set_printoptions no_grad enable_grad synchronize view view_as reshape unsqueeze squeeze type type_as
    fill_ copy_ data_ptr storage element_size is_cuda get_device set_device current_device device_count
    is_available stride expand expand_as permute transpose t flatten sum_to_size cat stack split chunk
    __init__ __call__ forward parameters zero_grad step eval train state_dict load save isnan isinf
    all any max_memory_allocated memory_allocated empty_cache __repr__ __str__ format norm_except_dim
    apply_ map_ use_deterministic_algorithms set_num_threads""".split()
)
# device and type plumbing: named in titles ("... on CPU and CUDA") without being the subject
_NEVER_SUBJECT = frozenset(
    "cuda cpu to device tensor Tensor float double half int long bool numpy item print type size shape dim".split()
)
# `cat`, `max`, `all`, `norm`... are real subjects often enough: only the pure plumbing above is
# down-weighted, and even it counts when the title names it.
_TORCH_NAMESPACE_SKIP = ("torch.cuda.", "torch.backends.", "torch.testing.", "torch.utils.", "torch.random.",
                         "torch.autograd.grad_mode", "torch.jit.", "torch.onnx.", "torch.optim.")

_DUNDER = {
    "__add__": ("add",), "__radd__": ("add",), "__iadd__": ("add",), "__sub__": ("sub",), "__rsub__": ("rsub", "sub"),
    "__mul__": ("mul",), "__rmul__": ("mul",), "__truediv__": ("div",), "__div__": ("div",), "__rtruediv__": ("div",),
    "__floordiv__": ("floor_divide",), "__mod__": ("remainder", "fmod"), "__pow__": ("pow",), "__rpow__": ("pow",),
    "__matmul__": ("matmul",), "__neg__": ("neg",), "__abs__": ("abs",), "__invert__": ("bitwise_not",),
    "__and__": ("__and__", "bitwise_and"), "__or__": ("__or__", "bitwise_or"), "__xor__": ("__xor__", "bitwise_xor"),
    "__lshift__": ("__lshift__", "bitwise_left_shift"), "__rshift__": ("__rshift__", "bitwise_right_shift"),
    "__ilshift__": ("__ilshift__", "bitwise_left_shift"), "__irshift__": ("__irshift__", "bitwise_right_shift"),
    "__getitem__": ("index", "select", "slice"), "__setitem__": ("index_put", "copy_", "fill_"),
    "__eq__": ("eq",), "__ne__": ("ne",), "__lt__": ("lt",), "__le__": ("le",), "__gt__": ("gt",), "__ge__": ("ge",),
}

# nn modules / functionals / distributions whose aten op is not their snake-cased name
_TORCH_ALIASES: dict[str, tuple[str, ...]] = {
    "interpolate": ("upsample_nearest2d", "upsample_bilinear2d", "upsample_bicubic2d", "upsample_nearest1d",
                    "upsample_linear1d", "upsample_trilinear3d", "upsample_nearest3d"),
    "upsample": ("upsample_nearest2d", "upsample_bilinear2d", "upsample_bicubic2d", "upsample_trilinear3d"),
    "upsample_bilinear": ("upsample_bilinear2d",), "upsample_nearest": ("upsample_nearest2d",),
    "cross_entropy": ("cross_entropy_loss", "log_softmax", "nll_loss", "nll_loss2d"),
    "cross_entropy_loss": ("cross_entropy_loss", "log_softmax", "nll_loss", "nll_loss2d"),
    "bce_loss": ("binary_cross_entropy",), "mse_loss": ("mse_loss",), "l1_loss": ("l1_loss",),
    "leaky_relu": ("leaky_relu",), "gelu": ("gelu",), "elu": ("elu",), "relu": ("relu",), "binary_cross_entropy": ("binary_cross_entropy",),
    "bce_with_logits_loss": ("binary_cross_entropy_with_logits",), "kl_div": ("kl_div",),
    "kl_div_loss": ("kl_div",), "nll_loss": ("nll_loss", "nll_loss2d"), "ctc_loss": ("ctc_loss", "_ctc_loss"),
    "linear": ("linear", "addmm", "mm", "matmul"), "bilinear": ("bilinear", "_trilinear"),
    "conv1d": ("conv1d", "convolution", "_convolution", "cudnn_convolution"),
    "conv2d": ("conv2d", "convolution", "_convolution", "cudnn_convolution", "slow_conv2d_forward", "thnn_conv2d"),
    "conv3d": ("conv3d", "convolution", "_convolution", "cudnn_convolution", "slow_conv3d"),
    "conv_transpose1d": ("conv_transpose1d", "convolution", "cudnn_convolution_transpose"),
    "conv_transpose2d": ("conv_transpose2d", "convolution", "slow_conv_transpose2d", "cudnn_convolution_transpose"),
    "conv_transpose3d": ("conv_transpose3d", "convolution", "slow_conv_transpose3d"),
    "batch_norm": ("batch_norm", "native_batch_norm", "cudnn_batch_norm", "_batch_norm_impl_index"),
    "instance_norm": ("instance_norm", "batch_norm", "native_batch_norm"),
    "layer_norm": ("layer_norm", "native_layer_norm"), "group_norm": ("group_norm", "native_group_norm"),
    "embedding": ("embedding", "embedding_dense_backward"), "embedding_bag": ("embedding_bag", "_embedding_bag"),
    "lstm": ("lstm", "_cudnn_rnn", "_thnn_fused_lstm_cell"), "gru": ("gru", "_cudnn_rnn", "_thnn_fused_gru_cell"),
    "rnn": ("rnn_tanh", "rnn_relu", "_cudnn_rnn"),
    "max_pool1d": ("max_pool1d", "max_pool1d_with_indices"), "max_pool2d": ("max_pool2d", "max_pool2d_with_indices"),
    "max_pool3d": ("max_pool3d", "max_pool3d_with_indices"),
    "adaptive_avg_pool2d": ("adaptive_avg_pool2d", "_adaptive_avg_pool2d"),
    "adaptive_avg_pool3d": ("adaptive_avg_pool3d", "_adaptive_avg_pool3d"),
    "softmax": ("softmax", "_softmax"), "log_softmax": ("log_softmax", "_log_softmax"),
    "softmin": ("softmax", "_softmax"), "dropout": ("dropout", "native_dropout", "_fused_dropout"),
    "prelu": ("prelu", "_prelu_kernel", "prelu_cpu", "prelu_cuda"), "fold": ("col2im",), "unfold": ("im2col", "unfold"),
    "cosine_similarity": ("cosine_similarity",), "pairwise_distance": ("pairwise_distance", "norm"),
    "silu": ("silu",), "hardswish": ("hardswish",), "relu6": ("hardtanh",), "normalize": ("norm", "linalg_vector_norm"),
    "multihead_attention": ("_native_multi_head_attention", "scaled_dot_product_attention", "bmm", "baddbmm"),
    "scaled_dot_product_attention": ("scaled_dot_product_attention", "_scaled_dot_product_efficient_attention"),
    "grid_sample": ("grid_sampler", "grid_sampler_2d", "cudnn_grid_sampler"), "affine_grid": ("affine_grid_generator",),
    "pad": ("constant_pad_nd", "reflection_pad2d", "replication_pad2d", "pad"),
    "one_hot": ("one_hot",), "gumbel_softmax": ("softmax", "_softmax"),
    "transformer_encoder_layer": ("_transformer_encoder_layer_fwd",),
    # torch.distributions: the kernels the common methods end up in
    "normal.icdf": ("erfinv", "mul", "add"), "normal.cdf": ("erf",), "normal.sample": ("normal",), "normal.rsample": ("normal",),
    "normal.log_prob": ("log", "pow"), "categorical.sample": ("multinomial",), "multinomial.sample": ("multinomial",),
    "bernoulli.sample": ("bernoulli",), "gamma.sample": ("_standard_gamma",), "gamma.rsample": ("_standard_gamma",),
    "dirichlet.sample": ("_sample_dirichlet",), "dirichlet.rsample": ("_sample_dirichlet",),
    "beta.sample": ("_sample_dirichlet", "_standard_gamma"), "poisson.sample": ("poisson",),
    "binomial.sample": ("binomial",), "uniform.sample": ("uniform",), "exponential.sample": ("exponential",),
    "studentt.sample": ("_standard_gamma", "normal"),
}

_NORM_SUFFIX = re.compile(r"(\d)d$")


_ACRONYMS = (("PReLU", "Prelu"), ("RReLU", "Rrelu"), ("ReLU", "Relu"), ("GELU", "Gelu"), ("SiLU", "Silu"),
             ("SELU", "Selu"), ("CELU", "Celu"), ("ELU", "Elu"), ("GLU", "Glu"), ("LSTM", "Lstm"), ("GRU", "Gru"),
             ("RNN", "Rnn"), ("CTC", "Ctc"), ("NLL", "Nll"), ("BCE", "Bce"), ("MSE", "Mse"), ("KLDiv", "KlDiv"))


def to_snake(name: str) -> str:
    for acronym, word in _ACRONYMS:
        name = name.replace(acronym, word)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z])([A-Z])", r"\1_\2", s)
    s = re.sub(r"(\d)([A-Z][a-z])", r"\1_\2", s)  # Conv2D -> conv2d, Conv3DBackprop -> conv3d_backprop
    return s.lower()


def torch_op_names(api: str) -> tuple[str, ...]:
    """'torch.nn.Conv2d' -> ('conv2d', 'convolution', ...); 'torch.Tensor.histc' -> ('histc',)."""
    api = api.replace("::", ".").strip(". ")
    parts = [p for p in api.split(".") if p]
    if not parts:
        return ()
    leaf = parts[-1]
    if leaf in _DUNDER:
        return _DUNDER[leaf]
    low = [p.lower() for p in parts]
    if "distributions" in low and len(parts) >= 2:
        key = f"{parts[-2].lower()}.{leaf.lower()}"
        return _TORCH_ALIASES.get(key, (to_snake(leaf),))
    if "linalg" in low[:-1]:
        return (f"linalg_{leaf}", leaf)
    if "fft" in low[:-1]:
        return (f"fft_{leaf}",)
    if "special" in low[:-1]:
        return (f"special_{leaf}", leaf)
    snake = to_snake(leaf) if leaf[:1].isupper() else leaf
    if leaf[:1].isupper() and "nn" in low:  # a module: nn.BatchNorm2d -> batch_norm, nn.MSELoss -> mse_loss
        base = _NORM_SUFFIX.sub(r"\1d", snake)
        candidates = [base]
        if base.endswith("_loss"):
            candidates.append(base[: -len("_loss")])
        stripped = re.sub(r"_?\dd$", "", base)
        if stripped != base and ("norm" in stripped):
            candidates.append(stripped)
        if base.startswith("conv_transpose") or base.startswith("conv"):
            candidates.append(base.replace("_", "", 0))
        out: list[str] = []
        for cand in candidates:
            out.extend(_TORCH_ALIASES.get(cand, (cand,)))
        return tuple(dict.fromkeys(out))
    return _TORCH_ALIASES.get(snake, (snake,))


_CODE_CALL = re.compile(r"\b(torch(?:\.\w+)+|F\.\w+|nn\.\w+|tf(?:\.\w+)+|tensorflow(?:\.\w+)+)\s*\(")
_METHOD = re.compile(r"\)?\.(\w+)\s*\(")


def apis_from_code(code: str, framework: str) -> list[str]:
    """A fallback when extraction gave no `apis`: framework calls written in the snippet."""
    out: list[str] = []
    for m in _CODE_CALL.finditer(code):
        name = m.group(1)
        if name.startswith("F."):
            name = "torch.nn.functional." + name[2:]
        elif name.startswith("nn."):
            name = "torch.nn." + name[3:]
        elif name.startswith("tf."):
            name = "tensorflow." + name[3:]
        out.append(name)
    if framework == "pytorch":
        for m in _METHOD.finditer(code):
            if not code[max(0, m.start() - 6) : m.start()].endswith(("torch", "nn", "F")):
                out.append("torch.Tensor." + m.group(1))
    return list(dict.fromkeys(out))


_WORDS = re.compile(r"[A-Za-z_][\w.]*")
ENGLISH = frozenset(
    "bug cuda cpu gpu the and with when for not result results wrong different output tensor tensors "
    "issue error nan inf value values float double device using use large small".split()
)


def title_tokens(title: str) -> set[str]:
    out: set[str] = set()
    for tok in _WORDS.findall(title):
        tok = tok.strip("._")
        if not tok:
            continue
        out.add(tok.lower())
        out.update(p.lower() for p in tok.split(".") if p)
        out.add(to_snake(tok.split(".")[-1]))
    return out


def dunder_free(name: str) -> str:
    return name.strip("_") if name.startswith("__") else name


def api_list(extraction: Extraction, framework: str) -> list[str]:
    apis = list(extraction.apis)
    if not apis and extraction.snippet is not None:
        apis = apis_from_code(extraction.snippet.code, framework)
    return apis


def _inflected(name: str, title: set[str]) -> bool:
    """'indexing' / 'sorted' / 'gathers' in the title name the op index / sort / gather."""
    name = name.strip("_")
    return len(name) >= 4 and any(name + end in title or (name.endswith("e") and name[:-1] + end in title)
                                  for end in ("ing", "ed", "es", "s"))


# a line that reads the two devices' results against each other: a difference or a comparison, printed or asserted
_COMPARING_LINE = re.compile(r"\b(?:print|assert|allclose|isclose|assert_close|assertEqual)\b")
_DIFFERENCE = re.compile(r"\w[\w.()\[\]]*\s*-\s*\w|==|!=")


def _only_comparing(leaf: str, code: str) -> bool:
    """Whether every call of `leaf` in the snippet sits on a line comparing the devices' results (abs, max, sum of a
    difference inside print/assert), so it reads the outcome instead of being tested."""
    if len(leaf) < 2 or not code:
        return False
    call = re.compile(r"(?:\.|\btorch\.)" + re.escape(leaf) + r"\s*\(")
    lines = [ln for ln in code.splitlines() if call.search(ln)]
    return bool(lines) and all(_COMPARING_LINE.search(ln) and _DIFFERENCE.search(ln) for ln in lines)


def _by_table(read: tuple[str, ...], table: tuple[str, ...], leaf: str) -> tuple[str, ...]:
    """Python-read ops in the table's order, then public before private, the API's own name first among equals."""
    return tuple(sorted(read, key=lambda n: (table.index(n) if n in table else len(table), n.startswith("_"), n != leaf)))


_SUPPORTING = 0.6  # a snippet call beside the op the title names
_MODE_ARG = re.compile(r"\bmode\s*=\s*['\"]([\w-]+)['\"]")


def torch_ops(
    issue: Issue, extraction: Extraction, yaml_names: set[str] | None, divergent_op: str | None,
    source: SourceProvider | None = None, focus: bool = True,
) -> tuple[list[OpRef], list[str]]:
    """The aten ops a report is about, weighted; and the API names that resolved to nothing.

    With a `source`, nn modules and functionals are resolved by reading that release's Python files
    first (`pyresolve`), the built-in table after. `focus` (sftl's method; off for the published one):
    the op the title names (also inflected: 'indexing') dominates, and the snippet's own `mode=` picks.
    """
    title = title_tokens(issue.title)
    ops: dict[str, OpRef] = {}
    unknown: list[str] = []

    def known(name: str) -> list[str]:
        if yaml_names is None:
            return [name]
        found = [n for n in (name, name + "_", "_" + name, name + "_out") if n in yaml_names]
        return found

    def put(name: str, weight: float, origin: str) -> None:
        if name not in ops or ops[name].weight < weight:
            ops[name] = OpRef(name, weight, origin)

    if divergent_op:
        # "aten::add.Tensor" (a profiler/dispatcher name) or "torch.add" / "add" (a Python name)
        api = divergent_op
        if "aten::" in api:
            api = "torch." + api.split("aten::", 1)[1].split(".", 1)[0]
        elif not api.startswith("torch."):
            api = "torch." + api
        for name in torch_op_names(api):
            for hit in known(name):
                put(hit, 1.0, f"{divergent_op} diverged in replay")
    apis = api_list(extraction, "pytorch")
    snippet = extraction.snippet.code if extraction.snippet else ""
    written_mode = next((m.group(1) for m in _MODE_ARG.finditer(snippet)), None)
    real = 0
    for api in apis:
        if api.startswith(_TORCH_NAMESPACE_SKIP):
            continue
        leaf = api.replace("::", ".").split(".")[-1]
        names = torch_op_names(api)
        if source is not None and api.startswith("torch.nn."):
            read = python_ops(api, source, written_mode)
            # the release's own calls decide which ops; the table's order (the usual 2-d kernel first) and the
            # name of the API rank them, the body's order does not (a helper arange() comes before the op)
            read = _by_table(read, names, to_snake(leaf))
            names = tuple(dict.fromkeys((*read, *names)))
        in_title = leaf not in _NEVER_SUBJECT and (
            leaf.strip("_").lower() in title or any(n.strip("_") in title or (focus and _inflected(n, title)) for n in names)
        )
        incidental = leaf in TORCH_INCIDENTAL and not in_title
        if focus and not in_title and not incidental and _only_comparing(leaf, snippet):
            incidental = True  # (out_cpu - out_gpu.cpu()).abs().max(): reading the difference, not the op under test
        base = 0.15 if incidental else 0.9 - 0.04 * min(real, 5)
        if in_title:
            base = 1.0
        if divergent_op:
            base *= 0.75
        resolved = False
        for i, name in enumerate(names):
            for hit in known(name):
                put(hit, base * (1.0 if i == 0 else 0.85), api + (" (named in the title)" if in_title else ""))
                resolved = True
        if resolved and not incidental:
            real += 1
        if not resolved and not incidental:
            unknown.append(api)
            # old releases bound many ops through TH (THCTensor_(rshift)), outside the yaml: keep the name
            put(dunder_free(names[0]) if names else leaf, base * 0.7, api + " (not in native_functions.yaml)")
    titled = {n for n, o in ops.items() if "(named in the title)" in o.origin or "diverged in replay" in o.origin}
    if titled and not divergent_op and focus:
        # the op the title names is the one under test: the snippet's other calls build its input or read its
        # result (randn, .sum() of the output, abs(a - b).max() to compare)
        ops = {n: o if n in titled else OpRef(n, o.weight * _SUPPORTING, o.origin + " (not the op the title names)")
               for n, o in ops.items()}
    top_weight = max((o.weight for o in ops.values()), default=1.0)
    if top_weight < 0.5:  # only plumbing calls: the report is about one of them after all
        ops = {n: OpRef(n, o.weight * 0.9 / top_weight, o.origin) for n, o in ops.items()}
    context = " ".join([issue.title, issue.body, extraction.snippet.code if extraction.snippet else ""]).lower()
    code = extraction.snippet.code if extraction.snippet else ""
    written = [m.group(1).lower() for m in _MODE_ARG.finditer(code)] if focus else []
    modes = [m for m in ("bilinear", "bicubic", "trilinear", "nearest", "linear", "area") if m in written] or [
        m for m in ("bilinear", "bicubic", "trilinear", "nearest", "linear", "area") if m in context]
    if modes and any(n.startswith("upsample_") for n in ops):  # interpolate(mode=...) picks one kernel
        for name, op in list(ops.items()):
            if name.startswith("upsample_") and not any(name.startswith(f"upsample_{m}") for m in modes[:1]):
                ops[name] = OpRef(name, op.weight * 0.6, op.origin)
    if yaml_names is not None:  # ops named in the title though missing from the snippet ("arange cuda bug")
        for tok in title:
            if tok in yaml_names and tok not in ops and tok not in ENGLISH and tok not in TORCH_INCIDENTAL and (
                len(tok) >= 5 or "_" in tok
            ):
                put(tok, 0.8, f"{tok} named in the title")
    return sorted(ops.values(), key=lambda o: -o.weight), unknown
