"""`sftl locate` end to end: JSON file targets offline, output formats, exit codes, the real console script."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sftl.cli import main

pytest.importorskip("sftl.extract")
pytest.importorskip("sftl.screen")

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "demo"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_json_output_is_the_documented_object(sftl_home: Path) -> None:
    code, out, err = run("locate", str(FIXTURES / "mme_fx_graphmodule_missing_constant.json"), "--offline", "--json")
    assert code == 0, err
    payload = json.loads(out)
    assert set(payload) == {"issue", "category", "screening", "environment", "replay", "suspects", "outcome", "reason", "method",
                            "release"}
    # the fix's file (the referrer that asked the wrong object) among the first: which of it and the owner's
    # definition leads is the learned ranker's call, and moves with its refits
    assert payload["outcome"] == "located"
    assert "torch/fx/graph_module.py" in [s["path"] for s in payload["suspects"][:3]]
    # the suspect names its functions to read first: the traceback's ones among the first three, with lines
    functions = payload["suspects"][0]["functions"]
    assert 3 <= len(functions) <= 10 and all(set(f) == {"name", "start", "end", "score", "reason"} for f in functions)
    framed = [f for f in functions[:3] if f["name"] in ("_copy_attr", "GraphModule.__init__")]
    assert framed and all("frame" in f["reason"] and f["start"] <= f["end"] for f in framed)
    assert payload["release"] == "2.13.0"
    # stored: the same issue by reference works offline now, from the store
    code, out2, _ = run("locate", "pytorch/pytorch#990101", "--offline", "--json", "--top", "1")
    assert code == 0 and len(json.loads(out2)["suspects"]) == 1


def test_text_and_markdown_for_people(sftl_home: Path) -> None:
    target = str(FIXTURES / "mme_fx_graphmodule_missing_constant.json")
    code, out, _ = run("locate", target, "--offline")
    assert code == 0
    assert "category     mme" in out and "environment  framework pytorch" in out
    assert re.search(r"1\. +-?[0-9.]+  torch/fx/graph_module.py", out) and "(_copy_attr)" in out
    assert re.search(r"\n {14}- \S+ \(lines \d+-\d+\): ", out)  # a suspect's functions under it
    code, out, _ = run("locate", target, "--offline", "--format", "markdown", "--method", "paper")
    assert code == 0 and "| # | score | file | side | why |" in out and "(`paper`)" in out
    code, out, _ = run("locate", target, "--offline", "--format", "markdown")
    assert code == 0 and re.search(r"\]\(https://github\.com/pytorch/pytorch/blob/v2\.13\.0/torch/fx/graph_module\.py#L\d+-L\d+\)", out)
    code, out, _ = run("locate", str(FIXTURES / "mme_removed_module_in_user_code.json"), "--offline")
    assert code == 0 and "abstained" in out and "torch._six" in out


def test_exit_codes(sftl_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = json.loads((FIXTURES / "mme_removed_module_in_user_code.json").read_text())
    # a release whose sources are not at hand offline: no result, and the reason names the release
    other.update(number=990199, title="Typo in the docs of torch.nn.Linear",
                 body="The docstring says 'ouput' instead of 'output'.\n\nPyTorch version: 1.7.1")
    path = tmp_path / "other.json"
    path.write_text(json.dumps(other))
    code, out, _ = run("locate", str(path), "--offline")
    assert code == 8 and "skipped" in out and "1.7.1" in out
    code, _, err = run("locate", str(tmp_path / "absent.json"), "--offline")
    assert code == 2 and err.startswith("sftl: ")
    code, _, err = run("locate", "pytorch/pytorch#424242", "--offline")
    assert code == 3 and "offline" in err
    code, _, err = run("locate", str(path), "--top", "0")
    assert code == 2 and "--top: must be at least 1" in err + capsys.readouterr().err


def test_console_script_in_a_fresh_home(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "sftl"
    if not exe.exists():
        pytest.skip("sftl is not installed as a console script in this environment")
    env = dict(os.environ, SFTL_HOME=str(tmp_path / "home"), SFTL_GITHUB_API_URL="http://127.0.0.1:9")
    env.pop("GITHUB_TOKEN", None)
    proc = subprocess.run(
        [str(exe), "locate", str(FIXTURES / "mme_fx_graphmodule_missing_constant.json"), "--offline", "--json"],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["outcome"] == "located"
