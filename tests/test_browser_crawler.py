"""The browser intake: the page parser on github.com-like markup, and a real headless Chromium on loopback."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from ghserver import GitHubServer

from sftl.browser import BrowserCrawler, html_to_text, parse_issue_page, web_root
from sftl.cli import main
from sftl.config import load_settings
from sftl.errors import BrowserError, NotFoundError
from sftl.store import Store

PAGES = Path(__file__).resolve().parent.parent / "fixtures" / "github" / "pages"
CLASSIC = (PAGES / "classic_open_issue_code_and_comments.html").read_text()
REACT = (PAGES / "react_closed_issue_rendered_by_script.html").read_text()
HAVE_CHROMIUM = bool(shutil.which("chromium") or shutil.which("chromium-browser")) and bool(
    Path("/usr/bin/chromedriver").is_file() or shutil.which("chromedriver")
)
needs_chromium = pytest.mark.skipif(not HAVE_CHROMIUM, reason="chromium and chromedriver binaries are not installed")


def test_classic_page_parses_title_state_labels_code_and_comments() -> None:
    issue = parse_issue_page(CLASSIC, "pytorch/pytorch", 113524)
    assert issue.title == "torch.histc gives different results on CPU and CUDA for float16"
    assert issue.state == "open" and issue.author == "numerics-fan"
    assert issue.labels == ("module: cuda", "triaged", "module: numerical-stability")
    assert "```python\nimport torch\nx = torch.tensor([0.1, 0.2, 0.2, 0.9], dtype=torch.float16)\n" in issue.body
    assert "```\ntensor([1., 2., 0., 1.], dtype=torch.float16)\ntensor([1., 1., 1., 1.], device='cuda:0'" in issue.body
    assert "PyTorch version: 2.1.0+cu121\nCUDA used to build PyTorch: 12.1" in issue.body
    assert [(c.id, c.author) for c in issue.comments] == [(1807001001, "maintainer-a"), (1807002002, "numerics-fan")]
    assert issue.comments[1].body.endswith("```python\nprint(torch.histc(x.float().cuda(), bins=4, min=0, max=1))\n```")
    assert issue.updated_at == "2024-03-05T08:00:00Z"


def test_react_page_needs_its_script_to_run() -> None:
    with pytest.raises(BrowserError, match="holds no issue"):
        parse_issue_page(REACT, "tensorflow/tensorflow", 61234)


def test_not_found_page() -> None:
    html = "<html><head><title>Page not found · GitHub</title></head><body><h1>404</h1></body></html>"
    with pytest.raises(NotFoundError):
        parse_issue_page(html, "o/r", 1)


def test_html_to_text_keeps_backticks_inside_code() -> None:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup("<div><p>use <code>a`b</code></p><pre lang='cpp'><code>int x = 1;\n```\n</code></pre></div>", "html.parser")
    assert html_to_text(soup.div) == "use `` a`b ``\n\n````cpp\nint x = 1;\n```\n````"


def test_web_root_follows_the_api_url(tmp_path: Path) -> None:
    assert web_root(load_settings({}, home=tmp_path)) == "https://github.com"
    assert web_root(load_settings({}, home=tmp_path, api_url="https://ghe.corp/api/v3")) == "https://ghe.corp"


def test_missing_driver_is_a_browser_error_with_an_install_hint(tmp_path: Path) -> None:
    s = load_settings({"SFTL_CHROMEDRIVER": str(tmp_path / "nope")}, home=tmp_path)
    with BrowserCrawler(s) as crawler, pytest.raises(BrowserError, match="chromedriver not found.*apt-get install chromium chromium-driver"):
        crawler.start()


@pytest.fixture(scope="module")
def site():
    with GitHubServer() as gh:
        gh.add_page("/pytorch/pytorch/issues/113524", CLASSIC)
        gh.add_page("/tensorflow/tensorflow/issues/61234", REACT)
        gh.add_page("/o/r/issues/2", CLASSIC)
        gh.add_redirect("/o/r/issues/6", "/o/r/pull/6")
        gh.add_page("/o/r/pull/6", "<html><head><title>PR</title></head><body></body></html>")
        yield gh


@pytest.fixture(scope="module")
def crawler(site: GitHubServer, tmp_path_factory: pytest.TempPathFactory):
    home = tmp_path_factory.mktemp("home")
    s = load_settings({"PATH": "/usr/bin:/bin"}, home=home, api_url=site.url, max_retries=2, backoff_base=0.01, page_timeout=20)
    with BrowserCrawler(s) as c:
        yield c


@pytest.mark.browser
@needs_chromium
def test_real_chromium_reads_both_markups(crawler: BrowserCrawler) -> None:
    classic = crawler.fetch_issue("pytorch/pytorch", 113524)
    assert classic == parse_issue_page(CLASSIC, "pytorch/pytorch", 113524)
    react = crawler.fetch_issue("tensorflow/tensorflow", 61234)  # rendered by the page's script
    assert react.state == "closed" and react.labels == ("type:bug", "comp:data", "TF 2.13")
    assert "AttributeError: 'RaggedTensor' object has no attribute '_numpy'\n```" in react.body
    assert react.author == "ragged-user" and [c.author for c in react.comments] == ["tf-maintainer"]
    assert "```shell\npip install -U tf-nightly\n```" in react.comments[0].body


@pytest.mark.browser
@needs_chromium
def test_real_chromium_404_and_pull_request_redirect(crawler: BrowserCrawler) -> None:
    with pytest.raises(NotFoundError, match="not found"):
        crawler.fetch_issue("o/r", 404)
    with pytest.raises(NotFoundError, match="is a pull request"):
        crawler.fetch_issue("o/r", 6)


@pytest.mark.browser
@needs_chromium
def test_real_chromium_retries_an_error_page(crawler: BrowserCrawler, site: GitHubServer) -> None:
    site.inject(r"^/o/r/issues/2$", status=502, times=1, headers={"Content-Type": "text/html"},
                body=b"<html><head><title>Unicorn! \xc2\xb7 GitHub</title></head><body>No server is currently available</body></html>")
    before = crawler.pages_loaded
    assert crawler.fetch_issue("o/r", 2).title.startswith("torch.histc")
    assert crawler.pages_loaded - before == 2


@pytest.mark.browser
@needs_chromium
def test_cli_fetch_via_browser_stores_the_issue(site: GitHubServer, sftl_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SFTL_GITHUB_API_URL", site.url)
    out, err = io.StringIO(), io.StringIO()
    code = main(["fetch", "https://github.com/pytorch/pytorch/issues/113524", "--via", "browser"], out=out, err=err)
    assert code == 0, err.getvalue()
    assert out.getvalue().startswith("pytorch/pytorch#113524  [open]")
    with Store(sftl_home / "sftl.db") as store:
        stored = store.get_issue("pytorch/pytorch", 113524)
    assert stored is not None and len(stored.comments) == 2 and "```python" in stored.body
