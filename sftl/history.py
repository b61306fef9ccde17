"""The history prior: fix records (parsed, checked, counted) and, for one issue, the files that similar earlier fixes changed."""

from __future__ import annotations

import bisect
import math
import re
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, timedelta
from typing import Any

from sftl.errors import InputError
from sftl.github import json_type
from sftl.model import Category, Extraction, FixRecord, Issue, Localization, Suspect

TERMS_VERSION = 2  # bump when the terms change: stored terms of another version are computed again

# how much each part of a text counts in its similarity vector
_W_OP, _W_TITLE, _W_SIGNATURE, _W_BODY = 2.0, 1.0, 1.5, 0.3
MIN_SIMILARITY = 0.25  # a fix less similar than this lends nothing
MAX_NEIGHBOURS = 10  # the most similar fixes consulted per issue
# the blend's tie band: the largest content gap (a fraction of the leader's content score) the prior
# can overturn, reached only by a file whose similar fixes give it full support (see `blend`)
TIE_BAND = 0.10
KINDS = ("gcrde", "crash", "numerics", "mme", "other")

_STOP = frozenset(
    """the and for with when not but are was has have that this from into onto than then its it's
    fix fixes fixed fixing bug bugs issue issues wrong incorrect result results output outputs gives give
    returns return using use used does doesn work works working error errors fails failed failure
    torch tensor tensors pytorch tensorflow python function functions support supports add adds
    make makes made case cases some all one two only also should would could can cannot more less
    after before same different value values input inputs call calls called code test tests new old
    aten src native cpp kernel kernels pr""".split()
)
_DEVICES = {"cuda": "cuda", "gpu": "cuda", "cudnn": "cuda", "rocm": "cuda", "hip": "cuda", "mps": "mps",
            "cpu": "cpu", "xla": "xla", "tpu": "xla", "xpu": "xpu"}
_DTYPES = {
    "float16": "float16", "half": "float16", "fp16": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float64": "float64", "double": "float64", "fp64": "float64", "float32": "float32", "fp32": "float32",
    "complex64": "complex", "complex128": "complex", "cfloat": "complex", "cdouble": "complex", "complex": "complex",
    "int64": "int64", "long": "int64", "int32": "int32", "int8": "int8", "uint8": "uint8", "bool": "bool",
}
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z0-9]+|[A-Z]+")
_EXC = re.compile(r"\b([A-Z][A-Za-z]*(?:Error|Exception))\b")
_DATE = re.compile(r"\d{4}-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?")

# test and documentation files a fix touches beside its source
_NON_SOURCE = re.compile(
    r"(^|/)(tests?|testing|docs?|benchmarks?|\.github|\.ci|\.circleci)/|(^|/)test_[^/]*$|_test\.(py|cc|cpp)$"
    r"|\.(md|rst|txt)$|(^|/)(CHANGELOG|README|LICENSE)[^/]*$"
)


def is_source_file(path: str) -> bool:
    """A changed file that holds the framework's code, not its tests or documentation."""
    return bool(path) and not _NON_SOURCE.search(path)


# -- records: parse, write back, key ------------------------------------------------------------


