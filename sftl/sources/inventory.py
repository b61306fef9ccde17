"""The source files a release's compiled libraries name (their __FILE__ strings), read from its wheel once and cached beside it."""

from __future__ import annotations

import json
import os
import posixpath
import re
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

# Checks and logs compiled into a release's libraries keep the path of the file they sit in:
# TORCH_CHECK's "Exception raised from ... at ../aten/src/ATen/native/cuda/SoftMax.cu:268",
# TensorFlow's LOG/CHECK "tensorflow/core/kernels/linalg/matrix_solve_op.cc". Wheels carry no C++
# sources, but their libraries name the ones that were built into them: the release's own file list
# of kernels, read without a source tree (what is named is known to exist; its text is not at hand).

CACHE_NAME = "named-sources-v2.json"
_FORMAT = 2

# the repository folders each framework's C++ lives in; a named path is cut to start at one of them
ANCHORS: dict[str, tuple[bytes, ...]] = {
    "pytorch": (b"aten/src/", b"c10/", b"torch/csrc/", b"caffe2/"),
    "tensorflow": (b"tensorflow/core/",),
}
_SUFFIX = re.compile(r"\.(?:cu\.cc|cu\.h|cc|cu|cuh|cpp|cxx|hpp|h|c|inl|inc)$")
_TAIL = re.compile(rb"[A-Za-z0-9_./+-]{1,400}")
_PATH_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./+-")
_NAME_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.+-")
# a path built by the build itself (generated code), never a file of the repository
_GENERATED = ("bazel-out/", "bazel-bin/", "genfiles/", "build/", "_virtual_includes/")  # at a folder boundary
_CHUNK = 16 << 20
_OVERLAP = 1024  # longer than any path token kept (_TAIL: 400) plus the left context read (512)
_LEFT = 512

_MEMO: dict[tuple[str, int, str], frozenset[str]] = {}


def is_library(member: str) -> bool:
    """A shared library member of a wheel (`libx.so`, `libx.so.2`, `_pywrap.cpython-38-x86_64-linux-gnu.so`)."""
    base = member.rsplit("/", 1)[-1]
    return not member.endswith("/") and (base.endswith(".so") or ".so." in base)


def _normalise(token: bytes, left: bytes, anchors: tuple[bytes, ...]) -> tuple[str, str] | None:
    """(repository path, how it was written) from a path token found at an anchor; None for build outputs,
    links and non-sources. `left` is the rest of the token before the anchor ("../", "/pytorch/",
    "external/org_tensorflow/"); how: "up" (../), "bare" (nothing) or "prefixed" (a checkout's folder)."""
    try:
        text = token.decode("ascii")
        prefix = left.decode("ascii")
    except UnicodeDecodeError:
        return None
    bounded = "/" + prefix
    if any("/" + g in bounded for g in _GENERATED):
        return None
    if prefix.startswith("//"):
        return None  # a link in a message ("see https://github.com/.../blob/master/aten/..."): not this build's file
    if any("/" + a.decode() in bounded for a in anchors):
        return None  # an anchor inside a path that starts at another one (aten/src/.../c10/): that one names it
    text = text.rstrip(".")
    if not _SUFFIX.search(text):
        return None
    norm = posixpath.normpath(text)
    if norm.startswith("..") or "/../" in norm or not norm.startswith(tuple(a.decode() for a in anchors)):
        return None
    if "/generated/" in norm:
        return None  # written by the build (torch/csrc/autograd/generated/), not a file of the repository
    how = "bare" if not prefix or prefix == "./" else "up" if prefix.startswith("../") else "prefixed"
    return norm, how


def scan_stream(stream: IO[bytes], anchors: tuple[bytes, ...], chunk: int = _CHUNK) -> set[str]:
    """The repository paths a binary stream names, read in chunks that overlap so no path is cut."""
    return set(_scan_stream(stream, anchors, chunk))


def _scan_stream(stream: IO[bytes], anchors: tuple[bytes, ...], chunk: int = _CHUNK) -> dict[str, set[str]]:
    """{path: how it was written} for the paths a binary stream names."""
    found: dict[str, set[str]] = {}
    buf, start = b"", 0  # start: the first position of buf not scanned yet
    while True:
        data = stream.read(chunk)
        buf += data
        # an anchor beginning before `limit` ends, with its whole token, inside buf (tokens < _OVERLAP)
        limit = len(buf) if not data else max(start, len(buf) - _OVERLAP)
        for path, how in _scan(buf, start, limit, anchors):
            found.setdefault(path, set()).add(how)
        if not data:
            return found
        keep = max(0, limit - _LEFT)  # the left context of what is scanned next
        buf, start = buf[keep:], limit - keep


