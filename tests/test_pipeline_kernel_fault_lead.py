"""A CUDA kernel failure with no word of the CPU stays *other*, yet `locate` ranks the raising kernel's files as a lead."""

from __future__ import annotations

from pathlib import Path

import pytest

from sftl.config import load_settings
from sftl.model import Category, Issue, Outcome
from sftl.pipeline import locate
from sftl.screen.one_device import cuda_kernel_fault
from sftl.store import Store

TREE = Path(__file__).resolve().parent.parent / "fixtures" / "gcrde_roles"
CODE = "```python\nimport torch\nx = torch.randn(3000000000, device='cuda')\ny = torch.cumsum(x, 0)\n" \
       "torch.cuda.synchronize()\n```\n"
VERSION = "\nPyTorch version: 2.6.0\n"


def _report(title: str, error: str) -> Issue:
    return Issue(repo="pytorch/pytorch", number=70001, title=title, body=CODE + f"```\n{error}\n```" + VERSION)


@pytest.mark.parametrize(
    ("text", "error_line", "fault"),
    [
        ("RuntimeError: CUDA error: an illegal memory access was encountered", None, "illegal memory access"),
        ("cumsum on cuda\nRuntimeError: CUDA error: invalid configuration argument", None, "invalid configuration argument"),
        # the error raised decides, not an out-of-memory the title asks about
        ("Why do I get CUDA error: illegal memory access instead of out of memory?",
         "RuntimeError: CUDA error: an illegal memory access was encountered", "illegal memory access"),
        ("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", None, ""),
        ("RuntimeError: CUDA error: no kernel image is available for execution on the device", None, ""),
        ("It crashes on both CPU and CUDA: illegal memory access", None, ""),
        ("IndexError: index out of range in self", None, ""),  # no device named: a Python error, not a kernel's
    ],
)
def test_cuda_kernel_fault_reads_the_raised_failure(text: str, error_line: str | None, fault: str) -> None:
    assert (fault in cuda_kernel_fault(text, error_line)) if fault else cuda_kernel_fault(text, error_line) == ""


def test_a_cuda_only_kernel_failure_is_screened_other_and_still_ranked(sftl_home: Path) -> None:
    settings = load_settings(offline=True)
    with Store(settings.db_path) as store:
        issue = _report("cumsum crashes for a large tensor", "RuntimeError: CUDA error: an illegal memory access was encountered")
        store.upsert_issue(issue)
        report = locate(issue, settings, store, source_root=TREE)
    assert report.screening is not None and report.screening.category == Category.OTHER
    loc = report.localization
    assert loc is not None and loc.outcome == Outcome.LOCATED, loc
    assert "screened 'other'" in loc.reason and "illegal memory access" in loc.reason
    top = [s.path for s in loc.suspects[:3]]
    assert any("/cuda/" in p and ("Scan" in p or "Cumsum" in p) for p in top), top


def test_an_out_of_memory_report_is_not_ranked_as_a_kernel_fault(sftl_home: Path) -> None:
    settings = load_settings(offline=True)
    with Store(settings.db_path) as store:
        issue = _report("cumsum on a large tensor", "RuntimeError: CUDA out of memory. Tried to allocate 12.00 GiB")
        report = locate(issue, settings, store, source_root=TREE)
    # ranked as any report is (from its words and names), never as the fault of the kernel that raised
    loc = report.localization
    assert loc is not None and report.screening.category == Category.OTHER
    assert "kernel" not in loc.reason and "weaker lead" not in loc.reason
    assert "candidate files" in loc.reason


BOTH_DEVICES = ("```python\nimport torch\nx = torch.randn(100, 100)\nprint(torch.cumsum(x, 0)[-1])\n"
                "print(torch.cumsum(x.cuda(), 0)[-1])\n```\n")


def test_a_snippet_comparing_devices_below_the_screenings_bar_is_ranked_as_a_weaker_lead(sftl_home: Path) -> None:
    settings = load_settings(offline=True)
    with Store(settings.db_path) as store:
        issue = Issue(repo="pytorch/pytorch", number=70002, title="cumsum last value is off",
                      body="The last value looks odd to me.\n\n" + BOTH_DEVICES + VERSION)
        report = locate(issue, settings, store, source_root=TREE)
    assert report.screening is not None and report.screening.category == Category.OTHER  # the screening stands
    loc = report.localization
    assert loc is not None and loc.outcome == Outcome.LOCATED, loc
    assert "device-comparison evidence 1.5 (the snippet runs on both devices)" in loc.reason
    assert "a weaker lead" in loc.reason
    assert any("Scan" in s.path or "Cumsum" in s.path for s in loc.suspects[:3]), [s.path for s in loc.suspects]


def test_a_report_with_no_device_comparison_is_not_ranked_as_a_discrepancy(sftl_home: Path) -> None:
    settings = load_settings(offline=True)
    code = "```python\nimport torch\nx = torch.randn(100, 100)\nprint(torch.cumsum(x, 0)[-1])\n```\n"
    with Store(settings.db_path) as store:
        issue = Issue(repo="pytorch/pytorch", number=70003, title="cumsum docs are unclear about dim",
                      body="The docs do not say what dim means.\n\n" + code + VERSION)
        report = locate(issue, settings, store, source_root=TREE)
    loc = report.localization
    assert loc is not None and report.screening.category == Category.OTHER
    assert "weaker lead" not in loc.reason and "discrepancy" not in loc.reason
    assert "candidate files" in loc.reason
