"""The environment a report ran in: framework and version, Python, CUDA/cuDNN, OS and GPU, from templates, collect_env, pip lines and prose."""

from __future__ import annotations

import re

from sftl.model import Environment

VERSION = r"\d+\.\d+(?:\.\d+)*(?:(?:[-.]?(?:dev|rc|a|b|alpha|beta|post|head)\d*)+)?(?:\+\w+(?:\.\w+)*)?"
_NA = re.compile(r"^(?:_?no response_?|n/?a|none|not applicable|-|unknown|no|yes|\?|tbd|na)\.?$", re.I)
_DESCRIBE = re.compile(r"v?\d+\.\d+[\w.\-]*-g[0-9a-f]{6,}'?\s*,?\s*'?(?P<v>" + VERSION + ")")

_FW_WORDS = {
    "pytorch": r"(?:py)?torch|libtorch|caffe2",
    "tensorflow": r"(?:lib)?tensorflow(?:[-_](?:gpu|cpu|macos|intel))?|tf[-_]nightly(?:[-_](?:gpu|cpu))?|tf|keras",
}


def _first(patterns: list[str], text: str, flags: int = re.I | re.M) -> str | None:
    for pat in patterns:
        m = re.search(pat, text, flags)
        if m:
            val = (m.group("v") if "v" in m.groupdict() else m.group(1)).strip().strip("`*'\"")
            if val and not _NA.match(val):
                return val
    return None


def _field(label: str, text: str) -> str | None:
    """A `Label: value` line, a `- **Label**: value` bullet or a `### Label` form section."""
    pats = [
        # the prefix stays on its line ([ \t...] not \s): from every line start \s* ran over all blank lines below
        rf"^[ \t\r\f\v>*-]*\**{label}\**[^:\n]{{0,60}}:\**\s*(?P<v>[^\n]+)",
        rf"^#+\s*{label}[^\n]*\n+\s*(?P<v>[^\n#]+)",
    ]
    return _first(pats, text)


def _version_in(value: str | None) -> str | None:
    if not value:
        return None
    m = _DESCRIBE.search(value)
    if m:
        return m.group("v")
    m = re.match(r"\s*r(\d+\.\d+)\b", value) or re.search(r"(?<![\w.])v?(" + VERSION + r")", value)  # r2.2: a branch
    return m.group(1) if m else None


def _version_text(text: str, framework: str | None, version: str | None) -> str | None:
    """The template's version field as written, when it says more than the number read from it (a branch,
    a date, an era, two lines): `sftl.releases` reads it; None when the field is absent or is that number."""
    label = {"pytorch": r"PyTorch version", "tensorflow": r"(?:TensorFlow|TF) version"}.get(framework or "")
    value = _field(label, text) if label else None
    if not value:
        return None
    value = " ".join(value.split())[:160]
    if version is not None and re.fullmatch(r"v?" + re.escape(version), value):
        return None
    return value


