"""`sftl comment --post` against the loopback GitHub server: one comment, created then updated in place, and every refusal one line with its exit code and nothing half-written."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest
from ghserver import GitHubServer, make_comment

from sftl.cli import main
from sftl.comment import MARKER

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "fixtures" / "demo" / "mme_fx_graphmodule_missing_constant.json"
TARGET = "pytorch/pytorch#990101"
REPO, NUMBER = "pytorch/pytorch", 990101
TOKEN = "tok-write"

# the two files the report's traceback runs through, as the miniature tree of fixtures/sources has them
OWNERS_TREE = ROOT / "fixtures" / "sources" / "mini_pytorch_owners"
GRAPH_MODULE = (OWNERS_TREE / "torch" / "fx" / "graph_module.py").read_text(encoding="utf-8")
MODULE = (OWNERS_TREE / "torch" / "nn" / "modules" / "module.py").read_text(encoding="utf-8")


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A release's tree in miniature: the two files the report's traceback runs through, and who owns them."""
    root = tmp_path / "pytorch"
    files = {
        "torch/fx/graph_module.py": GRAPH_MODULE,
        "torch/nn/modules/module.py": MODULE,
        "torch/__init__.py": "",
        ".github/CODEOWNERS": "/torch/fx/ @fx-owner @org/fx-team\n/torch/nn/ @nn-owner\n",
        ".github/labeler.yml": '"module: fx":\n- changed-files:\n  - any-glob-to-any-file: torch/fx/**\n',
    }
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def gh(sftl_home: Path, monkeypatch: pytest.MonkeyPatch):
    with GitHubServer(token=TOKEN) as server:
        issue = json.loads(REPORT.read_text(encoding="utf-8"))
        issue["comments"], issue["labels"] = 1, []  # a new report: nobody labelled it yet
        server.add_issues(REPO, [issue])
        server.add_comments(REPO, NUMBER, [make_comment(REPO, NUMBER, 11, body="same here on 2.13")])
        monkeypatch.setenv("SFTL_GITHUB_API_URL", server.url)
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        monkeypatch.setenv("SFTL_MAX_RETRIES", "2")
        monkeypatch.setenv("SFTL_BACKOFF", "0.01")
        monkeypatch.setenv("SFTL_HTTP_TIMEOUT", "5")
        monkeypatch.setenv("SFTL_RATE_LIMIT_WAIT", "1")
        yield server


def _ours(gh: GitHubServer) -> list[dict]:
    return [c for c in gh.comments_of(REPO, NUMBER) if MARKER in c["body"]]


def _writes(gh: GitHubServer) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in gh.requests if r.method != "GET"]


def test_posting_twice_leaves_one_comment_updated_in_place(gh: GitHubServer, tree: Path) -> None:
    plain = tree.parent / "plain"
    (plain / "torch/fx").mkdir(parents=True)
    for path in ("torch/fx/graph_module.py", "torch/nn/modules/module.py", "torch/__init__.py"):
        (plain / path).parent.mkdir(parents=True, exist_ok=True)
        (plain / path).write_text((tree / path).read_text())
    code, out, err = run("comment", TARGET, "--post", "--source-root", str(plain))
    assert code == 0, err
    [first] = _ours(gh)
    assert out == f"{TARGET}: comment {first['id']} created ({first['html_url']}); labels added: none\n"
    assert "`torch/fx/graph_module.py`" in first["body"] and "Who to ask" not in first["body"]  # the tree names no one

    # the same reading again: nothing to write
    code, out, _ = run("comment", TARGET, "--post", "--source-root", str(plain))
    assert code == 0 and f"comment {first['id']} unchanged" in out and _writes(gh) == [
        ("POST", f"/repos/{REPO}/issues/{NUMBER}/comments")]

    # the release's tree now says who owns the files: the one comment is updated, not a second posted
    code, out, err = run("comment", TARGET, "--post", "--source-root", str(tree))
    assert code == 0, err
    [second] = _ours(gh)
    assert second["id"] == first["id"] and f"comment {first['id']} updated" in out
    assert "- owners of `/torch/fx/`: `@fx-owner`, `@org/fx-team`; label: `module: fx` (suspect 1)" in second["body"]
    assert len(gh.comments_of(REPO, NUMBER)) == 2  # the reporter's comment and sftl's one
    assert _writes(gh)[-1] == ("PATCH", f"/repos/{REPO}/issues/comments/{first['id']}")


