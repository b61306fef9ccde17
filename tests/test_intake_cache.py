"""The bounded HTTP cache: least-recently-used and age eviction, automatic pruning by clients, `sftl cache`."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import pytest
from ghserver import GitHubServer, make_issue

from sftl.cli import main
from sftl.config import load_settings
from sftl.errors import OfflineMissError
from sftl.github import GitHubClient
from sftl.github_cache import CACHE_PRUNE_INTERVAL_S, cache_usage, http_cache_dir, prune_cache


@pytest.fixture
def gh():
    with GitHubServer() as server:
        server.add_issues("o/r", [make_issue("o/r", n) for n in range(1, 11)])
        yield server


def entry_of(client: GitHubClient, number: int) -> Path:
    return client._cache_path(client._url(f"/repos/o/r/issues/{number}"), None)


def test_prune_drops_the_least_recently_used_first_and_a_revalidation_counts_as_use(gh: GitHubServer, tmp_path: Path) -> None:
    s = load_settings({}, home=tmp_path, api_url=gh.url, max_retries=0)
    now = time.time()
    with GitHubClient(s, cache_max_bytes=None, cache_max_age_s=None) as client:
        for n in range(1, 11):
            client.get_issue("o/r", n)
        for n in range(1, 11):  # issue 1 used longest ago ... issue 10 most recently
            os.utime(entry_of(client, n), (now - 1000 + n, now - 1000 + n))
        client.get_issue("o/r", 1)  # a 304: issue 1 is now the most recently used
        assert client.stats.not_modified == 1
        sizes = {n: entry_of(client, n).stat().st_size for n in range(1, 11)}
    usage = cache_usage(s)
    assert usage.files == 10 and usage.bytes == sum(sizes.values())
    budget = sum(sizes[n] for n in (1, 7, 8, 9, 10))
    pruned = prune_cache(s, max_bytes=budget, max_age_s=None)
    assert pruned.removed == 5 and pruned.bytes <= budget and pruned.freed == sum(sizes[n] for n in range(2, 7))
    kept = sorted(n for n in range(1, 11) if entry_of(GitHubClient(s), n).exists())
    assert kept == [1, 7, 8, 9, 10]
    # an evicted entry is only a miss: offline says exactly what is missing
    offline = load_settings({}, home=tmp_path, api_url=gh.url, offline=True)
    with GitHubClient(offline) as client, pytest.raises(OfflineMissError, match="issue o/r#2 is not in the cache"):
        client.get_issue("o/r", 2)


def test_prune_by_age_and_stray_temporaries(gh: GitHubServer, tmp_path: Path) -> None:
    s = load_settings({}, home=tmp_path, api_url=gh.url, max_retries=0)
    now = time.time()
    with GitHubClient(s, cache_max_bytes=None, cache_max_age_s=None) as client:
        for n in (1, 2, 3):
            client.get_issue("o/r", n)
        old = entry_of(client, 1)
        os.utime(old, (now - 40 * 86400, now - 40 * 86400))
    stray = old.parent / ".tmp-interrupted"
    stray.write_text("{")
    os.utime(stray, (now - 7200, now - 7200))
    pruned = prune_cache(s, max_bytes=None, max_age_s=30 * 86400)
    assert pruned.removed == 2 and pruned.files == 2 and not old.exists() and not stray.exists()


def test_a_client_that_wrote_prunes_on_close_at_most_once_an_interval(gh: GitHubServer, tmp_path: Path) -> None:
    s = load_settings({}, home=tmp_path, api_url=gh.url, max_retries=0)
    with GitHubClient(s, cache_max_bytes=5000, cache_max_age_s=None) as client:
        for n in range(1, 11):
            client.get_issue("o/r", n)
        assert cache_usage(s).bytes > 5000
    assert 0 < cache_usage(s).bytes <= 5000  # pruned on close
    assert (http_cache_dir(s) / ".last-prune").exists()
    with GitHubClient(s, cache_max_bytes=5000, cache_max_age_s=None) as client:
        for n in range(1, 11):
            client.get_issue("o/r", n)
    assert cache_usage(s).bytes > 5000  # pruned a moment ago: no scan this time
    later = time.time() + CACHE_PRUNE_INTERVAL_S + 1
    gh.add_issues("o/r", [make_issue("o/r", 11)])
    with GitHubClient(s, clock=lambda: later, cache_max_bytes=5000, cache_max_age_s=None) as client:
        client.get_issue("o/r", 11)  # an hour on, a client that writes prunes again
    assert cache_usage(s).bytes <= 5000
    # a client that only read (all 304s) leaves the cache alone
    before = cache_usage(s).files
    with GitHubClient(s, clock=lambda: later + 2 * CACHE_PRUNE_INTERVAL_S, cache_max_bytes=0, cache_max_age_s=None) as client:
        client.get_issue("o/r", 11)  # the newest entry: the one the last prune surely kept
        assert client.stats.not_modified == 1
    assert cache_usage(s).files == before


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_cli_cache_info_and_prune(gh: GitHubServer, sftl_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SFTL_GITHUB_API_URL", gh.url)
    assert run("fetch", "o/r#3")[0] == 0 and run("fetch", "o/r#4")[0] == 0
    code, out, _ = run("cache", "info", "--json")
    info = json.loads(out)
    assert code == 0 and info["files"] == 2 and info["bytes"] > 0 and info["path"].endswith("cache/http")
    code, out, _ = run("cache", "prune", "--max-age", "30d")
    assert code == 0 and "removed 0 entries" in out and "2 entries" in out
    code, out, _ = run("cache", "prune", "--max-size", "0", "--json")
    pruned = json.loads(out)
    assert code == 0 and pruned["removed"] == 2 and pruned["files"] == 0 and pruned["freed"] == info["bytes"]
    code, out, _ = run("cache")
    assert code == 0 and ": 0 entries, 0.0 MB" in out
    code, out, err = run("cache", "prune", "--max-size", "lots")
    assert code == 2 and out == "" and err == "sftl: --max-size 'lots' is not a size: use e.g. 500M, 2G, 1024 or none\n"
    code, _, err = run("cache", "prune", "--max-age", "soon")
    assert code == 2 and "is not a duration" in err
