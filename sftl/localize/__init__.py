"""Rankers of framework source files; each takes evidence and a source provider, returns a `Localization`.

Every localizer has the same call shape, so `sftl locate --method` and `sftl eval --methods` pick
one from `LOCALIZERS` by name:

    localize(issue: Issue, extraction: Extraction, category: Category,
             source: SourceProvider | None, top: int) -> Localization

The registry is filled lazily (`get_localizer`) so that importing this package stays cheap.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sftl.model import Category, Extraction, Issue, Localization
    from sftl.sources import SourceProvider

    LocalizeFn = Callable[[Issue, Extraction, Category, SourceProvider | None, int], Localization]

# method name -> "module:function"
LOCALIZERS: dict[str, str] = {
    "sftl": "sftl.localize.dispatch:localize_sftl",
    "paper": "sftl.localize.dispatch:localize_paper",
    "vsm": "sftl.localize.baselines:localize_vsm",
    "bm25": "sftl.localize.bm25:localize_bm25",
    "bert": "sftl.localize.baselines:localize_bert",
}


def get_localizer(method: str) -> LocalizeFn:
    from sftl.errors import InputError

    try:
        module_name, func = LOCALIZERS[method].split(":")
    except KeyError:
        raise InputError(f"unknown method {method!r}; choose from {', '.join(LOCALIZERS)}") from None
    fn: LocalizeFn = getattr(importlib.import_module(module_name), func)
    return fn
