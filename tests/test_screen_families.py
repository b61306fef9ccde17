"""Screening rules on phrasing families found by the held-out sets: wishes, hidden GPUs, default-device calls, forms."""

from __future__ import annotations

import json
from pathlib import Path

from sftl.extract import extract
from sftl.github import issue_from_json
from sftl.model import Issue
from sftl.screen import prepare, read_sections

REPORTS = Path(__file__).resolve().parent.parent / "fixtures" / "reports"


def load(name: str) -> Issue:
    return issue_from_json(json.loads((REPORTS / f"{name}.json").read_text(encoding="utf-8")))


def rules(name: str):
    issue = load(name)
    return prepare(issue, extract(issue)).rules


def test_expected_behaviour_section_is_read_apart() -> None:
    issue = load("gcrde__tf_form_expected_behaviour_names_both_devices")
    s = read_sections(issue.title, issue.body)
    assert "same behaviour on both devices" in s.expected
    assert "raises InvalidArgumentError" not in s.expected  # the current behaviour is not a wish
    r = rules("gcrde__tf_form_expected_behaviour_names_both_devices")
    assert r.flags["both"] == 0.0 and r.gcrde >= 2.5


def test_a_stated_same_on_both_still_counts() -> None:
    said = prepare(("erfinv of 1.5", "erfinv(1.5) returns nan. The same result on both CPU and GPU."))
    wished = prepare(("erfinv of 1.5", "erfinv(1.5) raises on CPU but returns nan on GPU. It should give the same "
                      "result on both CPU and GPU."))
    assert said.rules.flags["both"] == 1.0
    assert wished.rules.flags["both"] == 0.0


def test_title_on_both_devices_is_not_a_comparison() -> None:
    r = rules("other__hard_negative_same_on_both_devices_in_title")
    assert r.flags["title_both"] == 0.0 and r.gcrde < 2.5


def test_feature_request_form_and_cpu_fallback() -> None:
    issue = load("other__hard_negative_mps_fallback_feature_request")
    assert read_sections(issue.title, issue.body).kind == "feature"
    r = rules("other__hard_negative_mps_fallback_feature_request")
    assert r.flags["placement"] == 1.0 and r.flags["feature_or_docs"] == 1.0 and r.gcrde < 2.5
    docs = prepare(("Docs for cumsum", "### 📚 The doc issue\n\nThe page does not say cumsum differs on CPU and GPU."))
    assert docs.sections.kind == "docs"


def test_module_of_a_pickled_model_is_the_reporters() -> None:
    r = rules("other__hard_negative_torch_load_user_module")
    assert not r.mme and r.flags["mme_user"] == 1.0
    # a framework module missing under torch.load is still the framework's
    body = ("```\n  File \"/opt/venv/lib/python3.10/site-packages/torch/serialization.py\", line 1415, in find_class\n"
            "    return super().find_class(mod_name, name)\nModuleNotFoundError: No module named 'torch.nn.modules.linear2'\n```")
    assert prepare(("torch.load fails", body)).rules.mme


def test_python_in_tf_shell_fence_is_code() -> None:
    issue = load("gcrde__tf_form_code_in_shell_fence")
    s = read_sections(issue.title, issue.body)
    assert "depthwise_conv2d" in s.code and "/GPU:0 True" in s.output
    r = rules("gcrde__tf_form_code_in_shell_fence")
    assert r.flags["code_both"] == 1.0 and r.flags["pair"] >= 1.0


def test_hidden_gpu_reads_as_cpu() -> None:
    r = rules("gcrde__hidden_gpu_means_cpu")
    assert r.flags["narr_both"] == 1.0 and r.gcrde >= 2.5
    plain = prepare(("predictions wrong", "Predictions are wrong with my model on the GPU."))
    assert plain.rules.flags["narr_both"] == 0.0


def test_same_call_on_default_device_and_gpu() -> None:
    r = rules("gcrde__snippet_default_device_against_cuda")
    assert r.flags["code_both"] == 1.0 and r.flags["output_both"] == 1.0
    only_gpu = prepare(("slow searchsorted", "```python\nimport torch\ns = torch.rand(10).cuda()\n"
                        "print(torch.searchsorted(s, s))\n```"))
    assert only_gpu.rules.flags["code_both"] == 0.0


def test_devices_that_give_same_values_agree() -> None:
    r = prepare(("CPU and GPU give same wrong result for torch.lgamma", "lgamma(-2.) returns inf, should be nan?")).rules
    assert r.flags["both"] == 1.0 and r.gcrde < 2.5
