"""The real-browser intake: headless Chromium via the system chromedriver, issue pages parsed with BeautifulSoup into `Issue`.

`BrowserCrawler(settings)` drives one Chromium for many pages (use it as a context manager).
It never lets Selenium Manager fetch anything: the driver path is explicit (settings.chromedriver,
else /usr/bin/chromedriver or the one on PATH). `parse_issue_page(html, repo, number)` is pure and
reads both github.com markups: the classic server-rendered one (`js-issue-title`,
`timeline-comment`, `IssueLabel`) and the React one (`data-testid="issue-title"`, `issue-body`,
`markdown-body`). Code blocks come back as fenced ``` blocks with their language. Long threads
hide their middle behind "Load more…" buttons (github.com fetches each batch by script); the
crawler clicks them until none is left, so a thread is read whole or the fetch fails.
"""

from __future__ import annotations

import random
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bs4 import BeautifulSoup, NavigableString, Tag

from sftl.config import DEFAULT_API_URL, Settings
from sftl.errors import BrowserError, NotFoundError
from sftl.model import Comment, Issue

INSTALL_HINT = "install them (Debian/Ubuntu: apt-get install chromium chromium-driver) or set SFTL_CHROMIUM / SFTL_CHROMEDRIVER"
CHROME_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--no-first-run",
    "--no-default-browser-check",
    "--metrics-recording-only",
    "--mute-audio",
    "--window-size=1280,2000",
)
_TITLE_CSS = ".js-issue-title, [data-testid='issue-title'], bdi.markdown-title"
# "Load more…" of the classic timeline (a form fetching hidden items) and of the React one
_LOAD_MORE_XPATH = (
    "//button[contains(@class, 'ajax-pagination-btn')"
    " or starts-with(@data-testid, 'issue-timeline-load-more')"
    " or starts-with(normalize-space(.), 'Load more')]"
)
_MAX_LOAD_MORE = 200  # batches per page: a script that keeps adding buttons must not hold us forever


def web_root(settings: Settings) -> str:
    """Where issue pages live: github.com for the public API, the host for GitHub Enterprise
    (`https://HOST/api/v3`), and the API root itself otherwise (the tests' loopback server)."""
    api = settings.api_url.rstrip("/")
    if api == DEFAULT_API_URL:
        return "https://github.com"
    if api.endswith("/api/v3"):
        return api[: -len("/api/v3")]
    return api


def find_chromedriver(settings: Settings) -> str:
    candidates = [settings.chromedriver] if settings.chromedriver else ["/usr/bin/chromedriver", shutil.which("chromedriver")]
    for c in candidates:
        if c and Path(c).is_file():
            return c
    where = settings.chromedriver or "/usr/bin/chromedriver or PATH"
    raise BrowserError(f"chromedriver not found ({where}); {INSTALL_HINT}")


def find_chromium(settings: Settings) -> str:
    if settings.chromium:
        if Path(settings.chromium).is_file():
            return settings.chromium
        raise BrowserError(f"Chromium not found at {settings.chromium}; {INSTALL_HINT}")
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    raise BrowserError(f"Chromium not found on PATH; {INSTALL_HINT}")


# -- HTML -> text with fenced code ---------------------------------------------------------------

_BLOCK = {"p", "div", "section", "article", "table", "tr", "details", "summary", "figure", "dl", "dd", "dt", "task-lists"}
_SKIP = {"script", "style", "svg", "clipboard-copy", "template", "button", "input", "tool-tip"}


def _code_lang(node: Tag) -> str:
    for el in (node, node.parent if isinstance(node.parent, Tag) else None, node.find("code")):
        if not isinstance(el, Tag):
            continue
        if el.get("lang"):
            return str(el.get("lang"))
        for cls in el.get("class") or []:
            for prefix in ("highlight-source-", "language-", "lang-"):
                if cls.startswith(prefix):
                    return cls[len(prefix) :]
    return ""


def _fence(code: str, lang: str) -> str:
    code = code.strip("\n")
    ticks = "```" if "```" not in code else "````"
    return f"\n\n{ticks}{lang}\n{code}\n{ticks}\n\n"


