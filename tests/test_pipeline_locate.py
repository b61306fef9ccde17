"""The pipeline on real stages: extract, screen (rules on a small store), localize against installed torch, store."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from sftl.config import load_settings
from sftl.model import Category, Issue, Outcome
from sftl.store import Store

pytest.importorskip("sftl.extract")
pytest.importorskip("sftl.screen")

from sftl.pipeline import locate, report_json  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "demo"
KEYS = ["issue", "category", "screening", "environment", "replay", "suspects", "outcome", "reason", "method", "release"]


def _issue(name: str) -> Issue:
    from sftl.github import issue_from_json

    return issue_from_json(json.loads((FIXTURES / name).read_text(encoding="utf-8")))


def test_mme_fixture_is_located_and_stored(sftl_home: Path) -> None:
    settings = load_settings(offline=True)
    with Store(settings.db_path) as store:
        issue = _issue("mme_fx_graphmodule_missing_constant.json")
        store.upsert_issue(issue)
        report = locate(issue, settings, store)
        payload = report_json(report)
        assert list(payload) == KEYS
        assert list(payload["issue"]) == ["url", "repo", "number", "title"]
        assert list(payload["environment"]) == ["framework", "version", "python", "cuda", "os", "missing"]
        assert payload["category"] == "mme" and payload["outcome"] == "located"
        assert payload["suspects"][0]["path"] == "torch/fx/graph_module.py"
        assert payload["suspects"][0]["side"] == "python"
        assert payload["replay"] is None
        assert store.get_localization(issue.repo, issue.number) == payload
        assert store.get_screening(issue.repo, issue.number)["category"] == "mme"
        # the stored screening is reused, the paper's method stored beside ours
        paper = report_json(locate(issue, settings, store, method="paper"))
        assert paper["method"] == "paper" and store.get_localization(issue.repo, issue.number, "paper") == paper


def test_removed_module_in_user_code_abstains(sftl_home: Path) -> None:
    settings = load_settings(offline=True)
    with Store(settings.db_path) as store:
        payload = report_json(locate(_issue("mme_removed_module_in_user_code.json"), settings, store))
    assert payload["outcome"] == "abstained" and payload["suspects"] == []
    assert "torch._six" in payload["reason"]


def test_tensorflow_user_error_abstains_with_the_explanation(sftl_home: Path) -> None:
    if importlib.util.find_spec("tensorflow") is None:  # its installed files are read, never imported
        pytest.skip("tensorflow is not installed")
    settings = load_settings(offline=True)
    with Store(settings.db_path) as store:
        payload = report_json(locate(_issue("mme_tf_numpy_in_tf_function_user_error.json"), settings, store))
    assert payload["environment"]["framework"] == "tensorflow"
    assert payload["outcome"] == "abstained" and "_EagerTensorBase" in payload["reason"] and "user error" in payload["reason"]


def test_other_reports_get_suspects_and_unreadable_sources_are_skipped_values(sftl_home: Path, tmp_path: Path) -> None:
    settings = load_settings(offline=True)
    with Store(settings.db_path) as store:
        # a report of neither category is ranked too, from the release at hand (the installed one: no version named)
        other = Issue(repo="pytorch/pytorch", number=5, title="Docs typo in torch.nn.Linear",
                      body="The docstring of `torch.nn.Linear` says 'ouput' for its output features.")
        report = locate(other, settings, store)
        assert report.screening.category == Category.OTHER
        loc = report.localization
        assert loc is not None and loc.outcome == Outcome.LOCATED and loc.suspects
        assert all(s.path.startswith("torch/") and s.reason for s in loc.suspects)
        assert "candidate files" in loc.reason and "screened" not in loc.reason
        old = _issue("mme_fx_graphmodule_missing_constant.json")
        old = Issue(repo=old.repo, number=6, title=old.title, body=old.body.replace("2.13.0+cpu", "1.7.1"))
        report = locate(old, settings, store)
        loc = report.localization
        assert loc is not None and loc.outcome == Outcome.SKIPPED and "1.7.1" in loc.reason
        # an explicit source root that does not exist is a skipped value too, with the reason
        report = locate(old, settings, store, source_root=tmp_path / "missing")
        assert report.localization is not None and report.localization.outcome == Outcome.SKIPPED
        assert "not a directory" in report.localization.reason


def test_unknown_method_is_an_input_error(sftl_home: Path) -> None:
    from sftl.errors import InputError

    settings = load_settings(offline=True)
    with Store(settings.db_path) as store, pytest.raises(InputError):
        locate(_issue("mme_removed_module_in_user_code.json"), settings, store, method="nope")


def test_an_edited_report_is_screened_again_not_served_a_stale_screening(sftl_home: Path) -> None:
    from dataclasses import replace

    settings = load_settings(offline=True)
    with Store(settings.db_path) as store:
        issue = _issue("mme_fx_graphmodule_missing_constant.json")
        store.upsert_issue(issue)
        assert report_json(locate(issue, settings, store))["category"] == "mme"
        stored = store.get_screening(issue.repo, issue.number)
        assert stored["issue_fingerprint"] == issue.fingerprint
        # the same text again: the stored screening is reused as it is
        assert report_json(locate(issue, settings, store))["category"] == "mme"
        edited = replace(issue, title="Docs: typo in the FX tutorial", body="The tutorial says 'grpah'.",
                         updated_at="2030-01-01T00:00:00Z")
        store.upsert_issue(edited)
        payload = report_json(locate(edited, settings, store))
        assert payload["category"] == "other" and payload["outcome"] == "located"
        assert store.get_screening(issue.repo, issue.number)["issue_fingerprint"] == edited.fingerprint