def parse_fix(obj: Any) -> FixRecord:
    """One JSON object in the history format -> FixRecord; InputError says what is wrong with it."""
    if not isinstance(obj, dict):
        raise InputError(f"expected a JSON object, got {json_type(obj)}")
    repo = obj.get("repo")
    if not isinstance(repo, str) or not re.fullmatch(r"[\w.-]+/[\w.-]+", repo.strip()):
        raise InputError(f"'repo' must be OWNER/NAME, got {repo!r}")
    numbers: dict[str, int | None] = {}
    for name in ("issue", "pr"):
        value = obj.get(name)
        if value is not None and (type(value) is not int or value <= 0):
            raise InputError(f"'{name}' must be a positive whole number or null, got {value!r}")
        numbers[name] = value
    commit = obj.get("commit")
    if commit is not None and (not isinstance(commit, str) or not re.fullmatch(r"[0-9a-fA-F]{7,40}", commit)):
        raise InputError(f"'commit' must be a hexadecimal SHA or null, got {commit!r}")
    if numbers["issue"] is None and numbers["pr"] is None and commit is None:
        raise InputError("a fix needs at least one of 'issue', 'pr', 'commit'")
    title = obj.get("title")
    if not isinstance(title, str) or not title.strip():
        raise InputError("'title' must be a non-empty string")
    fixed_on = obj.get("fixed_on")
    day = fixed_on.strip() if isinstance(fixed_on, str) else ""
    if not (len(day) == 7 or len(day) == 10 or len(day) > 10 and day[10] in "T ") or not _DATE.fullmatch(day[:10]):
        raise InputError(f"'fixed_on' must be YYYY-MM or YYYY-MM-DD (a timestamp's time is ignored), got {fixed_on!r}")
    files = obj.get("files")
    if not isinstance(files, list) or not files or not all(isinstance(f, str) and f.strip() for f in files):
        raise InputError("'files' must be a non-empty list of repository-relative paths")
    ops = obj.get("ops", [])
    if ops is None:
        ops = []
    if not isinstance(ops, list) or not all(isinstance(o, str) for o in ops):
        raise InputError("'ops' must be a list of strings")
    kind = obj.get("kind") or "other"
    if not isinstance(kind, str):
        raise InputError(f"'kind' must be one of {', '.join(KINDS)} or a root cause's name, got {json_type(kind)}")
    texts: dict[str, str] = {}
    for name in ("device", "body", "evidence", "issue_created_at"):
        value = obj.get(name)
        if value is not None and not isinstance(value, str):
            raise InputError(f"'{name}' must be a string or null, got {json_type(value)}")
        texts[name] = (value or "").strip()
    if kind not in KINDS:  # another benchmark's root cause ("API Misuse"): an *other* fix, the cause kept in words
        texts["evidence"] = "; ".join(t for t in (f"root cause: {kind.strip()}", texts["evidence"]) if t)
        kind = "other"
    return FixRecord(
        repo=repo.strip(),
        issue=numbers["issue"],
        pr=numbers["pr"],
        commit=commit.lower() if commit else None,
        title=title.strip(),
        fixed_on=day[:10],
        files=tuple(dict.fromkeys(_norm_path(f) for f in files)),
        ops=tuple(o.strip() for o in ops if o.strip()),
        kind=kind,
        device=texts["device"].lower() or None,
        body=texts["body"],
        evidence=texts["evidence"],
        issue_created_at=texts["issue_created_at"],
    )


def _norm_path(path: str) -> str:
    p = path.strip().replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    return p.lstrip("/")


def fix_to_json(rec: FixRecord) -> dict[str, Any]:
    """A record in the import format (so `export | import` round-trips)."""
    out: dict[str, Any] = {
        "repo": rec.repo, "issue": rec.issue, "pr": rec.pr, "commit": rec.commit, "title": rec.title,
        "ops": list(rec.ops), "kind": rec.kind, "device": rec.device, "fixed_on": rec.fixed_on, "files": list(rec.files),
    }
    for name in ("body", "evidence", "issue_created_at"):
        if getattr(rec, name):
            out[name] = getattr(rec, name)
    return out


def fix_key(rec: FixRecord) -> str:
    """The record's identity in its repository: a PR fixing two issues is two records."""
    return f"{rec.issue or ''}|{rec.pr or ''}|{rec.commit or ''}"


def fix_label(rec: FixRecord) -> str:
    """How a reason names the fix: the issue it fixed, else its PR, else its commit."""
    if rec.issue:
        return f"the fix of #{rec.issue}"
    if rec.pr:
        return f"fix PR #{rec.pr}"
    return f"fix commit {(rec.commit or '')[:10]}"


# -- similarity terms ---------------------------------------------------------------------------


def _words(text: str) -> Iterable[str]:
    """Identifier and word terms: 'group_norm' and 'GroupNorm' -> groupnorm, group, norm (devices and
    dtypes are left to the signature)."""
    for tok in _WORD.findall(text):
        pieces = [p.lower() for part in tok.split("_") for p in _CAMEL.findall(part)]
        joined = tok.replace("_", "").lower()
        if len(joined) >= 3 and joined not in _STOP and joined not in _DEVICES and joined not in _DTYPES:
            yield joined
        if len(pieces) > 1:
            for p in pieces:
                if len(p) >= 3 and p not in _STOP and p != joined and p not in _DEVICES and p not in _DTYPES:
                    yield p


