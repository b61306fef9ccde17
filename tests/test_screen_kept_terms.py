"""The keyword terms kept per stored report: damaged entries or rows are ignored and rebuilt, the fit equals a fresh one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_pipeline_screen_cache import screen_corpus

from sftl.config import load_settings
from sftl.pipeline import corpus_screener
from sftl.screen import default_screener


@pytest.mark.parametrize("damage", [
    {"bogus": "not a list"}, {"bogus": [10 ** 9]}, {"bogus": [-1]}, {"bogus": ["3"]}, {"bogus": [1.5]},
])
def test_damaged_kept_keyword_terms_are_ignored_and_rebuilt(tmp_path: Path, damage: dict[str, object]) -> None:
    from sftl.store import Store

    store = Store(load_settings(home=tmp_path).db_path)
    issues = screen_corpus(40)
    for issue in issues:
        store.upsert_issue(issue)
    assert corpus_screener(issues[0], store) is not None
    key, payload = next(store.iter_results("keyword-terms"))
    terms = payload["terms"]
    # every kept entry damaged the same way: the fit must read them all again and equal a fresh fit
    store.save_result("keyword-terms", key, {"terms": {d: next(iter(damage.values())) for d in terms}})
    fitted = corpus_screener(issues[0], store)
    others = [i for i in store.iter_issues() if i.number != issues[0].number]
    assert fitted is not None and np.allclose(fitted.idf_, default_screener([*others, issues[0]]).idf_)
    assert next(p for _, p in store.iter_results("keyword-terms"))["terms"] == terms  # rebuilt


@pytest.mark.parametrize("raw", ['"hello"', "[1, 2]", "null", "not json at all"])
def test_a_kept_terms_row_that_is_no_object_is_rebuilt(tmp_path: Path, raw: str) -> None:
    import sqlite3

    from sftl.store import Store

    db = load_settings(home=tmp_path).db_path
    store = Store(db)
    issues = screen_corpus(40)
    for issue in issues:
        store.upsert_issue(issue)
    assert corpus_screener(issues[0], store) is not None
    key, payload = next(store.iter_results("keyword-terms"))
    store.close()
    with sqlite3.connect(db) as con:  # damaged outside sftl
        con.execute("UPDATE results SET payload=? WHERE kind='keyword-terms'", (raw,))
    con.close()
    store = Store(db)
    # was AttributeError ('str' object has no attribute 'get') / StoreError: locate could not screen at all
    assert corpus_screener(issues[0], store) is not None
    assert store.get_result("keyword-terms", key) == payload
    store.close()
