"""Replay environments: the release specs in envs/, version matching, and the conda/venv/current backends."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import time
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
_IMPORT_NAMES = {"pytorch": "torch", "tensorflow": "tensorflow"}
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


CONSTRAINTS_FILE = "sftl-constraints.txt"  # inside a venv: the caps it was built with
PACKAGES_FILE = "packages.json"  # envs/: the upload day of every release of the packages replays cap
PERIOD_DAYS = 30  # a release's day runs this long after its upload: what its users could install with it


# the last pip each old CPython runs (pip's own requires-python)
_PIP_FOR = {"3.6": "pip<22", "3.7": "pip<24.1", "3.8": "pip<25.1"}


def venv_commands(python: Path, prefix: Path, requirements: tuple[str, ...], constrained: bool = False,
                  python_version: str = "") -> list[list[str]]:
    """The commands that build a venv for a release (run in order); with `constrained`, pip reads the
    period caps from the venv's own sftl-constraints.txt (written by the build after the first command)."""
    py = str(prefix / "bin" / "python")
    quiet = ["--no-input", "--disable-pip-version-check", "-q"]
    caps = ["-c", str(prefix / CONSTRAINTS_FILE)] if constrained else []
    return [
        [str(python), "-m", "venv", str(prefix)],
        # the pip an old Python bundles (18.1 for 3.6) cannot read manylinux2010/2014 wheels: the newest it supports
        # (named: a find-links folder without requires-python would offer a pip the interpreter cannot run)
        [py, "-m", "pip", "install", *quiet, "--upgrade", _PIP_FOR.get(python_version, "pip")],
        [py, "-m", "pip", "install", *quiet, *caps, *requirements],
    ]


def tree_bytes(path: Path) -> int:
    """Bytes the files under `path` take (links not followed)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            total += st.st_blocks * 512 if hasattr(st, "st_blocks") else st.st_size
    return total


def load_package_dates(root: Path | None = None) -> dict[str, dict[str, str]]:
    """envs/packages.json: package -> {version: the day the index first served it} (generated)."""
    path = (root or ENVS_DIR) / PACKAGES_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _release_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version))


def period_cutoff(release: Release, version: str) -> str | None:
    """The last day of `version`'s period: the day it was served plus PERIOD_DAYS (ISO), or None."""
    import datetime

    day = release.released(version)
    if not day:
        return None
    return (datetime.date.fromisoformat(day) + datetime.timedelta(days=PERIOD_DAYS)).isoformat()


def version_of_the_day(dates: dict[str, str], cutoff: str) -> str | None:
    """The newest release served by `cutoff` (releases' own order, not upload order: backports)."""
    cands = [v for v, d in dates.items() if d <= cutoff]
    return max(cands, key=_release_key) if cands else None


