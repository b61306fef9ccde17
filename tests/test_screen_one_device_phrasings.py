"""One-device failures told the other way round: the CPU's failure denied ("no such problem on CPU"); set-up errors stay other."""

from __future__ import annotations

import pytest

from sftl import screen as scr
from sftl.extract import extract
from sftl.model import Issue
from sftl.screen.one_device import one_device_failure

FENCE = "```"


def rules(title: str, body: str) -> scr.RuleEvidence:
    issue = Issue(repo="pytorch/pytorch", number=7, title=title, body=body)
    return scr.prepare(issue, extract(issue)).rules


@pytest.mark.parametrize("cpu_line", [
    "(On CPU there does not seem to be a problem.)",
    "The CPU kernel has no such out-of-bounds read for the same input.",
    "This does not happen on the CPU.",
    "No such error with the CPU.",
])
def test_the_cpus_failure_denied_makes_a_cuda_failure_one_sided(cpu_line: str) -> None:
    body = (f"{FENCE}python\nx = torch.zeros(2**20, 2**11, device='cuda')\nx.nonzero()\n{FENCE}\n\n{FENCE}\n"
            f"RuntimeError: nonzero is not supported for tensors with more than INT_MAX elements\n{cpu_line}\n{FENCE}\n")
    got = rules("Tensor.nonzero fails on GPU for huge tensors", body)
    assert got.gcrde >= scr.GCRDE_RULE_MIN, got.gcrde_why
    assert any("CUDA raises" in w for w in got.gcrde_why)


@pytest.mark.parametrize("error", [
    "RuntimeError: CUDA error: no kernel image is available for execution on the device",
    "RuntimeError: CUDA error: initialization error",
    "RuntimeError: CUDA error: invalid device ordinal",
])
def test_a_cuda_set_up_error_is_no_discrepancy_even_when_the_cpu_works(error: str) -> None:
    text = f"The model works on CPU. On the GPU:\n{error}"
    assert one_device_failure(text) == ""
    assert rules("model fails on my new GPU", f"The model works on CPU. On the GPU:\n\n{FENCE}\n{error}\n{FENCE}\n").gcrde \
        < scr.GCRDE_RULE_MIN


def test_a_kernel_error_still_counts_beside_the_set_up_words() -> None:
    assert "CUDA raises" in one_device_failure(
        "RuntimeError: CUDA error: an illegal memory access was encountered\nThe same call returns a result on CPU.")


def test_a_denied_failure_of_the_gpu_is_not_the_cpus() -> None:
    # the CPU is not named: nothing says the other device works
    assert one_device_failure("RuntimeError: CUDA error: an illegal memory access was encountered\n"
                              "There does not seem to be a problem with smaller inputs.") == ""


def test_a_kernel_error_after_a_set_up_error_is_read_where_it_stands() -> None:
    text = ("First try: RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
            "After reinstalling: RuntimeError: CUDA error: an illegal memory access was encountered\n"
            "The same script returns a result on CPU.")
    why = one_device_failure(text)
    assert "CUDA raises ('CUDA error: a')" in why and "returns a result on CPU" in why  # the second line's error


def test_text_without_any_failure_is_not_one_sided() -> None:
    assert one_device_failure("On CPU the result is 1.0, on CUDA it is 2.0; works fine otherwise.") == ""
