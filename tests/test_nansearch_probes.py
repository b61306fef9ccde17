"""The gradient search's probes: the cheap domain probes, the all-sites ranking run, the log-space jump."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from sftl.nansearch.core import (  # noqa: E402
    ALL_SITES,
    RunOutcome,
    Variable,
    domain_probes,
    gradient_search,
    rank_sites,
)
from sftl.nansearch.torch_backend import TorchProgram  # noqa: E402

SCRIPT = '''
import torch
import torch.nn.functional as F


def loss(logits):
    return -torch.log(F.softmax(logits, dim=-1)[:, 0]).mean()


def example_inputs():
    return (torch.tensor([[0.3, -0.2, 0.1], [0.0, 0.5, -0.4]]),)
'''

TWO_SITES = '''
import torch


def f(x, y):
    a = torch.log(x.sum() + 3.0)           # far in value, but x moves it directly
    b = torch.sqrt(1e-3 * y.sum() + 0.01)  # nearer in value (0.01), but 1000x less sensitive to y
    return a + b


def example_inputs():
    return torch.ones(4), torch.ones(4)
'''


def _load(tmp_path: Path, text: str, entry: str) -> tuple[TorchProgram, RunOutcome]:
    path = tmp_path / "prog.py"
    path.write_text(text, encoding="utf-8")
    program = TorchProgram(path, entry, 0)
    program.load_entry()
    start = program.run([v.start for v in program.variables], None, False, time.perf_counter() + 30)
    return program, start


def test_log_of_softmax_falls_to_the_saturating_domain_probe(tmp_path: Path) -> None:
    program, start = _load(tmp_path, SCRIPT, "loss")
    assert start.finding is None and start.kinds == {"torch.log@7": "positive"}
    result = gradient_search(program, 10.0, 0, 1e4, start)
    assert result.found and result.finding is not None
    assert result.finding.op == "torch.log" and result.finding.line == 7
    # log's input must reach 0: scaling the logits up saturates the softmax; one plain run
    assert result.steps == 1 and result.phase == "domain"
    assert result.values is not None and float(np.max(np.abs(result.values[0]))) <= 1e4


def test_without_domain_probes_the_log_space_jump_needs_one_gradient_run(tmp_path: Path) -> None:
    program, start = _load(tmp_path, SCRIPT, "loss")
    result = gradient_search(program, 10.0, 0, 1e4, start, probes=False)
    assert result.found and result.finding is not None and result.finding.op == "torch.log"
    # a plain first-order step only shrinks the probability a few times (it is not linear in the logits);
    # the log-space step lands past float32's underflow: one (all-sites) gradient run and one probe
    assert result.steps == 2 and result.phase == "gradient"


def test_one_instrumented_run_differentiates_every_site(tmp_path: Path) -> None:
    program, start = _load(tmp_path, TWO_SITES, "f")
    assert set(start.margins) == {"torch.log@6", "torch.sqrt@7"} and not start.site_grads
    values = [v.start for v in program.variables]
    out = program.run(values, ALL_SITES, True, time.perf_counter() + 30)
    assert set(out.site_grads) == {"torch.log@6", "torch.sqrt@7"}
    gx, gy = out.site_grads["torch.log@6"]
    assert gx is not None and np.allclose(gx, 1.0) and (gy is None or not np.any(gy))
    _, gy = out.site_grads["torch.sqrt@7"]
    assert gy is not None and np.allclose(gy, 1e-3)
    # the nearest value is not the nearest in input space: log's 7 / |(1,1,1,1)| = 3.5 < sqrt's 0.014 / 0.002 = 7
    assert out.margins["torch.sqrt@7"] < out.margins["torch.log@6"]
    assert rank_sites(out, set()) == ["torch.log@6", "torch.sqrt@7"]
    assert rank_sites(out, {"torch.log@6"}) == ["torch.sqrt@7"]
    # a probe along one site's gradient records that site's margin only
    probe = program.run(values, "torch.sqrt@7", False, time.perf_counter() + 30, only_target=True)
    assert set(probe.margins) == {"torch.sqrt@7"} and probe.grads is None


def test_domain_probes_follow_the_invalid_domains_nearest_site_first() -> None:
    x = Variable("arg0", np.array([0.5, -2.0]), "float32")
    w = Variable("arg1", np.zeros(3), "float32")
    out = RunOutcome(normalized={"div@3": 0.1, "log@4": 0.5}, kinds={"div@3": "zero", "log@4": "positive"})
    probes = domain_probes([x.start, w.start], [x, w], [1e4, 1e4], out)
    assert [name for name, _ in probes] == ["zeros", "up", "flip", "flip_up"]
    zeros, up = probes[0][1], probes[1][1]
    assert not np.any(zeros[0]) and not np.any(zeros[1])
    # "up" scales each variable to 1000x its typical size (here 1.25), within the bound; zeros stay zeros
    assert np.allclose(up[0], x.start * (1000 * 1.25 / 2.0)) and not np.any(up[1])
    capped = domain_probes([x.start, w.start], [x, w], [100.0, 100.0], out)[1][1]
    assert float(np.max(np.abs(capped[0]))) == 100.0


TRAINING = '''
import torch


def train(x, y):
    w_mu = torch.zeros(3, requires_grad=True)
    w_var = torch.full((3,), 0.1, requires_grad=True)
    opt = torch.optim.SGD([w_mu, w_var], lr=0.01)
    for _ in range(4):
        opt.zero_grad()
        var = x @ w_var + 1.0
        nll = (torch.log(var) + (y - x @ w_mu) ** 2 / var).mean()
        nll.backward()
        opt.step()
    return nll


def example_inputs():
    x = torch.tensor([[0.5, 0.2, 0.1], [0.3, 0.4, 0.2], [0.1, 0.1, 0.6]])
    return x, x.sum(-1)
'''


def test_gradient_phase_alone_breaks_a_training_loop(tmp_path: Path) -> None:
    # the program calls backward() and steps an optimizer between the sites: the ranking run still
    # differentiates each site's margin with respect to the data, right where it is computed
    program, start = _load(tmp_path, TRAINING, "train")
    assert start.finding is None and "torch.log@12" in start.margins
    result = gradient_search(program, 10.0, 0, 1e4, start, probes=False)
    assert result.found and result.phase == "gradient" and result.finding is not None
    assert result.finding.line == 12 and result.steps <= 5
