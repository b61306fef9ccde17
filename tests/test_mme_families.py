"""The MME localizer on the families real reports show: foreign owners, cut tracebacks, circular imports, state a class never set."""

from __future__ import annotations

import zipfile
from pathlib import Path

from sftl.extract import extract_text
from sftl.localize.mme import localize_paper, localize_sftl, parse_missing
from sftl.model import Issue, Localization, Outcome
from sftl.sources import LayeredSource, LocalTree, WheelSource

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "mme"
SITE = "/opt/venv/lib/python3.10/site-packages"


def _issue(title: str, body: str) -> Issue:
    return Issue("pytorch/pytorch", 1, title, body, html_url="https://github.com/pytorch/pytorch/issues/1")


def _locate(case: str, title: str, body: str, method: str = "sftl") -> Localization:
    issue = _issue(title, body)
    extraction = extract_text(issue.title, issue.body, issue.repo)
    source = LocalTree(FIXTURES / case, "pytorch", "2.1.0")
    fn = localize_sftl if method == "sftl" else localize_paper
    return fn(issue, extraction, source)


def _tb(*frames: tuple[str, int, str, str], error: str) -> str:
    lines = ["```", "Traceback (most recent call last):"]
    for path, line, func, src in frames:
        lines += [f'  File "{path}", line {line}, in {func}', f"    {src}"]
    return "\n".join([*lines, error, "```"])


# -- the standard library owns the name ------------------------------------------------------------


def test_cut_traceback_stdlib_platform_name_ranks_the_file_the_title_names() -> None:
    # the pasted traceback stops in another library's frames; the error line and the title remain
    body = (
        "Importing the data loader on Windows fails.\n\n```\n"
        "..\\site-packages\\mylib\\__init__.py:7: in <module>\n    from .loader import Loader\n```\n\n"
        "AttributeError: module 'signal' has no attribute 'SIGALRM'\n"
    )
    loc = _locate("stdlib_platform_name", "AttributeError from `worker_watchdog` on Windows", body)
    assert loc.outcome == Outcome.LOCATED, loc.reason
    top = loc.suspects[0]
    assert top.path == "torch/utils/data/_utils/worker_watchdog.py"
    assert "standard library" in top.reason and "only on some platforms" in top.reason
    assert "title names worker_watchdog" in top.reason and "import time" in top.reason
    # the guarded use (`hasattr(signal, "SIGALRM")`) ranks below it
    guarded = next(s for s in loc.suspects if s.path == "torch/distributed/launcher/api.py")
    assert guarded.score < top.score and "guarded" in guarded.reason


def test_stdlib_name_with_nothing_naming_a_file_abstains() -> None:
    loc = _locate("stdlib_platform_name", "signal error on Windows", "AttributeError: module 'signal' has no attribute 'SIGALRM'\n")
    assert loc.outcome == Outcome.ABSTAINED
    assert all(s.score < 0.5 for s in loc.suspects)


def test_stdlib_submodule_read_by_a_framework_frame_ranks_that_frame() -> None:
    body = _tb(
        ("/tmp/run.py", 3, "<module>", "fn = BytecodeCache.load(path, key)"),
        (f"{SITE}/torch/_dynamo/bytecode_cache.py", 16, "load", "assert isinstance(spec.loader, importlib.machinery.SourceFileLoader)"),
        error="AttributeError: module 'importlib' has no attribute 'machinery'",
    )
    loc = _locate("stdlib_platform_name", "cache load fails", body)
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert loc.suspects[0].path == "torch/_dynamo/bytecode_cache.py"
    assert "submodule" in loc.suspects[0].reason and "frame 2 (load)" in loc.suspects[0].reason


def test_stdlib_name_asked_by_user_code_still_abstains() -> None:
    body = _tb(("/tmp/run.py", 3, "<module>", "signal.SIGALRM"), error="AttributeError: module 'signal' has no attribute 'SIGALRM'")
    loc = _locate("stdlib_platform_name", "signal error", body)
    assert loc.outcome == Outcome.ABSTAINED
    assert "outside the framework" in loc.reason


# -- a third-party package owns the class -------------------------------------------------------------

