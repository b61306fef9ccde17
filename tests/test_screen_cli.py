"""`sftl screen` and `sftl similar` end to end: real store, real files, both modes."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

from sftl.cli import main
from sftl.config import load_settings
from sftl.github import issue_from_json
from sftl.store import Store

ROOT = Path(__file__).resolve().parent.parent / "fixtures"
REPORTS = sorted((ROOT / "reports").glob("*.json"))
LABELS = ROOT / "screen" / "labels_train.jsonl"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def fill_store(home: Path, copies: int = 2) -> list[str]:
    """The fixture reports, stored `copies` times under different numbers (enough to fit the IDF)."""
    keys = []
    with Store(load_settings(home=home).db_path) as store:
        for c in range(copies):
            for p in REPORTS:
                issue = issue_from_json(json.loads(p.read_text(encoding="utf-8")))
                issue = replace(issue, number=issue.number + 1000 * c)
                store.upsert_issue(issue)
                keys.append(issue.key)
    return keys


def test_screen_files_with_rules_on_a_small_store(sftl_home: Path) -> None:
    files = [str(p) for p in REPORTS if p.stem.startswith(("mme__tf_template", "gcrde__collect_env", "other__hard_negative_cuda"))]
    code, out, err = run("screen", *files, "--json")
    assert code == 0, err
    rows = json.loads(out)
    cats = {Path(f).stem.split("__")[0] for f in files}
    assert {r["category"] for r in rows} == cats
    assert all(r["method"] == "rules" for r in rows)  # 3 issues: too few for an IDF
    with Store(load_settings(home=sftl_home).db_path) as store:
        for r in rows:
            repo, num = r["issue"].split("#")
            assert store.get_screening(repo, int(num))["category"] == r["category"]


def test_screen_the_whole_store_with_keywords(sftl_home: Path) -> None:
    keys = fill_store(sftl_home)
    code, out, err = run("screen", "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert len(rows) == len(keys) and all(r["method"] == "keywords" for r in rows)
    expected = {p.stem.split("__")[0] for p in REPORTS}
    assert {r["category"] for r in rows} == expected
    code, out, err = run("screen", "pytorch/pytorch", "--category", "mme")
    assert code == 0, err
    assert "mme" in out and "gcrde" not in out.replace("gcrde 0", "")
    assert "screened" in err


def test_unknown_repo_and_empty_store(sftl_home: Path) -> None:
    code, _, err = run("screen")
    assert code == 8 and "no issues" in err
    code, _, err = run("screen", "nobody/nothing")
    assert code == 2 and "no stored issues of nobody/nothing" in err


def test_train_then_screen_learned(sftl_home: Path) -> None:
    code, out, err = run("screen", "--train", str(LABELS), "--json")
    assert code == 0, err
    info = json.loads(out)
    assert info["trained"] == 36 and Path(info["path"]).exists()
    target = next(str(p) for p in REPORTS if p.stem.startswith("mme__tf_template"))
    code, out, err = run("screen", target, "--mode", "learned", "--json")
    assert code == 0, err
    row = json.loads(out)[0]
    assert row["method"] == "learned" and row["category"] == "mme"
    code, out, err = run("screen", target, "--mode", "learned")
    assert code == 0 and "mme" in out


def test_learned_without_training_and_bad_labels(sftl_home: Path) -> None:
    code, _, err = run("screen", str(REPORTS[0]), "--mode", "learned")
    assert code == 2 and "sftl screen --train" in err
    code, _, err = run("screen", "--train", str(ROOT / "screen" / "labels_bad_label.jsonl"))
    assert code == 2 and "label 'bug'" in err
    assert "Traceback" not in err


def test_similar(sftl_home: Path) -> None:
    fill_store(sftl_home, copies=1)
    target = next(p for p in REPORTS if p.stem.startswith("gcrde__collect_env"))
    code, out, err = run("similar", str(target), "--top", "3", "--json")
    assert code == 0, err
    found = json.loads(out)
    assert 1 <= len(found) <= 3
    assert all(f["issue"] != "pytorch/pytorch#" + str(json.loads(target.read_text())["number"]) for f in found)
    code, out, err = run("similar", str(target), "--top", "2")
    assert code == 0 and "similarity" in out
    code, _, err = run("similar", str(target), "--top", "0")
    assert code == 2
