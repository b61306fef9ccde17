"""`sftl triage` over a hostile GitHub (truncated JSON, 502, 403 + Retry-After, a stalled answer) finishes
with every issue in the report; a page that stays broken stops the crawl with the resume hint."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path

import pytest

from sftl.cli import main
from tests.ghserver import GitHubServer, make_comment, make_issue

REPO = "hostile/repo"
BODIES = [
    "torch.histc gives different counts on CUDA than on CPU.\n```python\nimport torch\nx = torch.rand(100)\n"
    "print(torch.histc(x.cuda(), bins=4), torch.histc(x, bins=4))\n```",
    "AttributeError: module 'torch' has no attribute 'foo'\n```python\nimport torch\ntorch.foo()\n```",
    "The docs page of torch.load has a typo in its second paragraph.",
    "tf.math.cumsum on GPU returns different values than on CPU for float16 input.",
    "Feature request: a flag to silence the deprecation warning of torch.nn.functional.upsample.",
]


@pytest.fixture
def hostile_env(sftl_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SFTL_HTTP_TIMEOUT", "0.5")  # the stall is cut by the client's timeout
    monkeypatch.setenv("SFTL_BACKOFF", "0.01")
    monkeypatch.setenv("SFTL_RATE_LIMIT_WAIT", "5")


def _serve(gh: GitHubServer) -> None:
    gh.add_issues(REPO, [make_issue(REPO, n, title=f"Bug {n}", body=b, comments=2 if n == 2 else 0)
                         for n, b in enumerate(BODIES, 1)])
    gh.add_comments(REPO, 2, [make_comment(REPO, 2, 90 + i) for i in range(2)])


def test_triage_over_a_hostile_server_reports_every_issue(hostile_env: None, tmp_path: Path) -> None:
    with GitHubServer() as gh:
        _serve(gh)
        listing = r"/repos/hostile/repo/issues$"
        faults = [
            gh.inject(listing, status=200, body=b'[{"number": 1, "title": "cut sh', times=1),
            gh.inject(listing, status=502, times=1),
            gh.inject(listing, status=403, headers={"Retry-After": "1"}, body=b'{"message": "secondary rate limit"}'),
            # stalls far past the client's timeout (0.5 s) and past anything the rest of the run takes on a loaded
            # machine, so finishing well inside it shows the client cut the stall, with no race on the machine's speed
            gh.inject(listing, delay=600.0, times=1),
            gh.inject(r"/issues/2/comments$", status=200, body=b'[{"id": 90, "bo', times=1),
        ]
        out, err = io.StringIO(), io.StringIO()
        started = time.monotonic()
        code = main(["--api-url", gh.url, "triage", REPO, "--jobs", "1", "--out", str(tmp_path / "r")], out=out, err=err)
        elapsed = time.monotonic() - started
    assert code == 0, err.getvalue()
    assert elapsed < 300, err.getvalue() + "the 600 s stall was not cut by the client's timeout"
    assert all(f.times == 0 for f in faults)  # every fault was met, and retried past
    html = (tmp_path / "r" / "triage.html").read_text("utf-8")
    for n in range(1, len(BODIES) + 1):
        assert f'href="https://github.com/{REPO}/issues/{n}"' in html
    assert "sftl: waiting for 127.0.0.1" in err.getvalue() and "rate limited (403)" in err.getvalue()  # the 1 s wait is said


def test_a_listing_page_that_stays_truncated_stops_with_the_resume_hint(hostile_env: None, tmp_path: Path) -> None:
    with GitHubServer() as gh:
        _serve(gh)
        gh.inject(r"/repos/hostile/repo/issues$", status=200, body=b"[{", times=100)
        err = io.StringIO()
        code = main(["--api-url", gh.url, "crawl", REPO], out=io.StringIO(), err=err)
    lines = err.getvalue().strip().splitlines()
    assert code == 3
    assert re.search(r"malformed JSON answer .* after 6 attempts", lines[-1])
    assert "run the same crawl again to resume" in lines[-1]
    assert all(line.startswith("sftl: waiting for") for line in lines[:-1])


def test_a_truncated_body_is_never_cached(hostile_env: None, tmp_path: Path) -> None:
    with GitHubServer() as gh:
        _serve(gh)
        gh.inject(r"/repos/hostile/repo/issues/1$", status=200, body=b'{"number": 1, "ti', times=1)
        assert main(["--api-url", gh.url, "fetch", f"{REPO}#1", "--json"], out=io.StringIO(), err=io.StringIO()) == 0
    out = io.StringIO()
    assert main(["--offline", "show", f"{REPO}#1", "--json"], out=out, err=io.StringIO()) == 0
    assert '"Bug 1"' in out.getvalue()