def _op_name(op: str) -> str:
    """'torch.nn.functional.interpolate' -> 'interpolate'; 'nn.GroupNorm' -> 'groupnorm'; 'x.add_()' -> 'add'."""
    name = re.split(r"[\s(]", op.strip(), maxsplit=1)[0].rstrip(".").split(".")[-1]
    return name.replace("_", "").lower()


def _signature(text: str) -> Counter[str]:
    """Device, dtype and exception-type terms named in a text."""
    out: Counter[str] = Counter()
    low = text.lower()
    for word in set(re.findall(r"[a-z0-9]+", low)):
        if word in _DEVICES:
            out[f"dev:{_DEVICES[word]}"] += 1
        if word in _DTYPES:
            out[f"dtype:{_DTYPES[word]}"] += 1
    for exc in set(_EXC.findall(text)):
        out[f"exc:{exc.lower()}"] += 1
    if "illegal memory access" in low or "device-side assert" in low:
        out["exc:cudaerror"] += 1
    return out


def _weigh(parts: Iterable[tuple[Iterable[str], float]]) -> dict[str, float]:
    tf: dict[str, float] = {}
    for terms, weight in parts:
        for term, n in Counter(terms).items():
            tf[term] = tf.get(term, 0.0) + weight * (1.0 + math.log(n))
    return {t: round(w, 4) for t, w in tf.items()}


def fix_terms(rec: FixRecord) -> dict[str, float]:
    """A fix record's weighted terms: title words, ops, device/dtype/exception signature, body."""
    ops = [o for o in (_op_name(op) for op in rec.ops) if len(o) >= 2]
    sig = _signature(" ".join((rec.title, *rec.ops, rec.body)))
    if rec.device:
        for dev in re.findall(r"[a-z]+", rec.device):
            if dev in _DEVICES:
                sig[f"dev:{_DEVICES[dev]}"] += 1
            elif dev == "both":
                sig["dev:cuda"] += 1
                sig["dev:cpu"] += 1
    return _weigh([
        ([f"op:{o}" for o in ops], _W_OP),
        ([w for op in rec.ops for w in _words(op)], _W_TITLE),
        (_words(rec.title), _W_TITLE),
        (list(sig.elements()), _W_SIGNATURE),
        (_words(rec.body), _W_BODY),
    ])


# calls a snippet makes to set up and show its case (torch.tensor, randn, .cuda(), print): no subject
# of the report unless its title names them
_INCIDENTAL = frozenset(
    """tensor astensor fromnumpy randn rand randint randlike randnlike randperm manualseed seed zeros ones empty
    full zeroslike oneslike emptylike fulllike arange linspace cuda to cpu numpy item tolist print device dtype
    float double half long int bool size shape dim numel nelement clone detach contiguous requiresgrad backward
    allclose equal isclose istensor setdefaultdtype setprintoptions nograd synchronize view reshape unsqueeze
    squeeze type isavailable isnan isinf stride permute transpose flatten devicecount currentdevice""".split()
)


def issue_terms(issue: Issue, extraction: Extraction) -> dict[str, float]:
    """An issue's weighted terms, built like a fix record's: its title, the ops it calls (not the
    incidental set-up calls, unless the title names them), its error signature (devices, dtypes,
    exception type) and, at a low weight, its body."""
    title_words = set(_words(issue.title))
    apis = [a for a in extraction.apis if _op_name(a) not in _INCIDENTAL or _op_name(a) in title_words]
    ops = [o for o in (_op_name(api) for api in apis) if len(o) >= 2]
    tb = extraction.traceback
    error = extraction.error_line or (f"{tb.exception}: {tb.message}" if tb else "")
    sig = _signature(" ".join((issue.title, error, issue.body[:20000])))
    if tb is not None and tb.exception:
        sig[f"exc:{tb.exception.split('.')[-1].lower()}"] += 1
    return _weigh([
        ([f"op:{o}" for o in ops], _W_OP),
        ([w for api in apis for w in _words(api.split(".")[-1])], _W_TITLE),
        (_words(issue.title), _W_TITLE),
        ([t for t in sig.elements()], _W_SIGNATURE),
        (_words(issue.body[:20000]), _W_BODY),
    ])


