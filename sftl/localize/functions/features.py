"""(report, function) features: what a report's evidence says about each function of a suspect file — traceback
frames and their lines, the names the report uses, the messages it quotes, BM25 of the function's words."""

from __future__ import annotations

import functools
import hashlib
import math
import os
import pickle
import re
import zlib
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from sftl.localize.candidates.corpus import message_shingles
from sftl.localize.candidates.report import ReportEvidence, frame_locations, snake_case
from sftl.localize.candidates.tokens import IDENTIFIER, MAX_TOKEN, STOP_WORDS, WORD_PART, words
from sftl.localize.functions.spans import SPANS_VERSION, Span, spans_of
from sftl.model import Extraction, Issue

FEATURES = (
    "frame_line", "frame_depth", "frame_name_here", "frame_name_any", "name_used", "name_dotted", "name_in_title",
    "class_named", "kernel_named", "name_parts_share", "message_overlap", "message_any",
    "bm25_all", "bm25_title", "bm25_code", "bm25_error", "bm25_all_rank", "bm25_title_rank", "bm25_error_rank",
    "bm25_names", "uses_names", "quotes_code", "callee_of_evidence", "caller_of_evidence", "sibling_of_evidence",
    "export_named", "reach_distance", "bm25_neighbour", "size_log", "size_share", "position", "functions_log",
    "private", "dunder", "method", "kernel", "registration", "nesting", "python",
)
K1, B = 1.2, 0.75
OP_SUFFIX = re.compile(r"(Op|Kernel|Functor|Impl)$")


@dataclass(frozen=True)
class FrameAt:
    """A traceback frame inside the framework: its repository path, line, function and depth (1: innermost)."""

    path: str
    line: int | None
    function: str
    depth: int


@dataclass(frozen=True)
class FunctionEvidence:
    """A report read for ranking the functions of a file: its file-search evidence and its frames with lines."""

    report: ReportEvidence
    frames: tuple[FrameAt, ...]
    text_lower: str  # the report's text (title and body), lower-cased: for quoted messages
    quoted_lines: frozenset[str] = frozenset()  # its lines long enough to be code it copied from a source file


@dataclass(frozen=True)
class FunctionRow:
    """One function of a file with its features and the evidence behind them, in words."""

    span: Span
    features: dict[str, float]
    evidence: dict[str, str]

    def vector(self) -> list[float]:
        return [self.features.get(name, 0.0) for name in FEATURES]


def read_frames(issue: Issue, extraction: Extraction) -> tuple[FrameAt, ...]:
    """The report's framework frames with their lines, innermost (the raising one) first."""
    found = frame_locations(f"{issue.title}\n{issue.body or ''}", extraction)
    unique = list(dict.fromkeys(found))
    return tuple(FrameAt(p, line, fn, i) for i, (p, line, fn) in enumerate(unique, 1))


def function_evidence(report: ReportEvidence, issue: Issue, extraction: Extraction) -> FunctionEvidence:
    text = f"{issue.title}\n{issue.body or ''}"
    quoted = frozenset(n for n in (normal_line(line) for line in text.splitlines()) if len(n) >= QUOTED_LINE)
    return FunctionEvidence(report, read_frames(issue, extraction), text.lower(), quoted)


QUOTED_LINE = 20  # characters: a shorter line (`return x`) is in too many functions to say which one was copied


def normal_line(line: str) -> str:
    """A line with its indentation and inner runs of spaces gone: a quote of source survives a paste."""
    return " ".join(line.split())


@dataclass(frozen=True)
class FileFunctions:
    """A file's functions with what scoring reads of each, whatever the report: word bags, message fingerprints,
    the names its decorators export it under and the calls between them (built once per text, kept on disk)."""

    spans: tuple[Span, ...]
    lengths: tuple[int, ...]  # per function, how many words it holds
    postings: dict[str, list[tuple[int, int]]]  # word -> (function, count): the functions' word bags inverted
    shingles: tuple[frozenset[int], ...]
    literals: tuple[tuple[str, ...], ...]
    lines: int
    line_digests: frozenset[int]  # CRC-32 of the file's normalized lines long enough to be quoted
    decorators: tuple[frozenset[str], ...]  # per function, the words of its decorators (`@tf_export("where")`)
    calls: tuple[frozenset[int], ...]  # per function, the functions of the file it calls
    callers: tuple[frozenset[int], ...]  # per function, those calling it

    def holders(self, word: str) -> frozenset[int]:
        """The functions whose words hold `word`."""
        return frozenset(i for i, _ in self.postings.get(word, ()))


