"""Constraints read from an API's rejection messages ("mat1 must be a matrix", "index out of range") for the generator to lean towards."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sftl.fuzz.specs import MAX_DIM, MAX_RANK, ApiSpec


@dataclass(frozen=True)
class Hints:
    """Constraints read from an API's rejection messages ("mat1 must be a matrix", "index out of range").

    The generator leans towards them; nothing is forbidden, so inputs on the other side are still drawn.
    """

    ranks: dict[str, tuple[int, ...]] = field(default_factory=dict)  # argument -> ranks it asks for
    lengths: dict[str, tuple[int, ...]] = field(default_factory=dict)  # list argument -> lengths it asks for
    dtypes: dict[str, str] = field(default_factory=dict)  # argument -> dtype level ("shared" = as the others)
    bounded: bool = False  # integer tensors index into another argument: draw their values in range
    spd: bool = False  # matrices must be symmetric positive-definite
    sizes: tuple[int, ...] = ()  # dimension sizes the messages name ("no dimension of size 3")
    positive: tuple[str, ...] = ()  # int / int-list arguments whose values must be > 0 (groups, strides)
    ones: tuple[str, ...] = ()  # window lists whose entries must be 1 outside the spatial dims
    avoid: tuple[str, ...] = ()  # dtypes the API has no kernel for (drawn less, not never)

    def empty(self) -> bool:
        return not (self.ranks or self.lengths or self.dtypes or self.bounded or self.spd or self.sizes
                    or self.positive or self.ones or self.avoid)


_WORDS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def _num(x: str) -> int:
    return _WORDS.get(x.lower(), int(x) if x.isdigit() else -1)


_N = r"(\d+|zero|one|two|three|four|five|six)"
# (pattern, what it says): group 1 names an argument (or In[k]) unless the kind says otherwise
_RANK_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b([\w\[\]]+) must be a matrix", re.I), "2"),
    (re.compile(r"\b([\w\[\]]+) (?:is supposed to|must|should) be a vector", re.I), "1"),
    (re.compile(r"\b([\w\[\]]+) (?:tensor )?(?:is supposed to|must|should) be a scalar", re.I), "0"),
    (re.compile(r"\b([\w\[\]]+) must be " + _N + r"-?D\b", re.I), "=2"),
    (re.compile(r"\b([\w\[\]]+) must be " + _N + r"-dimensional", re.I), "=2"),
    (re.compile(r"\b([\w\[\]]+) (?:ndims|rank) must be >= " + _N, re.I), ">=2"),
    (re.compile(r"\b(?:tensor )?([\w\[\]]+) (?:must|should) have at least " + _N + r" dim", re.I), ">=2"),
    (re.compile(r"Expected " + _N + r"D (?:\(unbatched\) )?or " + _N + r"D \(batched\) (\w+)", re.I), "or"),
)
_LEN_RULE = re.compile(r"\b(\w+) (?:field |attribute |list )?must (?:specify|have|be of length) " + _N
                       + r"(?: or " + _N + r")? (?:dimensions|elements|values|entries)", re.I)
_DTYPE_RULE = re.compile(r"Expected (?:dtype |type )?(int32|int64|Long|Int)\b.*\bfor (?:argument )?[\"'#]?(\w+)", re.I)
_SAME_DTYPE = re.compile(r"\b(\w+) and (\w+) must have the same (?:dtype|type|scalar type)", re.I)
_BOUNDS = re.compile(r"(index|indices).*(out of (?:bounds|range)|is not in \[)|out of (?:DATA )?bounds", re.I)
_NOT_DIM = re.compile(r"Dimension out of range", re.I)
_ONES_RULE = re.compile(r"support (\w+) in the batch", re.I)  # window lists: batch/depth entries must be 1
_POSITIVE_RULE = re.compile(r"\b(?:non-positive|negative|zero) (\w+)(?: is| are)? not (?:supported|allowed)"
                            r"|\b(\w+) must be (?:positive|greater than (?:0|zero)|non-negative)", re.I)
_NO_KERNEL = re.compile(r"not implemented for '(\w+)'|T=DT_(\w+)")  # a dtype the API has no kernel for
_SCALAR_TYPES = {"bool": "bool", "half": "float16", "bfloat16": "bfloat16", "long": "int64", "int": "int32",
                 "byte": "uint8", "char": "int8", "short": "int16", "float": "float32", "double": "float64",
                 "complexfloat": "complex64", "complexdouble": "complex128", "int64": "int64", "int32": "int32",
                 "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64", "int8": "int8",
                 "int16": "int16", "complex64": "complex64", "complex128": "complex128"}
_SIZE_RULE = re.compile(r"(?:of size|must have length|must be of size|to have size) (\d+)", re.I)
_SPD_RULE = re.compile(r"positive[- ]definite", re.I)


def mine_hints(spec: ApiSpec, messages: Iterable[str], min_count: int = 2) -> Hints:
    """Relations stated by rejection messages, kept when at least `min_count` messages state them."""
    tensors = [a.name for a in spec.tensor_args]
    names = {a.name.lower(): a.name for a in spec.args}

    def arg(word: str) -> str | None:
        w = word.lower()
        m = re.fullmatch(r"in\[(\d)\]", w)
        if m:  # TensorFlow's In[0], In[1]: the op's tensor inputs in order
            k = int(m.group(1))
            return tensors[k] if k < len(tensors) else None
        if w in names:
            return names[w]
        if w in ("input", "self", "tensor", "a", "x") and tensors:
            return tensors[0]
        return None

    votes: dict[tuple[str, str, Any], int] = {}

    def vote(*key: Any) -> None:
        votes[key] = votes.get(key, 0) + 1

    for msg in messages:
        for pat, how in _RANK_RULES:
            m = pat.search(msg)
            if not m:
                continue
            rk: tuple[int, ...]
            if how == "or":
                a, rk = arg(m.group(3)), (_num(m.group(1)), _num(m.group(2)))
            else:
                a = arg(m.group(1))
                if how.startswith(">="):  # at least k: k and k + 1 (matrices, batches of them) are the usual case
                    rk = tuple(range(_num(m.group(2)), min(_num(m.group(2)) + 2, MAX_RANK + 1)))
                elif how.startswith("="):
                    rk = (_num(m.group(2)),)
                else:
                    rk = (int(how),)
            if a is not None and rk and min(rk) >= 0:
                vote("rank", a, rk)
        m = _LEN_RULE.search(msg)
        if m and arg(m.group(1)):  # "4 or 5 dimensions": the first is the common case (conv2d, not conv3d)
            vote("len", arg(m.group(1)), (_num(m.group(2)),))
        m = _DTYPE_RULE.search(msg)
        if m and arg(m.group(2)):
            wide = any(w in msg.lower() for w in ("int64", "long"))
            vote("dtype", arg(m.group(2)), "int64" if wide else "int32")
        m = _ONES_RULE.search(msg)
        if m and arg(m.group(1)):
            vote("ones", arg(m.group(1)), True)
        m = _POSITIVE_RULE.search(msg)
        if m and arg(m.group(1) or m.group(2)):
            vote("positive", arg(m.group(1) or m.group(2)), True)
        m = _SAME_DTYPE.search(msg)
        if m:
            for g in m.groups():
                if arg(g):
                    vote("dtype", arg(g), "shared")
        if _BOUNDS.search(msg) and not _NOT_DIM.search(msg):
            vote("bounded", "", True)
        m = _NO_KERNEL.search(msg)
        if m and _SCALAR_TYPES.get((m.group(1) or m.group(2)).lower()):
            vote("avoid", "", _SCALAR_TYPES[(m.group(1) or m.group(2)).lower()])
        if _SPD_RULE.search(msg):
            vote("spd", "", True)
        for m2 in _SIZE_RULE.finditer(msg):
            if 1 <= int(m2.group(1)) <= MAX_DIM:
                vote("size", "", int(m2.group(1)))
    ranks: dict[str, tuple[int, ...]] = {}
    lengths: dict[str, tuple[int, ...]] = {}
    dtypes: dict[str, str] = {}
    sizes: list[int] = []
    positive: list[str] = []
    ones: list[str] = []
    avoid: list[str] = []
    bounded = spd = False
    for (kind, a, val), n in sorted(votes.items(), key=lambda kv: -kv[1]):
        if n < min_count:
            continue
        if kind == "rank" and a not in ranks:
            ranks[a] = val
        elif kind == "len" and a not in lengths:
            lengths[a] = val
        elif kind == "dtype" and a not in dtypes:
            dtypes[a] = val
        elif kind == "bounded":
            bounded = True
        elif kind == "spd":
            spd = True
        elif kind == "size":
            sizes.append(val)
        elif kind == "positive":
            positive.append(a)
        elif kind == "ones":
            ones.append(a)
        elif kind == "avoid":
            avoid.append(val)
    return Hints(ranks, lengths, dtypes, bounded, spd, tuple(sorted(set(sizes))), tuple(positive), tuple(ones),
                 tuple(avoid))
