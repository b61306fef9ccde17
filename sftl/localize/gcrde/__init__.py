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

The package, by what each module reads: `ops` (the report's operators), `cues` (the report's words on
the device and the fault), `board` (evidence and ranking), `index` (the tree's yaml and kernel index),
`follow` (an op through the kernel index), `pytorch`, `paper` (the published PyTorch method),
`tensorflow` (registrations, headers, names).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sftl.errors import SourceError
from sftl.localize.gcrde.cues import Cues, Divergence, divergent_side, report_cues
from sftl.localize.gcrde.index import prepare_index
from sftl.localize.gcrde.ops import OpRef, apis_from_code, torch_op_names, torch_ops
from sftl.localize.gcrde.pytorch import localize_pytorch
from sftl.localize.gcrde.tensorflow import localize_tensorflow, tf_raw_ops
from sftl.model import Extraction, Issue, Localization, Outcome

if TYPE_CHECKING:
    from sftl.sources import SourceProvider

__all__ = [
    "METHODS", "Cues", "Divergence", "OpRef", "apis_from_code", "divergent_side", "localize_gcrde", "prepare_index",
    "report_cues", "tf_raw_ops", "torch_op_names", "torch_ops",
]

METHODS = ("sftl", "paper")

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
            loc = localize_tensorflow(issue, extraction, source, method, top, divergent_op)
        else:
            loc = localize_pytorch(issue, extraction, source, method, top, divergent_op)
    except SourceError as exc:
        return Localization(label, (), Outcome.SKIPPED, f"source unavailable: {exc}")
    description = getattr(source, "description", "")
    if "nearest" in description and loc.outcome is not Outcome.SKIPPED:  # not the report's own release
        loc = Localization(loc.method, loc.suspects, loc.outcome, f"{loc.reason}; read from the {description}")
    elif loc.outcome is not Outcome.SKIPPED and (other := _other_release(extraction, source)):
        loc = Localization(loc.method, loc.suspects, loc.outcome, f"{loc.reason}; {other}")
    return loc


_RELEASE = re.compile(r"(\d+)\.(\d+)")


def _other_release(extraction: Extraction, source: SourceProvider) -> str:
    """What to say when the tree at hand is another release than the report's (its version.txt says so), else ""."""
    reported = extraction.environment.version
    try:
        own = (source.read_text("version.txt") or "").strip()
    except SourceError:
        return ""
    a, b = _RELEASE.match(reported or ""), _RELEASE.match(own)
    if a is None or b is None or a.groups() == b.groups():
        return ""
    return (f"the tree is release {own} (its version.txt), the report's is {reported}: files may have moved, "
            "merged or been renamed in between")


def _framework(issue: Issue, extraction: Extraction, source: SourceProvider) -> str:
    fw = extraction.environment.framework or getattr(source, "framework", None)
    if fw in ("pytorch", "tensorflow"):
        return fw
    return "tensorflow" if "tensorflow" in issue.repo.lower() else "pytorch"