def test_the_marker_survives_a_maintainers_edit_of_the_other_text(gh: GitHubServer, tree: Path) -> None:
    assert run("comment", TARGET, "--post", "--source-root", str(tree))[0] == 0
    [mine] = _ours(gh)
    rendered = mine["body"]
    gh.edit_comment(REPO, mine["id"], "Triage note from a maintainer: duplicate of #5.\n\n" + MARKER + "\n(old text cut)")
    code, out, err = run("comment", TARGET, "--post", "--source-root", str(tree))
    assert code == 0 and f"comment {mine['id']} updated" in out, err
    assert [c["body"] for c in _ours(gh)] == [rendered]


def test_apply_labels_adds_the_labelers_labels_once(gh: GitHubServer, tree: Path) -> None:
    code, out, err = run("comment", TARGET, "--post", "--apply-labels", "--source-root", str(tree))
    assert code == 0 and out.endswith("labels added: module: fx\n"), err
    assert [lab["name"] for lab in gh.issues[REPO][NUMBER]["labels"]] == ["module: fx"]
    code, out, _ = run("comment", TARGET, "--apply-labels", "--source-root", str(tree))  # labels alone, again
    assert code == 0 and out == f"{TARGET}: labels added: none\n"
    assert [m for m, p in _writes(gh) if p.endswith("/labels")] == ["POST"]


def test_without_post_it_prints_what_it_would_post_and_writes_nothing(gh: GitHubServer, tree: Path) -> None:
    code, out, err = run("comment", TARGET, "--source-root", str(tree), "--json")
    data = json.loads(out)
    assert code == 0 and data["posted"] is None and data["body"].startswith(MARKER) and data["labels"] == ["module: fx"]
    assert data["routes"][0]["owners"] == ["@fx-owner", "@org/fx-team"] and _writes(gh) == []


def _refusal(gh: GitHubServer, tree: Path, code: int, words: str, *extra: str) -> None:
    before = gh.comments_of(REPO, NUMBER)
    got, out, err = run("comment", TARGET, "--post", "--source-root", str(tree), *extra)
    assert got == code and out == "", err
    assert err.count("\n") == 1 and err.startswith("sftl: ") and words in err, err
    assert gh.comments_of(REPO, NUMBER) == before  # nothing half-written


def test_no_token_is_refused_before_any_request(gh: GitHubServer, tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_TOKEN")
    _refusal(gh, tree, 9, "set GITHUB_TOKEN")
    assert gh.requests == []


def test_a_bad_or_read_only_token_is_exit_9(gh: GitHubServer, tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "wrong")
    _refusal(gh, tree, 9, "401 Bad credentials")
    gh.read_only_token = "tok-read"
    monkeypatch.setenv("GITHUB_TOKEN", "tok-read")
    _refusal(gh, tree, 9, "403 Resource not accessible by personal access token")
    assert "issues: write" in run("comment", TARGET, "--post", "--source-root", str(tree))[2]


def test_a_locked_issue_is_exit_10_and_nothing_is_posted(gh: GitHubServer, tree: Path) -> None:
    gh.lock_issue(REPO, NUMBER)
    _refusal(gh, tree, 10, "is locked")
    assert _writes(gh) == []


def test_a_lock_met_at_the_write_is_exit_10_too(gh: GitHubServer, tree: Path) -> None:
    gh.inject(r"/comments$", method="POST", status=403, body=b'{"message": "Unable to create comment because issue is locked."}')
    _refusal(gh, tree, 10, "the issue is locked (403 Unable to create comment")


def test_a_deleted_or_missing_issue_is_exit_11(gh: GitHubServer, tree: Path) -> None:
    gh.delete_issue(REPO, NUMBER)
    _refusal(gh, tree, 11, "(410)")
    code, _, err = run("comment", "pytorch/pytorch#5", "--post", "--source-root", str(tree))
    assert code == 11 and "not found (404)" in err


def test_an_issue_deleted_between_read_and_write_is_exit_11(gh: GitHubServer, tree: Path) -> None:
    gh.inject(r"/comments$", method="POST", status=410, body=b'{"message": "This issue was deleted"}')
    _refusal(gh, tree, 11, "the issue was deleted (410 This issue was deleted)")


def test_a_comment_github_finds_invalid_is_exit_12(gh: GitHubServer, tree: Path) -> None:
    body = json.dumps({"message": "Validation Failed", "errors": [{"field": "body", "code": "too_long"}]}).encode()
    gh.inject(r"/comments$", method="POST", status=422, body=body)
    _refusal(gh, tree, 12, "as invalid (422 Validation Failed; body too_long)")


def test_rate_limits_stop_with_exit_3_and_nothing_written(gh: GitHubServer, tree: Path) -> None:
    reset = str(int(time.time()) + 3600)
    gh.inject(r"/comments$", method="POST", status=403, times=5,
              headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset},
              body=b'{"message": "API rate limit exceeded"}')
    _refusal(gh, tree, 3, "GitHub rate limit exhausted until")
    gh.faults.clear()
    gh.inject(r"/comments$", method="POST", status=403, times=5, headers={"Retry-After": "120"},
              body=b'{"message": "You have exceeded a secondary rate limit."}')
    _refusal(gh, tree, 3, "secondary rate limit")


