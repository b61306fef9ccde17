"""One-device failures (CUDA raises while the CPU returns a result) are screened gcrde; a CUDA error alone is not."""

from __future__ import annotations

import pytest

from sftl import screen as scr
from sftl.extract import extract
from sftl.model import Issue
from sftl.screen.one_device import one_device_failure


def rules(title: str, body: str) -> scr.RuleEvidence:
    issue = Issue(repo="pytorch/pytorch", number=1, title=title, body=body)
    return scr.prepare(issue, extract(issue)).rules


IMA = "```\nRuntimeError: CUDA error: an illegal memory access was encountered\n```"


@pytest.mark.parametrize(
    ("title", "body"),
    [
        ("avg_pool2d backward crashes on large batches", "With CUDA (but not CPU) the backward pass crashes.\n" + IMA),
        ("indexing on a large tensor fails on GPU",
         "```\nRuntimeError: CUDA error: invalid configuration argument\n```\nThe same indexing returns a result on CPU."),
        ("nonzero fails for huge tensors", "It works fine on the CPU.\n```\nRuntimeError: nonzero is not supported for "
         "tensors with more than INT_MAX elements\n```"),
        ("softmax backward", "On CPU this works, on CUDA:\n" + IMA),
    ],
)
def test_cuda_raising_while_the_cpu_returns_is_a_discrepancy(title: str, body: str) -> None:
    got = rules(title, body)
    assert got.gcrde >= scr.GCRDE_RULE_MIN
    assert any("CUDA raises" in w for w in got.gcrde_why)


@pytest.mark.parametrize(
    ("title", "body"),
    [
        ("CUDA error when training", "My model crashes after 3 epochs.\n" + IMA),  # no word of the other device
        ("illegal memory access on both devices", "It crashes on both CPU and CUDA.\n" + IMA),
        ("CUDA error: out of memory", "Works on CPU, but on the GPU:\n```\nRuntimeError: CUDA error: out of memory\n```"),
        ("embedding index error", "On CPU it gives an IndexError, on CUDA a device-side assert triggered."),
    ],
)
def test_a_cuda_error_without_a_working_cpu_stays_other(title: str, body: str) -> None:
    got = rules(title, body)
    assert not any("CUDA raises" in w for w in got.gcrde_why)
    assert got.gcrde < scr.GCRDE_RULE_MIN


def test_the_reverse_cpu_crash_while_cuda_returns() -> None:
    assert "CPU crashes" in one_device_failure("torch.kron segmentation fault on cpu; the same call works on cuda.")
    assert one_device_failure("segmentation fault when importing torch") == ""