# raised whenever what `FileFunctions` keeps changes, so readings kept on disk by an older sftl are not read
READINGS_VERSION = 3


def file_functions(path: str, text: str, cache_dir: Path | None = None) -> FileFunctions:
    """What scoring reads of a file's functions, built once per text in a process; with `cache_dir`, kept there by
    the text's hash, so the next `sftl locate` reading the file neither parses nor tokenizes it again."""
    digest = hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=16).hexdigest()
    return _file_functions(digest, path, text, cache_dir)


@functools.lru_cache(maxsize=64)
def _file_functions(digest: str, path: str, text: str, cache_dir: Path | None) -> FileFunctions:
    where = (cache_dir / "functions" / f"readings-v{SPANS_VERSION}.{READINGS_VERSION}" / digest[:2] / f"{digest}.pickle"
             if cache_dir is not None else None)
    if where is not None:
        kept = read_reading(where, text)
        if kept is not None:
            return kept
    spans = spans_of(path, text)
    bags = tuple(span_bags(spans, text))
    literals = tuple(tuple(x for x in s.literals() if len(x.split()) >= 2) for s in spans)
    shingles = tuple(frozenset(message_shingles("\n".join(lits))) for lits in literals)
    postings = postings_of(bags)
    calls = call_graph(spans, postings)
    called_by: list[list[int]] = [[] for _ in spans]
    for i, out in enumerate(calls):
        for j in out:
            called_by[j].append(i)
    callers = tuple(frozenset(c) for c in called_by)
    # a normalized line is no longer than the line: the short ones are never read
    long_lines = (normal_line(line) for line in text.splitlines() if len(line) >= QUOTED_LINE)
    digests = frozenset(zlib.crc32(n.encode()) for n in long_lines if len(n) >= QUOTED_LINE)
    reading = FileFunctions(spans, tuple(sum(b.values()) for b in bags), postings, shingles, literals,
                            text.count("\n") + 1, digests, tuple(decorator_words(s) for s in spans),
                            calls, callers)
    if where is not None:
        keep_reading(where, reading)
    return reading


def forget_readings() -> None:
    """Drop the readings this process holds in memory (those kept on disk stay): the next read is a new process's."""
    _file_functions.cache_clear()


def keep_reading(where: Path, reading: FileFunctions) -> None:
    """The reading on disk, the spans without their bodies (the text holds them); an unwritable cache only costs
    the next run the reading."""
    bare = replace(reading, spans=tuple(replace(s, text="") for s in reading.spans))
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        tmp = where.with_name(f"{where.name}.{os.getpid()}.tmp")
        tmp.write_bytes(pickle.dumps(bare, protocol=pickle.HIGHEST_PROTOCOL))
        tmp.replace(where)
    except OSError:
        pass


def read_reading(where: Path, text: str) -> FileFunctions | None:
    """A reading kept for this text, its spans' bodies cut from the text again; None when none is kept or it does
    not read (sftl's own cache: written by `keep_reading` only)."""
    try:
        kept = pickle.loads(where.read_bytes())
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
        return None
    if not isinstance(kept, FileFunctions):
        return None
    lines = text.splitlines()
    return replace(kept, spans=tuple(replace(s, text="\n".join(lines[s.start - 1:s.end])) for s in kept.spans))


def span_bags(spans: tuple[Span, ...], text: str) -> list[Counter[str]]:
    """Each span's words (its name and its lines'): the identifiers of its lines counted, then each split into words
    once (an identifier's words are the same wherever it stands)."""
    lines = text.splitlines()
    out = []
    for s in spans:
        bag: Counter[str] = Counter(w for ident in IDENTIFIER.findall(s.name) for w in ident_words(ident))
        for ident, n in Counter(IDENTIFIER.findall("\n".join(lines[s.start - 1:s.end]))).items():
            for w in ident_words(ident):
                bag[w] += n
        out.append(bag)
    return out


@functools.lru_cache(maxsize=1 << 16)
def ident_words(ident: str) -> tuple[str, ...]:
    """One identifier's words as `tokens.words` counts them (whole, and its parts when compound)."""
    low = ident.lower()
    if len(low) > MAX_TOKEN:
        return ()
    out = [low] if len(low) > 1 and low not in STOP_WORDS else []
    if "_" in ident or not (ident.islower() or ident.isupper()) or any(c.isdigit() for c in ident):
        for part in WORD_PART.findall(ident):
            part = part.lower()
            if len(part) > 1 and part != low and part not in STOP_WORDS:
                out.append(part)
    return tuple(out)


