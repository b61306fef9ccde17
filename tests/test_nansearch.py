"""NaN/INF search: real torch programs searched in a real child process, through the library and the CLI."""

from __future__ import annotations

import importlib.util
import io
import json
import math
from pathlib import Path

import pytest

from sftl.cli import main
from sftl.config import load_settings
from sftl.errors import InputError
from sftl.nansearch.search import NanSearchResult, search_script, search_snippet

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "nansearch"


@pytest.fixture
def settings(sftl_home: Path):  # type: ignore[no-untyped-def]
    return load_settings(home=sftl_home)


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_entry_mode_finds_log_of_softmax_and_beats_random_in_runs(settings) -> None:  # type: ignore[no-untyped-def]
    r = search_script(FIX / "log_of_softmax_entry.py", settings, entry="loss", budget=4.0)
    assert isinstance(r, NanSearchResult)
    assert r.found and r.kind == "forward"
    assert r.op == "torch.log"
    assert r.line == 7 and "torch.log(p)" in r.code
    # the op input that triggered it holds an exact 0 (the underflowed probability)
    assert r.inputs["op"][0]["min"] == 0.0
    assert [v["name"] for v in r.inputs["program"]] == ["arg0", "arg1"]
    assert r.inputs["program"][0]["dtype"] == "float32"
    assert r.baseline is not None and r.steps >= 1
    assert r.steps < 40  # a handful of gradient steps, not a lucky random walk


def test_control_gives_no_false_alarm(settings) -> None:  # type: ignore[no-untyped-def]
    r = search_script(FIX / "guarded_log_softmax_entry.py", settings, entry="loss", budget=1.5, baseline=False)
    assert not r.found and r.op is None and r.line is None
    assert r.steps > 10 and r.baseline is None
    assert r.reason


def test_whole_script_mode_searches_factory_tensors(settings) -> None:  # type: ignore[no-untyped-def]
    r = search_script(FIX / "whole_script_sqrt_difference.py", settings, budget=3.0, baseline=False)
    assert r.found and r.op == "torch.sqrt" and r.line == 7
    # randn tensors are variables; the scalar eps constant is not
    assert r.variables == ("torch.randn@4", "torch.randn@5")
    assert r.inputs["op"][0]["min"] < 0


def test_in_place_unsafe_op_is_judged_on_its_input(settings) -> None:  # type: ignore[no-untyped-def]
    r = search_script(FIX / "in_place_log.py", settings, budget=2.0, baseline=False)
    assert r.found and r.op == "Tensor.log_" and r.line == 6
    assert r.inputs["op"][0]["min"] <= 0  # the input before log_ overwrote it


def test_params_makes_module_parameters_search_variables(settings) -> None:  # type: ignore[no-untyped-def]
    script = FIX / "learned_scale_module_params.py"
    r = search_script(script, settings, entry="forward", params=True, budget=3.0, baseline=False)
    assert r.variables == ("arg0", "model.scale")
    assert r.found and r.op == "Tensor.div" and r.line == 11
    with pytest.raises(InputError, match="--params needs --entry"):
        search_script(script, settings, params=True, budget=1.0)


def test_python_numeric_error_is_reported_at_its_line(settings) -> None:  # type: ignore[no-untyped-def]
    r = search_script(FIX / "python_zero_division.py", settings, budget=3.0, baseline=False)
    assert r.found and r.kind == "python" and r.op == "python ZeroDivisionError" and r.line == 6


def test_nan_gradient_of_the_programs_own_backward_is_found(settings) -> None:  # type: ignore[no-untyped-def]
    r = search_script(FIX / "nan_gradient_in_backward.py", settings, budget=1.0, baseline=False)
    assert r.found and r.kind == "backward" and r.op == "Tensor.backward" and r.line == 6
    assert r.reason == "the start point already produces NaN/INF"


def test_search_snippet_for_replay(settings) -> None:  # type: ignore[no-untyped-def]
    code = "import torch\nx = torch.randn(6)\ny = torch.exp(x * 3.0)\n"
    r = search_snippet(code, settings, budget=3.0, baseline=False)
    assert r.found and r.op == "torch.exp" and r.line == 3


