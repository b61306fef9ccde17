"""Real worker processes: labels from real torch runs, crashes and hangs contained, reported and survived."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sftl.config import load_settings
from sftl.fuzz.execute import WorkerPool
from sftl.fuzz.generate import FuzzInput
from sftl.fuzz.specs import ArgSpec, api_spec, python_spec


def _t(*shape: int, dtype: str = "float32") -> dict:
    return {"t": "tensor", "shape": list(shape), "dtype": dtype}


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory):
    return load_settings(env={"PATH": os.environ.get("PATH", "")}, home=tmp_path_factory.mktemp("home"))


@pytest.fixture(scope="module")
def torch_pool(settings):
    with WorkerPool("pytorch", settings, workers=2, chunk=7) as pool:
        yield pool


def test_torch_calls_are_labelled_by_running_them(torch_pool) -> None:
    spec = api_spec("bmm")
    inputs = [
        FuzzInput({"self": _t(2, 3, 4), "mat2": _t(2, 4, 5)}, 1),
        FuzzInput({"self": _t(2, 3, 4), "mat2": _t(2, 5, 5)}, 2),
        FuzzInput({"self": _t(3, 4), "mat2": _t(4, 5)}, 3),
        FuzzInput({"self": _t(2, 3, 4, dtype="float64"), "mat2": _t(2, 4, 5)}, 4),
    ] * 20  # several chunks, spread over both workers
    pool = torch_pool
    hello = pool.info()
    res = pool.run(spec, inputs)
    assert hello["version"].startswith("2.") and hello["cuda"] is False  # CUDA hidden unless asked
    assert [r.status for r in res[:4]] == ["ok", "error", "error", "error"]
    assert [r.valid for r in res] == [r.valid for r in res[:4]] * 20
    assert "3D" in res[2].message
    assert not pool.crashes


def test_keyword_and_varargs_calls(torch_pool) -> None:
    spec = api_spec("einsum")
    inputs = [
        FuzzInput({"equation": {"t": "str", "v": "ij,jk->ik"}, "tensors": {"t": "tensors", "items": [_t(2, 3), _t(3, 4)]}}, 0),
        FuzzInput({"equation": {"t": "str", "v": "ij,jk->ik"}, "tensors": {"t": "tensors", "items": [_t(2, 3), _t(4, 4)]}}, 0),
    ]
    topk = api_spec("topk")
    pool = torch_pool
    ein = pool.run(spec, inputs)
    tk = pool.run(topk, [FuzzInput({"self": _t(5), "k": {"t": "int", "v": 2}, "largest": {"t": "bool", "v": False}}, 0),
                         FuzzInput({"self": _t(5), "k": {"t": "int", "v": 6}}, 0)])
    assert [r.status for r in ein] == ["ok", "error"]
    assert [r.status for r in tk] == ["ok", "error"]


def test_a_crashing_input_kills_a_worker_never_sftl_and_is_reported(settings) -> None:
    # signal.raise_signal(6) aborts the worker and (11) segfaults it; -1 is a plain rejected input
    spec = python_spec("signal.raise_signal", (ArgSpec("signalnum", "int"),))
    values = [-1, 6, -1, 11, -1]
    inputs = [FuzzInput({"signalnum": {"t": "int", "v": v}}, i) for i, v in enumerate(values)]
    with WorkerPool("python", settings, workers=1, chunk=10) as pool:
        res = pool.run(spec, inputs)
        after = pool.run(spec, inputs[:1])  # the pool still works afterwards
    assert [r.status for r in res] == ["error", "crash", "error", "crash", "error"]
    assert [c.signal for c in pool.crashes] == ["SIGABRT", "SIGSEGV"]
    assert [c.input["signalnum"]["v"] for c in pool.crashes] == [6, 11]
    assert pool.restarts == 2
    assert after[0].status == "error"


def test_a_hanging_input_times_out_and_is_reported(settings) -> None:
    spec = python_spec("time.sleep", (ArgSpec("secs", "float"),))
    inputs = [FuzzInput({"secs": {"t": "float", "v": v}}, 0) for v in (0.0, 30.0, 0.0)]
    with WorkerPool("python", settings, workers=1, timeout=1.5) as pool:
        res = pool.run(spec, inputs)
    assert [r.status for r in res] == ["ok", "timeout", "ok"]
    assert pool.crashes[0].kind == "timeout"


def test_workers_get_a_scrubbed_environment(settings, tmp_path: Path) -> None:
    secret = load_settings(env={"PATH": os.environ.get("PATH", ""), "GITHUB_TOKEN": "ghp_secret"}, home=tmp_path)
    spec = python_spec("os.getenv", (ArgSpec("key", "str"),))
    inputs = [FuzzInput({"key": {"t": "str", "v": k}}, 0) for k in ("GITHUB_TOKEN", "CUDA_VISIBLE_DEVICES")]
    pool = WorkerPool("python", secret, workers=1)
    try:
        env = dict(pool.workers[0].env)
        res = pool.run(spec, inputs)
    finally:
        pool.close()
    assert "GITHUB_TOKEN" not in env and env["CUDA_VISIBLE_DEVICES"] == ""
    assert all(r.status == "ok" for r in res)
