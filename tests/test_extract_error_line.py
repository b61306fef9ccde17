"""The final error line of a report: found wherever it is pasted, with its dotted type, in linear time."""

from __future__ import annotations

import time

from sftl.extract import extract_text


def test_dotted_error_types_are_read_whole() -> None:
    body = "It prints:\n\ntriton.compiler.errors.CompilationError: at 18:39: tmp3 = tl.broadcast_to(1)\n"
    assert extract_text("t", body, "pytorch/pytorch").error_line == "triton.compiler.errors.CompilationError: at 18:39: tmp3 = tl.broadcast_to(1)"
    nested = extract_text("t", "we see foo.Bar.BazError: it broke\n", "pytorch/pytorch").error_line
    assert nested == "foo.Bar.BazError: it broke"


def test_a_long_dotted_chain_without_an_error_is_read_in_linear_time() -> None:
    body = "a." * 100_000 + "\nCompilationError: x\n"  # was quadratic: the chain re-scanned from every dot
    start = time.perf_counter()
    line = extract_text("t", body, "pytorch/pytorch").error_line
    assert time.perf_counter() - start < 5.0
    assert line == "CompilationError: x"