def test_a_server_error_on_create_is_never_retried_and_the_next_run_posts_once(gh: GitHubServer, tree: Path) -> None:
    gh.inject(r"/comments$", method="POST", status=502, times=1)
    _refusal(gh, tree, 3, "not retried (a retry could write it twice)")
    assert _writes(gh) == [("POST", f"/repos/{REPO}/issues/{NUMBER}/comments")]
    assert run("comment", TARGET, "--post", "--source-root", str(tree))[0] == 0
    assert len(_ours(gh)) == 1


def test_a_server_error_on_update_is_retried(gh: GitHubServer, tree: Path) -> None:
    assert run("comment", TARGET, "--post", "--source-root", str(tree))[0] == 0
    [mine] = _ours(gh)
    gh.edit_comment(REPO, mine["id"], MARKER + "\nedited")
    gh.inject(r"/comments/\d+$", method="PATCH", status=502, times=1)
    code, out, err = run("comment", TARGET, "--post", "--source-root", str(tree))
    assert code == 0 and "updated" in out, err
    assert [m for m, _ in _writes(gh)] == ["POST", "PATCH", "PATCH"] and len(_ours(gh)) == 1


def test_offline_posting_is_bad_input(gh: GitHubServer, tree: Path) -> None:
    code, out, err = run("comment", str(REPORT), "--post", "--offline", "--source-root", str(tree))
    assert code == 2 and err == "sftl: --post and --apply-labels write to GitHub: drop --offline\n"


def test_its_comment_is_found_past_the_first_page_of_a_long_thread(gh: GitHubServer, tree: Path) -> None:
    """A busy thread: sftl's comment, the 131st, sits on the second page of 100; it is updated, not doubled."""
    thread = [make_comment(REPO, NUMBER, 100 + i, body=f"+1 ({i})") for i in range(130)]
    thread.append(make_comment(REPO, NUMBER, 777, body=MARKER + "\nan old reading"))
    gh.add_comments(REPO, NUMBER, thread)
    code, out, err = run("comment", TARGET, "--post", "--source-root", str(tree))
    assert code == 0 and "comment 777 updated" in out, err
    assert len(gh.comments_of(REPO, NUMBER)) == 131 and len(_ours(gh)) == 1
    assert gh.count(rf"/issues/{NUMBER}/comments$") >= 2  # both pages were read


def test_a_label_github_refuses_leaves_the_whole_comment_and_says_so(gh: GitHubServer, tree: Path) -> None:
    gh.inject(r"/labels$", method="POST", status=422, body=b'{"message": "Validation Failed"}')
    code, out, err = run("comment", TARGET, "--post", "--apply-labels", "--source-root", str(tree))
    assert code == 12 and out == ""
    assert err.startswith("sftl: GitHub refused labels of pytorch/pytorch#990101 as invalid (422 Validation Failed)")
    assert err.endswith("; the comment was created, no label was added\n") and err.count("\n") == 1
    [mine] = _ours(gh)
    assert mine["body"].rstrip().endswith("</sub>") and gh.issues[REPO][NUMBER]["labels"] == []
