"""A release's source files as a searchable corpus: BM25 over contents and paths, exported names, message literals.

What is read of each file is kept per source layer (a registered tree, a wheel) on disk under
`<cache_dir>/candidates/`, so the C++ tree that stands under twenty TensorFlow wheels is read once; the
corpus of a layered source is put together from its layers' records (the first layer that holds a path
wins, as `LayeredSource.read_text` reads it) and kept in memory for the life of the process.

Only source files are documents (`is_source_path`): never tests, test data, docs or build files.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sftl.codegraph.graph import load_kept, save_kept
from sftl.localize.candidates.tokens import path_words, words

if TYPE_CHECKING:
    import numpy as np

    from sftl.sources import SourceProvider

FORMAT = 2  # bump when what a layer record holds changes
CORPUS_FORMAT = 5  # bump when what a composed corpus keeps on disk changes
SOURCE_SUFFIXES = (".py", ".cc", ".h", ".cpp", ".cu", ".cuh", ".c", ".hpp", ".cxx", ".hxx", ".pyx", ".mm")
FRAMEWORK_ROOTS = {
    "pytorch": ("torch/", "aten/", "c10/", "torchgen/", "functorch/", "caffe2/"),
    "tensorflow": ("tensorflow/",),
}
NOT_SOURCE_DIRS = frozenset({
    "test", "tests", "testing", "testdata", "test_data", "testlib", "benchmarks", "benchmark", "third_party",
    "examples", "example", "docs", "doc", "g3doc", "samples", "tutorials", "__pycache__", "ci_build",
    "kernel_tests", "integration_test", "integration_tests", "test_util", "testutil",
    "include",  # a wheel's copies of the C++ headers (torch/include/ATen/...): the repository's own are the sources
})
# counts past this add nothing BM25's saturation would notice; capping keeps big generated files small
MAX_COUNT = 8
MAX_CHARS = 200_000
PATH_WEIGHT = 3  # a path word counts as this many occurrences: the path is the file's title
SHINGLE = 3  # words per message shingle
_MEMO: dict[str, CorpusIndex] = {}
_MEMO_MAX = 3

STRING_LITERAL = re.compile(r'"((?:[^"\\\n]|\\.){10,400})"|\'((?:[^\'\\\n]|\\.){10,400})\'')
EXPORT_CALL = re.compile(r"\b(?:tf|keras|estimator)_export\(([^)]{1,600})\)", re.S)
QUOTED = re.compile(r"['\"]([\w.]+)['\"]")
PY_DEFINITION = re.compile(r"^(?:class|def)\s+([A-Za-z_]\w*)", re.M)
CXX_OP = re.compile(r'(?:REGISTER_OP|Name)\(\s*"([A-Za-z_]\w*)"')
MESSAGE_WORD = re.compile(r"[a-z][a-z0-9_]+")


def is_source_path(path: str, framework: str) -> bool:
    """A file of the corpus: framework code (Python or C++/CUDA) under the framework's roots, never tests, test
    data, docs or build files."""
    if not path.startswith(FRAMEWORK_ROOTS.get(framework, ("torch/", "tensorflow/"))):
        return False
    return may_be_suspect(path)


def may_be_suspect(path: str) -> bool:
    """Code a fix changes (Python, C++/CUDA, the op registry's yaml), never a test, test data, docs or a build file."""
    name = path.rsplit("/", 1)[-1]
    if not name.endswith((*SOURCE_SUFFIXES, ".yaml")):
        return False
    parts = path.split("/")[:-1]
    if any(p in NOT_SOURCE_DIRS for p in parts):
        return False
    stem = name.split(".", 1)[0]
    return not (stem.startswith("test_") or stem.endswith(("_test", "_tests", "_benchmark", "_test_base", "_testlib"))
                or stem == "conftest")


def message_shingles(text: str) -> set[int]:
    """Stable hashes of the 3-word runs of a text's lower-cased words (a message's fingerprint)."""
    ws = MESSAGE_WORD.findall(text.lower())
    return {zlib.crc32(" ".join(ws[i:i + SHINGLE]).encode()) for i in range(len(ws) - SHINGLE + 1)}


@dataclass(frozen=True)
class FileRecord:
    """What the corpus keeps of one file."""

    bag: dict[str, int]
    shingles: frozenset[int]
    exports: tuple[str, ...]  # public API names its tf_export/keras_export decorators give
    defines: tuple[str, ...]  # top-level classes and functions (Python), ops and kernels registered (C++)


def read_record(path: str, text: str) -> FileRecord:
    # the words of a file's first MAX_CHARS say what it is about; the rest of a giant file only costs time
    bag = {w: min(n, MAX_COUNT) for w, n in words(text[:MAX_CHARS]).items()}
    for w in path_words(path):
        bag[w] = bag.get(w, 0) + PATH_WEIGHT
    literals = " \n ".join(m.group(1) or m.group(2) for m in STRING_LITERAL.finditer(text))
    exports: list[str] = []
    if path.endswith(".py"):
        for call in EXPORT_CALL.finditer(text):
            exports.extend(QUOTED.findall(call.group(1)))
        defines = PY_DEFINITION.findall(text)
    else:
        defines = CXX_OP.findall(text)
    return FileRecord(bag, frozenset(message_shingles(literals)), tuple(dict.fromkeys(exports)),
                      tuple(dict.fromkeys(defines)))


def _layers(source: SourceProvider) -> list[SourceProvider]:
    providers = getattr(source, "providers", None)
    return list(providers) if providers else [source]


def _layer_key(layer: SourceProvider, paths: Sequence[str]) -> str:
    h = hashlib.sha1(f"{FORMAT}\0{layer.framework}\0{layer.description}\0{len(paths)}".encode())
    for p in paths:
        h.update(p.encode())
    return h.hexdigest()[:20]


def _layer_records(layer: SourceProvider, framework: str, cache: Path | None) -> dict[str, FileRecord]:
    paths = sorted(p for p in layer.list_files() if is_source_path(p, framework))
    where = cache / f"layer-{_layer_key(layer, paths)}.pkl" if cache is not None else None
    loaded = load_kept(where)
    if isinstance(loaded, dict):
        return loaded
    records: dict[str, FileRecord] = {}
    for path in paths:
        text = layer.read_text(path)
        if text is not None:
            records[path] = read_record(path, text)
    save_kept(where, records)
    return records


class SortedWords:
    """A kept index's words: sorted, with each one's id, looked up by bisection (no dict of 200,000 words to build)."""

    def __init__(self, words: np.ndarray, ids: np.ndarray) -> None:
        self.words, self.ids = words, ids

    def get(self, word: str) -> int | None:
        import numpy as np

        at = int(np.searchsorted(self.words, word))
        return int(self.ids[at]) if at < len(self.words) and self.words[at] == word else None

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and self.get(word) is not None

    def __getitem__(self, word: str) -> int:
        found = self.get(word)
        if found is None:
            raise KeyError(word)
        return found

    def __len__(self) -> int:
        return len(self.words)

    def items(self) -> list[tuple[str, int]]:
        return [(str(w), int(i)) for w, i in zip(self.words, self.ids, strict=True)]


@dataclass
class CorpusIndex:
    """The documents of one source and what can be looked up in them."""

    framework: str
    paths: list[str]
    sizes: list[float]  # words per document (capped counts, path words included)
    # bm25s's index: the BM25 weight of each (word, document), word-major (CSC: a word's documents and weights
    # between two offsets); a query's score is the sum of its words' weights, as bm25s sums them
    weights: dict[str, np.ndarray]
    vocabulary: dict[str, int] | SortedWords
    exports: dict[str, list[int]] = field(default_factory=dict)  # exported name -> documents
    defines: dict[str, list[int]] = field(default_factory=dict)  # lower-cased defined name -> documents
    # message shingles as arrays (sorted keys, each key's documents between two offsets): loads in milliseconds
    shingle_keys: np.ndarray | None = None
    shingle_offsets: np.ndarray | None = None
    shingle_docs: np.ndarray | None = None
    # folders that hold a file of the report's own release (its wheel's Python files and headers); None: every
    # file is of that release (no other release's tree stands under it)
    release_dirs: frozenset[str] | None = None

    def scores(self, query: Iterable[str]) -> np.ndarray:
        """BM25 of every document for a query's words (each word once)."""
        import numpy as np

        ids = [i for w in dict.fromkeys(query) if (i := self.vocabulary.get(w)) is not None]
        total = np.zeros(len(self.paths), dtype=np.float32)
        if not ids:
            return total
        data, indices, indptr = self.weights["data"], self.weights["indices"], self.weights["indptr"]
        docs = np.concatenate([indices[indptr[i]:indptr[i + 1]] for i in ids])
        values = np.concatenate([data[indptr[i]:indptr[i + 1]] for i in ids])
        total += np.bincount(docs, weights=values, minlength=len(self.paths)).astype(np.float32)
        return total

    def with_shingle(self, shingle: int) -> list[int]:
        """The documents whose string literals hold this 3-word run."""
        import numpy as np

        if self.shingle_keys is None or self.shingle_offsets is None or self.shingle_docs is None:
            return []
        at = int(np.searchsorted(self.shingle_keys, shingle))
        if at >= len(self.shingle_keys) or int(self.shingle_keys[at]) != shingle:
            return []
        return [int(d) for d in self.shingle_docs[self.shingle_offsets[at]:self.shingle_offsets[at + 1]]]

    def holds(self, doc: int, word: str) -> bool:
        """Whether a document has a word (read off the index: the scores of a word's documents)."""
        import numpy as np

        i = self.vocabulary.get(word)
        if i is None:
            return False
        indptr, indices = self.weights["indptr"], self.weights["indices"]
        return bool(np.any(indices[indptr[i]:indptr[i + 1]] == doc))

    def save(self, folder: Path) -> None:
        """Write the index (BM25 matrices as .npy for memory-mapping, the rest pickled), replacing one there."""
        import shutil

        partial = folder.with_name(f"{folder.name}.partial{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        import numpy as np

        for name, array in self.weights.items():
            np.save(partial / f"bm25-{name}.npy", array)
        ordered = sorted(self.vocabulary.items())
        # the big tables as arrays, which load far faster than pickled dicts of that size
        np.save(partial / "words.npy", np.asarray([w for w, _ in ordered], dtype=str))
        np.save(partial / "word_ids.npy", np.asarray([i for _, i in ordered], dtype=np.int64))
        (partial / "paths.txt").write_text("\n".join(self.paths), encoding="utf-8")
        empty = np.zeros(0, dtype=np.int64)
        np.savez(partial / "shingles.npz", keys=self.shingle_keys if self.shingle_keys is not None else empty,
                 offsets=self.shingle_offsets if self.shingle_offsets is not None else np.zeros(1, dtype=np.int64),
                 docs=self.shingle_docs if self.shingle_docs is not None else empty,
                 sizes=np.asarray(self.sizes, dtype=np.float32))
        meta = {"framework": self.framework, "exports": self.exports, "defines": self.defines,
                "release_dirs": self.release_dirs}
        with (partial / "corpus.pkl").open("wb") as fh:
            pickle.dump(meta, fh, protocol=pickle.HIGHEST_PROTOCOL)
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(partial, folder)

    @classmethod
    def load(cls, folder: Path) -> CorpusIndex:
        """Read a kept index (memory-mapped weights; bm25s itself, and scipy with it, is not imported)."""
        import numpy as np

        with (folder / "corpus.pkl").open("rb") as fh:
            meta = pickle.load(fh)
        vocabulary = SortedWords(np.load(folder / "words.npy", mmap_mode="r"), np.load(folder / "word_ids.npy", mmap_mode="r"))
        paths = (folder / "paths.txt").read_text(encoding="utf-8").split("\n")
        arrays = np.load(folder / "shingles.npz")
        weights = {name: np.load(folder / f"bm25-{name}.npy", mmap_mode="r") for name in ("data", "indices", "indptr")}
        return cls(**meta, paths=paths if paths != [""] else [], sizes=arrays["sizes"].tolist(), weights=weights,
                   vocabulary=vocabulary, shingle_keys=arrays["keys"],
                   shingle_offsets=arrays["offsets"], shingle_docs=arrays["docs"])


def build_index(source: SourceProvider, cache_dir: Path | None) -> CorpusIndex:
    """The corpus of a source's files (memoized per source description in this process)."""
    import numpy as np

    from sftl.sources import PythonFilesOf, WheelSource

    framework = source.framework
    listed = source.list_files()
    memo_key = hashlib.sha1(f"{CORPUS_FORMAT}\0{source.description}\0{len(listed)}".encode()).hexdigest()
    if memo_key in _MEMO:
        return _MEMO[memo_key]
    cache = cache_dir / "candidates" if cache_dir is not None else None
    kept = cache / f"corpus-{memo_key[:20]}" if cache is not None else None
    if kept is not None and (kept / "corpus.pkl").is_file():
        try:
            return _remember(memo_key, CorpusIndex.load(kept))
        except (OSError, ValueError, EOFError, KeyError, TypeError, pickle.UnpicklingError):
            pass  # a damaged index is built again and overwritten
    all_paths = [p for p in listed if is_source_path(p, framework)]
    layer_of = getattr(source, "layer_of", None)
    by_layer: dict[int, dict[str, FileRecord]] = {}
    layers = _layers(source)
    # where the release's own Python files are layered over another release's tree, that tree's Python files
    # are of the wrong era: a file it alone holds did not exist in the report's release
    own_python = [i for i, lay in enumerate(layers) if isinstance(lay, (PythonFilesOf, WheelSource))]
    paths: list[str] = []
    records: list[FileRecord] = []
    for path in all_paths:
        layer = layer_of(path) if callable(layer_of) else source
        if layer is None:
            continue
        at = next((i for i, lay in enumerate(layers) if lay is layer), 0)
        if own_python and path.endswith(".py") and at not in own_python:
            continue
        if at not in by_layer:
            by_layer[at] = _layer_records(layers[at], framework, cache)
        rec = by_layer[at].get(path)
        if rec is not None:
            paths.append(path)
            records.append(rec)
    vocabulary: dict[str, int] = {}
    ids: list[list[int]] = []
    for rec in records:
        doc: list[int] = []
        for w, n in rec.bag.items():
            i = vocabulary.setdefault(w, len(vocabulary))
            doc.extend([i] * n)
        ids.append(doc)
    import bm25s  # only to build: a kept index is read without it
    from bm25s.tokenization import Tokenized

    retriever = bm25s.BM25()
    weights: dict[str, np.ndarray] = {"data": np.zeros(0, dtype=np.float32), "indices": np.zeros(0, dtype=np.int32),
               "indptr": np.zeros(len(vocabulary) + 1, dtype=np.int64)}
    if paths:
        retriever.index(Tokenized(ids=ids, vocab=vocabulary), show_progress=False)
        weights = {name: np.asarray(retriever.scores[name]) for name in ("data", "indices", "indptr")}
    exports: dict[str, list[int]] = {}
    defines: dict[str, list[int]] = {}
    by_shingle: dict[int, list[int]] = {}
    for d, rec in enumerate(records):
        for name in rec.exports:
            exports.setdefault(name, []).append(d)
        for name in rec.defines:
            defines.setdefault(name.lower().replace("_", ""), []).append(d)
        for s in rec.shingles:
            by_shingle.setdefault(s, []).append(d)
    # a phrase in many files' messages ('must be a', 'is not supported') points at none of them
    kept_shingles = sorted((s, docs) for s, docs in by_shingle.items() if len(docs) <= 12)

    keys = np.asarray([s for s, _ in kept_shingles], dtype=np.uint32)
    offsets = np.zeros(len(kept_shingles) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(docs) for _, docs in kept_shingles])
    flat = np.asarray([d for _, docs in kept_shingles for d in docs], dtype=np.int32)
    release_dirs = frozenset(p.rsplit("/", 1)[0] for i in own_python for p in layers[i].list_files()) if own_python else None
    sizes = [float(sum(rec.bag.values())) for rec in records]
    index = CorpusIndex(framework, paths, sizes, weights, vocabulary, exports, defines, release_dirs=release_dirs,
                        shingle_keys=keys, shingle_offsets=offsets, shingle_docs=flat)
    if kept is not None and paths:
        try:
            index.save(kept)
        except OSError:
            pass  # a read-only cache costs time, not results
    return _remember(memo_key, index)


def _remember(key: str, index: CorpusIndex) -> CorpusIndex:
    if len(_MEMO) >= _MEMO_MAX:
        _MEMO.pop(next(iter(_MEMO)))
    _MEMO[key] = index
    return index


def forget_memo() -> None:
    """Drop the indexes this process holds in memory (the next `build_index` reads the kept ones from disk)."""
    _MEMO.clear()


def default_cache_dir() -> Path:
    from sftl.config import load_settings

    return load_settings().cache_dir
