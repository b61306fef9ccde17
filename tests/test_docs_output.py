"""docs/output.md's `--json` shapes are what the commands print: the keys of each object shown, run offline."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from sftl import cli

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "output.md"

# the heading's first command -> the offline run that prints it (after the triage backlog is imported)
RUNS = {
    "sftl locate --json": ["locate", "fixtures/demo/mme_fx_graphmodule_missing_constant.json", "--offline", "--json"],
    "sftl screen --json": ["screen", "--json"],
    "sftl similar --json": ["similar", "pytorch/pytorch#995002", "--offline", "--json"],
    "sftl fetch --json": ["fetch", "fixtures/github/issue_mme_no_comments.json", "--offline", "--json"],
    "sftl cache info --json": ["cache", "info", "--json"],
    "sftl comment --json": ["comment", "fixtures/demo/mme_fx_graphmodule_missing_constant.json", "--offline",
                            "--source-root", "fixtures/sources/mini_pytorch_owners", "--json"],
    "sftl nan-search --json": ["nan-search", "bench/nan_suite/bug_log_softmax_output.py", "--entry", "loss",
                               "--budget", "2", "--json"],
}


def shown_objects(text: str) -> dict[str, Any]:
    """The first ```json block under each '## `sftl ...` *(checked)*' heading, keyed by its first command."""
    out = {}
    for m in re.finditer(r"^## `([^`]+)`[^\n]*\*\(checked\)\*\n(.*?)(?=^## |\Z)", text, re.S | re.M):
        block = re.search(r"```json\n(.*?)```", m.group(2), re.S)
        assert block, f"docs/output.md: no json block under {m.group(1)}"
        out[m.group(1)] = json.loads(block.group(1))
    return out


def differences(shown: Any, printed: Any, where: str = "") -> list[str]:
    """Keys shown but not printed or printed but not shown, through nested objects and first list items. An object
    shown with a "..." key is a mapping whose keys vary (a suspect's features): its keys are not compared."""
    if isinstance(shown, dict) and "..." in shown:
        return [] if isinstance(printed, dict) else [f"{where}: shown an object, printed {type(printed).__name__}"]
    if isinstance(shown, dict) and isinstance(printed, dict):
        out = [f"{where}.{k}: shown, not printed" for k in shown.keys() - printed.keys()]
        out += [f"{where}.{k}: printed, not shown" for k in printed.keys() - shown.keys()]
        for k in shown.keys() & printed.keys():
            out += differences(shown[k], printed[k], f"{where}.{k}")
        return out
    if isinstance(shown, list) and isinstance(printed, list) and shown and printed:
        return differences(shown[0], printed[0], f"{where}[0]")
    return []


def test_every_checked_heading_has_a_run() -> None:
    assert set(shown_objects(DOC.read_text(encoding="utf-8"))) == set(RUNS)


def test_differences_are_found() -> None:
    assert differences({"a": 1, "b": [{"c": 1}]}, {"a": 2, "b": [{"d": 1}], "e": 0}) != []
    assert differences({"a": 1, "b": [{"c": 1}]}, {"a": 2, "b": [{"c": 5}]}) == []
    assert differences({"f": {"x": 1, "...": 0}}, {"f": {"y": 2}}) == []
    assert differences({"f": {"x": 1, "...": 0}}, {"f": 3}) != []


@pytest.mark.slow
def test_the_documented_json_is_what_the_commands_print(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    home = ["--home", str(tmp_path / "home"), "--api-url", "http://127.0.0.1:9"]
    assert cli.main(["import", "fixtures/triage/backlog.jsonl", *home], out=io.StringIO(), err=io.StringIO()) == 0
    problems = []
    for heading, shown in shown_objects(DOC.read_text(encoding="utf-8")).items():
        out, err = io.StringIO(), io.StringIO()
        code = cli.main([*RUNS[heading], *home], out=out, err=err)
        if code != 0:
            problems.append(f"{heading}: exit {code}: {err.getvalue()[-500:]}")
            continue
        problems += [f"{heading}: {d}" for d in differences(shown, json.loads(out.getvalue()))]
    assert not problems, "\n".join(problems)