# -- the prior ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SimilarFix:
    """A fix like the issue at hand: its record, the cosine similarity, and the terms they share."""

    record: FixRecord
    similarity: float
    shared: tuple[str, ...]  # the heaviest shared terms, readable ("histc", "on CUDA", "float16")

    def describe(self) -> str:
        return f"{fix_label(self.record)} (similar: {', '.join(self.shared) or 'wording'}; {self.similarity:.2f})"


@dataclass(frozen=True)
class FilePrior:
    """One file of the tree at hand that similar fixes changed: its prior score (0..1], relative to the
    issue's best file; its support (0..1], absolute: how strongly similar fixes point at it; and why."""

    path: str
    score: float
    fixes: tuple[SimilarFix, ...]  # most similar first
    mapped_from: str | None = None  # the fix's path when the file has moved since (matched by name)
    support: float = 0.0  # sum over its fixes of similarity / sqrt(files that fix changed), at most 1

    @property
    def reason(self) -> str:
        best = self.fixes[0]
        moved = f" (then {self.mapped_from})" if self.mapped_from else ""
        more = f"; and {len(self.fixes) - 1} more similar fix(es)" if len(self.fixes) > 1 else ""
        return f"changed by {best.describe()}{moved}{more}"


@dataclass(frozen=True)
class HistoryPrior:
    """The prior of one issue: per-file scores of the tree at hand, the fixes consulted, and notes."""

    files: tuple[FilePrior, ...]  # highest score first
    neighbours: tuple[SimilarFix, ...]
    considered: int  # fixes dated before the issue that were compared
    notes: tuple[str, ...] = ()

    def scores(self) -> dict[str, float]:
        """path -> prior score: the feature a learned ranker reads."""
        return {f.path: f.score for f in self.files}


def _readable(term: str) -> str:
    kind, _, value = term.partition(":")
    if kind == "dev":
        return f"on {value.upper() if value in ('cuda', 'cpu', 'mps', 'xla', 'xpu') else value}"
    if kind in ("op", "dtype", "exc") and value:
        return value
    return term


def filed_day(created_at: str) -> str | None:
    """'2023-05-17T10:00:00Z' -> '2023-05-17' (None when it is no date)."""
    day = (created_at or "").strip()[:10]
    return day if len(day) == 10 and _DATE.fullmatch(day) else None


def fixed_before(fixed_on: str, day: str) -> bool:
    """The time rule: was the fix dated strictly before the day the issue was filed? A fix known
    only by its month counts for issues filed from the next month on."""
    return fixed_on < (day[:7] if len(fixed_on) == 7 else day)


_SIGNATURE_PREFIXES = ("dev:", "dtyp", "exc:")


def counts_from(fixed_on: str) -> str:
    """The first day a fix counts for (the time rule as a sortable key): '2024-05' -> '2024-06-01',
    '2024-06-14' -> '2024-06-15'. An issue filed on day D may consult the fixes counting from D or before."""
    y, m = int(fixed_on[:4]), int(fixed_on[5:7])
    if len(fixed_on) == 7:
        return f"{y + m // 12:04d}-{m % 12 + 1:02d}-01"
    try:
        return (date(y, m, int(fixed_on[8:10])) + timedelta(days=1)).isoformat()
    except ValueError:  # 2023-02-30: the next month, as for a month-only date
        return f"{y + m // 12:04d}-{m % 12 + 1:02d}-01"


