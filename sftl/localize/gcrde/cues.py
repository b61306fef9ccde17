"""What the report text says: which device diverged, and cross-device, value-dependent and NaN cues."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sftl.model import Extraction, Issue, Side
from sftl.screen.one_device import CUDA_FAILURE

if TYPE_CHECKING:
    pass

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
# a word saying one device is right, not inside a negation ("incorrect", "doesn't work", "not fine")
_OK_WORD = (r"(?<![\w'])(?<!not )(?<!n't )(?<!never )(?<!no longer )"
            r"(?:works?|correct|fine|ok|right|as expected)\b")
_GPU_OK = re.compile(
    _OK_WORD + r"(?:(?!cpu|gpu|cuda|but |while )[^.,;\n]){0,30}\b(?:on|with|for|in)\s+(?:the\s+)?(?:cuda|gpu)"
    r"|(?:cuda|gpu)(?:(?!cpu|gpu|cuda|but |while )[^.,;\n]){0,25}(?:works?|is (?:correct|fine|ok|right)|as expected)",
    re.I,
)
_CPU_OK = re.compile(
    _OK_WORD + r"(?:(?!cpu|gpu|cuda|but |while )[^.,;\n]){0,30}\b(?:on|with|for|in)\s+(?:the\s+)?cpu"
    r"|\bcpu\b(?:(?!cpu|gpu|cuda|but |while )[^.,;\n]){0,25}(?:works?|is (?:correct|fine|ok|right)|as expected)",
    re.I,
)
# one device named as the only one it happens on: "repros on cuda but not cpu", "with CUDA (but not CPU) this crashes",
# "exclusive to CUDA tensors", "only on the GPU"; and "On CPU, the output was correct"
_DEV = {"gpu": r"(?:cuda|gpu)", "cpu": r"cpu"}
_ONLY_ON = {
    side: re.compile(
        rf"\b{dev}\b(?:\s+tensors?)?\s*\(?\s*,?\s*but not\s+(?:on\s+|with\s+|for\s+)?(?:the\s+)?{other}\b"
        rf"|exclusive to (?:the )?{dev}\b|\bonly (?:happens |occurs |fails |repros |reproduces )?(?:on|with) (?:the )?{dev}\b"
        rf"|\bon (?:the )?{other},? the (?:output|result)s? (?:was|were|is|are) (?:correct|fine|right|as expected)",
        re.I)
    for side, dev, other in (("gpu", _DEV["gpu"], _DEV["cpu"]), ("cpu", _DEV["cpu"], _DEV["gpu"]))
}
_ONLY_VOTES = 2.0
_OK_BEFORE = re.compile(r"\b(?:works?|fine|correct|ok|right|as expected|passes)\b[^.;\n]{0,25}$", re.I)


def _only_on(text: str) -> tuple[float, float]:
    """Votes (gpu, cpu) from one device named as the only one a fault shows on; 'works on CPU but not CUDA' is the
    other device's fault."""
    votes = {"gpu": 0.0, "cpu": 0.0}
    for side, other in (("gpu", "cpu"), ("cpu", "gpu")):
        for m in _ONLY_ON[side].finditer(text):
            works = bool(_OK_BEFORE.search(text[max(0, m.start() - 40):m.start()]))
            votes[other if works else side] += _ONLY_VOTES
    return votes["gpu"], votes["cpu"]


_CLAUSES = re.compile(r"(?<=[.!?;,])\s+|\n|\s+(?:but|while|whereas|although)\s+", re.I)


@dataclass(frozen=True)
class Divergence:
    side: Side  # the side whose result the report calls wrong
    confident: bool
    why: str
    stated: bool = True  # False: the report does not say, CUDA is a default


_TITLE_DEVICE = 1.5  # a title naming one device only
_FAILING_DEVICE = 2.0  # CUDA raising a memory, launch or index error
_CPU_FAILS = re.compile(r"\bcpu\b[^.;\n]{0,40}(?:crash|segfault|segmentation fault|raises|error)", re.I)


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
    g_only, c_only = _only_on(text)
    gpu, cpu = gpu + g_only, cpu + c_only
    code = extraction.snippet.code if extraction.snippet else ""
    # "(but not CPU) the backward pass crashes" says the CPU does not crash
    unsaid = _ONLY_ON["gpu"].sub(" ", text)
    if CUDA_FAILURE.search(text) and not _CPU_FAILS.search(unsaid) and ("cuda" in (text + code).lower()):
        gpu += _FAILING_DEVICE  # CUDA raising (illegal memory access, launch or index limits): CUDA's code is at fault
    title = issue.title or ""
    if not _GPU_OK.search(title) and not _CPU_OK.search(title):
        # a headline naming one device only is about that device ("`x >> 64` returns 1 on CPU")
        g, c = bool(_GPU.search(title)), bool(_CPU.search(title))
        if g != c:
            gpu, cpu = (gpu + _TITLE_DEVICE, cpu) if g else (gpu, cpu + _TITLE_DEVICE)
    if cpu > gpu:
        return Divergence(Side.CPU, cpu - gpu >= 2, f"the report calls the CPU result wrong ({cpu:g} vs {gpu:g})")
    if gpu > cpu:
        return Divergence(Side.CUDA, gpu - cpu >= 1, f"the report calls the CUDA result wrong ({gpu:g} vs {cpu:g})")
    return Divergence(Side.CUDA, False, "the report does not say which side is wrong: CUDA first", stated=False)


