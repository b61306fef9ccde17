"""The source-provider interface and the providers over files at hand: a local tree, an installed package, a wheel, and views that select or layer them."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import zipfile
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import BinaryIO, Protocol, TypeVar

from sftl.errors import InputError, SourceError
from sftl.releases import normalize_framework
from sftl.sources.frameworks import IMPORT_NAMES, PACKAGES, repo_path

T = TypeVar("T")


class SourceProvider(Protocol):
    """Framework sources at one release; every path is repository-relative, '/'-separated."""

    framework: str  # "pytorch" | "tensorflow"
    version: str | None
    description: str  # for reports: where the files came from

    def list_files(self) -> list[str]: ...

    def read_text(self, path: str) -> str | None:
        """The file's text, or None when the provider does not hold it."""
        ...


_SKIP_DIRS = {".git", "__pycache__", "node_modules", "third_party", "build", ".venv"}


class LocalTree:
    """A local checkout laid out like the framework's repository (`--source-root DIR`); `hide`: path prefixes
    left out (the wheel-only folders of a wheel unpacked into the tree, read through `WheelFilesIn`)."""

    def __init__(
        self, root: str | Path, framework: str, version: str | None = None, cache_dir: str | Path | None = None,
        hide: tuple[str, ...] = (),
    ) -> None:
        self.root = Path(root).expanduser()
        self.hide = tuple(hide)
        if not self.root.is_dir():
            raise InputError(f"source root {self.root} is not a directory")
        self.framework = framework
        self.version = version
        self.description = f"local tree {self.root}"
        # where localizers may keep indexes built from this tree (None: rebuild in every process)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._files: list[str] | None = None
        self._all: list[str] = []  # the listing before `hide`

    def index_cache_path(self) -> Path | None:
        """Where a localizer may keep an index of this tree: one file per tree, keyed by its real path."""
        if self.cache_dir is None:
            return None
        ident = hashlib.sha1(str(self.root.resolve()).encode()).hexdigest()[:16]
        return self.cache_dir / "index" / f"tree-{self.framework}-{ident}.pickle"

    def manifest(self, paths: Iterable[str]) -> str:
        """A stamp of these files' sizes and mtimes: an index built from them is stale when it changes."""
        digest = hashlib.sha1(str(self.root.resolve()).encode())
        for path in paths:
            try:
                st = os.stat(self.root / path)
                digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
            except OSError:
                digest.update(f"{path}\0-\n".encode())
        return digest.hexdigest()

    def list_files(self) -> list[str]:
        if self._files is None:
            listing = self._cached_listing()
            if listing is None:
                files: list[str] = []
                stamps: dict[str, int] = {}
                # linked folders are followed (a tree composed of links to another tree's aten/, c10/), each
                # real folder once (a link back up the tree is no loop)
                real_seen: set[str] = set()
                for dirpath, dirnames, filenames in os.walk(self.root, followlinks=True):
                    real = os.path.realpath(dirpath)
                    if real in real_seen:
                        dirnames[:] = []
                        continue
                    real_seen.add(real)
                    dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
                    rel = os.path.relpath(dirpath, self.root)
                    prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
                    files.extend(prefix + f for f in sorted(filenames))
                    try:
                        stamps[prefix] = os.stat(dirpath).st_mtime_ns
                    except OSError:
                        pass
                self._save_listing(stamps, files)
                listing = files
            self._all = listing
            self._files = [p for p in listing if not p.startswith(self.hide)] if self.hide else listing
        return self._files

    def _listing_path(self) -> Path | None:
        index = self.index_cache_path()
        return index.with_name(index.stem + "-files.json") if index is not None else None

    def _cached_listing(self) -> list[str] | None:
        """The saved file list while no directory changed (an added/removed file changes its folder's mtime).

        Stating the tree's ~1k folders is several times cheaper than listing its ~15k files again.
        """
        path = self._listing_path()
        if path is None or not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            stamps, files = data["dirs"], data["files"]
            for prefix, mtime in stamps.items():
                if os.stat(self.root / prefix).st_mtime_ns != mtime:
                    return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        return [str(f) for f in files] if isinstance(files, list) else None

    def _save_listing(self, stamps: dict[str, int], files: list[str]) -> None:
        path = self._listing_path()
        if path is None:
            return
        try:
            atomic_write(path, json.dumps({"root": str(self.root.resolve()), "dirs": stamps, "files": files}))
        except OSError:
            pass  # a cache: a read-only cache dir only costs time

    def library_files(self) -> list[Path]:
        """The compiled libraries (*.so, *.so.N) the tree holds: an unpacked wheel's, a built checkout's (hidden
        folders included: TF 2.0's libraries sit under tensorflow_core/)."""
        self.list_files()
        return [self.root / p for p in self._all if _is_library(p)]

    def read_text(self, path: str) -> str | None:
        if self.hide and path.startswith(self.hide):
            return None
        full = self.root / path
        try:
            return full.read_text(encoding="utf-8", errors="replace")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        except OSError as exc:
            raise SourceError(f"cannot read {full}: {exc.strerror or exc}") from exc


