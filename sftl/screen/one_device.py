"""One-device failures: a report where one device raises (illegal memory access, a launch or index limit) while the other returns a result.

The settled definition (../shared/README.md) counts them as GPU/CPU discrepancies: "the same program
gives different results on CPU and on a GPU — including one device raising while the other returns
a result, as the report shows or says ('works on CPU')". A CUDA error with no word of the other
device stays *other* (the screener's set-up negative decides it), and so does one that happens on
both devices.
"""

from __future__ import annotations

import re

# CUDA raising in the kernel or its launch: memory faults, launch configuration, 32-bit index limits, asserts
CUDA_FAILURE = re.compile(
    r"illegal memory access|illegal (?:memory )?(?:read|write|address)|invalid __global__ (?:read|write)"
    r"|invalid configuration argument|too many resources requested for launch|unspecified launch failure"
    r"|misaligned address|device-side assert|cuda kernel errors?|an illegal instruction was encountered"
    r"|not supported for tensors with more than int_max|more than int_max|int32 (?:index|indexing|overflow)"
    r"|(?:index|indices) out of (?:bounds|range)|failed with error code \d|cuda error: [a-z]"
    r"|\bimas?\b|\bima(?:s|'s)? on\b",
    re.I,
)
# the CPU running the same program: it works, returns, gives a result ("works on CPU", "but not CPU")
_OK = r"(?:works?|worked|fine|ok|correct(?:ly)?|succeeds?|succeeded|passes|passed|runs? (?:fine|ok|correctly|through)|no (?:error|problem|issue)s?|returns?|gives?|computes?)"
CPU_WORKS = re.compile(
    _OK + r"[^.;\n]{0,40}\b(?:on|with|for|in|using) (?:the )?cpu\b"
    r"|\bcpu\b[^.;\n]{0,40}?(?:" + _OK + r")"
    r"|\(?but not (?:on |with )?(?:the )?cpu\)?|\bnot (?:on|with) (?:the )?cpu\b|\bcpu[- ]only\b[^.;\n]{0,30}(?:works?|fine)",
    re.I,
)
# the CPU named with its failure denied: "on CPU there does not seem to be a problem", "the CPU kernel has no such
# out-of-bounds read", "this does not happen on the CPU" (no _RAISES check: the failure word is negated)
CPU_FINE = re.compile(
    r"\bcpu\b[^.;\n]{0,60}?(?:\bno such\b|\b(?:does|did|do)(?: not|n't) (?:seem to )?(?:be (?:a |an |any )?(?:problem|issue)|"
    r"happen|occur|crash|fail|raise|error|reproduce)|\bthere (?:is|was) no (?:problem|issue|error|crash))"
    r"|\b(?:no (?:such )?(?:problem|issue|error|crash)s?|(?:does|did)(?: not|n't) (?:happen|occur|reproduce|crash|fail))"
    r"[^.;\n]{0,20}\b(?:on|with|for|using) (?:the )?cpu\b",
    re.I,
)
# a CUDA set-up failure reads like a kernel's error ("CUDA error: no kernel image is available"): never a discrepancy
_SETUP_ERROR = re.compile(
    r"cuda error: (?:no kernel image|initialization error|invalid device ordinal|all cuda-capable devices|"
    r"cuda driver version|unknown error|out of memory|no cuda gpus)[^\n]*",
    re.I,
)
# the reverse: the CPU crashes while the GPU returns
CPU_FAILURE = re.compile(r"segmentation fault|core dumped|floating point exception|illegal instruction|stack overflow",
                         re.I)
GPU_WORKS = re.compile(
    _OK + r"[^.;\n]{0,40}\b(?:on|with|for|in|using) (?:the )?(?:gpu|cuda)\b|\b(?:gpu|cuda)\b[^.;\n]{0,40}?(?:" + _OK + r")"
    r"|\(?but not (?:on |with )?(?:the )?(?:gpu|cuda)\)?",
    re.I,
)
# the failure happens on both devices: no discrepancy
_BOTH = re.compile(r"\b(?:both|also|as well|too)\b[^.;\n]{0,30}\b(?:cpu|gpu|cuda)\b[^.;\n]{0,20}(?:crash|fail|error|raise)"
                   r"|(?:crash|fail|error|raise)\w*[^.;\n]{0,30}\bon both\b", re.I)
