"""Replay end to end: real torch 2.13.0 in the sandbox, verdicts, the per-operator differential, store, CLI."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import pytest

from sftl.cli import main
from sftl.config import load_settings
from sftl.extract import extract
from sftl.intake import read_issue_file
from sftl.model import Device, Outcome, Traceback
from sftl.replay import (
    CROSS_DEVICE,
    compare_printed,
    compare_values,
    has_cuda_device,
    normalize_message,
    printed_pair,
    replay_issue,
    replay_json,
    replay_snippet,
    same_error,
)
from sftl.sandbox import Limits
from sftl.store import Store

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "replay"
MARK = "MARK: snippet started"


def _torch_cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _caps():
    from sftl.sandbox import probe

    return probe(load_settings(env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())}))


@pytest.fixture(scope="module")
def caps():
    found = _caps()
    if not (found.bwrap or found.unshare):
        pytest.skip("neither bubblewrap nor unshare --net works here: replay refuses to run snippets")
    return found


@pytest.fixture
def settings(tmp_path: Path, caps):
    return load_settings(env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "GITHUB_TOKEN": "ghp_never"},
                         home=tmp_path / "home")


def _issue(name: str):
    issue, _ = read_issue_file(FIX / name)
    return issue, extract(issue)


def test_missing_module_error_is_reproduced_on_torch_2_13_cpu(settings) -> None:
    issue, extraction = _issue("mme_attribute_error_torch_2_13.json")
    with Store(settings.db_path) as store:
        replay = replay_issue(issue, extraction, settings, store, device="both")
        assert replay.verdict is Outcome.REPRODUCED, replay.reason
        assert replay.environment.backend == "current" and replay.environment.version == "2.13.0"
        cpu = replay.runs[0]
        assert cpu.device is Device.CPU and MARK in cpu.stdout_tail
        assert (cpu.exception, cpu.message) == ("AttributeError", "'Tensor' object has no attribute 'ravel_'")
        assert cpu.details["frames"][-1]["line"] == 5
        assert cpu.details["device_info"]["cuda_visible_devices"] == ""  # CUDA hidden on the CPU run
        gpu = replay.runs[1]
        if not has_cuda_device():
            assert gpu.outcome is Outcome.NO_DEVICE and gpu.message == "skipped: no CUDA device"
        # stored: the same replay again is answered from the store
        again = replay_issue(issue, extraction, settings, store, device="both")
        assert again.runs[0].details["cached"] and again.verdict is Outcome.REPRODUCED
        assert store.get_replay(again.runs[0].details["cache_key"]) is not None


def test_other_errors_no_error_no_snippet_no_env(settings) -> None:
    issue, extraction = _issue("mme_attribute_error_torch_2_13.json")
    code = extraction.snippet.code
    other = Traceback((), "AttributeError", "'Tensor' object has no attribute 'flatten_'")
    assert replay_snippet(code, "pytorch", "2.13.0", settings, device="cpu", expected=other).verdict is Outcome.DIFFERENT_ERROR
    fine = "import torch\nprint('MARK')\nx = torch.arange(6.0).reshape(2, 3).ravel()\n"
    replay = replay_snippet(fine, "pytorch", "2.13.0", settings, device="cpu", expected=extraction.traceback)
    assert replay.verdict is Outcome.NO_ERROR and "expected AttributeError" in replay.reason
    issue, extraction = _issue("no_snippet_docs_typo.json")
    assert replay_issue(issue, extraction, settings).verdict is Outcome.NO_SNIPPET
    issue, extraction = _issue("mme_old_release_1_4_no_env.json")
    replay = replay_issue(issue, extraction, settings)
    assert replay.verdict is Outcome.ENV_UNAVAILABLE and replay.runs == ()
    assert "exact release 1.4.0" in replay.reason and "sftl envs create pytorch==1.4.0" in replay.reason
    assert replay_snippet(code, "jax", "0.4", settings).verdict is Outcome.ENV_UNAVAILABLE


def test_first_divergent_operator_against_a_float64_reference(settings) -> None:
    """No GPU here: the same per-op mechanism runs CPU float32 against float64 and finds histc."""
    issue, extraction = _issue("gcrde_histc_edges_torch_2_13.json")
    replay = replay_issue(issue, extraction, settings, cuda=False, repeats=1)
    assert replay.verdict is Outcome.NO_DEVICE, replay.reason
    assert replay.first_divergent_op == "aten::histc"
    report = replay.runs[0].details["opdiff"]
    assert report["reference"] == "float64" and report["divergent"][0]["op"] == "aten::histc"
    assert "float64 CPU reference: aten::histc" in replay.reason
    # ordinary float32 work (reductions, matmul, softmax, layer_norm, cumsum) is within tolerance
    ordinary = ("import torch\nprint('MARK')\nx = torch.randn(4096)\nw = torch.randn(64, 64)\n"
                "y = (x * x).sum()\nz = (w @ w).softmax(dim=1).mean()\n"
                "n = torch.nn.functional.layer_norm(w, (64,)).std()\nc = torch.cumsum(x, 0)\n")
    clean = replay_snippet(ordinary, "pytorch", "2.13.0", settings, cuda=False, repeats=1)
    assert clean.first_divergent_op is None and clean.runs[0].details["opdiff"]["checked"] >= 8


@pytest.mark.gpu
def test_gpu_run_compares_devices(settings) -> None:
    if not _torch_cuda():
        pytest.skip("no CUDA device (torch.cuda.is_available() is False)")
    issue, extraction = _issue("gcrde_histc_edges_torch_2_13.json")
    replay = replay_issue(issue, extraction, settings)
    gpu = replay.runs[1]
    assert gpu.outcome is Outcome.NO_ERROR and gpu.details["device_info"]["cuda_available"]
    assert replay.verdict in (Outcome.DISCREPANCY, Outcome.NO_DISCREPANCY)
    assert gpu.details["opdiff"]["reference"] == "cpu"


def test_hostile_snippet_is_contained_and_replay_carries_on(settings, caps) -> None:
    if caps.root and not caps.pids_cgroup:
        pytest.skip("root without a writable pids cgroup: nothing would cap a fork bomb here")
    limits = Limits(timeout=5, memory=2 << 30, max_procs=64, output=1_000_000)
    bomb = "print('MARK', flush=True)\nimport os\nwhile True:\n    os.fork()\n"
    replay = replay_snippet(bomb, "pytorch", "2.13.0", settings, device="cpu", limits=limits)
    assert "MARK" in replay.runs[0].stdout_tail
    assert replay.verdict in (Outcome.RESOURCE_LIMIT, Outcome.TIMEOUT)
    loop = "print('MARK', flush=True)\nwhile True:\n    pass\n"
    replay = replay_snippet(loop, "pytorch", "2.13.0", settings, device="cpu", limits=Limits(timeout=3))
    assert replay.verdict is Outcome.TIMEOUT and "killed after 3 s" in replay.runs[0].message
    ok = replay_snippet("import torch\nprint(torch.ones(2).sum().item())\n", "pytorch", "2.13.0", settings, device="cpu")
    assert ok.verdict is Outcome.NO_ERROR and "2.0" in ok.runs[0].stdout_tail


def test_json_has_exactly_the_documented_shape(settings) -> None:
    replay = replay_snippet("print('hi')\n", "pytorch", "2.13.0", settings, device="cpu")
    data = replay_json(replay)
    assert set(data) == {"environment", "runs", "verdict", "reason", "repairs", "packages"}
    assert set(data["environment"]) == {"framework", "version", "python", "backend", "name", "reason"}
    assert data["repairs"] == [] and data["packages"] == []
    assert set(data["runs"][0]) == {"device", "outcome", "exception", "message", "stdout_tail", "stderr_tail", "seconds"}
    assert data["verdict"] == "no-error" and data["runs"][0]["stdout_tail"] == "hi\n"
    json.dumps(data)


def test_messages_match_across_machines() -> None:
    want = Traceback((), "AttributeError", "'Foo' object at 0x7f3a2b1c has no attribute 'x' (/home/alice/lib/torch/a.py)")
    assert same_error(want, "AttributeError", "'Foo' object at 0x55d0aa12 has no attribute 'x' (/usr/lib/python3/torch/a.py)")
    assert not same_error(want, "TypeError", "'Foo' object at 0x55d0aa12 has no attribute 'x'")
    assert same_error(Traceback((), "torch._C._LinAlgError", "linalg.inv: singular"), "_LinAlgError", "linalg.inv: singular")
    assert normalize_message('No module named "torch._C"') == normalize_message("No module named 'torch._C'")


def test_comparisons_are_dtype_aware() -> None:
    f32 = {"y": {"dtype": "float32", "shape": [2], "values": [1.0, 2.0]}}
    near = {"y": {"dtype": "float32", "shape": [2], "values": [1.000001, 2.0]}}
    far = {"y": {"dtype": "float32", "shape": [2], "values": [1.001, "nan"]}}
    assert compare_values(f32, near) == []
    assert "2 of 2 elements differ" in compare_values(f32, far)[0].detail
    sum_order = {"y": {"dtype": "float32", "shape": [2], "values": [1.00005, 2.0]}}
    assert compare_values(f32, sum_order) and compare_values(f32, sum_order, CROSS_DEVICE) == []
    ints = {"n": {"dtype": "int64", "shape": [], "values": [3]}}
    assert compare_values(ints, {"n": {"dtype": "int64", "shape": [], "values": [4]}})
    assert compare_printed("tensor([0.1235, 2.0000])", "tensor([0.1234, 2.0000], device='cuda:0')") == []
    assert compare_printed("tensor([0.1235, 2.0000])", "tensor([0.1335, 2.0000], device='cuda:0')")
    pair = printed_pair("CPU: tensor([11., 10.])\nGPU: tensor([10., 11.],\n       device='cuda:0')\n")
    assert pair is not None and compare_printed(*pair)


def _cli(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(args, out=out, err=err), out.getvalue(), err.getvalue()


def test_cli_replay_and_bisect(sftl_home: Path, tmp_path: Path, caps) -> None:
    code, out, err = _cli(["replay", str(FIX / "mme_attribute_error_torch_2_13.json"), "--device", "cpu", "--json"])
    assert code == 0, err
    data = json.loads(out)
    assert data["verdict"] == "reproduced" and data["environment"]["backend"] == "current"
    snippet = tmp_path / "s.py"
    snippet.write_text("import torch\nprint('MARK')\ntorch.Tensor.no_such_thing\n")
    code, out, err = _cli(["replay", "--snippet", str(snippet), "--framework", "pytorch", "--version", "2.13.0",
                           "--expect", "AttributeError: type object 'Tensor' has no attribute 'no_such_thing'",
                           "--device", "cpu", "--timeout", "60", "--memory", "3G", "--max-procs", "64"])
    assert code == 0 and "verdict: reproduced" in out and "MARK" in out
    code, out, err = _cli(["replay", "--snippet", str(snippet), "--framework", "pytorch", "--version", "1.4.0"])
    assert code == 8 and "env-unavailable" in out
    # the 2.13 step is the replay above, answered from the store (same snippet, env, device, limits)
    code, out, err = _cli(["bisect", "--snippet", str(snippet), "--framework", "pytorch", "--versions", "2.12..2.13",
                           "--expect", "AttributeError: type object 'Tensor' has no attribute 'no_such_thing'",
                           "--device", "cpu", "--timeout", "60", "--memory", "3G", "--max-procs", "64", "--json"])
    result = json.loads(out)
    assert code == 0 and result["first_bad"] == "2.13.0" and result["unavailable"] == ["2.12.1"]
    assert [v["verdict"] for v in result["versions"]] == ["env-unavailable", "reproduced"]
    code, out, err = _cli(["replay"])
    assert code == 2 and "TARGET" in err


def test_reproduced_error_lends_its_frames_to_the_localizer(settings) -> None:
    from sftl.model import Environment, Extraction, Snippet
    from sftl.replay import confirm_extraction

    code = "import torch\nprint('MARK')\nm = torch.nn.Linear(2, 2)\nm.no_such_layer\n"
    extraction = Extraction(Snippet(code, "test"), None, Environment("pytorch", "2.13.0"),
                            error_line="AttributeError: 'Linear' object has no attribute 'no_such_layer'")
    issue, _ = _issue("mme_attribute_error_torch_2_13.json")
    replay = replay_issue(issue, extraction, settings, device="cpu")
    assert replay.verdict is Outcome.REPRODUCED
    confirmed = confirm_extraction(extraction, replay)
    assert confirmed.traceback is not None
    assert confirmed.traceback.framework_frames[-1].repo_path == "torch/nn/modules/module.py"
    assert confirmed.traceback.frames[0].line == 4


def test_locate_with_replay_fills_the_replay_field(sftl_home: Path, caps) -> None:
    code, out, err = _cli(["locate", str(FIX / "mme_attribute_error_torch_2_13.json"), "--replay", "--json", "--offline"])
    assert code in (0, 8), err
    data = json.loads(out)
    assert data["replay"]["verdict"] == "reproduced"
    assert data["replay"]["runs"][0]["exception"] == "AttributeError"


def test_a_cut_traceback_is_replaced_by_the_reproduced_one(settings) -> None:
    """The report pasted only the snippet's frame (cut before torch's): the replay's frames reach module.py."""
    from sftl.model import Environment, Extraction, Frame, Snippet
    from sftl.replay import confirm_extraction

    code = "import torch\nprint('MARK')\nm = torch.nn.Linear(2, 2)\nm.no_such_layer\n"
    cut = Traceback((Frame("/home/me/repro.py", 4, "<module>", "m.no_such_layer", None),
                     Frame("/usr/lib/python3/site-packages/torch/nn/modules/module.py", 1900, "__getattr__", "", "torch/nn/modules/module.py")),
                    "AttributeError", "'Linear' object has no attribute 'no_such_layer'")
    short = Traceback(cut.frames[:1] + (Frame("/x/torch/__init__.py", 1, "<module>", "import torch", "torch/__init__.py"),),
                      cut.exception, cut.message)
    extraction = Extraction(Snippet(code, "test"), short, Environment("pytorch", "2.13.0"))
    replay = replay_snippet(code, "pytorch", "2.13.0", settings, device="cpu", expected=short)
    assert replay.verdict is Outcome.REPRODUCED and replay.repairs == ()
    confirmed = confirm_extraction(extraction, replay)
    assert confirmed.traceback is not short and confirmed.traceback.framework_frames[-1].repo_path == "torch/nn/modules/module.py"
    # a report whose traceback is whole keeps its own
    whole = replace(extraction, traceback=cut)
    assert confirm_extraction(whole, replay).traceback is cut


