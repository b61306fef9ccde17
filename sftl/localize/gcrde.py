"""GPU/CPU result discrepancies: from the operators a report uses to the framework kernel files, ranked per device.

Two methods behind one call, `localize_gcrde(issue, extraction, source, method=...)`:

* ``paper``: the published SFTL method. Operators from the snippet -> their native_functions.yaml
  entries -> the CPU and CUDA `dispatch` kernel names -> file names fuzzy-matched with
  `difflib.get_close_matches` against aten/src/ATen/native/{cpu,cuda,}/ (TensorFlow: the op's
  snake name against tensorflow/core/kernels/).
* ``sftl`` (default): reads file contents. Where each dispatch kernel is defined
  (`TORCH_IMPL_FUNC`, the function itself), which `*_stub`s it calls and which files
  `REGISTER_DISPATCH` them per device; structured ops followed to their `structured_delegate`,
  composite ops to the ops they call, old TH/THC `THCTensor_(op)` definitions, the headers the
  kernel files include; the device that diverged weighted first; incidental calls (`torch.tensor`,
  `randn`, `.cuda()`) nearly ignored; a TF-IDF over contents as a back-off. TensorFlow: the API
  call -> its raw op (from the Python sources' `gen_*_ops` calls, a table, or name rules) -> the
  files under tensorflow/core/kernels/ whose `REGISTER_KERNEL_BUILDER(Name("Op").Device(...))`
  registers it, else name matching (`x_op.cc`, `x_op_gpu.cu.cc`, `cwise_op_x.cc`). With kernel headers
  only (a wheel): the headers declaring the op's functor, and the files TensorFlow's naming puts
  beside them, marked inferred (never read).

Unknown operators, a corrupt yaml or a missing source give ABSTAINED/SKIPPED with the reason.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import pickle
import re
import weakref
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sftl.errors import SourceError
from sftl.localize import _native as nat
from sftl.localize import legacy
from sftl.model import Extraction, Issue, Localization, Outcome, Side, Suspect

if TYPE_CHECKING:
    from sftl.sources import SourceProvider

METHODS = ("sftl", "paper")

# --------------------------------------------------------------------------------------------
# Operators named by a report


@dataclass(frozen=True)
class OpRef:
    """One operator a report uses, as the framework names it, with how much it counts."""

    name: str  # aten op ("histc", "upsample_bilinear2d") or TF raw op ("Mean")
    weight: float
    origin: str  # e.g. "torch.nn.Conv2d in the snippet"


_TORCH_INCIDENTAL = frozenset(
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


def _snake(name: str) -> str:
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
        return _TORCH_ALIASES.get(key, (_snake(leaf),))
    if "linalg" in low[:-1]:
        return (f"linalg_{leaf}", leaf)
    if "fft" in low[:-1]:
        return (f"fft_{leaf}",)
    if "special" in low[:-1]:
        return (f"special_{leaf}", leaf)
    snake = _snake(leaf) if leaf[:1].isupper() else leaf
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
_ENGLISH = frozenset(
    "bug cuda cpu gpu the and with when for not result results wrong different output tensor tensors "
    "issue error nan inf value values float double device using use large small".split()
)


def _title_tokens(title: str) -> set[str]:
    out: set[str] = set()
    for tok in _WORDS.findall(title):
        tok = tok.strip("._")
        if not tok:
            continue
        out.add(tok.lower())
        out.update(p.lower() for p in tok.split(".") if p)
        out.add(_snake(tok.split(".")[-1]))
    return out


def _dunder_free(name: str) -> str:
    return name.strip("_") if name.startswith("__") else name


# --------------------------------------------------------------------------------------------
# Which device diverged

_WRONG = re.compile(
    r"wrong|incorrect|bug|\bnan\b|\binf\b|differ|mismatch|not match|inconsisten|garbage|unexpected|ignor|"
    r"crash|fail|broken|not correct|bad result|off by|instead of|should be|expected|\bdrops?\b|dropped|"
    r"\bmiss(?:es|ed|ing)?\b|\blos(?:es|t)\b|\bskip(?:s|ped)?\b|overflow|underflow|garbled|inaccura|precision"
    r"|relative error",
    re.I,
)
_GPU = re.compile(r"\bcuda\b|\bgpu\b|device=.cuda|\.cuda\(\)|cuda:\d", re.I)
_CPU = re.compile(r"\bcpu\b", re.I)
_GPU_OK = re.compile(
    r"(?:works?|correct|fine|ok|right|as expected)(?:(?!cpu|gpu|cuda|but |while )[^.,;\n]){0,30}\b(?:on|with|for|in)\s+(?:the\s+)?(?:cuda|gpu)"
    r"|(?:cuda|gpu)(?:(?!cpu|gpu|cuda|but |while )[^.,;\n]){0,25}(?:works?|is (?:correct|fine|ok|right)|as expected)",
    re.I,
)
_CPU_OK = re.compile(
    r"(?:works?|correct|fine|ok|right|as expected)(?:(?!cpu|gpu|cuda|but |while )[^.,;\n]){0,30}\b(?:on|with|for|in)\s+(?:the\s+)?cpu"
    r"|\bcpu\b(?:(?!cpu|gpu|cuda|but |while )[^.,;\n]){0,25}(?:works?|is (?:correct|fine|ok|right)|as expected)",
    re.I,
)
_CLAUSES = re.compile(r"(?<=[.!?;,])\s+|\n|\s+(?:but|while|whereas|although)\s+", re.I)


@dataclass(frozen=True)
class Divergence:
    side: Side  # the side whose result the report calls wrong
    confident: bool
    why: str


def divergent_side(issue: Issue, extraction: Extraction) -> Divergence:
    """Read which device's result the report calls wrong; CUDA when the text does not say."""
    text = "\n".join(x for x in (issue.title, issue.body, extraction.error_line or "") if x)
    gpu = cpu = 0.0
    for sentence in _CLAUSES.split(text):
        if not sentence or not _WRONG.search(sentence) or _GPU_OK.search(sentence) or _CPU_OK.search(sentence):
            continue
        g, c = bool(_GPU.search(sentence)), bool(_CPU.search(sentence))
        if g and not c:
            gpu += 1
        elif c and not g:
            cpu += 1
    gpu += 2 * len(_CPU_OK.findall(text))
    cpu += 2 * len(_GPU_OK.findall(text))
    if cpu > gpu:
        return Divergence(Side.CPU, cpu - gpu >= 2, f"the report calls the CPU result wrong ({cpu:g} vs {gpu:g})")
    return Divergence(Side.CUDA, gpu - cpu >= 1, f"the report calls the CUDA result wrong ({gpu:g} vs {cpu:g})"
                      if gpu > cpu else "the report does not say which side is wrong: CUDA first")


# --------------------------------------------------------------------------------------------
# What else the report says about where the fault lies

# a CUDA device other than the default one, as code or observed output writes it
_SECOND_DEVICE = re.compile(
    r"cuda:[1-9](?![\d.])|\.cuda\(\s*(?:device\s*=\s*)?[1-9]\s*\)|device\(\s*['\"]cuda['\"]\s*,\s*(?:index\s*=\s*)?[1-9]"
    r"|set_device\(\s*[1-9]|\b(?:gpu|cuda device)\s*#?[1-9]\b",
    re.I,
)
_DEFAULT_DEVICE = re.compile(r"cuda:0(?![\d.])|\.cuda\(\s*\)|\.cuda\(\s*0\s*\)|['\"]cuda['\"]|\b(?:gpu|cuda device)\s*#?0\b|\bfirst gpu",
                             re.I)
