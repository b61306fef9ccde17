"""sftl.intake: load_issue for every target kind, JSONL import with bad lines, export round-trips."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from ghserver import GitHubServer, make_comment, make_issue

from sftl.config import load_settings
from sftl.errors import InputError, NotFoundError, OfflineMissError
from sftl.intake import export_issues, import_jsonl, load_issue, normalize_since
from sftl.store import Store

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "github"


@pytest.fixture
def gh():
    with GitHubServer() as server:
        yield server


def test_json_file_target_works_offline_without_a_store_entry(tmp_path: Path) -> None:
    s = load_settings({}, home=tmp_path, api_url="http://127.0.0.1:9", offline=True)
    with Store(s.db_path) as store:
        issue = load_issue(str(FIX / "issue_with_inline_comments_gcrde.json"), s, store)
        assert issue.key == "pytorch/pytorch#113524" and len(issue.comments) == 2
        assert store.get_issue("pytorch/pytorch", 113524) == issue
        # and now the ref is served from the store, offline
        assert load_issue("pytorch/pytorch#113524", s, store) == issue


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("truncated_issue.json", "truncated JSON"),
        ("non_utf8_issue.json", r"not UTF-8 text \(byte 0xe9"),
        ("not_an_issue.json", "not a GitHub issue object"),
        ("pull_request_object.json", "pull request"),
    ],
)
def test_bad_json_files_are_input_errors_and_store_nothing(tmp_path: Path, name: str, words: str) -> None:
    s = load_settings({}, home=tmp_path, offline=True)
    with Store(s.db_path) as store:
        store.upsert_issue(make_issue_model())
        with pytest.raises(InputError, match=words):
            load_issue(str(FIX / name), s, store)
        assert store.count_issues() == 1  # nothing lost, nothing half-written


def make_issue_model():
    from sftl.github import issue_from_json

    return issue_from_json(make_issue("keep/me", 1))


def test_online_fetch_stores_issue_and_comments_then_offline_reads_it(gh: GitHubServer, tmp_path: Path) -> None:
    gh.add_issues("o/r", [make_issue("o/r", 9, comments=2), make_issue("o/r", 10, pull_request=True)])
    gh.add_comments("o/r", 9, [make_comment("o/r", 9, 1), make_comment("o/r", 9, 2)])
    s = load_settings({}, home=tmp_path, api_url=gh.url, max_retries=1, backoff_base=0.01)
    with Store(s.db_path) as store:
        issue = load_issue("https://github.com/o/r/issues/9", s, store)
        assert [c.id for c in issue.comments] == [1, 2]
        with pytest.raises(NotFoundError, match="is a pull request"):
            load_issue("o/r#10", s, store)
        assert store.get_issue("o/r", 10) is None
        sent = len(gh.requests)
        offline = load_settings({}, home=tmp_path, api_url=gh.url, offline=True)
        assert load_issue("o/r#9", offline, store) == issue
        with pytest.raises(OfflineMissError, match="o/r#11 is neither in the store nor in the HTTP cache"):
            load_issue("o/r#11", offline, store)
        assert len(gh.requests) == sent


def test_import_reports_bad_lines_and_imports_the_rest(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        stats = import_jsonl(FIX / "import_with_bad_lines.jsonl", store)
        assert stats.lines == 6 and stats.imported == 3 and stats.pulls_skipped == 1
        assert [n for n, _ in stats.bad] == [3, 5]
        assert "truncated JSON" in stats.bad[0][1]
        assert {i.key for i in store.iter_issues()} == {
            "pytorch/pytorch#99001", "pytorch/pytorch#99003", "tensorflow/tensorflow#61300"}


def test_import_non_utf8_line_and_gh_paginate_arrays(tmp_path: Path) -> None:
    good = json.dumps(make_issue("o/r", 1)).encode()
    page = json.dumps([make_issue("o/r", 2), make_issue("o/r", 3)]).encode()
    data = good + b"\n" + b'{"title": "caf\xe9"}\n' + page + b"\n\n"
    with Store(tmp_path / "s.db") as store:
        stats = import_jsonl("-", store, stdin=io.BytesIO(data))
        assert stats.imported == 3 and stats.bad == [(2, "not UTF-8 text (byte 0xe9 at offset 14)")]


def test_import_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store, pytest.raises(InputError, match="cannot read"):
        import_jsonl(tmp_path / "nope.jsonl", store)


def test_export_jsonl_round_trips_through_import(tmp_path: Path) -> None:
    s = load_settings({}, home=tmp_path, offline=True)
    with Store(tmp_path / "a.db") as a:
        load_issue(str(FIX / "issue_with_inline_comments_gcrde.json"), s, a)
        load_issue(str(FIX / "issue_mme_no_comments.json"), s, a)
        import_jsonl(FIX / "import_with_bad_lines.jsonl", a)
        lines = list(export_issues(a, "jsonl"))
        original = list(a.iter_issues())
    assert all(json.loads(line)["repository_url"].startswith("https://api.github.com/repos/") for line in lines)
    with Store(tmp_path / "b.db") as b:
        stats = import_jsonl("-", b, stdin=io.BytesIO(("\n".join(lines) + "\n").encode()))
        assert stats.imported == len(original) and not stats.bad
        assert list(b.iter_issues()) == original


def test_export_csv_and_repo_filter(tmp_path: Path) -> None:
    with Store(tmp_path / "a.db") as store:
        import_jsonl(FIX / "import_with_bad_lines.jsonl", store)
        rows = list(csv.reader(export_issues(store, "csv", repo="pytorch/pytorch")))
    assert rows[0][:3] == ["repo", "number", "title"]
    assert [r[1] for r in rows[1:]] == ["99001", "99003"]
    with Store(tmp_path / "a.db") as store, pytest.raises(InputError):
        list(export_issues(store, "xml"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [("2024-01-31", "2024-01-31T00:00:00Z"), ("2024-01-31T10:00:00Z", "2024-01-31T10:00:00Z"),
     ("2024-01-31T12:00:00+02:00", "2024-01-31T10:00:00Z")],
)
def test_normalize_since(text: str, expected: str) -> None:
    assert normalize_since(text) == expected


def test_normalize_since_rejects_junk() -> None:
    with pytest.raises(InputError, match="not a date"):
        normalize_since("last tuesday")


def test_import_reads_pretty_printed_gh_paginate_output(tmp_path: Path) -> None:
    pages = [[make_issue("o/r", n) for n in range(1, 4)], [make_issue("o/r", n) for n in range(4, 6)]]
    data = "".join(json.dumps(page, indent=2) + "\n" for page in pages).encode()  # gh api --paginate on a terminal
    with Store(tmp_path / "s.db") as store:
        stats = import_jsonl("-", store, stdin=io.BytesIO(data))
        assert stats.imported == 5 and not stats.bad
        cut = import_jsonl("-", store, stdin=io.BytesIO(data[: len(data) - 40]))
        assert cut.bad and cut.bad[0][1].startswith("truncated JSON")
        assert cut.unchanged == 3 and cut.imported == 0  # the first page is whole, and identical to what is stored


def test_import_a_single_pretty_printed_issue_file(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        stats = import_jsonl(FIX / "issue_with_inline_comments_gcrde.json", store)
        assert stats.imported == 1 and len(store.get_issue("pytorch/pytorch", 113524).comments) == 2  # type: ignore[union-attr]


def test_import_statistics_are_honest_and_keep_a_later_fetched_thread(tmp_path: Path) -> None:
    plain = make_issue("o/r", 1, comments=2, updated_at="2024-03-01T00:00:00Z")
    with_thread = {**plain, "comments": [make_comment("o/r", 1, 7), make_comment("o/r", 1, 8)]}

    def feed(store: Store, *objs: dict) -> object:
        return import_jsonl("-", store, stdin=io.BytesIO(b"".join(json.dumps(o).encode() + b"\n" for o in objs)))

    with Store(tmp_path / "s.db") as store:
        first = feed(store, plain)
        assert (first.imported, first.comments_added, first.unchanged) == (1, 0, 0)  # type: ignore[attr-defined]
        again = feed(store, plain)
        assert (again.imported, again.comments_added, again.unchanged) == (0, 0, 1)  # type: ignore[attr-defined]
        threaded = feed(store, with_thread)  # the same version, now with its thread
        assert (threaded.imported, threaded.comments_added, threaded.unchanged) == (0, 1, 0)  # type: ignore[attr-defined]
        assert [c.id for c in store.get_issue("o/r", 1).comments] == [7, 8]  # type: ignore[union-attr]
        bare = feed(store, plain, with_thread)  # copies of that version, without the thread or with it again
        assert (bare.imported, bare.comments_added, bare.unchanged) == (0, 0, 2)  # type: ignore[attr-defined]
        assert [c.id for c in store.get_issue("o/r", 1).comments] == [7, 8]  # type: ignore[union-attr]
        emptied = feed(store, {**plain, "comments": []})  # the same version claiming no comments: the thread stays
        assert emptied.imported == 1 and [c.id for c in store.get_issue("o/r", 1).comments] == [7, 8]  # type: ignore[attr-defined,union-attr]
        newer = feed(store, {**plain, "title": "edited", "updated_at": "2024-04-01T00:00:00Z"})
        assert newer.imported == 1 and store.get_issue("o/r", 1).title == "edited"  # type: ignore[attr-defined,union-attr]
        old = feed(store, plain)
        assert (old.imported, old.unchanged) == (0, 1) and store.get_issue("o/r", 1).title == "edited"  # type: ignore[attr-defined,union-attr]
