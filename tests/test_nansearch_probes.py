"""The gradient search's probes: one gradient, then a log-space first-order jump reaches a softmax underflow."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

from sftl.helpers.nan_core import gradient_search  # noqa: E402
from sftl.helpers.nan_torch import TorchProgram  # noqa: E402

SCRIPT = '''
import torch
import torch.nn.functional as F


def loss(logits):
    return -torch.log(F.softmax(logits, dim=-1)[:, 0]).mean()


def example_inputs():
    return (torch.tensor([[0.3, -0.2, 0.1], [0.0, 0.5, -0.4]]),)
'''


def test_log_of_softmax_falls_to_the_first_probe(tmp_path: Path) -> None:
    path = tmp_path / "prog.py"
    path.write_text(SCRIPT, encoding="utf-8")
    program = TorchProgram(path, "loss", 0)
    program.load_entry()
    start = program.run([v.start for v in program.variables], None, False, time.perf_counter() + 30)
    assert start.finding is None and start.margins  # finite at its own inputs, the log site reached
    result = gradient_search(program, 10.0, 0, 1e4, start)
    assert result.found and result.finding is not None
    assert result.finding.op == "torch.log" and result.finding.line == 7
    # a plain first-order step only shrinks the probability a few times (it is not linear in the logits);
    # the log-space step lands past float32's underflow: one gradient run and one probe
    assert result.steps == 2