def test_repairs_are_listed_in_the_result_and_no_repair_runs_verbatim(settings) -> None:
    fragment = ">>> x = torch.ones(3)\n>>> x.no_such_method()\n"
    expected = Traceback((), "AttributeError", "'Tensor' object has no attribute 'no_such_method'")
    replay = replay_snippet(fragment, "pytorch", "2.13.0", settings, device="cpu", expected=expected)
    assert replay.verdict is Outcome.REPRODUCED, replay.reason
    assert [r.kind for r in replay.repairs] == ["prompts", "import"] and replay.code.startswith("import torch\n")
    assert "snippet repaired: removed '>>>'" in replay.reason
    data = replay_json(replay)
    assert [r["kind"] for r in data["repairs"]] == ["prompts", "import"]
    verbatim = replay_snippet(fragment, "pytorch", "2.13.0", settings, device="cpu", expected=expected, repair=False)
    assert verbatim.repairs == () and verbatim.code == fragment
    assert verbatim.verdict is Outcome.DIFFERENT_ERROR and verbatim.runs[0].exception == "SyntaxError"


def test_a_missing_module_error_reproduces_only_with_the_same_missing_name(settings) -> None:
    code = "import torch\nimport no_such_package_sftl\n"
    want = Traceback((), "ModuleNotFoundError", "No module named 'torch._six'")
    replay = replay_snippet(code, "pytorch", "2.13.0", settings, device="cpu", expected=want)
    assert replay.verdict is Outcome.DIFFERENT_ERROR
    assert "expected ModuleNotFoundError: No module named 'torch._six'" in replay.reason
    assert "raised ModuleNotFoundError: No module named 'no_such_package_sftl'" in replay.reason
    # the verdict names the import the environment could not satisfy
    assert "missing package: no_such_package_sftl" in replay.reason
    same = Traceback((), "ImportError", "No module named no_such_package_sftl")  # Python 2's wording and class
    assert replay_snippet(code, "pytorch", "2.13.0", settings, device="cpu", expected=same).verdict is Outcome.REPRODUCED