def parse_environment(text: str, framework_hint: str | None = None) -> Environment:
    """Framework and version, Python, CUDA/cuDNN, OS and GPU from collect_env, templates, pip lines and prose."""
    framework, version = _framework_version(text, framework_hint)
    python = _version_in(_field(r"Python version", text)) or _first(
        [r"\bpython\s*(?:version)?\s*[:=]?\s*v?(?P<v>[23]\.\d{1,2}(?:\.\d+)?)\b", r"\bpy(?:thon)?(?P<v>3\.\d{1,2})\b"], text
    )
    cuda = None
    cudnn = None
    pair = _field(r"CUDA\s*/\s*cuDNN version", text)
    if pair:
        nums = re.findall(r"\d+(?:\.\d+)+|\d+", pair)
        if nums:
            cuda = nums[0]
            cudnn = nums[1] if len(nums) > 1 else None
    cuda = cuda or _version_in(_field(r"CUDA used to build PyTorch", text)) or _version_in(
        _field(r"CUDA runtime version", text)) or _first(
        [r"\bCUDA(?: version| toolkit)?\s*[:=]?\s*v?(?P<v>\d{1,2}\.\d(?:\.\d+)?)\b", r"\bcu(?:da)?(?P<v>1[0-2]\d|[89]\d)\b"], text
    )
    if cuda and re.fullmatch(r"1[0-2]\d|[89]\d", cuda):  # cu113 -> 11.3
        cuda = f"{cuda[:-1]}.{cuda[-1]}"
    cudnn = cudnn or _version_in(_field(r"cuDNN version", text)) or _first(
        [r"\bcu[dD][nN][nN]\s*(?:version)?\s*[:=]?\s*v?(?P<v>\d\.\d+(?:\.\d+)?)", r"libcudnn\.so\.(?P<v>\d+\.\d+\.\d+)"], text
    )
    os_name = _field(r"OS(?: Platform and Distribution)?(?: \(e\.g\.,[^)]*\))?", text) or _first(
        [r"\b(?P<v>(?:Ubuntu|Debian|CentOS|Fedora|Arch Linux|RHEL|Red Hat|Windows|macOS|Mac OS X?|OS X|Linux)"
         r"(?:\s+(?:Server\s+)?\d+(?:\.\d+)*(?:\s*LTS)?)?)"], text, re.M
    )
    if os_name:
        os_name = re.sub(r"\s*\(e\.g\.[^)]*\)", "", os_name).strip()[:80] or None
    gpu = _field(r"GPU models? and (?:configuration|memory)", text) or _first(
        [r"(?P<v>\b(?:NVIDIA\s+)?(?:GeForce\s+)?(?:GTX|RTX|Tesla|Quadro|TITAN|Titan)\s*[\w-]*(?:\s+(?:Ti|SUPER|\d+GB))?"
         r"|\b(?:NVIDIA\s+)?(?:A100|H100|H200|V100|P100|T4|K80|A10G?|L4|A6000)\b"
         r"|\bApple M\d(?: Pro| Max| Ultra)?)"], text, re.M
    )
    if gpu:
        gpu = gpu.strip()[:120]
        if re.match(r"(?i)^(?:no|none|n/a|cpu|not|0)\b", gpu) or re.match(r"(?i)^could not collect", gpu):
            gpu = None
    env = {"framework": framework, "version": version, "python": python, "cuda": cuda, "cudnn": cudnn,
           "os": os_name, "gpu": gpu}
    missing = tuple(k for k, v in env.items() if not v)
    return Environment(missing=missing, version_text=_version_text(text, framework, version), **env)


# words before a version naming a release other than the one the report runs on
_OTHER_RELEASE = re.compile(
    r"(?i)\b(?:saved|exported|trained|created|serialized|built|worked|works|working|used to|fine|upgrad\w* from|"
    r"downgrad\w*|previous(?:ly)?|older|earlier|before|prior)\b[^.\n]{0,15}$"
)


_BARE_VERSION = re.compile(
    r"(?i)(?<![\w.])(?:versions?|ver\.|版本|升级到|更新到|upgrad(?:ed|ing) to|updat(?:ed|ing) to)\s*(?:is\s*)?[:=：]?\s*v?(?P<v>"
    + VERSION + r")(?![\w])"
)
_OTHER_COMPONENT = re.compile(
    r"(?i)python|\bpy\b|cuda|cudnn|driver|gcc|clang|cmake|bazel|\bos\b|ubuntu|windows|macos|linux|numpy|protobuf|"
    r"scipy|pandas|pillow|transformers|onnx|opset|nccl|rocm|xcode|ios|android|api level|model|dataset|file|schema|"
    r"torchvision|torchaudio|keras|jax|triton|driver|firmware|\bpip\b|conda"
)


