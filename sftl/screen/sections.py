"""A report read in sections (title, description, code, output, template boilerplate), apart from its tracker template."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sftl.extract import classify_block, clean_text, doctest_to_script, segments

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
_IPY_IN = re.compile(r"^\s*In \[\d*\]:\s?(.*)$")
_IPY_MORE = re.compile(r"^\s*\.{3,}:\s?(.*)$")


def ipython_to_script(text: str) -> tuple[str, str] | None:
    """An IPython session (`In [3]: ...` / `   ...: ...`) -> (its input as a script, what it printed); None otherwise."""
    lines = text.split("\n")
    if not any(_IPY_IN.match(line) for line in lines):
        return None
    code: list[str] = []
    printed: list[str] = []
    for line in lines:
        m = _IPY_IN.match(line) or _IPY_MORE.match(line)
        if m:
            code.append(m.group(1))
        elif not re.match(r"^\s*Out\[\d*\]:\s*$", line):
            printed.append(re.sub(r"^\s*Out\[\d*\]:\s?", "", line))
    script = "\n".join(code).strip("\n")
    return (script, "\n".join(printed).strip("\n")) if script else None


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
    title = clean_text(title, "title", problems).replace("\n", " ")
    body = clean_text(body, "body", problems)
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
        session = ipython_to_script(seg.text)
        if session:
            code.append(session[0])
            if session[1].strip():
                out.append(session[1])
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
