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
LONG = (PAGES / "classic_long_thread_hidden_items.html").read_text()
MORE = [(PAGES / f"classic_long_thread_hidden_items.more{k}.html").read_text() for k in (1, 2)]
MORE_PATH = "/_render_node/I_kwDOA-j9z85120001/timeline/more_items/{}"
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
        for n in (120001, 120002, 120003):
            gh.add_page(f"/pytorch/pytorch/issues/{n}", LONG)
        for k, fragment in enumerate(MORE, 1):
            gh.add_page(MORE_PATH.format(k), fragment)
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


def test_a_long_thread_without_its_script_shows_only_the_first_and_last_comments() -> None:
    issue = parse_issue_page(LONG, "pytorch/pytorch", 120001)
    assert [c.id for c in issue.comments] == [1905000001, 1905000002, 1905000008, 1905000009]
    assert "hidden items" not in issue.body + "".join(c.body for c in issue.comments)


@pytest.mark.browser
@needs_chromium
def test_real_chromium_clicks_load_more_until_the_thread_is_whole(crawler: BrowserCrawler, site: GitHubServer) -> None:
    site.inject(r"/more_items/1$", delay=0.5, times=1)  # a batch that takes its time
    before = site.count(r"/more_items/")
    issue = crawler.fetch_issue("pytorch/pytorch", 120001)
    assert [c.id for c in issue.comments] == [1905000000 + k for k in range(1, 10)]  # page order, no gap
    assert site.count(r"/more_items/") - before == 2  # two batches, the second revealed by the first
    assert issue.state == "closed" and issue.labels == ("module: dataloader", "triaged")
    repro = issue.comments[3].body
    assert "```python\nloader = DataLoader(ds, num_workers=4, persistent_workers=True)\nfor epoch in range(1000):\n" in repro
    assert 'File "train.py", line 42, in <module>' in issue.comments[6].body
    assert issue.updated_at == "2024-04-12T18:30:00Z"


@pytest.mark.browser
@needs_chromium
def test_real_chromium_retries_a_batch_that_failed_and_gives_up_on_one_that_never_comes(
    crawler: BrowserCrawler, site: GitHubServer
) -> None:
    site.inject(r"/more_items/2$", status=502, times=1, headers={"Content-Type": "text/html"}, body=b"<p>Unicorn!</p>")
    assert len(crawler.fetch_issue("pytorch/pytorch", 120002).comments) == 9  # the button came back: clicked again
    site.inject(r"/more_items/1$", status=502, times=100, headers={"Content-Type": "text/html"}, body=b"<p>Unicorn!</p>")
    try:
        with pytest.raises(BrowserError, match=r"cannot load the hidden items of .*/issues/120003 \('Load more'\): its hidden items failed to load after 3 attempts"):
            crawler.fetch_issue("pytorch/pytorch", 120003)
    finally:
        site.faults.clear()