_COMPILE_ERROR = (
    "```\ntriton.compiler.errors.CompilationError: at 3:12:    xindex = tl.arange(0, XBLOCK)\n"
    "    tmp0 = tl.full([XBLOCK], 0, tl.int32)\n            ^\n"
    "AttributeError(\"'constexpr' object has no attribute 'dtype'\")\n```\n"
)


def test_compiler_error_wrapping_a_third_party_attribute_error_ranks_the_framework_module_for_it() -> None:
    assert parse_missing("AttributeError(\"'constexpr' object has no attribute 'dtype'\")") is not None
    loc = _locate("third_party_owner", "Inductor codegen error: 'constexpr' object has no attribute 'dtype'", _COMPILE_ERROR)
    assert loc.outcome == Outcome.LOCATED, loc.reason
    top = loc.suspects[0]
    assert top.path == "torch/_inductor/codegen/triton.py"
    assert "belongs to triton" in top.reason and "module for triton" in top.reason
    # a file that uses triton but neither the title nor the package names ranks lower; one that does not use it is absent
    assert any(s.path == "torch/_inductor/runtime/autotune.py" and s.score < top.score for s in loc.suspects)
    assert all(s.path != "torch/_inductor/codegen/common.py" for s in loc.suspects)


def test_third_party_attribute_error_raised_below_a_framework_frame_ranks_that_frame() -> None:
    body = _tb(
        (f"{SITE}/torch/_inductor/graph.py", 13, "codegen", "return kernel.compile()"),
        (f"{SITE}/torch/_inductor/codegen/triton.py", 26, "compile", "return triton.compile(self.body.getvalue())"),
        (f"{SITE}/triton/compiler/compiler.py", 410, "compile", "ty = arg.dtype"),
        error="AttributeError: 'constexpr' object has no attribute 'dtype'",
    )
    loc = _locate("third_party_owner", "compile fails", body)
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert loc.suspects[0].path == "torch/_inductor/codegen/triton.py"
    assert "frame 2 (compile)" in loc.suspects[0].reason


def test_the_paper_method_does_not_read_the_wrapped_error() -> None:
    loc = _locate("third_party_owner", "Inductor codegen error", _COMPILE_ERROR, method="paper")
    assert loc.outcome == Outcome.ABSTAINED and not loc.suspects


# -- a circular import ---------------------------------------------------------------------------------


def test_circular_import_ranks_the_import_that_closed_the_cycle_then_the_reader() -> None:
    body = _tb(
        ("/tmp/run.py", 1, "<module>", "import torch"),
        (f"{SITE}/torch/__init__.py", 3, "<module>", "from torch import ("),
        (f"{SITE}/torch/amp/__init__.py", 2, "<module>", "import torch.amp._fused"),
        (f"{SITE}/torch/amp/_fused/__init__.py", 5, "<module>", "FusedGradScaler = functools.partial(amp.GradScaler, fused=True)"),
        error="AttributeError: partially initialized module 'torch' has no attribute 'amp' (most likely due to a circular import)",
    )
    loc = _locate("circular_import", "import torch fails", body)
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert [s.path for s in loc.suspects[:3]] == ["torch/amp/__init__.py", "torch/amp/_fused/__init__.py", "torch/__init__.py"]
    assert "closes the circular import" in loc.suspects[0].reason


# -- state the hierarchy promises but the object never got ------------------------------------------


def test_override_that_skips_the_base_setter_is_located_even_from_user_code() -> None:
    body = _tb(("/tmp/train.py", 6, "<module>", "chain.optimizer"), error="AttributeError: 'Chain' object has no attribute 'optimizer'")
    loc = _locate("skipped_setter", "Chain has no optimizer", body)
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert loc.suspects[0].path == "torch/utils/schedules.py"
    assert "Chain.__init__" in loc.suspects[0].reason and "without calling it" in loc.suspects[0].reason