def _scan(buf: bytes, start: int, limit: int, anchors: tuple[bytes, ...]) -> Iterator[tuple[str, str]]:
    """(path, how) for the paths whose anchor begins in buf[start:limit]."""
    for anchor in anchors:
        stop = min(len(buf), limit + len(anchor) - 1)
        at = buf.find(anchor, start, stop)
        while at != -1:
            m = _TAIL.match(buf, at)
            end = m.end() if m else at + len(anchor)
            # the token's start: the path characters left of the anchor (a "../" or a build prefix)
            s = at
            while s > 0 and at - s < _LEFT and buf[s - 1] in _PATH_BYTES:
                s -= 1
            left = buf[s:at]
            # an anchor inside a longer name ("mytensorflow/core/") is not the repository folder
            if m is not None and (not left or left[-1] not in _NAME_BYTES):
                named = _normalise(m.group(), left, anchors)
                if named is not None:
                    yield named
            at = buf.find(anchor, end, stop) if end < stop else -1


def scan_wheel(wheel: str | Path, framework: str) -> dict[str, list[str]]:
    """{library member: sorted paths it names} for each shared library in the wheel (a slow read: 5-60 s).

    An out-of-source build (CMake's: most files named "../aten/...") names the files it wrote into its
    build folder bare ("aten/src/ATen/RegisterCUDA.cpp"): there, a path only ever named bare is dropped.
    A build that names every file bare (TensorFlow's Bazel) keeps them all.
    """
    anchors = ANCHORS[framework]
    per_library: dict[str, dict[str, set[str]]] = {}
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if not is_library(info.filename):
                continue
            with zf.open(info) as stream:
                named = _scan_stream(stream, anchors)
            if named:
                per_library[info.filename] = named
    return _merge(per_library)


def _merge(per_library: dict[str, dict[str, set[str]]]) -> dict[str, list[str]]:
    """{library: sorted paths} from each library's {path: how named}, an out-of-source build's bare-only paths dropped."""
    hows: dict[str, set[str]] = {}
    for named in per_library.values():
        for path, how in named.items():
            hows.setdefault(path, set()).update(how)
    up = sum(1 for how in hows.values() if "up" in how)
    bare_only = {p for p, how in hows.items() if how == {"bare"}}
    drop = bare_only if up > len(bare_only) else set()
    return {lib: sorted(p for p in named if p not in drop) for lib, named in per_library.items()
            if any(p not in drop for p in named)}


def cache_path(wheel: str | Path) -> Path:
    """Where the inventory of a cached wheel is kept: beside it."""
    return Path(wheel).parent / CACHE_NAME


def _key(wheel: Path) -> tuple[str, int]:
    return wheel.name, wheel.stat().st_size