# words that compare CUDA devices with each other (not CPU with GPU: "different devices" alone is that)
_CROSS_WORDS = re.compile(
    r"\b(?:second|non-?default)\s+(?:cuda\s+)?(?:gpu|device)\b|(?:different|other|another|multiple|two)\s+cuda\s+devices?"
    r"|across (?:cuda|gpu) devices|(?:different|other) (?:cuda )?device (?:index|indices|ordinal)",
    re.I,
)
# "different GPUs" / "another GPU" often means another GPU model: only with a second device index too
_LOOSE_CROSS = re.compile(r"(?:different|other|another|multiple|two)\s+gpus?\b|between (?:the )?gpus|multi-?gpu", re.I)
# an accuracy loss that depends on the input's value: the math's approximation, not the kernel plumbing
_VALUE_CUE = re.compile(
    r"precision|\baccura|inaccura|relative error|\bulps?\b|asymptot|underflow|\btails?\b|\bnear (?:the )?pole"
    r"|close to (?:the )?pole|(?:large|small|big|tiny|negative) (?:x|values?|arguments?|inputs?|magnitudes?)\b"
    r"|\bfor (?:x|p|q|a|inputs?)\s*[<>=]|\bscipy\b|\bmpmath\b|\bdigits?\b",
    re.I,
)
# ... unless the report ties it to shapes, layouts or sizes (the kernel or its launch, not the formula)
_LAYOUT_CUE = re.compile(
    r"non-?contiguous|\bstrides?\b|broadcast|large tensors?|big tensors?|\bnumel\b|2\s*\*\*\s*31|int32 index"
    r"|\bbatch(?:es| size)?\b|\bshapes?\b|transpos|channels_last|memory format|\bout=",
    re.I,
)
# NaN handled differently: the comparison functors decide which operand wins
_NAN_CUE = re.compile(
    r"\bnan\b[^.;\n]{0,60}(?:ignor|propagat|skip|drop|return|miss|lost|treat)|(?:ignor|propagat|skip|drop)\w*\s+"
    r"(?:the\s+)?nans?\b|nan[- ]propagation",
    re.I,
)
_COMPARING_OPS = re.compile(r"max|min|arg(?:max|min)|clamp|clip|sort|topk|median|kthvalue|mode|nan\w*|cummax|cummin")


@dataclass(frozen=True)
class Cues:
    """Hints in the report about where, along the op's path, the fault lies."""

    cross_device: str = ""  # why the report reads as CUDA device vs CUDA device, else ""
    value_dependent: str = ""  # the report ties the divergence to input values (the math), else ""
    nan: str = ""  # NaN kept/dropped differently (the comparison functors), else ""


def report_cues(issue: Issue, extraction: Extraction) -> Cues:
    """Read the cross-device, value-dependent accuracy and NaN-handling cues of a report."""
    prose = "\n".join(x for x in (issue.title, issue.body, extraction.error_line or "") if x)
    code = extraction.snippet.code if extraction.snippet else ""
    both = prose + "\n" + code
    cross = ""
    words = _CROSS_WORDS.search(prose)
    second = _SECOND_DEVICE.search(both)
    loose = _LOOSE_CROSS.search(prose)
    if words or (loose and second):
        cross = f"the report compares CUDA devices ({(words or loose).group(0).strip()!r})"  # type: ignore[union-attr]
    elif second and _DEFAULT_DEVICE.search(both):
        cross = f"the report runs on a non-default CUDA device ({second.group(0).strip()!r}) beside the default one"
    value = ""
    vm = _VALUE_CUE.search(prose)
    if vm and not _LAYOUT_CUE.search(prose):
        value = f"the divergence depends on input values ({vm.group(0).strip()!r})"
    nm = _NAN_CUE.search(prose)
    nan = f"NaN handled differently ({nm.group(0).strip()!r})" if nm else ""
    return Cues(cross, value, nan)


# --------------------------------------------------------------------------------------------
# Evidence bookkeeping


@dataclass
class _Evidence:
    score: float = 0.0
    reasons: list[tuple[float, str]] = field(default_factory=list)
    hits: int = 0
    side: Side | None = None  # the device whose code this file is here, when its location does not say

    def add(self, score: float, reason: str, side: Side | None = None) -> None:
        self.hits += 1
        if score > self.score:
            self.score = score
            self.side = side
        self.reasons.append((score, reason))

    def reason(self) -> str:
        seen: list[str] = []
        for _, r in sorted(self.reasons, key=lambda x: -x[0]):
            if r not in seen:
                seen.append(r)
            if len(seen) == 3:
                break
        return "; ".join(seen)


class _Board:
    def __init__(self) -> None:
        self.files: dict[str, _Evidence] = defaultdict(_Evidence)
        # path -> (function, body) of the op's kernels defined there: where its launchers are called
        self.bodies: dict[str, list[tuple[str, str]]] = defaultdict(list)

    def body(self, path: str, fn: str, body: str) -> None:
        if (fn, body) not in self.bodies[path]:
            self.bodies[path].append((fn, body))

    def add(self, path: str, score: float, reason: str, side: Side | None = None) -> None:
        self.files[path].add(score, reason, side)


# --------------------------------------------------------------------------------------------
# Entry point


def localize_gcrde(
    issue: Issue,
    extraction: Extraction,
    source: SourceProvider | None,
    method: str = "sftl",
    top: int = 10,
    divergent_op: str | None = None,
) -> Localization:
    """Rank the framework files most likely to hold a GPU/CPU discrepancy, each with its side and reason."""
    label = method
    if method not in METHODS:
        return Localization(label, (), Outcome.SKIPPED, f"unknown GCRDE method {method!r}; choose sftl or paper")
    if source is None:
        return Localization(label, (), Outcome.SKIPPED, "no framework source available for this release")
    framework = _framework(issue, extraction, source)
    try:
        if framework == "tensorflow":
            loc = _localize_tensorflow(issue, extraction, source, method, top, divergent_op)
        else:
            loc = _localize_pytorch(issue, extraction, source, method, top, divergent_op)
    except SourceError as exc:
        return Localization(label, (), Outcome.SKIPPED, f"source unavailable: {exc}")
    description = getattr(source, "description", "")
    if "nearest" in description and loc.outcome is not Outcome.SKIPPED:  # not the report's own release
        loc = Localization(loc.method, loc.suspects, loc.outcome, f"{loc.reason}; read from the {description}")
    return loc


def _framework(issue: Issue, extraction: Extraction, source: SourceProvider) -> str:
    fw = extraction.environment.framework or getattr(source, "framework", None)
    if fw in ("pytorch", "tensorflow"):
        return fw
    return "tensorflow" if "tensorflow" in issue.repo.lower() else "pytorch"


def _api_list(extraction: Extraction, framework: str) -> list[str]:
    apis = list(extraction.apis)
    if not apis and extraction.snippet is not None:
        apis = apis_from_code(extraction.snippet.code, framework)
    return apis


_SPECIAL_LAYOUTS = ("quantized", "sparse", "nested", "mkldnn", "cudnn", "miopen", "transformers", "ao_sparse")


def _rank(board: _Board, side_weight: dict[Side | None, float], top: int, label: str,
          path_side: object, context: str = "") -> list[Suspect]:
    ranked: list[tuple[float, str, Side | None, str]] = []
    low = context.lower()
    for path, ev in board.files.items():
        side = ev.side or path_side(path)  # type: ignore[operator]
        score = ev.score * side_weight.get(side, 0.2) + 0.02 * min(ev.hits - 1, 3)
        special = next((w for w in _SPECIAL_LAYOUTS if f"/{w}/" in path.lower()), None)
        if special and special.rstrip("s") not in low and not (special in ("cudnn", "miopen") and "conv" in low):
            score *= 0.5  # a quantized/sparse/nested kernel, for a report about none of these
        ranked.append((score, path, side, ev.reason()))
    ranked.sort(key=lambda x: (-x[0], x[1]))
    return [Suspect(path, _unit(score), side, reason) for score, path, side, reason in ranked[:top]]


# Raw evidence tops out near 1.3 (an op named in the title, defined on the diverging device, lifted by a
# cue, plus corroborating hits); scores are reported on [0, 1] by this fixed scale, so they compare
# across reports and keep the ranking's order.
_SCORE_SCALE = 1.3


def _unit(raw: float) -> float:
    return round(min(1.0, max(0.0, raw / _SCORE_SCALE)), 4)


def _side_weights(div: Divergence, cues: Cues | None = None) -> dict[Side | None, float]:
    if cues is not None and cues.cross_device:
        # the CPU agrees with the default GPU: CPU code is out; device-generic code (structured meta,
        # TensorIterator set-up) still decides which device runs the kernel
        return {Side.CUDA: 1.0, Side.SHARED: 0.85, Side.CPU: 0.45, None: 0.2}
    other = Side.CPU if div.side == Side.CUDA else Side.CUDA
    return {div.side: 1.0, Side.SHARED: 0.82, other: 0.66 if div.confident else 0.78, None: 0.2}