def test_override_of_the_method_that_sets_a_private_name_is_located() -> None:
    body = _tb(
        ("/tmp/train.py", 9, "<module>", "print(chain.last_value())"),
        (f"{SITE}/torch/utils/schedules.py", 16, "last_value", "return self._last_value"),
        error="AttributeError: 'Chain' object has no attribute '_last_value'",
    )
    loc = _locate("skipped_setter", "Chain.last_value() fails", body)
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert loc.suspects[0].path == "torch/utils/schedules.py"
    assert "Chain." in loc.suspects[0].reason and "sets self._last_value" in loc.suspects[0].reason


def test_subclass_that_calls_the_base_setter_is_a_user_error() -> None:
    body = _tb(("/tmp/train.py", 6, "<module>", "warmup.optimizer"), error="AttributeError: 'Warmup' object has no attribute 'optimizer'")
    loc = _locate("skipped_setter", "Warmup has no optimizer", body)
    assert loc.outcome == Outcome.ABSTAINED
    assert "exists in" in loc.reason


def _averaged_report(load_line: str) -> str:
    return _tb(
        ("/tmp/resume.py", 4, "<module>", load_line),
        ("/tmp/resume.py", 5, "<module>", "avg.update_parameters(model)"),
        (f"{SITE}/torch/optim/averaged.py", 13, "update_parameters", "if self.use_buffers:"),
        error="AttributeError: 'AveragedModel' object has no attribute 'use_buffers'",
    )


def test_unpickled_object_without_a_setstate_default_is_located() -> None:
    loc = _locate("unpickled_state", "resuming fails", _averaged_report("avg = torch.load('avg.pt')"))
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert loc.suspects[0].path == "torch/optim/averaged.py"
    assert "__setstate__" in loc.suspects[0].reason and "older release" in loc.suspects[0].reason


def test_without_unpickling_the_existing_attribute_is_no_confident_suspect() -> None:
    loc = _locate("unpickled_state", "update fails", _averaged_report("avg = make_average(model)"))
    assert loc.outcome == Outcome.ABSTAINED
    assert all("__setstate__" not in s.reason for s in loc.suspects)


# -- which release's Python files are read ----------------------------------------------------------

_CHAIN_REPORT = _tb(("/tmp/train.py", 6, "<module>", "chain.optimizer"), error="AttributeError: 'Chain' object has no attribute 'optimizer'")
_LAYERS = FIXTURES / "release_layers"


def test_the_era_wheel_is_read_before_a_stand_in_tree_of_a_later_release() -> None:
    era = LocalTree(_LAYERS / "era_1_5", "pytorch", "1.5.0")
    layered = LayeredSource([LocalTree(_LAYERS / "stand_in_2_0", "pytorch", "2.0.0"), era])
    layered.version, layered.era_release = "1.5.0a0+abc", "1.5.0"
    issue = _issue("Chain has no optimizer", _CHAIN_REPORT + "\n\nPyTorch version: 1.5.0a0+abc\n")
    loc = localize_sftl(issue, extract_text(issue.title, issue.body, issue.repo), layered)
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert "Chain.__init__" in loc.suspects[0].reason
    # the stand-in alone (the class fixed there) says the name exists: no confident suspect
    alone = localize_sftl(issue, extract_text(issue.title, issue.body, issue.repo), LocalTree(_LAYERS / "stand_in_2_0", "pytorch", "2.0.0"))
    assert alone.outcome == Outcome.ABSTAINED


def test_a_release_guessed_from_the_date_that_lacks_the_class_gives_way_to_the_next() -> None:
    guessed = LayeredSource([LocalTree(_LAYERS / "before_1_4", "pytorch", "1.4.0")], successors=[LocalTree(_LAYERS / "era_1_5", "pytorch", "1.5.0")])
    issue = _issue("Chain has no optimizer", _CHAIN_REPORT)  # no version in the report
    loc = localize_sftl(issue, extract_text(issue.title, issue.body, issue.repo), guessed)
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert loc.suspects[0].path == "torch/optim/schedules.py"
    assert "read at 1.5.0" in loc.reason and "first appears after 1.4.0" in loc.reason
    # a report that names its release is read at that release
    named = _issue("Chain has no optimizer", _CHAIN_REPORT + "\n\nPyTorch version: 1.4.0\n")
    kept = localize_sftl(named, extract_text(named.title, named.body, named.repo), guessed)
    assert kept.outcome == Outcome.ABSTAINED