def _render(node: Any, out: list[str]) -> None:
    if isinstance(node, NavigableString):
        if type(node).__name__ in ("Comment", "Doctype", "Declaration", "ProcessingInstruction"):
            return
        # HTML whitespace: a newline in running text is a space (code is handled by <pre> below)
        text = str(node)
        out.append(re.sub(r"\s+", " ", text))
        return
    if not isinstance(node, Tag):
        return
    name = node.name
    if name in _SKIP:
        return
    classes: list[str] = list(node.get("class") or [])
    if name == "div" and ("highlight" in classes or "snippet-clipboard-content" in classes):
        pre = node.find("pre")
        # GitHub keeps the exact source of a code block in this attribute; prefer it to the spans
        raw = node.get("data-snippet-clipboard-copy-content")
        code = str(raw) if raw is not None else (pre.get_text() if pre else node.get_text())
        out.append(_fence(code, _code_lang(pre if isinstance(pre, Tag) else node) or _code_lang(node)))
        return
    if name == "pre":
        out.append(_fence(node.get_text(), _code_lang(node)))
        return
    if name == "code":
        text = node.get_text()
        out.append(f"`{text}`" if "`" not in text else f"`` {text} ``")
        return
    if name == "br":
        out.append("\n")
        return
    if name in ("h1", "h2", "h3", "h4", "h5", "h6"):
        out.append("\n\n" + "#" * int(name[1]) + " " + node.get_text(" ", strip=True) + "\n\n")
        return
    if name == "li":
        out.append("\n- ")
        for child in node.children:
            _render(child, out)
        return
    if name in ("td", "th"):
        out.append(" | ")
    block = name in _BLOCK or name in ("ul", "ol", "blockquote")
    if block:
        out.append("\n\n")
    for child in node.children:
        _render(child, out)
    if block:
        out.append("\n\n")


def html_to_text(node: Tag | None) -> str:
    """A rendered markdown body back to markdown-ish text; code blocks as fenced blocks."""
    if node is None:
        return ""
    out: list[str] = []
    for child in node.children:
        _render(child, out)
    text = "".join(out).replace("\r\n", "\n")
    lines = [ln.rstrip() for ln in text.split("\n")]
    squeezed: list[str] = []
    in_fence = False
    for ln in lines:
        if ln.lstrip().startswith("```"):
            in_fence = not in_fence
        if not in_fence and not ln.strip() and squeezed and not squeezed[-1].strip():
            continue  # collapse runs of blank lines outside code
        squeezed.append(ln if in_fence else ln.strip())
    return "\n".join(squeezed).strip()


# -- the page parser ----------------------------------------------------------------------------------


def _first(soup: Tag, *selectors: str) -> Tag | None:
    for sel in selectors:
        found = soup.select_one(sel)
        if found is not None:
            return found
    return None


def _time_of(node: Tag | None) -> str:
    if node is None:
        return ""
    t = node.find("relative-time") or node.find("time")
    return str(t.get("datetime") or "") if isinstance(t, Tag) else ""


def _author_of(node: Tag) -> str:
    a = _first(node, "a.author", "[data-testid='issue-body-header-author']", "[data-testid='avatar-link']", "a.author-name")
    if a is None:
        return ""
    text = a.get_text(strip=True)
    if text:
        return text
    href = str(a.get("href") or "")
    return href.rstrip("/").rsplit("/", 1)[-1]


def _comment_id(node: Tag, fallback: int) -> int:
    for attr in ("id", "data-gid", "data-testid"):
        value = str(node.get(attr) or "")
        digits = "".join(ch for ch in value.rsplit("-", 1)[-1] if ch.isdigit())
        if digits:
            return int(digits)
    return fallback


def is_not_found_page(soup: BeautifulSoup) -> bool:
    title = soup.title.get_text(strip=True) if soup.title else ""
    return "page not found" in title.lower() or title.strip() == "404"


