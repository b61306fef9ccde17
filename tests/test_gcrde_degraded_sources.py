"""gcrde over sources that lack what it looks for (empty headers, no CUDA path, a damaged index cache): the reason says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from sftl.localize.gcrde import localize_gcrde
from sftl.model import Environment, Extraction, Issue, Outcome


def test_empty_tf_headers_are_not_said_to_declare_the_functor(tmp_path: Path) -> None:
    from sftl.sources import LocalTree

    kernels = tmp_path / "tf" / "tensorflow" / "core" / "kernels"
    kernels.mkdir(parents=True)
    (kernels / "argmax_op.h").write_text("")  # an empty header: named after the op, declares nothing
    issue = Issue(repo="tensorflow/tensorflow", number=1, title="tf.math.argmax returns a wrong index on GPU", body="")
    ex = Extraction(None, None, Environment(framework="tensorflow"), apis=("tensorflow.math.argmax",))
    loc = localize_gcrde(issue, ex, LocalTree(tmp_path / "tf", "tensorflow", "2.6.0"))
    assert loc.outcome is Outcome.LOCATED
    assert "declares functor" not in " ".join(s.reason for s in loc.suspects)
    assert "declaring the op's functor or named after it" in loc.reason  # was: "... declaring the op's functor"


def test_a_cross_device_report_over_a_tree_without_cuda_code_says_so(tmp_path: Path) -> None:
    from sftl.sources import LocalTree

    native = tmp_path / "pt" / "aten" / "src" / "ATen" / "native"
    (native / "cpu").mkdir(parents=True)
    (native / "BinaryOps.cpp").write_text("Tensor __rshift__(const Tensor& self, const Scalar& other) { return self; }\n")
    (native / "cpu" / "BinaryOpsKernel.cpp").write_text(
        "void rshift_kernel(TensorIteratorBase& iter) { cpu_kernel(iter, [](float a, float b) { return a / b; }); }\n")
    issue = Issue(repo="pytorch/pytorch", number=1, title="x >> 1 wrong on cuda:1 vs cuda:0",
                  body="Running on cuda:1 gives 8, cuda:0 gives 2.")
    ex = Extraction(None, None, Environment(framework="pytorch"), apis=("torch.Tensor.__rshift__",))
    loc = localize_gcrde(issue, ex, LocalTree(tmp_path / "pt", "pytorch", "1.13.1"))
    assert "non-default CUDA device" in loc.reason  # was silent: CPU files ranked as if the cue were unread
    assert "no CUDA launch path of the op" in loc.reason


@pytest.mark.parametrize("damaged", [
    b"\x80\x05\x95\xff\xff\xff\xff\xff\xff\xff\xff.",  # OverflowError: frame length
    b"\x80\x04\x8e\xff\xff\xff\xff\xff\xff\xff\x7f.",  # OverflowError: byte string too large
    b"",
])
def test_a_damaged_kernel_index_cache_is_rebuilt_not_raised(tmp_path: Path, damaged: bytes) -> None:
    from sftl.codegraph.native import KernelIndex

    cache = tmp_path / "index.pkl"
    cache.write_bytes(damaged)
    assert KernelIndex.load(cache, "key") is None  # was OverflowError out of locate