# -- the name across releases (the cached wheels before and after the report's) ----------------------

_HISTORY = FIXTURES / "release_history"


def _wheel_cache(tmp: Path, overrides: dict[str, str] | None = None) -> dict[str, WheelSource]:
    """Pack each release of the fixture into `<tmp>/wheels/pytorch-<v>/torch-<v>-py3-none-any.whl`."""
    out = {}
    for tree in sorted(_HISTORY.iterdir()):
        folder = tmp / "wheels" / f"pytorch-{tree.name}"
        folder.mkdir(parents=True)
        wheel = folder / f"torch-{tree.name}-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            files = {path.relative_to(tree).as_posix(): path.read_text(encoding="utf-8") for path in sorted(tree.rglob("*.py"))}
            for key, text in (overrides or {}).items():
                release, _, rel = key.partition("/")
                if release == tree.name:
                    files[rel] = text
            for rel, text in files.items():
                zf.writestr(rel, text)
        out[tree.name] = WheelSource(wheel, "pytorch", tree.name)
    return out


_CALIBRATE = _tb(
    ("/tmp/export.py", 4, "<module>", "converter.convert()"),
    (f"{SITE}/torch/lite/converter.py", 24, "convert", "return calibrate(self)"),
    (f"{SITE}/torch/lite/calibrate.py", 7, "calibrate", "return quantize(converter.model, converter.experimental_quantizer)"),
    error="AttributeError: 'Converter' object has no attribute 'experimental_quantizer'",
)


def test_a_name_renamed_in_the_reported_release_ranks_the_referrer_that_kept_the_old_one(tmp_path: Path) -> None:
    wheels = _wheel_cache(tmp_path)
    issue = _issue("convert fails", _CALIBRATE + "\n\nPyTorch version: 1.4.0\n")
    loc = localize_sftl(issue, extract_text(issue.title, issue.body, issue.repo), wheels["1.4.0"])
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert [s.path for s in loc.suspects[:2]] == ["torch/lite/calibrate.py", "torch/lite/converter.py"]
    assert "renamed" in loc.suspects[0].reason and "1.3.0" in loc.suspects[0].reason


def test_without_neighbour_releases_the_owner_ranks_first() -> None:
    issue = _issue("convert fails", _CALIBRATE)
    loc = localize_sftl(issue, extract_text(issue.title, issue.body, issue.repo), LocalTree(_HISTORY / "1.4.0", "pytorch", "1.4.0"))
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert loc.suspects[0].path == "torch/lite/converter.py"


def test_a_method_deleted_in_the_reported_release_only_keeps_the_owner_first(tmp_path: Path) -> None:
    text = (_HISTORY / "1.4.0" / "torch/lite/converter.py").read_text(encoding="utf-8")
    deleted = text.replace("    def _validate(self) -> None:\n        if not self.optimizations:\n            return\n", "")
    assert deleted != text
    wheels = _wheel_cache(tmp_path, {"1.4.0/torch/lite/converter.py": deleted})
    body = _tb(
        ("/tmp/export.py", 4, "<module>", "converter.convert()"),
        (f"{SITE}/torch/lite/converter.py", 19, "convert", "self._validate()"),
        error="AttributeError: 'Converter' object has no attribute '_validate'",
    )
    issue = _issue("convert fails", body + "\n\nPyTorch version: 1.4.0\n")
    loc = localize_sftl(issue, extract_text(issue.title, issue.body, issue.repo), wheels["1.4.0"])
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert loc.suspects[0].path == "torch/lite/converter.py"
    assert "had _validate in 1.3.0 and lost it in 1.4.0" in loc.suspects[0].reason