def period_constraints(table: dict[str, dict[str, str]], cutoff: str, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """name -> the newest version served by `cutoff`, for every package of the table that had one."""
    out = {}
    for name, dates in sorted(table.items()):
        if name in skip:
            continue
        best = version_of_the_day(dates, cutoff)
        if best is not None:
            out[name] = best
    return out


def constraints_text(caps: dict[str, str], cutoff: str) -> str:
    lines = [f"# the newest release of each package served by {cutoff} (sftl: the release's day)"]
    lines += [f"{name}<={version}" for name, version in caps.items()]
    return "\n".join(lines) + "\n"


def conda_commands(
    kind: str, exe: Path, spec: Path, prefix: Path, lockfile: Path | None = None, pins: tuple[str, ...] = ()
) -> list[list[str]]:
    """The commands that build a conda-family environment: from the lockfile when there is one."""
    if lockfile is not None:
        if kind == "micromamba":  # reads conda-lock's unified lockfile directly
            return [[str(exe), "create", "--yes", "--prefix", str(prefix), "--file", str(lockfile)]]
        return [["conda-lock", "install", "--conda", str(exe), "--prefix", str(prefix), str(lockfile)]]
    if kind == "micromamba":
        cmd = [str(exe), "create", "--yes", "--prefix", str(prefix), "--file", str(spec)]
    else:
        cmd = [str(exe), "env", "create", "--yes", "--prefix", str(prefix), "--file", str(spec)]
    # an exact patch other than the spec's pin is requested through an extra match spec
    return [cmd] + ([[str(exe), "install", "--yes", "--prefix", str(prefix), *pins]] if pins else [])


def lock_command(spec: Path, lockfile: Path, conda: Path | None) -> list[str]:
    cmd = ["conda-lock", "lock", "--file", str(spec), "--platform", "linux-64", "--lockfile", str(lockfile)]
    if conda is not None:
        cmd += ["--conda", str(conda)]
    return cmd


@dataclass(frozen=True)
class LockedPackage:
    name: str
    version: str
    manager: str  # "conda" | "pip"
    platform: str
    url: str
    sha256: str | None


def parse_lockfile(path: Path) -> tuple[tuple[str, ...], tuple[LockedPackage, ...]]:
    """conda-lock's unified lockfile (version 1): (platforms, packages)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise EnvError(f"cannot read lockfile {path}: {exc}") from exc
    if not isinstance(data, dict) or "package" not in data or "metadata" not in data:
        raise EnvError(f"{path} is not a conda-lock lockfile (no metadata/package)")
    platforms = tuple(data["metadata"].get("platforms") or ())
    packages = tuple(
        LockedPackage(
            name=str(p["name"]),
            version=str(p["version"]),
            manager=str(p.get("manager", "conda")),
            platform=str(p.get("platform", "")),
            url=str(p.get("url", "")),
            sha256=(p.get("hash") or {}).get("sha256"),
        )
        for p in data["package"]
    )
    return platforms, packages


def render_lockfile(lockfile: Path, outdir: Path, settings: Settings, platform: str = "linux-64") -> Path:
    """`conda-lock render --kind explicit` (offline): the explicit list `conda create --file` takes."""
    exe = shutil.which("conda-lock", path=settings.base_env.get("PATH")) or str(Path(sys.executable).parent / "conda-lock")
    outdir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [exe, "render", "--kind", "explicit", "--platform", platform, "--filename-template",
         "conda-{platform}.lock", str(lockfile)],
        cwd=outdir, capture_output=True, text=True, timeout=120, env=settings.child_env(), check=False,
    )
    out = outdir / f"conda-{platform}.lock"
    if proc.returncode != 0 or not out.exists():
        raise EnvError(f"conda-lock render failed: {(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")
    return out


class EnvManager:
    """Environments cached under <home>/envs/<name>, built by the best backend available."""

    def __init__(self, settings: Settings, catalog: Catalog | None = None) -> None:
        self.settings = settings
        self.catalog = catalog or load_catalog()
        self.root = settings.home / "envs"

    # -- listing ----------------------------------------------------------------------------------

    def built(self) -> list[EnvHandle]:
        handles = []
        if self.root.is_dir():
            for meta_path in sorted(self.root.glob(f"*/{META_FILE}")):
                handle = self._load(meta_path.parent)
                if handle is not None:
                    handles.append(handle)
        return handles

    def _load(self, path: Path) -> EnvHandle | None:
        try:
            meta = json.loads((path / META_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        python = path / "bin" / "python"
        if not python.exists():
            return None
        return EnvHandle(meta["name"], meta["backend"], python, meta["python_version"], meta["framework"],
                         meta["version"], path, f"cached {meta['backend']} environment {meta['name']}")

    def get(self, name: str) -> EnvHandle:
        if name == "current":
            raise EnvError("'current' is not a named environment; use --env current")
        handle = self._load(self.root / name)
        if handle is None:
            raise EnvError(f"no environment named {name!r} (see 'sftl envs list')")
        return handle

    def backends(self) -> dict[str, str]:
        """Which backends work here, each with a reason (shown by `sftl envs list`)."""
        conda = find_conda(self.settings)
        interp = find_interpreter(self.settings, [f"3.{m}" for m in range(6, 14)])
        return {
            "current": f"{sys.executable} (python {sys.version_info.major}.{sys.version_info.minor})",
            "conda": f"{conda[0]} at {conda[1]}" if conda else "unavailable: no micromamba/mamba/conda on PATH",
            "venv": f"interpreters found (e.g. {interp[2]})" if interp else "unavailable: no python3.x on PATH, pyenv or uv",
        }

    # -- finding ----------------------------------------------------------------------------------

    def find(self, resolution: Resolution, env: str = "auto", build: bool = False,
             python: str | None = None) -> EnvHandle:
        """The environment a replay runs in; raises EnvError saying why there is none.

        `python` (X.Y, the report's) is preferred where the release serves it, then the release's own.
        """
        fw, version = resolution.framework, resolution.version
        if env == "current":
            return current_env(fw, version)
        if env not in ("auto", ""):
            handle = self.get(env)
            if handle.framework != fw:
                raise EnvError(f"environment {env} holds {handle.framework}, not {fw}")
            return handle
        reasons = []
        try:
            return current_env(fw, version)
        except EnvError as exc:
            reasons.append(str(exc))
        order = resolution.release.python_order(python)
        matching = [h for h in self.built() if h.framework == fw and h.version == version]
        matching.sort(key=lambda h: order.index(h.python_version) if h.python_version in order else len(order))
        if matching and (not build or matching[0].python_version == order[0]):
            self.touch(matching[0])
            return matching[0]
        reasons.append(f"no cached environment for {fw} {version} under {self.root}")
        if not build:
            raise EnvError("; ".join(reasons) + f" (build one with 'sftl envs create {fw}=={version}')")
        return self.create(resolution, python_order=order)

    # -- building ---------------------------------------------------------------------------------

    def plan(self, resolution: Resolution, backend: str = "auto",
             python: str | None = None) -> tuple[str, str, list[list[str]], Path, str]:
        """(backend, name, commands, prefix, python X.Y) for building an environment, or EnvError."""
        release, version = resolution.release, resolution.version
        conda = find_conda(self.settings) if backend in ("auto", "conda") else None
        if conda is not None:
            py = release.spec_python
            name = f"{resolution.framework}-{version}-py{py}-{conda[0]}"
            prefix = self.root / name
            lock = self.catalog.lockfile(release)
            pin = [f"pytorch={version}"] if resolution.framework == "pytorch" else []
            pins = tuple(pin) if version != release.patches[-1] else ()
            use_lock = lock if lock.exists() and not pins else None
            return conda[0], name, conda_commands(conda[0], conda[1], release.spec_path, prefix, use_lock, pins), prefix, py
        if backend == "conda":
            raise EnvError("no micromamba/mamba/conda on PATH")
        interp = None
        for py_version in [python] if python else release.python_order():
            interp = find_interpreter(self.settings, [py_version])
            if interp is not None:
                break
        if interp is None:
            raise EnvError(
                f"no Python {'/'.join(release.pythons)} interpreter (PATH, pyenv, uv) for "
                f"{resolution.framework} {version}, and no conda/mamba/micromamba on PATH"
            )
        exe, py, _ = interp
        name = f"{resolution.framework}-{version}-py{py}-venv"
        prefix = self.root / name
        cutoff = period_cutoff(release, version)
        return "venv", name, venv_commands(exe, prefix, release.pip_requirements(version), cutoff is not None, py), prefix, py

    def create(self, resolution: Resolution, backend: str = "auto", timeout: float = 3600.0,
               python: str | None = None, python_order: list[str] | None = None) -> EnvHandle:
        """Build (or reuse) the environment for a resolution; atomic: a failed build leaves nothing."""
        if python is not None and python not in resolution.release.pythons:
            raise EnvError(f"{resolution.framework} {resolution.version} supports Python "
                           f"{', '.join(resolution.release.pythons)}, not {python}")
        kind, name, commands, prefix, py = self.plan(resolution, backend, python=python)
        if kind != "venv":
            return self._build(resolution, kind, name, commands, prefix, py, timeout)
        # a release's wheels may exist for some of its Pythons only (offline mirrors especially):
        # try each interpreter, newest first, and say what each attempt hit
        failures = []
        found = [v for _, v, _ in find_interpreters(self.settings, [python] if python else resolution.release.pythons)]
        order = python_order or resolution.release.python_order()
        candidates = sorted(found, key=lambda v: order.index(v) if v in order else len(order))
        for version in candidates:  # an environment built before, with any of them, is reused
            existing = self._load(self.plan(resolution, "venv", python=version)[3])
            if existing is not None:
                return existing
        for version in candidates:
            kind, name, commands, prefix, py = self.plan(resolution, "venv", python=version)
            try:
                return self._build(resolution, kind, name, commands, prefix, py, timeout)
            except EnvError as exc:
                failures.append(str(exc))
        raise EnvError("; ".join(failures) or f"no interpreter for {resolution.framework} {resolution.version}")

    def _build(self, resolution: Resolution, kind: str, name: str, commands: list[list[str]], prefix: Path,
               py: str, timeout: float) -> EnvHandle:
        existing = self._load(prefix)
        if existing is not None:
            return existing
        partial = prefix.with_name(prefix.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.rmtree(prefix, ignore_errors=True)
        self.root.mkdir(parents=True, exist_ok=True)
        # pip's own settings (index, find-links) are not secrets and are what makes builds work offline
        extra = {k: v for k, v in self.settings.base_env.items() if k.startswith(("PIP_", "CONDA_", "MAMBA_"))}
        extra["HOME"] = self.settings.base_env.get("HOME", str(self.settings.home))
        started = time.monotonic()
        # venvs are built in place under a temporary name, then renamed: bin/python still resolves
        build_prefix = partial if kind == "venv" else prefix
        cutoff = period_cutoff(resolution.release, resolution.version)
        uncapped = ""
        for step, cmd in enumerate(commands):
            if step == 1 and kind == "venv" and cutoff is not None:
                caps = period_constraints(load_package_dates(self.catalog.root), cutoff)
                (build_prefix / CONSTRAINTS_FILE).write_text(constraints_text(caps, cutoff), encoding="utf-8")
            cmd = [str(build_prefix) if c == str(prefix) else c for c in cmd]
            cmd = [c.replace(str(prefix) + "/", str(build_prefix) + "/") for c in cmd]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                      env=self.settings.child_env(extra), check=False)
                if proc.returncode != 0 and "-c" in cmd and "ResolutionImpossible" in (proc.stderr + proc.stdout):
                    # the index (an offline mirror, say) lacks the releases of the day: build uncapped, and say so
                    at = cmd.index("-c")
                    proc = subprocess.run(cmd[:at] + cmd[at + 2:], capture_output=True, text=True, timeout=timeout,
                                          env=self.settings.child_env(extra), check=False)
                    uncapped = "the index lacks the releases of the day: dependencies not capped at " + str(cutoff)
            except (OSError, subprocess.TimeoutExpired) as exc:
                shutil.rmtree(build_prefix, ignore_errors=True)
                raise EnvError(f"building {name} failed: {exc}") from exc
            if proc.returncode != 0:
                shutil.rmtree(build_prefix, ignore_errors=True)
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
                raise EnvError(f"building {name} failed at '{' '.join(cmd[:4])} ...': {tail[0]}")
        meta = {
            "name": name, "backend": kind, "framework": resolution.framework, "version": resolution.version,
            "python_version": py, "spec": resolution.release.spec_path.name, "commands": commands,
            "period": None if uncapped else cutoff, "uncapped": uncapped, "added": [],
            "build_seconds": round(time.monotonic() - started, 1), "created": time.time(),
        }
        (build_prefix / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")
        if build_prefix != prefix:
            os.replace(build_prefix, prefix)
        handle = self._load(prefix)
        if handle is None:
            raise EnvError(f"built {name} but its interpreter is missing")
        return handle

    def added(self, handle: EnvHandle) -> tuple[str, ...]:
        """The packages installed into a built environment beside its release ("name==version")."""
        if handle.path is None:
            return ()
        try:
            meta = json.loads((handle.path / META_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return ()
        return tuple(str(a) for a in meta.get("added") or ())

    def import_footprint(self, handle: EnvHandle) -> int:
        """Bytes of address space importing the framework takes in this environment (measured once, kept in its meta).

        A CUDA build of PyTorch maps gigabytes of libtorch_cuda/cuDNN/cuBLAS even on a CPU run, and fails
        ("failed to map segment") under an address-space cap that only counts the snippet's own memory:
        a CPU run's cap adds this footprint. The framework is sftl's own install, not the snippet.
        """
        if handle.path is None:
            return 0
        meta_path = handle.path / META_FILE
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return 0
        if isinstance(meta.get("import_vm_bytes"), int):
            return int(meta["import_vm_bytes"])
        probe = (f"import {_IMPORT_NAMES[handle.framework]}\n"
                 "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmPeak:')][0])")
        env = self.settings.child_env({"CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "3"})
        try:
            proc = subprocess.run([str(handle.python), "-I", "-c", probe], capture_output=True, text=True,
                                  timeout=300, env=env, check=False)
            footprint = int(proc.stdout.strip().splitlines()[-1]) * 1024
        except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
            return 0
        meta["import_vm_bytes"] = footprint
        try:
            meta_path.write_text(json.dumps(meta, indent=2), encoding="utf-8")
        except OSError:
            pass
        return footprint

    # -- packages beside the framework ------------------------------------------------------------

    def missing_modules(self, handle: EnvHandle, modules: list[str]) -> list[str]:
        """The modules (of `modules`) the environment's interpreter cannot find (nothing is imported)."""
        wanted = [DIST_OF_MODULE.get(m, m) if m == "torch.utils.tensorboard" else m for m in modules]
        wanted = [m for m in dict.fromkeys(wanted) if re.fullmatch(r"[A-Za-z_][\w.]*", m)]
        if not wanted:
            return []
        probe = ("import importlib.util, json, sys\n"
                 "print(json.dumps([m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]))")
        try:
            proc = subprocess.run([str(handle.python), "-I", "-c", probe, *wanted], capture_output=True, text=True,
                                  timeout=60, env=self.settings.child_env(), check=False)
            missing = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else []
        except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
            return []
        return [m for m in missing if isinstance(m, str)]

    def add_packages(self, handle: EnvHandle, resolution: Resolution, modules: list[str],
                     install: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Install the distributions of `modules` the environment lacks, at versions of the release's day.

        Returns (installed "name==version", missing "module: why"). Nothing installed keeps its version:
        the environment's packages are pinned, new ones capped at the release's day (envs/packages.json).
        With install=False, says what would be installed instead.
        """
        missing = self.missing_modules(handle, modules)
        if not missing:
            return (), ()
        table = load_package_dates(self.catalog.root)
        cutoff = period_cutoff(resolution.release, resolution.version)
        plan: list[str] = []
        why: list[str] = []
        for module in missing:
            dist = DIST_OF_MODULE.get(module, module.lower().replace("_", "-"))
            if module in FRAMEWORK_MODULES:
                why.append(f"{module}: another framework, not installed beside {handle.framework}")
                continue
            if dist not in table:
                why.append(f"{module}: {dist} is not among the packages sftl installs at a release's day "
                           "(envs/packages.json; add it with tools/gen_envs.py)")
                continue
            version = version_of_the_day(table[dist], cutoff) if cutoff else None
            if version is None:
                why.append(f"{module}: {dist} had no release by {cutoff}")
                continue
            plan.append(f"{dist}=={version}")
        if not plan:
            return (), tuple(why)
        if not install or handle.path is None:
            where = "the running interpreter is not changed" if handle.path is None else "pass --build to install"
            return (), tuple(why) + tuple(f"{p.split('==')[0]}: not installed ({where} {p})" for p in plan)
        installed, failed = self._pip_add(handle, plan, table, cutoff or "")
        return installed, tuple(why) + failed

    def _pip_add(self, handle: EnvHandle, plan: list[str], table: dict[str, dict[str, str]],
                 cutoff: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        assert handle.path is not None
        py = str(handle.python)
        env = self.settings.child_env({k: v for k, v in self.settings.base_env.items() if k.startswith("PIP_")})
        try:
            frozen = subprocess.run([py, "-m", "pip", "freeze", "--disable-pip-version-check"], capture_output=True,
                                    text=True, timeout=120, env=env, check=False).stdout
        except (OSError, subprocess.TimeoutExpired) as exc:
            return (), tuple(f"{p.split('==')[0]}: not installed ({exc})" for p in plan)
        pins = [ln.strip() for ln in frozen.splitlines() if "==" in ln and not ln.startswith("-")]
        have = {ln.split("==")[0].lower() for ln in pins}
        caps = {k: v for k, v in period_constraints(table, cutoff).items() if k not in have}
        constraints = handle.path / "sftl-added-constraints.txt"
        constraints.write_text("\n".join(pins) + "\n" + constraints_text(caps, cutoff), encoding="utf-8")
        installed, failed = [], []
        for first in plan:  # one by one: a package that cannot be installed does not stop the others
            dist = first.split("==")[0]
            # the newest release of the day first; one that needs another framework patch (torchvision 0.24.1
            # pins torch 2.9.1) gives way to the next older, up to three
            tries = [f"{dist}=={v}" for v in sorted((v for v, d in table[dist].items() if d <= cutoff),
                                                    key=_release_key, reverse=True)[:3]] or [first]
            error = ""
            for req in tries:
                try:
                    proc = subprocess.run([py, "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
                                           "-q", "-c", str(constraints), req], capture_output=True, text=True,
                                          timeout=900, env=env, check=False)
                except (OSError, subprocess.TimeoutExpired) as exc:
                    error = f"installing {req} failed ({exc})"
                    break
                if proc.returncode == 0:
                    installed.append(req)
                    error = ""
                    break
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
                error = f"installing {req} failed: {tail[0][:200]}"
                if "ResolutionImpossible" not in proc.stderr + proc.stdout:
                    break
            if error:
                failed.append(f"{dist}: {error}")
        if installed:
            meta_path = handle.path / META_FILE
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
                meta["added"] = sorted(set(meta.get("added") or []) | set(installed))
                meta_path.write_text(json.dumps(meta, indent=2), encoding="utf-8")
            except (OSError, ValueError):
                pass
        return tuple(installed), tuple(failed)

    def touch(self, handle: EnvHandle) -> None:
        """Note that a replay used this environment now (prune removes the least recently used first)."""
        if handle.path is not None:
            try:
                (handle.path / USED_FILE).touch()
            except OSError:
                pass

    def prune(self, max_bytes: int, keep: tuple[str, ...] = ()) -> list[tuple[str, int]]:
        """Remove the least recently used environments until the rest take at most `max_bytes`.

        Returns [(name, bytes freed)]. Environments named in `keep` stay whatever their size.
        """
        sized = []
        for handle in self.built():
            assert handle.path is not None
            used = handle.path / USED_FILE
            when = (used if used.exists() else handle.path / META_FILE).stat().st_mtime
            sized.append((when, handle.name, tree_bytes(handle.path)))
        total = sum(size for _, _, size in sized)
        removed = []
        for _, name, size in sorted(sized):
            if total <= max_bytes:
                break
            if name in keep:
                continue
            self.remove(name)
            total -= size
            removed.append((name, size))
        return removed

    def remove(self, name: str) -> Path:
        path = self.root / name
        if not (path / META_FILE).exists() or path.resolve().parent != self.root.resolve():
            raise EnvError(f"no environment named {name!r} (see 'sftl envs list')")
        shutil.rmtree(path)
        return path

    def lock(self, releases: list[Release] | None = None) -> list[tuple[Release, str]]:
        """Write conda-lock lockfiles where a conda solver and channels are reachable; else say why."""
        releases = releases if releases is not None else list(self.catalog.releases)
        conda = find_conda(self.settings)
        results = []
        for release in releases:
            if conda is None:
                results.append((release, "skipped: conda-lock needs micromamba/mamba/conda on PATH to solve; "
                                         "replay falls back to venv/current backends"))
                continue
            lockfile = self.catalog.lockfile(release)
            lockfile.parent.mkdir(parents=True, exist_ok=True)
            try:
                proc = subprocess.run(lock_command(release.spec_path, lockfile, conda[1]), capture_output=True,
                                      text=True, timeout=1800, env=self.settings.child_env(), check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                results.append((release, f"failed: {exc}"))
                continue
            if proc.returncode == 0:
                results.append((release, f"locked: {lockfile}"))
            else:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
                results.append((release, f"failed (channels unreachable?): {tail[0]}"))
        return results
