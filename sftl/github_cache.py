"""The GitHub client's on-disk HTTP cache kept bounded: its size and age limits, what it holds, least-recently-used pruning."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from sftl.config import Settings

CACHE_MAX_BYTES = 1 << 30  # the automatic bound of the HTTP cache (1 GiB)
CACHE_MAX_AGE_S = 180 * 86400.0  # entries unused for half a year go
CACHE_PRUNE_INTERVAL_S = 3600.0  # automatic pruning scans the cache at most hourly
PRUNE_MARK = ".last-prune"


@dataclass(frozen=True)
class CacheUsage:
    """What the HTTP cache holds, and (after pruning) what was removed."""

    path: str
    files: int
    bytes: int
    oldest_used: float | None  # epoch seconds of the least recently used entry
    removed: int = 0
    freed: int = 0


def http_cache_dir(settings: Settings) -> Path:
    return settings.cache_dir / "http"


def touch(path: Path) -> None:
    try:
        os.utime(path)  # the entry was used: the last to go when the cache is pruned
    except OSError:
        pass


def _entries(root: Path) -> list[tuple[float, int, Path]]:
    """(last used, size, path) of every cache file, and stray temporaries."""
    out: list[tuple[float, int, Path]] = []
    try:
        shards = list(os.scandir(root))
    except OSError:
        return out
    for shard in shards:
        if not shard.is_dir(follow_symlinks=False):
            continue
        try:
            files = list(os.scandir(shard.path))
        except OSError:
            continue
        for f in files:
            try:
                st = f.stat(follow_symlinks=False)
            except OSError:
                continue  # removed meanwhile by another process
            out.append((st.st_mtime, st.st_size, Path(f.path)))
    return out


def cache_usage(settings: Settings) -> CacheUsage:
    """Files, bytes and the least recent use in the HTTP cache."""
    root = http_cache_dir(settings)
    entries = _entries(root)
    return CacheUsage(str(root), len(entries), sum(e[1] for e in entries), min((e[0] for e in entries), default=None))


def prune_cache(
    settings: Settings, max_bytes: int | None = CACHE_MAX_BYTES, max_age_s: float | None = CACHE_MAX_AGE_S,
    now: float | None = None,
) -> CacheUsage:
    """Remove entries unused for longer than `max_age_s`, then the least recently used ones until
    the cache holds at most `max_bytes`. Temporaries of interrupted writes older than an hour go
    too. Returns what is left, with what was removed. Safe while other clients use the cache: a
    removed entry is only a miss for them."""
    root = http_cache_dir(settings)
    now = time.time() if now is None else now
    entries = sorted(_entries(root), key=lambda e: e[0])  # least recently used first
    total = sum(e[1] for e in entries)
    removed = freed = 0
    kept: list[tuple[float, int, Path]] = []
    for used, size, path in entries:
        stale_tmp = path.name.startswith(".tmp-") and now - used > 3600
        too_old = max_age_s is not None and now - used > max_age_s
        too_big = max_bytes is not None and total > max_bytes
        if stale_tmp or too_old or too_big:
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            except OSError:
                kept.append((used, size, path))
                continue
            removed += 1
            freed += size
            total -= size
        else:
            kept.append((used, size, path))
    try:
        root.mkdir(parents=True, exist_ok=True)
        mark = root / PRUNE_MARK
        mark.touch()
        os.utime(mark, (now, now))
    except OSError:
        pass
    return CacheUsage(str(root), len(kept), total, min((e[0] for e in kept), default=None), removed, freed)