def _is_library(path: str) -> bool:
    base = path.rsplit("/", 1)[-1]
    return base.endswith(".so") or ".so." in base


class ReleaseFiles:
    """The files of a local tree that are of one release, where the tree mixes two (a release's wheel
    unpacked over the C++ of another release's tree): its Python files (.py/.pyi) and compiled
    libraries, seen as a layer of that release, as the cache layers a wheel over a tree."""

    def __init__(self, tree: LocalTree, version: str | None, description: str = "") -> None:
        self._tree = tree  # not `provider`: this layer is of its own release, not a view of the tree's
        self.framework = tree.framework
        self.version = version
        self.cache_dir = tree.cache_dir
        self.description = description or f"Python files of {tree.description} ({version})"

    def list_files(self) -> list[str]:
        return [p for p in self._tree.list_files() if p.endswith((".py", ".pyi"))]

    def read_text(self, path: str) -> str | None:
        return self._tree.read_text(path) if path.endswith((".py", ".pyi")) else None

    def library_files(self) -> list[Path]:
        return self._tree.library_files()


# the folders a wheel unpacked into a tree keeps at paths that are not the repository's (headers for extensions,
# torchgen's packaged ATen files, TF 2.0/2.1's real package under tensorflow_core/): `repo_path` maps them
WHEEL_ONLY = {
    "pytorch": ("torch/include/", "torch/lib/include/", "torch/lib/THNN.h", "torch/lib/THCUNN.h", "torchgen/packaged/"),
    "tensorflow": ("tensorflow/include/", "tensorflow_core/"),
}


class WheelFilesIn:
    """The files of a wheel unpacked into a tree that sit at wheel paths (torch/include/ATen/..., tensorflow/include/
    tensorflow/core/..., torchgen/packaged/ATen/...), seen at their repository paths, as a wheel is read."""

    def __init__(self, tree: LocalTree, version: str | None) -> None:
        self._tree = tree
        self.framework = tree.framework
        self.version = version
        self.description = f"wheel files unpacked in {tree.description} ({version})"
        self._map: dict[str, str] | None = None

    def _paths(self) -> dict[str, str]:
        if self._map is None:
            mapping: dict[str, str] = {}
            prefixes = WHEEL_ONLY.get(self.framework, ())
            for path in self._tree.list_files():
                if not path.startswith(prefixes):
                    continue
                repo = repo_path(self.framework, path)
                if repo is None or repo == path:
                    continue
                _keep(mapping, repo, path, path)
            self._map = mapping
        return self._map

    def list_files(self) -> list[str]:
        return list(self._paths())

    def read_text(self, path: str) -> str | None:
        installed = self._paths().get(path)
        return None if installed is None else self._tree.read_text(installed)


