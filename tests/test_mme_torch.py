"""The MME localizer on real torch: a method is deleted at run time, the real traceback is read, and the
installed torch sources (with that method removed from its class) are searched."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from sftl.localize.mme import localize_paper, localize_sftl
from sftl.model import Environment, Extraction, Issue, Outcome
from sftl.sources import SitePackages

pytest.importorskip("torch")
extract = pytest.importorskip("sftl.extract")


class Overlay:
    """The installed sources with some files replaced (the injected fault)."""

    def __init__(self, base: SitePackages, overrides: dict[str, str]) -> None:
        self.base, self.overrides = base, overrides
        self.framework, self.version, self.description = base.framework, base.version, "overlay"

    def list_files(self) -> list[str]:
        return self.base.list_files()

    def read_text(self, path: str) -> str | None:
        return self.overrides.get(path) or self.base.read_text(path)


def without(text: str, cls: str, name: str) -> str:
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls)
    item = next(i for i in node.body if isinstance(i, ast.FunctionDef) and i.name == name)
    start = min([item.lineno, *(d.lineno for d in item.decorator_list)])
    lines[start - 1 : item.end_lineno] = []
    return "".join(lines)


def real_traceback(snippet: str) -> str:
    proc = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0, proc.stdout
    return proc.stderr


def run_case(snippet: str, file: str, cls: str, name: str) -> tuple[Extraction, Overlay]:
    stderr = real_traceback(snippet)
    tbs = extract.parse_tracebacks(stderr)
    assert tbs, stderr
    base = SitePackages("pytorch")
    source = Overlay(base, {file: without(base.read_text(file) or "", cls, name)})
    ex = Extraction(None, tbs[-1], Environment(framework="pytorch", version=base.version), error_line=stderr.strip().splitlines()[-1])
    return ex, source


ISSUE = Issue(repo="pytorch/pytorch", number=2, title="injected", body="")


def test_method_deleted_from_the_base_class_of_the_owner() -> None:
    snippet = (
        "import torch\n"
        "del torch.optim.Optimizer.add_param_group\n"
        "torch.optim.SGD(torch.nn.Linear(2, 1).parameters(), lr=0.1)\n"
    )
    ex, source = run_case(snippet, "torch/optim/optimizer.py", "Optimizer", "add_param_group")
    assert "'SGD' object has no attribute 'add_param_group'" in (ex.error_line or "")
    loc = localize_sftl(ISSUE, ex, source)
    assert loc.outcome == Outcome.LOCATED
    assert loc.suspects[0].path == "torch/optim/optimizer.py", loc.suspects
    assert "Optimizer" in loc.suspects[0].reason
    # the published method trusts the owner's name and blames the subclass's file
    assert localize_paper(ISSUE, ex, source).suspects[0].path == "torch/optim/sgd.py"


def test_method_deleted_behind_module_getattr() -> None:
    snippet = (
        "import torch\n"
        "del torch.nn.Module.named_buffers\n"
        "torch.nn.Linear(2, 1).named_buffers()\n"
    )
    ex, source = run_case(snippet, "torch/nn/modules/module.py", "Module", "named_buffers")
    # user code asked, through Module.__getattr__, but Module's own methods use self.named_buffers:
    # the framework lost it
    loc = localize_sftl(ISSUE, ex, source)
    assert loc.outcome == Outcome.LOCATED and loc.suspects[0].path == "torch/nn/modules/module.py"
    assert "user code" in loc.suspects[0].reason


def test_misspelled_method_in_user_code_abstains() -> None:
    stderr = real_traceback("import torch\ntorch.nn.Linear(2, 1).named_bufers()\n")
    tb = extract.parse_tracebacks(stderr)[-1]
    base = SitePackages("pytorch")
    ex = Extraction(None, tb, Environment(framework="pytorch", version=base.version))
    loc = localize_sftl(ISSUE, ex, base)
    assert loc.outcome == Outcome.ABSTAINED and "misspelling" in loc.reason and not loc.suspects


def test_unmodified_source_with_existing_method_abstains() -> None:
    snippet = "import torch\ndel torch.optim.Optimizer.zero_grad\ntorch.optim.SGD(torch.nn.Linear(2, 1).parameters(), lr=0.1).zero_grad()\n"
    stderr = real_traceback(snippet)
    tb = extract.parse_tracebacks(stderr)[-1]
    base = SitePackages("pytorch")
    ex = Extraction(None, tb, Environment(framework="pytorch", version=base.version))
    loc = localize_sftl(ISSUE, ex, base)
    assert loc.outcome == Outcome.ABSTAINED and "exists in" in loc.reason
