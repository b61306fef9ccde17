"""Value-dependent generation: relations mined from real rejection messages, in-range indices and axes,
concat-shaped tensor lists, positive-definite matrices, and public TensorFlow APIs read as their raw ops."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from sftl.config import load_settings
from sftl.fuzz.execute import WorkerPool
from sftl.fuzz.generate import FuzzInput, InputGenerator
from sftl.fuzz.hints import mine_hints
from sftl.fuzz.seed import find_seed
from sftl.fuzz.specs import api_spec, tf_raw_ops_for


def _message(fn, *args) -> str:
    """The framework's own rejection text for a bad call."""
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - any rejection is what we want to read
        return str(exc).splitlines()[0]
    raise AssertionError("the call was accepted")


@pytest.fixture(scope="module")
def torch_pool(tmp_path_factory: pytest.TempPathFactory):
    settings = load_settings(env={"PATH": os.environ.get("PATH", "")}, home=tmp_path_factory.mktemp("home"))
    with WorkerPool("pytorch", settings, workers=2) as pool:
        yield pool


def test_hints_are_mined_from_real_rejections() -> None:
    bad_rank = _message(torch.addmm, torch.ones(2, 2), torch.ones(2, 2, 2), torch.ones(2, 2))
    hints = mine_hints(api_spec("addmm"), [bad_rank] * 2)
    assert hints.ranks == {"mat1": (2,)}
    vec = _message(torch.index_select, torch.ones(3, 3), 0, torch.zeros(2, 2, dtype=torch.long))
    dtype = _message(torch.index_select, torch.ones(3, 3), 0, torch.zeros(2))
    hints = mine_hints(api_spec("index_select"), [vec, vec, dtype, dtype])
    assert hints.ranks["index"] == (1,) and hints.dtypes["index"] == "int64"
    not_pd = _message(torch.linalg.cholesky, -torch.eye(3))
    assert mine_hints(api_spec("linalg.cholesky"), [not_pd, not_pd]).spd
    # one message is an anecdote: a relation needs two
    assert mine_hints(api_spec("addmm"), [bad_rank]).empty()


def test_index_values_stay_within_the_indexed_dims(torch_pool) -> None:
    spec = api_spec("index_select")
    assert {a.name: a.role for a in spec.args}["index"] == "index"
    inputs = InputGenerator(spec, "random", rng_seed=2).generate(400)
    bounded = [i for i in inputs if "hi" in i.call.get("index", {})]
    assert len(bounded) > 200
    assert all(i.call["index"]["hi"] == min(i.call["self"]["shape"], default=1) for i in bounded)
    # indices drawn below the smallest dim never fail the range check, whatever `dim` is
    def out_of_range(batch) -> int:
        res = torch_pool.run(spec, batch)
        return sum(1 for r in res if r.status == "error" and (
            "out of range in self" in r.message or "out of DATA bounds" in r.message))

    assert out_of_range(bounded) == 0
    # the same inputs with the default contents (0..2) do step outside small dims
    unbounded = [FuzzInput({k: {x: y for x, y in v.items() if x != "hi"} for k, v in i.call.items()}, i.seed)
                 for i in bounded]
    assert out_of_range(unbounded) > 5


def test_tensor_lists_share_all_dims_but_one() -> None:
    inputs = InputGenerator(api_spec("cat"), "random", rng_seed=4).generate(500)
    lists = [[t["shape"] for t in i.call["tensors"]["items"]] for i in inputs if len(i.call["tensors"]["items"]) > 1]
    concat_ready = [s for s in lists if all(len(x) == len(s[0]) for x in s)
                    and len({i for x in s for i, (p, q) in enumerate(zip(s[0], x, strict=True)) if p != q}) <= 1]
    assert len(concat_ready) / len(lists) > 0.6


