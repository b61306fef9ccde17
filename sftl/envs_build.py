"""Building, caching and pruning replay environments: venv and conda commands capped at the release's day, lockfiles, and the `EnvManager`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from sftl.config import Settings
from sftl.envs import (
    DIST_OF_MODULE,
    ENVS_DIR,
    FRAMEWORK_MODULES,
    IMPORT_NAMES,
    META_FILE,
    USED_FILE,
    Catalog,
    EnvHandle,
    Release,
    Resolution,
    current_env,
    find_conda,
    find_interpreter,
    find_interpreters,
    load_catalog,
)
from sftl.errors import EnvError

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
        probe = (f"import {IMPORT_NAMES[handle.framework]}\n"
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