def test_an_error_line_that_is_the_snippets_own_code_is_no_expected_error() -> None:
    from sftl.model import Environment, Extraction, Snippet
    from sftl.replay import expected_error

    code = "import tensorflow as tf\ntry:\n    run()\nexcept tf.errors.OutOfRangeError: pass\n"
    mine = Extraction(Snippet(code, "test"), None, Environment("tensorflow", "1.12.0"),
                      error_line="tf.errors.OutOfRangeError: pass")
    assert expected_error(mine) is None
    wrapped = replace(mine, snippet=Snippet(code.replace(": pass", ":\n    pass"), "test"))
    assert expected_error(wrapped) is None  # the same words over two lines
    raised = replace(mine, error_line="OutOfRangeError: End of sequence")
    got = expected_error(raised)
    assert got is not None and (got.exception, got.message) == ("OutOfRangeError", "End of sequence")


def test_a_dated_report_that_does_not_reproduce_is_tried_on_the_next_release_too(settings) -> None:
    """'main (Aug 2026)' replays on 2.13.0, current then; a different error sends it on to 2.14.0 (no env here)."""
    code = "import torch\nprint('MARK')\ntorch.no_such_function_yet()\n"
    want = Traceback((), "RuntimeError", "the kernel failed")
    replay = replay_snippet(code, "pytorch", "main (Aug 2026)", settings, device="cpu", expected=want)
    assert replay.environment.version == "2.13.0" and replay.verdict is Outcome.DIFFERENT_ERROR
    assert "2.13.0 was the newest pytorch release on 2026-08-15 (the date it names)" in replay.reason
    assert replay.reason.endswith("the next release 2.14.0: env-unavailable")
    # a versioned report is not sent on
    versioned = replay_snippet(code, "pytorch", "2.13.0", settings, device="cpu", expected=want)
    assert "the next release" not in versioned.reason