def parse_issue_page(html: str, repo: str, number: int, url: str = "") -> Issue:
    """An issue page's HTML -> Issue (classic or React github.com markup).

    Raises NotFoundError for GitHub's 404 page and BrowserError when the page holds no issue.
    """
    soup = BeautifulSoup(html, "html.parser")
    if is_not_found_page(soup):
        raise NotFoundError(f"issue {repo}#{number} not found (404 page)")
    title_el = _first(soup, ".js-issue-title", "[data-testid='issue-title']", "h1 bdi.markdown-title", "h1.gh-header-title")
    if title_el is None:
        raise BrowserError(f"the page for {repo}#{number} holds no issue (no title element); GitHub's markup may have changed")
    title = title_el.get_text(" ", strip=True)

    state_el = _first(soup, "[data-testid='header-state']", ".gh-header-meta .State", "span.State", ".State")
    state_text = str(state_el.get("title") or "") + " " + state_el.get_text(" ", strip=True) if state_el else ""
    state_attr = str(state_el.get("data-status") or "") if state_el else ""
    state = "closed" if "closed" in (state_text + state_attr).lower() else "open"

    labels: list[str] = []
    for a in soup.select(".js-issue-labels .IssueLabel, .sidebar-labels .IssueLabel, [data-testid='issue-labels'] a, [data-testid='sidebar-labels-section'] a[href*='label']"):
        name = str(a.get("data-name") or "") or a.get_text(" ", strip=True)
        if name and name not in labels:
            labels.append(name)

    # the opening post and the comments, in page order
    posts: list[Tag] = []
    react_body = soup.select_one("[data-testid='issue-body']")
    if react_body is not None:
        posts.append(react_body)
        posts.extend(soup.select("[data-testid^='comment-viewer-outer-box'], .react-issue-comment"))
    else:
        posts.extend(
            g for g in soup.select(".js-discussion .timeline-comment-group, .js-discussion .js-comment-container .timeline-comment")
            if g.select_one(".comment-body")
        )
        if not posts:
            posts.extend(soup.select(".timeline-comment"))
    # a comment container may nest inside another one's selection: keep the outermost only
    outer = [p for p in posts if not any(q is not p and p in q.descendants for q in posts)]

    def body_of(post: Tag) -> str:
        return html_to_text(_first(post, "td.comment-body", ".comment-body", "[data-testid='markdown-body']", ".markdown-body"))

    body, author, created = "", "", ""
    comments: list[Comment] = []
    if outer:
        first = outer[0]
        body, created = body_of(first), _time_of(first)
        author = _author_of(first) or _author_of(soup)
        for i, post in enumerate(outer[1:], 1):
            comments.append(
                Comment(id=_comment_id(post, i), author=_author_of(post), body=body_of(post), created_at=_time_of(post), updated_at=_time_of(post))
            )
    times = [c.created_at for c in comments if c.created_at] + ([created] if created else [])
    return Issue(
        repo=repo,
        number=number,
        title=title,
        body=body,
        state=state,
        labels=tuple(labels),
        author=author,
        created_at=created,
        updated_at=max(times) if times else created,
        comments_count=len(comments),
        comments=tuple(comments),
        is_pull_request=False,
        html_url=url or f"https://github.com/{repo}/issues/{number}",
    )


# -- the crawler ------------------------------------------------------------------------------------