# --------------------------------------------------------------------------------------------
# PyTorch


def torch_ops(
    issue: Issue, extraction: Extraction, yaml_names: set[str] | None, divergent_op: str | None
) -> tuple[list[OpRef], list[str]]:
    """The aten ops a report is about, weighted; and the API names that resolved to nothing."""
    title = _title_tokens(issue.title)
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
    apis = _api_list(extraction, "pytorch")
    real = 0
    for api in apis:
        if api.startswith(_TORCH_NAMESPACE_SKIP):
            continue
        leaf = api.replace("::", ".").split(".")[-1]
        names = torch_op_names(api)
        in_title = leaf not in _NEVER_SUBJECT and (
            leaf.strip("_").lower() in title or any(n.strip("_") in title for n in names)
        )
        incidental = leaf in _TORCH_INCIDENTAL and not in_title
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
            put(_dunder_free(names[0]) if names else leaf, base * 0.7, api + " (not in native_functions.yaml)")
    top_weight = max((o.weight for o in ops.values()), default=1.0)
    if top_weight < 0.5:  # only plumbing calls: the report is about one of them after all
        ops = {n: OpRef(n, o.weight * 0.9 / top_weight, o.origin) for n, o in ops.items()}
    context = " ".join([issue.title, issue.body, extraction.snippet.code if extraction.snippet else ""]).lower()
    modes = [m for m in ("bilinear", "bicubic", "trilinear", "nearest", "linear", "area") if m in context]
    if modes and any(n.startswith("upsample_") for n in ops):  # interpolate(mode=...) picks one kernel
        for name, op in list(ops.items()):
            if name.startswith("upsample_") and not any(name.startswith(f"upsample_{m}") for m in modes[:1]):
                ops[name] = OpRef(name, op.weight * 0.6, op.origin)
    if yaml_names is not None:  # ops named in the title though missing from the snippet ("arange cuda bug")
        for tok in title:
            if tok in yaml_names and tok not in ops and tok not in _ENGLISH and tok not in _TORCH_INCIDENTAL and (
                len(tok) >= 5 or "_" in tok
            ):
                put(tok, 0.8, f"{tok} named in the title")
    return sorted(ops.values(), key=lambda o: -o.weight), unknown


@dataclass
class _TorchContext:
    source: SourceProvider
    natives: dict[str, list[nat.NativeFunction]] | None
    index: nat.KernelIndex | None
    files: list[str]


# one index per live provider object (building it reads ~1-2k files); weak, so it dies with the provider
_INDEX_MEMO: weakref.WeakKeyDictionary[object, nat.KernelIndex] = weakref.WeakKeyDictionary()


_YAML_MEMO: weakref.WeakKeyDictionary[object, tuple[dict[str, list[nat.NativeFunction]] | None, str]] = (
    weakref.WeakKeyDictionary()
)


def _natives(source: SourceProvider) -> tuple[dict[str, list[nat.NativeFunction]] | None, str]:
    """The release's native_functions.yaml entries, or None and what is wrong with the file."""
    try:
        return _YAML_MEMO[source]
    except (KeyError, TypeError):
        pass
    text = source.read_text(nat.NATIVE_YAML)
    result: tuple[dict[str, list[nat.NativeFunction]] | None, str]
    if text is None:
        result = (None, f"{nat.NATIVE_YAML} is not in {source.description}")
    else:
        try:
            result = (_parse_natives_cached(source, text), "")
        except nat.NativeYamlError as exc:
            result = (None, str(exc))
    try:
        _YAML_MEMO[source] = result
    except TypeError:
        pass
    return result


def prepare_index(source: SourceProvider) -> int:
    """Build (and cache on disk, where the provider allows) the kernel index of a PyTorch tree; files indexed."""
    files = source.list_files()
    _natives(source)
    index = _kernel_index(source, files)
    return len(index.texts)


def _parse_natives_cached(source: SourceProvider, text: str) -> dict[str, list[nat.NativeFunction]]:
    """Parse the yaml, or load the entries parsed by an earlier process from the same text."""
    fn = getattr(source, "index_cache_path", None)
    disk = fn() if callable(fn) else None
    if not isinstance(disk, Path):
        return nat.parse_native_functions(text)
    cache = disk.with_name(disk.stem + "-natives.pickle")
    key = hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()
    try:
        with cache.open("rb") as fh:
            fmt, saved_key, natives = pickle.load(fh)  # noqa: S301 - our own cache file
        if fmt == _NATIVES_FORMAT and saved_key == key and isinstance(natives, dict):
            return natives
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError):
        pass
    natives = nat.parse_native_functions(text)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(cache.name + f".tmp{os.getpid()}")
        with tmp.open("wb") as fh:
            pickle.dump((_NATIVES_FORMAT, key, natives), fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, cache)
    except OSError:
        pass  # a cache: a read-only cache dir only costs time
    return natives


_NATIVES_FORMAT = "sftl-natives-1"


def _kernel_index(source: SourceProvider, files: list[str]) -> nat.KernelIndex:
    try:
        hit = _INDEX_MEMO.get(source)
    except TypeError:  # a provider that cannot be weakly referenced: no memo
        hit = None
    if hit is not None:
        return hit
    paths = nat.kernel_paths(files)
    cache_file = getattr(source, "index_cache_path", None)
    disk = cache_file() if callable(cache_file) else None
    disk = disk if isinstance(disk, Path) else None
    key = hashlib.sha1("\n".join(paths).encode() + str(getattr(source, "cached_file_count", int)()).encode())
    stamp = getattr(source, "manifest", None)
    if disk is not None and callable(stamp):  # a local tree: stale when any indexed file changed size or mtime
        key.update(str(stamp(paths)).encode())
    index = nat.KernelIndex.load(disk, key.hexdigest()) if disk is not None else None
    if index is None:
        index = nat.KernelIndex.from_source(source, paths)
        if disk is not None:
            index.save(disk, key.hexdigest())
    try:
        _INDEX_MEMO[source] = index
    except TypeError:
        pass
    return index


def _localize_pytorch(
    issue: Issue, extraction: Extraction, source: SourceProvider, method: str, top: int, divergent_op: str | None
) -> Localization:
    label = method
    files = source.list_files()
    natives, yaml_problem = _natives(source)
    if method == "paper":
        if natives is None:
            return Localization(label, (), Outcome.ABSTAINED, yaml_problem)
        return _paper_pytorch(issue, extraction, natives, files, top, divergent_op)

    kernel_files = nat.kernel_paths(files)
    if not any(f.endswith((".cpp", ".cu", ".cc", ".c")) for f in kernel_files):
        # a wheel ships ATen headers (torch/include) but no kernel sources: ranking headers alone misleads,
        # except an old release's TH/THC generic headers, which name the files defining the op (legacy.py)
        ops, _ = torch_ops(issue, extraction, set(natives) if natives else None, divergent_op)
        board = _Board()
        if any(legacy.library(f) for f in kernel_files) and legacy.add_evidence(
                ops, _kernel_index(source, files), source, natives, board.add):
            ranked = _rank(board, _side_weights(divergent_side(issue, extraction)), top, label, nat.path_side)
            return Localization(label, tuple(ranked), Outcome.LOCATED, f"ops: {', '.join(o.name for o in ops[:5])}; "
                                f"{legacy.HEADERS_ONLY}: {source.description}")
        return Localization(
            label, (), Outcome.SKIPPED,
            _no_kernels_reason(source, extraction),
        )
    index = _kernel_index(source, files)
    ops, unknown = torch_ops(issue, extraction, set(natives) if natives else None, divergent_op)
    div = divergent_side(issue, extraction)
    board = _Board()
    followed: set[str] = set()
    for op in ops:
        _follow_op(op.name, op.weight, op.origin, natives, index, board, followed, depth=0)
    # TH/THC-era releases: cwrap/nn.yaml/legacy dispatch -> THCTensor_(x) and its functors (legacy.py)
    legacy.add_evidence(ops, index, source, natives, board.add)
    _add_headers(index, board)
    cues = report_cues(issue, extraction)
    cue_notes = _apply_cues(cues, div, ops, index, board, _side_weights(div, cues))
    structural = bool(board.files)
    # back-off: TF-IDF over contents with the op names, their kernels, and the title's identifiers
    terms = [o.name for o in ops if o.weight > 0.3] + [_dunder_free(o.name) for o in ops if o.weight > 0.3]
    terms += [t for t in _title_tokens(issue.title) if t not in _ENGLISH and len(t) > 3]
    tfidf = index.tfidf(terms)
    if tfidf:
        best = max(tfidf.values())
        for path, s in sorted(tfidf.items(), key=lambda x: -x[1])[: max(top * 3, 30)]:
            board.add(path, 0.3 * s / best, f"{_TFIDF} over contents ({s / best:.2f} of best)")
    context = " ".join([issue.title, issue.body, *extraction.apis,
                        extraction.snippet.code if extraction.snippet else ""])
    # a newer stand-in tree over the report's own release: that release's binding of the op decides (legacy.py)
    era_notes = _prefer_report_release(ops, div, source, board, _side_weights(div, cues))
    suspects = _rank(board, _side_weights(div, cues), top, label, nat.path_side, context)
    notes = list(cue_notes) + era_notes
    if yaml_problem:
        notes.append(yaml_problem + "; dispatch kernels unknown")
    if unknown:
        notes.append("not in native_functions.yaml: " + ", ".join(unknown[:5]))
    if not suspects:
        why = "no operator of the report could be followed to a kernel" if not ops else "no kernel file found"
        return Localization(label, (), Outcome.ABSTAINED, "; ".join([why, *notes]))
    lead = div.why
    if not structural:
        lead = "no operator resolved to a kernel: TF-IDF back-off only; " + lead
        if not ops:  # nothing but title words: show the guesses, but do not claim a location
            return Localization(label, tuple(suspects), Outcome.ABSTAINED,
                                "; ".join(["no operator found in the report", lead, *notes]))
    opnames = ", ".join(o.name for o in ops[:5]) or "none"
    return Localization(label, tuple(suspects), Outcome.LOCATED, "; ".join([f"ops: {opnames}", lead, *notes]))


