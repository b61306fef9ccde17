"""The screening rules: is a missing-module error stated (mme), and how many points of CPU/GPU-comparison evidence (gcrde)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sftl.extract import stops_at_import
from sftl.model import Extraction
from sftl.screen.one_device import CUDA_FAILURE, one_device_failure
from sftl.screen.one_device import POINTS as ONE_DEVICE_POINTS
from sftl.screen.sections import Sections

GCRDE_RULE_MIN = 2.5  # device-comparison evidence needed (see gcrde_evidence)
STRONG_GCRDE_MARGIN = 1.5  # this much above GCRDE_RULE_MIN, the rule decides even below the keyword threshold

FRAMEWORK_MODULES = re.compile(
    r"^(?:torch|tensorflow|tensorflow_core|tf|keras|tf_keras|torchvision|torchaudio|torchtext|caffe2|functorch|"
    r"tensorboard|tensorflow_estimator|tensorflow_probability|_pywrap_tensorflow\w*|pywrap_tensorflow\w*|"
    r"tensorflow_addons|tensorflow_hub|torch_\w+|torchdynamo|torchinductor|triton|onnx|_C)(?:\.|$)"
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
_TITLE_FRAMEWORK = re.compile(r"(?i)\b(?:py)?torch(?:run|vision|audio|dynamo|inductor)?\b|\btensorflow\b|\btf\.\w|\bkeras\b")
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
    cut_in_import = False
    if extraction and extraction.traceback:
        frames = extraction.traceback.frames
        # where it was raised: the innermost frame
        fw_frames = bool(frames) and bool(frames[-1].repo_path)
        last_user = bool(frames) and not frames[-1].repo_path and not frames[-1].path.startswith("<")
        # a trace that stops at an import statement was cut: the error came from the module being imported,
        # whose frames are not shown; a title naming the framework says whose module that was
        cut_in_import = stops_at_import(frames) and _TITLE_FRAMEWORK.search(sections.title) is not None
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
            if kind in ("module-attr", "import-name") and owner and not fw_frames and not cut_in_import and not (
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
    # a device string ('cuda:0', "cuda:1") is a device, not a CUDA version
    r"(?i)\b(?!cuda:\d+\b(?!\.\d))(?:cuda|cudnn|cuda\s*/\s*cudnn)\s*(?:version|toolkit|runtime|driver)?\s*[:=]?\s*v?\d+(?:\.\d+)*"
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
    # a precision comparison: "in float32 the outputs are fine"
    r"|\b(?:in|with|using|under) (?:full precision|float32|fp32|float64|fp64|double(?: precision)?)\b[^.\n]{0,40}"
    r"\b(?:fine|correct\w*|ok|expected|works?|right)\b"
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
# cmake/bazel as words, not as parts of a path ("/home/u/pytorch-cmake/aten/...", "bazel-out/k8-opt/bin/tensorflow/...")
_BUILD = re.compile(r"(?i)(?<![-/\w.])(?:cmake|bazel)\b(?![-\w.]*/)|build(?:ing)? from source|"
                    r"compil(?:e|ing|ation) (?:from|pytorch|tensorflow)")
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


def default_and_gpu_call(code: str) -> bool:
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
    "axis": ("jit_compile", "xla", "eager", "windows", "compile", "inductor", "numpy", "scipy", "mpmath", "wolfram",
             "float32", "fp32", "float64", "fp64", "double", "full precision"),
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
    """'happens on both CPU and CUDA' -- unless the sentence says the devices differ; 'CPU and GPU agree' always.

    A sentence that goes on to contrast the devices ("both raise for 2x2; for 3x3 the CPU raises while the GPU
    returns") is no agreement."""
    agree = (_AGREE.search(sentence) is not None and not _EXPECT.search(sentence) and not _CONDITIONAL.search(sentence)) or (
        _has("both", sentence) and not _DEVDIFF.search(sentence))
    if not agree:
        return False
    hit = _both_hit(sentence)
    return not (hit and _has("pair", sentence[hit.end():]))


def _both_hit(sentence: str) -> re.Match[str] | None:
    return _find("both", sentence) or _AGREE.search(sentence)


_RUN_VARIATION = re.compile(r"between (?:runs|executions|calls)|run[- ]to[- ]run|(?:every|each) (?:run|time)|across runs|"
                            r"repeated(?:ly)? (?:runs?|executions?)|\btwice\b|\bvary\b|\bvaries\b")
_ACROSS_DEVICES = re.compile(r"\b(?:between|across) (?:the )?(?:two )?devices\b|\bdevice[- ]dependent\b|"
                             r"\bdepend(?:s|ing)? on (?:the )?device\b")
# device-mismatch errors name devices and "mismatch" without comparing results
_DEVICE_MISMATCH = re.compile(r"same device|device mismatch|found at least two devices|devices? (?:do not|don't) match")


# A result called wrong (not an error raised): a title naming one device with these words says the result
# is wrong there ("Wrong results for topk on CUDA", "cuda softmax is incorrect for large tensors")
_WRONG_RESULT = re.compile(
    r"\bwrong\b|\bincorrect\w*|\bbuggy\b|\bbroken\b|\bgarbage\b|\bcorrupt\w*|\bbogus\b|\binaccura\w*|\bnonsens\w*|"
    r"\bignor(?:es|ed|ing) (?:the )?['\"`]?nans?\b|\bsilently\b"
    # "returns a different shape on cuda", "result differs on GPU", "NaN on GPU only": the other device implied
    r"|\bdiffer\w*|\bdifferent\b|\bmismatch\w*|\binconsisten\w*|\bdiscrepan\w*|"
    r"\b(?:gpu|cuda|mps|cpu) only\b|\bonly (?:on|with) (?:the )?(?:gpu|cuda|mps|cpu)\b"
    # "floormod not throwing a division-by-zero error on GPU": the check the other device makes is missing
    r"|\b(?:not|n't|never|no longer|without) (?:\w+ )?(?:throw|rais|report|flag)\w*"
)
# "bug" names a wrong result only in a title that names no failure (a crash, an error, a hang is no result)
_BUG_WORD = re.compile(r"\bbugs?\b")
_TITLE_FAILURE = re.compile(
    r"\berror\w*|\bexception\b|\bcrash\w*|\bfail\w*|\braise\w*|\bassert\w*|\babort\w*|\bsegfault\w*|"
    r"segmentation|\bhang\w*|\bfreez\w*|\bkill\w*|\bwarn\w*|\bleak\w*"
)
# a title about training, mixed precision, set-up or several GPUs: a wrong loss or a wrong install is no op's result
_TITLE_NOT_AN_OP = re.compile(
    r"\binstall\w*|\bimport\w*|\bsupport\w*|\bavailable\b|\bdetect\w*|\bdriver\b|\bbuild\w*|\bcompil\w*|"
    r"\bamp\b|autocast|mixed[- ]precision|half[- ]precision|\bloss(?:es)?\b|\btrain\w*|\bepochs?\b|\bcheckpoint\w*|\bdistributed\b|"
    r"\bddp\b|\bmulti-?gpus?\b|\bnccl\b|\bversion\b|dataparallel|\bfsdp\b|"
    # the device's own bookkeeping (its index, name, memory, streams, graphs), or the reporter's own kernel
    r"\btorch\.cuda\.|\bcuda\.(?:current|device|get|set|mem|max)|current_device|device[ _](?:index|name|count|id|ordinal|"
    r"capability|properties)|\bmemory\b|nvidia-smi|\bstreams?\b|cuda ?graphs?|\bcustom\b|\bextensions?\b|"
    r"load_inline|\btriton\b|\bnumba\b|\bcupy\b|"
    # the data pipeline, and seeded random streams (which differ across devices by design)
    r"dataloader|pin_memory|num_workers|\bseeds?\b|manual_seed|\brng\b|reproduc\w*"
)
# a title measuring against something other than the other device (NumPy, another release, eager, the docs)
_OTHER_REFERENCE = re.compile(
    r"(?<!\.)\b(?:numpy|scipy|jax)\b|\bonnx\w*|tensorrt|openvino|\bmatlab\b|\breference\b|\bdocs?\b|documentation|"
    r"\bversions?\b|\brelease\b|\bupgrad\w*|\bupdat\w*|\bnightly\b|\beager\b|\bgraph mode\b|\bcompile\w*|\bjit\b|"
    r"\bscript\w*|\btrac(?:e|ed|ing)\b|\bexport\w*|\bquantiz\w*|\bpython\b|\b(?:pytorch|tensorflow|torch|tf) \d"
)
# the snippet or its output shows the op running on the GPU
_OUT_GPU_TENSOR = re.compile(r"device='(?:cuda|mps)|\.cuda\(\)|\.to\(\s*['\"](?:cuda|mps)")
# output lines that are console output, not the reporter's words: tracebacks, error and log lines, prompts, prints
_NOT_PROSE = re.compile(
    r"^\s*(?:traceback\b|file \"|at \S|\w*(?:error|exception|warning|exit)\b[^ ]*:|\d{4}-\d\d-\d\d|[ewif]\d{4} |"
    r"[ewif] (?:tensorflow|external|third_party)/|>>>|\.\.\.|in \[\d+\]|out\[\d+\]|={3,}|-{3,}|\$ |tensor\(|"
    r"\[\w+\]\s)",
    re.I,
)
_WORD = re.compile(r"[A-Za-z]{2,}")
_CODE_LINE = re.compile(r"^(?:[\w.\[\], ]+\s*[-+*/]?=[^=]|(?:import|from|def|class|for|if|with|print|return|assert)\b)")


def output_prose(output: str) -> list[str]:
    """The output section's lines that read as the reporter's sentences ("CPU result is correct.") rather than
    console output: a pasted observation often holds both, and a sentence about the devices is evidence
    wherever the reporter put it."""
    keep = []
    for line in output.split("\n"):
        text = line.strip().strip("()").strip()
        if not text or _NOT_PROSE.match(text):
            continue
        words = _WORD.findall(text)
        letters = sum(len(w) for w in words)
        visible = sum(1 for ch in text if not ch.isspace())
        if len(words) >= 3 and letters >= 0.5 * visible and not _CODE_LINE.match(text):
            keep.append(text)
    return keep


# "CPU result:", "out_gpu =", "GPU  Result": a printed value labelled by device (not a time, a count, a memory figure)
_NOT_RESULT = r"(?:time|times|speed|elapsed|memory|mem|usage|util\w*|load|num|count|devices?|name|version|available|took)"
_LABEL_LINE = re.compile(
    rf"(?im)^\W*(?:(?!{_NOT_RESULT}\b)\w+[_ ])?(cpu|gpu|cuda|mps)(?:[_ ](?!{_NOT_RESULT}\b)\w+)?"
    r"\s*(?:[:=]|(?:results?|outputs?|out)\b)\W*(.*)$"
)
_DEVICE_SUFFIX = re.compile(r",?\s*device='[^']*'|,?\s*dtype=[\w.]+|\s+")


def labelled_results_differ(output: str) -> bool:
    """Does the output label a CPU result and a GPU result ("CPU: tensor([1.])", "GPU Result" above its value)
    whose printed values differ?"""
    low = output.lower()
    if "cpu" not in low or not any(w in low for w in _GPU_WORDS):
        return False
    lines = output.split("\n")
    values: dict[str, str] = {}
    for i, line in enumerate(lines):
        m = _LABEL_LINE.match(line)
        if not m:
            continue
        side = "cpu" if m.group(1).lower() == "cpu" else "gpu"
        value = m.group(2).strip()
        if not value:  # the label on its own line: the value follows, up to the next blank or labelled line
            rest = []
            for nxt in lines[i + 1:]:
                if not nxt.strip() or _LABEL_LINE.match(nxt):
                    break
                rest.append(nxt)
            value = " ".join(rest)
        value = _DEVICE_SUFFIX.sub("", value)
        if re.search(r"\d", value) and side not in values:
            values[side] = value
    return len(values) == 2 and values["cpu"] != values["gpu"]


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
    # the reporter's sentences pasted among the output ("CPU result is correct.") are read with the description
    described = "\n".join([sections.description, *output_prose(sections.output)])
    desc_raw = _NO_GPU.sub(" ", _ENV_MENTION.sub(" ", _HIDDEN_GPU.sub(" use the cpu ", _UNTESTED.sub(
        " ", _DETERMINISM_ON.sub(" ", described)))))
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
    # "Wrong results for topk on CUDA": the title calls the result wrong on one device, the other implied right
    title_wrong = _WRONG_RESULT.search(title) is not None or (
        _BUG_WORD.search(title) is not None and _TITLE_FAILURE.search(title) is None)
    title_wrong_on = ("gpu" if t_gpu else "cpu") if t_cpu != t_gpu and title_wrong and not (
        CUDA_FAILURE.search(title) or _TITLE_NOT_AN_OP.search(title) or _OTHER_REFERENCE.search(title)
        or _has("axis", title) or _has("setup", title)) else ""
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
        code_cpu = default_and_gpu_call(sections.code)
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
    if title_wrong_on == "gpu":
        pts += 1.5
        why.append("the title calls the result wrong on the GPU")
        if code_gpu or _OUT_GPU_TENSOR.search(sections.output):
            pts += 1.0
            why.append("the snippet shows it on the GPU")
    elif title_wrong_on == "cpu":
        pts += 1.0
        why.append("the title calls the result wrong on the CPU")
    if code_cpu and code_gpu:
        pts += 1.5
        why.append("the snippet runs on both devices")
        if t_cpu != t_gpu and not title_wrong_on and not (
                _TITLE_FAILURE.search(title) or _TITLE_NOT_AN_OP.search(title) or _OTHER_REFERENCE.search(title)
                or CUDA_FAILURE.search(title) or _DEVICE_MISMATCH.search(title) or _has("axis", title)
                or _has("setup", title) or "same" in title or "type" in title):
            pts += 1.0  # "tf.gather produces zeros for invalid indices on GPU" over a snippet run on both devices
            why.append("the title names what one device does; the snippet runs both")
        if title_wrong and not (t_cpu or t_gpu) and not (
                _TITLE_NOT_AN_OP.search(title) or _OTHER_REFERENCE.search(title) or _has("axis", title) or title_nondet):
            pts += 1.0  # "torch.norm produces incorrect results" over a snippet that runs it on both devices
            why.append("the title calls the result wrong")
    elif code_gpu and n_cpu:
        pts += 1.0
        why.append("the snippet moves to GPU; the text names CPU")
    if n_cpu and n_gpu and n_diff:
        pts += 1.0
        why.append("CPU, GPU and a difference word in the text")
    if out_both:
        pts += 1.0
        why.append("the output shows a CPU result and a GPU result")
    f["labelled_differ"] = float(labelled_results_differ(sections.output))
    if f["labelled_differ"]:
        pts += 1.5
        why.append("the CPU and GPU results it labels differ")
    if f["asym"]:
        pts += 1.0
        why.append("works on one device, not the other")
    f["implicit"] = float(min(2 * implicit_title + implicit_sents, 3))
    if f["implicit"]:
        # the other run is implied: the model before `.to("cuda")`, or the run with the GPU hidden
        pts += f["implicit"]
        why.append("results change when moving to the GPU / hiding it")
    one_device = one_device_failure(f"{narrative}\n{sections.output}")
    f["one_device"] = float(bool(one_device))
    if one_device:  # one device raising while the other returns is a discrepancy (../shared/README.md)
        pts += ONE_DEVICE_POINTS
        why.append(one_device)
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
        if name == "setup" and one_device:
            continue  # the CUDA failure is the discrepancy, not a set-up problem
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
