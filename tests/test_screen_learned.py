"""Learned screening: training from labelled JSONL, calibrated scores, abstention, versioned artefacts."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from sftl.errors import InputError
from sftl.github import issue_from_json
from sftl.screen import LearnedScreener, load_labels, model_path, screen

ROOT = Path(__file__).resolve().parent.parent / "fixtures"
LABELS = ROOT / "screen" / "labels_train.jsonl"
REPORTS = sorted((ROOT / "reports").glob("*.json"))


@pytest.fixture(scope="module")
def trained() -> LearnedScreener:
    docs, labels = load_labels(LABELS)
    return LearnedScreener().fit(docs, labels)


def test_load_labels_reads_both_line_forms() -> None:
    docs, labels = load_labels(LABELS)
    assert len(docs) == 36 and labels.count("mme") == 12 and labels.count("gcrde") == 12
    issue_lines = [d for d in docs if d.key.startswith("https://github.com/example/repo/issues/")]
    assert issue_lines, "GitHub issue objects with a 'category' are accepted"


def test_bad_label_file_names_the_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"labels_bad_label\.jsonl:2: label 'bug'"):
        load_labels(ROOT / "screen" / "labels_bad_label.jsonl")
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"title": "a", "label": "mme"}\nnot json\n')
    with pytest.raises(InputError, match=r"x\.jsonl:2: not JSON"):
        load_labels(bad)
    with pytest.raises(InputError, match="cannot read"):
        load_labels(tmp_path / "missing.jsonl")


def test_too_few_examples_per_class() -> None:
    docs, labels = load_labels(LABELS)
    keep = [k for k, lbl in enumerate(labels) if lbl != "gcrde"][:20] + [labels.index("gcrde")]
    with pytest.raises(InputError, match="too few"):
        LearnedScreener().fit([docs[k] for k in keep], [labels[k] for k in keep])


def test_held_out_reports_mostly_right(trained: LearnedScreener) -> None:
    issues = [issue_from_json(json.loads(p.read_text(encoding="utf-8"))) for p in REPORTS]
    truth = [p.stem.split("__")[0] for p in REPORTS]
    results = [screen(i, None, trained) for i in issues]
    right = sum(r.category.value == t for r, t in zip(results, truth, strict=True))
    assert right >= int(0.8 * len(truth)), [(p.stem, r.category.value) for p, r in zip(REPORTS, results, strict=True)]
    for r in results:
        assert set(r.scores) == {"mme", "gcrde", "other"}
        assert sum(r.scores.values()) == pytest.approx(1.0, abs=1e-3)  # calibrated probabilities
        assert r.method == "learned"
        assert r.evidence


def test_abstains_below_the_learned_confidence(trained: LearnedScreener) -> None:
    assert 0.0 <= trained.min_confidence_ <= 1.0
    strict = LearnedScreener()
    strict.__dict__.update(trained.__dict__)
    strict.min_confidence_ = 0.999
    issue = issue_from_json(json.loads(REPORTS[0].read_text(encoding="utf-8")))
    result = screen(replace(issue, title="something happened", body="it does not work"), None, strict)
    assert result.abstained and result.reason.startswith("needs human triage")


def test_artefact_round_trip_and_version_check(trained: LearnedScreener, tmp_path: Path) -> None:
    path = model_path(tmp_path)
    assert path.parent == tmp_path / "models"
    trained.save(path)
    loaded = LearnedScreener.load(path)
    docs, _ = load_labels(LABELS)
    assert loaded.predict(docs[:5]) == trained.predict(docs[:5])

    import joblib

    payload = joblib.load(path)
    payload["version"] = 999
    joblib.dump(payload, path)
    with pytest.raises(InputError, match="retrain"):
        LearnedScreener.load(path)
    path.write_bytes(b"not a model")
    with pytest.raises(InputError, match="unreadable"):
        LearnedScreener.load(path)
    with pytest.raises(InputError, match="sftl screen --train"):
        LearnedScreener.load(tmp_path / "none.joblib")


def test_untrained_model_says_so() -> None:
    with pytest.raises(InputError, match="not trained"):
        LearnedScreener().predict(["x"])


def test_fit_restores_the_process_thread_settings() -> None:
    # fit runs its solver on one BLAS thread; the caller's settings (torch, numpy work) must come back as they were
    from threadpoolctl import threadpool_info

    before = [(p["filepath"], p["num_threads"]) for p in threadpool_info()]
    docs, labels = load_labels(LABELS)
    LearnedScreener().fit(docs, labels)
    assert [(p["filepath"], p["num_threads"]) for p in threadpool_info()] == before


def test_batch_screening_equals_one_at_a_time(trained: LearnedScreener) -> None:
    docs, _ = load_labels(LABELS)
    batch = trained.screen_docs(docs[:8])
    single = [trained.screen_docs([d])[0] for d in docs[:8]]
    assert [(s.category, s.evidence) for s in batch] == [(s.category, s.evidence) for s in single]
    assert all(s.evidence for s in batch)
