"""The keyword screener `sftl locate` fits over the store: kept terms per report give the same IDF as a fresh fit."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from sftl.config import load_settings
from sftl.model import Comment, Issue
from sftl.pipeline import MIN_SCREEN_CORPUS, corpus_screener
from sftl.screen import default_screener
from sftl.store import Store

BODIES = (
    "AttributeError: module 'torch.nn' has no attribute 'Foo' raised in torch/nn/__init__.py",
    "torch.histc gives different results on CPU and CUDA: cpu tensor([1., 2.]) vs cuda tensor([2., 1.])",
    "The docs of torch.optim.SGD have a typo in the momentum formula",
    "No module named 'torch._six' when importing apex",
    "CUDA out of memory while training a ResNet-50 with batch size 512",
)


def screen_corpus(n: int) -> list[Issue]:
    issues = []
    for i in range(n):
        comments = ()
        if i % 3 == 0:  # the reporter's own follow-up counts, another person's does not
            comments = (
                Comment(id=10 * i + 1, author=f"user{i}", body="Output on GPU: nan, on CPU: 0.5", created_at="2026-01-02T00:00:00Z"),
                Comment(id=10 * i + 2, author="maintainer", body="No module named 'x' is unrelated", created_at="2026-01-03T00:00:00Z"),
            )
        issues.append(Issue(repo="o/r", number=i + 1, title=f"report {i}", body=BODIES[i % len(BODIES)] + f" ({i})",
                            author=f"user{i}", updated_at="2026-01-01T00:00:00Z", comments=comments,
                            comments_count=len(comments)))
    return issues


def _fresh_idf(store: Store, issue: Issue) -> np.ndarray:
    others = [i for i in store.iter_issues() if (i.repo, i.number) != (issue.repo, issue.number)]
    return default_screener([*others, issue]).idf_


def test_kept_terms_give_the_fresh_fit_and_follow_edits(tmp_path: Path) -> None:
    store = Store(load_settings(home=tmp_path).db_path)
    issues = screen_corpus(45)
    for issue in issues:
        store.upsert_issue(issue)
    store.upsert_issue(Issue(repo="o/r", number=999, title="a pull request", body="No module named 'y'",
                             is_pull_request=True, updated_at="2026-01-01T00:00:00Z"))
    probe = replace(issues[7], body="torch.sort differs between cpu and cuda for NaN inputs")  # an unsaved edit

    first = corpus_screener(probe, store)
    assert first is not None and first.n_docs_ == 45  # pull requests are not reports
    assert np.allclose(first.idf_, _fresh_idf(store, probe))
    kept = next(payload for _, payload in store.iter_results("keyword-terms"))["terms"]
    assert len(kept) == 44  # every other stored report, the located one not counted twice

    # an edited stored report is read again; the terms of its old text are dropped
    edited = replace(issues[2], body="CUDA and CPU disagree: cuda gives inf, cpu gives 1.0", updated_at="2026-02-01T00:00:00Z")
    store.upsert_issue(edited)
    second = corpus_screener(probe, store)
    assert second is not None and np.allclose(second.idf_, _fresh_idf(store, probe))
    assert not np.allclose(second.idf_, first.idf_)
    kept_after = next(payload for _, payload in store.iter_results("keyword-terms"))["terms"]
    assert len(kept_after) == 44 and kept_after.keys() != kept.keys()


def test_too_small_a_store_fits_nothing(tmp_path: Path) -> None:
    store = Store(load_settings(home=tmp_path).db_path)
    issues = screen_corpus(MIN_SCREEN_CORPUS - 1)
    for issue in issues[:-1]:
        store.upsert_issue(issue)
    assert corpus_screener(issues[-1], store) is None
    store.upsert_issue(issues[-1])
    store.upsert_issue(screen_corpus(MIN_SCREEN_CORPUS + 1)[-1])
    assert corpus_screener(issues[-1], store) is not None
