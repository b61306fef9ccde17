"""Our Needleman–Wunsch scorer: raw scores by hand, normalisation, parameters."""

from __future__ import annotations

import pytest

from sftl.localize.nw import nw_score, nw_similarity


def test_raw_scores_match_hand_alignments() -> None:
    assert nw_score("abc", "abc") == 3
    assert nw_score("abc", "abd") == 1  # 2 matches + 1 mismatch
    assert nw_score("abc", "ac") == 1  # 2 matches + 1 gap
    assert nw_score("", "abc") == -3
    assert nw_score("gattaca", "gcatgcu") == 0  # the textbook example with +1/-1/-1


def test_parameters_change_the_score() -> None:
    assert nw_score("abc", "abd", match=2, mismatch=-3, gap=-1) == 2  # abc- / ab-d beats a mismatch
    assert nw_score("abc", "abd", match=2, mismatch=-1, gap=-5) == 3


def test_similarity_is_normalised_and_symmetric() -> None:
    assert nw_similarity("RaggedTensor", "raggedtensor") == 1.0  # case-insensitive by default
    assert nw_similarity("RaggedTensor", "raggedtensor", case_sensitive=True) < 1.0
    assert nw_similarity("abc", "xyz") == 0.0
    a = nw_similarity("RaggedTensor", "ragged_tensor")
    assert 0.8 < a < 1.0
    assert a == nw_similarity("ragged_tensor", "RaggedTensor")
    assert nw_similarity("RaggedTensor", "ragged_tensor") > nw_similarity("RaggedTensor", "tensor_shape")
    assert nw_similarity("", "") == 1.0 and nw_similarity("", "a") == 0.0


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError):
        nw_similarity("a", "b", match=-1)
    with pytest.raises(ValueError):
        nw_similarity("a", "b", match=1, mismatch=2)
