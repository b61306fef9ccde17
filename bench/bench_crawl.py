"""Crawl 10,000 issues from a loopback GitHub server: requests per issue (comment threads included), wall time, store size.

`--commented 0.6` sets the share of issues that carry a 1..5-comment thread (60% by default,
about what pytorch/pytorch issues show).
"""

from __future__ import annotations

import argparse
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
PRS_EVERY = 25  # 4% of listed items are pull requests (GitHub lists them with issues)


def ts(n: int) -> str:
    return f"2024-{1 + n // 2000:02d}-{1 + n // 80 % 25:02d}T{n // 60 % 24:02d}:{n % 60:02d}:00Z"


def now_iso(offset: float = 0.0) -> str:
    return datetime.fromtimestamp(time.time() + offset, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def comments_of(n: int, share: float) -> int:
    """A deterministic 1..5-comment thread (3 on average) on `share` of the issues."""
    if (n * 7919) % 1000 >= share * 1000:
        return 0
    return 1 + (n * 31) % 5


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--commented", type=float, default=0.6, help="share of issues with comments (default 0.6)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, GitHubServer() as gh:
        body = "Repro:\n\n```python\nimport torch\nx = torch.randn(8, device='cuda')\nprint(x.sum())\n```\n" * 4
        items = []
        threads = comments = 0
        for n in range(1, N + 1):
            pr = n % PRS_EVERY == 0
            count = comments_of(n, args.commented)
            items.append(make_issue("bench/repo", n, body=body, comments=count, updated_at=ts(n), pull_request=pr))
            if count:
                gh.add_comments("bench/repo", n, [make_comment("bench/repo", n, n * 10 + k) for k in range(count)])
                threads += not pr
                comments += count
        gh.add_issues("bench/repo", items)
        settings = load_settings({}, home=tmp, api_url=gh.url, max_retries=3, backoff_base=0.05)
        with Store(settings.db_path) as store:
            started = time.perf_counter()
            first = crawl("bench/repo", settings, store, state="all")
            wall = time.perf_counter() - started
            listing = gh.count(r"/repos/bench/repo/issues$")
            per_issue = gh.count(r"/issues/\d+/comments$")
            comment_pages = gh.count(r"/issues/comments$")
            stored = store.count_issues("bench/repo")
            stored_comments = store._db.execute("SELECT COUNT(*) FROM comments").fetchone()[0]
            db_size = store.size_bytes()
            cache_size = dir_size(settings.cache_dir)

            # incremental re-crawls: 50 issues changed (5 of them got comments), then 1,000 (600 with a new comment)
            def change(numbers: list[int], commented: int, offset: float) -> None:
                for k, n in enumerate(numbers):
                    old = comments_of(n, args.commented)
                    new = old + 1 if k < commented else old
                    gh.add_issues("bench/repo", [make_issue("bench/repo", n, body=body, comments=new, updated_at=now_iso(offset))])
                    if new != old:
                        thread = [make_comment("bench/repo", n, n * 10 + j) for j in range(old)]
                        gh.add_comments("bench/repo", n, [*thread, make_comment("bench/repo", n, 10**7 + n, created_at=now_iso(offset))])

            change([n * 7 for n in range(1, 51) if n * 7 % PRS_EVERY], 5, 1)
            before = len(gh.requests)
            started = time.perf_counter()
            small = crawl("bench/repo", settings, store, state="all")
            wall2 = time.perf_counter() - started
            small_per_issue = sum(1 for r in gh.requests[before:] if r.path.endswith("/comments") and "/issues/comments" not in r.path)
            change([n for n in range(3001, 4001) if n % PRS_EVERY], 600, 2)
            started = time.perf_counter()
            big = crawl("bench/repo", settings, store, state="all")
            wall3 = time.perf_counter() - started

        print(f"issues listed           {N} ({N // PRS_EVERY} of them pull requests, skipped)")
        print(f"issues stored           {stored}; {threads} ({threads / stored:.0%}) with comments, {stored_comments} comments stored")
        print(f"first crawl             {first.requests} requests = {listing} listing pages + {comment_pages} repository-wide "
              f"comment pages + {per_issue} per-issue threads ({first.retries} retries)")
        print(f"requests per issue      {listing / stored:.4f} listing only (goal <= 0.02; the paper: 1 page load per issue)")
        print(f"                        {first.requests / stored:.4f} with the comment threads "
              f"(one request per thread would be {(listing + threads) / stored:.4f})")
        print(f"wall time               {wall:.2f} s ({stored / wall:.0f} issues/s, loopback server in the same process)")
        print(f"store size              {db_size / 1e6:.1f} MB SQLite ({db_size / stored:.0f} B/issue) + "
              f"{cache_size / 1e6:.1f} MB HTTP cache")
        print(f"incremental re-crawl    {small.issues_seen} changed issues, {small.requests} requests "
              f"({small.comment_mode}: {small_per_issue} threads, {small.comment_pages} comment pages), {wall2:.2f} s")
        print(f"incremental re-crawl    {big.issues_seen} changed issues, {big.requests} requests "
              f"({big.comment_mode}: {big.comment_threads} threads, {big.comment_pages} comment pages), {wall3:.2f} s")


if __name__ == "__main__":
    main()
