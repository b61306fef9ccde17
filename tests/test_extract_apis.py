"""API extraction from a snippet: expressions nested past the stack, string formatting that is no remainder, masks."""

from __future__ import annotations

import pytest

from sftl.extract import extract, extract_apis
from sftl.model import Issue


@pytest.mark.parametrize("expr", ["x >> " * 1200 + "x", "x @ " * 1200 + "x", "-" * 1200 + "x", "x" + ".sum()" * 1200])
def test_a_snippet_nested_past_the_stack_keeps_the_rest_of_the_report(expr: str) -> None:
    code = f"import torch\nx = torch.ones(3)\ny = {expr}\n"
    assert "torch.ones" in extract_apis(code, "pytorch")  # was RecursionError
    body = f"Wrong on CUDA.\n\n```python\n{code}print(y)\n```\n"
    ex = extract(Issue(repo="pytorch/pytorch", number=5, title="rshift differs on CPU and CUDA", body=body))
    assert not any("extraction failed" in p for p in ex.problems), ex.problems  # was: everything dropped
    assert ex.environment.framework == "pytorch" and ex.snippet is not None


def test_string_formatting_is_no_remainder_and_a_mask_inverts() -> None:
    code = ('import torch\nx = torch.ones(3)\nprint("loss: %f" % x.sum())\nprint(f"{x}" "%s" % x)\n'
            "m = x > 0\ny = ~m\n")
    apis = extract_apis(code, "pytorch")
    assert "torch.Tensor.remainder" not in apis  # was there: "loss: %f" % tensor read as torch.remainder
    assert "torch.Tensor.bitwise_not" in apis  # was missing: a comparison's mask is a tensor
    assert "torch.Tensor.remainder" in extract_apis("import torch\nx = torch.ones(3)\ny = x % 2\n")
    assert "torch.Tensor.bitwise_not" not in extract_apis("import torch\nx = torch.ones(3)\nf = ~(x is None)\n")
