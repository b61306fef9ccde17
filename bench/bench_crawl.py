"""Crawl 10,000 issues from a loopback GitHub server: requests per issue, wall time, store size."""

from __future__ import annotations

import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from ghserver import GitHubServer, make_comment, make_issue  # noqa: E402

from sftl.config import load_settings  # noqa: E402
from sftl.intake import crawl  # noqa: E402
from sftl.store import Store  # noqa: E402

N = 10_000
COMMENTED_EVERY = 10  # 10% of issues carry a 3-comment thread
PRS_EVERY = 25  # 4% of listed items are pull requests (GitHub lists them with issues)


def ts(n: int) -> str:
    return f"2024-{1 + n // 2000:02d}-{1 + n // 80 % 25:02d}T{n // 60 % 24:02d}:{n % 60:02d}:00Z"


def now_iso(offset: float = 0.0) -> str:
    return datetime.fromtimestamp(time.time() + offset, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, GitHubServer() as gh:
        body = "Repro:\n\n```python\nimport torch\nx = torch.randn(8, device='cuda')\nprint(x.sum())\n```\n" * 4
        items = []
        for n in range(1, N + 1):
            pr = n % PRS_EVERY == 0
            count = 3 if (n % COMMENTED_EVERY == 0 and not pr) else 0
            items.append(make_issue("bench/repo", n, body=body, comments=count, updated_at=ts(n), pull_request=pr))
            if count:
                gh.add_comments("bench/repo", n, [make_comment("bench/repo", n, n * 10 + k) for k in range(count)])
        gh.add_issues("bench/repo", items)
        settings = load_settings({}, home=tmp, api_url=gh.url, max_retries=3, backoff_base=0.05)
        with Store(settings.db_path) as store:
            started = time.perf_counter()
            first = crawl("bench/repo", settings, store, state="all")
            wall = time.perf_counter() - started
            listing = gh.count(r"/repos/bench/repo/issues$")
            threads = gh.count(r"/comments$")
            stored = store.count_issues("bench/repo")
            db_size = store.size_bytes()
            cache_size = dir_size(settings.cache_dir)

            # an incremental re-crawl after 50 issues changed (5 of them got a new comment)
            for n in range(1, 51):
                gh.add_issues("bench/repo", [make_issue("bench/repo", n * 7, body=body, comments=4 if n <= 5 else 0,
                                                        updated_at=now_iso(n))])
                if n <= 5:
                    gh.add_comments("bench/repo", n * 7, [make_comment("bench/repo", n * 7, k) for k in range(4)])
            started = time.perf_counter()
            again = crawl("bench/repo", settings, store, state="all")
            wall2 = time.perf_counter() - started

        print(f"issues listed           {N} ({N // PRS_EVERY} of them pull requests, skipped)")
        print(f"issues stored           {stored}")
        print(f"first crawl             {first.requests} requests = {listing} listing pages + {threads} comment threads"
              f" ({first.retries} retries)")
        print(f"requests per issue      {listing / stored:.4f} listing only (goal <= 0.02; the paper: 1 page load per issue)")
        print(f"                        {first.requests / stored:.4f} with the comment threads of the "
              f"{100 // COMMENTED_EVERY}% commented issues")
        print(f"wall time               {wall:.2f} s ({stored / wall:.0f} issues/s, loopback server in the same process)")
        print(f"store size              {db_size / 1e6:.1f} MB SQLite ({db_size / stored:.0f} B/issue) + "
              f"{cache_size / 1e6:.1f} MB HTTP cache")
        print(f"incremental re-crawl    {again.issues_seen} changed issues, {again.requests} requests "
              f"({again.comment_threads} threads), {wall2:.2f} s")


if __name__ == "__main__":
    main()
