"""The browser intake on loopback: Chromium start-up and seconds per issue page (a long thread: two "Load more" batches)."""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from ghserver import GitHubServer  # noqa: E402

from sftl.browser import BrowserCrawler  # noqa: E402
from sftl.config import load_settings  # noqa: E402

PAGES = ROOT / "fixtures" / "github" / "pages"
N = 20  # pages of each markup


def main() -> int:
    if not (shutil.which("chromium") and (Path("/usr/bin/chromedriver").is_file() or shutil.which("chromedriver"))):
        print("skipped: chromium / chromedriver not installed")
        return 0
    classic = (PAGES / "classic_open_issue_code_and_comments.html").read_text()
    react = (PAGES / "react_closed_issue_rendered_by_script.html").read_text()
    long = (PAGES / "classic_long_thread_hidden_items.html").read_text()
    with tempfile.TemporaryDirectory() as tmp, GitHubServer() as gh:
        for n in range(1, N + 1):
            gh.add_page(f"/o/classic/issues/{n}", classic)
            gh.add_page(f"/o/react/issues/{n}", react)
            gh.add_page(f"/o/long/issues/{n}", long)
        for k in (1, 2):
            gh.add_page(f"/_render_node/I_kwDOA-j9z85120001/timeline/more_items/{k}",
                        (PAGES / f"classic_long_thread_hidden_items.more{k}.html").read_text())
        settings = load_settings({"PATH": "/usr/bin:/bin"}, home=tmp, api_url=gh.url, max_retries=2, backoff_base=0.1)
        with BrowserCrawler(settings) as crawler:
            started = time.perf_counter()
            crawler.start()
            startup = time.perf_counter() - started
            times: dict[str, list[float]] = {"classic": [], "react": [], "long": []}
            for n in range(1, N + 1):
                for kind in ("classic", "react", "long"):
                    t = time.perf_counter()
                    issue = crawler.fetch_issue(f"o/{kind}", n)
                    times[kind].append(time.perf_counter() - t)
                    assert issue.title and issue.comments and (kind != "long" or len(issue.comments) == 9)
    print(f"chromium start-up       {startup:.2f} s (once per crawler)")
    for kind, ts in times.items():
        print(f"{kind + ' page':<24}{statistics.mean(ts):.3f} s/page mean, {statistics.median(ts):.3f} median, "
              f"{max(ts):.3f} max over {len(ts)} pages")
    every = times["classic"] + times["react"] + times["long"]
    print(f"all pages               {statistics.mean(every):.3f} s/page (REST: 100 issues per request)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
