"""Source providers: one interface (list files, read a file) over the places framework sources live, and which of them a report needs.

The package: `frameworks` (what is known of each framework), `providers` (the interface, and the providers
over files at hand: a tree, an installed package, a wheel, views that select or layer them), `wheels`
(wheel downloads), `archive` (a release's source archive), `inventory` (the source files a release's
libraries name), `for_report` (which release a report needs: `sources_for_report`, the one call that answers
"the sources for this report"). Here: GitHub's tree/raw API as a provider, the cache's layout, registered trees, and
`open_source`, which chooses the best source of a release.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sftl.errors import InputError, SftlError, SourceError
from sftl.releases import (  # re-exported: the release table moved to sftl.releases
    GITHUB_REPOS,
    nearest_version,
    normalize_framework,
    release_at,
    release_tag,
    version_key,
)
from sftl.releases import release_dates as release_dates
from sftl.sources import release_index
from sftl.sources.frameworks import CXX_PREFIXES, FRAMEWORKS, NATIVE_FUNCTIONS, parse_spec, repo_path
from sftl.sources.inventory import base_release
from sftl.sources.providers import (
    WHEEL_ONLY,
    LayeredSource,
    LocalTree,
    PythonFilesOf,
    ReleaseFiles,
    SitePackages,
    SourceProvider,
    WheelFilesIn,
    WheelSource,
    atomic_write,
    iter_texts,
)

if TYPE_CHECKING:
    from sftl.config import Settings


class GitHubSource:
    """The framework repository at a release tag through GitHub's tree/raw API, cached on disk."""

    def __init__(self, framework: str, version: str, settings: Settings, ref: str | None = None) -> None:
        self.framework = normalize_framework(framework)
        self.version: str | None = version
        self.settings = settings
        self.repo = GITHUB_REPOS[self.framework]
        self.ref = ref or release_tag(self.framework, version)
        self.dir = github_cache_dir(settings, self.framework, self.ref)
        self.description = f"github {self.repo}@{self.ref}"
        self._files: list[str] | None = None
        self._client: Any = None

    def _github(self) -> Any:
        if self._client is None:
            from sftl.github import GitHubClient  # lazy: the one HTTP door, imported only when needed

            self._client = GitHubClient(self.settings)
        return self._client

    @property
    def tree_cached(self) -> bool:
        return (self.dir / "tree.json").is_file()

    def list_files(self) -> list[str]:
        if self._files is None:
            tree_file = self.dir / "tree.json"
            if tree_file.is_file():
                try:
                    self._files = list(json.loads(tree_file.read_text(encoding="utf-8")))
                except (OSError, ValueError) as exc:
                    raise SourceError(f"corrupt cached tree {tree_file}: {exc}; delete it and fetch again") from exc
            elif self.settings.offline:
                raise SourceError(
                    f"no cached GitHub tree for {self.repo}@{self.ref}; "
                    f"run `sftl sources fetch {self.framework}=={self.version} --cxx` online first"
                )
            else:
                self._files = _tree_paths(self._github().get_tree(self.repo, self.ref))
                atomic_write(tree_file, json.dumps(self._files))
        return self._files

    def read_text(self, path: str) -> str | None:
        local = self.dir / "files" / path
        if local.is_file():
            return local.read_text(encoding="utf-8", errors="replace")
        if self.settings.offline:
            return None
        if self.tree_cached and path not in set(self.list_files()):
            return None
        try:
            raw = self._github().get_raw_file(self.repo, self.ref, path)
        except SftlError as exc:
            if exc.__class__.__name__ == "NotFoundError":
                return None
            raise
        if raw is None:
            return None
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)
        atomic_write(local, text)
        return text

    def fetch(self, prefixes: Sequence[str]) -> int:
        """Download every file under `prefixes` into the cache; returns how many were fetched."""
        count = 0
        for path in self.list_files():
            if path.startswith(tuple(prefixes)) and _is_text_source(path) and not (self.dir / "files" / path).is_file():
                if self.read_text(path) is not None:
                    count += 1
        return count

    def index_cache_path(self) -> Path:
        """Where a localizer may keep an index built from this tree's cached files."""
        return self.dir / "kernel-index.pickle"

    def cached_file_count(self) -> int:
        base = self.dir / "files"
        return sum(len(f) for _, _, f in os.walk(base)) if base.is_dir() else 0