def _prefer_report_release(ops: list[OpRef], div: Divergence, source: SourceProvider, board: _Board,
                           weights: dict[Side | None, float]) -> list[str]:
    """Rank TH/THC evidence above native files only a newer layer holds, when the report's release bound the op to TH.

    Applies only to a source mixing releases (a registered newer tree over the report's wheel). The
    report-release layer's own headers say how each main op ran on the diverging device; when one ran
    in TH/THC there and none was already native, the newer layer's ATen/native files for that device
    (and device-generic ones) postdate the code the report ran: they go just below the best TH/THC
    file, order kept, and every moved file says why. Nothing moves when the headers show a native kernel,
    nor when the next release the source keeps (`successors`) already computes the op natively.
    """
    layers = legacy.report_layers(source)
    side = div.side
    if not layers or side not in (Side.CPU, Side.CUDA) or not ops:
        return []
    heaviest = max(o.weight for o in ops)
    known = [(o, b) for o in ops if o.weight >= 0.5 * heaviest
             if (b := legacy.release_binding(o.name, side, layers)) is not None]
    if not known:
        return []
    native = [b for _, b in known if b.kind == "native"]
    if native:
        return [native[0].note() + ": the newer tree's native kernels stand"]
    th = known[0][1]
    # the fix shipped in a later release: when the next release held already computes the op natively,
    # the port may predate the fix, and the report's binding no longer decides
    for successor in legacy.successor_layers(source):
        try:
            moved = [m for o, _ in known if (m := legacy.release_binding(o.name, side, [successor])) is not None]
        except SourceError:
            continue  # an unreadable later wheel only loses the op-history hint, never the localization
        if any(m.kind == "native" for m in moved):
            ported = next(m for m in moved if m.kind == "native")
            return [f"{th.note()}, but {ported.note()}: it may have been ported before the fix, "
                    "so the newer tree's native kernels stand"]
        if moved:
            break

    def effective(path: str) -> tuple[float, float, float]:  # (rank score, side weight, hits bonus) as _rank sees it
        ev = board.files[path]
        w = weights.get(ev.side or nat.path_side(path), 0.2)
        bonus = 0.02 * min(ev.hits - 1, 3)
        return ev.score * w + bonus, w, bonus

    # TH/THC files the op's bindings reached (a TF-IDF hit on a leftover THC header of the newer tree is none)
    th_files = [p for p, ev in board.files.items() if (lib := legacy.library(p)) is not None and lib[1] == side
                and any(not r.startswith(_TFIDF) for _, r in ev.reasons)]
    if not th_files:
        return [th.note() + "; no TH/THC file of the op was found to rank instead"]
    ceiling = max(effective(p)[0] for p in th_files)
    later: dict[str, str] = {}
    for path in board.files:
        if not path.startswith("aten/src/ATen/native/") or (board.files[path].side or nat.path_side(path)) not in (
                side, Side.SHARED):
            continue
        release = legacy.postdates_release(source, path)
        if release is not None:
            later[path] = release
    if not later:
        return []
    top_later = max(effective(p)[0] for p in later)
    shrink = min(1.0, 0.97 * ceiling / top_later) if top_later > 0 else 1.0
    for path, release in later.items():
        ev = board.files[path]
        eff, w, bonus = effective(path)
        if shrink < 1.0:
            ev.score = max(0.0, (eff * shrink - bonus) / max(w, 1e-6))
        short = path.removeprefix("aten/src/ATen/native/")
        _lead(ev, f"{th.note()}; the newer tree's ({release}) {short} postdates it")
    for path in th_files:
        _lead(board.files[path], th.note() + "; ranked above the newer tree's native kernels")
    return [f"{th.note()}: TH/THC evidence ranks above {len(later)} native file(s) only the newer tree holds"]


_TFIDF = "TF-IDF back-off"


def _lead(ev: _Evidence, reason: str) -> None:
    """Put a reason first in the file's explanation without changing its score (reasons sort by score, stably)."""
    ev.reasons.insert(0, (max((r[0] for r in ev.reasons), default=ev.score), reason))


_LAUNCHER = re.compile(r"kernel|launch|loop", re.I)
_OWN_NAN = re.compile(r"isnan\s*\(|\b(\w+)\s*!=\s*\1\b")
_LIFT = 1.05  # a cue-supported file ranks this much above the op's best kernel file


def _apply_cues(cues: Cues, div: Divergence, ops: list[OpRef], index: nat.KernelIndex, board: _Board,
                weights: dict[Side | None, float]) -> list[str]:
    """Move evidence along the op's path where the report's cues say the fault lies; notes for the reason."""

    def lift(path: str) -> float:  # evidence that ranks `path` just above the best kernel, after side weights
        ev = board.files[path]
        return best * _LIFT / max(weights.get(ev.side or nat.path_side(path), 0.2), 0.2)

    notes: list[str] = []
    if cues.cross_device:
        if _add_launch_path(index, board):
            notes.append(cues.cross_device + ": the op's math agrees on the default device, so its launch path "
                         "(launchers, device guards) ranks above the math")
        else:  # say so rather than let CPU/generic files pass for the answer
            notes.append(cues.cross_device + ", but the source shows no CUDA launch path of the op to rank")
        for ev in board.files.values():  # math cannot explain one GPU disagreeing with another
            if ev.reasons and all(" math" in r or "math)" in r for _, r in ev.reasons):
                ev.score *= 0.8
        return notes
    side = div.side
    best = max((ev.score for p, ev in board.files.items() if not p.endswith(_HEADERS) and
                (ev.side or nat.path_side(p)) == side), default=0.0)
    if best <= 0:
        return notes
    own = f"{side.value.upper()}-only math"
    if cues.value_dependent:
        lifted = [p for p, ev in board.files.items() if any(own in r for _, r in ev.reasons)]
        for path in lifted:
            # math only the diverging device runs: the one place a value-dependent divergence can come from
            board.add(path, lift(path), f"{own}, and {cues.value_dependent}", side=board.files[path].side)
        if lifted:
            notes.append(f"{cues.value_dependent}: {own} ranks above the kernel")
    if cues.nan and any(_COMPARING_OPS.search(o.name) for o in ops if o.weight >= 0.5):
        kernels = [p for p, ev in board.files.items() if not p.endswith(_HEADERS) and ev.score >= 0.75 * best
                   and (ev.side or nat.path_side(p)) == side]
        if kernels and not any(_OWN_NAN.search(index.texts.get(p, "")) for p in kernels):
            lifted = []
            for path, ev in list(board.files.items()):
                if path.endswith(_HEADERS) and nat.path_side(path) in (side, Side.SHARED) and \
                        any("math" in r and "used by" in r for _, r in ev.reasons) and \
                        _OWN_NAN.search(index.texts.get(path, "")):
                    board.add(path, lift(path), f"its comparison functors decide NaNs, and {cues.nan}",
                              side=ev.side)
                    lifted.append(path)
            if lifted:
                notes.append(f"{cues.nan}: the kernel writes no NaN comparison of its own, so the functors it "
                             "uses rank first")
    return notes