class SitePackages:
    """The framework as installed in a site-packages directory, seen with the repository's paths."""

    def __init__(self, framework: str, version: str | None = None, site_dir: str | Path | None = None) -> None:
        self.framework = normalize_framework(framework)
        if site_dir is None:
            site_dir = _find_site_dir(self.framework)
        self.site_dir = Path(site_dir)
        if not self.site_dir.is_dir():
            raise SourceError(f"site-packages {self.site_dir} is not a directory")
        self.installed_version = _installed_version(self.site_dir, self.framework)
        self.version = version or self.installed_version
        self.description = f"installed {self.framework} {self.installed_version or '?'} in {self.site_dir}"
        self._map: dict[str, str] | None = None

    def _paths(self) -> dict[str, str]:
        if self._map is None:
            mapping: dict[str, str] = {}
            # tensorflow_core (TF 2.0/2.1) first: where both define a path, the real package wins over the shim
            for top in ("torch", "torchgen", "functorch") if self.framework == "pytorch" else ("tensorflow_core", "tensorflow"):
                base = self.site_dir / top
                for dirpath, dirnames, filenames in os.walk(base):
                    dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
                    rel = os.path.relpath(dirpath, self.site_dir).replace(os.sep, "/")
                    for name in sorted(filenames):
                        repo = repo_path(self.framework, f"{rel}/{name}")
                        if repo is not None:
                            mapping.setdefault(repo, f"{rel}/{name}")
            self._map = mapping
        return self._map

    def list_files(self) -> list[str]:
        return list(self._paths())

    def read_text(self, path: str) -> str | None:
        installed = self._paths().get(path)
        if installed is None:
            return None
        try:
            return (self.site_dir / installed).read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise SourceError(f"cannot read {self.site_dir / installed}: {exc.strerror or exc}") from exc


def _find_site_dir(framework: str) -> Path:
    """The site-packages holding the framework in this interpreter, found without importing it."""
    import importlib.util

    spec = importlib.util.find_spec(IMPORT_NAMES[framework])
    if spec is None or not spec.submodule_search_locations:
        raise SourceError(f"{framework} is not installed in this Python ({sys.executable})")
    return Path(next(iter(spec.submodule_search_locations))).parent


def _installed_version(site_dir: Path, framework: str) -> str | None:
    for package in PACKAGES[framework] + (("tensorflow-gpu", "tf-nightly") if framework == "tensorflow" else ()):
        pattern = package.replace("-", "_") + "-*.dist-info"
        for info in sorted(site_dir.glob(pattern)):
            return info.name[len(package) + 1 : -len(".dist-info")]
    return None


def _keep(mapping: dict[str, T], repo: str, member: str, value: T) -> None:
    """File a wheel member under its repository path: the first one wins, but TF 2.0/2.1's real package
    (tensorflow_core/) wins over its tensorflow/ shim."""
    if member.startswith("tensorflow_core/"):
        mapping[repo] = value
    else:
        mapping.setdefault(repo, value)