@dataclass
class FixIndex:
    """The fixes of one framework as an inverted index, rows sorted by the day they count from, so
    the fixes before a day are a prefix and a term's document frequency among them one bisection.
    Flat arrays (CSR) plus two string lists and the vocabulary: `to_data`/`from_data` round-trip
    through `marshal` in a few milliseconds for 10,000 fixes."""

    starts: list[str]  # per row: the day it counts from (ascending)
    keys: list[str]  # per row: "repo\0fix_key"
    row_ptr: array  # row r's terms are row_terms[row_ptr[r]:row_ptr[r + 1]]
    row_terms: array
    row_weights: array
    vocab: dict[str, int]
    post_ptr: array  # term t's rows (ascending) are post_rows[post_ptr[t]:post_ptr[t + 1]]
    post_rows: array

    @classmethod
    def build(cls, rows: Iterable[tuple[str, str, Mapping[str, float]]]) -> FixIndex:
        """From (key, fixed_on, terms) rows."""
        ordered = sorted(((counts_from(fixed_on), key, terms) for key, fixed_on, terms in rows), key=lambda r: (r[0], r[1]))
        vocab: dict[str, int] = {}
        postings: list[list[int]] = []
        row_ptr, row_terms, row_weights = array("i", [0]), array("i"), array("d")
        for row, (_, _, terms) in enumerate(ordered):
            for term, weight in terms.items():
                tid = vocab.setdefault(term, len(vocab))
                if tid == len(postings):
                    postings.append([])
                postings[tid].append(row)
                row_terms.append(tid)
                row_weights.append(float(weight))
            row_ptr.append(len(row_terms))
        post_ptr, post_rows = array("i", [0]), array("i")
        for plist in postings:
            post_rows.extend(plist)
            post_ptr.append(len(post_rows))
        return cls([r[0] for r in ordered], [r[1] for r in ordered], row_ptr, row_terms, row_weights, vocab,
                   post_ptr, post_rows)

    def to_data(self) -> dict[str, Any]:
        return {"starts": self.starts, "keys": self.keys, "vocab": self.vocab,
                **{name: getattr(self, name).tobytes() for name in _ARRAYS}}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> FixIndex:
        arrays = {}
        for name, code in _ARRAYS.items():
            arr = array(code)
            arr.frombytes(data[name])
            arrays[name] = arr
        return cls(starts=data["starts"], keys=data["keys"], vocab=data["vocab"], **arrays)

    def __len__(self) -> int:
        return len(self.starts)

    def eligible(self, day: str | None) -> int:
        """How many rows (a prefix) count for an issue filed on `day` (every row for an undated one)."""
        return len(self.starts) if day is None else bisect.bisect_right(self.starts, day)

    def _df(self, tid: int, k: int) -> int:
        lo, hi = self.post_ptr[tid], self.post_ptr[tid + 1]
        return bisect.bisect_left(self.post_rows, k, lo, hi) - lo

    def similar(
        self, query: Mapping[str, float], day: str | None, limit: int = MAX_NEIGHBOURS, min_similarity: float = MIN_SIMILARITY,
        exclude: str | None = None,
    ) -> tuple[list[tuple[int, float, tuple[str, ...]]], int]:
        """TF-IDF cosine of the query against the rows dated before `day` (IDF over those rows):
        ([(row, similarity, shared terms heaviest first)], how many rows were eligible). A row
        sharing only device/dtype/exception terms with the query is no match; one whose key starts
        with `exclude` (the fixes of the issue itself) is never one."""
        k = self.eligible(day)
        if k == 0 or not query:
            return [], k
        idf_cache: dict[int, float] = {}

        def idf(tid: int) -> float:
            v = idf_cache.get(tid)
            if v is None:
                v = idf_cache[tid] = math.log((1 + k) / (1 + self._df(tid, k))) + 1.0
            return v

        top_idf = math.log(1 + k) + 1.0
        qv: dict[int, float] = {}
        q_sq = 0.0
        rows: set[int] = set()
        for term, w in query.items():
            tid = self.vocab.get(term)
            df = self._df(tid, k) if tid is not None else 0
            if tid is None or df == 0:
                q_sq += (w * top_idf) ** 2  # a term no eligible fix has weighs the highest IDF
                continue
            qv[tid] = w * idf(tid)
            q_sq += qv[tid] ** 2
            if term[:4] not in _SIGNATURE_PREFIXES:
                lo = self.post_ptr[tid]
                rows.update(self.post_rows[lo : lo + df])
        if not qv or q_sq == 0:
            return [], k
        if exclude:
            rows = {r for r in rows if not self.keys[r].startswith(exclude)}
        q_norm = math.sqrt(q_sq)
        scored: list[tuple[float, int]] = []
        terms_of, weights_of, ptr = self.row_terms, self.row_weights, self.row_ptr
        for row in rows:
            dot = norm = 0.0
            a, b = ptr[row], ptr[row + 1]
            for tid, w in zip(terms_of[a:b], weights_of[a:b], strict=True):
                x = w * (idf_cache.get(tid) or idf(tid))
                norm += x * x
                q = qv.get(tid)
                if q is not None:
                    dot += q * x
            sim = dot / (q_norm * math.sqrt(norm)) if norm else 0.0
            if sim >= min_similarity:
                scored.append((sim, row))
        scored.sort(key=lambda x: (-x[0], self.keys[x[1]]))
        names = {tid: term for term, tid in self.vocab.items() if tid in qv} if scored else {}
        out = []
        for sim, row in scored[:limit]:
            span = range(ptr[row], ptr[row + 1])
            shared = sorted(((qv[terms_of[j]] * weights_of[j] * idf(terms_of[j]), names[terms_of[j]]) for j in span
                             if terms_of[j] in qv), key=lambda x: (-x[0], x[1]))
            out.append((row, round(sim, 4), tuple(t for _, t in shared)))
        return out, k