def test_cholesky_like_apis_get_positive_definite_matrices(torch_pool) -> None:
    spec = api_spec("linalg.cholesky")
    assert spec.spd and not api_spec("linalg.inv").spd  # read from the docs
    inputs = InputGenerator(spec, "random", rng_seed=1).generate(300)
    spd = [i for i in inputs if i.call["self"].get("fill") == "spd" and i.call["self"]["dtype"] in ("float32", "float64")]
    assert len(spd) > 30
    results = torch_pool.run(spec, spd)
    assert all(r.valid for r in results), [r.message for r in results if not r.valid][:3]


def test_adapting_to_messages_raises_the_pass_rate(torch_pool) -> None:
    spec = api_spec("addmm")
    gen = InputGenerator(spec, "random", rng_seed=7)
    first = gen.generate(200)
    res = torch_pool.run(spec, first)
    gen.adapt(first, [r.valid for r in res], messages=[r.message for r in res if r.status == "error"])
    assert gen.hints.ranks.get("mat1") == (2,)
    second = gen.generate(200, offset=1)
    res2 = torch_pool.run(spec, second)
    assert sum(r.valid for r in res2) > 3 * max(sum(r.valid for r in res), 1)


def test_public_tensorflow_apis_map_to_their_raw_ops(fixtures_dir: Path) -> None:
    assert tf_raw_ops_for("tf.nn.conv2d") == ("Conv2D",)
    assert tf_raw_ops_for("tf.math.reduce_sum") == ("Sum",)
    assert tf_raw_ops_for("tf.gather") == ("GatherV2",)
    assert "MatMul" in tf_raw_ops_for("tf.linalg.matmul")
    assert tf_raw_ops_for("tf.linalg.cholesky") == ("Cholesky",)  # a generated wrapper exported as is
    assert tf_raw_ops_for("tf.no_such_api") == ()
    spec = api_spec("tf.nn.conv2d", "tensorflow")
    assert spec.target == "tf.raw_ops.Conv2D"
    code = (fixtures_dir / "fuzz" / "seed_tf_public_apis.py").read_text()
    seed = find_seed(code, spec)
    assert seed is not None and seed.line == 5
    assert seed.call["input"]["shape"] == [2, 8, 8, 3] and seed.call["filter"]["shape"] == [3, 3, 3, 4]
    assert seed.call["strides"]["v"] == [1, 2, 2, 1]  # strides=2 widened to the raw op's NHWC list
    total = find_seed(code, api_spec("Sum", "tensorflow"))
    assert total is not None and total.call["axis"]["vals"] == [1] and total.call["keep_dims"]["v"] is True
    rows = find_seed(code, api_spec("GatherV2", "tensorflow"))
    assert rows is not None and rows.call["indices"]["shape"] == [2]


def test_tensorflow_axis_inputs_are_scalars_in_range() -> None:
    spec = api_spec("ConcatV2", "tensorflow")
    assert {a.name: a.role for a in spec.args}["axis"] == "axis"
    inputs = InputGenerator(spec, "random", rng_seed=3).generate(300)
    scalars = [i for i in inputs if i.call["axis"]["shape"] == []]
    assert len(scalars) > 150
    ok = [i for i in scalars if "vals" in i.call["axis"] and i.call["values"]["items"]
          and -len(i.call["values"]["items"][0]["shape"]) <= i.call["axis"]["vals"][0]
          < max(len(i.call["values"]["items"][0]["shape"]), 1)]
    assert len(ok) / len(scalars) > 0.7


def test_per_dim_vectors_have_one_entry_per_data_dim() -> None:
    spec = api_spec("Tile", "tensorflow")
    assert {a.name: a.role for a in spec.args}["multiples"] == "per_dim"
    inputs = InputGenerator(spec, "random", rng_seed=6).generate(300)
    matched = [i for i in inputs if i.call["multiples"]["shape"] == [len(i.call["input"]["shape"])]]
    assert len(matched) / len(inputs) > 0.7