def _add_launch_path(index: nat.KernelIndex, board: _Board) -> bool:
    """Credit the CUDA launcher headers the op's CUDA kernels call (gpu_kernel_with_scalars in Loops.cuh,
    gpu_reduce_kernel in Reduce.cuh), and the launchers those call in turn (gpu_kernel_impl in CUDALoops.cuh)."""
    kernels = sorted(((p, ev.score) for p, ev in board.files.items()
                      if nat.path_side(p) == Side.CUDA and not p.endswith(_HEADERS)), key=lambda x: -x[1])
    if not kernels:
        return False
    best = kernels[0][1]
    kernels = [(p, sc) for p, sc in kernels if sc >= 0.5 * best][:6]
    # header -> [(launcher, kernel file, its score, call sites)]
    direct: dict[str, list[tuple[str, str, float, int]]] = defaultdict(list)
    deep: dict[str, list[tuple[str, str]]] = defaultdict(list)  # header -> [(launcher, caller)]
    for path, score in kernels:
        texts = [b for _, b in board.bodies.get(path, ())]
        for attempt in (texts, [index.texts.get(path, "")]):  # the op's kernel bodies, else its whole file
            found = False
            for name in dict.fromkeys(m.group(1) for t in attempt for m in _CALL_T.finditer(t[:30000])):
                d = _launcher_def(name, path, index)
                if d is None:
                    continue
                found = True
                calls = sum(len(re.findall(r"\b" + re.escape(name) + r"\s*[<(]", t)) for t in attempt)
                direct[d.path].append((name, path, score, calls))
                todo, seen = [(name, d)], {name}
                while todo and len(seen) < 12:  # through same-header wrappers to the launch in another header
                    outer, od = todo.pop()
                    for inner in dict.fromkeys(m.group(1) for m in _CALL_T.finditer(od.body[:20000])):
                        if inner in seen:
                            continue
                        seen.add(inner)
                        same = index.definition_in(inner, od.path) if _LAUNCHER.search(inner) else None
                        dd = same or _launcher_def(inner, od.path, index)
                        if dd is None or dd.path == path:
                            continue
                        if dd.path == d.path:
                            todo.append((inner, dd))
                        else:
                            deep[dd.path].append((inner, outer))
            if found:
                break
    for header, uses in direct.items():
        # the header most of the op's kernels and call sites go through leads (gpu_kernel over the
        # jiterator's alternative of one kernel)
        top = max(sc for _, _, sc, _ in uses)
        files = list(dict.fromkeys(f.rsplit("/", 1)[-1] for _, f, _, _ in uses))
        names = list(dict.fromkeys(n for n, _, _, _ in uses))
        calls = sum(c for _, _, _, c in uses)
        board.add(header, top * (_LIFT + 0.03) + 0.01 * min(len(files) - 1, 3) + 0.005 * min(calls - 1, 4),
                  f"defines {', '.join(names[:3])}, the launcher {', '.join(files[:3])} call", side=Side.CUDA)
    for header, inner_uses in deep.items():
        if header in direct:
            continue
        names = list(dict.fromkeys(n for n, _ in inner_uses))
        callers = list(dict.fromkeys(c for _, c in inner_uses))
        board.add(header, best * _LIFT, f"defines {', '.join(names[:3])}, called by the launcher "
                  f"{', '.join(callers[:3])}", side=Side.CUDA)
    return bool(direct)


def _launcher_def(name: str, caller_path: str, index: nat.KernelIndex) -> nat.Definition | None:
    """The CUDA header defining a launcher-like function (`*kernel*`, `launch*`, `*loop*`), if one does."""
    if len(name) < 6 or not _LAUNCHER.search(name) or name.isupper() or name.startswith(("C10_", "AT_", "TORCH_")):
        return None
    if index.definition_in(name, caller_path) is not None:
        return None  # the kernel file's own helper
    defs = [d for d in index.definitions(name, limit=4, tensorish=False)
            if d.path.endswith(_HEADERS) and nat.path_side(d.path) == Side.CUDA]
    if not defs or len({d.path for d in defs}) > 2:
        return None
    return defs[0]


def _no_kernels_reason(source: SourceProvider, extraction: Extraction) -> str:
    """Why a source without kernel files cannot be ranked, and the commands that fix it, for this release."""
    version = extraction.environment.version or getattr(source, "version", None)
    release = (version or "VERSION").split("+", 1)[0]
    spec = f"pytorch=={release}"
    return (
        f"{source.description} holds no ATen C++/CUDA kernel sources (wheels carry headers only), so no kernel "
        f"file can be ranked; to get them: `sftl sources fetch {spec} --cxx` (online, once; GitHub API), or "
        f"`sftl sources add {spec} DIR` for a PyTorch checkout or unpacked source package (a tree of a nearby "
        "release also serves), or `--source-root DIR` for this run"
    )


_FOLLOW_SKIP = _TORCH_INCIDENTAL | {"resize_", "resize_output", "empty_strided", "new_empty", "is_same_size",
                                    "copy", "select", "narrow", "as_strided", "alias", "result_type", "sizes",
                                    "scalar_type", "options", "is_contiguous", "sum", "mul", "add", "sub", "div",
                                    "_unsafe_view", "expect_contiguous", "defined", "numel", "dim"}


_GUESS = "guessed"


def _entries(natives: dict[str, list[nat.NativeFunction]] | None, name: str) -> list[nat.NativeFunction]:
    if natives is None:
        return []
    out = list(natives.get(name, ()))
    for extra in (name + "_out", name + "_"):
        if extra in natives and not name.endswith("_"):
            out.extend(natives[extra])
    return out


