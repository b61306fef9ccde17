"""Pairwise covering arrays, the input space of real schemas, shared dimensions and seeded neighbourhoods."""

from __future__ import annotations

import random

import pytest

from sftl.fuzz.generate import InputGenerator, params_for
from sftl.fuzz.pairwise import pairwise_rows, uncovered_pairs
from sftl.fuzz.specs import api_spec


@pytest.mark.parametrize(
    "sizes", [[2, 2], [3, 3, 3], [7, 2, 5, 3, 4], [1, 4, 1, 6, 2, 2, 3, 8], [9, 9, 2, 2, 2, 2, 2, 2, 2, 2]]
)
def test_pairwise_covers_every_pair_with_few_rows(sizes: list[int]) -> None:
    levels = [[f"p{i}v{j}" for j in range(n)] for i, n in enumerate(sizes)]
    rows = pairwise_rows(levels, random.Random(1))
    assert uncovered_pairs(levels, rows) == []
    full = 1
    for n in sizes:
        full *= n
    a, b = sorted(sizes)[-2:]
    assert a * b <= len(rows) <= max(a * b * 2, a * b + 10)
    assert len(rows) <= full


def test_uncovered_pairs_notices_a_missing_pair() -> None:
    levels = [[0, 1], [0, 1], [0, 1]]
    rows = [[0, 0, 0], [1, 1, 1]]
    assert (0, 0, 1, 1) in uncovered_pairs(levels, rows)


def test_pairwise_generator_covers_the_levels_of_a_real_schema() -> None:
    spec = api_spec("topk")
    gen = InputGenerator(spec, "pairwise", rng_seed=3)
    params = gen.params
    rows = gen.level_rows(1, random.Random(0)) and pairwise_rows([p.levels for p in params], random.Random(0))
    assert uncovered_pairs([p.levels for p in params], rows) == []
    inputs = gen.generate(len(rows))
    assert len(inputs) == len(rows)
    # every level row becomes a concrete call within the documented ranges
    for inp in inputs:
        t = inp.call["self"]
        assert len(t["shape"]) <= 6 and all(0 <= d <= 10 for d in t["shape"])
        assert -100 <= inp.call["k"]["v"] <= 100


def test_generated_inputs_share_dimensions_across_arguments() -> None:
    spec = api_spec("bmm")
    inputs = InputGenerator(spec, "random", rng_seed=0).generate(2000)
    both3 = [i for i in inputs if len(i.call["self"]["shape"]) == 3 and len(i.call["mat2"]["shape"]) == 3]
    related = [i for i in both3 if i.call["self"]["shape"][0] == i.call["mat2"]["shape"][0]
               and i.call["self"]["shape"][2] == i.call["mat2"]["shape"][1]]
    # independent uniform dims would relate 1 in ~121 rank-3 pairs; shared pools relate far more
    assert len(both3) > 100
    assert len(related) / len(both3) > 0.2


def test_params_follow_the_schema() -> None:
    params = {p.name: p for p in params_for(api_spec("max_pool2d"))}
    assert params["kernel_size.len"].levels == (1, 2)  # int[2]: one value or two
    assert "absent" in params["stride.len"].levels  # has a default
    assert "absent" not in params["self.rank"].levels
    assert set(params["ceil_mode"].levels) == {"absent", False, True}


def test_seeded_generation_stays_near_the_seed() -> None:
    spec = api_spec("bmm")
    seed = {"self": {"t": "tensor", "shape": [4, 3, 5], "dtype": "float32"},
            "mat2": {"t": "tensor", "shape": [4, 5, 2], "dtype": "float32"}}
    inputs = InputGenerator(spec, "random", seed_call=seed, rng_seed=1, seed_share=1.0).generate(300)
    near = [i for i in inputs if len(i.call["self"]["shape"]) == 3 and len(i.call["mat2"]["shape"]) == 3]
    assert len(near) / len(inputs) > 0.7
    assert len({i.key() for i in inputs}) > 50  # a neighbourhood, not one point
    assert seed["self"]["shape"] == [4, 3, 5]  # the seed itself is never mutated


def test_generation_is_reproducible() -> None:
    spec = api_spec("addcmul")
    a = InputGenerator(spec, "random", rng_seed=5).generate(50)
    b = InputGenerator(spec, "random", rng_seed=5).generate(50)
    assert [x.key() for x in a] == [x.key() for x in b]