def bm25(lengths: tuple[int, ...], postings: dict[str, list[tuple[int, int]]], query: list[str]) -> list[float]:
    """BM25 of each function for the query's words (idf over the file's functions), from the functions' lengths in
    words and the postings (term -> (function, count))."""
    if not lengths or not query:
        return [0.0] * len(lengths)
    n = len(lengths)
    avg = (sum(lengths) / n) or 1.0
    norm = [K1 * (1 - B + B * length / avg) for length in lengths]
    out = [0.0] * n
    for term, qn in Counter(query).items():
        hits = postings.get(term)
        if not hits:
            continue
        idf = math.log(1 + (n - len(hits) + 0.5) / (len(hits) + 0.5))
        for i, tf in hits:
            out[i] += qn * idf * tf * (K1 + 1) / (tf + norm[i])
    return out


def postings_of(bags: tuple[Counter[str], ...]) -> dict[str, list[tuple[int, int]]]:
    out: dict[str, list[tuple[int, int]]] = {}
    for i, bag in enumerate(bags):
        for term, tf in bag.items():
            out.setdefault(term, []).append((i, tf))
    return out


@dataclass(frozen=True)
class ReportNames:
    """The names a report uses, in the forms a function's name is compared with (built once per file)."""

    leaves: frozenset[str]  # as written
    lower: frozenset[str]  # lower-cased and snake_case
    called: frozenset[str]  # the last part of each dotted call (`torch.nn.functional.interpolate`)
    title: frozenset[str]  # the title's words
    words: frozenset[str]  # every word of the report
    used: frozenset[str]  # names long enough to be meant, lower-cased: for a body that uses them

    @classmethod
    def of(cls, rep: ReportEvidence) -> ReportNames:
        called = frozenset(n.rsplit(".", 1)[-1] for n in rep.names)
        return cls(frozenset(rep.leaf_names), frozenset({x.lower() for x in rep.leaf_names} | rep.snake_names),
                   called, frozenset(rep.title_words),
                   frozenset((*rep.title_words, *rep.text_words, *rep.code_words, *rep.error_words)),
                   frozenset({n.lower() for n in rep.leaf_names if len(n) > 3} | {n.lower() for n in called}))

    def names(self, name: str) -> bool:
        return name in self.leaves or name.lower() in self.lower or snake_case(name) in self.lower


def gather_functions(evidence: FunctionEvidence, path: str, text: str,
                     cache_dir: Path | None = None) -> list[FunctionRow]:
    """Every function of the file with its features (empty when the file has none or does not parse)."""
    ff = file_functions(path, text, cache_dir)
    if not ff.spans:
        return []
    names = ReportNames.of(evidence.report)
    lexical = lexical_scores(evidence.report, ff)
    here = [f for f in evidence.frames if f.path == path or path.endswith("/" + f.path)]
    # each function name at its innermost frame (frames come innermost first; the first of a name is kept)
    frame_names = {f.function.rsplit(".", 1)[-1]: f.depth for f in reversed(evidence.frames) if f.function}
    pasted = pasted_lines(text, evidence.quoted_lines, ff.line_digests)
    holders = {w: ff.holders(w) for w in names.used}
    longest = max(s.end - s.start + 1 for s in ff.spans)
    python = float(path.endswith((".py", ".pyi")))
    rows = []
    for i, span in enumerate(ff.spans):
        feats: dict[str, float] = {}
        why: dict[str, str] = {}
        frame_features(span, here, frame_names, feats, why)
        name_features(span, names, feats, why)
        export_features(span, ff.decorators[i], names, feats, why)
        message_features(i, ff, evidence, feats, why)
        for key, (value, reason) in lexical[i].items():
            feats[key] = value
            if reason:
                why[key] = reason
        if names.used:
            feats["uses_names"] = sum(i in held for held in holders.values()) / len(names.used)
        copied = pasted[min(span.end, len(pasted) - 1)] - pasted[min(span.start - 1, len(pasted) - 1)]
        if copied:
            feats["quotes_code"] = math.log1p(copied)
            why["quotes_code"] = f"the report quotes {copied} of its lines"
        leaf = span.leaf
        feats.update(size_log=math.log1p(span.end - span.start + 1), size_share=(span.end - span.start + 1) / longest,
                     position=span.start / ff.lines, functions_log=math.log1p(len(ff.spans)),
                     private=float(leaf.startswith("_") and not leaf.startswith("__")),
                     dunder=float(is_dunder(leaf)), method=float(span.kind == "method"),
                     kernel=float(span.kind == "kernel"), registration=float(span.kind == "registration"),
                     nesting=float(len(span.parts) - 1), python=python)
        rows.append(FunctionRow(span, feats, why))
    return with_neighbours(rows, ff)