def _follow_op(
    name: str, weight: float, origin: str, natives: dict[str, list[nat.NativeFunction]] | None,
    index: nat.KernelIndex, board: _Board, followed: set[str], depth: int,
) -> None:
    """Add evidence for every file that defines or registers a kernel of this op."""
    key = name
    if key in followed or depth > 3 or weight < 0.05:
        return
    followed.add(key)
    kernels: dict[str, set[str]] = defaultdict(set)  # kernel function -> dispatch keys
    for entry in _entries(natives, name):
        dispatch = dict(entry.dispatch)
        if entry.structured_delegate and natives:
            dname, _, dover = entry.structured_delegate.partition(".")
            for target in natives.get(dname, ()):
                if target.overload == dover:
                    dispatch.update({k: v for k, v in target.dispatch.items() if k not in dispatch})
        if not dispatch:  # no dispatch section: CompositeImplicitAutograd, implemented as at::native::<name>
            kernels[entry.name].add("CompositeImplicitAutograd")
        for dkey, kernel in dispatch.items():
            if nat.dispatch_side(dkey) is not None:
                kernels[kernel].add(dkey)
    if not kernels:  # no yaml, or an op it does not list: the op name itself and its usual kernel spellings
        for guess in (name, f"{name}_cpu", f"{name}_cuda", f"{name}_out", f"{name}_kernel", f"{name}_kernel_cuda"):
            kernels[guess].add(_GUESS)
    for kernel, dkeys in kernels.items():
        dense = any(nat.is_dense_key(k) for k in dkeys) or _GUESS in dkeys
        kw = weight * (1.0 if dense else 0.35) * (0.8 if _GUESS in dkeys else 1.0)
        keys = "no dispatch entry; name guessed" if _GUESS in dkeys else "dispatch " + ", ".join(sorted(dkeys))
        composite = all(nat.dispatch_side(k) == Side.SHARED for k in dkeys)
        defs = index.definitions(kernel)
        for d in defs:
            fside = nat.path_side(d.path)
            role = (0.55 if composite else 0.8) if fside == Side.SHARED else 1.0
            board.add(d.path, kw * role, f"defines {kernel} ({keys}) for {name} [{origin}]")
            board.body(d.path, kernel, d.body)
            bodies = [(kernel, d.body)]
            for helper in nat.local_calls(d.body)[:40]:  # same-file helpers: std -> std_var_out -> std_var_stub
                if helper in index.registrations or helper == kernel or len(helper) < 4:
                    continue
                hd = index.definition_in(helper, d.path)
                if hd is not None:
                    bodies.append((helper, hd.body))
                if len(bodies) > 6:
                    break
            for caller, body in bodies:
                for stub in nat.stub_calls(body, index.registrations):
                    for reg_path, fn in index.registrations.get(stub, ()):
                        board.add(reg_path, kw * 0.97, f"REGISTER_DISPATCH({stub}, {fn}) called from {caller} for {name}")
                        _follow_helpers(fn, reg_path, kw * 0.9, index, board)
            if composite or fside == Side.SHARED:
                for called in nat.op_calls(d.body)[:16]:
                    called = _op_name(called, natives)
                    if called in _FOLLOW_SKIP or called == name or (natives and called not in natives):
                        continue
                    _follow_op(called, weight * 0.85, f"{name} calls {called}", natives, index, board, followed,
                               depth + 1)
            if fside in (Side.CPU, Side.CUDA):  # cuda/Activation.cpp gelu_out_cuda -> GeluCUDAKernelImpl
                _follow_cross_file(kernel, d, fside, kw * 0.92, index, board)
                _follow_math(kernel, d, kw * 0.85, index, board)
        if not defs:
            for path in index.mentions(kernel, limit=6):
                board.add(path, kw * 0.5, f"names {kernel} ({keys}) for {name}, maybe macro-generated")
    # stubs named after the op (e.g. histc -> histogramdd_stub is found above; add_stub, rshift_stub directly)
    base = _dunder_free(name).rstrip("_")
    for stub in dict.fromkeys((f"{base}_stub", f"{name.rstrip('_')}_stub")):
        for reg_path, fn in index.registrations.get(stub, ()):
            board.add(reg_path, weight * 0.85, f"REGISTER_DISPATCH({stub}, {fn}) for {name}")
            _follow_helpers(fn, reg_path, weight * 0.8, index, board)
    if len(base) >= 4:  # bernoulli -> bernoulli_tensor_stub, bernoulli_scalar_stub
        for stub in index.registrations:
            if stub.startswith(base + "_") and stub.endswith("_stub") and stub != f"{base}_stub":
                for reg_path, fn in index.registrations[stub]:
                    board.add(reg_path, weight * 0.75, f"REGISTER_DISPATCH({stub}, {fn}) named after {name}")


_HELPER = re.compile(r"\b(\w*(?:kernel|launch|template)\w*)\s*(?:<[^;(){}]*>)?\s*\(")


def _follow_helpers(fn: str, reg_path: str, score: float, index: nat.KernelIndex, board: _Board) -> None:
    """A registered stub function often forwards to a launcher in another file (max_all_launch_kernel)."""
    if not fn:
        return
    reg_side = nat.path_side(reg_path)
    opposite = {Side.CPU: Side.CUDA, Side.CUDA: Side.CPU}.get(reg_side) if reg_side is not None else None
    # defined beside its registration, else elsewhere, but never on the other device (a CPU kernel
    # is not cuda/Math.cuh's same-named jiterator function)
    defs = [d for d in index.definitions(fn, limit=4, tensorish=False) if d.path == reg_path] or [
        d for d in index.definitions(fn, limit=2, tensorish=False) if nat.path_side(d.path) != opposite
    ]
    for d in defs[:1]:
        board.body(d.path, fn, d.body)
        if d.path != reg_path:
            board.add(d.path, score, f"defines {fn}, registered in {reg_path.rsplit('/', 1)[-1]}")
        _follow_math(fn, d, score * 0.95, index, board)
        body = _without_jiterator_fallback(d.body[:20000]) if reg_side == Side.CUDA else d.body[:20000]
        helpers = list(dict.fromkeys(m.group(1) for m in _HELPER.finditer(body)))
        for helper in helpers[:6]:
            if helper == fn or helper.startswith(("C10_", "AT_", "TORCH_", "TORCH")):
                continue
            for hd in index.definitions(helper, limit=3, tensorish=False):
                if hd.path != d.path and nat.path_side(hd.path) == nat.path_side(reg_path):
                    board.add(hd.path, score * 0.95, f"defines {helper}, called by {fn}")
                    # a device source's helper (norm_launch_kernel -> NormOps), not a launcher header's internals
                    if nat.path_side(hd.path) in (Side.CPU, Side.CUDA) and not hd.path.endswith(_HEADERS):
                        _follow_math(helper, hd, score * 0.9, index, board)


_HEADERS = (".h", ".cuh", ".hpp")
_CALL_T = re.compile(r"\b([A-Za-z_]\w*)\s*(?:<[^;(){}]*>)?\s*\(")
# symbols named like launchers/plumbing are followed elsewhere (or not at all): not "the math"
_NOT_MATH = re.compile(r"kernel|launch|loop|dispatch|stub|impl|template|^(?:TORCH|AT|C10|CUDA|HIP)_|_t$|^std$", re.I)
_MATH_RARE = 8  # a symbol in more kernel files than this is shared plumbing, not one op's math


def _follow_math(caller: str, d: nat.Definition, score: float, index: nat.KernelIndex, board: _Board) -> None:
    """The headers defining the math a device kernel runs: its functor/lambda's calc_*/jiterator strings/ops structs.

    A fix to a numerical divergence often lands where the math is written (cuda/Math.cuh's
    calc_digamma, SharedReduceOps.h's WelfordOps), not in the file that registers the kernel. Reads
    the kernel's body and its same-file helpers, keeps the rare identifiers (few kernel files name
    them), and credits the headers the kernel file includes (directly or one level down) that define
    them. A header on the kernel's own device counts more than a device-generic one (Math.h), whose
    math the other device runs too.
    """
    bodies = [d.body[:20000]]
    text = index.texts.get(d.path, "")
    for helper in dict.fromkeys(m.group(1) for m in _CALL_T.finditer(d.body[:20000])):  # -> norm_kernel_cuda_impl<T>(
        if helper != caller and len(helper) >= 4 and not helper.isupper() and text.count(helper) > 1:
            hd = index.definition_in(helper, d.path)
            if hd is not None and hd.start != d.start:
                bodies.append(hd.body[:20000])
        if len(bodies) > 6:
            break
    headers = [h for h in index.includes.get(d.path, ()) if h.endswith(_HEADERS)]
    for h in list(headers):
        headers += [g for g in index.includes.get(h, ()) if g.endswith(_HEADERS) and g not in headers]
    kside = nat.path_side(d.path)
    other = {Side.CPU: Side.CUDA, Side.CUDA: Side.CPU}.get(kside) if kside is not None else None
    if kside == Side.CUDA:  # what default CUDA builds run: not the `#else` of `#if AT_USE_JITERATOR()`
        bodies = [_without_jiterator_fallback(b) for b in bodies]
    symbols = list(dict.fromkeys(tok for body in bodies for tok in nat.identifiers(body)))
    found: dict[str, list[str]] = defaultdict(list)
    for sym in symbols:
        if len(sym) < 4 or _NOT_MATH.search(sym) or sym.isupper() or sym == caller or sym in index.registrations:
            continue
        holders = index.files_with(sym)
        if not holders or len(holders) > _MATH_RARE:
            continue
        definers = [h for h in holders if h.endswith(_HEADERS) and h != d.path and nat.path_side(h) != other
                    and index.defines(h, sym)]
        included = [h for h in definers if h in headers]
        # the kernel file's own includes first; else (reached through a header outside ATen/native, e.g.
        # ATen/cpu/vec/vec.h -> Math.h) the one or two headers that define it
        for header in included or (definers if len(definers) <= 2 else []):
            found[header].append(sym)
    device = kside if kside in (Side.CPU, Side.CUDA) else None
    for header, syms in found.items():
        hside = nat.path_side(header)
        if device is not None and hside == Side.SHARED:
            # a device-generic header's version is shadowed where the kernel's own device defines the name
            # (cuda/Math.cuh's calc_digamma for a CUDA kernel), and is host-only math when only the CUDA
            # side has its own (Math.h's calc_digamma for a CPU kernel)
            syms = [s for s in syms if not any(h != header and nat.path_side(h) == device for h in _definers(found, s))]
            if not syms:
                continue
            host_only = device == Side.CPU and all(
                _defined_on(index, s, Side.CUDA) or _cuda_fallback_only(index, s) for s in syms)
        else:
            host_only = False
        same = device is not None and (hside == device or host_only)
        where = f"{device.value.upper()}-only math" if same and device is not None else "math"
        board.add(header, score * (1.0 if same else 0.85) + 0.01 * min(len(syms) - 1, 3),
                  f"defines {', '.join(syms[:3])} ({where}) used by {caller} in {d.path.rsplit('/', 1)[-1]}",
                  side=device if host_only else None)