def _tree_paths(tree: Any) -> list[str]:
    """GitHub's tree JSON ({"tree": [{"path", "type"}]}), a list of such entries, or a list of paths."""
    entries = tree.get("tree", []) if isinstance(tree, dict) else tree
    paths: list[str] = []
    for entry in entries or []:
        if isinstance(entry, str):
            paths.append(entry)
        elif isinstance(entry, dict) and entry.get("type", "blob") == "blob" and entry.get("path"):
            paths.append(str(entry["path"]))
        elif hasattr(entry, "path") and getattr(entry, "type", "blob") == "blob":
            paths.append(str(entry.path))
    return paths


_TEXT_SUFFIXES = (".cpp", ".cc", ".cu", ".cuh", ".h", ".hpp", ".c", ".py", ".yaml", ".cwrap", ".txt", ".inl")


def _is_text_source(path: str) -> bool:
    return path.endswith(_TEXT_SUFFIXES)


# --------------------------------------------------------------------------------------------
# Cache layout, fetching, and the factory


def sources_cache(settings: Settings) -> Path:
    return settings.cache_dir / "sources"


def wheel_cache_dir(settings: Settings, framework: str, version: str) -> Path:
    return sources_cache(settings) / "wheels" / f"{framework}-{version}"


def github_cache_dir(settings: Settings, framework: str, ref: str) -> Path:
    return sources_cache(settings) / "github" / GITHUB_REPOS[framework].replace("/", "__") / ref


def cached_wheel(settings: Settings, framework: str, version: str) -> Path | None:
    folder = wheel_cache_dir(settings, framework, version)
    wheels = sorted(folder.glob("*.whl")) if folder.is_dir() else []
    return wheels[0] if wheels else None


@dataclass(frozen=True)
class CachedSource:
    """One entry of `sftl sources list`."""

    framework: str
    version: str
    kind: str  # "archive" | "wheel" | "github" | "tree" (registered local tree; files/size not counted)
    path: str
    files: int
    size_bytes: int
    ref: str = ""  # the git ref of an archive / GitHub tree
    fetched_at: float | None = None  # epoch seconds it was cached
    reason: str = ""  # how the reporter's version was read as this ref


def list_cached(settings: Settings) -> list[CachedSource]:
    """Everything `sftl sources fetch` has put in the cache."""
    from sftl.sources.archive import list_archives

    out: list[CachedSource] = []
    for folder, info in list_archives(settings):
        out.append(CachedSource(info.framework, info.version or info.ref, "archive", str(folder / "tree"), info.files,
                                info.size_bytes, info.ref, info.fetched_at, info.reason))
    wheels = sources_cache(settings) / "wheels"
    if wheels.is_dir():
        for folder in sorted(wheels.iterdir()):
            framework, _, version = folder.name.partition("-")
            for whl in sorted(folder.glob("*.whl")):
                st = whl.stat()
                out.append(CachedSource(framework, version, "wheel", str(whl), 1, st.st_size, fetched_at=st.st_mtime))
    for fw in FRAMEWORKS:
        for version, root in registered_trees(settings, fw).items():
            out.append(CachedSource(fw, version, "tree", str(root), 0, 0))
    github = sources_cache(settings) / "github"
    if github.is_dir():
        for repo_dir in sorted(github.iterdir()):
            framework = next((f for f, r in GITHUB_REPOS.items() if r.replace("/", "__") == repo_dir.name), repo_dir.name)
            for ref_dir in sorted(p for p in repo_dir.iterdir() if p.is_dir()):
                files = [Path(d) / f for d, _, fs in os.walk(ref_dir / "files") for f in fs]
                size = sum(f.stat().st_size for f in files)
                out.append(CachedSource(framework, ref_dir.name.lstrip("v"), "github", str(ref_dir), len(files), size,
                                        ref_dir.name, ref_dir.stat().st_mtime))
    return out


def fetch_cxx(framework: str, version: str, settings: Settings, prefixes: Sequence[str] | None = None) -> int:
    """Download the release's C++/CUDA kernel sources through GitHub into the cache."""
    source = GitHubSource(framework, version, settings)
    return source.fetch(prefixes or CXX_PREFIXES[source.framework])