def _read_cache(wheel: Path, framework: str) -> frozenset[str] | None:
    try:
        data = json.loads(cache_path(wheel).read_text(encoding="utf-8"))
        name, size = _key(wheel)
        entry = data["wheels"][name]
        if data.get("format") != _FORMAT or entry["size"] != size or entry["framework"] != framework:
            return None
        return frozenset(str(p) for p in entry["paths"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_cache(wheel: Path, framework: str, by_library: dict[str, list[str]]) -> None:
    path = cache_path(wheel)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("format") != _FORMAT or not isinstance(data.get("wheels"), dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    name, size = _key(wheel)
    paths = sorted({p for named in by_library.values() for p in named})
    wheels = dict(data.get("wheels", {}))
    wheels[name] = {"size": size, "framework": framework, "paths": paths,
                    "libraries": {lib: len(named) for lib, named in sorted(by_library.items())}}
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(json.dumps({"format": _FORMAT, "wheels": wheels}, indent=0), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a read-only cache only costs the next process the scan again


def wheel_named_paths(wheel: str | Path, framework: str, build: bool = True) -> frozenset[str] | None:
    """The repository paths the wheel's libraries name: from the cache beside it, else scanned once and
    cached (`build`; the scan takes 5-60 s); None when not cached and `build` is False, or the wheel is
    unreadable. Concurrent callers wait for one scan instead of running their own."""
    wheel = Path(wheel)
    if framework not in ANCHORS:
        return frozenset()
    try:
        name, size = _key(wheel)
    except OSError:
        return None
    memo = (str(wheel.resolve()), size, framework)
    if memo in _MEMO:
        return _MEMO[memo]
    found = _read_cache(wheel, framework)
    if found is None and build:
        with _lock(wheel):
            found = _read_cache(wheel, framework)  # another process may have built it while we waited
            if found is None:
                try:
                    by_library = scan_wheel(wheel, framework)
                except (OSError, zipfile.BadZipFile, zlib.error, EOFError):
                    return None
                _write_cache(wheel, framework, by_library)
                found = frozenset(p for named in by_library.values() for p in named)
    if found is not None:
        _MEMO[memo] = found
    return found


def library_named_paths(libraries: Iterable[str | Path], framework: str, cache_dir: str | Path | None = None,
                        build: bool = True) -> frozenset[str] | None:
    """The repository paths a set of compiled libraries on disk name (an unpacked wheel's torch/lib/*.so, a
    built checkout's): as `wheel_named_paths`, cached under `cache_dir/index/` keyed by each library's path,
    size and mtime; None when not cached and `build` is False, or no library can be read."""
    if framework not in ANCHORS:
        return frozenset()
    files = sorted({Path(p).resolve() for p in libraries})
    try:
        stamps = [[str(f), (st := f.stat()).st_size, st.st_mtime_ns] for f in files]
    except OSError:
        return None
    if not stamps:
        return frozenset()
    import hashlib

    key = json.dumps([_FORMAT, framework, stamps])
    memo = (hashlib.sha1(key.encode()).hexdigest(), len(stamps), framework)
    if memo in _MEMO:
        return _MEMO[memo]
    cache = Path(cache_dir) / "index" / f"named-libraries-{memo[0][:16]}.json" if cache_dir is not None else None
    found: frozenset[str] | None = None
    if cache is not None:
        try:
            data = json.loads(cache.read_text(encoding="utf-8"))
            if data.get("key") == key:
                found = frozenset(str(p) for p in data["paths"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            found = None
    if found is None and build:
        per_library: dict[str, dict[str, set[str]]] = {}
        with _lock(files[0]):
            for f in files:
                try:
                    with f.open("rb") as stream:
                        named = _scan_stream(stream, ANCHORS[framework])
                except OSError:
                    continue
                if named:
                    per_library[str(f)] = named
        found = frozenset(p for named in _merge(per_library).values() for p in named)
        if cache is not None:
            tmp = cache.with_name(f"{cache.name}.tmp{os.getpid()}")
            try:
                cache.parent.mkdir(parents=True, exist_ok=True)
                tmp.write_text(json.dumps({"key": key, "paths": sorted(found)}), encoding="utf-8")
                os.replace(tmp, cache)
            except OSError:
                tmp.unlink(missing_ok=True)  # a read-only cache only costs the next process the scan again
    if found is not None:
        _MEMO[memo] = found
    return found


class _lock:
    """An exclusive flock on the wheel itself while one process scans it (none where it cannot be taken)."""

    def __init__(self, wheel: Path) -> None:
        self.wheel = wheel
        self.fd: int | None = None

    def __enter__(self) -> _lock:
        try:
            import fcntl

            self.fd = os.open(self.wheel, os.O_RDONLY)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except (OSError, ImportError):
            if self.fd is not None:
                os.close(self.fd)
            self.fd = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing releases the flock


def layers(source: Any) -> Iterator[Any]:
    """The providers a source reads from, first layer first (a layered source's, a Python-files view's)."""
    seen: set[int] = set()
    stack = [source]
    while stack:
        provider = stack.pop(0)
        if id(provider) in seen:
            continue
        seen.add(id(provider))
        inner = getattr(provider, "providers", None)
        if isinstance(inner, list | tuple):
            stack[:0] = list(inner)
            continue
        wrapped = getattr(provider, "provider", None)
        if wrapped is not None:
            stack.insert(0, wrapped)
            continue
        yield provider


def release_wheel(source: Any) -> tuple[Path, str] | None:
    """(wheel, framework) of the report's release among the source's layers: its first wheel layer of the
    source's own release (a stand-in wheel of another release, or a later one, is never it)."""
    version = getattr(source, "version", None)
    for layer in layers(source):
        wheel = getattr(layer, "wheel", None)
        framework = getattr(layer, "framework", None)
        if not isinstance(wheel, Path) or not isinstance(framework, str):
            continue
        if version and layer.version and layer.version != version:
            continue
        return wheel, framework
    return None


def release_libraries(source: Any) -> tuple[list[Path], str, Any] | None:
    """(library files, framework, cache dir) of the report's release among the source's layers: the first layer
    holding compiled libraries on disk (`library_files()`: a tree given as --source-root, an unpacked wheel in
    it) of the source's own release, or of the release standing for its era."""
    versions = {getattr(source, "version", None), getattr(source, "era_release", None)} - {None}
    for layer in layers(source):
        files = getattr(layer, "library_files", None)
        framework = getattr(layer, "framework", None)
        if not callable(files) or not isinstance(framework, str):
            continue
        if versions and layer.version and layer.version not in versions:
            continue
        found = files()
        if found:
            return list(found), framework, getattr(layer, "cache_dir", None)
    return None


def named_paths(source: Any, build: bool = True, index: bool = True) -> frozenset[str]:
    """The repository paths the report's release's compiled libraries name. The first call on a wheel scans it
    (5-60 s) unless `build` is False; later ones read the cache beside the wheel (milliseconds). A source with no
    wheel at all nor libraries on disk reads sftl's bundled release index (`indexed`; `index`), else empty."""
    found = release_wheel(source)
    if found is not None:
        return wheel_named_paths(found[0], found[1], build=build) or frozenset()
    libraries = release_libraries(source)
    if libraries is None:
        hit = indexed(source) if index else None
        return hit.paths if hit is not None else frozenset()
    return library_named_paths(libraries[0], libraries[1], libraries[2], build=build) or frozenset()


def indexed(source: Any) -> Any:
    """The bundled release index's entry (`release_index.IndexedRelease`) standing for the source's release, when
    the source layers no wheel of any release and no compiled libraries; else None."""
    from sftl.sources import release_index

    framework = getattr(source, "framework", None)
    for layer in layers(source):
        if isinstance(getattr(layer, "wheel", None), Path):
            return None  # a wheel at hand (of this release or a stand-in) is read instead
        files = getattr(layer, "library_files", None)
        if callable(files) and files():
            return None
        framework = framework or getattr(layer, "framework", None)
    if not isinstance(framework, str):
        return None
    return release_index.indexed_release(framework, getattr(source, "version", None))


_RELEASE = re.compile(r"\d+\.\d+(?:\.\d+)?")


def base_release(version: str | None) -> str | None:
    """'1.7.0.dev20201001' -> '1.7.0', '2.10.0+cu128' -> '2.10.0', '2.0' -> '2.0.0'."""
    m = _RELEASE.match(version or "")
    if m is None:
        return None
    parts = m.group(0).split(".")
    return ".".join(parts + ["0"] * (3 - len(parts)))


def release_named(source: Any) -> tuple[frozenset[str], str]:
    """The paths the report's release's libraries name, and the release they were read from ('' when none)."""
    version = getattr(source, "version", None)
    named = named_paths(source, index=False)
    if named:
        return named, str(version)
    hit = indexed(source)  # no wheel nor libraries at hand: sftl's bundled release index
    if hit is not None and hit.paths:
        return hit.paths, f"{hit.release} [{hit.origin}]"
    want = {base_release(version), base_release(getattr(source, "era_release", None))} - {None}
    if not want:
        return frozenset(), ""
    for layer in layers(source):  # no wheel of the report's own version string: one of the same release number
        wheel, fw = getattr(layer, "wheel", None), getattr(layer, "framework", None)
        if isinstance(wheel, Path) and isinstance(fw, str) and base_release(getattr(layer, "version", None)) in want:
            found = wheel_named_paths(wheel, fw)
            if found:
                return found, f"{layer.version} (standing for {version})" if layer.version != version else str(version)
    return frozenset(), ""


def stand_in_releases(source: Any) -> set[str]:
    """The releases of the layers a source reads that are not its own release (a nearest tree standing in)."""
    versions = {getattr(p, "version", None) for p in getattr(source, "providers", ())}
    return {v for v in versions - {None, getattr(source, "version", None)} if isinstance(v, str)}


def release_paths(paths: Iterable[str], source: Any, tree_files: Iterable[str]) -> tuple[dict[str, str], str]:
    """Of these C++ paths, read in a stand-in tree of another release, the ones the report's release compiled from
    another folder (a file the tree moved: the release's libraries name one path with its file name, under the same
    two top folders, a path the tree no longer holds, and not the tree's): tree path -> the release's path, and the
    release that says so."""
    if not stand_in_releases(source):
        return {}, ""
    wanted = [p for p in paths if _SUFFIX.search(p)]
    if not wanted:
        return {}, ""
    named, release = release_named(source)
    if not named:
        return {}, ""
    tree = tree_files if isinstance(tree_files, set | frozenset) else frozenset(tree_files)
    by_name: dict[str, list[str]] = {}
    for path in named:
        by_name.setdefault(path.rsplit("/", 1)[-1], []).append(path)
    out: dict[str, str] = {}
    for path in wanted:
        same = by_name.get(path.rsplit("/", 1)[-1], [])
        if (path not in named and len(same) == 1 and same[0] not in tree
                and same[0].split("/")[:2] == path.split("/")[:2]):
            out[path] = same[0]
    return out, release


def under(paths: Iterable[str], prefix: str) -> list[str]:
    """The named paths under one repository folder, sorted."""
    return sorted(p for p in paths if p.startswith(prefix))