_PP = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif)\b(.*)$", re.M)


def _jiterator_fallbacks(text: str) -> list[tuple[int, int]]:
    """Spans of the `#else` branches of `#if AT_USE_JITERATOR()` blocks: code CUDA builds run only
    without the jiterator (ROCm, old toolkits), so not the math a default CUDA build runs."""
    spans: list[tuple[int, int]] = []
    stack: list[list[object]] = []  # [is the jiterator test, start of its #else]
    for m in _PP.finditer(text):
        kw = m.group(1)
        if kw.startswith("if"):
            stack.append([kw == "if" and "AT_USE_JITERATOR" in m.group(2), None])
        elif kw in ("else", "elif") and stack:
            if stack[-1][0] and stack[-1][1] is None:
                stack[-1][1] = m.end()
        elif kw == "endif" and stack:
            is_jit, start = stack.pop()
            if is_jit and isinstance(start, int):
                spans.append((start, m.start()))
    return spans


def _without_jiterator_fallback(body: str) -> str:
    if "AT_USE_JITERATOR" not in body:
        return body
    for start, end in sorted(_jiterator_fallbacks(body), reverse=True):
        body = body[:start] + body[end:]
    return body


def _cuda_fallback_only(index: nat.KernelIndex, sym: str) -> bool:
    """Whether every CUDA kernel file naming `sym` names it only in a jiterator fallback branch
    (calc_i0e in UnarySpecialOpsKernel.cu, whose default path runs i0e_string)."""
    users = [p for p in index.files_with(sym) if nat.path_side(p) == Side.CUDA and not p.endswith(_HEADERS)]
    if not users:
        return False
    pattern = re.compile(r"\b" + re.escape(sym) + r"\b")
    for path in users:
        text = index.texts.get(path, "")
        spans = _jiterator_fallbacks(text) if "AT_USE_JITERATOR" in text else []
        for m in pattern.finditer(text):
            line = text[text.rfind("\n", 0, m.start()) + 1 : m.start()]
            if line.count('"') % 2 or line.lstrip().startswith("//"):
                continue  # a string (the jiterator's kernel name "calc_i0e") or a comment: not a call
            if not any(a <= m.start() < b for a, b in spans):
                return False
    return True


def _definers(found: dict[str, list[str]], sym: str) -> list[str]:
    return [h for h, syms in found.items() if sym in syms]


def _defined_on(index: nat.KernelIndex, sym: str, side: Side) -> bool:
    """Whether some file of that device defines the symbol too (its own version of the math)."""
    return any(nat.path_side(p) == side and index.defines(p, sym) for p in index.files_with(sym))


def _op_name(called: str, natives: dict[str, list[nat.NativeFunction]] | None) -> str:
    """at::nll_loss_forward_symint / at::foo_out -> the op they belong to."""
    if not natives or called in natives:
        return called
    for suffix in ("_symint", "_outf", "_out"):
        if called.endswith(suffix) and called[: -len(suffix)] in natives:
            return called[: -len(suffix)]
    return called


def _follow_cross_file(
    kernel: str, d: nat.Definition, side: Side, score: float, index: nat.KernelIndex, board: _Board
) -> None:
    """A device kernel calling a same-device function defined in another file."""
    for helper in nat.local_calls(d.body)[:30]:
        if len(helper) < 6 or helper in index.registrations or helper.startswith(("TORCH_", "AT_", "C10_")):
            continue
        if len(index.files_with(helper)) > 40:
            continue  # a name used all over (empty_like, launch_kernel) is not this kernel's helper
        defs = index.definitions(helper, limit=4, tensorish=False)
        if not defs or len(defs) > 3:
            continue  # undefined here, or a common name defined all over
        for hd in defs:
            if hd.path != d.path and nat.path_side(hd.path) == side:
                board.add(hd.path, score, f"defines {helper}, called by {kernel}")


def _add_headers(index: nat.KernelIndex, board: _Board) -> None:
    """Shared headers (Loops.cuh, Reduce.cuh, THCNumerics.cuh) included by the suspect kernel files."""
    parents = sorted(board.files.items(), key=lambda kv: -kv[1].score)[:12]
    header_hits: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for path, ev in parents:
        for inc in index.includes.get(path, ()):
            if inc.endswith((".cuh", ".h", ".hpp")) and inc.startswith(nat.KERNEL_DIRS):
                header_hits[inc].append((ev.score, path))
    for header, hits in header_hits.items():
        best = max(s for s, _ in hits)
        score = min(0.7, 0.42 * best + 0.06 * (len(hits) - 1))
        names = ", ".join(p.rsplit("/", 1)[-1] for _, p in hits[:3])
        board.add(header, score, f"header included by {names}")


def _paper_pytorch(
    issue: Issue, extraction: Extraction, natives: dict[str, list[nat.NativeFunction]], files: list[str],
    top: int, divergent_op: str | None,
) -> Localization:
    """The published method: dispatch kernel names fuzzy-matched against kernel file names."""
    label = "paper"
    ops, unknown = torch_ops(issue, extraction, set(natives), divergent_op)
    # the paper takes the snippet's operators as they are: no title, no incidental filtering
    ops = [o for o in ops if "named in the title" not in o.origin or o.weight >= 0.9]
    if not ops:
        why = "no operator of the snippet is in native_functions.yaml"
        return Localization(label, (), Outcome.ABSTAINED, why + (": " + ", ".join(unknown[:5]) if unknown else ""))
    dirs = {"aten/src/ATen/native/cpu/": Side.CPU, "aten/src/ATen/native/cuda/": Side.CUDA,
            "aten/src/ATen/native/": Side.SHARED}
    names: dict[str, list[str]] = defaultdict(list)  # file stem -> paths
    for path in files:
        folder, _, base = path.rpartition("/")
        if folder + "/" in dirs and "." in base:
            names[base.split(".")[0]].append(path)
    board = _Board()
    for op in ops:
        for entry in natives.get(op.name, ()):
            for dkey, kernel in entry.dispatch.items():
                if dkey not in ("CPU", "CUDA"):
                    continue
                for predicted in (kernel, _camel(kernel)):
                    for match in difflib.get_close_matches(predicted, list(names), n=3, cutoff=0.6):
                        ratio = difflib.SequenceMatcher(None, predicted, match).ratio()
                        for path in names[match]:
                            board.add(path, ratio * op.weight,
                                      f"name {match!r} ~ predicted {predicted!r} ({dkey}: {kernel}) ratio {ratio:.2f}")
    if not board.files:
        return Localization(label, (), Outcome.ABSTAINED,
                            "no kernel file name is close to the dispatch kernels of " + ", ".join(o.name for o in ops))
    suspects = _rank(board, {Side.CPU: 1.0, Side.CUDA: 1.0, Side.SHARED: 1.0}, top, label, nat.path_side)
    return Localization(label, tuple(suspects), Outcome.LOCATED, "ops: " + ", ".join(o.name for o in ops[:5]))


def _camel(kernel: str) -> str:
    """histogram_histc_cuda -> HistogramHistc: the file name a kernel would have by convention."""
    parts = [p for p in kernel.split("_") if p and p not in ("cuda", "cpu", "out", "kernel", "impl", "template")]
    return "".join(p[:1].upper() + p[1:] for p in parts)


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
_GEN_CALL = re.compile(r"\bgen_\w+_ops\.(\w+)\s*\(")