_ARRAYS = {"row_ptr": "i", "row_terms": "i", "row_weights": "d", "post_ptr": "i", "post_rows": "i"}


def similar_fixes(
    query: Mapping[str, float], candidates: Sequence[tuple[FixRecord, Mapping[str, float]]], day: str | None = None,
    limit: int = MAX_NEIGHBOURS, min_similarity: float = MIN_SIMILARITY, exclude: str | None = None,
) -> tuple[list[SimilarFix], int]:
    """The fixes among `candidates` most like the query (dated before `day`), and how many were eligible."""
    keyed = {f"{rec.repo}\0{fix_key(rec)}": rec for rec, _ in candidates}
    index = FixIndex.build((f"{rec.repo}\0{fix_key(rec)}", rec.fixed_on, terms) for rec, terms in candidates)
    hits, k = index.similar(query, day, limit, min_similarity, exclude)
    return [_similar(keyed[index.keys[row]], sim, shared) for row, sim, shared in hits], k


def _similar(rec: FixRecord, sim: float, shared: Sequence[str]) -> SimilarFix:
    return SimilarFix(rec, sim, tuple(dict.fromkeys(_readable(t) for t in shared[:3])))


_GENERIC_NAMES = frozenset({"__init__.py", "utils.py", "common.py", "CMakeLists.txt", "BUILD", "BUILD.bazel", "setup.py",
                            "README.md", "main.py", "util.py", "helpers.py", "base.py", "config.py"})


def map_file(path: str, tree: set[str], by_name: Mapping[str, Sequence[str]] | None) -> str | None:
    """A fix's file on the tree at hand: itself, else the one file of that name (nearest folder
    wins among several), else None (dropped)."""
    if path in tree:
        return path
    if by_name is None:
        return None
    name = path.rsplit("/", 1)[-1]
    if name in _GENERIC_NAMES:
        return None
    top = path.split("/", 1)[0]
    same = [p for p in by_name.get(name, ()) if p.split("/", 1)[0] == top]  # within the same top folder
    if not same:
        return None
    folders = path.split("/")[:-1]

    def common(p: str) -> int:
        other = p.split("/")[:-1]
        n = 0
        for a, b in zip(folders, other, strict=False):
            if a != b:
                break
            n += 1
        return n

    return max(same, key=lambda p: (common(p), -len(p), p))


