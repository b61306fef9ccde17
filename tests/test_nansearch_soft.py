"""Soft assertions: per-op classifiers trained on the op's own unit runs, and their direction pulled back to the inputs."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sftl.nansearch.core import ALL_SITES, RunOutcome, gradient_search, rank_sites  # noqa: E402
from sftl.nansearch.soft_assertions import UNITS, SoftAssertion, SoftGuide, label, pull_back  # noqa: E402
from sftl.nansearch.torch_backend import TorchProgram  # noqa: E402


@pytest.fixture(scope="module")
def guide() -> SoftGuide:
    g = SoftGuide(seed=3)
    g.train(["log", "exp", "acos", "reciprocal", "tan", "sqrt"], [torch.float32])
    return g


def test_unit_runs_label_the_direction_that_breaks_the_op_first() -> None:
    x = np.array([0.5, -0.5, 0.0, 50.0])
    assert label(torch.log, x, torch.float32).tolist() == [-1, 0, 0, -1]  # log(-0.5), log(0): broken already
    assert label(torch.exp, np.array([1.0, 200.0]), torch.float32).tolist() == [1, 0]
    assert label(torch.acos, np.array([0.9, -0.9]), torch.float32).tolist() == [1, -1]
    # a divisor: 1/x is INF only at 0 (and below float32's 3e-39): the direction towards 0
    assert label(torch.reciprocal, np.array([2.0, -2.0]), torch.float32).tolist() == [-1, 1]


def test_classifiers_learn_each_ops_invalid_direction(guide: SoftGuide) -> None:
    log, exp, acos = (guide.model(n, torch.float32) for n in ("log", "exp", "acos"))
    assert log.predict(np.array([1e-6, 0.3, 7.0, 1e4])).tolist() == [-1, -1, -1, -1]
    assert exp.predict(np.array([-3.0, 0.5, 20.0])).tolist() == [1, 1, 1]
    assert acos.predict(np.array([0.4, -0.4])).tolist() == [1, -1]
    assert guide.model("tan", torch.float32).predict(np.array([0.3, 1.5])).tolist() == [0, 0]  # never INF
    for model in (log, exp, acos, guide.model("sqrt", torch.float32)):
        assert isinstance(model, SoftAssertion) and model.accuracy >= 0.9  # on held-out unit runs


def test_direction_field_is_pulled_back_to_the_leaves(guide: SoftGuide) -> None:
    leaf = torch.tensor([1.0, 2.0], requires_grad=True)
    x = leaf * torch.tensor([3.0, -1.0]) + 4.0  # [7, 2]: both inputs of log positive
    direction = guide.direction("log", x)
    assert direction is not None and direction.tolist() == [-1.0, -1.0]
    (v,) = pull_back(x, direction, [leaf])  # type: ignore[misc]
    assert v.tolist() == [-3.0, 1.0]  # d<direction, x>/d leaf
    assert "div" in UNITS and UNITS["div"][0] == 1  # a division watches its divisor


PROGRAM = '''
import torch


def f(x):
    return torch.log(x * 2.0 + 1.0).sum()


def example_inputs():
    return (torch.tensor([0.5, 1.5, 3.0]),)
'''


def test_backend_reports_the_soft_direction_beside_the_margin_gradient(tmp_path: Path) -> None:
    path = tmp_path / "prog.py"
    path.write_text(PROGRAM, encoding="utf-8")
    program = TorchProgram(path, "f", 0, soft=True)
    program.load_entry()
    values = [v.start for v in program.variables]
    out = program.run(values, ALL_SITES, True, time.perf_counter() + 30)
    site = "torch.log@6"
    margin_grad = out.site_grads[site][0]
    soft = out.site_soft[site][0]
    assert margin_grad is not None and margin_grad.tolist() == [2.0, 0.0, 0.0]  # only the smallest element
    # the soft assertion moves every element down (descending -2 * -1 = +2 each)
    assert soft is not None and soft.tolist() == [2.0, 2.0, 2.0]
    target = program.run(values, site, True, time.perf_counter() + 30)
    assert target.soft_grads is not None and target.soft_grads[0].tolist() == [2.0, 2.0, 2.0]
    start = program.run(values, None, False, time.perf_counter() + 30)
    result = gradient_search(program, 10.0, 0, 1e4, start, probes=False)
    assert result.found and result.finding is not None and result.finding.op == "torch.log"
    assert result.phase in {"gradient", "soft"}
    # without a guide the backend reports no soft direction
    plain = TorchProgram(path, "f", 0)
    plain.load_entry()
    assert not plain.run(values, ALL_SITES, True, time.perf_counter() + 30).site_soft


def test_a_flat_site_with_a_soft_direction_is_ranked_last() -> None:
    g = [np.array([1.0])]
    out = RunOutcome(margins={"a": 1.0, "b": 0.1, "c": 0.5}, site_grads={"a": g, "b": [np.array([0.0])]},
                     site_soft={"b": g})
    assert rank_sites(out, set()) == ["a", "b"]  # c: neither a gradient nor a soft direction


@pytest.mark.gpu
def test_the_soft_guide_pulls_back_a_cuda_input() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device (torch.cuda.is_available() is false)")
    leaf = torch.full((4,), 0.5, device="cuda", requires_grad=True)
    x = leaf * 2.0
    direction = SoftGuide().direction("log", x)
    assert direction is not None and direction.device == x.device  # was a CPU tensor: autograd rejected it
    pulled = pull_back(x, direction, [leaf])
    assert pulled is not None and pulled[0] is not None