def frame_features(span: Span, here: list[FrameAt], frame_names: dict[str, int], feats: dict[str, float],
                   why: dict[str, str]) -> None:
    """A frame of this file whose line the function holds, one that runs it by name, any frame of its name."""
    leaf = span.leaf
    inside = [f for f in here if f.line is not None and span.start <= f.line <= span.end]
    if inside:
        f = min(inside, key=lambda f: f.depth)
        feats["frame_line"] = 1.0
        feats["frame_depth"] = 1.0 / f.depth
        why["frame_line"] = f"frame {f.depth} of the traceback (line {f.line})"
    # a frame of this file running a function of this name, unless its line puts it in another one of that name
    named_here = [f for f in here if f.function and f.function.rsplit(".", 1)[-1] == leaf
                  and (f.line is None or span.start <= f.line <= span.end)]
    if named_here:
        feats["frame_name_here"] = 1.0
        why["frame_name_here"] = f"frame {named_here[0].depth} of the traceback runs `{leaf}` in this file"
    if leaf in frame_names and not is_dunder(leaf):  # every class has an __init__
        feats["frame_name_any"] = 1.0 / frame_names[leaf]
        why["frame_name_any"] = f"frame {frame_names[leaf]} of the traceback runs a function named `{leaf}` (in some file)"


def name_features(span: Span, names: ReportNames, feats: dict[str, float], why: dict[str, str]) -> None:
    """The function's name, its class's, the op it stands for, among the names the report uses."""
    leaf = span.leaf
    if names.names(leaf):
        feats["name_used"] = 1.0
        why["name_used"] = f"defines `{leaf}`, which the report names"
    if leaf in names.called:
        feats["name_dotted"] = 1.0
        why["name_dotted"] = f"defines `{leaf}`, which the report calls"
    if leaf.lower() in names.title or snake_case(leaf) in names.title:
        feats["name_in_title"] = 1.0
        why["name_in_title"] = f"`{leaf}` is in the title"
    owners = [p for p in span.parts[:-1] if p in names.leaves or p.lower() in names.lower]
    if owners:
        feats["class_named"] = 1.0
        where = "a member of" if owners[-1][:1].isupper() else "inside"  # a class's, or a nested def's owner
        why["class_named"] = f"{where} `{owners[-1]}`, which the report names"
    kernel = _kernel_name(span)
    if kernel and names.names(kernel):
        feats["kernel_named"] = 1.0
        what = "registers" if span.kind == "registration" else "the kernel of"
        why["kernel_named"] = f"{what} `{kernel}`, which the report names"
    parts = [p.lower() for p in WORD_PART.findall(leaf) if len(p) > 1]
    if parts:
        feats["name_parts_share"] = sum(p in names.words for p in parts) / len(parts)


def message_features(i: int, ff: FileFunctions, evidence: FunctionEvidence, feats: dict[str, float],
                     why: dict[str, str]) -> None:
    """A message the report quotes among the function's string literals (3-word shingles, or a literal whole)."""
    shingles = evidence.report.message_shingles
    if shingles and ff.shingles[i]:
        shared = len(ff.shingles[i] & shingles)
        if shared:
            feats["message_overlap"] = shared / len(shingles)
            quoted = max((x for x in ff.literals[i] if message_shingles(x) & shingles), key=len,
                         default=ff.literals[i][0])
            why["message_overlap"] = f"raises {quote(quoted)}"
    whole = next((x for x in ff.literals[i] if len(x) >= 12 and _core(x) and _core(x) in evidence.text_lower), None)
    if whole:
        feats["message_any"] = 1.0
        why.setdefault("message_overlap", f"raises {quote(whole)}")