def compute_prior(
    issue: Issue,
    extraction: Extraction,
    candidates: Sequence[tuple[FixRecord, Mapping[str, float]]] | None,
    tree_files: Sequence[str],
    limit: int = MAX_NEIGHBOURS,
    *,
    index: FixIndex | None = None,
    load: Callable[[list[str]], Mapping[str, FixRecord]] | None = None,
) -> HistoryPrior:
    """The files that fixes similar to `issue`, dated before it was filed, changed, scored on the tree at hand.

    The fixes come as `candidates` (records with their terms), or as an `index` with `load`
    (index keys -> records, asked only for the few most similar). A file's score sums the
    similarities of the fixes that changed it, each divided by the square root of how many files
    that fix changed, scaled so the best is 1; its support is that sum unscaled (capped at 1), so a
    prior built of weakly similar fixes stays weak however it ranks its files. A file missing from the tree is mapped by its name
    (the nearest folder among several; not for generic names like __init__.py) or dropped, and the
    notes say which.
    """
    day = filed_day(issue.created_at)
    query = issue_terms(issue, extraction)
    own = f"{issue.repo}\0{issue.number}|"  # the issue's own fix never counts (an undated issue would see it)
    if index is None:
        neighbours, considered = similar_fixes(query, candidates or (), day, limit, exclude=own)
    else:
        hits, considered = index.similar(query, day, limit, exclude=own)
        records = load([index.keys[row] for row, _, _ in hits]) if (load is not None and hits) else {}
        neighbours = [_similar(records[index.keys[row]], sim, shared) for row, sim, shared in hits if index.keys[row] in records]
    if not neighbours:
        return HistoryPrior((), (), considered)
    tree = set(tree_files)
    by_name: dict[str, list[str]] | None = None
    raw: dict[str, float] = {}
    why: dict[str, list[SimilarFix]] = {}
    moved: dict[str, str] = {}
    dropped: list[str] = []
    for near in neighbours:
        changed = [f for f in near.record.files if is_source_file(f)]
        share = near.similarity / math.sqrt(max(1, len(changed)))
        for f in changed:
            target = f if f in tree else None
            if target is None:
                if by_name is None:
                    by_name = {}
                    for p in tree_files:
                        by_name.setdefault(p.rsplit("/", 1)[-1], []).append(p)
                target = map_file(f, tree, by_name)
                if target is None:
                    dropped.append(f)
                    continue
                moved.setdefault(target, f)
            raw[target] = raw.get(target, 0.0) + share
            if near not in why.setdefault(target, []):
                why[target].append(near)
    notes = []
    if moved:
        notes.append("mapped by name onto this tree: " + ", ".join(f"{old} -> {new}" for new, old in sorted(moved.items())))
    if dropped:
        notes.append("not in this tree (dropped): " + ", ".join(sorted(set(dropped))))
    top = max(raw.values(), default=0.0)
    files = tuple(sorted(
        (FilePrior(p, round(s / top, 4), tuple(why[p]), moved.get(p), round(min(1.0, s), 4)) for p, s in raw.items()),
        key=lambda fp: (-fp.score, fp.path),
    )) if top > 0 else ()
    return HistoryPrior(files, tuple(neighbours), considered, tuple(notes))


def relative_scores(scores: Sequence[float]) -> list[float]:
    """Each content score relative to the leader's, in (0, 1]: a similarity's share of the best one, or (a learned
    ranker's scores, any real number) the odds of the file against the leader, exp(score - best)."""
    import math

    best = max(scores, default=0.0)
    if scores and min(scores) >= 0:
        return [s / (best or 1.0) for s in scores]
    return [math.exp(max(-50.0, s - best)) for s in scores]


