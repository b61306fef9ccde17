"""Release wheels from the package registry (`pip download`, never installed): replay environments' files, kept in the cache."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sftl.errors import SourceError
from sftl.releases import normalize_framework
from sftl.sources import cached_wheel, wheel_cache_dir
from sftl.sources.frameworks import wheel_packages

if TYPE_CHECKING:
    from sftl.config import Settings


def run_command(argv: Sequence[str], settings: Settings, timeout: float) -> subprocess.CompletedProcess[str]:
    """The one wrapper through which this module starts child processes (pip, only)."""
    keep = ("HOME", "XDG_CONFIG_HOME", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")
    extra = {k: v for k, v in settings.base_env.items() if k in keep or k.startswith("PIP_")}
    try:
        return subprocess.run(
            list(argv), env=settings.child_env(extra), capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise SourceError(f"{argv[0]} {argv[2] if len(argv) > 2 else ''} timed out after {timeout:.0f}s") from exc
    except OSError as exc:
        raise SourceError(f"cannot run {argv[0]}: {exc.strerror or exc}") from exc


_ALL_PYTHONS = ("3.11", "3.10", "3.9", "3.8", "3.12", "3.7", "3.13", "3.6", "3.5")
_PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
    "linux_x86_64",
)


def candidate_pythons(framework: str, version: str) -> list[str]:
    """Pythons to ask for, most likely first: the ones each release published wheels for."""
    m = re.match(r"(\d+)\.(\d+)", version)
    key = (int(m.group(1)), int(m.group(2))) if m else (99, 0)
    if framework == "pytorch":
        table = [
            ((1, 4), ("3.7", "3.6")),
            ((1, 5), ("3.8", "3.7")),
            ((1, 8), ("3.8", "3.7")),
            ((1, 11), ("3.9", "3.8")),
            ((1, 13), ("3.10", "3.9")),
            ((2, 2), ("3.11", "3.10")),
            ((2, 5), ("3.12", "3.11")),
            ((99, 99), ("3.12", "3.13")),
        ]
    else:
        table = [
            ((2, 2), ("3.7", "3.6")),
            ((2, 5), ("3.8", "3.7")),
            ((2, 8), ("3.9", "3.8")),
            ((2, 12), ("3.10", "3.9")),
            ((2, 16), ("3.11", "3.10")),
            ((99, 99), ("3.12", "3.11")),
        ]
    preferred = next(pys for bound, pys in table if key < bound)
    return list(dict.fromkeys((*preferred, *_ALL_PYTHONS)))


def fetch_wheel(
    framework: str, version: str, settings: Settings, python: str | None = None, timeout: float = 900.0
) -> Path:
    """Download (once) the release's wheel into the cache with `pip download`; returns its path."""
    framework = normalize_framework(framework)
    have = cached_wheel(settings, framework, version)
    if have is not None:
        return have
    if settings.offline:
        raise SourceError(
            f"no cached wheel for {framework} {version} while offline; run `sftl sources fetch {framework}=={version}` online"
        )
    dest = wheel_cache_dir(settings, framework, version)
    partial = dest.with_name(dest.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    tried: list[str] = []
    last = ""
    for package in wheel_packages(framework, version):
        for py in [python] if python else candidate_pythons(framework, version):
            argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet"]
            argv += ["--disable-pip-version-check", "--implementation", "cp", "--python-version", py]
            for plat in _PLATFORMS:
                argv += ["--platform", plat]
            argv += ["-d", str(partial), f"{package}=={version}"]
            done = run_command(argv, settings, timeout)
            wheels = sorted(partial.glob("*.whl"))
            if done.returncode == 0 and wheels:
                dest.mkdir(parents=True, exist_ok=True)
                final = dest / wheels[0].name
                os.replace(wheels[0], final)
                for left in partial.iterdir():
                    left.unlink()
                partial.rmdir()
                # the files its libraries name, scanned now (5-60 s) so that `locate` never pays for it
                from sftl.sources.inventory import wheel_named_paths

                wheel_named_paths(final, framework)
                return final
            tried.append(f"{package} py{py}")
            lines = (done.stderr or done.stdout).strip().splitlines()
            last = lines[-1] if lines else f"pip exited {done.returncode}"
            if "No matching distribution" not in (done.stderr + done.stdout) and "from versions" not in done.stderr:
                break  # a network or pip failure, not a missing wheel for this Python: stop asking
    raise SourceError(
        f"no wheel of {framework} {version} on the package registry for Linux x86_64 (tried {', '.join(tried)}): {last}"
    )