# --------------------------------------------------------------------------------------------
# A precision gap of a float reduction over many elements: the CPU's sequential accumulation

# ops that accumulate a float sum over their input (a norm's moments, a reduction); not scans (cumsum), whose
# large-input faults are index arithmetic
_ACCUMULATING = re.compile(
    r"^_?(?:native_)?(?:group_norm|layer_norm|batch_norm|instance_norm|norm|sum|nansum|mean|nanmean|var|std|var_mean"
    r"|std_mean|linalg_vector_norm|linalg_norm|frobenius_norm|logsumexp|dist)$")
_SIZE_CALL = re.compile(r"\b(?:rand|randn|ones|zeros|empty|full)\s*\(\s*\(?([\d\s,*]+)")
_FLOAT_EXACT = 2 ** 24  # float32 holds integers exactly up to here: a longer sum rounds at every step
_SMALL_NUMBER = re.compile(r"(?<![\w.])(?:0\.0*[1-9]\d*|\d(?:\.\d+)?e-0*[1-9]\d*)(?![\w.])", re.I)
_GROSS = re.compile(r"\bnan\b|\binf\b|crash|illegal|(?<!relative )(?<!absolute )\berror\b|\w+Error\b|segfault|\bzeros?\b"
                    r"|garbage|exception|wrong shape", re.I)
_COMPARES = re.compile(r"\babs\s*\(|\.abs\s*\(|allclose|isclose|assert_close")
_DOUBLE = re.compile(r"float64|\bdouble\b", re.I)


def _int_expr(text: str) -> int | None:
    """'256', '2*4096*8', '2**31' -> the integer; anything else None."""
    t = text.replace(" ", "")
    if not re.fullmatch(r"\d+(?:\*{1,2}\d+)*", t):
        return None
    value = 1
    for factor in re.split(r"(?<!\*)\*(?!\*)", t):
        base, _, exp = factor.partition("**")
        if "**" in exp or (exp and int(exp) > 64):
            return None
        value *= int(base) ** int(exp) if exp else int(base)
    return value


def largest_input(code: str) -> int:
    """The most elements a literal-shaped tensor of the snippet holds (torch.rand(1, 32, 256, 256, 72)), else 0."""
    best = 0
    for m in _SIZE_CALL.finditer(code):
        sizes = [_int_expr(d) for d in m.group(1).split(",") if d.strip()]
        if not sizes or any(x is None for x in sizes):
            continue
        n = 1
        for x in sizes:
            n *= x or 1
        best = max(best, n)
    return best


def accumulation_side(issue: Issue, extraction: Extraction, op_names: list[str], div: Divergence) -> Divergence:
    """A report that does not say which device is wrong, about a float reduction over more than 2**24 elements whose
    devices differ by a small amount: the CPU, which accumulates sequentially (its rounding error grows with the
    length; CUDA's tree reductions grow with its logarithm). Else `div` unchanged."""
    if div.stated:
        return div
    op = next((n for n in op_names if _ACCUMULATING.match(n)), None)
    code = extraction.snippet.code if extraction.snippet else ""
    if op is None or not code or _DOUBLE.search(code) or not _COMPARES.search(code):
        return div
    n = largest_input(code)
    if n <= _FLOAT_EXACT:
        return div
    prose = "\n".join(x for x in (issue.title, (issue.body or "").replace(code, " "), extraction.error_line or "") if x)
    prose = "\n".join(line for line in prose.splitlines() if "version" not in line.lower())  # 'PyTorch version: 0.4'
    small = _SMALL_NUMBER.search(prose)
    if small is None or _GROSS.search(prose):
        return div
    return Divergence(Side.CPU, False, f"the report does not say which side is wrong, but {op} sums {n:,} float "
                      f"elements (over 2**24) and the devices differ by a small amount ({small.group(0)}): the CPU's "
                      "sequential accumulation loses precision first; CPU first", stated=False)


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
# ("for small values", "large inputs"; not the one value expected: "expected a very small value")
_VALUE_CUE = re.compile(
    r"precision|\baccura|inaccura|relative error|\bulps?\b|asymptot|underflow|\btails?\b|\bnear (?:the )?pole"
    r"|close to (?:the )?pole|(?<!a )(?<!an )(?<!a very )(?:large|small|big|tiny|negative) (?:x|values?|arguments?|inputs?|magnitudes?)\b"
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
COMPARING_OPS = re.compile(r"max|min|arg(?:max|min)|clamp|clip|sort|topk|median|kthvalue|mode|nan\w*|cummax|cummin")


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



LAUNCHER = re.compile(r"kernel|launch|loop", re.I)
OWN_NAN = re.compile(r"isnan\s*\(|\b(\w+)\s*!=\s*\1\b")
LIFT = 1.05  # a cue-supported file ranks this much above the op's best kernel file
