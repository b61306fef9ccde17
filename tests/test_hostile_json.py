"""Hostile but legal JSON (absurd nesting, lone surrogate escapes) is bad input or cleaned, never a crash."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from sftl.cli import main


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SFTL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SFTL_GITHUB_API_URL", "http://127.0.0.1:9")  # a closed port: never the internet
    monkeypatch.setenv("SFTL_MAX_RETRIES", "0")
    return tmp_path


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("sftl:")]
    assert len(lines) == 1 and "internal error" not in err and "Traceback" not in err, err
    return lines[0]


def issue(number: int, title: str) -> dict[str, object]:
    return {"number": number, "title": title, "body": "b", "state": "open",
            "html_url": f"https://github.com/a/b/issues/{number}", "user": {"login": "u"}, "labels": [],
            "created_at": "2024-01-01T00:00:00Z", "updated_at": "2024-01-01T00:00:00Z", "comments": 0}


@pytest.mark.parametrize("argv", [
    ["fetch", "{f}"], ["import", "{f}"], ["screen", "{f}"], ["locate", "{f}", "--offline"],
    ["screen", "--train", "{f}"], ["similar", "{f}"], ["replay", "{f}", "--device", "cpu"],
])
def test_absurdly_nested_json_is_bad_input(home: Path, argv: list[str]) -> None:
    deep = home / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    rc, _, err = run(*(a.replace("{f}", str(deep)) for a in argv))
    assert rc == 2
    assert "nested too deeply" in one_line(err)


def test_import_keeps_good_issues_before_a_deeply_nested_document(home: Path) -> None:
    src = home / "mixed.json"
    src.write_text("[\n" + json.dumps(issue(1, "good")) + "]\n" + "[" * 100_000)
    rc, _, err = run("import", str(src))
    assert rc == 2 and "nested too deeply" in err
    rc, out, _ = run("show", "a/b#1", "--json")
    assert rc == 0 and json.loads(out)["title"] == "good"


def test_eval_skips_a_deeply_nested_label_line(home: Path) -> None:
    labels = home / "labels.jsonl"
    labels.write_text("[" * 100_000 + "\n")
    rc, _, err = run("eval", str(labels), "--no-plots", "--out", str(home / "ev"))
    assert rc == 2  # bad input: the label file gives nothing to evaluate
    assert "no usable label line" in one_line(err) and "nested too deeply" in one_line(err)


def test_a_lone_surrogate_escape_is_stored_as_a_replacement_character(home: Path) -> None:
    src = home / "surrogate.jsonl"
    # "\ud800" is a legal JSON escape but no Unicode character; SQLite refused it (internal error)
    src.write_text(json.dumps(issue(1, "\ud800 broken")) + "\n" + json.dumps(issue(2, "ok \U0001f600")) + "\n")
    rc, _, err = run("import", str(src))
    assert rc == 0, err
    rc, out, _ = run("show", "a/b#1", "--json")
    assert rc == 0 and json.loads(out)["title"] == "\ufffd broken"
    rc, out, _ = run("show", "a/b#2", "--json")
    assert json.loads(out)["title"] == "ok \U0001f600"  # a valid pair (emoji) is untouched
    rc, out, _ = run("export", "--format", "csv")
    assert rc == 0 and "\ufffd broken" in out


@pytest.mark.parametrize("status", [200, 422])
def test_a_deeply_nested_api_answer_is_a_github_error(home: Path, monkeypatch: pytest.MonkeyPatch, status: int) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    body = b"[" * 100_000

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("SFTL_GITHUB_API_URL", f"http://127.0.0.1:{server.server_address[1]}")
        for argv in (["fetch", "a/b#1"], ["crawl", "a/b"]):
            rc, _, err = run(*argv)
            assert rc == 3, err
            one_line(err)
    finally:
        server.shutdown()
        server.server_close()
