"""Replay environments: the release specs in envs/, version matching, the current environment and the interpreters at hand.

Building, caching and pruning environments (venv and conda commands, period caps, lockfiles, `EnvManager`)
lives in `sftl.envs_build`: this module says which environment a report needs, that one makes it.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sftl.config import Settings
from sftl.errors import EnvError, InputError

ENVS_DIR = Path(__file__).resolve().parent.parent / "envs"
META_FILE = "sftl-env.json"
USED_FILE = ".sftl-used"  # touched whenever a replay uses the environment
CONDA_KINDS = ("micromamba", "mamba", "conda")  # preference order when several are on PATH

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader when libyaml is there: 10x faster

_FRAMEWORKS = {
    "pytorch": "pytorch",
    "torch": "pytorch",
    "tensorflow": "tensorflow",
    "tf": "tensorflow",
    "tensorflow-gpu": "tensorflow",
    "tensorflow-cpu": "tensorflow",
    "tf-nightly": "tensorflow",
    "tf-nightly-gpu": "tensorflow",
}
# the distribution names under which an installed framework shows up
DISTRIBUTIONS = {
    "pytorch": ("torch",),
    "tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly", "tensorflow-intel"),
}
IMPORT_NAMES = {"pytorch": "torch", "tensorflow": "tensorflow"}
# the distribution that provides a module, where the names differ
DIST_OF_MODULE = {
    "sklearn": "scikit-learn", "PIL": "pillow", "cv2": "opencv-python", "yaml": "pyyaml", "skimage": "scikit-image",
    "tensorboardX": "tensorboardx", "absl": "absl-py", "torch.utils.tensorboard": "tensorboard",
    "tensorflow_probability": "tensorflow-probability", "tensorflow_datasets": "tensorflow-datasets",
    "tensorflow_addons": "tensorflow-addons", "tensorflow_hub": "tensorflow-hub", "tensorflow_text": "tensorflow-text",
    "tf_slim": "tf-slim", "tf_keras": "tf-keras", "huggingface_hub": "huggingface-hub",
    "pytorch_lightning": "pytorch-lightning", "google": "protobuf", "opt_einsum": "opt-einsum",
    "keras_applications": "keras-applications", "keras_preprocessing": "keras-preprocessing",
}
# frameworks a snippet may import that are never installed beside another
FRAMEWORK_MODULES = ("torch", "tensorflow", "jax", "jaxlib", "mxnet", "paddle")


def normalize_framework(name: str | None) -> str:
    """'torch', 'PyTorch', 'tf', 'tensorflow-gpu' ... -> 'pytorch' | 'tensorflow'."""
    key = (name or "").strip().lower()
    if key not in _FRAMEWORKS:
        raise InputError(f"unknown framework {name!r}: use pytorch or tensorflow")
    return _FRAMEWORKS[key]


# -- the catalogue of releases -----------------------------------------------------------------


@dataclass(frozen=True)
class Release:
    """One minor release line with its conda spec file (envs/<framework>-<minor>.yml)."""

    framework: str
    minor: str  # "1.13"
    patches: tuple[str, ...]
    pythons: tuple[str, ...]  # CPython minors the release supports, oldest first
    numpy: str
    scipy: str
    pip: str  # the pip requirement of the latest patch, e.g. "torch==1.13.1"
    spec_path: Path
    dates: tuple[tuple[str, str], ...] = ()  # (patch, the day the index first served it)
    prereleases: tuple[str, ...] = ()  # release candidates the index serves ("2.6.0rc1")
    python: str = ""  # the Python most of its users ran (generated: out a year when the release came out)

    @property
    def key(self) -> tuple[int, int]:
        major, minor = self.minor.split(".")
        return int(major), int(minor)

    @property
    def spec_python(self) -> str:
        return self.python or self.pythons[-1]

    def python_order(self, wanted: str | None = None) -> list[str]:
        """The Pythons to build with, in order: the report's own when served, the release's preferred,
        then the rest newest first."""
        first = [p for p in (wanted, self.spec_python) if p and p in self.pythons]
        return list(dict.fromkeys(first + sorted(self.pythons, key=lambda v: tuple(int(x) for x in v.split(".")),
                                                 reverse=True)))

    @property
    def dist(self) -> str:
        """The distribution holding the CPU build ("tensorflow" up to 2.0, "tensorflow-cpu" from 2.1)."""
        return self.pip.split("==")[0]

    def released(self, version: str) -> str | None:
        """The day `version` was first served (ISO), from the index's metadata."""
        day = dict(self.dates).get(version)
        if day is None and version in self.prereleases:
            day = self.dates[0][1] if self.dates else None
        return day

    def pip_requirements(self, version: str) -> tuple[str, ...]:
        """What `pip install` needs for this exact patch; numpy and the rest are capped by period_constraints()."""
        return (f"{self.dist}=={version}", "numpy")

    def spec(self) -> dict[str, Any]:
        data = yaml.safe_load(self.spec_path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}