def tf_raw_ops(api: str, source: SourceProvider | None = None) -> tuple[str, ...]:
    """'tensorflow.math.reduce_mean' -> ('Mean',): the raw op(s) the API call runs."""
    api = api.replace("tf.", "tensorflow.", 1) if api.startswith("tf.") else api
    parts = [p for p in api.split(".") if p]
    if not parts:
        return ()
    leaf = parts[-1]
    if leaf[:1].isupper() and len(parts) >= 2 and parts[-2] in ("raw_ops",):
        return (leaf,)
    snake = _snake(leaf) if leaf[:1].isupper() else leaf
    if snake in _TF_OPS:
        return _TF_OPS[snake]
    base = snake[len("reduce_"):] if snake.startswith("reduce_") else snake
    if source is not None:
        found = _tf_ops_from_python(api, source)
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
        pos = text.find(marker)
        m = re.compile(r"\n(?:@[^\n]*\n)*def \w+\(").search(text, pos)
        if m is None:
            continue
        end = re.compile(r"\n(?:@|def |class )").search(text, m.end())
        body = text[m.end(): end.start() if end else len(text)]
        calls = list(dict.fromkeys(c.group(1) for c in _GEN_CALL.finditer(body)))
        if calls:
            # the op named like the API first: matrix_transpose calls range() before transpose()
            leaf = exported.rsplit(".", 1)[-1]
            calls.sort(key=lambda c: -difflib.SequenceMatcher(None, c, leaf).ratio())
            generated = _tf_gen_ops(source)
            return tuple(generated.get(c) or "".join(p[:1].upper() + p[1:] for p in c.split("_")) for c in calls)
    return ()


_GEN_OP = re.compile(r'(?:_apply_op_helper\(\s*|execute\(\s*b|FastPathExecute\(\s*_ctx,\s*)"(\w+)"')


def _tf_gen_ops(source: SourceProvider) -> dict[str, str]:
    """Python function name -> raw op name, read from the generated `gen_*_ops.py` wrappers."""
    out: dict[str, str] = {}
    for path in source.list_files():
        base = path.rsplit("/", 1)[-1]
        if not (path.startswith("tensorflow/python/ops/") and base.startswith("gen_") and base.endswith(".py")):
            continue
        text = source.read_text(path) or ""
        for chunk in text.split("\ndef ")[1:]:
            fname = chunk.split("(", 1)[0].strip()
            m = _GEN_OP.search(chunk)
            if m and fname and not fname.endswith("_eager_fallback"):
                out.setdefault(fname, m.group(1))
    return out


_TF_KERNEL_DIR = "tensorflow/core/kernels/"


def _localize_tensorflow(
    issue: Issue, extraction: Extraction, source: SourceProvider, method: str, top: int, divergent_op: str | None
) -> Localization:
    label = method
    title = _title_tokens(issue.title)
    ops: dict[str, OpRef] = {}
    for api in ([divergent_op] if divergent_op else []) + _api_list(extraction, "tensorflow"):
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
    board = _Board()
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
    if not registered and not inferred:
        _tf_names(ordered, files, board, fuzzy_only=method == "paper")
    if not board.files:
        return Localization(label, (), Outcome.ABSTAINED,
                            f"no kernel file for {', '.join(o.name for o in ordered[:5])} in {source.description}")
    weights: dict[Side | None, float] = (_side_weights(div, cues if inferred else None) if method == "sftl"
                                         else {s: 1.0 for s in Side})
    suspects = _rank(board, weights, top, label, _tf_side)
    how = "REGISTER_KERNEL_BUILDER in contents" if registered and not inferred else (
        "kernel headers only: implementation files inferred from the headers declaring the op's functor or named after it"
        if inferred else "kernel file names (no registration found in the contents)" if texts
        else "kernel file names (no C++ contents in the source)")
    return Localization(label, tuple(suspects), Outcome.LOCATED,
                        f"ops: {', '.join(o.name for o in ordered[:5])}; {how}; {div.why}")


def _tf_side(path: str) -> Side | None:
    base = path.rsplit("/", 1)[-1]
    if ".cu." in base or base.endswith((".cu", ".cuh")) or "_gpu" in base or "gpu_" in base or "/gpu/" in path:
        return Side.CUDA
    if path.startswith(_TF_KERNEL_DIR):
        return Side.SHARED
    return Side.PYTHON if path.endswith(".py") else Side.SHARED


def _tf_registrations(ops: list[OpRef], texts: dict[str, str], board: _Board) -> None:
    for op in ops:
        builder = re.compile(r'Name\(\s*"' + re.escape(op.name) + r'"\s*\)')
        cwise = re.compile(r'REGISTER\d*\(\s*\w+\s*,\s*(CPU|GPU)\s*,\s*"' + re.escape(op.name) + r'"')
        for path, text in texts.items():
            if f'"{op.name}"' not in text:
                continue
            devices = set()
            for m in builder.finditer(text):
                window = text[m.end(): m.end() + 200]
                dm = re.search(r"DEVICE_(CPU|GPU)", window)
                devices.add(dm.group(1) if dm else "?")
            devices.update(m.group(1) for m in cwise.finditer(text))
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
                for comp in companions:
                    if comp in texts and comp != path:
                        board.add(comp, op.weight * 0.95, f"GPU implementation beside {base} for {op.name}")


def _tf_names(ops: list[OpRef], files: list[str], board: _Board, fuzzy_only: bool) -> None:
    """Without contents: x_op.cc, x_op_gpu.cu.cc, cwise_op_x.cc, fuzzy-matched against the listing."""
    stems: dict[str, list[str]] = defaultdict(list)
    for path in files:
        stems[path.rsplit("/", 1)[-1].split(".")[0]].append(path)
    for op in ops:
        snake = _snake(op.name)
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
    snake = _snake(base)
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


def _tf_inferred(header: str, op: str, functor: str) -> list[tuple[str, Side | None]]:
    """The implementation files TensorFlow's layout puts beside a declaring header, with their side."""
    folder, stem = header.rsplit("/", 1)[0] + "/", _tf_stem(header)
    if stem == "cwise_ops":  # cwise_op_floor_div.cc, cwise_op_gpu_floor_div.cu.cc; only through a functor's name
        return [(f"{folder}cwise_op_gpu_{functor}.cu.cc", Side.CUDA),
                (f"{folder}cwise_op_{functor}.cc", Side.SHARED)] if functor else []
    if stem == "reduction_ops":  # one .cc per reduction (reduction_ops_mean.cc); GPU files go by dtype
        return [(f"{folder}reduction_ops_{_snake(op)}.cc", Side.SHARED)]
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


def _tf_headers(ops: list[OpRef], texts: dict[str, str], known: set[str], board: _Board, cues: Cues) -> bool:
    """Rank the headers declaring each op's functor and the implementation files they name by convention."""
    found = False
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
            for path, side in _tf_inferred(header, op.name, functor):
                if path in known or (side is Side.CUDA and gpu_in_header):
                    continue  # listed, so not inferred (never the case in a wheel); or registered in a header
                score = w if side is Side.CUDA else w * 0.97
                board.add(path, score, f"{_INFERRED.format(h=header)} ({name}: {why}) [{op.origin}]", side)
            comps = [c for c in _tf_gpu_companions(header, texts)
                     if "grad" not in c.rsplit("/", 1)[-1] or "Grad" in op.name]  # backward headers: not a forward op's
            for comp in comps:
                board.add(comp, w * 0.96, f"GPU-side header beside {name} for {op.name}", Side.CUDA)
            if cues.nan and _COMPARING_OPS.search(_snake(op.name)):
                # the headers whose code handles NaN (isnan, x != x, a NaN-propagating functor) hold the comparison
                for path in [header, *comps]:
                    if _OWN_NAN.search(texts[path]) or "NaN" in texts[path]:
                        board.add(path, w * _LIFT, f"{cues.nan}: {path.rsplit('/', 1)[-1]} handles NaN for {op.name}",
                                  Side.CUDA if path in comps else None)
            elif cues.value_dependent and functor:
                board.add(header, w * _LIFT, f"{cues.value_dependent}: the math is the functor in {name}")
    return found