def lexical_scores(rep: ReportEvidence, ff: FileFunctions) -> list[dict[str, tuple[float, str]]]:
    """Per function: BM25 for the whole report, its title, code, errors and names (each over the file's best),
    and the ranks of three of them, with the reason the whole report's rank gives."""
    queries = {
        "all": [*rep.title_words, *rep.text_words, *rep.code_words, *rep.error_words],
        "title": list(rep.title_words), "code": list(rep.code_words), "error": list(rep.error_words),
        "names": [w for n in (*rep.leaf_names, *rep.names) for w in words(n.replace(".", " "))],
    }
    lexical = {name: bm25(ff.lengths, ff.postings, q) for name, q in queries.items()}
    best = {name: max(v) or 1.0 for name, v in lexical.items()}
    rank = {name: rank_of(lexical[name]) for name in ("all", "title", "error")}
    out: list[dict[str, tuple[float, str]]] = []
    for i in range(len(ff.spans)):
        got: dict[str, tuple[float, str]] = {}
        for name in queries:
            if lexical[name][i] > 0:
                got[f"bm25_{name}"] = (lexical[name][i] / best[name], "")
        for name in rank:
            if lexical[name][i] > 0:
                got[f"bm25_{name}_rank"] = (1.0 / rank[name][i], "")
        if lexical["all"][i] > 0:
            reason = f"BM25 rank {rank['all'][i]} of {len(ff.spans)} functions for the report's words"
            got["bm25_all_rank"] = (got["bm25_all_rank"][0], reason)
        out.append(got)
    return out


STRUCTURAL = ("frame_line", "frame_name_here", "name_used", "name_dotted", "message_overlap", "message_any",
              "kernel_named", "export_named")
REACH_HOPS = 3  # calls followed from a function the report points at: further, most of a file is reached


def with_neighbours(rows: list[FunctionRow], ff: FileFunctions) -> list[FunctionRow]:
    """Evidence one call away: a function that a function with structural evidence calls (the helper a named
    public function delegates to), one that calls such a function, and a method of the same class; the calls
    from those functions followed up to `REACH_HOPS` deep; the best lexical score among a function's callers and
    callees."""
    lexical = [r.features.get("bm25_all", 0.0) for r in rows]
    for j, r in enumerate(rows):
        near = [lexical[k] for k in ff.calls[j] | ff.callers[j]]
        if near and max(near) > 0:
            r.features["bm25_neighbour"] = max(near)
    named = [i for i, r in enumerate(rows) if any(r.features.get(f) for f in STRUCTURAL)]
    if not named:
        return rows
    for j, (hops, origin) in reached(named, ff.calls).items():
        rows[j].features["reach_distance"] = 1.0 / (1 + hops)
        if hops > 1:  # one call away is said by callee_of_evidence
            rows[j].evidence["reach_distance"] = f"{hops} calls from `{rows[origin].span.leaf}`"
    leaves = {i: rows[i].span.leaf for i in named}
    named_holders = {i: ff.holders(leaves[i].lower()) for i in named}
    owners = {rows[i].span.parts[:-1] for i in named if len(rows[i].span.parts) > 1}
    for j, r in enumerate(rows):
        leaf = r.span.leaf.lower()
        held = ff.holders(leaf)
        callers = [i for i in named if i != j and i in held]
        if callers:
            r.features["callee_of_evidence"] = 1.0
            if names_a_call(leaf):  # a dunder's or a short name's word is no call
                r.evidence["callee_of_evidence"] = f"called by `{leaves[callers[0]]}`"
        if any(i != j and j in named_holders[i] for i in named):
            r.features["caller_of_evidence"] = 1.0
        if len(r.span.parts) > 1 and r.span.parts[:-1] in owners and j not in named:
            r.features["sibling_of_evidence"] = 1.0
    return rows


def pasted_lines(text: str, quoted: frozenset[str], digests: frozenset[int]) -> list[int]:
    """Prefix sums over the file's lines of those the report quotes (normalized); all zero, without reading the
    lines one by one, when no quoted line's digest is among the file's lines' (`digests`)."""
    if not any(zlib.crc32(q.encode()) in digests for q in quoted):
        return [0] * (text.count("\n") + 2)
    out = [0]
    for line in text.splitlines():
        n = normal_line(line)
        out.append(out[-1] + int(len(n) >= QUOTED_LINE and n in quoted))
    return out