def test_a_function_moved_to_another_module_ranks_the_caller_that_still_reads_the_old_place(tmp_path: Path) -> None:
    wheels = _wheel_cache(tmp_path)
    body = _tb(
        ("/tmp/train.py", 5, "<module>", "scatter(batch, devices)"),
        (f"{SITE}/torch/nn/parallel.py", 6, "scatter", "leaves = torch.utils.helpers.flatten(inputs)"),
        error="AttributeError: module 'torch.utils.helpers' has no attribute 'flatten'",
    )
    issue = _issue("scatter fails", body + "\n\nPyTorch version: 1.4.0\n")
    loc = localize_sftl(issue, extract_text(issue.title, issue.body, issue.repo), wheels["1.4.0"])
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert loc.suspects[0].path == "torch/nn/parallel.py"
    assert "moved" in loc.suspects[0].reason and "torch/utils/tree.py" in loc.suspects[0].reason
    # at 1.3.0, where helpers still binds flatten, nothing is missing from the source: no such verdict
    old = localize_sftl(issue, extract_text(issue.title, issue.body, issue.repo), wheels["1.3.0"])
    assert all("moved" not in s.reason for s in old.suspects)


# -- the framework's model of a Python type --------------------------------------------------------


def _traced(error: str) -> str:
    return _tb(
        ("/tmp/model.py", 9, "<module>", "compiled(x)"),
        (f"{SITE}/torch/_dynamo/symbolic_convert.py", 9, "LOAD_ATTR", "result = BuiltinVariable(getattr).call_getattr(self, obj, inst.argval)"),
        (f"{SITE}/torch/_dynamo/variables/builtin.py", 8, "call_getattr", "member = getattr(obj, name)"),
        error=error,
    )


def test_a_name_real_lists_have_missing_under_the_tracer_ranks_its_model_of_list() -> None:
    loc = _locate("python_type_models", "torch.compile fails on a list method", _traced("AttributeError: 'list' object has no attribute 'copy'"))
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert loc.suspects[0].path == "torch/_dynamo/variables/lists.py"
    assert "Python's list has copy" in loc.suspects[0].reason and "ListVariable" in loc.suspects[0].reason


def test_a_name_no_list_has_stays_with_the_raising_frame() -> None:
    loc = _locate("python_type_models", "torch.compile fails", _traced("AttributeError: 'list' object has no attribute 'shape'"))
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert loc.suspects[0].path == "torch/_dynamo/variables/builtin.py"
    assert any(s.path == "torch/_dynamo/variables/lists.py" and s.score < loc.suspects[0].score for s in loc.suspects)


def test_a_renamed_name_other_framework_files_still_use_is_the_owners_to_keep(tmp_path: Path) -> None:
    exporter = "def export(converter):\n    return converter.experimental_quantizer\n"
    wheels = _wheel_cache(tmp_path, {"1.4.0/torch/lite/export.py": exporter})
    issue = _issue("convert fails", _CALIBRATE + "\n\nPyTorch version: 1.4.0\n")
    loc = localize_sftl(issue, extract_text(issue.title, issue.body, issue.repo), wheels["1.4.0"])
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert loc.suspects[0].path == "torch/lite/converter.py"


# -- a traceback cut before its error line -------------------------------------------------------------


def _cut(title: str) -> Localization:
    frames = _tb(
        ("/tmp/run.py", 1, "<module>", "import torch"),
        (f"{SITE}/torch/__init__.py", 3, "<module>", "from torch import ("),
        (f"{SITE}/torch/amp/__init__.py", 2, "<module>", "import torch.amp._fused"),
        (f"{SITE}/torch/amp/_fused/__init__.py", 5, "<module>", "FusedGradScaler = functools.partial(amp.GradScaler, fused=True)"),
        error="",
    )
    return _locate("circular_import", title, "The output stops here:\n\n" + frames)


def test_cut_traceback_is_read_from_the_frame_line_the_title_names() -> None:
    loc = _cut("AttributeError on `GradScaler` when importing torch")
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert loc.suspects[0].path == "torch/amp/_fused/__init__.py"
    assert "ends before its error line" in loc.suspects[0].reason and "GradScaler" in loc.suspects[0].reason


def test_cut_traceback_whose_title_names_no_missing_name_abstains() -> None:
    loc = _cut("importing torch hangs, then fails")
    assert loc.outcome == Outcome.ABSTAINED
    assert "ends before its error line" in loc.reason