class WheelSource:
    """A release's wheel read as a zip (never installed), with wheel paths mapped to repository paths.

    The zip's central directory of a torch wheel (10-40 thousand members) costs 0.1-0.5 s to parse
    on every open, so the members that map to repository paths are kept in a table beside the wheel
    (`members-v2.json`, keyed by the wheel's name, size and mtime) and read from their offsets; a
    wheel whose table cannot be kept (a read-only folder) is read through `zipfile` as before.
    """

    TABLE_NAME = "members-v2.json"  # v2: members under a wheel's .data/purelib/ are read (TensorFlow 1.x)

    def __init__(self, wheel: str | Path, framework: str, version: str | None = None) -> None:
        self.wheel = Path(wheel)
        self.framework = normalize_framework(framework)
        self.version = version or _wheel_version(self.wheel.name)
        self.description = f"wheel {self.wheel.name}"
        self._zip: zipfile.ZipFile | None = None
        self._fh: BinaryIO | None = None
        try:
            stat = self.wheel.stat()
        except OSError as exc:
            raise SourceError(f"cannot open wheel {self.wheel}: {exc}") from exc
        self._key = [self.wheel.name, stat.st_size, stat.st_mtime_ns, self.framework]
        table = self._cached_table()
        if table is None:
            table = self._build_table()
        # repo path -> [member, header offset, compressed size, size, method, crc]
        self._table: dict[str, list[object]] = table
        self._map: dict[str, str] = {repo: str(entry[0]) for repo, entry in table.items()}

    def _table_path(self) -> Path:
        return self.wheel.with_name(self.TABLE_NAME)

    def _cached_table(self) -> dict[str, list[object]] | None:
        try:
            saved = json.loads(self._table_path().read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(saved, dict) or saved.get("key") != self._key or not isinstance(saved.get("members"), dict):
            return None
        return saved["members"]

    def _open_zip(self) -> zipfile.ZipFile:
        if self._zip is None:
            try:
                self._zip = zipfile.ZipFile(self.wheel)
            except (OSError, zipfile.BadZipFile) as exc:
                raise SourceError(f"cannot open wheel {self.wheel}: {exc}") from exc
        return self._zip

    def _build_table(self) -> dict[str, list[object]]:
        table: dict[str, list[object]] = {}
        for info in self._open_zip().infolist():
            name = info.filename
            if name.endswith("/"):
                continue
            repo = repo_path(self.framework, name)
            if repo is None:
                continue
            entry: list[object] = [name, info.header_offset, info.compress_size, info.file_size, info.compress_type,
                                   info.CRC]
            _keep(table, repo, name, entry)
        path = self._table_path()
        tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
        try:  # a cache: a read-only folder only costs the next open its time
            tmp.write_text(json.dumps({"key": self._key, "members": table}), encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            tmp.unlink(missing_ok=True)
        return table

    def list_files(self) -> list[str]:
        return list(self._map)

    def read_text(self, path: str) -> str | None:
        entry = self._table.get(path)
        if entry is None:
            return None
        member = str(entry[0])
        try:
            data = self._read_direct(entry) if self._zip is None else None
            if data is None:
                data = self._open_zip().read(member)
            return data.decode("utf-8", errors="replace")
        except (OSError, zipfile.BadZipFile, KeyError, zlib.error, EOFError) as exc:  # corrupt deflate data: zlib/EOF
            raise SourceError(f"cannot read {member} from {self.wheel.name}: {exc}") from exc

    def _read_direct(self, entry: list[object]) -> bytes | None:
        """The member's bytes read at its offset (stored or deflated, CRC checked); None: let zipfile read it."""
        _, offset, csize, size, method, crc = entry
        if method not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED) or not all(
                isinstance(v, int) for v in (offset, csize, size, crc)):
            return None
        assert isinstance(offset, int) and isinstance(csize, int) and isinstance(size, int)
        if self._fh is None:
            self._fh = self.wheel.open("rb")
        fh = self._fh
        fh.seek(offset)
        header = fh.read(30)
        if len(header) < 30 or header[:4] != b"PK\x03\x04":
            raise zipfile.BadZipFile(f"no local header at offset {offset}")
        skip = int.from_bytes(header[26:28], "little") + int.from_bytes(header[28:30], "little")
        fh.seek(offset + 30 + skip)
        raw = fh.read(csize)
        data = raw if method == zipfile.ZIP_STORED else zlib.decompress(raw, -15)
        if len(data) != size or zlib.crc32(data) != crc:
            raise zipfile.BadZipFile("bad CRC-32 or size")
        return data

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __del__(self) -> None:  # sources are dropped, not closed, by their users: like ZipFile, close quietly
        fh = getattr(self, "_fh", None)
        if fh is not None:
            fh.close()


def _wheel_version(filename: str) -> str | None:
    parts = filename.split("-")
    return parts[1] if len(parts) > 2 else None


class PythonFilesOf:
    """The Python files of another provider only: a release's own Python code laid over a stand-in
    tree of another release (C++ stays the tree's, consistent with its own native_functions.yaml)."""

    def __init__(self, provider: SourceProvider) -> None:
        self.provider = provider
        self.framework = provider.framework
        self.version = provider.version
        self.description = f"Python files of {provider.description}"

    def list_files(self) -> list[str]:
        return [p for p in self.provider.list_files() if p.endswith((".py", ".pyi"))]

    def read_text(self, path: str) -> str | None:
        return self.provider.read_text(path) if path.endswith((".py", ".pyi")) else None


class LayeredSource:
    """Several providers seen as one: the first that holds a file wins.

    `successors` are providers of releases after the report's (a cached later wheel) that are never
    read as this source's files: localizers consult them only to tell when an op's code changed.
    """

    def __init__(self, providers: Sequence[SourceProvider], successors: Sequence[SourceProvider] = ()) -> None:
        if not providers:
            raise SourceError("a layered source needs at least one provider")
        self.providers = list(providers)
        self.successors = list(successors)
        # the release of the layer that stands for the report's era when no layer is of the report's own
        # release (a nearer cached wheel under a newer tree); None: the report's release itself
        self.era_release: str | None = None
        self.framework = providers[0].framework
        self.version = providers[0].version
        self.description = " + ".join(p.description for p in providers)
        self._files: list[str] | None = None
        self._owner: dict[str, int] | None = None  # path -> index of the layer that holds it first

    def list_files(self) -> list[str]:
        if self._files is None:
            seen: dict[str, None] = {}
            for provider in self.providers:
                for path in provider.list_files():
                    seen.setdefault(path, None)
            self._files = list(seen)
        return self._files

    def read_text(self, path: str) -> str | None:
        for provider in self.providers:
            text = provider.read_text(path)
            if text is not None:
                return text
        return None

    def layer_of(self, path: str) -> SourceProvider | None:
        """The layer `read_text(path)` reads from (the first that lists it); None when no layer holds it."""
        if self._owner is None:
            owner: dict[str, int] = {}
            for i, provider in enumerate(self.providers):
                for listed in provider.list_files():
                    owner.setdefault(listed, i)
            self._owner = owner
        at = self._owner.get(path)
        return None if at is None else self.providers[at]

    def release_of(self, path: str) -> str | None:
        """The release of the layer a path is read from: a stand-in tree's, not the report's, where they differ."""
        layer = self.layer_of(path)
        return None if layer is None else layer.version

    def layers_at(self, version: str | None) -> list[SourceProvider]:
        """The layers of one release (e.g. the report's own wheel under a newer stand-in tree)."""
        return [p for p in self._layers() if version is not None and p.version == version]

    def releases(self) -> list[str | None]:
        """The release of each layer, first layer first (several when a stand-in tree covers another release)."""
        return [p.version for p in self._layers()]

    def _layers(self) -> list[SourceProvider]:
        """The providers, without the Python-files views of layers that are there in full."""
        full = [p for p in self.providers if not isinstance(p, PythonFilesOf)]
        return full + [p.provider for p in self.providers if isinstance(p, PythonFilesOf) and p.provider not in full]

    def index_cache_path(self) -> Path | None:
        """The first layer's index cache (a cached GitHub tree), so layering keeps localizers warm."""
        for provider in self.providers:
            fn = getattr(provider, "index_cache_path", None)
            if callable(fn):
                path = fn()
                if not isinstance(path, Path):
                    return None
                if not isinstance(provider, LocalTree) or len(self.providers) == 1:
                    return path
                # a tree is also read alone (--source-root); layered it indexes more files: keep both warm
                tag = hashlib.sha1("\n".join(p.description for p in self.providers).encode()).hexdigest()[:10]
                return path.with_name(f"{path.stem}-layered-{tag}{path.suffix}")
        return None

    def cached_file_count(self) -> int:
        return sum(int(getattr(p, "cached_file_count", lambda: 0)()) for p in self.providers)

    def manifest(self, paths: Iterable[str]) -> str:
        """The local layers' stamps of these files (cached GitHub/wheel layers are counted by the caller)."""
        wanted = list(paths)
        stamps = [fn(wanted) for p in self.providers if callable(fn := getattr(p, "manifest", None))]
        if len(self.providers) == 1 and len(stamps) == 1:
            return str(stamps[0])  # a tree alone: the index it shares with `--source-root` / `sources add`
        return hashlib.sha1("\n".join(stamps).encode()).hexdigest()


def iter_texts(source: SourceProvider, paths: Iterable[str]) -> Iterable[tuple[str, str]]:
    """(path, text) for each path the provider holds."""
    for path in paths:
        text = source.read_text(path)
        if text is not None:
            yield path, text


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