def call_graph(spans: tuple[Span, ...], postings: dict[str, list[tuple[int, int]]]) -> tuple[frozenset[int], ...]:
    """Per function, the functions of the same file it calls: those whose name its words hold (`names_a_call`),
    found through the postings."""
    calls: list[set[int]] = [set() for _ in spans]
    for j, span in enumerate(spans):
        leaf = span.leaf.lower()
        if names_a_call(leaf):
            for i, _ in postings.get(leaf, ()):
                if i != j:
                    calls[i].add(j)
    return tuple(frozenset(c) for c in calls)


def names_a_call(leaf: str) -> bool:
    """Whether a function's name found among another's words says it is called there: a name of four letters or
    more, dunders apart (`run` or `__init__` would join everything)."""
    return len(leaf) >= 4 and not leaf.startswith("__")


def is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def reached(seeds: list[int], calls: tuple[frozenset[int], ...], hops: int = REACH_HOPS) -> dict[int, tuple[int, int]]:
    """Each function reached from the seeds by calls: the fewest calls it takes (a seed: 0) and the seed."""
    seen = {i: (0, i) for i in seeds}
    frontier = list(seeds)
    for depth in range(1, hops + 1):
        nxt: list[int] = []
        for i in frontier:
            for j in sorted(calls[i]):
                if j not in seen:
                    seen[j] = (depth, seen[i][1])
                    nxt.append(j)
        frontier = nxt
    return seen


def decorator_words(span: Span) -> frozenset[str]:
    """The names a Python function's decorators give it, lower-cased: `@tf_export("math.add", v1=[...])` -> math,
    add; `@register_meta([aten.zero.default])` -> aten, zero, default. The name a public API exports it under."""
    if not span.text.lstrip().startswith("@"):  # undecorated, or not Python
        return frozenset()
    head: list[str] = []
    for line in span.text.splitlines():
        if DEF_LINE.match(line):
            break
        head.append(line)
    text = "\n".join(head)
    return frozenset(w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text) if len(w) > 2) - DECORATOR_WORDS


DEF_LINE = re.compile(r"^\s*(?:async\s+)?def\s")
# words of decorators that name no API: the decorators' own names and the namespaces they take
DECORATOR_WORDS = frozenset({"tf_export", "keras_export", "estimator_export", "export", "register_meta",
                             "register_decomposition", "register_lowering", "aten", "prims", "default", "out", "self",
                             "deprecated", "staticmethod", "classmethod", "property", "setter", "functools", "wraps",
                             "doc_controls", "dispatch", "add_dispatch_support", "compat"})


def export_features(span: Span, decorators: frozenset[str], names: ReportNames, feats: dict[str, float],
                    why: dict[str, str]) -> None:
    """A decorator that exports or registers the function under a name the report uses (`@tf_export("where")`
    on `where_v2`, `@register_meta(aten.zero)` on `meta_zero`)."""
    shared = sorted(w for w in decorators if w in names.lower or w in names.used)
    if shared:
        feats["export_named"] = 1.0
        why["export_named"] = f"exported or registered as `{shared[0]}`, which the report names"


def rank_of(values: list[float]) -> list[int]:
    """Each value's 1-based rank, highest first (ties by position)."""
    order = sorted(range(len(values)), key=lambda i: -values[i])
    out = [0] * len(values)
    for r, i in enumerate(order, 1):
        out[i] = r
    return out


def _kernel_name(span: Span) -> str:
    """The op a kernel or registration stands for: `REGISTER_OP(Histc)` -> Histc, `HistcOp::Compute` -> Histc,
    `TORCH_IMPL_FUNC(histc_out)` -> histc."""
    if span.kind == "registration" or span.name.startswith("TORCH_IMPL_FUNC("):
        return re.sub(r"_out$", "", span.leaf)
    if span.kind == "kernel" and len(span.parts) >= 2:
        return OP_SUFFIX.sub("", span.parts[-2])
    return ""


def _core(message: str) -> str:
    """A literal's fixed words (format placeholders cut off), lower-cased: what a report's quote keeps of it."""
    head = re.split(r"%[sdif]|\{[^}]*\}|\\n", message)[0].strip().lower()
    return head if len(head) >= 12 else ""


def _short(text: str) -> str:
    """A message as a reason quotes it: cut at 60 characters."""
    return text if len(text) <= 60 else text[:57] + "..."


def quote(text: str) -> str:
    short = _short(text)
    return f'"{short}"' if "'" in short else f"'{short}'"
