"""A release's sources from the repository's archive at its ref: one download, only the localizers' folders kept.

`fetch_archive` downloads `GET /repos/{owner}/{repo}/tarball/{ref}` once through the GitHub client,
extracts the folders the localizers read (`EXTRACT_PREFIXES`) into a temporary folder, marks it
complete and renames it into place, so a crashed run never leaves a tree that looks whole. A
per-release file lock (fcntl) makes two processes, or two triage workers, share one download: the
second waits, then finds the tree. The archive itself is deleted once extracted.

Layout under `$SFTL_HOME/cache/sources/archives/<framework>/`: `<ref>/tree/...` (the files, with the
repository's paths), `<ref>/release.json` (the completion mark: ref, release, reason, size),
`<ref>.lock`, and while downloading `<ref>.tar.gz.part` (+ `.part.json`, what a resume needs).
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import json
import os
import shutil
import tarfile
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol, cast

from sftl.errors import GitHubError, SourceError
from sftl.releases import GITHUB_REPOS
from sftl.sources import LocalTree, sources_cache
from sftl.sources.owners import OWNER_FILES

if TYPE_CHECKING:
    from sftl.config import Settings

# What the localizers read, per framework: the rest of the repository (tests, docs, third_party, CI) is skipped.
EXTRACT_PREFIXES = {
    "pytorch": ("aten/", "c10/", "torch/", "torchgen/", "tools/autograd/"),
    "tensorflow": (
        "tensorflow/core/kernels/",
        "tensorflow/core/ops/",
        "tensorflow/python/",
        "tensorflow/compiler/tf2xla/kernels/",
    ),
}
# Python files are kept from these wider folders: a missing-module error may run through any of them
# (tensorflow/lite/python/, tensorflow/compiler/mlir/.../python/), and they are small beside the C++
PYTHON_PREFIXES = {"pytorch": ("torch/", "torchgen/", "tools/autograd/"), "tensorflow": ("tensorflow/",)}
_PYTHON_SUFFIXES = (".py", ".pyi")
_KEEP_SUFFIXES = (".py", ".pyi", ".cpp", ".cc", ".cu", ".cuh", ".h", ".hpp", ".c", ".yaml", ".cwrap", ".inl", ".def")
# GitHub's archive host rarely sends a length: the size announced before a download is then this estimate
ESTIMATED_BYTES = {"pytorch": 70_000_000, "tensorflow": 75_000_000}
MARK = "release.json"
# the bound kept automatically after each download (least recently used releases go first), and by `sftl cache prune`
SOURCES_MAX_BYTES = 20_000_000_000


class Reporter(Protocol):
    """Where people see what a download does: a notice line, and progress (the CLI draws it on stderr)."""

    def notice(self, text: str) -> None: ...

    def progress(self, label: str, event: str, done: int, total: int | None) -> None: ...


class _Silent:
    def notice(self, text: str) -> None:
        pass

    def progress(self, label: str, event: str, done: int, total: int | None) -> None:
        pass


_reporter: Reporter = _Silent()


def set_reporter(reporter: Reporter | None) -> None:
    """Install where download notices and progress go (the CLI's stderr); None: nowhere."""
    global _reporter
    _reporter = reporter if reporter is not None else _Silent()


def _safe(ref: str) -> str:
    return ref.replace("/", "__")


def archives_root(settings: Settings) -> Path:
    return sources_cache(settings) / "archives"


def archive_dir(settings: Settings, framework: str, ref: str) -> Path:
    return archives_root(settings) / framework / _safe(ref)


@dataclass(frozen=True)
class ArchiveInfo:
    """The completion mark of an extracted archive."""

    framework: str
    ref: str
    version: str | None
    reason: str
    files: int
    size_bytes: int
    archive_bytes: int
    fetched_at: float


def read_mark(folder: Path) -> ArchiveInfo | None:
    """The mark of a complete tree, or None (absent, torn, or not a tree of ours)."""
    try:
        data = json.loads((folder / MARK).read_text(encoding="utf-8"))
        return ArchiveInfo(
            str(data["framework"]), str(data["ref"]), data.get("version"), str(data.get("reason", "")),
            int(data["files"]), int(data["size_bytes"]), int(data.get("archive_bytes", 0)), float(data["fetched_at"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


class ArchiveSource(LocalTree):
    """The extracted archive of a release: a local tree with the repository's paths, and where it came from."""

    def __init__(self, settings: Settings, framework: str, ref: str, version: str | None, reason: str = "") -> None:
        folder = archive_dir(settings, framework, ref)
        super().__init__(folder / "tree", framework, version, cache_dir=settings.cache_dir)
        self.ref = ref
        self.folder = folder
        self.description = f"archive {GITHUB_REPOS[framework]}@{ref}" + (f" ({reason})" if reason else "")
        try:
            os.utime(folder / MARK)  # used now: the last to go when the cache is pruned
        except OSError:
            pass


def cached_archive(settings: Settings, framework: str, ref: str, version: str | None, reason: str = "") -> ArchiveSource | None:
    """The complete extracted archive of `ref` when it is in the cache; never downloads."""
    if read_mark(archive_dir(settings, framework, ref)) is None:
        return None
    return ArchiveSource(settings, framework, ref, version, reason)


@contextlib.contextmanager
def release_lock(settings: Settings, framework: str, ref: str) -> Iterator[None]:
    """An exclusive lock on one release's download and extraction, shared by every sftl process."""
    lock = archives_root(settings) / framework / f"{_safe(ref)}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _reporter.notice(f"waiting for another sftl process fetching {framework} {ref} ...")
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def fetch_archive(
    settings: Settings, framework: str, ref: str, version: str | None, reason: str = "", client: object | None = None
) -> ArchiveSource:
    """The extracted archive of `ref`: from the cache, else downloaded (one request for the archive) and extracted."""
    have = cached_archive(settings, framework, ref, version, reason)
    if have is not None:
        return have
    repo = GITHUB_REPOS[framework]
    if settings.offline:
        raise SourceError(f"the sources of {framework} at {ref} are not cached (offline)")
    with release_lock(settings, framework, ref):
        have = cached_archive(settings, framework, ref, version, reason)
        if have is not None:  # another process fetched it while this one waited
            return have
        folder = archive_dir(settings, framework, ref)
        tarball = folder.with_name(folder.name + ".tar.gz")
        resumed = False
        if not tarball.is_file():  # (a tarball left by a full disk is extracted again without a download)
            resumed = _download(settings, framework, repo, ref, tarball, client)
        try:
            _extract(tarball, folder, framework, ref, version, reason)
        except CorruptArchive:
            tarball.unlink(missing_ok=True)
            if not resumed:
                raise
            # a resumed download joined two different answers (an archive regenerated meanwhile): once more, whole
            _reporter.notice(f"the resumed archive of {repo}@{ref} is corrupt; downloading it again from the start")
            _download(settings, framework, repo, ref, tarball, client)
            try:
                _extract(tarball, folder, framework, ref, version, reason)
            except CorruptArchive:
                tarball.unlink(missing_ok=True)
                raise
        tarball.unlink(missing_ok=True)  # extracted: the archive goes
    prune_archives(settings, SOURCES_MAX_BYTES, None, keep=folder)  # bounded: the oldest-used releases make room
    return ArchiveSource(settings, framework, ref, version, reason)


class CorruptArchive(SourceError):
    """The downloaded archive cannot be read as a tree of the framework (it is deleted)."""


def _download(settings: Settings, framework: str, repo: str, ref: str, tarball: Path, client: object | None) -> bool:
    """Download the archive to `tarball`; True when it was resumed from a part an earlier run left."""
    from sftl.github import GitHubClient  # the one HTTP door

    label = f"{framework} {ref} archive"
    part = tarball.with_name(tarball.name + ".part")
    resumed = part.stat().st_size if part.is_file() else 0

    joined = [False]

    def progress(event: str, done: int, total: int | None) -> None:
        if event == "start":
            joined[0] = done > 0
            size = f"{total / 1e6:.1f} MB" if total else f"about {ESTIMATED_BYTES[framework] / 1e6:.0f} MB"
            again = f", resuming at {done / 1e6:.1f} MB" if done else (
                ", starting over (the server does not resume)" if resumed else "")
            wider = [p for p in PYTHON_PREFIXES[framework] if p not in EXTRACT_PREFIXES[framework]]
            _reporter.notice(f"downloading the {framework} sources at {ref} from {repo} ({size}{again}; "
                             f"kept: {', '.join(EXTRACT_PREFIXES[framework])}"
                             + (f" and the Python files of {', '.join(wider)})" if wider else ")"))
        _reporter.progress(label, event, done, total)

    own = client is None
    gh = GitHubClient(settings) if own else client
    try:
        gh.download_tarball(repo, ref, tarball, progress=progress)  # type: ignore[attr-defined]
    except GitHubError as exc:
        if exc.__class__.__name__ == "NotFoundError":
            raise SourceError(f"{repo} has no ref {ref!r} (GitHub answered 404 for its archive)") from exc
        raise SourceError(f"cannot download the sources of {framework} at {ref}: {exc}") from exc
    finally:
        if own:
            gh.close()  # type: ignore[attr-defined]
    return joined[0]


def _member_path(name: str, prefixes: tuple[str, ...], python: tuple[str, ...] = ()) -> str | None:
    """'pytorch-pytorch-abc1234/aten/src/x.cpp' -> 'aten/src/x.cpp' when it is kept; None otherwise."""
    top, sep, rest = name.partition("/")
    if not sep or not rest or rest.startswith("/"):
        return None
    parts = rest.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return None
    kept = (rest.startswith(prefixes) and rest.endswith(_KEEP_SUFFIXES)) or rest in OWNER_FILES  # + who to ask
    if not kept and not (rest.startswith(python) and rest.endswith(_PYTHON_SUFFIXES)):
        return None
    if "__pycache__" in parts:
        return None
    return rest


def _extract(tarball: Path, folder: Path, framework: str, ref: str, version: str | None, reason: str) -> None:
    """Extract the kept folders into a temporary folder, mark it complete, rename it into place."""
    prefixes = EXTRACT_PREFIXES[framework]
    for stale in folder.parent.glob(f".tmp-{folder.name}-*"):
        shutil.rmtree(stale, ignore_errors=True)  # a crashed extraction (we hold the lock: nobody else is at it)
    if folder.exists():
        shutil.rmtree(folder)  # a folder without its mark is not a tree
    tmp = folder.with_name(f".tmp-{folder.name}-{os.getpid()}")
    tree = tmp / "tree"
    size = tarball.stat().st_size
    label = f"{framework} {ref} extraction"
    files = written = 0
    tops: set[str] = set()
    try:
        tree.mkdir(parents=True)
        with open(tarball, "rb") as raw:
            _reporter.progress(label, "start", 0, size)
            gzipped = raw.read(2) == b"\x1f\x8b"  # gzip as GitHub sends it, or already decoded
            raw.seek(0)
            # through GzipFile, which checks the trailer's CRC and length once read to the end: tarfile's own stream
            # never does, and a resume that joined two archives' bytes can decompress and untar without an error
            stream: IO[bytes] = cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="rb")) if gzipped else raw
            with tarfile.open(fileobj=stream, mode="r|") as tar:
                for member in tar:
                    tops.add(member.name.partition("/")[0])
                    rel = _member_path(member.name, prefixes, PYTHON_PREFIXES[framework]) if member.isreg() else None
                    if rel is None:
                        continue
                    src = tar.extractfile(member)
                    if src is None:
                        continue
                    dest = tree / rel
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    with open(dest, "wb") as out:
                        shutil.copyfileobj(src, out, 1 << 20)
                    files += 1
                    written += member.size
                    if files % 200 == 0:
                        _reporter.progress(label, "update", raw.tell(), size)
                commit = tar.pax_headers.get("comment")  # GitHub's archives name their commit in a pax header
                while stream.read(1 << 20):  # to the end: the gzip trailer is checked (BadGzipFile: corrupt)
                    pass
            _reporter.progress(label, "end", size, size)
        if len(tops) != 1 or files == 0:
            raise CorruptArchive(
                f"the archive of {GITHUB_REPOS[framework]}@{ref} holds no {framework} tree "
                f"({len(tops)} top folders, no file under {', '.join(prefixes)}); it was deleted"
            )
        mark = {"framework": framework, "ref": ref, "commit": commit, "version": version, "reason": reason, "files": files,
                "size_bytes": written, "archive_bytes": size, "fetched_at": time.time()}
        (tmp / MARK).write_text(json.dumps(mark, indent=1), encoding="utf-8")
        os.rename(tmp, folder)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if exc.errno is None or exc.filename == str(tarball):  # gzip's BadGzipFile, a torn read: the archive's fault
            raise _corrupt(framework, ref, exc) from exc
        raise SourceError(  # the disk's fault (full, read-only): the archive is kept, the next run extracts it again
            f"cannot extract the archive of {GITHUB_REPOS[framework]}@{ref} into {folder.parent}: "
            f"{exc.strerror or exc}; the download is kept ({tarball}), run the command again once there is room"
        ) from exc
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _corrupt(framework, ref, exc) from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _corrupt(framework: str, ref: str, exc: BaseException) -> CorruptArchive:
    return CorruptArchive(
        f"the archive of {GITHUB_REPOS[framework]}@{ref} is truncated or corrupt ({type(exc).__name__}: "
        f"{str(exc)[:120]}); it was deleted and nothing was kept: run the command again to download it anew"
    )


def list_archives(settings: Settings) -> list[tuple[Path, ArchiveInfo]]:
    """Every complete extracted archive in the cache, with its mark."""
    out: list[tuple[Path, ArchiveInfo]] = []
    root = archives_root(settings)
    for folder in sorted(root.glob("*/*")) if root.is_dir() else []:
        info = read_mark(folder) if folder.is_dir() and not folder.name.startswith(".") else None
        if info is not None:
            out.append((folder, info))
    return out


def prune_archives(settings: Settings, max_bytes: int | None, max_age_s: float | None, now: float | None = None,
                   keep: Path | None = None) -> tuple[int, int, int, int]:
    """Remove archives unused for longer than `max_age_s`, then the least recently used until the rest
    hold at most `max_bytes`; stray temporaries and partial downloads older than a day go too.
    Returns (removed, freed bytes, kept, kept bytes). A release being fetched (locked) is never touched."""
    now = time.time() if now is None else now
    entries = []
    for folder, info in list_archives(settings):
        try:
            used = (folder / MARK).stat().st_mtime
        except OSError:
            continue
        entries.append((used, info.size_bytes, folder, info))
    entries.sort(key=lambda e: e[0])
    total = sum(e[1] for e in entries)
    removed = freed = 0
    for used, size, folder, info in entries:
        too_old = max_age_s is not None and now - used > max_age_s
        too_big = max_bytes is not None and total > max_bytes
        if not (too_old or too_big) or folder == keep:
            continue
        try:
            with _try_lock(settings, info.framework, info.ref):
                (folder / MARK).unlink(missing_ok=True)  # no longer complete, before anything else goes
                shutil.rmtree(folder, ignore_errors=True)
        except BlockingIOError:
            continue
        removed += 1
        freed += size
        total -= size
    root = archives_root(settings)
    for stray in list(root.glob("*/.tmp-*")) + list(root.glob("*/*.part")) + list(root.glob("*/*.part.json")):
        try:
            if now - stray.stat().st_mtime > 86400:
                shutil.rmtree(stray) if stray.is_dir() else stray.unlink()
        except OSError:
            pass
    return removed, freed, len(entries) - removed, total


@contextlib.contextmanager
def _try_lock(settings: Settings, framework: str, ref: str) -> Iterator[None]:
    lock = archives_root(settings) / framework / f"{_safe(ref)}.lock"
    with open(lock, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError: in use
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