@dataclass(frozen=True)
class Catalog:
    releases: tuple[Release, ...]
    root: Path

    def of(self, framework: str) -> list[Release]:
        fw = normalize_framework(framework)
        return sorted((r for r in self.releases if r.framework == fw), key=lambda r: r.key)

    def lockfile(self, release: Release) -> Path:
        return self.root / "locks" / f"{release.framework}-{release.minor}.conda-lock.yml"


def load_catalog(root: Path | None = None) -> Catalog:
    """Read envs/index.yml and check that every spec it names exists."""
    root = root or ENVS_DIR
    index_path = root / "index.yml"
    try:
        index = yaml.load(index_path.read_text(encoding="utf-8"), Loader=_LOADER)
    except (OSError, yaml.YAMLError) as exc:
        raise EnvError(f"cannot read the environment index {index_path}: {exc}") from exc
    releases = []
    for framework, table in (index.get("frameworks") or {}).items():
        for minor, row in table.items():
            spec_path = root / row["spec"]
            if not spec_path.exists():
                raise EnvError(f"{index_path} names {row['spec']}, which does not exist")
            releases.append(
                Release(
                    framework=framework,
                    minor=str(minor),
                    patches=tuple(str(p) for p in row["patches"]),
                    pythons=tuple(str(p) for p in row["pythons"]),
                    numpy=str(row["numpy"]),
                    scipy=str(row["scipy"]),
                    pip=str(row["pip"]),
                    spec_path=spec_path,
                    dates=tuple((str(k), str(v)) for k, v in (row.get("dates") or {}).items()),
                    prereleases=tuple(str(p) for p in row.get("prereleases") or ()),
                    python=str(row.get("python") or ""),
                )
            )
    return Catalog(tuple(releases), root)


# -- version resolution --------------------------------------------------------------------------

_VERSION_RE = re.compile(
    r"""^\s*[vr]?(?P<release>\d+(?:\.\d+){0,3})
        (?P<pre>(?:[-_.]?(?:a|alpha|b|beta|rc|c|dev|nightly|pre|preview)[-_.]?\d*)*)
        (?P<post>(?:[-_.]?post\d*)?)
        (?:\+(?P<local>[A-Za-z0-9_.]+))?""",
    re.X | re.I,
)


@dataclass(frozen=True)
class ParsedVersion:
    text: str
    release: tuple[int, ...]
    pre: str  # "" | "rc1" | "dev20230601" | "a0" ...
    local: str  # "" | "cu113" | "cpu" | "git1234abc"

    @property
    def base(self) -> str:
        return ".".join(str(p) for p in self.release)

    @property
    def minor(self) -> tuple[int, int]:
        return (self.release[0], self.release[1] if len(self.release) > 1 else 0)

    @property
    def patch_tuple(self) -> tuple[int, int, int]:
        r = self.release + (0, 0, 0)
        return (r[0], r[1], r[2])


def parse_version(text: str) -> ParsedVersion:
    """'1.12.1+cu113', '2.1.0.dev20230601', '2.0.0rc1', '1.14.0a0+gitabc' -> parts."""
    m = _VERSION_RE.match(text or "")
    if not m:
        raise InputError(f"cannot read a version from {text!r}")
    release = tuple(int(p) for p in m.group("release").split("."))
    pre = re.sub(r"[-_.]", "", m.group("pre") or "").lower()
    return ParsedVersion(text.strip(), release, pre, (m.group("local") or "").lower())


def _vt(version: str) -> tuple[int, int, int]:
    return parse_version(version).patch_tuple


@dataclass(frozen=True)
class Resolution:
    """Which release replays a report's version, and why."""

    framework: str
    requested: str | None
    version: str  # the published patch release sftl will use
    release: Release
    match: str  # "exact" | "same-minor" | "nearest" | "latest"
    why: str


def _local_note(local: str) -> str:
    if not local:
        return ""
    m = re.fullmatch(r"cu(\d+)(\d)", local)
    if m:
        return f"local build +{local} (CUDA {m.group(1)}.{m.group(2)}) is the same source as the release; "
    if local == "cpu":
        return "local build +cpu is the same source as the release; "
    if local.startswith("git"):
        return f"source build +{local}; "
    return f"local build +{local}; "


_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