class BrowserCrawler:
    """One headless Chromium, many issue pages. Same retry/timeout policy as the REST client."""

    def __init__(self, settings: Settings, base_url: str | None = None, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.settings = settings
        self.base_url = (base_url or web_root(settings)).rstrip("/")
        self._sleep = sleep
        self._driver: Any = None
        self._profile: str | None = None
        self.pages_loaded = 0

    def __enter__(self) -> BrowserCrawler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._driver is not None:
            try:
                self._driver.quit()
            except Exception:  # noqa: BLE001 (a dead driver is already closed)
                pass
            self._driver = None
        if self._profile:
            shutil.rmtree(self._profile, ignore_errors=True)
            self._profile = None

    def start(self) -> Any:
        """Start Chromium (once). BrowserError with an install hint when it cannot."""
        if self._driver is not None:
            return self._driver
        if self.settings.offline:
            raise BrowserError("the browser intake needs the network; drop --offline")
        try:
            from selenium import webdriver
            from selenium.common.exceptions import WebDriverException
            from selenium.webdriver.chrome.service import Service
        except ImportError:
            raise BrowserError("selenium is not installed: pip install 'sftl[browser]'") from None
        driver_path = find_chromedriver(self.settings)
        chromium = find_chromium(self.settings)
        self._profile = tempfile.mkdtemp(prefix="sftl-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for flag in CHROME_FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--user-data-dir={self._profile}")
        options.page_load_strategy = "normal"
        # an explicit Service path: Selenium Manager is never consulted, nothing is downloaded
        service = Service(executable_path=driver_path, env=self.settings.child_env())
        try:
            self._driver = webdriver.Chrome(service=service, options=options)
        except WebDriverException as exc:
            self.close()
            first = (exc.msg or str(exc)).strip().splitlines()[0] if (exc.msg or str(exc)).strip() else type(exc).__name__
            raise BrowserError(f"cannot start Chromium ({chromium}) via {driver_path}: {first}; {INSTALL_HINT}") from None
        except OSError as exc:
            self.close()
            raise BrowserError(f"cannot run {driver_path}: {exc.strerror or exc}; {INSTALL_HINT}") from None
        self._driver.set_page_load_timeout(self.settings.page_timeout)
        return self._driver

    def issue_url(self, repo: str, number: int) -> str:
        return f"{self.base_url}/{repo}/issues/{number}"

    def fetch_html(self, url: str) -> tuple[str, str]:
        """Load a page (retrying timeouts and connection failures) -> (final URL, page source)."""
        from selenium.common.exceptions import TimeoutException, WebDriverException
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        driver = self.start()
        attempt = 0
        while True:
            try:
                driver.get(url)  # returns after the load event ("normal" strategy)
                # client-rendered pages fill in after load: give the title a short grace period
                try:
                    WebDriverWait(driver, min(5.0, self.settings.page_timeout), poll_frequency=0.05).until(
                        lambda d: d.find_elements(By.CSS_SELECTOR, _TITLE_CSS)
                        or "not found" in (d.title or "").lower()
                        or d.current_url.startswith("chrome-error://")
                    )
                except TimeoutException:
                    pass  # parsed below; a page without an issue is retried like a 5xx
                final = driver.current_url
                self.pages_loaded += 1
                if final.startswith("chrome-error://"):
                    problem = "connection failed"
                else:
                    self.expand_hidden_items(driver, url)
                    source = driver.page_source
                    if 'id="main-frame-error"' in source:
                        problem = "connection failed"
                    else:
                        return final, source
            except TimeoutException:
                problem = f"timed out after {self.settings.page_timeout:g} s"
            except WebDriverException as exc:
                msg = (exc.msg or type(exc).__name__).strip().splitlines()
                problem = msg[0] if msg else type(exc).__name__
                if "invalid session" in problem.lower() or "disconnected" in problem.lower():
                    self.close()
                    driver = self.start()
            if attempt >= self.settings.max_retries:
                raise BrowserError(f"cannot load {url}: {problem} after {attempt + 1} attempts (network down?)")
            delay = min(60.0, self.settings.backoff_base * 2**attempt * random.uniform(0.5, 1.5))
            self._sleep(delay)
            attempt += 1

    def expand_hidden_items(self, driver: Any, url: str) -> int:
        """Click every "Load more…" of a long thread until none is left (each click's batch may
        bring another). A click whose batch does not arrive is retried with backoff like a failed
        request; BrowserError after that, rather than a thread with a silent gap. Returns clicks."""
        from selenium.common.exceptions import (
            StaleElementReferenceException,
            TimeoutException,
            WebDriverException,
        )
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        def visible_button() -> Any:
            for button in driver.find_elements(By.XPATH, _LOAD_MORE_XPATH):
                try:
                    if button.is_displayed() and button.is_enabled():
                        return button
                except StaleElementReferenceException:
                    continue
            return None

        def gone(button: Any) -> bool:
            try:
                return not button.is_displayed()
            except StaleElementReferenceException:
                return True  # replaced by the batch it fetched

        clicks = 0
        failures = 0
        wait_s = min(10.0, self.settings.page_timeout)
        while True:
            button = visible_button()
            if button is None:
                return clicks
            if clicks >= _MAX_LOAD_MORE:
                raise BrowserError(f"{url}: still more hidden items after {clicks} 'Load more' clicks; giving up")
            disabled_seen = False

            def settled(_: Any, button: Any = button) -> bool:
                # gone: the batch replaced it; enabled again after loading: the batch failed
                nonlocal disabled_seen
                try:
                    if not button.is_displayed():
                        return True
                    if not button.is_enabled():
                        disabled_seen = True
                        return False
                    return disabled_seen
                except StaleElementReferenceException:
                    return True

            try:
                # the page's handler disables the button as it starts fetching: seen here even when
                # the fetch fails before the first poll below
                disabled_seen = bool(driver.execute_script(
                    "arguments[0].scrollIntoView({block: 'center'}); arguments[0].click(); return arguments[0].disabled;",
                    button,
                ))
                WebDriverWait(driver, wait_s, poll_frequency=0.05).until(settled)
                if gone(button):
                    clicks += 1
                    continue
                problem = "its hidden items failed to load"
            except TimeoutException:
                problem = f"its hidden items did not load within {wait_s:g} s"
            except WebDriverException as exc:
                problem = ((exc.msg or type(exc).__name__).strip().splitlines() or [type(exc).__name__])[0]
            # the batch did not come: wait until the button may be clicked again, then retry
            if failures >= self.settings.max_retries:
                raise BrowserError(f"cannot load the hidden items of {url} ('Load more'): {problem} after {failures + 1} attempts")
            self._sleep(min(60.0, self.settings.backoff_base * 2**failures * random.uniform(0.5, 1.5)))
            failures += 1

    def fetch_issue(self, repo: str, number: int) -> Issue:
        url = self.issue_url(repo, number)
        attempt = 0
        while True:
            final, html = self.fetch_html(url)
            path = urlsplit(final).path
            if "/pull/" in path:
                raise NotFoundError(f"{repo}#{number} is a pull request, not an issue")
            try:
                return parse_issue_page(html, repo, number, url=f"https://github.com/{repo}/issues/{number}")
            except BrowserError:
                # an error page (GitHub's 5xx "Unicorn!" page) has no issue in it: retry like a 5xx
                if attempt >= self.settings.max_retries:
                    raise
                self._sleep(min(60.0, self.settings.backoff_base * 2**attempt * random.uniform(0.5, 1.5)))
                attempt += 1
