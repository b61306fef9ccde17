"""The word a whole-tree search tests with `in` before its regex: every match holds it, or no word is claimed."""

from __future__ import annotations

import re

import pytest

from sftl.localize.pycode import required_word

# (pattern, texts it matches): the word must be in each, so skipping files without it loses no match
CASES = [
    (r"\.experimental_new_quantizer\b", ["x = conv.experimental_new_quantizer"]),
    (r"^\s*class\s+TFLiteConverterV2\b", ["class TFLiteConverterV2(Base):"]),
    (r"^\s*(?:def\s+set_state\b|set_state\s*[:=])", ["    def set_state(self):", "set_state = None"]),
    (r"^\s*class\s+\w+\([^)]*\bModule\b", ["class Linear(nn.Module):"]),
    (r"self\.weight_g\b", ["return self.weight_g * 2"]),
    (r"colou?r_map\b", ["color_map", "colour_map"]),
    (r"\.step\(", ["opt.step()"]),
    (r"^\s+def\s+__setstate__\b", ["    def __setstate__(self, state):"]),
]


@pytest.mark.parametrize(("pattern", "texts"), CASES)
def test_every_match_holds_the_required_word(pattern: str, texts: list[str]) -> None:
    word = required_word(pattern)
    assert word is not None and len(word) >= 3
    for text in texts:
        assert re.search(pattern, text, re.M), text
        assert word in text


@pytest.mark.parametrize("pattern", [r"foo|barbaz", r"(?:abc)?defg", r"(?<!self\.)weight_g\b(?!_norm)", r"(?i)class\s+Foo", r"(xyz|uvw)", r"\w+\.\w+"])
def test_no_word_is_claimed_where_a_match_may_lack_it(pattern: str) -> None:
    assert required_word(pattern) is None


def test_a_common_keyword_yields_to_the_name_it_precedes() -> None:
    assert required_word(r"^\s*class\s+Foo\b") == "Foo"
    assert required_word(r"self\.x\b") == "self"  # nothing rarer to test


@pytest.mark.parametrize(("pattern", "texts"), [c for c in CASES if c[0].startswith("^")])
def test_the_unanchored_regex_matches_wherever_the_anchored_one_does(pattern: str, texts: list[str]) -> None:
    from sftl.localize.pycode import unanchored

    loose = unanchored(pattern)
    assert loose is not None
    for text in texts:
        assert re.search(pattern, text, re.M) and loose.search(text)
    assert not loose.search("nothing of the kind here")


def test_a_top_level_alternation_requires_what_every_branch_holds() -> None:
    pattern = r"\bsignal\.SIGKILL\b|^\s*from\s+signal\s+import\b[^\n]*\bSIGKILL\b"
    assert required_word(pattern) == "SIGKILL"
    for text in ("os.kill(pid, signal.SIGKILL)", "from signal import SIGTERM, SIGKILL"):
        assert re.search(pattern, text, re.M) and "SIGKILL" in text
    assert required_word(r"alpha_word|beta_word") is None
