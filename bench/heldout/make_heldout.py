"""Builds the hand-written held-out screening sets from compact row specs (bodies wrapped in the trackers' real templates).

    python bench/heldout/make_heldout.py [1|2|3]   # writes screen_heldout[N].jsonl next to this file

Rows are invented reports written from knowledge of the kinds of issues filed on pytorch/pytorch and
tensorflow/tensorflow; none is copied from the dev set. Labels follow ../shared/data/dev/triage_notes.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

PT_ENVS = [
    ("Ubuntu 22.04.3 LTS (x86_64)", "3.10.12 (main, Nov 20 2023, 15:14:05) [GCC 11.4.0] (64-bit runtime)", "12.1", "True",
     "GPU 0: NVIDIA GeForce RTX 3090", "535.129.03", "Probably one of the following:\n/usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.2"),
    ("Ubuntu 20.04.6 LTS (x86_64)", "3.9.18 (main, Sep 11 2023, 13:41:44)  [GCC 11.2.0] (64-bit runtime)", "11.8", "True",
     "GPU 0: NVIDIA A100-SXM4-80GB\nGPU 1: NVIDIA A100-SXM4-80GB", "525.85.12", "Could not collect"),
    ("macOS 14.2.1 (arm64)", "3.11.7 (main, Dec  4 2023, 18:10:11) [Clang 15.0.0 (clang-1500.1.0.2.5)] (64-bit runtime)", "None", "False",
     "Could not collect", "Could not collect", "Could not collect"),
    ("Microsoft Windows 11 Pro", "3.10.11 (tags/v3.10.11:7d4cc5a, Apr  5 2023, 00:38:17) [MSC v.1929 64 bit (AMD64)] (64-bit runtime)", "12.1", "True",
     "GPU 0: NVIDIA GeForce RTX 4070 Laptop GPU", "546.01", "Could not collect"),
]


def pt_env(version: str, env: int) -> str:
    os_, py, cuda, avail, gpus, drv, cudnn = PT_ENVS[env]
    build = "None" if cuda == "None" else cuda
    return (
        "### Versions\n\n```\nCollecting environment information...\n"
        f"PyTorch version: {version}\nIs debug build: False\nCUDA used to build PyTorch: {build}\nROCM used to build PyTorch: N/A\n\n"
        f"OS: {os_}\nGCC version: (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0\nClang version: Could not collect\nCMake version: version 3.27.7\n"
        "Libc version: glibc-2.35\n\n"
        f"Python version: {py}\nPython platform: Linux-5.15.0-91-generic-x86_64-with-glibc2.35\n"
        f"Is CUDA available: {avail}\nCUDA runtime version: {cuda if cuda != 'None' else 'No CUDA'}\n"
        "CUDA_MODULE_LOADING set to: LAZY\n"
        f"GPU models and configuration: {gpus}\nNvidia driver version: {drv}\ncuDNN version: {cudnn}\n"
        "HIP runtime version: N/A\nMIOpen runtime version: N/A\nIs XNNPACK available: True\n\n"
        "CPU:\nArchitecture:                       x86_64\nModel name:                         AMD Ryzen 9 5900X 12-Core Processor\n\n"
        "Versions of relevant libraries:\n[pip3] numpy==1.26.2\n"
        f"[pip3] torch=={version.split('+')[0]}\n[pip3] triton==2.1.0\n[conda] Could not collect\n```\n"
    )


def pt_body(r: dict) -> str:
    parts = ["### 🐛 Describe the bug\n\n" + r["desc"].strip() + "\n"]
    if r.get("code"):
        parts.append("```python\n" + r["code"].strip() + "\n```\n")
    if r.get("out"):
        parts.append(r.get("outlead", "Output:") + "\n\n```\n" + r["out"].strip() + "\n```\n")
    if r.get("after"):
        parts.append(r["after"].strip() + "\n")
    if r.get("noenv"):
        return "\n".join(parts)
    parts.append(pt_env(r.get("envver") or r.get("version") or "2.1.2+cu121", r.get("env", 0)))
    return "\n".join(parts)


def tf_body(r: dict) -> str:
    cuda, gpu, os_, py = r.get("tfenv", ("12.2/8.9", "NVIDIA RTX 3080 10GB", "Ubuntu 22.04", "3.10"))
    ver = r.get("version") or "2.15"
    return (
        "### Issue type\n\nBug\n\n### Have you reproduced the bug with TensorFlow Nightly?\n\n"
        f"{r.get('nightly', 'No')}\n\n### Source\n\nbinary\n\n### TensorFlow version\n\n{r.get('tfverfield', 'tf ' + ver)}\n\n"
        "### Custom code\n\nYes\n\n"
        f"### OS platform and distribution\n\n{os_}\n\n### Mobile device\n\n_No response_\n\n### Python version\n\n{py}\n\n"
        "### Bazel version\n\n_No response_\n\n### GCC/compiler version\n\n_No response_\n\n"
        f"### CUDA/cuDNN version\n\n{cuda}\n\n### GPU model and memory\n\n{gpu}\n\n"
        f"### Current behavior?\n\n{r['desc'].strip()}\n\n"
        "### Standalone code to reproduce the issue\n\n```shell\n" + (r.get("code") or "").strip() + "\n```\n\n"
        "### Relevant log output\n\n```shell\n" + (r.get("out") or "").strip() + "\n```\n"
    )


def tf_old_body(r: dict) -> str:
    cuda, gpu, os_, py = r.get("tfenv", ("10.1 / 7.6", "GTX 1080 Ti 11GB", "Windows 10", "3.7"))
    ver = r.get("version") or "2.3.0"
    s = (
        "**System information**\n"
        "- Have I written custom code (as opposed to using a stock example script provided in TensorFlow): Yes\n"
        f"- OS Platform and Distribution (e.g., Linux Ubuntu 16.04): {os_}\n"
        "- Mobile device (e.g. iPhone 8, Pixel 2, Samsung Galaxy) if the issue happens on mobile device: N/A\n"
        "- TensorFlow installed from (source or binary): binary\n"
        f"- TensorFlow version (use command below): {r.get('tfverfield', ver)}\n"
        f"- Python version: {py}\n- Bazel version (if compiling from source): N/A\n- GCC/Compiler version (if compiling from source): N/A\n"
        f"- CUDA/cuDNN version: {cuda}\n- GPU model and memory: {gpu}\n\n"
        f"**Describe the current behavior**\n{r['desc'].strip()}\n\n"
        f"**Describe the expected behavior**\n{r.get('expected', 'It should work.')}\n\n"
        "**Standalone code to reproduce the issue**\n"
    )
    if r.get("code"):
        s += "```python\n" + r["code"].strip() + "\n```\n"
    s += "\n**Other info / logs** Include any logs or source code that would be helpful to diagnose the problem.\n"
    if r.get("out"):
        s += "```\n" + r["out"].strip() + "\n```\n"
    return s


def free_body(r: dict) -> str:
    s = r["desc"].strip() + "\n"
    if r.get("code"):
        s += "\n```" + r.get("lang", "python") + "\n" + r["code"].strip() + "\n```\n"
    if r.get("out"):
        s += "\n" + r.get("outlead", "") + "\n```\n" + r["out"].strip() + "\n```\n"
    if r.get("after"):
        s += "\n" + r["after"].strip() + "\n"
    return s


STYLES = {"pt": pt_body, "tf": tf_body, "tfold": tf_old_body, "free": free_body}


def build(rows: list[dict], start: dict[str, int]) -> list[dict]:
    out = []
    n = dict(start)
    for r in rows:
        fw = r["fw"]
        n[fw] += 7
        url = (f"https://github.com/pytorch/pytorch/issues/{n[fw]}" if fw == "pytorch"
               else f"https://github.com/tensorflow/tensorflow/issues/{n[fw]}")
        out.append({
            "url": url, "framework": fw, "label": r["label"], "title": r["title"], "error": r.get("error"),
            "version": r.get("version"), "body": STYLES[r["style"]](r), "why": r["why"],
        })
    return out


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "1"
    if which == "1":
        from rows1 import ROWS  # type: ignore[import-not-found]
        dest, start = HERE / "screen_heldout.jsonl", {"pytorch": 900100, "tensorflow": 90100}
    elif which == "2":
        from rows2 import ROWS  # type: ignore[import-not-found]
        dest, start = HERE / "screen_heldout2.jsonl", {"pytorch": 950100, "tensorflow": 95100}
    else:
        from rows3 import ROWS  # type: ignore[import-not-found]
        dest, start = HERE / "screen_heldout3.jsonl", {"pytorch": 970100, "tensorflow": 97100}
    rows = build(ROWS, start)
    dest.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    from collections import Counter
    print(dest.name, len(rows), Counter(r["label"] for r in rows))