def blend(loc: Localization, prior: HistoryPrior, top: int, band: float = TIE_BAND) -> Localization:
    """Re-rank a localization with the prior as a tie-breaker among near-equal content evidence.

    The rule: a suspect's blended score is its content score relative to the leader's, plus
    `band` times its prior support (`FilePrior.support`: the similarities of the earlier fixes that
    changed it, each shared among the files that fix changed, capped at 1). So
    - the prior lifts only files the content ranking already holds (candidates), and a lifted file
      passes another only where their content scores differ by less than `band` x its support: a
      file can reach the top only from within `band` of the leader's content score;
    - a confident content leader (ahead of the runner-up by `band` of its score or more) is never
      displaced, and fixes of weak similarity (support 0.3) overturn only gaps three times smaller;
    - a file only the prior names has no content evidence for it; the content ranking read the tree
      and ranked others, so it enters after every content suspect (filling a short list), never above one.
    The reason: the history is a few hundred fixes matched on wording (similarities mostly 0.25-0.5),
    the content evidence reads the tree at hand; a few similar fixes are evidence about which of two
    equally plausible files, not against what the tree says. Scores stay on the content's scale; a
    suspect the prior supports says why (`changed by the fix of #N (similar: ...; 0.71)`).
    """
    if not prior.files or not loc.suspects:
        return replace(loc, suspects=loc.suspects[:top])
    relative = relative_scores([s.score for s in loc.suspects])
    best = max(s.score for s in loc.suspects)
    by_path = {fp.path: fp for fp in prior.files}
    rows: list[tuple[float, int, Suspect]] = []
    seen: set[str] = set()
    for i, s in enumerate(loc.suspects):
        fp = by_path.get(s.path)
        seen.add(s.path)
        if fp is None or fp.support <= 0:
            rows.append((relative[i], i, s))
            continue
        combined = relative[i] + band * fp.support
        rows.append((combined, i, replace(s, score=round(s.score + (combined - relative[i]) * (abs(best) or 1.0), 4),
                                          reason=f"{s.reason}; {fp.reason}")))
    rows.sort(key=lambda r: (-r[0], r[1]))
    suspects = [s for _, _, s in rows[:top]]
    floor = min((s.score for s in suspects), default=0.0)
    for fp in prior.files:  # prior-only files, after every content suspect, most supported first
        if len(suspects) >= top:
            break
        if fp.path not in seen and fp.support > 0:
            floor = min(floor, round((abs(best) or 1.0) * band * fp.support, 4))
            suspects.append(Suspect(fp.path, floor, None, fp.reason))
    lifted = sum(1 for s in suspects if "changed by " in s.reason)
    note = f"history: {len(prior.neighbours)} similar earlier fix(es) of {prior.considered}, {lifted} suspect(s) they changed"
    if prior.notes:
        note += "; " + "; ".join(prior.notes)
    return replace(loc, suspects=tuple(suspects), reason=f"{loc.reason} ({note})"[:2000])


# -- counting -------------------------------------------------------------------------------------


def directory_of(path: str, depth: int = 4) -> str:
    """The folder a file is counted under (its first `depth` folders)."""
    parts = path.split("/")[:-1]
    return "/".join(parts[:depth]) or "."


def history_stats(records: Iterable[FixRecord], top_dirs: int = 20) -> dict[str, Any]:
    """How many fixes per repository and kind, and how many changed files under each directory."""
    repos: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    dirs: Counter[str] = Counter()
    months: list[str] = []
    total = with_issue = 0
    for rec in records:
        total += 1
        with_issue += rec.issue is not None
        repos[rec.repo] += 1
        kinds[rec.kind] += 1
        months.append(rec.fixed_on[:7])
        dirs.update({directory_of(f) for f in rec.files})
    return {
        "fixes": total,
        "with_issue": with_issue,
        "first": min(months, default=None),
        "last": max(months, default=None),
        "repos": dict(repos.most_common()),
        "kinds": dict(kinds.most_common()),
        "directories": dict(dirs.most_common(top_dirs)),
    }


def guess_kind(issue: Issue, extraction: Extraction) -> str:
    """A crawled fix's kind from its issue's text: mme, gcrde, crash, numerics or other."""
    tb = extraction.traceback
    error = extraction.error_line or (f"{tb.exception}: {tb.message}" if tb else "")
    text = f"{issue.title}\n{issue.body}".lower()
    if re.search(r"has no attribute|no module named|cannot import name", error, re.I):
        return "mme"
    both = re.search(r"\bcpu\b", text) and re.search(r"\b(cuda|gpu|mps)\b", text)
    if both and re.search(r"differ|mismatch|inconsistent|wrong|incorrect|discrepan|not match|on cpu but", text):
        return "gcrde"
    if error or re.search(r"illegal memory|segfault|segmentation fault|crash|device-side assert|core dumped", text):
        return "crash"
    if re.search(r"\bnan\b|\binf\b|precision|overflow|underflow|numerical", text):
        return "numerics"
    return "other"


def category_of_kind(kind: str) -> Category:
    """The screening category a fix's kind corresponds to (for labelled sets)."""
    return Category.MME if kind == "mme" else Category.GCRDE if kind == "gcrde" else Category.OTHER