def test_cli_json_prints_exactly_the_documented_keys(sftl_home: Path) -> None:
    code, out, err = cli("nan-search", str(FIX / "log_of_softmax_entry.py"), "--entry", "loss",
                         "--budget", "2", "--json")
    assert code == 0, err
    obj = json.loads(out)
    assert list(obj) == ["found", "op", "line", "inputs", "steps", "seconds", "baseline"]
    assert obj["found"] is True and obj["op"] == "torch.log" and obj["line"] == 7
    assert set(obj["baseline"]) == {"found", "seconds", "steps"}
    assert math.isfinite(obj["seconds"]) and obj["seconds"] >= 0


def test_cli_human_output_names_op_and_line(sftl_home: Path) -> None:
    code, out, _ = cli("nan-search", str(FIX / "whole_script_sqrt_difference.py"), "--budget", "2",
                       "--no-baseline")
    assert code == 0
    assert "torch.sqrt" in out and "whole_script_sqrt_difference.py:7" in out


@pytest.mark.parametrize(
    ("script", "extra", "message"),
    [
        ("syntax_error.py", [], "syntax_error.py:2: SyntaxError"),
        ("fails_at_start.py", [], "RuntimeError: dataset not found"),
        ("log_of_softmax_entry.py", ["--entry", "nope"], "defines no function nope()"),
        ("missing.py", [], "no such script"),
    ],
)
def test_bad_script_is_one_clear_line(sftl_home: Path, script: str, extra: list[str], message: str) -> None:
    code, out, err = cli("nan-search", str(FIX / script), "--budget", "1", *extra)
    assert code == 2
    assert out == ""
    assert err.startswith("sftl: ") and err.count("\n") == 1 and message in err
    assert "Traceback" not in err


def test_library_raises_input_error_for_bad_budget(settings) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError):
        search_script(FIX / "log_of_softmax_entry.py", settings, entry="loss", budget=0)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="tensorflow is not installed")
def test_tensorflow_entry_mode(settings) -> None:  # type: ignore[no-untyped-def]
    r = search_script(FIX / "tf_log_of_softmax_entry.py", settings, entry="loss", budget=4.0, baseline=False)
    assert r.framework == "tensorflow"
    assert r.found and r.op == "tf.math.log" and r.line == 7
    # the gradient phase alone: one taped run differentiates every site, then a first-order jump
    g = search_script(FIX / "tf_log_of_softmax_entry.py", settings, entry="loss", budget=4.0, baseline=False,
                      probes=False)
    assert g.found and g.phase == "gradient" and g.op == "tf.math.log" and g.steps <= 3


def test_repeats_time_both_searches_again_and_report_the_phase(settings) -> None:  # type: ignore[no-untyped-def]
    r = search_script(FIX / "log_of_softmax_entry.py", settings, entry="loss", budget=2.0, repeats=3)
    assert r.found and r.op == "torch.log" and r.phase in {"domain", "gradient"}
    assert r.baseline is not None and r.baseline.seconds > 0 and r.start_seconds > 0
    g = search_script(FIX / "log_of_softmax_entry.py", settings, entry="loss", budget=2.0, probes=False,
                      baseline=False)
    assert g.found and g.phase == "gradient" and g.op == "torch.log"


def test_cli_soft_guide_finds_log_of_softmax_and_says_how(sftl_home: Path) -> None:
    code, out, err = cli("nan-search", str(FIX / "log_of_softmax_entry.py"), "--entry", "loss", "--soft",
                         "--no-baseline", "--budget", "2")
    assert code == 0, err
    assert "torch.log" in out and "log_of_softmax_entry.py:7" in out and " by " in out


def test_the_speed_comparison_says_something_when_the_searches_tie_or_random_wins() -> None:
    from sftl.cli.nansearch import comparison

    assert comparison(1.0, True) == "both about as fast"
    assert comparison(0.5, True) == "random search 2.0x faster"
    assert comparison(20.0, True) == "gradient search 20.0x faster"
    assert comparison(3.0, False) == "gradient search >=3.0x faster"
