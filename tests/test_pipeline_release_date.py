"""`sftl locate` on a report that names no version: the release current when it was filed, when sftl can tell."""

from __future__ import annotations

from pathlib import Path

from sftl.config import load_settings
from sftl.model import Issue, Outcome
from sftl.pipeline import locate
from sftl.sources import register_tree
from sftl.store import Store

BODY = """`__rshift__` on a CUDA float tensor gives the wrong result; on the CPU it is right.

```python
import torch
x = torch.tensor([4.0])
print(x >> 1)          # CPU: tensor([2.])
print(x.cuda() >> 1)   # CUDA: tensor([8.], device='cuda:0')
```
CPU gives 2 but CUDA gives 8: the GPU result differs from the CPU result.
"""


def _report(created_at: str) -> Issue:
    return Issue(repo="pytorch/pytorch", number=424242, title="rshift gives different results on CPU and CUDA",
                 body=BODY, created_at=created_at, updated_at=created_at)


def test_a_versionless_report_is_read_at_the_release_of_its_date(sftl_home: Path, fixtures_dir: Path) -> None:
    settings = load_settings(offline=True)
    register_tree(settings, "pytorch", "1.4.0", fixtures_dir / "legacy_tree_1_4")
    with Store(settings.db_path) as store:
        report = locate(_report("2020-02-20T10:00:00Z"), settings, store, offline=True)
    loc = report.localization
    assert report.screening.category.value == "gcrde"
    assert loc.outcome is Outcome.LOCATED, loc.reason
    assert loc.suspects[0].path == "aten/src/THC/generic/THCTensorMathPairwise.cu"
    assert "read 1.4.0, the release current when it was filed" in loc.reason


def test_no_cached_release_of_that_date_says_so_and_reads_the_installed_one(sftl_home: Path) -> None:
    settings = load_settings(offline=True)
    with Store(settings.db_path) as store:
        report = locate(_report("2020-02-20T10:00:00Z"), settings, store, offline=True)
    reason = report.localization.reason
    assert "1.4.0 was current when it was filed, but no cached sources" in reason
    assert "read the installed" in reason


def test_a_date_past_the_known_releases_reads_the_installed_release(sftl_home: Path) -> None:
    settings = load_settings(offline=True)
    with Store(settings.db_path) as store:
        report = locate(_report("2099-01-01T00:00:00Z"), settings, store, offline=True)
    reason = report.localization.reason
    assert "current when it was filed" not in reason
    assert "names no pytorch version; read the installed" in reason


def test_a_versionless_report_past_the_table_reads_the_nearest_trees_kernels_and_says_so(
        sftl_home: Path, fixtures_dir: Path) -> None:
    """No version, filed after every release sftl knows: the installed release stands in; it holds no
    kernels, so the C++ of the nearest registered tree is read under its Python files, and the reason names it."""
    import pytest

    pytest.importorskip("torch")
    settings = load_settings(offline=True)
    register_tree(settings, "pytorch", "1.4.0", fixtures_dir / "legacy_tree_1_4")
    with Store(settings.db_path) as store:
        report = locate(_report("2099-01-01T00:00:00Z"), settings, store, offline=True)
    loc = report.localization
    assert loc.outcome is Outcome.LOCATED, loc.reason
    assert loc.suspects and all(s.path.startswith("aten/") for s in loc.suspects[:1])
    assert "C++/CUDA of pytorch 1.4.0, another release than the one read for the report" in loc.reason


def test_a_versionless_report_with_no_kernels_anywhere_names_the_one_fetch(sftl_home: Path) -> None:
    import pytest

    pytest.importorskip("torch")
    settings = load_settings(offline=True)
    with Store(settings.db_path) as store:
        report = locate(_report("2099-01-01T00:00:00Z"), settings, store, offline=True)
    loc = report.localization
    assert loc.outcome is Outcome.SKIPPED
    assert "nor of any other release; `sftl sources fetch 'pytorch==main (2099-01-01)'`" in loc.reason
