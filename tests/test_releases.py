"""Versions as reporters write them -> the ref of the sources they ran, with the reason (a table of every spelling)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ghserver import GitHubServer

from sftl.config import load_settings
from sftl.errors import SourceError
from sftl.releases import refs_file, resolve

FILED = "2023-09-01T10:00:00Z"

# (framework, spelling, ref offline, release, words of the reason)
OFFLINE = [
    ("pytorch", "2.1.0", "v2.1.0", "2.1.0", "release 2.1.0, tag v2.1.0"),
    ("pytorch", "v2.6.0", "v2.6.0", "2.6.0", "release 2.6.0"),
    ("pytorch", "2.1.0+cu121", "v2.1.0", "2.1.0", "a local build (+cu121) of release 2.1.0"),
    ("pytorch", "2.1.0+cpu", "v2.1.0", "2.1.0", "a local build (+cpu)"),
    ("pytorch", "PyTorch version: 2.1.0+cu118", "v2.1.0", "2.1.0", "local build (+cu118)"),
    ("pytorch", "torch==1.12.1", "v1.12.1", "1.12.1", "release 1.12.1"),
    ("pytorch", "0.4.1.post2", "v0.4.1", "0.4.1", "release 0.4.1"),
    ("pytorch", "2.2.0a0+git2ef35a0", "2ef35a0", "2.2.0", "a source build at commit 2ef35a0"),
    ("pytorch", "1.13.0a0+08820cb", "08820cb", "1.13.0", "commit 08820cb"),
    ("pytorch", "2.1", "v2.1.0", "2.1.0", "2.1 was not yet released on 2023-09-01 (a pre-release of it)"),
    ("pytorch", "2.0", "v2.0.1", "2.0.1", "the newest 2.0.x release out by 2023-09-01"),
    ("pytorch", "2.20", "v2.20.0", "2.20.0", "no 2.20.x release known to sftl"),
    ("pytorch", "2.1.0rc1", "v2.1.0-rc1", "2.1.0", "a pre-release"),
    ("pytorch", "1.13.0.dev20220826", "v1.12.1", "1.12.1", "the nightly of 2022-08-26; offline, its commit cannot be looked up: read v1.12.1"),
    ("pytorch", "2.1.0.dev20230801+cu121", "v2.0.1", "2.0.1", "the nightly of 2023-08-01"),
    ("pytorch", "master (Dec 2018)", "v1.0.0", "1.0.0", "the development branch on 2018-12-31"),
    ("pytorch", "main (2022-09-27)", "v1.12.1", "1.12.1", "the development branch on 2022-09-27"),
    ("pytorch", "nightly", "v2.0.1", "2.0.1", "when it was filed (2023-09-01)"),
    ("pytorch", None, "v2.0.1", "2.0.1", "no version: the default branch when it was filed (2023-09-01)"),
    ("tensorflow", "2.6.0", "v2.6.0", "2.6.0", "release 2.6.0"),
    ("tensorflow", "tf 2.16", "v2.16.1", "2.16.1", "2.16 was not yet released on 2023-09-01"),
    ("tensorflow", "TF2.9", "v2.9.0", "2.9.0", "the newest 2.9.x"),
    ("tensorflow", "tensorflow-gpu 2.4.1", "v2.4.1", "2.4.1", "release 2.4.1"),
    ("tensorflow", "tensorflow-gpu==1.15", "v1.15.0", "1.15.0", "the newest 1.15.x"),
    ("tensorflow", "r2.2", "v2.2.0", "2.2.0", "the newest 2.2.x"),
    ("tensorflow", "1.15.0rc2", "v1.15.0-rc2", "1.15.0", "a pre-release, tag v1.15.0-rc2"),
    ("tensorflow", "tf-nightly", "v2.13.0", "2.13.0", "tf-nightly: the development branch when it was filed"),
    ("tensorflow", "tf-nightly 2.5.0.dev20201028", "v2.3.0", "2.3.0", "the nightly of 2020-10-28"),
    ("tensorflow", "2.12.0-dev20230201", "v2.11.0", "2.11.0", "the nightly of 2023-02-01"),
    ("tensorflow", "2.0a", "v2.0.0-alpha0", "2.0.0", "a pre-release, tag v2.0.0-alpha0"),
    ("tensorflow", "2.0.0-beta1", "v2.0.0-beta1", "2.0.0", "tag v2.0.0-beta1"),
    ("pytorch", "torchdynamo/torchinductor main (Aug 2022)", "v1.12.1", "1.12.1", "the development branch on 2022-08-31"),
    ("pytorch", "not visible in the report (Jan 2023)", "v1.13.1", "1.13.1", "on 2023-01-31"),
]


@pytest.mark.parametrize(("framework", "spelling", "ref", "release", "why"), OFFLINE)
def test_every_spelling_resolves_offline(tmp_path: Path, framework: str, spelling: str | None, ref: str,
                                        release: str, why: str) -> None:
    settings = load_settings({}, home=tmp_path, offline=True)
    res = resolve(framework, spelling, settings, created_at=FILED)
    assert (res.ref, res.version) == (ref, release)
    assert why in res.reason and "\n" not in res.reason
    assert res.exact == ("offline" not in res.reason and "not yet released" not in res.reason)


@pytest.mark.parametrize(("spelling", "why"), [
    ("banana", "cannot read a version from 'banana'"),
    ("3.x", "3.x: no pytorch 3.x release known to sftl out by 2023-09-01"),
    ("1.13.0.dev20221345", "names the nightly of 2022-13-45, which is no date"),
])
def test_a_spelling_that_says_nothing_says_why_in_one_line(tmp_path: Path, spelling: str, why: str) -> None:
    with pytest.raises(SourceError, match=why.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        resolve("pytorch", spelling, load_settings({}, home=tmp_path, offline=True), created_at=FILED)


def test_no_version_and_no_date_says_so(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="names no pytorch version and no date"):
        resolve("pytorch", None, load_settings({}, home=tmp_path, offline=True))
    with pytest.raises(SourceError, match="sftl knows no release of that date"):
        resolve("pytorch", None, load_settings({}, home=tmp_path, offline=True), created_at="2099-01-01T00:00:00Z")


def test_nightlies_and_branches_are_read_at_the_commit_of_their_date_online(tmp_path: Path) -> None:
    with GitHubServer() as gh:
        gh.add_commit("pytorch/pytorch", "1" * 40, "2022-08-25T21:00:00Z")
        gh.add_commit("pytorch/pytorch", "2" * 40, "2022-08-26T12:00:00Z")  # after that night's cut
        gh.add_commit("pytorch/pytorch", "3" * 40, "2018-12-30T10:00:00Z")
        gh.add_commit("tensorflow/tensorflow", "4" * 40, "2023-04-30T10:00:00Z")
        settings = load_settings({}, home=tmp_path, api_url=gh.url, max_retries=1, backoff_base=0.01)
        nightly = resolve("pytorch", "1.13.0.dev20220826", settings, created_at="2022-09-01T00:00:00Z")
        assert nightly.ref == "1" * 40 and nightly.version == "1.13.0" and nightly.exact
        assert "the nightly of 2022-08-26: commit 1111111111 of pytorch/pytorch" in nightly.reason
        assert gh.requests[-1].query["until"] == "2022-08-26T08:00:00Z"
        master = resolve("pytorch", "master (Dec 2018)", settings, created_at="2019-01-05T00:00:00Z")
        assert master.ref == "3" * 40 and "on 2018-12-31" in master.reason
        filed = resolve("tensorflow", "tf-nightly", settings, created_at=FILED)
        assert filed.ref == "4" * 40 and gh.requests[-1].query["until"] == FILED
        asked = len(gh.requests)
        # a tagged release needs no lookup, and a commit looked up once is kept
        assert resolve("pytorch", "2.1.0+cu121", settings).ref == "v2.1.0"
        assert resolve("pytorch", "1.13.0.dev20220826", settings, created_at="2022-09-01T00:00:00Z").ref == "1" * 40
        assert len(gh.requests) == asked and refs_file(settings).is_file()
        offline = resolve("pytorch", "1.13.0.dev20220826", load_settings({}, home=tmp_path, offline=True),
                          created_at="2022-09-01T00:00:00Z")
        assert offline.ref == "1" * 40 and offline.exact  # looked up once: offline knows it too
        # no commit before that date on the server: the release current then, said so
        early = resolve("pytorch", None, settings, created_at="2017-06-01T00:00:00Z")
        assert early.ref == "v0.1.12" and "no commit of that date found" in early.reason and not early.exact