def test_a_reported_error_raised_and_then_wrapped_is_reproduced(settings) -> None:
    code = ("import torch\nprint('MARK')\ntry:\n    torch.ones(2).no_such_thing\n"
            "except AttributeError as exc:\n    raise RuntimeError('the backend failed') from exc\n")
    want = Traceback((), "AttributeError", "'Tensor' object has no attribute 'no_such_thing'")
    replay = replay_snippet(code, "pytorch", "2.13.0", settings, device="cpu", expected=want)
    assert replay.verdict is Outcome.REPRODUCED and replay.runs[0].exception == "AttributeError"
    assert "wrapped in RuntimeError: the backend failed" in replay.reason
    other = Traceback((), "AttributeError", "'Tensor' object has no attribute 'other_thing'")
    assert replay_snippet(code, "pytorch", "2.13.0", settings, device="cpu", expected=other).verdict is Outcome.DIFFERENT_ERROR


def test_the_reporters_script_name_and_line_do_not_matter() -> None:
    want = Traceback((), "RecompileError", "Recompiling function forward in test_fp8.py:38")
    assert same_error(want, "RecompileError", "Recompiling function forward in /tmp/sftl-run-x1/snippet.py:37")
    assert not same_error(want, "RecompileError", "Recompiling function __torch_function__ in /tmp/r/_harness.py:223")
