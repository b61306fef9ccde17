"""Variants of a reported call replayed on CPU and CUDA (needs a CUDA device; never faked)."""

from __future__ import annotations

import os

import pytest

from sftl.config import load_settings
from sftl.fuzz.seed import find_seed
from sftl.fuzz.specs import api_spec
from sftl.fuzz.validity import replay_variants

SNIPPET = "import torch\nx = torch.rand(2, 3, 4)\ny = torch.rand(2, 4, 5)\nz = torch.bmm(x, y)\n"


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def test_without_cuda_the_gpu_side_is_not_run(tmp_path) -> None:
    if _cuda():
        pytest.skip("a CUDA device is present: the comparison test below covers this machine")
    settings = load_settings(env={"PATH": os.environ.get("PATH", "")}, home=tmp_path)
    spec = api_spec("bmm")
    seed = find_seed(SNIPPET, spec)
    assert seed is not None
    variants, note = replay_variants(spec, settings, seed, None, count=3)
    assert note == "no CUDA device"
    assert variants and all(v.gpu is None and v.cpu == "ok" for v in variants)


@pytest.mark.gpu
def test_variants_run_on_cpu_and_cuda(tmp_path) -> None:
    if not _cuda():
        pytest.skip("no CUDA device (torch.cuda.is_available() is False)")
    settings = load_settings(env=dict(os.environ), home=tmp_path)
    spec = api_spec("bmm")
    seed = find_seed(SNIPPET, spec)
    assert seed is not None
    variants, note = replay_variants(spec, settings, seed, None, count=3)
    assert note.startswith("compared on CPU and CUDA")
    assert variants and all(v.gpu == "ok" and v.max_abs_diff is not None for v in variants)
    assert all(v.max_abs_diff < 1e-2 for v in variants)  # bmm agrees across devices on small inputs
