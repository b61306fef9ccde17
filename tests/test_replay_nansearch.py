"""`sftl replay --nan-search`: the replay's snippet is also searched for NaN/INF, in the sandbox."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from sftl.cli import main

pytest.importorskip("torch")


def _replay(tmp_path: Path, code: str) -> tuple[int, dict, str]:
    script = tmp_path / "snippet.py"
    script.write_text(code, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    code_ = main(["replay", "--snippet", str(script), "--framework", "pytorch", "--version", "2.13.0",
                  "--device", "cpu", "--nan-search", "--nan-budget", "20", "--json",
                  "--home", str(tmp_path / "home")], out=out, err=err)
    return code_, json.loads(out.getvalue()) if out.getvalue() else {}, err.getvalue()


def test_nan_search_finds_a_log_of_a_shrinking_margin(tmp_path: Path, sftl_home: Path) -> None:
    # clean at its start point: every value is >= 0.1 above the log's pole
    code, obj, err = _replay(tmp_path, "import torch\nx = torch.rand(16) + 0.5\ny = torch.log(x - 0.4)\nprint(float(y.sum()))\n")
    if obj.get("verdict") == "env-unavailable" or "sandbox" in err:
        pytest.skip(f"no sandbox or environment here: {err or obj.get('reason')}")
    assert code == 0, err
    assert obj["verdict"] == "no-error"  # the report's own inputs are fine...
    nan = obj["nan_search"]
    assert nan["found"] is True, nan  # ...but a nearby input is not
    assert nan["op"] == "torch.log" and nan["line"] == 3


def test_nan_search_on_a_tensorflow_snippet_says_why_not(tmp_path: Path, sftl_home: Path) -> None:
    script = tmp_path / "tf.py"
    script.write_text("print('no tensorflow needed to refuse')\n", encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    code = main(["replay", "--snippet", str(script), "--framework", "tensorflow", "--version", "2.21.0",
                 "--device", "cpu", "--nan-search", "--json", "--home", str(tmp_path / "home")], out=out, err=err)
    assert code in (0, 8), err
    obj = json.loads(out.getvalue())
    assert obj["nan_search"] == {"found": False, "reason": "whole-script NaN/INF search supports PyTorch snippets only"}
