"""`sftl fuzz` end to end: real workers, the exact --json object, seeds from files and issues, bad input."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from sftl.cli import main

KEYS = ["api", "framework", "version", "generated", "executed", "valid", "pass_rate_unfiltered",
        "pass_rate_filtered", "precision", "recall", "valid_per_second_unfiltered", "valid_per_second_filtered",
        "classifier", "crashes"]


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def test_fuzz_json_is_the_documented_object(sftl_home: Path, fixtures_dir: Path) -> None:
    rc, out, err = _run("fuzz", "topk", "--budget", "80", "--json", "--workers", "1",
                        "--seed-from", str(fixtures_dir / "fuzz" / "seed_topk.py"))
    assert rc == 0, err
    obj = json.loads(out)
    assert list(obj) == KEYS
    assert obj["api"] == "topk" and obj["framework"] == "pytorch" and obj["version"].startswith("2.")
    for k in ("pass_rate_unfiltered", "pass_rate_filtered", "precision", "recall"):
        assert 0.0 <= obj[k] <= 1.0
    assert obj["executed"] >= obj["generated"] - 10 > 0
    assert obj["valid"] > 0 and obj["crashes"] == []
    assert obj["classifier"]["cached"] is False
    # the model was saved under the home; a second run loads it
    assert list((sftl_home / "fuzz" / "models" / "pytorch").glob("topk-*.pkl"))
    rc, out, _ = _run("fuzz", "topk", "--budget", "30", "--json", "--workers", "1")
    assert rc == 0 and json.loads(out)["classifier"]["cached"] is True


def test_fuzz_seeded_from_an_issue_with_replay(sftl_home: Path, fixtures_dir: Path) -> None:
    import torch

    rc, out, err = _run("fuzz", "bmm", "--budget", "60", "--workers", "1", "--replay", "--variants", "3",
                        "--seed-from", str(fixtures_dir / "fuzz" / "issue_bmm_dtype_mismatch.json"))
    assert rc == 0, err
    assert "seed: torch.bmm(self=f32[4,3,5], mat2=f64[4,5,2])" in err
    assert "torch.bmm" in out and "pass rate" in out
    if torch.cuda.is_available():
        assert "compared on CPU and CUDA" in out
    else:
        assert "no CUDA device" in out  # never a fake GPU run


@pytest.mark.parametrize("argv,needle", [
    (["fuzz", "no_such_api_xyz"], "no API named"),
    (["fuzz", "bmm", "--inputs", "5"], "--inputs"),
    (["fuzz", "bmm", "--budget", "5"], "--inputs"),  # the old spelling of --inputs, still accepted
    (["fuzz", "bmm", "--replay"], "--seed-from"),
    (["fuzz", "bmm", "--seed-from", "missing.py"], "no such file"),
])
def test_bad_input_is_one_line_and_exit_2(sftl_home: Path, argv: list[str], needle: str) -> None:
    rc, out, err = _run(*argv)
    assert rc == 2 and needle in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.slow
def test_tensorflow_start_up_lines_stay_off_stderr_unless_debug(sftl_home: Path) -> None:
    pytest.importorskip("tensorflow")
    import os
    import subprocess
    import sys

    cmd = [sys.executable, "-c", "from sftl.cli import entry; entry()", "fuzz", "tf.math.abs", "--inputs", "20",
           "--jobs", "1", "--json"]
    run = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ}, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "absl::InitializeLog" not in run.stderr and "oneDNN" not in run.stderr
    assert json.loads(run.stdout)["api"]