_OOM = re.compile(r"out of memory|\boom\b", re.I)  # running out of memory on the GPU is no discrepancy
_RAISES = re.compile(r"error|exception|raise|crash|fail|assert", re.I)  # "the CPU gives an IndexError" is no result
_NEGATED = re.compile(r"\(?(?:but )?not\b", re.I)  # "(but not CPU)": what follows is about the failing device
POINTS = 3.0
# a literal fragment of every CUDA_FAILURE / CPU_FAILURE alternative (lowercase), for a cheap test before the regexes
_CUDA_FAILURE_WORDS = ("illegal", "invalid __global__", "invalid configuration", "too many resources", "unspecified launch",
                       "misaligned", "device-side assert", "cuda kernel error", "int_max", "int32", "out of bounds",
                       "out of range", "failed with error code", "cuda error")
_FAILURE_WORDS = (*_CUDA_FAILURE_WORDS, "segmentation fault", "core dumped", "floating point exception", "stack overflow")
_IMA = re.compile(r"\bimas?\b|\bima(?:s|'s)? on\b")


def _clause(text: str, m: re.Match[str]) -> str:
    """The matched words and the rest of their clause ("the CPU gives an IndexError")."""
    end = re.compile(r"[.;,\n]").search(text, m.end())
    return text[m.start(): end.start() if end else len(text)]


def one_device_failure(text: str) -> str:
    """Why the text reads as one device raising while the other returns a result, else ""."""
    low = text.lower()
    if not (any(t in low for t in _FAILURE_WORDS) or _IMA.search(low)):
        return ""  # neither device raises: the costlier patterns below need not run
    if _BOTH.search(text) or _OOM.search(text):
        return ""
    # set-up errors blanked to their own length, so that positions still index `text`
    fail = CUDA_FAILURE.search(_SETUP_ERROR.sub(lambda m: " " * len(m.group(0)), text))
    if fail:
        rest = text[: fail.start()] + " " + text[fail.end():]
        ok = next((m for m in CPU_WORKS.finditer(rest) if _NEGATED.match(m.group(0)) or not _RAISES.search(_clause(rest, m))),
                  None) or CPU_FINE.search(rest)
        if ok:
            return f"CUDA raises ({fail.group(0).strip()!r}) while the CPU returns ({ok.group(0).strip()!r})"
        return ""
    fail = CPU_FAILURE.search(text)
    if fail:
        ok = GPU_WORKS.search(text[: fail.start()] + " " + text[fail.end():])
        if ok:
            return f"the CPU crashes ({fail.group(0).strip()!r}) while CUDA returns ({ok.group(0).strip()!r})"
    return ""


_DEVICE_WORD = re.compile(r"\b(?:cuda|gpu)\b", re.I)


def cuda_kernel_fault(text: str, error_line: str | None = None) -> str:
    """The CUDA kernel failure the text reports (illegal memory access, launch configuration, index limits), else "".

    Screened *other* when the report says nothing of the CPU, such a failure still points at the
    kernel that raised it: `sftl locate` ranks that kernel's files as a lead. Out-of-memory, set-up
    errors and failures on both devices point at no kernel.
    """
    if error_line:  # the error raised decides: an out-of-memory mentioned beside it ("why not OOM?") is not raised
        if _OOM.search(error_line) or _SETUP_ERROR.search(error_line):
            return ""
        fail = _named_failure(error_line)
        if fail and _DEVICE_WORD.search(text) and not _BOTH.search(text):
            return fail
    low = text.lower()
    if not (any(t in low for t in _CUDA_FAILURE_WORDS) or _IMA.search(low)) or not _DEVICE_WORD.search(text):
        return ""
    if _BOTH.search(text) or _OOM.search(text):
        return ""
    return _named_failure(_SETUP_ERROR.sub(lambda m: " " * len(m.group(0)), text))


def _named_failure(text: str) -> str:
    """The most specific CUDA failure named in the text: the longest match ("illegal memory access" over
    "CUDA error: a"); a bare "CUDA error: ..." is named by the rest of its line."""
    found = list(CUDA_FAILURE.finditer(text))
    if not found:
        return ""
    best = max(found, key=lambda m: len(m.group(0)))
    if best.group(0).lower().startswith("cuda error:"):
        end = text.find("\n", best.start())
        return text[best.start(): end if end >= 0 else len(text)].strip()[:80]
    return best.group(0).strip()