def test_a_deprecated_stdlib_module_is_read_without_a_warning() -> None:
    # warnings are errors here: importing `crypt` to check the name must not warn
    body = _tb(
        ("/tmp/run.py", 3, "<module>", "h = hash_password(p)"),
        (f"{SITE}/torch/_dynamo/bytecode_cache.py", 16, "load", "crypt.METHOD_BLOWFISH2"),
        error="AttributeError: module 'crypt' has no attribute 'METHOD_BLOWFISH2'",
    )
    loc = _locate("stdlib_platform_name", "hashing fails", body)
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert "standard library" in loc.suspects[0].reason and "has no METHOD_BLOWFISH2" in loc.suspects[0].reason


def test_a_user_package_owner_no_framework_file_uses_stays_a_user_error() -> None:
    loc = _locate("third_party_owner", "training fails", "AttributeError: 'mymodels.Net' object has no attribute 'head'\n")
    assert loc.outcome == Outcome.ABSTAINED
    assert "user" in loc.reason


def test_activation_checkpointing_is_no_unpickling() -> None:
    loc = _locate("unpickled_state", "update fails", _averaged_report("avg = torch.utils.checkpoint.checkpoint(make_average, model)"))
    assert all("__setstate__" not in s.reason for s in loc.suspects)


# -- a compiled module's name some builds lack -------------------------------------------------------


def test_a_name_only_some_builds_bind_ranks_the_caller_not_the_stub() -> None:
    body = _tb(
        ("/tmp/run.py", 2, "<module>", "print(torch.cuda.device_count())"),
        (f"{SITE}/torch/cuda/__init__.py", 13, "device_count", "return torch._C._cuda_getDeviceCount()"),
        error="AttributeError: module 'torch._C' has no attribute '_cuda_getDeviceCount'",
    )
    loc = _locate("compiled_stub", "device_count fails on a CPU build", body)
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert loc.suspects[0].path == "torch/cuda/__init__.py"
    assert "only some builds" in loc.suspects[0].reason
    assert loc.suspects[-1].path == "torch/_C/__init__.pyi" and loc.suspects[-1].score < 0.35


def test_a_name_only_some_builds_bind_asked_by_user_code_abstains() -> None:
    body = _tb(("/tmp/run.py", 2, "<module>", "torch._C._cuda_getDeviceCount()"), error="AttributeError: module 'torch._C' has no attribute '_cuda_getDeviceCount'")
    loc = _locate("compiled_stub", "fails on a CPU build", body)
    assert loc.outcome == Outcome.ABSTAINED
    assert "installed build lacks it" in loc.reason


# -- a checkout of the framework's own pre-merge packages (torchdynamo, torchinductor) ----------------


def test_a_torchdynamo_checkout_frame_is_framework_code_at_its_innermost_package() -> None:
    from sftl.localize.mme.evidence import frame_repo_path
    from sftl.model import Frame

    frame = Frame("/home/dev/torchdynamo/torchinductor/ir.py", 1788, "simplify_and_reorder")
    assert frame_repo_path(frame, "pytorch") == "torchinductor/ir.py"  # not torchdynamo/torchinductor/ir.py
    site = Frame(f"{SITE}/torch/_inductor/ir.py", 10, "f")
    assert frame_repo_path(site, "pytorch") == "torch/_inductor/ir.py"
    assert frame_repo_path(Frame("/home/dev/myproj/model.py", 3, "f"), "pytorch") is None
    # the compiler's own frame reads a name its value lacks: that frame, not a user error
    body = _tb(("/home/dev/torchdynamo/torchinductor/scheduler.py", 254, "__init__", ") = node.simplify_and_reorder()"),
               ("/home/dev/torchdynamo/torchinductor/ir.py", 1788, "simplify_and_reorder",
                "reordering_reindex[i] = reads_buf.iter_reordering_reindex"),
               error="AttributeError: 'ComputedBuffer' object has no attribute 'iter_reordering_reindex'")
    loc = _locate("stdlib_platform_name", "[inductor] crash in simplify_and_reorder", body)
    assert loc.outcome == Outcome.LOCATED, loc.reason
    assert loc.suspects[0].path == "torchinductor/ir.py" and "frame 2 reads .iter_reordering_reindex" in loc.suspects[0].reason
