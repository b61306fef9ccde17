"""Screening of reports into mme / gcrde / other: the published TF-IDF keyword method, a learned mode, duplicates.

Keyword mode (`KeywordScreener`), the published method:

    TF(t, d)  = n_td / sum_k n_kd                  (term count over the document's token count)
    IDF(t)    = log(|D| / (1 + |{d in D: t in d}|)) (fitted on the stored corpus; floored at 0)
    score_c(d) = sum_{t in K_c} w_t * TF(t, d) * IDF(t)

over unigrams to trigrams (counts equal to scikit-learn's CountVectorizer with the keyword vocabulary,
lowercase, token pattern `\\b\\w+\\b`, built without enumerating every n-gram; a test checks the
equality). A report is read in sections and each section's counts are weighted (`SECTION_WEIGHTS`):
title 2, description 1, output/error 1, code 0.5, template 0 -- so PyTorch's collect_env block
("Is CUDA available", "GPU models and configuration", "CUDA used to build") and
TensorFlow's template ("CUDA/cuDNN version", "GPU model and memory") do not push every report to gcrde.

A category fires when its score reaches its threshold (`THRESHOLDS`: mme 0.005, gcrde 0.005) AND its
rule agrees (the keyword score alone confuses CPU/GPU-mentioning reports that are not discrepancies).
A matched mme rule, or gcrde evidence of 4 points or more, decides even below the threshold: TF is
diluted by long tracebacks and IDF vanishes in a corpus where every report says "CUDA".

* mme: a Python `AttributeError ... has no attribute` / `module 'x' has no attribute` / `No module named`
  / `cannot import name` is stated, naming a framework module or raised in framework frames; vetoed by
  the hard negatives (DLL load failed, undefined symbol, WinError 126, `__main__` modules, TorchScript's
  `RuntimeError: Module 'X' has no attribute`, IPython's `_render_traceback_`, user modules).
* gcrde: device-comparison evidence (CPU and GPU/CUDA/MPS in one comparing sentence, code run on both
  devices, "works on GPU, fails on CPU"), minus the hard negatives (out of memory, speed comparisons,
  run-to-run nondeterminism, "on both CPU and GPU", XLA/jit_compile or NumPy or OS comparisons, cuDNN
  and driver set-up failures, "runs on CPU instead of GPU"). Points (`gcrde_evidence`): title comparing
  devices +2 (+3 with a difference word); one sentence "on the CPU ... but on the GPU" +3, else a
  comparing sentence +2, else adjacent contrasting sentences +1/+1.5; snippet on both devices +1.5
  (GPU snippet, CPU in the text +1); CPU, GPU and a difference word +1; device-labelled outputs +1;
  "works on one device" +1; results changing after `.to("cuda")` or with the GPU hidden +2 (title) / +1
  (sentence), at most +3; negatives: same on both (or "CPU and GPU agree") -4, speed -3, out of memory -3,
  placement -3, nondeterminism -2 (-4 when the title is about run-to-run variation, whose devices then do
  not count; "deterministic = True" is not nondeterminism), set-up failure -2, other comparison axis
  (XLA, compile, NumPy/SciPy reference) -1.5, build -1. A device named as untested ("CPU not tested") is
  no comparison. Fires at 2.5.

Learned mode (`LearnedScreener`): logistic regression over TF-IDF of the same sections plus the rule
features, calibrated (sigmoid), abstaining ("needs human triage") below the confidence that reached the
precision target in cross-validation. Saved as a versioned joblib artefact.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sftl.errors import InputError
from sftl.extract import (
    _clean,
    classify_block,
    doctest_to_script,
    find_error_line,
    parse_tracebacks,
    segments,
)
from sftl.model import Category, Environment, Extraction, Issue, Screening

ARTEFACT_FORMAT = "sftl-screener"
ARTEFACT_VERSION = 1

SECTION_WEIGHTS: dict[str, float] = {"title": 2.0, "description": 1.0, "output": 1.0, "code": 0.5, "template": 0.0}

# Keyword sets of the published method, with weights (phrases are matched as n-grams).
KEYWORDS: dict[str, dict[str, float]] = {
    "mme": {
        "attributeerror": 3.0, "has no attribute": 3.0, "no attribute": 1.5, "attribute": 1.0,
        "modulenotfounderror": 3.0, "no module named": 3.0, "no module": 1.5, "module named": 1.5,
        "importerror": 2.0, "cannot import name": 3.0, "cannot import": 2.0, "import name": 1.5,
        "not found": 0.5, "import": 0.5, "module": 0.5, "missing": 0.5, "removed": 0.5, "deprecated": 0.5,
    },
    "gcrde": {
        "cpu": 1.5, "gpu": 1.5, "cuda": 1.0, "mps": 1.0, "cpu and gpu": 3.0, "gpu and cpu": 3.0,
        "cpu and cuda": 3.0, "cuda and cpu": 3.0, "cpu vs gpu": 3.0, "cpu vs cuda": 3.0, "on cpu": 1.0,
        "on gpu": 1.0, "on cuda": 1.0, "the cpu": 1.0, "the gpu": 1.0, "result": 1.0, "results": 1.0,
        "output": 0.5, "outputs": 0.5, "different": 1.5, "differ": 1.5, "differs": 1.5, "difference": 1.0,
        "inconsistent": 2.0, "inconsistency": 2.0, "mismatch": 2.0, "discrepancy": 2.0, "disagree": 1.5,
        "wrong": 1.0, "incorrect": 1.0, "nan": 0.5, "inf": 0.5, "same": 0.5,
    },
}
# Low on purpose: TF divides by the report's length, and real reports with long tracebacks and code
# score 10x lower than short ones; the rules carry the precision.
THRESHOLDS: dict[str, float] = {"mme": 0.005, "gcrde": 0.005}
GCRDE_RULE_MIN = 2.5  # device-comparison evidence needed (see gcrde_evidence)
STRONG_GCRDE_MARGIN = 1.5  # this much above GCRDE_RULE_MIN, the rule decides even below the keyword threshold

_TOKEN_PATTERN = r"(?u)\b\w+\b"

# --------------------------------------------------------------------------------------------
# reading a report in sections, apart from its template
# --------------------------------------------------------------------------------------------

# Lines of the PyTorch/TensorFlow issue templates and collect_env output: never evidence.
_TEMPLATE_LINE = re.compile(
    r"(?i)^\s*(?:[-*>]\s*)?(?:\*\*)?(?:"
    r"pytorch version|is debug build|cuda used to build|rocm used to build|os:|gcc version|clang version|cmake version|"
    r"libc version|python version|python platform|is cuda available|cuda runtime version|cuda_module_loading|"
    r"gpu models? and (?:configuration|memory)|nvidia driver version|cudnn version|hip runtime version|"
    r"miopen runtime version|is xnnpack available|versions of relevant libraries|\[pip\d?\]|\[conda\]|"
    r"cpu:\s*$|architecture:|cpu op-mode|byte order|address sizes|cpu\(s\)|on-line cpu|thread\(s\)|core\(s\)|"
    r"socket\(s\)|numa node|vendor id|model name|cpu family|model:\s+\d+\s*$|stepping|cpu max mhz|cpu min mhz|bogomips|"
    r"flags:|virtualization|l1d cache|l1i cache|l2 cache|l3 cache|vulnerability|hypervisor vendor|frequency boost|"
    r"collecting environment information|have i written custom code|os platform and distribution|"
    r"mobile device|tensorflow installed from|tensorflow version|bazel version|gcc/compiler version|"
    r"cuda/cudnn version|exact command to reproduce|you can collect some of this information|"
    r"you can also obtain the tensorflow version|\d\. tf \d\.0:|pytorch version \(e\.g\.|os \(e\.g\.|"
    r"how you installed pytorch|build command you used|any other relevant information|"
    r"please copy and paste the output|cc @|issue type|have you reproduced the bug with tf nightly|"
    r"source$|custom code$|yes$|no$|_no response_|bug$"
    r")"
)
_TEMPLATE_HEADING = re.compile(
    r"(?i)^\s*#{1,6}\s*(?:tensorflow version|custom code|os platform and distribution|mobile device|python version|"
    r"bazel version|gcc/compiler version|cuda/cudnn version|gpu model and memory|issue type|source|versions?|"
    r"environment|have you reproduced the bug with tf nightly\??|system information)\s*$"
)
_INFO_LOG = re.compile(
    r"^\s*(?:\d{4}-\d\d-\d\d[ T][\d:.]+:?\s+I\s+\S+\.cc:\d+\]|I\d{4} \d\d:\d\d|I tensorflow/|I external/)"
    r"|^\s*(?:\d{4}-\d\d-\d\d[ T][\d:.]+:?\s+)?W tensorflow/\S*(?:dso_loader|cpu_feature_guard|gpu_device|"
    r"cuda_executor)"
)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
# a heading line: markdown "### ...", or a bold line "**Describe the expected behavior**" (the older templates)
_HEADING = re.compile(r"^\s*(?:#{1,6}\s|\*\*[^*\n]{3,80}\*\*:?\s*$)")
_EXPECTED_HEADING = re.compile(r"(?i)expected (?:behaviou?r|result|output)")
_FEATURE_HEADING = re.compile(r"(?i)the feature, motivation and pitch|feature request|🚀")
_DOCS_HEADING = re.compile(r"(?i)the doc issue|📚|documentation issue")
_ENV_START = re.compile(r"^\s*(?:Collecting environment information|PyTorch version: )")


@dataclass(frozen=True)
class Sections:
    """A report read the way a maintainer reads it: the template apart from what the reporter wrote."""

    title: str
    description: str
    code: str
    output: str
    template: str
    # what the reporter expects ("Describe the expected behavior"), also part of description: a wish, not an observation
    expected: str = ""
    # the tracker template the report was filed with: "feature", "docs" or "" (a bug report or none)
    kind: str = ""

    def weighted(self) -> dict[str, str]:
        return {"title": self.title, "description": self.description, "output": self.output,
                "code": self.code, "template": self.template}

    @property
    def narrative(self) -> str:
        return f"{self.title}\n{self.description}"


def read_sections(title: str, body: str, error_line: str | None = None) -> Sections:
    """Split a report into title, description, code, output and template boilerplate."""
    problems: list[str] = []
    title = _clean(title, "title", problems).replace("\n", " ")
    body = _clean(body, "body", problems)
    template: list[str] = []
    template.extend(_COMMENT.findall(body))  # template instructions live in HTML comments
    body = _COMMENT.sub("", body)
    desc: list[str] = []
    code: list[str] = []
    out: list[str] = []
    expected: list[str] = []
    form = ""
    in_expected = False
    for seg in segments(body):
        if seg.source == "prose":
            in_field = False
            in_env = False
            for line in seg.text.split("\n"):
                heading = _HEADING.match(line)
                if heading:
                    in_expected = _EXPECTED_HEADING.search(line) is not None
                    if not form and _FEATURE_HEADING.search(line):
                        form = "feature"
                    elif not form and _DOCS_HEADING.search(line):
                        form = "docs"
                if _ENV_START.match(line):
                    in_env = True  # a collect_env dump pasted as prose: template until the next heading
                if in_env:
                    if line.lstrip().startswith("#") or line.lstrip().startswith("cc @"):
                        in_env = False
                    else:
                        template.append(line)
                        continue
                if _TEMPLATE_HEADING.match(line):
                    in_field = True
                    template.append(line)
                    continue
                if line.lstrip().startswith("#"):
                    in_field = False
                    continue  # headings ("Describe the bug") are template wording
                if in_field or _TEMPLATE_LINE.match(line):
                    template.append(line)
                    continue
                script = None
                if line.lstrip().startswith(">>>"):
                    script = doctest_to_script(line)
                if script:
                    code.append(script)
                elif _INFO_LOG.match(line):
                    template.append(line)
                else:
                    desc.append(line)
                    if in_expected:
                        expected.append(line)
            continue
        script = doctest_to_script(seg.text)
        if script:
            code.append(script)
            rest = "\n".join(ln for ln in seg.text.split("\n") if not ln.lstrip().startswith((">>>", "...")))
            if rest.strip():
                out.append(rest)
            continue
        kind, _, _ = classify_block(seg.text, seg.lang)
        if kind == "env":
            template.append(seg.text)
        elif kind == "python":
            code.append(seg.text)
        else:
            lines = seg.text.split("\n")
            keep = [ln for ln in lines if not _INFO_LOG.match(ln) and not _TEMPLATE_LINE.match(ln)]
            template.extend(ln for ln in lines if _INFO_LOG.match(ln) or _TEMPLATE_LINE.match(ln))
            out.append("\n".join(keep))
    if error_line:
        out.append(error_line)
    return Sections(title, "\n".join(desc), "\n".join(code), "\n".join(out), "\n".join(template),
                    "\n".join(expected), form)


# --------------------------------------------------------------------------------------------
# rule evidence
# --------------------------------------------------------------------------------------------

FRAMEWORK_MODULES = re.compile(
    r"^(?:torch|tensorflow|tensorflow_core|tf|keras|tf_keras|torchvision|torchaudio|torchtext|caffe2|functorch|"
    r"tensorboard|tensorflow_estimator|tensorflow_probability|_pywrap_tensorflow\w*|pywrap_tensorflow\w*|"
    r"tensorflow_addons|tensorflow_hub|torch_\w+|triton|onnx|_C)(?:\.|$)"
)
# the frameworks' own dependencies: a missing one is raised by the framework's import
FRAMEWORK_DEPS = re.compile(
    r"^(?:numpy|google\.protobuf|google|six|yaml|typing_extensions|sympy|networkx|jinja2|filelock|fsspec|absl|h5py|"
    r"wrapt|termcolor|opt_einsum|astunparse|gast|flatbuffers|ml_dtypes|jax|jaxlib|packaging|mkl|dill|optree)(?:\.|$)"
)
_MME_PATTERNS = (
    ("module-attr", re.compile(r"\bmodule '(?P<owner>[\w.]+)' has no attribute '(?P<name>\w+)'")),
    ("module-attr", re.compile(r"'module' object has no attribute '(?P<name>\w+)'")),
    ("object-attr", re.compile(r"(?:^|[\s:(`\"])'(?P<owner>[\w.]+)' object has no attribute '(?P<name>\w+)'")),
    ("object-attr", re.compile(r"\btype object '(?P<owner>[\w.]+)' has no attribute '(?P<name>\w+)'")),
    ("object-attr", re.compile(r"AttributeError:?\s+(?P<owner>[\w.]+) (?:object )?has no attribute '?(?P<name>\w+)")),
    # other AttributeErrors that report a missing member (torch's ops: "... has no overload name 'x'")
    ("object-attr", re.compile(r"AttributeError:?\s+[^\n]{0,200}?\bhas no (?:overload name|member) '(?P<name>\w+)'")),
    ("no-module", re.compile(r"(?i:no module named)\s+['‘’\"]?(?P<owner>[\w.]+)['‘’\"]?")),
    ("import-name", re.compile(r"(?i:cannot import name)\s+['‘’\"]?(?P<name>\w+)['‘’\"]?(?:\s+from\s+(?:partially initialized module\s+)?['‘’\"]?(?P<owner>[\w.]+))?")),
)
_MME_VETO = re.compile(
    r"(?i)dll load failed|undefined symbol|winerror 126|\[winerror|illegal instruction|symbol not found|"
    r"image not found|cannot open shared object|libcudart|libcudnn\.so|specified module could not be found"
)
_UNPICKLE = re.compile(r"find_class|[Uu]npickl|pickle\.load|_pickle\.|\bjoblib\b|torch\.load\(")
_BUILTIN_OWNERS = {"NoneType", "str", "int", "float", "list", "dict", "tuple", "bool", "bytes", "set", "function",
                   "method", "builtin_function_or_method", "numpy.ndarray", "ndarray"}


@dataclass(frozen=True)
class RuleEvidence:
    """What the rules read in one report: mme match, gcrde evidence points, and why."""

    mme: bool
    mme_why: str
    gcrde: float
    gcrde_why: tuple[str, ...]
    flags: dict[str, float] = field(default_factory=dict)


def mme_evidence(sections: Sections, extraction: Extraction | None = None) -> tuple[bool, str, dict[str, float]]:
    """Is a missing-module/attribute error stated, raised by or naming the framework? (matched, why, features)"""
    text = "\n".join((sections.title, sections.output, sections.description))
    flags = {"mme_match": 0.0, "mme_veto": 0.0, "mme_user": 0.0, "mme_torchscript": 0.0}
    fw_frames = False
    last_user = False
    if extraction and extraction.traceback:
        frames = extraction.traceback.frames
        # where it was raised: the innermost frame
        fw_frames = bool(frames) and bool(frames[-1].repo_path)
        last_user = bool(frames) and not frames[-1].repo_path and not frames[-1].path.startswith("<")
    veto = _MME_VETO.search(text)
    hits: list[str] = []
    for kind, pat in _MME_PATTERNS:
        for m in pat.finditer(text):
            line_start = text.rfind("\n", 0, m.start()) + 1
            prefix = text[line_start:m.start()]
            if "RuntimeError" in prefix and "AttributeError" not in prefix and kind != "no-module":
                flags["mme_torchscript"] = 1.0
                continue  # TorchScript's compiler message, not a Python AttributeError
            gd = m.groupdict()
            owner = gd.get("owner") or ""
            name = gd.get("name") or ""
            if name == "_render_traceback_":
                continue  # IPython failing to render another error
            if kind == "no-module":
                ours = FRAMEWORK_MODULES.match(owner) or FRAMEWORK_DEPS.match(owner)
                # torch.load/pickle looking up the class of a whole pickled model: the reporter's own module
                unpickled = not ours and _UNPICKLE.search(text) is not None
                if owner.startswith("__main__") or (not ours and not fw_frames) or unpickled:
                    flags["mme_user"] = 1.0
                    continue
            if kind in ("module-attr", "import-name") and owner and not fw_frames and not (
                    FRAMEWORK_MODULES.match(owner) or (kind == "import-name" and FRAMEWORK_DEPS.match(owner))):
                flags["mme_user"] = 1.0
                continue
            user_class = bool(owner) and re.search(rf"^\s*class {re.escape(owner)}\b", sections.code, re.M) is not None
            if kind == "object-attr" and last_user and (owner in _BUILTIN_OWNERS or user_class):
                flags["mme_user"] = 1.0
                continue
            hits.append(m.group(0).strip(" :(`\""))
    if hits and "'__main__' is not a package" in text:
        hits = []  # the reporter's own package layout (a relative import run as a script)
        flags["mme_user"] = 1.0
    if hits:
        flags["mme_match"] = 1.0
    if veto:
        flags["mme_veto"] = 1.0
        return False, f"vetoed: {veto.group(0)!r} (a loader/ABI failure, not a missing module)", flags
    if hits:
        return True, hits[0], flags
    if flags["mme_user"]:
        return False, "the missing attribute/module is not the framework's (the reporter's own code or another library)", flags
    if flags["mme_torchscript"]:
        return False, "a TorchScript compiler message, not a Python AttributeError", flags
    return False, "no missing-module/attribute error stated", flags


_ENV_MENTION = re.compile(
    r"(?i)\b(?:cuda|cudnn|cuda\s*/\s*cudnn)\s*(?:version|toolkit|runtime|driver)?\s*[:=]?\s*v?\d+(?:\.\d+)*"
    r"|\b(?:geforce\s+)?(?:gtx|rtx|tesla|quadro|titan)\s*\w*|\b(?:a100|v100|k80|p100|t4|h100)\b|cu\d{3}\b"
)
_CPU = re.compile(r"(?i)\bcpus?\b|cpu:0|tensorflow-cpu|\.cpu\(\)")
_GPU = re.compile(r"(?i)\bgpus?\b|\bcuda\b|\bmps\b|\brocm\b|tensorflow-gpu|tensorflow-metal|\.cuda\(\)|cuda:\d|gpu:\d")
_NO_GPU = re.compile(
    r"(?i)\b(?:no|without(?: a| any)?|not using(?: a| the)?|(?:don't|do not|doesn't|does not|didn't) have(?: a| any)?) "
    r"(?:gpus?|cuda)\b|\bcpu[- ]only\b"
)
_DIFF = re.compile(
    r"(?i)\bdiffer\w*|\bdifferent\w*|inconsisten\w*|mismatch\w*|discrepan\w*|disagree\w*|misalign\w*|deviat\w*|"
    r"\bnot (?:the )?(?:same|equal|identical|match\w*|agree|consistent)|do(?:es)? not (?:match|agree)|"
    r"(?:don|doesn)'t (?:match|agree)|neither equal|allclose|off by|\bgap\b|\bwrong\b|incorrect|instabilit\w*|"
    r"\bdrift\w*|\bvs\.?\b|versus|\bwhereas\b|\binstead\b|\bagree\b|\bdiverg\w*|\bopposite\b|goes away|"
    r"disappears?|specific to|only (?:happens|occurs|fails)|do(?:es)?(?: not|n't) (?:happen|occur)|\bidentical\b"
)
_CONTRAST = re.compile(
    r"(?i)\bbut\b|\bwhile\b|\bwhereas\b|\bhowever\b|\binstead\b|\bcompared\b|\bthan\b|\bvs\.?\b|\bversus\b|"
    r"\bthe same\b|\bon the other hand\b|\bunlike\b"
)
# "on the CPU ..., but on the GPU ...": two devices on either side of a contrast, in one sentence
_DEV = r"(?:cpus?|gpus?|cuda|mps|tensorflow-gpu|tensorflow-cpu|tensorflow-metal)"
_CONTRAST_PAIR = re.compile(
    rf"(?i)\b{_DEV}\b(?:[^.\n]|\.(?!\s)){{0,160}}?(?:\bbut\b|\bwhile\b|\bwhereas\b|\bhowever\b|\binstead\b|\bthan\b|\bvs\.?|"
    rf"\bversus\b|\bunlike\b)(?:[^.\n]|\.(?!\s)){{0,160}}?\b{_DEV}\b"
    # "is -2 on CPU, 1 on GPU": two values side by side
    rf"|\b(?:on|with|under) (?:the )?{_DEV}\b\s*[,;/]\s*(?:[^.\n]|\.(?!\s)){{0,60}}?\b(?:on|with|under) (?:the )?{_DEV}\b"
    # "returns NaN on the GPU for some inputs, on CPU the output is finite": two device clauses side by side
    rf"|\b(?:on|with|under) (?:the )?{_DEV}\b[^.,;\n]{{0,60}}[,;]\s*(?:and |yet )?(?:on|with|under) (?:the )?{_DEV}\b"
)
_ASYM = re.compile(
    r"(?i)(?:works?|working|fine|correct\w*|right|expected|normally|no problems?|without (?:any )?(?:error|problem)s?|"
    r"runs?|behaves normally|is ok)\s+(?:\w+\s+){0,3}(?:on|in|with|under)\s+(?:the\s+)?(?:cpu|gpu|cuda|tensorflow-gpu|tensorflow-cpu)"
    r"|(?:only|just) (?:on|with|under) (?:the )?(?:cpu|gpu|cuda)|can(?:'t|not)? run in tensorflow-(?:gpu|cpu)"
    r"|(?:on|with) (?:the )?(?:cpu|gpu|cuda)[^.\n]{0,60}\b(?:raises?|errors?|fails?|crash\w*)\b"
    r"|(?:on|with|under) (?:the )?(?:cpu|gpu|cuda)[^.\n]{0,80}\b(?:as expected|correct(?:ly)?|fine|normally|works?)\b"
    r"|(?:goes away|disappears|(?:is|are) (?:correct|right|fine)|works?) (?:\w+ ){0,2}(?:on|with|under) (?:the )?(?:cpu|gpu|cuda)"
    r"|\b(?:cpu|gpu|cuda|mps)\b[^.\n]{0,80}\b(?:as expected|correctly|is correct|are correct|works fine|is fine)\b"
    r"|\b(?:gpu|cuda|mps)[- ]only\b"
)
_BOTH = re.compile(
    r"(?i)\bon both (?:the )?(?:cpu|gpu|cuda)|\bboth on (?:the )?(?:cpu|gpu|cuda)|same (?:way|error|result|behaviou?r|problem|issue)s? "
    r"(?:\w+ ){0,3}on (?:both|the cpu and|cpu and|the gpu and|gpu and)|fails the same way|(?:cpu|gpu|cuda) (?:and|or) (?:cpu|gpu|cuda) alike"
    r"|(?:happens|occurs|reproduc\w*|fails) (?:also |as well )?(?:on|with) both|n[o']t (?:look )?(?:cuda|gpu)[- ]related"
    r"|not (?:specific|related) to (?:the )?(?:gpu|cuda)|regardless of (?:the )?device|on (?:the )?(?:cpu|gpu|cuda) as well"
    r"|(?:also|too) (?:happens |occurs |fails )?on (?:the )?(?:cpu|gpu|cuda)\b(?! but)"
    r"|\bboth (?:the )?(?:cpu|gpu|cuda) and (?:the )?(?:cpu|gpu|cuda)"
    r"|(?:happens|occurs|reproduc\w*|fails|same) (?:\w+ ){0,2}(?:on|with|in) (?:the )?(?:cpu|gpu|cuda) and (?:the )?(?:cpu|gpu|cuda)"
    r"|(?:cpu|gpu|cuda) and (?:the )?(?:cpu|gpu|cuda) (?:both )?(?:give|return|produce|show)s? (?:the )?same"
)
_PERF = re.compile(
    r"(?i)\bslow\w*|\bfaster\b|\bspeed\w*|performance|\bs/epoch|per epoch|throughput|latency|\bhangs?\b|never (?:returns|finishes)|"
    r"takes? (?:\w+ )?(?:long|seconds|minutes|forever)|\d+x (?:slower|faster)|utili[sz]ation"
)
_NONDET = re.compile(
    r"(?i)non-?determinis\w*|\bdeterminis\w*|reproducib\w*|run[- ]to[- ]run|every (?:run|time)|each run|across runs|"
    r"repeated(?:ly)? (?:runs?|executions?)|from run to run|bit-identical|random result|between (?:runs|executions|calls)|"
    r"(?:run|running|call|calling|execut\w*) (?:it |this |the same \w+ )?twice"
)
# the reporter switched determinism ON ("cudnn.deterministic = True", "deterministic on"): that rules
# run-to-run noise out rather than reporting it
_DETERMINISM_ON = re.compile(
    r"(?i)(?:cudnn\.)?deterministic\s*(?:=\s*true|is on|on\b|enabled|mode)|use_deterministic_algorithms\(\s*true\s*\)|"
    r"enable_op_determinism\(\)|tf_deterministic_ops\s*=\s*['\"]?1"
)
# "CPU not tested", "haven't tried it on the CPU": a device named only as not compared
_UNTESTED = re.compile(
    r"(?i)\b(?:cpu|gpu|cuda)\s+(?:(?:was|is|has been|has)\s+)?(?:not\s+(?:yet\s+)?|never\s+|un)(?:tested|tried|checked|compared)\b|"
    r"\b(?:haven't|have not|didn't|did not|not|never|couldn't|could not|can't|cannot)\s+(?:yet\s+)?"
    r"(?:tested|tried|test|try|checked|check|compared?)(?:\s+(?:it|this|that))?(?:\s+(?:on|with|in|against))?\s+(?:the\s+)?"
    r"(?:cpu|gpu|cuda)\b"
)
# "CPU and GPU agree with each other", "(same on CPU and GPU)": the devices agree even when a sentence
# says the result differs from something else (NumPy, SciPy, the docs)
_AGREE = re.compile(
    r"same (?:results? |values? |outputs? |answers? )?on (?:both|(?:the )?(?:cpu|gpu|cuda) and (?:the )?(?:cpu|gpu|cuda))|"
    r"(?:cpu|gpu|cuda) and (?:the )?(?:cpu|gpu|cuda)(?: results?| outputs?)? (?:agree|match|are (?:the same|identical|equal))"
)
# "without XLA, CPU and GPU agree": agreement under a condition implies a discrepancy otherwise
_CONDITIONAL = re.compile(r"^\W*(?:without|with|unless|except|if|when|once|after|before|in eager|in graph)\b")
# a GPU move or a hidden GPU next to a changed result: the other run is the default device (CPU), or the GPU
_IMPLICIT_MOVE = re.compile(
    r"""(?i)\.to\(\s*['"](?:cuda|mps)[^)]*\)|\.cuda\(\)|\bmov(?:e|ed|es|ing) (?:\w+ ){0,3}to (?:the )?(?:gpus?|cuda|mps)\b"""
)
_CHANGED = re.compile(r"\bchang(?:e|es|ed|ing)\b|no longer (?:match|agree|the same|equal)|\bdiffer\w*|\bdifferent\b|mismatch|"
                      r"not (?:the )?same|do(?:es)?n'?t match|does not match")
_OOM = re.compile(r"(?i)out of memory|\boom\b|memory leak|ran out of memory|\bbfc\b|allocator|memory growth")
_SETUP = re.compile(
    r"(?i)cudnn_status|could not create cudnn handle|is_available\(\)|could not load dynamic library|dll load|\bnccl\b|"
    r"deadlock|illegal memory access|device-side assert|not compiled with cuda|driver version is insufficient|no kernel|"
    r"failed to initiali[sz]e|cuda error|cublas_status|segmentation fault|core dumped|could not run '|"
    r"not implemented for|notimplementederror|no kernel image|no registered|op type not registered"
)
_AXIS = re.compile(
    r"(?i)(?:disagree\w*|differ\w*|compar\w*|\bvs\.?|versus|than|from|with) (?:the )?(?:scipy|mpmath|wolfram)\b|"
    r"jit_compile|\bxla\b|\beager\b.{0,40}\bgraph\b|\bgraph\b.{0,40}\beager\b|linux\b.{0,60}\bwindows|"
    r"windows\b.{0,60}\blinux|torch\.compile|inductor|\bnumpy(?:'s)?\.?\w* (?:gives|returns)|than numpy|to numpy\.argmax"
)
# "runs on the CPU instead of the GPU", "GPU not detected": where it runs, not what it computes
_PLACEMENT = re.compile(
    r"(?i)(?:cpu|gpu|cuda) instead of (?:the )?(?:cpu|gpu|cuda)|(?:only|still|always) (?:runs?|running|uses?|using|trains?) "
    r"(?:on |the )?(?:the )?(?:cpu|gpu)|(?:runs?|running|uses?|using|trains?|training|placed|falls? back|executes?) (?:\w+ ){0,2}"
    r"on (?:the )?cpu (?:instead|rather|not|even)|(?:not|never|doesn't|does not|isn't|is not|cannot|can't|won't|unable to) "
    r"(?:\w+ ){0,2}(?:detect\w*|find|found|see|recogni[sz]\w*|access\w*) (?:the |my |any )?(?:gpus?|cuda)"
    r"|(?:doesn't|does not|isn't|is not|won't|can't|cannot|never) (?:\w+ ){0,2}(?:use|using|utili[sz]\w*) (?:the |my |any )?(?:gpus?|cuda)"
    r"|(?:gpus?|cuda) (?:is |are |was )?(?:not|never) (?:being )?(?:used|detected|found|available|recogni[sz]ed|utili[sz]ed)"
    r"|no (?:gpu|cuda) (?:devices? )?(?:was |were )?(?:detected|found|available)|(?:cpu|gpu) usage|device placement"
    # MPS/GPU op coverage: "not currently supported on the MPS backend and will fall back to run on the CPU"
    r"|fall(?:s|ing)? ?back to (?:run (?:on )?)?(?:the )?cpu|not (?:currently |yet )?(?:supported|implemented) (?:on|for) (?:the )?(?:mps|gpu|cuda)"
)
_BUILD = re.compile(r"(?i)\bcmake\b|\bbazel\b|build(?:ing)? from source|compil(?:e|ing|ation) (?:from|pytorch|tensorflow)")
_SENT = re.compile(r"(?<=[.!?;])\s+(?=[A-Z`(])|\n+")


def _lower_re(pat: re.Pattern[str]) -> re.Pattern[str]:
    """The same pattern for already-lowercased text (case-insensitive matching is several times slower)."""
    return re.compile(pat.pattern.replace("(?i)", ""))


_L = {name: _lower_re(p) for name, p in (("cpu", _CPU), ("gpu", _GPU), ("diff", _DIFF), ("contrast", _CONTRAST),
                                          ("placement", _PLACEMENT),
                                          ("pair", _CONTRAST_PAIR), ("asym", _ASYM), ("both", _BOTH), ("perf", _PERF),
                                          ("nondet", _NONDET), ("oom", _OOM), ("setup", _SETUP), ("axis", _AXIS),
                                          ("build", _BUILD))}
_GPU_WORDS = ("gpu", "cuda", "mps", "rocm", "metal")
_CODE_CPU = re.compile(r"""['"]/?(?:device:)?cpu(?::0)?['"]|\.cpu\(\)|device\s*=\s*['"]cpu|\b\w+_cpu\b|\bcpu_\w+""")
_CODE_GPU = re.compile(
    r"""['"]/?(?:device:)?(?:gpu|cuda|mps)(?::\d)?['"]|\.cuda\(\)|\.to\(['"](?:cuda|mps)|\b\w+_(?:gpu|cuda|mps)\b|"""
    r"""\b(?:gpu|cuda|mps)_\w+"""
)
# printed results labelled by device ("cpu: tensor(...)", "GPU result = ..."), not placement logs
_OUT_CPU = re.compile(r"(?m)^\W*(?:\w+[_ ])?cpu(?:[_ ]\w+)?\s*(?:[:=]|result|output|out\b)")
_OUT_GPU = re.compile(r"(?m)^\W*(?:\w+[_ ])?(?:gpu|cuda|mps)(?:[_ ]\w+)?\s*(?:[:=]|result|output|out\b)")


_HIDDEN_GPU = re.compile(
    r"""(?i)`?CUDA_VISIBLE_DEVICES\s*=\s*(?:""|''|-1\b|(?=[`\s]))`?|set_visible_devices\(\s*\[\]\s*,\s*['"]GPU['"]\s*\)|"""
    r"""\b(?:hid(?:e|ing)|disabl(?:e|ing)) (?:the |my )?(?:gpus?|cuda)\b"""
)
# device moves stripped from a line to compare it with the same call on the default (CPU) device
_TO_GPU = re.compile(
    r"""\.cuda\(\)|\.to\(\s*(?:device\s*=\s*)?['"](?:cuda|mps)(?::\d)?['"]\s*\)|,\s*device\s*=\s*['"](?:cuda|mps)(?::\d)?['"]"""
)
_OUT_ON_GPU = re.compile(r"device='(?:cuda|mps)")


def _call_parts(line: str) -> list[str]:
    """A whitespace-free line's comma-separated expressions, `print(` and unbalanced closing parentheses removed."""
    parts = []
    for p in re.split(r"[,;]", line):
        p = re.sub(r"^print\(", "", p)
        while p.endswith(")") and p.count(")") > p.count("("):
            p = p[:-1]
        parts.append(p)
    return parts


def _default_and_gpu_call(code: str) -> bool:
    """Does the snippet make a call on GPU tensors that it also makes, unchanged otherwise, on CPU tensors?"""
    lines = [re.sub(r"\s+", "", ln) for ln in code.split("\n") if ln.strip()]
    plain = set(lines)
    for ln in lines:
        stripped = _TO_GPU.sub("", ln)
        if stripped != ln and len(stripped) > 6 and stripped in plain:
            return True
    # `x.argmax(), x.cuda().argmax()` / `print(f(x), f(x.cuda()))`: both calls side by side on one line
    parts = {p for ln in lines for p in _call_parts(ln)}
    for p in parts:
        stripped = _TO_GPU.sub("", p)
        if stripped != p and len(stripped) > 6 and stripped in parts:
            return True
    return False


def _devices(s: str) -> tuple[bool, bool]:
    """(mentions CPU, mentions GPU) in lowercased text already stripped of version/model mentions."""
    c = "cpu" in s and _L["cpu"].search(s) is not None
    g = any(w in s for w in _GPU_WORDS) and _L["gpu"].search(s) is not None
    return c, g


# literal fragments one of which must occur for a pattern to match: a cheap `in` test before the regex
_TRIGGERS: dict[str, tuple[str, ...]] = {
    "both": ("both", "same", "alike", "related", "regardless", "as well", "also", "too", "happens", "occurs", "reproduc",
             "fails"),
    "perf": ("slow", "fast", "speed", "perform", "epoch", "throughput", "latency", "hang", "never", "take", "utili"),
    "oom": ("memory", "oom", "bfc", "allocat"),
    "nondet": ("determinis", "reproduc", "run", "every", "repeated", "identical", "random"),
    "setup": ("cudnn", "is_available", "dynamic library", "dll", "nccl", "deadlock", "illegal", "assert", "compiled",
              "driver", "kernel", "initiali", "cuda error", "cublas", "segmentation", "core dumped", "could not run",
              "not implemented", "notimplemented", "registered"),
    "axis": ("jit_compile", "xla", "eager", "windows", "compile", "inductor", "numpy", "scipy", "mpmath", "wolfram"),
    "build": ("cmake", "bazel", "build", "compil"),
    "placement": ("instead", "only", "still", "always", "on cpu", "on the cpu", "not", "never", "n't", "unable", "no gpu",
                  "no cuda", "usage", "placement", "fall"),
}


def _has(name: str, s: str) -> bool:
    trig = _TRIGGERS.get(name)
    if trig is not None and not any(t in s for t in trig):
        return False
    return _L[name].search(s) is not None


def _find(name: str, s: str) -> re.Match[str] | None:
    trig = _TRIGGERS.get(name)
    if trig is not None and not any(t in s for t in trig):
        return None
    return _L[name].search(s)


_DEVDIFF = re.compile(
    r"\bdiffer\w*|\bdifferent\w*|inconsisten\w*|mismatch\w*|discrepan\w*|disagree\w*|not (?:the )?same|"
    r"do(?:es)? not match|(?:don|doesn)'t match|\bwhereas\b|\bvs\.?\b|\bversus\b"
)


_EXPECT = re.compile(r"\bexpect\w*|\bshould\b|\bwould like\b|\bsupposed to\b|\bought to\b|\bwant\w*\b|\bhope\w*")


def _same_on_both(sentence: str) -> bool:
    """'happens on both CPU and CUDA' -- unless the sentence says the devices differ; 'CPU and GPU agree' always."""
    if _AGREE.search(sentence) and not _EXPECT.search(sentence) and not _CONDITIONAL.search(sentence):
        return True
    return _has("both", sentence) and not _DEVDIFF.search(sentence)


def _both_hit(sentence: str) -> re.Match[str] | None:
    return _find("both", sentence) or _AGREE.search(sentence)


_RUN_VARIATION = re.compile(r"between (?:runs|executions|calls)|run[- ]to[- ]run|(?:every|each) (?:run|time)|across runs|"
                            r"repeated(?:ly)? (?:runs?|executions?)|\btwice\b|\bvary\b|\bvaries\b")
_ACROSS_DEVICES = re.compile(r"\b(?:between|across) (?:the )?(?:two )?devices\b|\bdevice[- ]dependent\b|"
                             r"\bdepend(?:s|ing)? on (?:the )?device\b")
# device-mismatch errors name devices and "mismatch" without comparing results
_DEVICE_MISMATCH = re.compile(r"same device|device mismatch|found at least two devices|devices? (?:do not|don't) match")


def _implicit_comparison(text: str) -> bool:
    """'outputs no longer match after model.to("cuda")', 'predictions change when I hide the GPU'."""
    low = text.lower()
    if not (_IMPLICIT_MOVE.search(text) or _HIDDEN_GPU.search(text)) or not _CHANGED.search(low):
        return False
    return not (_DEVICE_MISMATCH.search(low) or "memory" in low or _has("perf", low) or _has("oom", low) or _has("placement", low)
                or _has("setup", low))


def gcrde_evidence(sections: Sections) -> tuple[float, tuple[str, ...], dict[str, float]]:
    """Points for a CPU-vs-GPU result discrepancy, minus hard negatives; (points, reasons, features)."""
    why: list[str] = []
    f: dict[str, float] = {}
    # version and model mentions ("CUDA 11.2", "RTX 3090") and "no GPU" are not device comparisons
    # hiding the GPU (CUDA_VISIBLE_DEVICES="", set_visible_devices([], 'GPU')) is running on the CPU
    # a device named as untested ("CPU not tested") is no comparison; determinism switched on is no nondeterminism
    implicit_title = _implicit_comparison(sections.title)
    implicit_sents = sum(1 for x in _SENT.split(sections.description) if x.strip() and _implicit_comparison(x))
    title = _NO_GPU.sub(" ", _ENV_MENTION.sub(" ", _HIDDEN_GPU.sub(" use the cpu ", _UNTESTED.sub(
        " ", _DETERMINISM_ON.sub(" ", sections.title))))).lower()
    desc_raw = _NO_GPU.sub(" ", _ENV_MENTION.sub(" ", _HIDDEN_GPU.sub(" use the cpu ", _UNTESTED.sub(
        " ", _DETERMINISM_ON.sub(" ", sections.description)))))
    sents = [x.lower() for x in _SENT.split(desc_raw) if x.strip()]
    narrative = f"{title}\n{desc_raw.lower()}"
    t_cpu, t_gpu = _devices(title)
    if not (t_cpu or t_gpu) and _ACROSS_DEVICES.search(title) and _has("diff", title):
        t_cpu = t_gpu = True  # "results differ between devices": both devices, unnamed
    # a title about results varying from run to run (not one naming determinism, "add a nondeterministic alert")
    title_nondet = _RUN_VARIATION.search(title) is not None
    if _has("perf", title) or _has("oom", title) or _has("placement", title) or title_nondet:
        t_cpu = t_gpu = False  # speed, placement or run-to-run variation, not results across devices
    if _same_on_both(title):  # "softmax returns NaN on both CPU and CUDA" names two devices that agree
        t_cpu = t_gpu = False
    f["title_both"] = float(t_cpu and t_gpu)
    f["title_diff"] = float(_has("diff", title))
    f["title_one_device"] = float(t_cpu != t_gpu)
    devs = [_devices(x) for x in sents]
    both_sent = pair_sent = adjacent = 0
    for x, (c, g) in zip([*sents, title], [*devs, (t_cpu, t_gpu)], strict=True):
        if c and g and not (_has("perf", x) or _same_on_both(x) or _has("oom", x) or _has("placement", x)):
            if _has("pair", x):
                pair_sent += 1
            if x is not title and (_has("diff", x) or _has("contrast", x) or _has("asym", x)):
                both_sent += 1
    for i in range(len(sents) - 1):
        (ca, ga), (cb, gb) = devs[i], devs[i + 1]
        if (ca and gb and not ga) or (ga and cb and not ca):
            ab = sents[i] + " " + sents[i + 1]
            strong = _has("contrast", sents[i + 1]) or _has("diff", ab) or _has("asym", ab)
            adjacent += 2 if strong else 1
    code = sections.code.lower()
    code_cpu = "cpu" in code and _CODE_CPU.search(code) is not None
    code_gpu = any(w in code for w in _GPU_WORDS) and _CODE_GPU.search(code) is not None
    if code_gpu and not code_cpu:
        # `f(x)` and `f(x.cuda())`: the same call on a default (CPU) tensor and on a GPU tensor
        code_cpu = _default_and_gpu_call(sections.code)
    n_cpu, n_gpu = _devices(narrative)
    n_diff = _has("diff", narrative)
    out = sections.output.lower()
    out_both = "cpu" in out and _OUT_CPU.search(out) is not None and _OUT_GPU.search(out) is not None
    if code_gpu and not out_both and "device=" in out:
        # printed tensors, some of them on a GPU (`tensor([1], device='cuda:0')`) and some not: both devices
        on_gpu = len(_OUT_ON_GPU.findall(out))
        out_both = 0 < on_gpu < out.count("tensor(")
    f["output_both"] = float(out_both)
    f["sent_both"] = float(min(both_sent, 3))
    f["pair"] = float(min(pair_sent, 3))
    f["adjacent"] = float(min(adjacent, 3))
    f["code_both"] = float(code_cpu and code_gpu)
    f["code_gpu_text_cpu"] = float(code_gpu and n_cpu and not code_cpu)
    f["narr_both"] = float(n_cpu and n_gpu)
    f["narr_diff"] = float(n_diff)
    f["asym"] = float(n_cpu and n_gpu and _has("asym", narrative))
    pts = 0.0
    if t_cpu and t_gpu:
        pts += 3.0 if f["title_diff"] else 2.0
        why.append("title compares CPU and GPU")
    if pair_sent:
        pts += 3.0
        why.append("'on one device ... but on the other' in one sentence")
    elif both_sent:
        pts += 2.0
        why.append("a sentence compares CPU and GPU")
    elif adjacent:
        pts += 1.5 if adjacent >= 2 else 1.0
        why.append("adjacent sentences contrast CPU and GPU")
    if code_cpu and code_gpu:
        pts += 1.5
        why.append("the snippet runs on both devices")
    elif code_gpu and n_cpu:
        pts += 1.0
        why.append("the snippet moves to GPU; the text names CPU")
    if n_cpu and n_gpu and n_diff:
        pts += 1.0
        why.append("CPU, GPU and a difference word in the text")
    if out_both:
        pts += 1.0
        why.append("the output shows a CPU result and a GPU result")
    if f["asym"]:
        pts += 1.0
        why.append("works on one device, not the other")
    f["implicit"] = float(min(2 * implicit_title + implicit_sents, 3))
    if f["implicit"]:
        # the other run is implied: the model before `.to("cuda")`, or the run with the GPU hidden
        pts += f["implicit"]
        why.append("results change when moving to the GPU / hiding it")
    negatives = (
        ("both", 4.0, "same behaviour on both devices"),
        ("perf", 3.0, "a speed comparison"),
        ("oom", 3.0, "out of memory"),
        ("nondet", 2.0, "run-to-run nondeterminism"),
        ("setup", 2.0, "a device set-up/loader failure"),
        ("axis", 1.5, "a comparison that is not CPU vs GPU (XLA/compile/NumPy/OS)"),
        ("placement", 3.0, "where it runs (CPU instead of GPU, GPU not used/detected)"),
        ("build", 1.0, "a build problem"),
    )
    if sections.kind:
        pts -= 2.0
        why.append(f"-2: filed with the {sections.kind} template, not as a bug")
    f["feature_or_docs"] = float(bool(sections.kind))
    full = f"{narrative}\n{sections.output.lower()}"
    # "I would expect the same behaviour on both devices" is what should happen, not what does
    wished = {x.lower().strip() for x in _SENT.split(sections.expected) if x.strip()}
    both_hits = [x for x in [title, *sents] if _same_on_both(x) and x.strip() not in wished and not _EXPECT.search(x)]
    for name, cost, words in negatives:
        if name == "both":
            hit = _both_hit(both_hits[0]) if both_hits else None
        else:
            hit = _find(name, narrative if name in ("perf", "nondet", "axis", "placement") else full)
        f[name] = float(hit is not None)
        if hit:
            if name == "nondet" and title_nondet:
                cost *= 2  # the title is about run-to-run variation: the report's topic, not an aside
            pts -= cost
            why.append(f"-{cost:g}: {words} ({hit.group(0).strip()!r})")
    return pts, tuple(why), f


def rule_evidence(sections: Sections, extraction: Extraction | None = None) -> RuleEvidence:
    mme, mme_why, f1 = mme_evidence(sections, extraction)
    pts, why, f2 = gcrde_evidence(sections)
    return RuleEvidence(mme, mme_why, pts, why, {**f1, **f2, "gcrde_points": pts})


# --------------------------------------------------------------------------------------------
# documents
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Doc:
    """One report prepared for screening."""

    key: str
    sections: Sections
    rules: RuleEvidence


def prepare(item: Any, extraction: Extraction | None = None, key: str = "") -> Doc:
    """An Issue, a (title, body) pair, a dict with title/body[/error] or a plain string -> Doc."""
    title, body, error = "", "", None
    if isinstance(item, Issue):
        title, body, key = item.title, item.body, key or item.key
        own = [c.body for c in item.comments if item.author and c.author == item.author and c.body]
        if own:  # the reporter's follow-ups (output, versions) are part of the report
            body = "\n\n".join([body or "", *own])
    elif isinstance(item, dict):
        title, body, error = item.get("title") or "", item.get("body") or "", item.get("error")
        key = key or str(item.get("url") or item.get("key") or "")
    elif isinstance(item, (tuple, list)) and len(item) >= 2:
        title, body = item[0] or "", item[1] or ""
    else:
        body = item if isinstance(item, str) else ""
    if not isinstance(title, str):
        title = ""
    if not isinstance(body, str):
        body = ""
    if error and isinstance(error, str) and error not in body:
        body = f"{body}\n\n```\n{error}\n```"
    if extraction is None:
        tbs = parse_tracebacks(body) if "Traceback" in body or 'File "' in body else []
        err = find_error_line(body, tbs)
        extraction = Extraction(None, tbs[-1] if tbs else None, Environment(), err)
    sections = read_sections(title, body, None)
    return Doc(key, sections, rule_evidence(sections, extraction))


def _prepare_chunk(items: list[Any]) -> list[Doc]:
    return [prepare(it) for it in items]


def prepare_many(items: Sequence[Any], workers: int | None = None) -> list[Doc]:
    """prepare() over many reports; large batches are spread over the machine's cores."""
    import os

    items = list(items)
    n = workers if workers is not None else min(os.cpu_count() or 1, 8)
    if n <= 1 or len(items) < 2000:
        return _prepare_chunk(items)
    from concurrent.futures import ProcessPoolExecutor

    size = -(-len(items) // (n * 4))
    chunks = [items[i:i + size] for i in range(0, len(items), size)]
    try:
        with ProcessPoolExecutor(n) as pool:
            return [d for part in pool.map(_prepare_chunk, chunks) for d in part]
    except (OSError, RuntimeError):  # no process support (sandboxes): do it here
        return _prepare_chunk(items)


def _as_docs(items: Iterable[Any]) -> list[Doc]:
    return [it if isinstance(it, Doc) else prepare(it) for it in items]


# --------------------------------------------------------------------------------------------
# keyword screener (the published method)
# --------------------------------------------------------------------------------------------


class KeywordScreener:
    """TF-IDF keyword screening with per-category weights and thresholds, gated by rules (scikit-learn style)."""

    method = "keywords"

    def __init__(
        self,
        keywords: dict[str, dict[str, float]] | None = None,
        thresholds: dict[str, float] | None = None,
        section_weights: dict[str, float] | None = None,
        gcrde_rule_min: float = GCRDE_RULE_MIN,
        use_rules: bool = True,
    ) -> None:
        self.keywords = keywords
        self.thresholds = thresholds
        self.section_weights = section_weights
        self.gcrde_rule_min = gcrde_rule_min
        self.use_rules = use_rules

    # -- fitting --------------------------------------------------------------------------------

    def vocabulary(self) -> list[str]:
        kw = self.keywords or KEYWORDS
        return sorted({t for terms in kw.values() for t in terms})

    def _vectorizer(self) -> Any:
        """The scikit-learn vectorizer these counts equal (kept for reference and for the tests)."""
        from sklearn.feature_extraction.text import CountVectorizer

        return CountVectorizer(vocabulary=self.vocabulary(), lowercase=True, token_pattern=_TOKEN_PATTERN,
                               ngram_range=(1, 3))

    def _counts(self, docs: Sequence[Doc]) -> tuple[Any, Any]:
        """Section-weighted keyword counts (docs x vocab) and weighted token totals (sum_k n_kj).

        Equal to CountVectorizer(vocabulary=..., ngram_range=(1, 3), token_pattern=r"\\b\\w+\\b") on each
        section, but only the keyword n-grams are ever built, which makes 10,000 reports take a second.
        """
        import numpy as np
        from scipy.sparse import csr_matrix

        vocab = self.vocabulary()
        index = {t: i for i, t in enumerate(vocab)}
        phrases = [(t, index[t]) for t in vocab if " " in t]
        words = {t: index[t] for t in vocab if " " not in t}
        weights = self.section_weights or SECTION_WEIGHTS
        tok = re.compile(_TOKEN_PATTERN)
        data: list[float] = []
        cols: list[int] = []
        indptr = [0]
        total = np.zeros(len(docs))
        for r, d in enumerate(docs):
            acc: dict[int, float] = {}
            for name, w in weights.items():
                if w == 0:
                    continue
                text = getattr(d.sections, name)
                if not text:
                    continue
                tokens = tok.findall(text.lower())
                total[r] += w * len(tokens)
                for t in words.keys() & set(tokens):
                    acc[words[t]] = acc.get(words[t], 0.0) + w * tokens.count(t)
                if phrases:
                    joined = " " + " ".join(tokens) + " "
                    for t, j in phrases:
                        n = joined.count(" " + t + " ")
                        if n:
                            acc[j] = acc.get(j, 0.0) + w * n
            cols.extend(acc)
            data.extend(acc.values())
            indptr.append(len(cols))
        counts = csr_matrix((np.asarray(data, dtype=float), np.asarray(cols, dtype=np.int64), np.asarray(indptr)),
                            shape=(len(docs), len(vocab)))
        return counts, total

    def fit(self, texts: Iterable[Any], y: Any = None) -> KeywordScreener:
        """Learn IDF (log(|D| / (1 + df))) of the keyword terms on a corpus."""
        import numpy as np

        docs = _as_docs(texts)
        if not docs:
            raise InputError("cannot fit the screener on an empty corpus")
        counts, _ = self._counts(docs)
        return self.fit_frequencies(np.asarray((counts > 0).sum(axis=0)).ravel(), len(docs))

    def present_terms(self, texts: Iterable[Any]) -> list[list[int]]:
        """Per report, the indices (into vocabulary()) of the keyword terms it contains: its share of df."""
        counts, _ = self._counts(_as_docs(texts))
        return [sorted(int(j) for j in counts.getrow(i).indices) for i in range(counts.shape[0])]

    def fit_frequencies(self, document_frequency: Any, n_docs: int) -> KeywordScreener:
        """Fit from document frequencies counted elsewhere (e.g. kept per stored report): same as fit()."""
        import numpy as np

        if n_docs <= 0:
            raise InputError("cannot fit the screener on an empty corpus")
        idf = np.log(n_docs / (1.0 + np.asarray(document_frequency, dtype=float)))
        self.idf_ = np.maximum(idf, 0.0)  # a term in every document carries no evidence, not negative evidence
        self.vocabulary_ = {t: i for i, t in enumerate(self.vocabulary())}
        self.n_docs_ = n_docs
        return self

    # -- scoring --------------------------------------------------------------------------------

    def keyword_scores(self, docs: Sequence[Doc]) -> dict[str, Any]:
        """score_c(d) = sum_t w_t * TF(t, d) * IDF(t), per category."""
        return self._scores(docs)[0]

    def _scores(self, docs: Sequence[Doc]) -> tuple[dict[str, Any], Any]:
        import numpy as np

        if not hasattr(self, "idf_"):
            raise InputError("the keyword screener is not fitted; call fit(corpus) first")
        counts, total = self._counts(docs)
        tf = counts.multiply(1.0 / np.maximum(total, 1.0)[:, None]).tocsr()
        kw = self.keywords or KEYWORDS
        out = {}
        vocab = self.vocabulary()
        index = {t: i for i, t in enumerate(vocab)}
        for cat, terms in kw.items():
            wv = np.zeros(len(vocab))
            for t, w in terms.items():
                wv[index[t]] = w
            out[cat] = np.asarray(tf @ (wv * self.idf_)).ravel()
        return out, tf

    def _evidence_words(self, tf: Any, row: int, cat: str) -> tuple[str, ...]:
        vocab = self.vocabulary()
        kw = (self.keywords or KEYWORDS)[cat]
        r = tf.getrow(row)
        contrib = [(r[0, i] * kw.get(vocab[i], 0) * self.idf_[i], vocab[i]) for i in r.indices if vocab[i] in kw]
        contrib.sort(reverse=True)
        return tuple(t for v, t in contrib[:6] if v > 0)

    def screen_docs(self, docs: Sequence[Doc]) -> list[Screening]:
        scores, tf = self._scores(docs)
        th = {**THRESHOLDS, **(self.thresholds or {})}
        out = []
        for i, d in enumerate(docs):
            raw = {c: float(scores[c][i]) for c in ("mme", "gcrde")}
            conf = {c: raw[c] / (raw[c] + th[c]) if raw[c] > 0 else 0.0 for c in raw}
            fires = {c: raw[c] >= th[c] for c in raw}
            reasons = []
            if self.use_rules:
                if not d.rules.mme:
                    fires["mme"] = False
                    conf["mme"] *= 0.25
                if d.rules.gcrde < self.gcrde_rule_min:
                    fires["gcrde"] = False
                    conf["gcrde"] *= 0.25
                reasons.append(f"mme rule: {d.rules.mme_why}")
                reasons.append(f"gcrde evidence {d.rules.gcrde:g}: {'; '.join(d.rules.gcrde_why) or 'none'}")
                # a long report (or a corpus where every report says "CUDA") dilutes TF or IDF below the
                # threshold; a stated missing-module error or strong device-comparison evidence still decides
                strong = {"mme": d.rules.mme, "gcrde": d.rules.gcrde >= self.gcrde_rule_min + STRONG_GCRDE_MARGIN}
                for c in ("mme", "gcrde"):
                    if strong[c] and not fires[c]:
                        fires[c] = True
                        conf[c] = max(conf[c], 0.5 + min(d.rules.gcrde, 8.0) / 40 if c == "gcrde" else 0.6)
                        reasons.append(f"{c}: the rule outweighs a keyword score of {raw[c]:.4f} < {th[c]:g}")
            winners = [c for c in ("mme", "gcrde") if fires[c]]
            if winners:
                cat = max(winners, key=lambda c: conf[c])
                evidence = self._evidence_words(tf, i, cat)
                if self.use_rules and cat == "mme":
                    evidence = (d.rules.mme_why, *evidence)
                elif self.use_rules and not evidence:
                    evidence = d.rules.gcrde_why[:3]
            else:
                cat = "other"
                evidence = ()
            conf["other"] = 1.0 - max(conf["mme"], conf["gcrde"]) if cat == "other" else min(
                1.0 - max(conf["mme"], conf["gcrde"]), 0.49)
            out.append(Screening(Category(cat), {k: round(v, 4) for k, v in conf.items()}, evidence,
                                 self.method, False, " | ".join(reasons)))
        return out

    def predict(self, texts: Iterable[Any]) -> list[str]:
        return [s.category.value for s in self.screen_docs(_as_docs(texts))]

    def raw_scores(self, texts: Iterable[Any]) -> dict[str, list[float]]:
        scores = self.keyword_scores(_as_docs(texts))
        return {k: [float(x) for x in v] for k, v in scores.items()}


def default_screener(corpus_texts: Iterable[Any]) -> KeywordScreener:
    """The standard keyword screener, IDF fitted on the given corpus."""
    return KeywordScreener().fit(corpus_texts)


# --------------------------------------------------------------------------------------------
# learned screener
# --------------------------------------------------------------------------------------------

FEATURE_NAMES = (
    "mme_match", "mme_veto", "mme_user", "mme_torchscript", "title_both", "title_diff", "title_one_device",
    "sent_both", "pair", "adjacent", "output_both", "code_both", "code_gpu_text_cpu", "narr_both", "narr_diff", "asym", "both", "perf",
    "oom", "nondet", "setup", "axis", "build", "placement", "gcrde_points", "mme_rule", "gcrde_rule",
)
CLASSES = ("gcrde", "mme", "other")


class LearnedScreener:
    """Calibrated logistic regression over section TF-IDF + rule features; abstains below a precision target."""

    method = "learned"

    def __init__(self, precision_target: float = 0.9, C: float = 1.0, calibration_cv: int = 3,
                 random_state: int = 0, rule_weight: float = 2.0) -> None:
        self.precision_target = precision_target
        self.C = C
        self.rule_weight = rule_weight  # rule features (0/1) count as much as a few strong words
        self.calibration_cv = calibration_cv
        self.random_state = random_state

    @staticmethod
    def _text(d: Doc) -> str:
        s = d.sections
        return f"{s.title}\n{s.title}\n{s.description}\n{s.output}\n{s.code}"

    def _features(self, docs: Sequence[Doc]) -> Any:
        import numpy as np
        from scipy.sparse import csr_matrix, hstack

        rows = []
        for d in docs:
            f = dict(d.rules.flags)
            f["mme_rule"] = float(d.rules.mme)
            f["gcrde_rule"] = float(d.rules.gcrde >= GCRDE_RULE_MIN)
            f["gcrde_points"] = max(-4.0, min(f.get("gcrde_points", 0.0), 8.0)) / 4.0
            rows.append([f.get(n, 0.0) for n in FEATURE_NAMES])
        kw = self.keywords_.keyword_scores(docs)
        kwm = np.column_stack([np.minimum(kw["mme"] / THRESHOLDS["mme"], 5.0), np.minimum(kw["gcrde"] / THRESHOLDS["gcrde"], 5.0)]) / 5.0
        dense = np.hstack([np.asarray(rows) * self.rule_scale_, kwm])
        tfidf = self.tfidf_.transform([self._text(d) for d in docs])
        return hstack([tfidf, csr_matrix(dense)]).tocsr()

    def fit(self, items: Iterable[Any], labels: Sequence[str]) -> LearnedScreener:
        from threadpoolctl import threadpool_limits  # a scikit-learn dependency

        # One BLAS thread: on a few hundred reports L-BFGS (LogisticRegression, the sigmoid calibration)
        # makes thousands of tiny BLAS calls, and waking OpenBLAS's threads for each cost 10-20x the
        # work itself (minutes of a 5-fold evaluation on a busy machine, against well under a second).
        with threadpool_limits(limits=1, user_api="blas"):
            return self._fit(items, labels)

    def _fit(self, items: Iterable[Any], labels: Sequence[str]) -> LearnedScreener:
        import numpy as np
        from sklearn.calibration import CalibratedClassifierCV
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import StratifiedKFold, cross_val_predict

        docs = _as_docs(items)
        y = np.asarray([str(lbl) for lbl in labels])
        bad = sorted(set(y) - set(CLASSES))
        if bad:
            raise InputError(f"unknown labels {bad}; expected mme, gcrde or other")
        counts = {c: int((y == c).sum()) for c in CLASSES}
        if min(counts.values()) < max(2, self.calibration_cv):
            raise InputError(f"too few labelled issues per category to train ({counts}); need >= {max(2, self.calibration_cv)} each")
        self.keywords_ = KeywordScreener().fit(docs)
        self.rule_scale_ = self.rule_weight
        self.tfidf_ = TfidfVectorizer(lowercase=True, ngram_range=(1, 2), min_df=2, sublinear_tf=True,
                                      token_pattern=r"(?u)\b[a-zA-Z_][\w]+\b", max_features=20000)
        self.tfidf_.fit([self._text(d) for d in docs])
        X = self._features(docs)

        def make() -> Any:
            base = LogisticRegression(C=self.C, class_weight="balanced", max_iter=2000)
            cv = min(self.calibration_cv, min(counts.values()))
            return CalibratedClassifierCV(base, method="sigmoid", cv=cv)

        self.model_ = make().fit(X, y)
        # abstention: the lowest confidence whose predictions reached the precision target out-of-fold
        folds = min(5, min(counts.values()))
        proba = cross_val_predict(make(), X, y, cv=StratifiedKFold(folds, shuffle=True, random_state=self.random_state),
                                  method="predict_proba")
        classes = np.asarray(self.model_.classes_)
        pred = classes[proba.argmax(1)]
        conf = proba.max(1)
        self.min_confidence_ = 0.0
        order = np.argsort(-conf)
        correct = (pred == y)[order]
        prec = np.cumsum(correct) / np.arange(1, len(correct) + 1)
        ok = np.where(prec >= self.precision_target)[0]
        if len(ok) and prec[-1] < self.precision_target:
            self.min_confidence_ = float(conf[order][ok[-1]])
        self.classes_ = tuple(classes)
        return self

    def screen_docs(self, docs: Sequence[Doc]) -> list[Screening]:
        if not hasattr(self, "model_"):
            raise InputError("the learned screener is not trained; run `sftl screen --train LABELS.jsonl`")
        if not docs:
            return []
        import numpy as np

        X = self._features(docs)
        proba = self.model_.predict_proba(X)
        # the averaged coefficients and the feature names once per batch, not once per report
        coef = np.mean([est.estimator.coef_ for est in self.model_.calibrated_classifiers_], axis=0)
        names = (list(self.tfidf_.get_feature_names_out()) + [f"rule:{n}" for n in FEATURE_NAMES]
                 + ["keyword score:mme", "keyword score:gcrde"])
        out = []
        for i, d in enumerate(docs):
            scores = {c: round(float(p), 4) for c, p in zip(self.classes_, proba[i], strict=True)}
            cat = max(scores, key=lambda c: scores[c])
            evidence = self._evidence(X, i, cat, d, coef, names)
            abstain = scores[cat] < self.min_confidence_
            reason = (f"needs human triage: confidence {scores[cat]:.2f} < {self.min_confidence_:.2f} "
                      f"(precision target {self.precision_target:g})") if abstain else f"confidence {scores[cat]:.2f}"
            out.append(Screening(Category(cat), {k: scores.get(k, 0.0) for k in ("mme", "gcrde", "other")},
                                 evidence, self.method, bool(abstain), reason))
        return out

    def _evidence(self, X: Any, i: int, cat: str, d: Doc, coef: Any, names: list[str]) -> tuple[str, ...]:
        """The words and rule features that pushed this report towards its category most."""
        k = list(self.model_.classes_).index(cat)
        row = X.getrow(i)
        contrib = sorted(((row[0, j] * coef[k, j], names[j]) for j in row.indices), reverse=True)
        words = [n for v, n in contrib if v > 0][:6]
        if cat == "mme" and d.rules.mme:
            words.insert(0, d.rules.mme_why)
        return tuple(words)

    def predict(self, items: Iterable[Any]) -> list[str]:
        return [s.category.value for s in self.screen_docs(_as_docs(items))]

    def predict_proba(self, items: Iterable[Any]) -> Any:
        return self.model_.predict_proba(self._features(_as_docs(items)))

    # -- artefact -------------------------------------------------------------------------------

    def save(self, path: str | Path) -> Path:
        import os
        import tempfile

        import joblib
        import sklearn

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = {"format": ARTEFACT_FORMAT, "version": ARTEFACT_VERSION, "sklearn": sklearn.__version__, "model": self}
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        os.close(fd)
        joblib.dump(payload, tmp)
        os.replace(tmp, path)  # atomic: a crash never leaves half a model
        return path

    @staticmethod
    def load(path: str | Path) -> LearnedScreener:
        import joblib
        import sklearn

        path = Path(path)
        if not path.exists():
            raise InputError(f"no trained screener at {path}; run `sftl screen --train LABELS.jsonl` first")
        try:
            payload = joblib.load(path)
        except Exception as exc:
            raise InputError(f"the screener artefact {path} is unreadable ({type(exc).__name__}); retrain it") from exc
        if not isinstance(payload, dict) or payload.get("format") != ARTEFACT_FORMAT:
            raise InputError(f"{path} is not an sftl screener artefact")
        if payload.get("version") != ARTEFACT_VERSION or payload.get("sklearn") != sklearn.__version__:
            raise InputError(
                f"the screener at {path} was saved by artefact v{payload.get('version')} / scikit-learn "
                f"{payload.get('sklearn')}; this sftl needs v{ARTEFACT_VERSION} / {sklearn.__version__}: retrain it"
            )
        model = payload["model"]
        if not isinstance(model, LearnedScreener):
            raise InputError(f"{path} does not hold a learned screener")
        return model


def model_path(home: str | Path) -> Path:
    """Where the learned screener lives under settings.home."""
    return Path(home) / "models" / f"screener-v{ARTEFACT_VERSION}.joblib"


def load_labels(path: str | Path) -> tuple[list[Doc], list[str]]:
    """A labelled JSONL: lines with title/body[/error]/label, or a GitHub issue object plus "category"."""
    import json

    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    docs: list[Doc] = []
    labels: list[str] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}:{n}: not JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise InputError(f"{path}:{n}: expected a JSON object")
        label = obj.get("label") or obj.get("category")
        if isinstance(label, dict):
            label = label.get("name")
        if label not in CLASSES:
            raise InputError(f"{path}:{n}: label {label!r} is not mme, gcrde or other")
        docs.append(prepare({"title": obj.get("title") or "", "body": obj.get("body") or "",
                             "error": obj.get("error"), "url": obj.get("html_url") or obj.get("url") or f"line {n}"}))
        labels.append(str(label))
    if not docs:
        raise InputError(f"{path} holds no labelled issues")
    return docs, labels


# --------------------------------------------------------------------------------------------
# the stage
# --------------------------------------------------------------------------------------------


def screen(issue: Issue, extraction: Extraction | None, screener: Any) -> Screening:
    """Screen one issue with a fitted screener (keyword or learned)."""
    return screener.screen_docs([prepare(issue, extraction)])[0]


def screen_many(items: Sequence[Any], screener: Any, extractions: Sequence[Extraction | None] | None = None) -> list[Screening]:
    """Screen many issues in one vectorised pass."""
    exs = list(extractions) if extractions is not None else [None] * len(items)
    docs = [prepare(it, ex) for it, ex in zip(items, exs, strict=True)]
    return screener.screen_docs(docs)


def similar(target_text: str, corpus: Sequence[tuple[str, str]], top: int = 5) -> list[tuple[str, float]]:
    """The most similar corpus entries by TF-IDF cosine: duplicate candidates, best first."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    if not corpus or top <= 0:
        return []
    texts = [t or "" for _, t in corpus]
    vec = TfidfVectorizer(lowercase=True, sublinear_tf=True, token_pattern=r"(?u)\b[a-zA-Z_][\w.]+\b",
                          ngram_range=(1, 2), min_df=1, stop_words="english")
    try:
        X = vec.fit_transform(texts + [target_text or ""])
    except ValueError:  # empty vocabulary: nothing to compare
        return []
    sims = (X[:-1] @ X[-1].T).toarray().ravel()
    order = sorted(range(len(sims)), key=lambda i: -sims[i])[:top]
    return [(corpus[i][0], round(float(sims[i]), 4)) for i in order if sims[i] > 0 and not math.isnan(sims[i])]


MIN_CORPUS = 30  # below this many documents the keyword IDF says nothing; the rules decide alone


def rules_screening(doc: Doc, corpus_size: int) -> Screening:
    """Screening by the rules alone, for stores too small to fit the keyword IDF."""
    r = doc.rules
    cat = Category.MME if r.mme else Category.GCRDE if r.gcrde >= GCRDE_RULE_MIN else Category.OTHER
    scores = {"mme": 1.0 if r.mme else 0.0, "gcrde": round(max(0.0, min(1.0, r.gcrde / (2 * GCRDE_RULE_MIN))), 4)}
    scores["other"] = round(1.0 - max(scores.values()), 4)
    evidence = (r.mme_why,) if cat == Category.MME else r.gcrde_why if cat == Category.GCRDE else ()
    reason = (f"only {corpus_size} issue(s) to fit the keyword IDF on (< {MIN_CORPUS}); the screening rules decided "
              f"(mme: {r.mme_why}; gcrde evidence {r.gcrde:g})")
    return Screening(cat, scores, tuple(evidence), "rules", False, reason)


def screen_corpus(targets: Sequence[Issue], corpus: Iterable[Issue], screener: Any = None) -> list[Screening]:
    """Screen `targets`; without a screener, fit the keyword IDF on `corpus` plus the targets."""
    target_docs = prepare_many(list(targets))
    if screener is not None:
        return list(screener.screen_docs(target_docs))
    keys = {t.key for t in targets}
    others = [c for c in corpus if c.key not in keys]
    all_docs = target_docs + prepare_many(others)
    if len(all_docs) < MIN_CORPUS:
        return [rules_screening(d, len(all_docs)) for d in target_docs]
    return KeywordScreener().fit(all_docs).screen_docs(target_docs)


def duplicate_text(issue: Issue) -> str:
    """What duplicate search compares: title (twice), description, code and output, not the template."""
    s = prepare(issue).sections
    return f"{s.title}\n{s.title}\n{s.description}\n{s.code}\n{s.output}"
