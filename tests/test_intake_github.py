"""sftl.github: targets, REST JSON parsing, and the client against a real loopback GitHub server."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from ghserver import GitHubServer, make_comment, make_issue

from sftl.config import Settings, load_settings
from sftl.errors import AuthError, GitHubError, InputError, NotFoundError, OfflineMissError, RateLimitError
from sftl.github import GitHubClient, issue_from_json, issue_to_json, parse_target

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "github"


def settings_for(home: Path, gh: GitHubServer, **kw: object) -> Settings:
    base: dict[str, object] = {"max_retries": 3, "backoff_base": 0.01, "http_timeout": 0.5, "rate_limit_wait": 5.0}
    base.update(kw)
    return load_settings({}, home=home, api_url=gh.url, **base)


@pytest.fixture
def gh():
    with GitHubServer() as server:
        yield server


# -- targets ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "repo", "number"),
    [
        ("https://github.com/pytorch/pytorch/issues/113524", "pytorch/pytorch", 113524),
        ("https://github.com/tensorflow/tensorflow/issues/61234#issuecomment-1", "tensorflow/tensorflow", 61234),
        ("github.com/pytorch/pytorch/issues/7/", "pytorch/pytorch", 7),
        ("pytorch/pytorch#12", "pytorch/pytorch", 12),
        ("  a-b/c.d_e#3 ", "a-b/c.d_e", 3),
    ],
)
def test_parse_target_accepts_urls_and_refs(text: str, repo: str, number: int) -> None:
    t = parse_target(text)
    assert (t.repo, t.number) == (repo, number)
    assert t.kind in ("url", "ref")


def test_parse_target_file() -> None:
    t = parse_target(str(FIX / "issue_mme_no_comments.json"))
    assert t.kind == "file" and t.path is not None and t.path.name == "issue_mme_no_comments.json"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("https://github.com/pytorch/pytorch/pull/113600", "pull request"),
        ("https://gitlab.com/pytorch/pytorch/issues/1", "not a GitHub issue URL"),
        ("https://github.com/pytorch/pytorch/issues/abc", "malformed GitHub issue URL"),
        ("https://github.com/pytorch/issues/1", "malformed"),
        ("pytorch/pytorch#", "malformed target"),
        ("missing.json", "no such file"),
        ("", "empty target"),
        ("justaword", "unrecognised target"),
    ],
)
def test_parse_target_rejects_bad_input_with_a_clear_message(text: str, words: str) -> None:
    with pytest.raises(InputError, match=words):
        parse_target(text)


# -- REST JSON ----------------------------------------------------------------------------------------


def test_issue_from_json_reads_repo_labels_and_inline_comments() -> None:
    obj = json.loads((FIX / "issue_with_inline_comments_gcrde.json").read_text())
    issue = issue_from_json(obj)
    assert issue.repo == "pytorch/pytorch" and issue.number == 113524
    assert issue.labels == ("module: cuda", "triaged", "module: numerical-stability")
    assert [c.author for c in issue.comments] == ["maintainer-a", "numerics-fan"]
    assert issue.comments_count == 2 and not issue.is_pull_request
    assert "```python\nimport torch" in issue.body


def test_issue_from_json_flags_pull_requests_and_uses_html_url_without_repository_url() -> None:
    obj = json.loads((FIX / "pull_request_object.json").read_text())
    assert issue_from_json(obj).is_pull_request
    bare = {"number": 3, "title": "t", "html_url": "https://github.com/o/r/issues/3", "comments": 4}
    issue = issue_from_json(bare)
    assert (issue.repo, issue.comments_count, issue.body) == ("o/r", 4, "")


@pytest.mark.parametrize(
    "obj",
    [
        [],
        {"title": "no number", "repository_url": "https://api.github.com/repos/o/r"},
        {"number": 1, "repository_url": "https://api.github.com/repos/o/r"},
        {"number": 1, "title": "no repo"},
        {"number": 1, "title": 5, "repository_url": "https://api.github.com/repos/o/r"},
        {"number": 1, "title": "x", "repository_url": "https://api.github.com/repos/o/r", "labels": [3]},
        {"number": 1, "title": "x", "repository_url": "https://api.github.com/repos/o/r", "comments": [{"body": "no id"}]},
        {"number": 1, "title": "x", "repository_url": "https://api.github.com/repos/o/r", "state": "weird"},
    ],
)
def test_issue_from_json_rejects_malformed_objects(obj: object) -> None:
    with pytest.raises(InputError):
        issue_from_json(obj)  # type: ignore[arg-type]


def test_issue_to_json_round_trips() -> None:
    obj = json.loads((FIX / "issue_with_inline_comments_gcrde.json").read_text())
    issue = issue_from_json(obj)
    assert issue_from_json(issue_to_json(issue)) == issue
    assert issue_from_json(json.loads(json.dumps(issue_to_json(issue, obj)))) == issue


# -- the client ---------------------------------------------------------------------------------------


def test_pages_follow_link_headers_and_a_second_pass_costs_no_rate_limit(gh: GitHubServer, tmp_path: Path) -> None:
    gh.add_issues("o/r", [make_issue("o/r", n) for n in range(1, 251)])
    s = settings_for(tmp_path, gh)
    with GitHubClient(s) as client:
        pages = list(client.iter_issue_pages("o/r", state="all"))
    assert [len(p.items) for p in pages] == [100, 100, 50]
    assert pages[0].last_page == 3 and pages[-1].next_url is None
    assert sorted(i["number"] for p in pages for i in p.items) == list(range(1, 251))
    remaining = gh.remaining
    with GitHubClient(s) as client:
        again = list(client.iter_issue_pages("o/r", state="all"))
        assert client.stats.not_modified == 3 and client.stats.requests == 3
    assert [p.items for p in again] == [p.items for p in pages]
    assert all(p.from_cache for p in again)
    assert gh.remaining == remaining  # 304s are free
    assert gh.count(r"/issues$", status=304) == 3
    assert all("If-None-Match" in r.headers for r in gh.requests[-3:])


def test_changed_data_is_fetched_again_despite_the_cache(gh: GitHubServer, tmp_path: Path) -> None:
    gh.add_issues("o/r", [make_issue("o/r", 1, title="old")])
    s = settings_for(tmp_path, gh)
    with GitHubClient(s) as client:
        assert client.get_issue("o/r", 1)["title"] == "old"
        gh.add_issues("o/r", [make_issue("o/r", 1, title="new")])
        assert client.get_issue("o/r", 1)["title"] == "new"
        assert client.stats.not_modified == 0


def test_comments_are_paginated(gh: GitHubServer, tmp_path: Path) -> None:
    gh.add_issues("o/r", [make_issue("o/r", 1, comments=130)])
    gh.add_comments("o/r", 1, [make_comment("o/r", 1, c) for c in range(1, 131)])
    with GitHubClient(settings_for(tmp_path, gh)) as client:
        comments = client.get_comments("o/r", 1)
    assert [c["id"] for c in comments] == list(range(1, 131))
    assert gh.count(r"/comments$") == 2


def test_502_stall_and_dropped_body_are_retried(gh: GitHubServer, tmp_path: Path) -> None:
    gh.add_issues("o/r", [make_issue("o/r", 1)])
    gh.inject(r"/issues/1$", status=502, times=1)
    gh.inject(r"/issues/1$", delay=1.5, times=1)  # longer than http_timeout=0.5
    gh.inject(r"/issues/1$", drop=True, times=1)
    with GitHubClient(settings_for(tmp_path, gh)) as client:
        assert client.get_issue("o/r", 1)["number"] == 1
        assert client.stats.retries == 3 and client.stats.requests == 4


def test_persistent_5xx_gives_up_with_one_clear_error(gh: GitHubServer, tmp_path: Path) -> None:
    gh.add_issues("o/r", [make_issue("o/r", 1)])
    gh.inject(r"/issues/1$", status=503, times=99)
    with GitHubClient(settings_for(tmp_path, gh, max_retries=2)) as client, pytest.raises(GitHubError, match="server error 503 after 3 attempts"):
        client.get_issue("o/r", 1)


def test_network_down_is_a_github_error(tmp_path: Path) -> None:
    s = load_settings({}, home=tmp_path, api_url="http://127.0.0.1:9", max_retries=1, backoff_base=0.01)
    with GitHubClient(s) as client, pytest.raises(GitHubError, match="network down"):
        client.get_issue("o/r", 1)


def test_secondary_rate_limit_waits_retry_after(gh: GitHubServer, tmp_path: Path) -> None:
    gh.add_issues("o/r", [make_issue("o/r", 1)])
    gh.inject(r"/issues/1$", status=403, headers={"Retry-After": "1"}, times=1,
              body=b'{"message":"You have exceeded a secondary rate limit."}')
    slept: list[float] = []
    with GitHubClient(settings_for(tmp_path, gh), sleep=slept.append) as client:
        assert client.get_issue("o/r", 1)["number"] == 1
    assert slept == [1.0]


def test_secondary_rate_limit_beyond_the_budget_stops(gh: GitHubServer, tmp_path: Path) -> None:
    gh.add_issues("o/r", [make_issue("o/r", 1)])
    gh.inject(r"/issues/1$", status=429, headers={"Retry-After": "600"}, times=1)
    with GitHubClient(settings_for(tmp_path, gh, rate_limit_wait=10)) as client, pytest.raises(RateLimitError, match="secondary rate limit.*GITHUB_TOKEN"):
        client.get_issue("o/r", 1)


def test_primary_rate_limit_waits_for_the_reset_when_it_is_near(gh: GitHubServer, tmp_path: Path) -> None:
    gh.add_issues("o/r", [make_issue("o/r", 1)])
    gh.set_rate_limit(0, reset_in=1)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        gh.set_rate_limit(100)  # the window resets while we wait

    with GitHubClient(settings_for(tmp_path, gh), sleep=sleep) as client:
        assert client.get_issue("o/r", 1)["number"] == 1
    assert len(slept) == 1 and 0.5 < slept[0] <= 3


def test_primary_rate_limit_far_away_is_a_clear_error(gh: GitHubServer, tmp_path: Path) -> None:
    gh.add_issues("o/r", [make_issue("o/r", 1)])
    gh.set_rate_limit(0, reset_in=3000)
    with GitHubClient(settings_for(tmp_path, gh, rate_limit_wait=2)) as client:
        with pytest.raises(RateLimitError, match=r"rate limit exhausted until \d\d:\d\d:\d\d UTC.*GITHUB_TOKEN"):
            client.get_issue("o/r", 1)


def test_last_request_of_the_window_makes_the_next_one_wait_first(gh: GitHubServer, tmp_path: Path) -> None:
    gh.add_issues("o/r", [make_issue("o/r", n) for n in (1, 2)])
    gh.set_rate_limit(1, reset_in=3000)
    with GitHubClient(settings_for(tmp_path, gh, rate_limit_wait=2)) as client:
        client.get_issue("o/r", 1)
        sent = gh.count("")
        with pytest.raises(RateLimitError):
            client.get_issue("o/r", 2)
    assert gh.count("") == sent  # it did not spend a request it knew would fail


def test_token_goes_in_the_header_only(tmp_path: Path) -> None:
    with GitHubServer(token="s3cret-token") as gh:
        gh.add_issues("o/r", [make_issue("o/r", 1)])
        good = load_settings({"GITHUB_TOKEN": "s3cret-token"}, home=tmp_path, api_url=gh.url, max_retries=0)
        with GitHubClient(good) as client:
            assert client.get_issue("o/r", 1)["number"] == 1
        assert gh.requests[-1].headers["Authorization"] == "Bearer s3cret-token"
        assert "s3cret" not in repr(good)
        for f in (tmp_path / "cache").rglob("*"):
            if f.is_file():
                assert b"s3cret" not in f.read_bytes()
        bad = load_settings({"GITHUB_TOKEN": "wrong"}, home=tmp_path / "b", api_url=gh.url, max_retries=0)
        with GitHubClient(bad) as client, pytest.raises(AuthError, match="401.*check GITHUB_TOKEN"):
            client.get_issue("o/r", 1)


def test_403_without_rate_limit_signals_is_an_auth_error(gh: GitHubServer, tmp_path: Path) -> None:
    gh.inject(r"/issues/1$", status=403, body=b'{"message":"Resource not accessible by integration"}')
    with GitHubClient(settings_for(tmp_path, gh)) as client, pytest.raises(AuthError, match="403 Resource not accessible"):
        client.get_issue("o/r", 1)


def test_404_is_not_found(gh: GitHubServer, tmp_path: Path) -> None:
    gh.add_issues("o/r", [])
    with GitHubClient(settings_for(tmp_path, gh)) as client, pytest.raises(NotFoundError, match=r"issue o/r#5 not found \(404\)"):
        client.get_issue("o/r", 5)


def test_offline_serves_the_cache_and_names_what_is_missing(gh: GitHubServer, tmp_path: Path) -> None:
    gh.add_issues("o/r", [make_issue("o/r", 1)])
    with GitHubClient(settings_for(tmp_path, gh)) as client:
        client.get_issue("o/r", 1)
    sent = gh.count("")
    offline = settings_for(tmp_path, gh, offline=True)
    with GitHubClient(offline) as client:
        assert client.get_issue("o/r", 1)["number"] == 1
        with pytest.raises(OfflineMissError, match=r"issue o/r#2 is not in the cache \(GET http://127\.0\.0\.1:\d+/repos/o/r/issues/2\)"):
            client.get_issue("o/r", 2)
    assert gh.count("") == sent


def test_tree_and_raw_files_are_cached(gh: GitHubServer, tmp_path: Path) -> None:
    gh.add_tree("pytorch/pytorch", "v2.1.0", ["aten/src/ATen/native/cuda/SummaryOps.cu", "torch/functional.py"])
    gh.add_file("pytorch/pytorch", "v2.1.0", "torch/functional.py", "def histc(): ...\n")
    s = settings_for(tmp_path, gh)
    with GitHubClient(s) as client:
        assert client.get_tree("pytorch/pytorch", "v2.1.0") == ["aten/src/ATen/native/cuda/SummaryOps.cu", "torch/functional.py"]
        assert client.get_raw_file("pytorch/pytorch", "v2.1.0", "torch/functional.py") == "def histc(): ...\n"
        assert client.get_raw_file("pytorch/pytorch", "v2.1.0", "nope.py") is None
    with GitHubClient(settings_for(tmp_path, gh, offline=True)) as client:
        assert len(client.get_tree("pytorch/pytorch", "v2.1.0")) == 2
        assert client.get_raw_file("pytorch/pytorch", "v2.1.0", "torch/functional.py") == "def histc(): ...\n"


def test_a_torn_cache_file_is_only_a_miss(gh: GitHubServer, tmp_path: Path) -> None:
    gh.add_issues("o/r", [make_issue("o/r", 1)])
    s = settings_for(tmp_path, gh)
    with GitHubClient(s) as client:
        client.get_issue("o/r", 1)
    for f in (tmp_path / "cache").rglob("*.json"):
        f.write_text('{"url": "x", "bo')
    started = time.monotonic()
    with GitHubClient(s) as client:
        assert client.get_issue("o/r", 1)["number"] == 1
        assert client.stats.not_modified == 0
    assert time.monotonic() - started < 5


def test_retry_after_may_be_an_http_date(gh: GitHubServer, tmp_path: Path) -> None:
    from email.utils import formatdate

    gh.add_issues("o/r", [make_issue("o/r", 1)])
    gh.inject(r"/issues/1$", status=429, headers={"Retry-After": formatdate(time.time() + 3, usegmt=True)}, times=1)
    slept: list[float] = []
    with GitHubClient(settings_for(tmp_path, gh), sleep=slept.append) as client:
        assert client.get_issue("o/r", 1)["number"] == 1
    assert len(slept) == 1 and 1.0 <= slept[0] <= 3.5
