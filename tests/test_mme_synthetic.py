"""The MME localizers on small framework-shaped trees: every error variant, the hierarchy walk, abstentions."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from sftl.localize.mme import localize_paper, localize_sftl, parse_missing
from sftl.model import Environment, Extraction, Frame, Issue, Outcome, Traceback
from sftl.sources import LocalTree

SITE = "/home/u/venv/lib/python3.11/site-packages"

TREE = {
    "torch/__init__.py": "from torch import optim, linalg\n",
    "torch/optim/__init__.py": "from .sgd import SGD\nfrom .optimizer import Optimizer\n",
    "torch/optim/optimizer.py": '''
        class Optimizer:
            """Base class of optimizers; add_param_group adds a group of parameters."""

            def __init__(self, params, defaults):
                self.param_groups = []
                for group in params:
                    self.add_param_group(group)

            def zero_grad(self):
                pass

            def state_dict(self):
                return {"param_groups": self.param_groups}
        ''',
    "torch/optim/sgd.py": '''
        from .optimizer import Optimizer as _Base


        class SGD(_Base):
            def __init__(self, params, lr=0.1):
                super().__init__(params, {"lr": lr})

            def step(self):
                return None
        ''',
    "torch/linalg/__init__.py": "from ._impl import norm\n",
    "torch/linalg/_impl.py": '''
        def norm(x):
            return x


        def solve_ex(a, b):
            return a
        ''',
    "torch/nn/__init__.py": "",
    "torch/nn/functional.py": '''
        import torch


        def solve(a, b):
            return torch.linalg.solve_ex(a, b)


        def late_import():
            from torch.linalg import solve_ex
            return solve_ex
        ''',
    "torch/nn/module.py": '''
        class Module:
            def __getattr__(self, name):
                raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

            def buffers(self):
                return iter(())
        ''',
    "torch/fx/__init__.py": "",
    "torch/fx/graph_module.py": '''
        def _copy_attr(from_module, to_module, field):
            orig = getattr(from_module, field)
            setattr(to_module, field, orig)
        ''',
    "torch/utils/__init__.py": "",
    "torch/utils/loader.py": "from torch.utils._compat import pin_memory\n",
    "torch/_ops.py": '''
        class OpOverloadPacket:
            def __init__(self, op):
                self._op = op

            def op_overloads(self):
                return []

            def __getattr__(self, key):
                raise AttributeError(
                    f"The underlying op of '{self._op}' has no overload name '{key}'"
                )
        ''',
    "torch/_decomp.py": '''
        def register(op):
            return op.overloads()
        ''',
    "torch/distributions/__init__.py": "",
    "torch/distributions/distribution.py": '''
        class Distribution:
            arg_constraints = {}

            def __init__(self):
                for param in self.arg_constraints:
                    getattr(type(self), param)
        ''',
    "torch/distributions/normal.py": '''
        from torch.distributions.distribution import Distribution


        class Normal(Distribution):
            def sample(self, shape=()):
                return self._extended_shape(shape)
        ''',
    "torch/distributions/categorical.py": '''
        from torch.distributions.distribution import Distribution


        class Categorical(Distribution):
            def sample(self, shape=()):
                return self._extended_shape(shape)
        ''',
    "torch/distributions/gamma.py": '''
        from torch.distributions.distribution import Distribution


        class Gamma(Distribution):
            def rsample(self, shape=()):
                return self._extended_shape(shape)
        ''',
    "torch/distributions/bernoulli.py": '''
        from torch.distributions.distribution import Distribution


        class Bernoulli(Distribution):
            """A Bernoulli distribution parameterized by probs or logits."""

            arg_constraints = {"probs": None, "logits": None}

            def __init__(self, probs=None, logits=None):
                if logits is not None:
                    self.logits = logits
                super().__init__()

            def probs(self):
                return 1 / (1 + self.logits)
        ''',
    "torch/autograd/__init__.py": "",
    "torch/autograd/profiler.py": '''
        class profile:
            def __enter__(self):
                self._start_trace()
                return self

            def _start_trace(self):
                pass

            def _stop_trace(self):
                pass
        ''',
    "torch/autograd/function.py": '''
        class FunctionCtx:
            def save_for_forward(self, *tensors):
                self.saved = tensors

            def mark_dirty(self, *args):
                pass


        class Function(FunctionCtx):
            @staticmethod
            def apply(*args):
                return None
        ''',
    "torch/distributions/dirichlet.py": '''
        from torch.autograd.function import Function


        class _Dirichlet(Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x
        ''',
    "torch/profiler/__init__.py": "",
    "torch/profiler/profiler.py": '''
        import torch.autograd.profiler as prof


        class profile:
            def __init__(self):
                self.profiler: prof.profile | None = None

            def _prepare_trace(self):
                self.profiler = prof.profile()
                self.profiler._prepare_trace()
        ''',
}


@pytest.fixture
def source(tmp_path: Path) -> LocalTree:
    for rel, text in TREE.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return LocalTree(tmp_path, "pytorch", "9.9.0")


def frame(rel: str | None, line: int, function: str, source: str = "") -> Frame:
    if rel is None:
        return Frame(path="/home/u/repro.py", line=line, function=function, source=source)
    return Frame(path=f"{SITE}/{rel}", line=line, function=function, source=source, repo_path=rel)


def extraction(frames: list[Frame], error: str) -> Extraction:
    exc, _, msg = error.partition(": ")
    return Extraction(
        snippet=None,
        traceback=Traceback(tuple(frames), exc, msg),
        environment=Environment(framework="pytorch", version="9.9.0"),
        error_line=error,
    )


ISSUE = Issue(repo="pytorch/pytorch", number=1, title="AttributeError", body="")


def paths(loc) -> list[str]:  # type: ignore[no-untyped-def]
    return [s.path for s in loc.suspects]


def test_parse_missing_reads_every_variant() -> None:
    m = parse_missing("AttributeError: 'RaggedTensor' object has no attribute '_numpy'. Did you mean: 'numpy'?")
    assert (m.kind, m.owner, m.name, m.suggestion) == ("attribute", "RaggedTensor", "_numpy", "numpy")
    assert parse_missing("type object 'Bernoulli' has no attribute 'logits'").kind == "type-attribute"
    m = parse_missing("AttributeError: module 'torch.linalg' has no attribute 'solve_ex'")
    assert (m.kind, m.module, m.name) == ("module-attribute", "torch.linalg", "solve_ex")
    m = parse_missing("ModuleNotFoundError: No module named 'torch._six'")
    assert (m.kind, m.module) == ("no-module", "torch._six")
    m = parse_missing("ImportError: cannot import name 'x' from partially initialized module 'torch.a' (most likely ...)")
    assert (m.kind, m.name, m.module, m.circular) == ("import-name", "x", "torch.a", True)
    m = parse_missing("AttributeError: The underlying op of 'aten.add' has no overload name 'foo'")
    assert (m.kind, m.module, m.name) == ("overload", "aten.add", "foo")
    assert parse_missing("RuntimeError: CUDA error: device-side assert triggered") is None


def test_base_class_lacking_the_method_is_blamed_through_an_alias(source: LocalTree) -> None:
    ex = extraction(
        [
            frame(None, 3, "<module>"),
            frame("torch/optim/sgd.py", 6, "__init__", 'super().__init__(params, {"lr": lr})'),
            frame("torch/optim/optimizer.py", 7, "__init__", "self.add_param_group(group)"),
        ],
        "AttributeError: 'SGD' object has no attribute 'add_param_group'",
    )
    loc = localize_sftl(ISSUE, ex, source)
    assert loc.outcome == Outcome.LOCATED
    assert paths(loc)[0] == "torch/optim/optimizer.py"
    assert "self.add_param_group" in loc.suspects[0].reason and "SGD" in loc.suspects[0].reason
    assert "torch/optim/sgd.py" in paths(loc)  # the subclass is listed, lower
    # the published method only checks the class named in the message: it blames sgd.py
    paper = localize_paper(ISSUE, ex, source)
    assert paths(paper)[0] == "torch/optim/sgd.py"
    assert "NW 1.00 vs SGD" in paper.suspects[0].reason and "lacks add_param_group" in paper.suspects[0].reason


def test_user_code_asking_for_an_existing_or_absent_method_abstains(source: LocalTree) -> None:
    exists = extraction(
        [frame(None, 5, "<module>", "opt.zero_grad()")], "AttributeError: 'SGD' object has no attribute 'zero_grad'"
    )
    loc = localize_sftl(ISSUE, exists, source)
    assert loc.outcome == Outcome.ABSTAINED and not loc.suspects
    assert "exists in 9.9.0" in loc.reason and "user code" in loc.reason
    absent = extraction(
        [frame(None, 5, "<module>", "opt.zero_grads()")], "AttributeError: 'SGD' object has no attribute 'zero_grads'"
    )
    loc = localize_sftl(ISSUE, absent, source)
    assert loc.outcome == Outcome.ABSTAINED and "removed or misspelled" in loc.reason


def test_module_attribute_missing_from_the_package_init(source: LocalTree) -> None:
    ex = extraction(
        [frame(None, 2, "<module>"), frame("torch/nn/functional.py", 5, "solve", "return torch.linalg.solve_ex(a, b)")],
        "AttributeError: module 'torch.linalg' has no attribute 'solve_ex'",
    )
    loc = localize_sftl(ISSUE, ex, source)
    assert paths(loc)[:2] == ["torch/linalg/__init__.py", "torch/linalg/_impl.py"]
    assert "re-export" in loc.suspects[0].reason
    assert "torch/nn/functional.py" in paths(loc)
    user = extraction([frame(None, 2, "<module>", "torch.linalg.solve_ex(a, b)")], ex.error_line or "")
    loc = localize_sftl(ISSUE, user, source)
    assert loc.outcome == Outcome.ABSTAINED and "torch/linalg/_impl.py" in loc.reason


def test_import_name_and_no_module(source: LocalTree) -> None:
    ex = extraction(
        [frame(None, 2, "<module>"), frame("torch/nn/functional.py", 9, "late_import", "from torch.linalg import solve_ex")],
        "ImportError: cannot import name 'solve_ex' from 'torch.linalg' (/x/torch/linalg/__init__.py)",
    )
    loc = localize_sftl(ISSUE, ex, source)
    assert paths(loc)[0] == "torch/linalg/__init__.py" and "torch/nn/functional.py" in paths(loc)
    nomod = extraction(
        [frame(None, 1, "<module>"), frame("torch/utils/loader.py", 1, "<module>", "from torch.utils._compat import pin_memory")],
        "ModuleNotFoundError: No module named 'torch.utils._compat'",
    )
    loc = localize_sftl(ISSUE, nomod, source)
    assert loc.outcome == Outcome.LOCATED and paths(loc)[0] == "torch/utils/loader.py"
    user = extraction([frame(None, 1, "<module>", "from torch._six import inf")], "ModuleNotFoundError: No module named 'torch._six'")
    loc = localize_sftl(ISSUE, user, source)
    assert loc.outcome == Outcome.ABSTAINED and "removed or renamed" in loc.reason
    third = extraction([frame(None, 1, "<module>", "import scipy")], "ModuleNotFoundError: No module named 'scipy'")
    assert "dependency" in localize_sftl(ISSUE, third, source).reason


def test_getattr_hook_owner_is_the_class_that_raised(source: LocalTree) -> None:
    ex = extraction(
        [
            frame(None, 1, "<module>"),
            frame("torch/_decomp.py", 2, "register", "return op.overloads()"),
            frame("torch/_ops.py", 9, "__getattr__", "raise AttributeError("),
        ],
        "AttributeError: The underlying op of 'aten.add' has no overload name 'overloads'. Did you mean: 'op_overloads'?",
    )
    loc = localize_sftl(ISSUE, ex, source)
    assert paths(loc)[0] == "torch/_ops.py" and "OpOverloadPacket" in loc.suspects[0].reason


def test_dynamic_attribute_through_module_getattr_blames_the_callers(source: LocalTree) -> None:
    ex = extraction(
        [
            frame(None, 1, "<module>"),
            frame("torch/fx/graph_module.py", 2, "_copy_attr", "orig = getattr(from_module, field)"),
            frame("torch/nn/module.py", 3, "__getattr__", "raise AttributeError("),
        ],
        "AttributeError: 'Module' object has no attribute '_tensor_constant0'",
    )
    loc = localize_sftl(ISSUE, ex, source)
    assert paths(loc)[0] == "torch/fx/graph_module.py"
    assert "dynamically" in loc.suspects[0].reason


def test_type_object_attribute_ignores_instance_assignments(source: LocalTree) -> None:
    ex = extraction(
        [
            frame(None, 1, "<module>"),
            frame("torch/distributions/bernoulli.py", 11, "__init__", "super().__init__()"),
            frame("torch/distributions/distribution.py", 6, "__init__", "getattr(type(self), param)"),
        ],
        "AttributeError: type object 'Bernoulli' has no attribute 'logits'",
    )
    loc = localize_sftl(ISSUE, ex, source)
    assert loc.outcome == Outcome.LOCATED and paths(loc)[0] == "torch/distributions/bernoulli.py"
    assert "self.logits" in loc.suspects[0].reason


def test_receiver_annotation_picks_the_right_class_of_two_with_one_name(source: LocalTree) -> None:
    ex = extraction(
        [
            frame(None, 1, "<module>"),
            frame("torch/profiler/profiler.py", 9, "_prepare_trace", "self.profiler._prepare_trace()"),
        ],
        "AttributeError: 'profile' object has no attribute '_prepare_trace'",
    )
    loc = localize_sftl(ISSUE, ex, source)
    assert paths(loc)[0] == "torch/autograd/profiler.py"
    assert "annotated as prof.profile" in loc.suspects[0].reason


def test_owner_absent_from_source_follows_the_interpreters_suggestion(source: LocalTree) -> None:
    ex = extraction(
        [
            frame(None, 1, "<module>"),
            frame("torch/autograd/function.py", 12, "apply", "return None"),
            frame("torch/distributions/dirichlet.py", 7, "forward", "ctx.save_for_backward(x)"),
        ],
        "AttributeError: '_DirichletBackward' object has no attribute 'save_for_backward'. Did you mean: 'save_for_forward'?",
    )
    loc = localize_sftl(ISSUE, ex, source)
    assert paths(loc)[0] == "torch/autograd/function.py"
    assert "save_for_forward" in loc.suspects[0].reason


def test_not_an_mme_no_traceback_and_no_source() -> None:
    none = Extraction(snippet=None, traceback=None, environment=Environment())
    assert localize_sftl(ISSUE, none, None).outcome == Outcome.ABSTAINED
    other = Extraction(snippet=None, traceback=None, environment=Environment(), error_line="RuntimeError: boom")
    loc = localize_sftl(ISSUE, other, None)
    assert loc.outcome == Outcome.ABSTAINED and "not a missing-module error" in loc.reason
    mme = Extraction(snippet=None, traceback=None, environment=Environment(), error_line="AttributeError: 'A' object has no attribute 'b'")
    assert localize_sftl(ISSUE, mme, None).outcome == Outcome.SKIPPED
    assert localize_paper(ISSUE, mme, None).outcome == Outcome.SKIPPED


def test_error_line_alone_is_treated_with_user_code_caution(source: LocalTree) -> None:
    ex = Extraction(
        snippet=None,
        traceback=None,
        environment=Environment(framework="pytorch", version="9.9.0"),
        error_line="AttributeError: 'SGD' object has no attribute 'zero_grads'. Did you mean: 'zero_grad'?",
    )
    loc = localize_sftl(ISSUE, ex, source)
    assert loc.outcome == Outcome.ABSTAINED and "misspelling" in loc.reason


def test_siblings_using_the_name_point_at_their_common_base(source: LocalTree) -> None:
    ex = extraction(
        [frame(None, 1, "<module>"), frame("torch/distributions/normal.py", 6, "sample", "return self._extended_shape(shape)")],
        "AttributeError: 'Normal' object has no attribute '_extended_shape'",
    )
    loc = localize_sftl(ISSUE, ex, source)
    assert paths(loc)[:2] == ["torch/distributions/distribution.py", "torch/distributions/normal.py"]
    assert "other subclass(es) of Distribution use self._extended_shape" in loc.suspects[0].reason


def test_module_name_bound_only_under_a_platform_check(tmp_path: Path) -> None:
    (tmp_path / "torch" / "distributed").mkdir(parents=True)
    (tmp_path / "torch" / "__init__.py").write_text("")
    (tmp_path / "torch" / "distributed" / "__init__.py").write_text(
        "def is_available():\n    return False\n\n\nif is_available():\n    from torch.distributed.c10d import init_process_group\n"
    )
    (tmp_path / "torch" / "optim.py").write_text("import torch\n\n\ndef zero(p):\n    torch.distributed.init_process_group()\n")
    source = LocalTree(tmp_path, "pytorch", "9.9.0")
    error = "AttributeError: module 'torch.distributed' has no attribute 'init_process_group'"
    user = extraction([frame(None, 1, "<module>", "torch.distributed.init_process_group()")], error)
    loc = localize_sftl(ISSUE, user, source)
    assert loc.outcome == Outcome.ABSTAINED and "only when `is_available()`" in loc.reason
    fw = extraction([frame(None, 1, "<module>"), frame("torch/optim.py", 5, "zero", "torch.distributed.init_process_group()")], error)
    loc = localize_sftl(ISSUE, fw, source)
    assert paths(loc) == ["torch/optim.py", "torch/distributed/__init__.py"]
    assert "without checking `is_available()`" in loc.suspects[0].reason


def test_a_frame_that_only_forwards_the_object_yields_to_the_one_that_built_it(source: LocalTree) -> None:
    ex = extraction(
        [
            frame(None, 1, "<module>"),
            frame("torch/fx/symbolic_trace.py", 40, "symbolic_trace", "return GraphModule(torch.nn.Module(), graph)"),
            frame("torch/fx/graph_module.py", 2, "_copy_attr", "orig = getattr(from_module, field)"),
            frame("torch/nn/module.py", 3, "__getattr__", "raise AttributeError("),
        ],
        "AttributeError: 'Module' object has no attribute '_tensor_constant0'",
    )
    loc = localize_sftl(ISSUE, ex, source)
    assert paths(loc)[:2] == ["torch/fx/symbolic_trace.py", "torch/fx/graph_module.py"]
    assert "only forwards the object" in loc.suspects[0].reason


def test_user_call_of_a_name_the_framework_calls_on_that_class_is_located(tmp_path: Path) -> None:
    (tmp_path / "torch" / "optim").mkdir(parents=True)
    (tmp_path / "torch" / "__init__.py").write_text("")
    (tmp_path / "torch" / "optim" / "__init__.py").write_text("")
    (tmp_path / "torch" / "optim" / "optimizer.py").write_text("class Optimizer:\n    def step(self):\n        pass\n")
    for i in range(3):
        (tmp_path / "torch" / f"use{i}.py").write_text(f"def f{i}(optimizer):\n    optimizer.zero_state()\n")
    source = LocalTree(tmp_path, "pytorch", "9.9.0")
    ex = extraction([frame(None, 3, "<module>", "opt.zero_state()")], "AttributeError: 'Optimizer' object has no attribute 'zero_state'")
    loc = localize_sftl(ISSUE, ex, source)
    assert loc.outcome == Outcome.LOCATED and paths(loc)[0] == "torch/optim/optimizer.py"
    assert "framework code calls .zero_state() on objects named like Optimizer in 3 files" in loc.suspects[0].reason
    # a name nobody in the framework uses stays a user error
    ex = extraction([frame(None, 3, "<module>", "opt.fit()")], "AttributeError: 'Optimizer' object has no attribute 'fit'")
    assert localize_sftl(ISSUE, ex, source).outcome == Outcome.ABSTAINED


def test_a_class_newer_than_the_sources_is_looked_for_in_the_module_the_snippet_names(source: LocalTree) -> None:
    # the reporter holds a ChainedSGD built from torch.optim.sgd, a class the 9.9.0 sources lack: a newer build's
    # torch/optim/sgd.py is where it lacks the name; a class of the user's own, or one reached through no
    # framework module, stays a user error
    error = "AttributeError: 'ChainedSGD' object has no attribute 'optimizer'"
    ex = extraction([frame(None, 4, "<module>", "s.optimizer")], error)
    body = "```python\nimport torch\ns = torch.optim.sgd.ChainedSGD([a, b])\ns.optimizer\n```\n" + error
    loc = localize_sftl(Issue(repo="pytorch/pytorch", number=2, title="ChainedSGD lacks optimizer", body=body), ex, source)
    assert loc.outcome == Outcome.LOCATED and paths(loc) == ["torch/optim/sgd.py"]
    assert "newer" in loc.suspects[0].reason and "9.9.0" in loc.suspects[0].reason
    imported = body.replace("import torch\ns = torch.optim.sgd.ChainedSGD", "from torch.optim.sgd import SGD, ChainedSGD\ns = ChainedSGD")
    loc = localize_sftl(Issue(repo="pytorch/pytorch", number=3, title="t", body=imported), ex, source)
    assert paths(loc) == ["torch/optim/sgd.py"]
    own = "```python\nclass ChainedSGD:\n    pass\ns = torch.optim.sgd.ChainedSGD()\n```\n" + error
    loc = localize_sftl(Issue(repo="pytorch/pytorch", number=4, title="t", body=own), ex, source)
    assert loc.outcome == Outcome.ABSTAINED and "user code" in loc.reason
    unqualified = "```python\ns = ChainedSGD()\ns.optimizer\n```\n" + error
    loc = localize_sftl(Issue(repo="pytorch/pytorch", number=5, title="t", body=unqualified), ex, source)
    assert loc.outcome == Outcome.ABSTAINED and not loc.suspects
    nowhere = body.replace("torch.optim.sgd.ChainedSGD", "torch.optim.nosuch.ChainedSGD")
    loc = localize_sftl(Issue(repo="pytorch/pytorch", number=6, title="t", body=nowhere), ex, source)
    assert loc.outcome == Outcome.ABSTAINED and not loc.suspects