def _framework_version(text: str, hint: str | None) -> tuple[str | None, str | None]:
    cands: list[tuple[float, str, str]] = []  # (priority, framework, version)

    def add(pri: float, fw: str, val: str | None) -> None:
        v = _version_in(val)
        if v:
            cands.append((pri, fw, v))

    add(0, "pytorch", _field(r"PyTorch version", text))
    tfv = _field(r"(?:TensorFlow|TF) version", text)
    add(0, "tensorflow", tfv)
    for m in re.finditer(r"(?:torch|tf|tensorflow|keras)\.(?:__version__|version\.VERSION)\s*\)?['\"]?\)?(?:\s*\n|\s*```\w*)+\s*"
                         r"(?:Out\[\d+\]:\s*)?['\"]?(?P<v>" + VERSION + ")", text):
        fw = "pytorch" if "torch" in m.group(0) else "tensorflow"
        add(1, fw, m.group("v"))
    for m in re.finditer(r"(?:torch|tensorflow|tf)\.__version__\s*(?:=|==|:|is)\s*['\"]?(?P<v>" + VERSION + ")", text):
        add(1, "pytorch" if "torch" in m.group(0) else "tensorflow", m.group("v"))
    # pip freeze / pip list / conda list lines
    for m in re.finditer(
        r"^[ \t\r\f\v>*-]*(?:\[\w+\]\s*)?\b(?P<n>torch|pytorch|tensorflow(?:-gpu|-cpu|-macos|-intel)?|tf-nightly(?:-gpu|-cpu)?|tf_nightly)"
        r"(?:==|\s+|\s*=\s*)(?P<v>" + VERSION + r")",
        text,
        re.M | re.I,
    ):
        name = m.group("n").lower()
        add(2, "pytorch" if "torch" in name else "tensorflow", m.group("v"))
    # docker images: tensorflow/tensorflow:2.4.1-gpu, pytorch/pytorch:1.9.0-cuda11.1-cudnn8-runtime
    for m in re.finditer(r"\b(?P<n>tensorflow|pytorch)/(?:tensorflow|pytorch):(?P<v>" + VERSION + ")", text):
        add(2, "pytorch" if m.group("n") == "pytorch" else "tensorflow", m.group("v"))
    # prose: "on TF 2.4.1", "PyTorch 1.5.1", "tensorflow-gpu 2.0", "TF2.0", "torch==2.0.0"
    for fw, words in _FW_WORDS.items():
        for m in re.finditer(
            rf"(?<![A-Za-z0-9/.])(?:{words})(?:[\s_]*(?:versions?|ver\.?|v|==|=|:|is|was|release|-|,|from source at tag|tag|版本|バージョン|версия|versión)?[\s_：(]*){{1,3}}"
            rf"v?(?P<v>{VERSION})(?![\w])",
            text,
            re.I,
        ):
            # "torch version 1.13.1" states the version in use; "saved with torch 2.0", "worked on TF 2.9"
            # name another release the report only compares with
            before = text[max(0, m.start() - 40):m.start()]
            pri = 3.0 if re.search(r"(?i)versions?|版本", m.group(0)) else 3.2
            if _OTHER_RELEASE.search(before):
                pri = 3.5
            add(pri, fw, m.group("v"))
        for m in re.finditer(rf"(?<![A-Za-z0-9/.])(?:{words})-(?P<v>{VERSION})[-.](?:cp\d|manylinux|win|macos|linux|jar)", text, re.I):
            add(3, fw, m.group("v"))
    if cands:
        cands.sort(key=lambda c: c[0])
        pri, fw, v = cands[0]
        # the framework the report is about wins over a stray mention of the other one
        same = [c for c in cands if c[0] == pri and c[1] == (hint or fw)]
        if same:
            pri, fw, v = same[0]
        return hint or fw, v
    if re.search(r"tf[-_]nightly", text, re.I):
        return "tensorflow", "nightly"
    fw_guess = hint or _guess_framework(text)
    if fw_guess:
        # last resort, in a report about one framework: a bare "version 1.9.0" / "升级到 2.3.0" that no
        # other component (Python, CUDA, driver, OS, a library) claims
        for m in _BARE_VERSION.finditer(text):
            line_start = text.rfind("\n", 0, m.start()) + 1
            if not _OTHER_COMPONENT.search(text[max(line_start, m.start() - 24):m.start()]):
                return fw_guess, m.group("v")
    return fw_guess, None


def _guess_framework(text: str) -> str | None:
    torch = len(re.findall(r"\b(?:torch|pytorch|cuda\(\))\b", text, re.I))
    tf = len(re.findall(r"\b(?:tensorflow|tf\.|keras)", text, re.I))
    if torch == tf == 0:
        return None
    return "pytorch" if torch > tf else "tensorflow"


def framework_from(repo: str, code: str, text: str) -> str | None:
    """pytorch/tensorflow from the repository name, then the snippet's imports, then the text."""
    r = (repo or "").lower()
    if "pytorch" in r or r.endswith("/torch") or "torchvision" in r:
        return "pytorch"
    if "tensorflow" in r or "keras" in r:
        return "tensorflow"
    if re.search(r"^\s*(?:import|from)\s+torch", code, re.M):
        return "pytorch"
    if re.search(r"^\s*(?:import|from)\s+(?:tensorflow|keras)", code, re.M):
        return "tensorflow"
    return _guess_framework(text)
