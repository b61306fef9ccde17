"""Network down: commands over an issue already stored use the stored copy with a one-line note;
the wait is bounded and said."""

from __future__ import annotations

import io
import json
import socket
import sys
import time
from pathlib import Path

import pytest

from sftl.cli import main
from tests.ghserver import make_issue

BODY = "torch.histc gives different counts on CUDA than on CPU.\n```python\nimport torch\nprint(torch.histc(torch.rand(9), bins=3))\n```"


@pytest.fixture
def stored(sftl_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SFTL_BACKOFF", "0.01")
    lines = tmp_path / "i.jsonl"
    lines.write_text("\n".join(json.dumps(make_issue("o/r", n, body=BODY if n == 1 else f"other {n}")) for n in (1, 2, 3)))
    assert main(["import", str(lines)], out=io.StringIO(), err=io.StringIO()) == 0


@pytest.mark.parametrize("argv", [["locate", "o/r#1"], ["similar", "o/r#1"], ["replay", "o/r#1", "--device", "cpu"]])
def test_a_stored_issue_is_used_when_github_cannot_be_reached(stored: None, argv: list[str]) -> None:
    err = io.StringIO()
    code = main(argv, out=io.StringIO(), err=err)
    notes = [line for line in err.getvalue().splitlines() if "using the stored copy of o/r#1" in line]
    assert code != 3 and len(notes) == 1, err.getvalue()
    assert "127.0.0.1:9" in notes[0]


def test_fetch_still_fails_and_the_wait_is_bounded(stored: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SFTL_BACKOFF", "1")
    monkeypatch.setenv("SFTL_NET_WAIT", "2")
    err = io.StringIO()
    started = time.monotonic()
    assert main(["fetch", "o/r#1"], out=io.StringIO(), err=err) == 3
    assert time.monotonic() - started < 8
    lines = err.getvalue().splitlines()
    assert lines[-1].startswith("sftl: cannot fetch issue o/r#1 from 127.0.0.1:9") and "network down?" in lines[-1]
    assert all(line.startswith("sftl: waiting for 127.0.0.1:9") for line in lines[:-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="relies on Linux dropping SYNs to a full backlog")
def test_connections_that_never_complete_are_bounded_by_the_net_wait(stored: None, monkeypatch: pytest.MonkeyPatch) -> None:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)  # never accepted: once the backlog is full, further connections hang unanswered
    port = srv.getsockname()[1]
    fillers = []
    for _ in range(3):
        c = socket.socket()
        c.setblocking(False)
        try:
            c.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(c)
    monkeypatch.setenv("SFTL_HTTP_TIMEOUT", "1")
    monkeypatch.setenv("SFTL_NET_WAIT", "2.5")
    err = io.StringIO()
    started = time.monotonic()
    try:
        code = main(["--api-url", f"http://127.0.0.1:{port}", "fetch", "o/r#1"], out=io.StringIO(), err=err)
    finally:
        for c in fillers:
            c.close()
        srv.close()
    assert code == 3 and time.monotonic() - started < 8
    assert "no connection within 1 s" in err.getvalue().splitlines()[-1]


def test_one_command_waits_for_a_down_network_once(stored: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SFTL_BACKOFF", "1")
    monkeypatch.setenv("SFTL_NET_WAIT", "5")  # the second pause (1-3 s) always fits: at least one wait is said
    err = io.StringIO()
    started = time.monotonic()
    main(["locate", "o/r#1"], out=io.StringIO(), err=err)  # the issue, then a release's commit and sources
    waits = [line for line in err.getvalue().splitlines() if line.startswith("sftl: waiting for")]
    assert waits and all("while fetching issue o/r#1" in line for line in waits), err.getvalue()
    assert time.monotonic() - started < 15
    err = io.StringIO()  # the next command tries again
    main(["similar", "o/r#1"], out=io.StringIO(), err=err)
    assert "sftl: waiting for 127.0.0.1:9" in err.getvalue()
