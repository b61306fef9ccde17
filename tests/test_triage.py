"""Backlog triage: local executor end to end, resume, Ray executor parity, and the HTML report in Chromium."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from sftl import triage
from sftl.cli import main
from sftl.config import load_settings
from sftl.intake import import_jsonl
from sftl.store import Store

BACKLOG = Path(__file__).resolve().parent.parent / "fixtures" / "triage" / "backlog.jsonl"
REPO = "pytorch/pytorch"


@pytest.fixture
def loaded(sftl_home: Path) -> tuple[object, Store]:
    settings = load_settings(offline=True)
    store = Store(settings.db_path)
    import_jsonl(str(BACKLOG), store)
    yield settings, store
    store.close()


def _summary(rows: list[dict]) -> dict[int, tuple]:
    return {
        r["issue"]["number"]: (r["category"], r["outcome"], tuple(s["path"] for s in r["suspects"][:3]))
        for r in rows
    }


def test_local_triage_end_to_end_then_nothing_is_done_twice(loaded) -> None:
    settings, store = loaded
    issues = list(store.iter_issues(repo=REPO))
    assert len(issues) == 6
    stats = triage.triage_issues(issues, settings, store, repo=REPO, executor="local", jobs=2)
    assert (stats.total, stats.done, stats.reused, stats.failed) == (6, 6, 0, 0)
    by_number = {r["issue"]["number"]: r for r in stats.rows}
    assert by_number[995001]["category"] == "mme"
    assert by_number[995001]["suspects"][0]["path"] == "torch/optim/swa_utils.py"
    assert by_number[995002]["category"] == "gcrde"
    # a report of neither category is ranked too (here from the installed release), never skipped for its category
    assert by_number[995004]["category"] == "other" and by_number[995004]["outcome"] == "located"
    assert by_number[995004]["suspects"] and "screened" not in by_number[995004]["reason"]
    # workers screen in a scratch store: the small-corpus reason still counts the real one
    assert "only 6 stored issue(s)" in by_number[995004]["screening_reason"]
    # the driver wrote every result to the real store
    assert store.get_localization(REPO, 995001)["suspects"][0]["path"] == "torch/optim/swa_utils.py"

    again = triage.triage_issues(issues, settings, store, repo=REPO, executor="local", jobs=2)
    assert (again.done, again.reused) == (0, 6)
    assert _summary(again.rows) == _summary(stats.rows)


def test_an_interrupted_run_resumes_where_it_stopped(loaded) -> None:
    settings, store = loaded
    issues = list(store.iter_issues(repo=REPO))
    seen = []

    def stop_after_two(done: int, total: int) -> None:
        seen.append(done)
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        triage.triage_issues(issues, settings, store, repo=REPO, jobs=1, progress=stop_after_two)
    resumed = triage.triage_issues(issues, settings, store, repo=REPO, jobs=1)
    assert (resumed.reused, resumed.done) == (2, 4)


def test_a_changed_issue_is_redone(loaded) -> None:
    settings, store = loaded
    issues = list(store.iter_issues(repo=REPO))
    triage.triage_issues(issues, settings, store, repo=REPO, jobs=1)
    from dataclasses import replace

    edited = [replace(i, body=i.body + "\n\nedit", updated_at="2026-11-29T00:00:00Z") if i.number == 995004 else i
              for i in issues]
    again = triage.triage_issues(edited, settings, store, repo=REPO, jobs=1)
    assert (again.reused, again.done) == (5, 1)


@pytest.mark.slow
def test_ray_executor_gives_the_same_results_as_local(loaded) -> None:
    pytest.importorskip("ray")
    settings, store = loaded
    issues = list(store.iter_issues(repo=REPO))
    local = triage.triage_issues(issues, settings, store, repo=REPO, executor="local", jobs=1)
    # a second store so nothing is reused: Ray must do all the work itself
    with Store(Path(str(settings.db_path) + ".ray")) as ray_store:
        via_ray = triage.triage_issues(issues, settings, ray_store, repo=REPO, executor="ray", jobs=2)
        assert (via_ray.done, via_ray.failed) == (6, 0)
        assert _summary(via_ray.rows) == _summary(local.rows)
        assert ray_store.get_localization(REPO, 995001) is not None  # the driver stored what Ray returned


def test_duplicates_are_found_among_near_identical_reports(loaded) -> None:
    _, store = loaded
    pairs = triage.find_duplicates(list(store.iter_issues(repo=REPO)))
    assert pairs and pairs[0][:2] == (995002, 995003)
    assert all(a != 995004 and b != 995004 for a, b, _ in pairs)


def test_report_groups_and_needs_human() -> None:
    rows = [
        {"issue": {"number": 1, "url": "u1", "repo": REPO, "title": "a"}, "category": "mme",
         "screening": {"mme": 0.9}, "environment": {}, "replay": None, "outcome": "located", "reason": "",
         "suspects": [{"path": "torch/a.py", "score": 0.9, "side": "python", "reason": "r"}]},
        {"issue": {"number": 2, "url": "u2", "repo": REPO, "title": "b"}, "category": "mme",
         "screening": {"mme": 0.8}, "environment": {}, "replay": None, "outcome": "located", "reason": "",
         "suspects": [{"path": "torch/a.py", "score": 0.5, "side": "python", "reason": "r"}]},
        {"issue": {"number": 3, "url": "u3", "repo": REPO, "title": "c|d"}, "category": "gcrde",
         "screening": {"gcrde": 0.7}, "environment": {}, "replay": {"verdict": "env-unavailable", "reason": "no py3.6"},
         "outcome": "located", "reason": "", "suspects": [{"path": "aten/x.cu", "score": 0.4, "side": "cuda", "reason": "r"}]},
        {"issue": {"number": 4, "url": "u4", "repo": REPO, "title": "e"}, "category": "gcrde",
         "screening": {}, "environment": {}, "replay": None, "outcome": "abstained", "reason": "no op", "suspects": []},
    ]
    report = triage.build_report(REPO, rows, [(1, 2, 0.8)])
    assert report.counts == {"gcrde": 2, "mme": 2}
    assert report.by_suspect["torch/a.py"] == [1, 2]
    assert [n for n, _ in report.needs_human] == [3, 4]
    md = triage.render_markdown(report)
    assert "c\\|d" in md and "[#1](u1) a and [#2](u2) b" in md  # duplicates are links with their titles
    assert "- `torch/a.py`: [#1](u1) a; [#2](u2) b" in md
    assert "| abstained: no op |" in md  # the outcome column says why


def test_report_says_a_shared_sentence_once_and_lists_skipped_discrepancies() -> None:
    shared = "only 28 stored issue(s), too few to fit the keyword IDF; the screening rules decided alone"
    rows = [
        {"issue": {"number": n, "url": f"u{n}", "repo": REPO, "title": f"t{n}"}, "category": cat,
         "screening": {}, "environment": {}, "replay": None, "outcome": "skipped",
         "reason": f"screened as {cat} (case {n}): {shared}" if cat == "other" else "no CUDA kernel sources here",
         "suspects": []}
        for n, cat in ((1, "other"), (2, "other"), (3, "other"), (4, "gcrde"))
    ]
    report = triage.build_report(REPO, rows)
    md = triage.render_markdown(report)
    assert md.count("too few to fit the keyword IDF") == 1 and "3 issues: " in md
    assert "skipped: screened as other (case 2) (see the notes above)" in md
    assert [n for n, _ in report.needs_human] == [4]  # the skipped discrepancy needs a human
    html = triage.render_html(report)
    assert html.count("too few to fit the keyword IDF") == 1 and '<a href="u4" title="t4">#4</a> t4' in html


def test_template_boilerplate_makes_no_duplicates() -> None:
    from sftl.github import issue_from_json
    from tests.ghserver import make_issue

    env = ("\n### Versions\nCollecting environment information...\nPyTorch version: 2.1.0\nIs debug build: False\n"
           "CUDA used to build PyTorch: 12.1\nOS: Ubuntu 22.04.3 LTS (x86_64)\nGCC version: 11.4.0\n"
           "Python version: 3.10.12\nIs CUDA available: True\nGPU models and configuration: GPU 0: NVIDIA A100\n"
           "Nvidia driver version: 535.104\ncuDNN version: 8.9.2\nVersions of relevant libraries:\n"
           "[pip3] numpy==1.26.0\n[pip3] torch==2.1.0\n[pip3] triton==2.1.0\n")
    a = issue_from_json(make_issue(REPO, 1001, title="torch.histc counts differ on CUDA",
                                   body="### Describe the bug\nhistc on cuda gives other bins than on cpu" + env))
    b = issue_from_json(make_issue(REPO, 1002, title="Feature: torch.load should accept a URL",
                                   body="### The feature\nLet torch.load read from a URL" + env))
    assert triage.find_duplicates([a, b]) == []


def test_cli_triage_offline_and_its_bad_inputs(loaded, tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(["triage", REPO, "--offline", "--out", str(tmp_path / "r"), "--jobs", "1", "--json"], out=out, err=err)
    assert code == 0, err.getvalue()
    assert '"processed": 6' in out.getvalue()
    assert (tmp_path / "r" / "triage.html").exists() and (tmp_path / "r" / "triage.md").exists()

    err = io.StringIO()
    assert main(["triage", "not-a-repo", "--offline"], out=io.StringIO(), err=err) == 2
    assert err.getvalue().count("\n") == 1 and "OWNER/REPO" in err.getvalue()
    err = io.StringIO()
    assert main(["triage", "nobody/nothing", "--offline"], out=io.StringIO(), err=err) == 8  # nothing to give
    assert "no stored open issues" in err.getvalue()
    err = io.StringIO()
    assert main(["triage", REPO, "--offline", "--since", "2099-01-01", "--out", str(tmp_path / "r")],
                out=io.StringIO(), err=err) == 8
    assert "none of the 6 stored open issues" in err.getvalue() and "since 2099-01-01" in err.getvalue()
    out = io.StringIO()
    code = main(["triage", REPO, "--offline", "--out", str(tmp_path / "r"), "--jobs", "1", "--format", "markdown",
                 "--top", "1"], out=out, err=io.StringIO())
    assert code == 0 and out.getvalue().startswith(f"# sftl triage: {REPO}") and "| outcome |" in out.getvalue()


HAVE_CHROMIUM = bool(shutil.which("chromium") and shutil.which("chromedriver"))


@pytest.mark.browser
@pytest.mark.skipif(not HAVE_CHROMIUM, reason="chromium and chromedriver binaries are not installed")
def test_html_report_rows_sort_and_filter_in_real_chromium(loaded, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    from sftl.browser import BrowserCrawler

    settings, store = loaded
    issues = list(store.iter_issues(repo=REPO))
    stats = triage.triage_issues(issues, settings, store, repo=REPO, jobs=1)
    paths = triage.write_report(triage.build_report(REPO, stats.rows, triage.find_duplicates(issues)), tmp_path)

    with BrowserCrawler(load_settings(offline=False)) as browser:
        driver = browser.start()
        driver.get(paths["html"].as_uri())

        def numbers() -> list[int]:
            cells = driver.find_elements(By.CSS_SELECTOR, "#issues tbody tr:not([hidden]) td:first-child")
            return [int(c.text.lstrip("#")) for c in cells]

        assert sorted(numbers()) == [995001, 995002, 995003, 995004, 995005, 995006]
        header = driver.find_elements(By.CSS_SELECTOR, "#issues th")[0]
        header.click()
        assert numbers() == sorted(numbers())
        header.click()
        assert numbers() == sorted(numbers(), reverse=True)
        confidence = driver.find_elements(By.CSS_SELECTOR, "#issues th")[3]
        confidence.click()
        conf = [float(c.text) for c in driver.find_elements(By.CSS_SELECTOR, "#issues tbody td:nth-child(4)")]
        assert conf == sorted(conf)
        driver.find_element(By.ID, "filter").send_keys("histc")
        assert sorted(numbers()) == [995002, 995003]
        assert driver.find_element(By.ID, "shown").text == "2"
        assert "995002" in driver.find_element(By.ID, "duplicates").text
