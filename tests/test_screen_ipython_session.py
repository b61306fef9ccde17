"""An IPython session pasted in one block is read as the script it ran and the output it printed."""

from __future__ import annotations

from sftl import screen as scr
from sftl.github import issue_from_json
from sftl.screen.sections import ipython_to_script, read_sections

SESSION = """```
In [12]: import torch
    ...: a = torch.rand(4, 3) - 1e7
    ...: print(torch.log_softmax(a, 1))
    ...: print(torch.log_softmax(a.cuda(), 1))
tensor([[-1.0986, -1.0986, -1.0986]])
tensor([[-1., -1., -2.]], device='cuda:0')

In [13]: torch.__version__
Out[13]: '1.5.0'
```
"""


def test_a_session_splits_into_its_script_and_what_it_printed() -> None:
    got = read_sections("log_softmax of shifted inputs", SESSION)
    assert got.code.splitlines() == ["import torch", "a = torch.rand(4, 3) - 1e7", "print(torch.log_softmax(a, 1))",
                                     "print(torch.log_softmax(a.cuda(), 1))", "torch.__version__"]
    assert "device='cuda:0'" in got.output and "In [" not in got.output and "'1.5.0'" in got.output


def test_a_block_without_prompts_is_no_session() -> None:
    assert ipython_to_script("tensor([1., 2.])\nInfo [3]: not a prompt") is None


def test_the_session_counts_as_the_snippet_run_on_both_devices() -> None:
    issue = issue_from_json({"number": 5, "title": "CUDA log_softmax produces wrong values for large negative inputs",
                             "html_url": "https://github.com/pytorch/pytorch/issues/5", "body": SESSION})
    rules = scr.prepare(issue).rules
    assert "the snippet runs on both devices" in rules.gcrde_why
    assert rules.gcrde >= scr.GCRDE_RULE_MIN