def trees_dir(settings: Settings) -> Path:
    return sources_cache(settings) / "trees"


def register_tree(settings: Settings, framework: str, version: str, root: str | Path) -> Path:
    """Remember a local source tree (a checkout, an unpacked source package) as `framework==version`."""
    framework = normalize_framework(framework)
    tree = LocalTree(root, framework, version)  # validates the directory
    if not any(p.startswith(("aten/", "tensorflow/", "torch/")) for p in tree.list_files()[:5000]):
        raise InputError(f"{tree.root} does not look like a {framework} repository (no aten/, torch/ or tensorflow/)")
    entry = trees_dir(settings) / f"{framework}-{version}.json"
    atomic_write(entry, json.dumps({"framework": framework, "version": version, "path": str(tree.root.resolve())}))
    return entry


def registered_trees(settings: Settings, framework: str) -> dict[str, Path]:
    """version -> root of every tree registered with `sftl sources add` that still exists."""
    out: dict[str, Path] = {}
    folder = trees_dir(settings)
    if not folder.is_dir():
        return out
    for entry in sorted(folder.glob(f"{framework}-*.json")):
        try:
            data = json.loads(entry.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        root = Path(str(data.get("path", "")))
        if data.get("framework") == framework and root.is_dir():
            out[str(data.get("version"))] = root
    return out


_PY_VERSION = re.compile(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", re.M)
_TF_SETUP_VERSION = re.compile(r"""^_VERSION\s*=\s*['"]([^'"]+)['"]""", re.M)


def tree_python_release(tree: LocalTree) -> str | None:
    """The release of a tree's Python package as it says itself (`torch/version.py`, written by the build
    into wheels and built checkouts; TensorFlow's `tools/pip_package/setup.py`, which its wheels carry too, else
    its `core/public/version.h`); None when the tree does not say."""
    if tree.framework == "tensorflow":
        m = _TF_SETUP_VERSION.search(tree.read_text("tensorflow/tools/pip_package/setup.py") or "")
        if m:
            return m.group(1)
        header = tree.read_text("tensorflow/core/public/version.h") or ""
        parts = [re.search(rf"#define TF_{k}_VERSION (\d+)", header) for k in ("MAJOR", "MINOR", "PATCH")]
        return ".".join(x.group(1) for x in parts if x) if all(parts) else None
    if tree.framework != "pytorch":
        return None
    text = tree.read_text("torch/version.py")
    m = _PY_VERSION.search(text or "")
    return m.group(1) if m else None


def tree_cxx_release(tree: LocalTree) -> str | None:
    """The release of a tree's C++ (`version.txt` at its root, '1.13.0a0' -> '1.13.0'); where the C++ folders
    are links into another tree (a composed tree), that tree's `version.txt`. None when neither says."""
    if tree.framework != "pytorch":
        return None
    candidates = [tree.root / "version.txt"]
    for folder in ("aten", "c10"):
        linked = tree.root / folder
        if linked.is_symlink():
            candidates.append(linked.resolve().parent / "version.txt")
    for path in candidates:
        try:
            number = base_release(path.read_text(encoding="utf-8").strip())
        except OSError:
            continue
        if number:
            return number
    return None


def open_local_tree(
    root: str | Path, framework: str, version: str | None = None, cache_dir: str | Path | None = None
) -> SourceProvider:
    """A tree given as `--source-root`: a `LocalTree`, at the report's `version` (else the release its Python
    package names). A tree whose Python files are of another release than its C++ (a release's wheel unpacked
    over the nearest tree: torch/version.py 1.9.0 over version.txt 1.13.0) is layered as the cache layers that
    wheel over that tree: the Python files (and compiled libraries) as a layer of their release, over the
    tree's C++ as a layer of its own, so release-aware localizers see which release each file is of."""
    framework = normalize_framework(framework)
    tree = LocalTree(root, framework, version, cache_dir=cache_dir)
    python_release = tree_python_release(tree)
    reported = version or python_release
    tree.version = reported
    cxx_release = tree_cxx_release(tree)
    own = base_release(python_release)
    # a whole wheel unpacked in the tree keeps its headers (and TF 2.0's package) at wheel paths: read them at
    # the repository's, as a wheel is read, and hide the wheel paths
    files = tree.list_files()
    # and its metadata (torch-1.9.0.dist-info/RECORD names every file: no source of the repository)
    hide = WHEEL_ONLY.get(framework, ()) + tuple(sorted(
        {p.split("/", 1)[0] + "/" for p in files if p.split("/", 1)[0].endswith((".dist-info", ".data"))}))
    unpacked = any(p.startswith(hide) for p in files)
    if own is None or cxx_release is None or own == cxx_release:
        if not unpacked:
            return tree
        shown = LocalTree(root, framework, reported, cache_dir=cache_dir, hide=hide)
        layered = LayeredSource([shown, WheelFilesIn(tree, reported)])
        layered.version = reported
        layered.description = f"local tree {tree.root} (an unpacked wheel's headers read at their repository paths)"
        return layered
    # the Python files stand for the report's release when they are of its number, else for its era
    same = version is None or base_release(version) == own
    py_version = reported if same else python_release
    cxx = LocalTree(root, framework, cxx_release, cache_dir=cache_dir, hide=hide if unpacked else ())
    python = ReleaseFiles(cxx, py_version, f"Python files of {framework} {python_release} in {tree.root}")
    # the tree's C++ wins over the wheel's headers (consistent with its own kernels), as the cache layers them;
    # without them, a TH-era release's header declarations from sftl's bundled index (its THC functions and functors)
    headers: list[WheelFilesIn | release_index.DeclaredHeaders] = [WheelFilesIn(tree, py_version)] if unpacked else []
    successors: list[release_index.DeclaredHeaders] = []
    if not headers and (declared := release_index.declared_headers(framework, py_version)) is not None:
        headers = [declared]  # and the next indexed release's, for op history (as the cache keeps a later wheel)
        successors = [n for n in [release_index.declared_headers_after(framework, py_version)] if n is not None]
    layered = LayeredSource([python, cxx, *headers], successors=successors)
    layered.version = reported
    layered.era_release = None if same else python_release
    layered.description = (f"local tree {tree.root}: Python files of {framework} {python_release} (torch/version.py)"
                           + (" and its wheel's headers" if unpacked else f" and {headers[0].description}" if headers else "")
                           + f" over the C++ of {cxx_release} (version.txt)")
    return layered


def open_source(
    framework: str,
    version: str | None,
    settings: Settings,
    source_root: str | Path | None = None,
    offline: bool = False,
    created_at: str | None = None,
    needs_cxx: bool | None = None,
) -> SourceProvider:
    """The best source of the release's files: `source_root`, else what is cached, else downloaded.

    The reporter's version is read by `sftl.releases.resolve` (a local build, a source build's
    commit, a nightly's night, a development branch's date) into a git ref. Order: a tree
    registered for that very release (`sftl sources add`: a local tree of the right release wins);
    the release's extracted archive in the cache; for a missing-module error (`needs_cxx` False) the
    release's cached wheel; online, the archive downloaded (one request, `sftl.sources.archive`);
    then what older sftl cached (a GitHub tree, wheels, the nearest registered tree, layered as
    `_open_cached` says). A wheel is never downloaded here. Offline with nothing raises SourceError
    naming exactly what is missing and the one command that fetches it. A report with no version
    (`version` None) is read at the commit current when it was filed (online), or at the release
    current then (offline, `release_at`); the description says so.
    """
    from sftl.releases import resolve
    from sftl.sources.archive import cached_archive, fetch_archive

    framework = normalize_framework(framework)
    if source_root is not None:
        return open_local_tree(source_root, framework, version, cache_dir=settings.cache_dir)
    offline = offline or settings.offline
    if not version and created_at and offline:  # the commit an online run looked up, when its archive is cached
        try:
            res = resolve(framework, None, settings, created_at=created_at, offline=True)
        except SourceError:
            res = None
        found = cached_archive(settings, framework, res.ref, res.version, res.reason) if res and res.is_commit else None
        if found is not None:
            return found
    if not version and (offline or not created_at):
        inferred = release_at(framework, created_at) if created_at else None
        if inferred and created_at:
            provider = open_source(framework, inferred, settings, offline=True, needs_cxx=needs_cxx)
            provider.description += f" (the report names no version: {inferred} was current on {created_at[:10]})"
            return provider
        raise SourceError(f"the report names no {framework} version, so no source of the right release can be chosen")
    res = resolve(framework, version, settings, created_at=created_at, offline=offline)
    release = res.version
    keys = [k for k in dict.fromkeys([version, release]) if k]
    trees = registered_trees(settings, framework)
    if not res.is_commit:
        for key in keys:
            if key in trees:
                return LocalTree(trees[key], framework, release or key, cache_dir=settings.cache_dir)
    archive = cached_archive(settings, framework, res.ref, release, res.reason)
    if archive is not None:
        return archive
    if res.series and not any(cached_wheel(settings, framework, key) for key in keys):
        # '1.10' names a line: a cached 1.10.z serves it, offline and before any download (what it holds
        # must do: C++ for a discrepancy online; anything offline, the nearest tree layered as usual)
        # (the pipeline asks the cache first with offline=True while online: a wheel of the line serves a
        # discrepancy only when sftl really is offline, else the line's archive is worth its download)
        same = cached_release_of_line(settings, framework, res.series, created_at,
                                      kernels_only=needs_cxx is not False and not settings.offline)
        if same is not None and same != release:
            provider = open_source(framework, same, settings, offline=True, needs_cxx=needs_cxx)
            provider.description += (f" ({version} names the {res.series} line: read the cached {same}, not "
                                     f"{release or res.ref} [{res.reason}])")
            return provider
    if needs_cxx is False and not offline and res.exact and not res.is_commit:
        for key in keys:  # a missing-module error needs Python files only: the release's cached wheel spares a download
            wheel = cached_wheel(settings, framework, key)
            if wheel is not None:
                try:
                    return WheelSource(wheel, framework, key)
                except SourceError:
                    break  # a broken wheel: the archive (or the message of what to do) below
    problem: SourceError | None = None
    if not offline:
        try:
            return fetch_archive(settings, framework, res.ref, release, res.reason)
        except SourceError as exc:
            problem = exc
    for key in keys:
        older = _open_cached(framework, key, settings)
        if older is not None:
            return older
    if problem is not None:
        raise problem
    spec = f"{framework}=={release}" if res.exact and not res.is_commit and release else f"{framework}=={version}"
    spec = shlex.quote(spec)
    want = {True: "its C++/CUDA kernels", False: "its Python files", None: "its C++/CUDA kernels and Python files"}
    raise SourceError(
        f"no cached sources of {framework} at {res.ref} ({want[needs_cxx]}; offline) [{res.reason}]; "
        f"run `sftl sources fetch {spec}` once online (one archive of about "
        f"{archive_estimate_mb(framework)} MB), or give a local checkout: "
        f"`sftl sources add {framework}=={release or version} DIR` once, or --source-root DIR"
    )


def cached_release_of_line(
    settings: Settings, framework: str, line: str, until: str | None = None, kernels_only: bool = False
) -> str | None:
    """The newest cached X.Y.z release of the line 'X.Y' (a registered tree, an extracted archive or, unless
    `kernels_only`, a wheel), preferring those out by `until` (the report's date)."""
    from sftl.releases import release_dates
    from sftl.sources.archive import list_archives

    framework = normalize_framework(framework)
    found: set[str] = set(registered_trees(settings, framework))
    found.update(info.version for _, info in list_archives(settings) if info.framework == framework and info.version)
    wheels = sources_cache(settings) / "wheels"
    if not kernels_only and wheels.is_dir():
        for folder in wheels.glob(f"{framework}-*"):
            number = folder.name.partition("-")[2]
            if cached_wheel(settings, framework, number) is not None:
                found.add(number)
    mine = [v for v in found if re.fullmatch(r"\d+\.\d+\.\d+", v) and v.split(".")[:2] == line.split(".")[:2]]
    if not mine:
        return None
    dates = dict(release_dates(framework))
    day = (until or "")[:10]
    out_by = [v for v in mine if day and v in dates and dates[v] <= day]
    return max(out_by or mine, key=version_key)


def archive_estimate_mb(framework: str) -> int:
    from sftl.sources.archive import ESTIMATED_BYTES

    return ESTIMATED_BYTES[framework] // 1_000_000


def _open_cached(framework: str, version: str, settings: Settings) -> SourceProvider | None:
    """What earlier sftl releases cached for `version` (never a download): the cached GitHub C++ tree
    layered over the cached wheel; when that holds no C++ sources, the registered tree of the NEAREST
    release is layered first, and the provider's description says so. None when nothing is cached."""
    offline = True
    trees = registered_trees(settings, framework)
    if version in trees:
        return LocalTree(trees[version], framework, version, cache_dir=settings.cache_dir)
    layers: list[SourceProvider] = []
    github = GitHubSource(framework, version, settings.with_overrides(offline=True) if offline else settings)
    if github.tree_cached and github.cached_file_count():
        layers.append(github)
    wheel = cached_wheel(settings, framework, version)
    if wheel is not None:
        try:
            layers.append(WheelSource(wheel, framework, version))
        except SourceError as exc:  # a broken download in the cache: say how to replace it
            raise SourceError(f"{exc}; delete it and run `sftl sources fetch {framework}=={version}` again") from exc
    near = nearest_version(version, trees) if not layers or layers[0] is not github else None
    if near is not None:
        tree = LocalTree(trees[near], framework, near, cache_dir=settings.cache_dir)
        # no wheel of the report's release (none on the registry for 0.4.x, or offline): the cached wheel
        # of the release nearest it, when nearer than the tree, stands for the report's era (its headers
        # tell how an op was bound then); it never stands for the report's own Python files
        era: SourceProvider | None = None
        if wheel is None:
            era_wheel = _nearest_cached_wheel(settings, framework, version, near)
            if era_wheel is not None:
                try:
                    era = WheelSource(era_wheel, framework, _cached_release(era_wheel))
                except SourceError:
                    era = None  # an unreadable wheel only loses that stand-in
        era_release = era.version if era is not None else None
        # the next cached release, between the report's and the tree's: tells when an op's code moved
        later = next_cached_wheel(settings, framework, era_release or version, near) if layers or era else None
        successors: list[SourceProvider] = []
        if later is not None:
            try:
                successors.append(WheelSource(later, framework, _cached_release(later)))
            except SourceError:
                pass  # an unreadable later wheel only loses that hint
        # the report's own Python files win over the stand-in's (an MME is about that release's code);
        # the stand-in's C++ wins, to stay consistent with its own kernels and yaml
        # and so do the era wheel's (a release nearer the report's than the tree's): Python files are read
        # from the release nearest the report first, whatever layer holds the C++
        own_python: list[SourceProvider] = [PythonFilesOf(p) for p in [*layers, *([era] if era else [])]]
        layered = LayeredSource([*own_python, tree, *layers, *([era] if era else [])], successors=successors)
        layered.version = version
        layered.era_release = era_release
        layered.description = (
            f"nearest registered tree {framework} {near} at {tree.root} (no C++ sources of {version} cached)"
            + (f" + {' + '.join(p.description for p in layers)}" if layers else "")
            + (f" + nearest cached {era.description} standing for {version}'s era (no wheel of {version})" if era else "")
            + (f" (later release consulted for op history: {successors[0].description})" if successors else "")
        )
        return layered
    if not layers:
        return None
    return layers[0] if len(layers) == 1 else LayeredSource(layers)


_KERNEL_SUFFIXES = (".cu", ".cpp", ".cc", ".cu.cc")


def holds_kernel_sources(source: SourceProvider) -> bool:
    """True when the provider holds C++/CUDA kernel files (.cu/.cpp/.cc under the kernel folders), which wheels lack."""
    prefixes = CXX_PREFIXES.get(source.framework, ())
    return any(p.startswith(prefixes) and p.endswith(_KERNEL_SUFFIXES) for p in source.list_files())


def nearest_kernel_source(settings: Settings, framework: str, release: str | None) -> SourceProvider | None:
    """The registered tree or cached release archive nearest `release` (None: the newest) that holds C++
    kernels; never a download. A tree wins over an archive of the same release."""
    from sftl.sources.archive import cached_archive, list_archives

    framework = normalize_framework(framework)
    found: dict[str, SourceProvider] = {}
    for _folder, info in list_archives(settings):
        number = info.version or ""
        if info.framework == framework and re.fullmatch(r"\d+\.\d+(?:\.\d+)?", number) and number not in found:
            archive = cached_archive(settings, framework, info.ref, number, info.reason)
            if archive is not None:
                found[number] = archive
    for number, root in registered_trees(settings, framework).items():
        if re.fullmatch(r"\d+\.\d+(?:\.\d+)?", number):
            found[number] = LocalTree(root, framework, number, cache_dir=settings.cache_dir)
    if not found:
        return None
    best = nearest_version(release, found) if release else max(found, key=version_key)
    return found[best] if best is not None else None


def with_nearest_kernels(
    source: SourceProvider, settings: Settings, release: str | None, fetch_version: str | None = None
) -> tuple[SourceProvider, str]:
    """`source` when it holds C++ kernels; else its own Python files over the C++ of the nearest registered
    tree or cached archive of another release (`release`: the report's, or the one standing for it), with a
    note naming that release; `source` unchanged and a note of the one command that fetches the report's
    own (`fetch_version`, as `sftl sources fetch` reads it) when no release's C++ is at hand."""
    if holds_kernel_sources(source):
        return source, ""
    framework = source.framework
    shown = (release or "").split("+", 1)[0] or None
    stand_in = nearest_kernel_source(settings, framework, shown)
    if stand_in is None:
        spec = shlex.quote(f"{framework}=={fetch_version or shown or 'VERSION'}")
        checkout = shlex.quote(f"{framework}=={shown or 'VERSION'}")
        return source, (f"no C++/CUDA kernel sources of {framework} {shown or ''} at hand, nor of any other release; "
                        f"`sftl sources fetch {spec}` fetches them (one archive, online); a checkout serves too: "
                        f"`sftl sources add {checkout} DIR` once, or --source-root DIR").replace("  ", " ")
    layered = LayeredSource([PythonFilesOf(source), stand_in, source])
    layered.version = source.version
    note = (f"C++/CUDA of {framework} {stand_in.version}, another release than the one read for the report "
            f"({shown or 'unknown'}), whose kernels are not at hand")
    layered.description = f"{source.description} (Python files) + {stand_in.description} (C++/CUDA of {stand_in.version})"
    return layered, note


def _nearest_cached_wheel(settings: Settings, framework: str, version: str, tree_release: str) -> Path | None:
    """The cached wheel of the release nearest `version`, when it is nearer than the stand-in tree's release."""
    root = sources_cache(settings) / "wheels"
    if not root.is_dir():
        return None
    cached = {folder.name.partition("-")[2]: folder for folder in root.glob(f"{framework}-*")}
    cached = {v: f for v, f in cached.items() if v != tree_release and cached_wheel(settings, framework, v) is not None}
    best = nearest_version(version, cached)
    if best is None or nearest_version(version, [best, tree_release]) != best:
        return None
    return cached_wheel(settings, framework, best)


def _cached_release(wheel: Path) -> str | None:
    """The release a cached wheel is filed under (wheels/<framework>-<version>/), whatever the file's own name."""
    return wheel.parent.name.partition("-")[2] or None


def next_cached_wheel(settings: Settings, framework: str, after: str, before: str | None = None) -> Path | None:
    """The cached wheel of the nearest release later than `after` (and earlier than `before`); never fetched."""
    root = sources_cache(settings) / "wheels"
    if not root.is_dir():
        return None
    lo, hi = version_key(after), version_key(before) if before else None
    found: list[tuple[tuple[int, ...], Path]] = []
    for folder in root.glob(f"{framework}-*"):
        key = version_key(folder.name.partition("-")[2])
        wheel = cached_wheel(settings, framework, folder.name.partition("-")[2])
        if wheel is not None and key > lo and (hi is None or key < hi):
            found.append((key, wheel))
    return min(found)[1] if found else None


# built on the above, re-exported here: the sources for one report (its release read, then the best provider of
# it) and the wheel download (moved to sftl/sources/wheels.py)
from sftl.sources.for_report import ReportSources, sources_for_report  # noqa: E402
from sftl.sources.wheels import candidate_pythons, fetch_wheel, run_command  # noqa: E402

__all__ = [
    "NATIVE_FUNCTIONS", "ReportSources", "SitePackages", "candidate_pythons", "fetch_wheel", "iter_texts", "parse_spec",
    "repo_path", "run_command", "sources_for_report",
]
