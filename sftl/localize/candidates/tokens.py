"""Words of code and of reports for lexical retrieval: identifiers whole and split at case and underscores."""

from __future__ import annotations

import re
from collections import Counter

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# camelCase / PascalCase / snake_case / digit runs: 'Conv2DTranspose' -> conv, 2, d? no: conv, 2d, transpose
WORD_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+[a-z]?(?![a-z])")

# words that carry no evidence of a file: language keywords and the commonest English and code words
STOP_WORDS = frozenset("""
a an and are as at be been but by can could did do does for from had has have how i if in into is it its
just me my no not of on or so such than that the their then there these they this to too was we were what
when where which while who why will with would you your yes also only very should may might must get got
def class return self none true false import pass raise try except finally elif else lambda yield global
nonlocal assert del with while break continue print int float str bool dict list tuple set len range
const void auto static inline struct enum typename template namespace using include define ifdef ifndef
endif pragma public private protected virtual override explicit unsigned signed char long short double
size_t int64 int32 uint8 std new delete this nullptr sizeof typedef extern return
""".split())

# a token longer than this is a hash, a blob or minified code: no one searches for it
MAX_TOKEN = 40


def words(text: str) -> Counter[str]:
    """Lower-cased words of a text (code or prose): each identifier whole and, when compound, its parts."""
    counts: Counter[str] = Counter(IDENTIFIER.findall(text))
    out: Counter[str] = Counter()
    for ident, n in counts.items():
        low = ident.lower()
        if len(low) > MAX_TOKEN:
            continue
        if len(low) > 1 and low not in STOP_WORDS:
            out[low] += n
        if "_" in ident or not (ident.islower() or ident.isupper()) or any(c.isdigit() for c in ident):
            for part in WORD_PART.findall(ident):
                part = part.lower()
                if len(part) > 1 and part != low and part not in STOP_WORDS:
                    out[part] += n
    return out


def word_list(text: str) -> list[str]:
    """`words` as a flat list (each word repeated by its count), the shape a query is given in."""
    return [w for w, n in words(text).items() for _ in range(n)]


def path_words(path: str) -> list[str]:
    """The words of a repository path's folders and file stem (`tensorflow/python/ops/nn_ops.py` -> ...)."""
    stem = path.rsplit(".", 1)[0] if "." in path.rsplit("/", 1)[-1] else path
    return list(words(stem.replace("/", " ")))