def named_date(text: str | None) -> str | None:
    """The day a version text names ('master (Feb 2017)' -> 2017-02-15, 'main (2025-09-27)', '2018 thread' -> 2018-07-01)."""
    if not text:
        return None
    m = re.search(r"\b(20\d\d)-(\d\d)(?:-(\d\d))?\b", text)
    if m:
        return f"{m.group(1)}-{m.group(2)}-{m.group(3) or '15'}"
    m = re.search(r"\b(" + "|".join(_MONTHS) + r")[a-z]*\.?,?\s+(20\d\d)\b", text, re.I)
    if m:
        return f"{m.group(2)}-{_MONTHS.index(m.group(1).lower()[:3]) + 1:02d}-15"
    m = re.search(r"\b(20[12]\d)\b", text)
    return f"{m.group(1)}-07-01" if m else None


def release_on(catalog: Catalog, framework: str, day: str) -> tuple[Release, str] | None:
    """The newest release the index served on `day` (ISO): (its minor release, the patch)."""
    best: tuple[str, Release, str] | None = None
    for release in catalog.of(framework):
        for patch, served in release.dates:
            if served <= day and (best is None or _vt(patch) > _vt(best[2])):
                best = (served, release, patch)
    return (best[1], best[2]) if best else None


def next_minor(catalog: Catalog, framework: str, version: str) -> str | None:
    """The first patch of the minor release after `version`'s: what a development branch of its day became."""
    key = parse_version(version).minor
    later = [r for r in catalog.of(framework) if r.key > key]
    return later[0].patches[0] if later else None


def _readable(text: str) -> bool:
    try:
        parse_version(text)
    except InputError:
        return False
    return True


def resolve(catalog: Catalog, framework: str, requested: str | None, when: str | None = None) -> Resolution:
    """Exact patch, else the nearest patch of the same minor, else the nearest release; with reasons.

    A version named by a date only ('master (Feb 2017)', 'nightly (June 2023)'), or none at all when
    `when` (the day the report was filed, ISO) is known, replays on the release current that day.
    """
    fw = normalize_framework(framework)
    releases = catalog.of(fw)
    if not releases:
        raise EnvError(f"no environment specs for {fw} in {catalog.root}")
    text = (requested or "").strip()
    if not text or not _readable(text):
        day = named_date(text) or (when[:10] if when else None)
        current = release_on(catalog, fw, day) if day else None
        named = f"names {text!r}, no release" if text else "names no version"
        source = "the date it names" if named_date(text) else "the day it was filed"
        if current is not None:
            then, version = current
            return Resolution(fw, requested, version, then, "dated",
                              f"the report {named}; {version} was the newest {fw} release on {day} ({source})")
        if day is not None:  # older than every release the index serves for the Pythons sftl builds with
            first = releases[0]
            return Resolution(fw, requested, first.patches[0], first, "nearest",
                              f"the report {named}; on {day} ({source}) {fw} had no release the index serves "
                              f"for CPython 3.6+; the earliest is {first.patches[0]}")
    if not text:
        latest = releases[-1]
        return Resolution(fw, requested, latest.patches[-1], latest, "latest",
                          f"the report names no {fw} version; using the latest spec {latest.patches[-1]}")
    pv = parse_version(text)
    note = _local_note(pv.local)
    by_minor = {r.key: r for r in releases}
    if pv.pre and pv.pre != "post":
        kind = "nightly/dev build" if ("dev" in pv.pre or "nightly" in pv.pre) else (
            "release candidate" if pv.pre.startswith(("rc", "c")) else "pre-release")
        note += f"{pv.text} is a {kind} of {pv.base}; "
    release = by_minor.get(pv.minor)
    if release is not None and pv.pre and f"{pv.base}{pv.pre}" in release.prereleases:
        served = f"{pv.base}{pv.pre}"
        return Resolution(fw, requested, served, release, "exact", _local_note(pv.local) + f"exact pre-release {served}")
    if release is not None:
        if len(pv.release) < 3 and not pv.pre:
            version = release.patches[-1]
            return Resolution(fw, requested, version, release, "same-minor",
                              note + f"the report names {pv.base} only; using its latest patch {version}")
        if pv.base in release.patches or (len(pv.release) == 3 and f"{pv.base}" in release.patches):
            if pv.pre:
                return Resolution(fw, requested, pv.base, release, "nearest",
                                  note + f"replaying on the {pv.base} release, the build it became")
            return Resolution(fw, requested, pv.base, release, "exact", note + f"exact release {pv.base}")
        target = pv.patch_tuple
        version = min(release.patches, key=lambda p: (abs(_vt(p)[2] - target[2]), -_vt(p)[2]))
        return Resolution(fw, requested, version, release, "same-minor",
                          note + f"{pv.base} has no spec; nearest patch of {release.minor} is {version}")
    # no spec for this minor: a pre-release becomes the first release after it, else the closest release
    if pv.pre:
        later = [r for r in releases if r.key > pv.minor]
        if later:
            chosen = later[0]
            version = chosen.patches[0]
            return Resolution(fw, requested, version, chosen, "nearest",
                              note + f"{pv.base} was never released; {version} is the first release after it")
    chosen = min(releases, key=lambda r: (abs(r.key[0] * 100 + r.key[1] - (pv.minor[0] * 100 + pv.minor[1])), -r.key[1]))
    version = chosen.patches[-1] if chosen.key < pv.minor else chosen.patches[0]
    return Resolution(fw, requested, version, chosen, "nearest",
                      note + f"no {fw} {pv.minor[0]}.{pv.minor[1]} spec; nearest release is {version}")


