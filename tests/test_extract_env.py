"""Extraction: environment from collect_env, TF templates, pip/conda lines, printed versions and prose; bad input."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from sftl.extract import extract, extract_text, parse_environment
from sftl.github import issue_from_json

REPORTS = Path(__file__).resolve().parent.parent / "fixtures" / "reports"


def load(name: str):
    return issue_from_json(json.loads((REPORTS / f"{name}.json").read_text(encoding="utf-8")))


def test_collect_env() -> None:
    env = extract(load("gcrde__collect_env_histc_cpu_vs_cuda")).environment
    assert env.framework == "pytorch"
    assert env.version == "2.1.0+cu121"
    assert env.python == "3.10.12"
    assert env.cuda == "12.1"
    assert env.cudnn == "8.9.6"
    assert env.os == "Ubuntu 22.04.3 LTS (x86_64)"
    assert env.gpu == "GPU 0: NVIDIA GeForce RTX 3090"
    assert env.missing == ()


def test_tf_template_git_describe_version() -> None:
    env = extract(load("mme__tf_template_session_removed")).environment
    assert (env.framework, env.version, env.python) == ("tensorflow", "2.6.0", "3.8.10")
    assert (env.cuda, env.cudnn) == ("11.2", "8.1")
    assert env.os == "Windows 10"
    assert env.gpu == "GeForce RTX 2080 Ti 11GB"


def test_tf_form_template_with_no_response_fields() -> None:
    env = extract(load("other__tf_form_template_feature_request")).environment
    assert (env.framework, env.version, env.python, env.cuda, env.cudnn) == ("tensorflow", "2.15.0", "3.11", "12.2", "8.9")
    assert env.os == "Linux Ubuntu 22.04"


@pytest.mark.parametrize(
    ("text", "framework", "version"),
    [
        ("I'm on TF 2.4.1 and it fails.", "tensorflow", "2.4.1"),
        ("pip freeze:\ntorch==1.12.1+cu113\nnumpy==1.23.0", "pytorch", "1.12.1+cu113"),
        ("Package    Version\n---------- -------\ntensorflow 2.9.1\nnumpy 1.22", "tensorflow", "2.9.1"),
        ("conda list:\npytorch    1.13.1    py3.9_cuda11.7_cudnn8.5.0_0    pytorch", "pytorch", "1.13.1"),
        (">>> import torch\n>>> torch.__version__\n'2.1.0.dev20230601+cu118'", "pytorch", "2.1.0.dev20230601+cu118"),
        ("print(tf.__version__)\n```\n```\n2.15.0-dev20230914\n", "tensorflow", "2.15.0-dev20230914"),
        ("Using tf-nightly 2.17.0.dev20240301 on Colab.", "tensorflow", "2.17.0.dev20240301"),
        ("installed tensorflow-gpu==2.2.0 from pip", "tensorflow", "2.2.0"),
        ("PyTorch version: 1.3.0a0+354ecc4\nIs debug build: No", "pytorch", "1.3.0a0+354ecc4"),
        ("My TensorFlow version is 0.12.0.", "tensorflow", "0.12.0"),
        ("In my py3env_pytorch_1.2 virtualenv import fails", "pytorch", "1.2"),
        ("with libtensorflow-1.9.0.jar from Maven", "tensorflow", "1.9.0"),
        ("TF2.0 gradient differs", "tensorflow", "2.0"),
        ("TF Version: unknown 1.14.0", "tensorflow", "1.14.0"),
        ("in the tensorflow/tensorflow:2.4.1-gpu docker image", "tensorflow", "2.4.1"),
        ("pytorch/pytorch:1.9.0-cuda11.1-cudnn8-runtime", "pytorch", "1.9.0"),
        ("TF-nightly (2.16.0-dev20231102)", "tensorflow", "2.16.0-dev20231102"),
        ("TensorFlow version: b'v1.13.1-0-g6612da8951' 1.13.1", "tensorflow", "1.13.1"),
    ],
)
def test_versions_in_every_common_form(text: str, framework: str, version: str) -> None:
    env = parse_environment(text)
    assert (env.framework, env.version) == (framework, version)


def test_repo_decides_framework_over_stray_mentions() -> None:
    ex = extract_text("tf.keras works but torch does not", "PyTorch 2.0.1 here; in TF it works.", repo="pytorch/pytorch")
    assert (ex.environment.framework, ex.environment.version) == ("pytorch", "2.0.1")


def test_nightly_without_a_version() -> None:
    env = parse_environment("Reproduces on tf-nightly too.")
    assert (env.framework, env.version) == ("tensorflow", "nightly")


def test_missing_names_what_is_absent() -> None:
    env = extract_text("torch.norm wrong", "It gives a wrong norm.", repo="pytorch/pytorch").environment
    assert env.framework == "pytorch"
    assert set(env.missing) == {"version", "python", "cuda", "cudnn", "os", "gpu"}


def test_local_cuda_suffix_gives_cuda() -> None:
    env = parse_environment("torch 2.2.1+cu121 on Ubuntu 20.04")
    assert (env.version, env.cuda, env.os) == ("2.2.1+cu121", "12.1", "Ubuntu 20.04")


# -- bad input never crashes -----------------------------------------------------------------


def test_empty_input() -> None:
    ex = extract_text("", "")
    assert ex.snippet is None and ex.traceback is None and ex.error_line is None
    assert "the body is empty" in ex.problems
    assert "version" in ex.environment.missing


def test_one_megabyte_body() -> None:
    body = ("Some words about CUDA and the CPU. " * 30000) + "\n```python\nimport torch\n```\n"
    ex = extract_text("big", body * 2)
    assert any("only the first" in p for p in ex.problems)


def test_binary_junk() -> None:
    rng = random.Random(1)
    junk = bytes(rng.randrange(256) for _ in range(20000)).decode("latin-1")
    ex = extract_text("junk", junk)
    assert any("binary" in p for p in ex.problems)


def test_html_only_body() -> None:
    ex = extract(load("other__html_only_body"))
    assert "body is HTML; markup was stripped" in ex.problems
    assert ex.snippet is not None and ex.snippet.code == "import torch\nprint(torch.__version__)"


def test_non_english_report() -> None:
    ex = extract(load("mme__non_english_report"))
    assert any("not English" in p for p in ex.problems)
    assert ex.error_line == "AttributeError: module 'torch.backends' has no attribute 'mps'"
    assert ex.environment.version == "1.11.0"


def test_wrong_types_do_not_raise() -> None:
    ex = extract_text(None, 12345)  # type: ignore[arg-type]
    assert any("not text" in p for p in ex.problems)


def test_random_markdown_never_raises() -> None:
    rng = random.Random(7)
    pieces = ["```", "```python", ">>> ", "... ", "    ", "Traceback (most recent call last):", '  File "x.py", line 1, in f',
              "AttributeError: x", "During handling of the above exception, another exception occurred:",
              "torch==", "TensorFlow version:", "\n", "\t", "\x00", "é", "<div>", "### Versions", "import torch", "x.histc(", ")"]
    for _ in range(300):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 60)))
        ex = extract_text(text[:30], text)
        assert ex.environment is not None


def test_version_in_use_beats_the_release_it_was_saved_with() -> None:
    text = "I load a model saved with torch 2.0 on our server. torch version 1.13.1, cuda 11.7"
    assert parse_environment(text).version == "1.13.1"
    assert parse_environment("It worked on TF 2.9 but fails on TF 2.12.").version == "2.12"


def test_bare_version_in_a_report_about_one_framework() -> None:
    assert parse_environment("```\ntensor([1], device='cuda:0')\n```\nversion 1.9.0", "pytorch").version == "1.9.0"
    assert parse_environment("升级到 2.3.0 之后 import 出错", "pytorch").version == "2.3.0"
    # a version another component claims is not the framework's
    assert parse_environment("Python version 3.10.2, CUDA version 11.8, onnx opset version 17", "pytorch").version is None
    assert parse_environment("version 1.9.0").version is None  # no framework known: nothing to attach it to


def test_fields_after_many_blank_lines_are_read() -> None:
    """The speed of this case (once quadratic: 20k blank lines ~25 s) is measured by bench/bench_extract_speed.py."""
    body = "PyTorch version: 1.13.1\n" + " \n" * 2000 + "- Python version: 3.10.4\n"
    env = parse_environment(body, "pytorch")
    assert (env.version, env.python) == ("1.13.1", "3.10.4")
