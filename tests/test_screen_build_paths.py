"""A build tool named inside a file path (a source checkout, Bazel's output tree) is no build problem."""

from __future__ import annotations

from sftl import screen as scr
from sftl.screen.sections import read_sections


def build_flag(title: str, body: str) -> float:
    return scr.gcrde_evidence(read_sections(title, body))[2]["build"]


def test_a_path_holding_cmake_or_bazel_is_no_build_problem() -> None:
    body = ("```\nRuntimeError: CUDA error: invalid configuration argument\nException raised from dispatch at "
            "/home/dev/pytorch-cmake/aten/src/ATen/native/cuda/PersistentSoftmax.cuh:268\n"
            "  File \"bazel-out/k8-opt/bin/tensorflow/python/ops/gen_math_ops.py\", line 10\n```")
    assert build_flag("softmax fails on a huge tensor", body) == 0.0


def test_a_build_named_in_words_still_is() -> None:
    assert build_flag("CUDA kernels differ after building with cmake 3.27", "") == 1.0
    assert build_flag("bazel build fails for the GPU kernels", "") == 1.0