# -- environments and backends -------------------------------------------------------------------


@dataclass(frozen=True)
class EnvHandle:
    """A usable environment: an interpreter that imports the framework at `version`."""

    name: str
    backend: str  # "current" | "venv" | "conda" | "mamba" | "micromamba"
    python: Path  # the interpreter to run the harness with
    python_version: str  # "3.11"
    framework: str
    version: str
    path: Path | None = None  # the environment's folder (None for `current`)
    reason: str = ""


def installed_version(framework: str) -> str | None:
    """The framework version installed in THIS interpreter (read from metadata; nothing imported)."""
    for dist in DISTRIBUTIONS[normalize_framework(framework)]:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def current_env(framework: str, version: str) -> EnvHandle:
    """The running interpreter, when its framework release equals `version` (local tag ignored)."""
    fw = normalize_framework(framework)
    have = installed_version(fw)
    if have is None:
        raise EnvError(f"the current interpreter has no {fw} installed")
    if parse_version(have).base != parse_version(version).base:
        raise EnvError(f"the current interpreter has {fw} {have}, not {version}")
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    return EnvHandle("current", "current", Path(sys.executable), py, fw, parse_version(have).base,
                     None, f"the running interpreter ({sys.executable}) has {fw} {have}")


def _pyenv_root(settings: Settings) -> Path:
    env = settings.base_env
    if env.get("PYENV_ROOT"):
        return Path(env["PYENV_ROOT"])
    return Path(env.get("HOME") or "~").expanduser() / ".pyenv"


def find_interpreters(settings: Settings, pythons: tuple[str, ...] | list[str]) -> list[tuple[Path, str, str]]:
    """Interpreters for `pythons`, newest minor first, from PATH, pyenv or uv: [(path, X.Y, where)]."""
    path_dirs = [d for d in settings.base_env.get("PATH", os.defpath).split(os.pathsep) if d]
    pyenv_versions = _pyenv_root(settings) / "versions"
    uv = shutil.which("uv", path=os.pathsep.join(path_dirs))
    found: list[tuple[Path, str, str]] = []
    for py in sorted(pythons, key=lambda v: tuple(int(x) for x in v.split(".")), reverse=True):
        hit = _interpreter(py, path_dirs, pyenv_versions, uv, settings)
        if hit is not None:
            found.append(hit)
    return found


def _interpreter(py: str, path_dirs: list[str], pyenv_versions: Path, uv: str | None,
                 settings: Settings) -> tuple[Path, str, str] | None:
    for d in path_dirs:
        if "/shims" in d:  # pyenv shims dispatch on the pyenv version setting; use real installs
            continue
        cand = Path(d) / f"python{py}"
        if cand.is_file() and os.access(cand, os.X_OK):
            return cand, py, f"PATH ({cand})"
    if pyenv_versions.is_dir():
        installs = sorted(
            (p for p in pyenv_versions.glob(f"{py}.*") if re.fullmatch(rf"{re.escape(py)}\.\d+", p.name)),
            key=lambda p: int(p.name.rsplit(".", 1)[1]),
        )
        for p in reversed(installs):
            exe = p / "bin" / "python"
            if exe.exists():
                return exe, py, f"pyenv ({p.name})"
    if uv:
        try:
            out = subprocess.run([uv, "python", "find", py], capture_output=True, text=True, timeout=20,
                                 env=settings.child_env(), check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if out.returncode == 0 and out.stdout.strip():
            return Path(out.stdout.strip()), py, "uv"
    return None


def find_interpreter(settings: Settings, pythons: tuple[str, ...] | list[str]) -> tuple[Path, str, str] | None:
    """The newest interpreter among `pythons`: (path, X.Y, where)."""
    found = find_interpreters(settings, pythons)
    return found[0] if found else None


def find_conda(settings: Settings) -> tuple[str, Path] | None:
    """micromamba, mamba or conda on PATH: (kind, path)."""
    path = settings.base_env.get("PATH", os.defpath)
    for kind in CONDA_KINDS:
        exe = shutil.which(kind, path=path)
        if exe:
            return kind, Path(exe)
    return None
