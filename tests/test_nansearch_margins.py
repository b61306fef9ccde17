"""Distance-to-invalid margins of the unsafe-op table, checked in-process on plain tensors (no user code)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from sftl.nansearch.torch_backend import KERNEL, op_display  # noqa: E402
from sftl.nansearch.unsafe_ops import UNSAFE_OPS  # noqa: E402


def margin(name: str, *args: object) -> float:
    fn = UNSAFE_OPS[name].margin
    assert fn is not None
    m = fn(KERNEL, tuple(args), {}, None)
    assert m is not None
    return m.value


def test_margins_reach_zero_exactly_where_the_op_breaks() -> None:
    t = torch.tensor
    assert margin("log", t([0.5, 2.0])) == 0.5
    assert margin("log1p", t([-0.75, 1.0])) == pytest.approx(0.25)
    assert margin("div", t([1.0]), t([-0.1, 3.0])) == pytest.approx(0.1)
    assert margin("__rdiv__", t([0.25, 4.0]), 1.0) == pytest.approx(0.25)
    assert margin("acos", t([0.9, -0.2])) == pytest.approx(0.1)
    assert margin("acosh", t([1.5, 3.0])) == pytest.approx(0.5)
    limit = math.log(torch.finfo(torch.float32).max)
    assert margin("exp", t([1.0, 80.0])) == pytest.approx(limit - 80.0, rel=1e-5)
    assert margin("exp", t([1.0], dtype=torch.float64)) > 700  # float64 overflows much later
    assert margin("pow", t([0.5, 2.0]), 0.5) == 0.5  # fractional exponent: a negative base is NaN
    assert margin("pow", t([-0.5, 2.0]), -1) == pytest.approx(0.5)  # negative integer exponent: base -> 0
    assert margin("sqrt", t([-1.0])) < 0


def test_margin_gradient_points_towards_the_invalid_region() -> None:
    x = torch.tensor([0.3, 2.0], requires_grad=True)
    fn = UNSAFE_OPS["log"].margin
    assert fn is not None
    m = fn(KERNEL, (x,), {}, None)
    assert m is not None
    (g,) = torch.autograd.grad(m.term, [x])
    assert g.tolist() == [1.0, 0.0]  # lowering the smallest element is the way to log(0)


def test_op_names_are_readable() -> None:
    import torch.nn.functional as F

    assert op_display(torch.log) == "torch.log"
    assert op_display(torch.Tensor.div) == "Tensor.div"
    assert op_display(F.softmax) == "F.softmax"
