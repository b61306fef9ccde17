"""The PyTorch tree's native_functions.yaml entries and kernel index, memoized per provider and cached on disk."""

from __future__ import annotations

import hashlib
import os
import pickle
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sftl.codegraph import native as nat

if TYPE_CHECKING:
    from sftl.sources import SourceProvider

@dataclass
class _TorchContext:
    source: SourceProvider
    natives: dict[str, list[nat.NativeFunction]] | None
    index: nat.KernelIndex | None
    files: list[str]


# one index per live provider object (building it reads ~1-2k files); weak, so it dies with the provider
_INDEX_MEMO: weakref.WeakKeyDictionary[object, nat.KernelIndex] = weakref.WeakKeyDictionary()


_YAML_MEMO: weakref.WeakKeyDictionary[object, tuple[dict[str, list[nat.NativeFunction]] | None, str]] = (
    weakref.WeakKeyDictionary()
)


def release_natives(source: SourceProvider) -> tuple[dict[str, list[nat.NativeFunction]] | None, str]:
    """The release's native_functions.yaml entries, or None and what is wrong with the file."""
    try:
        return _YAML_MEMO[source]
    except (KeyError, TypeError):
        pass
    text = source.read_text(nat.NATIVE_YAML)
    result: tuple[dict[str, list[nat.NativeFunction]] | None, str]
    if text is None:
        result = (None, f"{nat.NATIVE_YAML} is not in {source.description}")
    else:
        try:
            result = (_parse_natives_cached(source, text), "")
        except nat.NativeYamlError as exc:
            result = (None, str(exc))
    try:
        _YAML_MEMO[source] = result
    except TypeError:
        pass
    return result


def prepare_index(source: SourceProvider) -> int:
    """Build (and cache on disk, where the provider allows) the kernel index of a PyTorch tree; files indexed."""
    files = source.list_files()
    release_natives(source)
    index = kernel_index(source, files)
    return len(index.texts)


def _parse_natives_cached(source: SourceProvider, text: str) -> dict[str, list[nat.NativeFunction]]:
    """Parse the yaml, or load the entries parsed by an earlier process from the same text."""
    fn = getattr(source, "index_cache_path", None)
    disk = fn() if callable(fn) else None
    if not isinstance(disk, Path):
        return nat.parse_native_functions(text)
    cache = disk.with_name(disk.stem + "-natives.pickle")
    key = hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()
    try:
        with cache.open("rb") as fh:
            fmt, saved_key, natives = pickle.load(fh)  # noqa: S301 - our own cache file
        if fmt == _NATIVES_FORMAT and saved_key == key and isinstance(natives, dict):
            return natives
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError):
        pass
    natives = nat.parse_native_functions(text)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(cache.name + f".tmp{os.getpid()}")
        with tmp.open("wb") as fh:
            pickle.dump((_NATIVES_FORMAT, key, natives), fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, cache)
    except OSError:
        pass  # a cache: a read-only cache dir only costs time
    return natives


_NATIVES_FORMAT = "sftl-natives-1"


def kernel_index(source: SourceProvider, files: list[str]) -> nat.KernelIndex:
    try:
        hit = _INDEX_MEMO.get(source)
    except TypeError:  # a provider that cannot be weakly referenced: no memo
        hit = None
    if hit is not None:
        return hit
    paths = nat.kernel_paths(files)
    cache_file = getattr(source, "index_cache_path", None)
    disk = cache_file() if callable(cache_file) else None
    disk = disk if isinstance(disk, Path) else None
    key = hashlib.sha1("\n".join(paths).encode() + str(getattr(source, "cached_file_count", int)()).encode())
    stamp = getattr(source, "manifest", None)
    if disk is not None and callable(stamp):  # a local tree: stale when any indexed file changed size or mtime
        key.update(str(stamp(paths)).encode())
    index = nat.KernelIndex.load(disk, key.hexdigest()) if disk is not None else None
    if index is None:
        index = nat.KernelIndex.from_source(source, paths)
        if disk is not None:
            index.save(disk, key.hexdigest())
    try:
        _INDEX_MEMO[source] = index
    except TypeError:
        pass
    return index
