"""Replay environments: the release specs, version resolution, backends, lockfiles and `sftl envs`."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest

from sftl.cli import main
from sftl.config import load_settings
from sftl.envs import (
    EnvManager,
    conda_commands,
    current_env,
    find_interpreter,
    installed_version,
    load_catalog,
    parse_lockfile,
    parse_version,
    render_lockfile,
    resolve,
)
from sftl.errors import EnvError, InputError

PYENV = Path.home() / ".pyenv" / "versions"


def _deps(spec: dict) -> tuple[list[str], list[str]]:
    conda = [d for d in spec["dependencies"] if isinstance(d, str)]
    pip = [p for d in spec["dependencies"] if isinstance(d, dict) for p in d.get("pip", [])]
    return conda, pip


def test_every_supported_release_has_a_pinned_spec() -> None:
    catalog = load_catalog()
    minors = {fw: [r.minor for r in catalog.of(fw)] for fw in ("pytorch", "tensorflow")}
    assert minors["pytorch"] == [f"1.{m}" for m in range(14)] + [f"2.{m}" for m in range(14)]
    assert minors["tensorflow"] == [f"2.{m}" for m in range(22)]
    for release in catalog.releases:
        conda, pip = _deps(release.spec())
        assert f"python={release.spec_python}" in conda, release.spec_path
        assert release.spec_python in release.pythons
        assert f"numpy={release.numpy}" in conda and any(d.startswith("scipy=") for d in conda)
        latest = release.patches[-1]
        if release.framework == "pytorch":
            assert f"pytorch={latest}" in conda
        else:
            assert f"tensorflow-cpu=={latest}" in pip
        assert release.pip_requirements(latest)[0] == release.pip


@pytest.mark.parametrize(
    ("framework", "requested", "version", "match", "why"),
    [
        ("pytorch", "2.13.0", "2.13.0", "exact", "exact release"),
        ("torch", "1.12.1+cu113", "1.12.1", "exact", "CUDA 11.3"),
        ("pytorch", "2.0.1+cpu", "2.0.1", "exact", "+cpu"),
        ("pytorch", "2.1.0.dev20230601", "2.1.0", "nearest", "nightly/dev build"),
        ("pytorch", "2.0.0rc1", "2.0.0", "nearest", "release candidate"),
        ("pytorch", "1.14.0a0+git5f1e3ab", "2.0.0", "nearest", "never released"),
        ("pytorch", "1.10.7", "1.10.2", "same-minor", "nearest patch"),
        ("pytorch", "1.13", "1.13.1", "same-minor", "latest patch"),
        ("tensorflow", "2.16.0", "2.16.1", "same-minor", "nearest patch"),
        ("tf", "2.12.0-dev20221201", "2.12.0", "nearest", "nightly/dev build"),
        ("tensorflow-gpu", "2.4.1", "2.4.1", "exact", "exact release"),
        ("tensorflow", "1.15.0", "2.0.0", "nearest", "no tensorflow 1.15 spec"),
        ("pytorch", None, "2.13.0", "latest", "names no pytorch version"),
    ],
)
def test_version_resolution_says_what_it_chose_and_why(framework, requested, version, match, why) -> None:
    res = resolve(load_catalog(), framework, requested)
    assert (res.version, res.match) == (version, match)
    assert why in res.why


def test_bad_framework_or_version_is_input_error() -> None:
    with pytest.raises(InputError, match="unknown framework"):
        resolve(load_catalog(), "jax", "0.4")
    with pytest.raises(InputError, match="cannot read a version"):
        parse_version("latest")


@pytest.mark.skipif(not PYENV.is_dir(), reason="no pyenv on this machine")
def test_interpreters_come_from_pyenv_not_its_shims() -> None:
    settings = load_settings(env={"PATH": f"{Path.home()}/.pyenv/shims:/usr/bin:/bin", "HOME": str(Path.home())})
    for py in ("3.6", "3.13"):
        if not list(PYENV.glob(f"{py}.*")):
            pytest.skip(f"pyenv holds no {py}")
        found = find_interpreter(settings, [py])
        assert found is not None and found[1] == py and "pyenv" in found[2]
        assert "/shims/" not in str(found[0]) and found[0].exists()
    assert find_interpreter(load_settings(env={"PATH": "/nonexistent", "HOME": "/nonexistent"}), ["3.6"]) is None


def test_current_backend_is_the_running_interpreter_when_versions_match() -> None:
    have = installed_version("pytorch")
    assert have is not None
    handle = current_env("torch", parse_version(have).base)
    assert handle.backend == "current" and handle.python == Path(sys.executable)
    with pytest.raises(EnvError, match="not 1.4.0"):
        current_env("pytorch", "1.4.0")


def test_no_environment_is_an_error_with_the_way_out(tmp_path: Path) -> None:
    settings = load_settings(env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, home=tmp_path / "home")
    manager = EnvManager(settings)
    with pytest.raises(EnvError, match=r"sftl envs create pytorch==1\.4\.0"):
        manager.find(resolve(manager.catalog, "pytorch", "1.4.0"))
    # nothing to build with: no pyenv under this HOME, no conda, no python3.x on PATH
    bare = load_settings(env={"PATH": str(tmp_path), "HOME": str(tmp_path)}, home=tmp_path / "home")
    with pytest.raises(EnvError, match="no Python 3.6/3.7/3.8 interpreter"):
        EnvManager(bare).plan(resolve(manager.catalog, "pytorch", "1.4.0"))


def _fake_exe(folder: Path, name: str) -> Path:
    """An executable of that name on PATH; plan() only builds commands, it never runs them."""
    exe = folder / name
    exe.write_text("#!/bin/sh\nexit 1\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return exe


def test_conda_backend_builds_the_right_commands(tmp_path: Path, fixtures_dir: Path) -> None:
    spec, prefix, lock = Path("envs/pytorch-2.13.yml"), tmp_path / "env", fixtures_dir / "replay" / "pytorch-2.13.conda-lock.yml"
    assert conda_commands("micromamba", Path("/x/micromamba"), spec, prefix, lock) == [
        ["/x/micromamba", "create", "--yes", "--prefix", str(prefix), "--file", str(lock)]]
    assert conda_commands("conda", Path("/x/conda"), spec, prefix, lock) == [
        ["conda-lock", "install", "--conda", "/x/conda", "--prefix", str(prefix), str(lock)]]
    assert conda_commands("mamba", Path("/x/mamba"), spec, prefix) == [
        ["/x/mamba", "env", "create", "--yes", "--prefix", str(prefix), "--file", str(spec)]]
    # with a conda on PATH, plan() prefers it, and uses the lockfile when one lies in envs/locks
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = _fake_exe(bindir, "micromamba")
    envs = tmp_path / "envs"
    shutil.copytree(load_catalog().root, envs)
    (envs / "locks").mkdir()
    shutil.copy(lock, envs / "locks" / "pytorch-2.13.conda-lock.yml")
    settings = load_settings(env={"PATH": str(bindir), "HOME": str(tmp_path)}, home=tmp_path / "home")
    manager = EnvManager(settings, load_catalog(envs))
    kind, name, commands, pfx, py = manager.plan(resolve(manager.catalog, "pytorch", "2.13.0"))
    assert (kind, name, py) == ("micromamba", "pytorch-2.13.0-py3.13-micromamba", "3.13")
    assert commands == [[str(exe), "create", "--yes", "--prefix", str(pfx), "--file", str(envs / "locks" / "pytorch-2.13.conda-lock.yml")]]
    # an older patch than the spec pins cannot come from the lockfile: spec plus an explicit pin
    kind, name, commands, pfx, _ = manager.plan(resolve(manager.catalog, "pytorch", "2.1.0"))
    assert commands[0][-1].endswith("pytorch-2.1.yml") and commands[1][-1] == "pytorch=2.1.0"


def test_lockfile_is_parsed_and_rendered_offline(tmp_path: Path, fixtures_dir: Path) -> None:
    lock = fixtures_dir / "replay" / "pytorch-2.13.conda-lock.yml"
    platforms, packages = parse_lockfile(lock)
    assert platforms == ("linux-64",)
    assert {p.name: p.version for p in packages}["pytorch"] == "2.13.0"
    assert all(p.url.startswith("https://conda.anaconda.org/") and p.sha256 for p in packages)
    settings = load_settings(env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)})
    explicit = render_lockfile(lock, tmp_path / "out", settings).read_text()
    lines = [line for line in explicit.splitlines() if line.startswith("https://")]
    assert "@EXPLICIT" in explicit and len(lines) == len(packages)
    assert lines[0].split("/")[-1].startswith("libzlib")  # dependencies first
    assert "#edb0dca6bc32e4f4789199455a1dbeb8" in lines[0]
    bad = tmp_path / "bad.yml"
    bad.write_text("name: not-a-lockfile\n")
    with pytest.raises(EnvError, match="not a conda-lock lockfile"):
        parse_lockfile(bad)


def _cli(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(args, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_envs_cli_list_create_dry_run_lock(sftl_home: Path) -> None:
    code, out, _ = _cli(["envs", "list", "--json"])
    data = json.loads(out)
    assert code == 0 and len(data["specs"]) == 50 and data["built"] == []
    assert set(data["backends"]) == {"current", "conda", "venv"}
    code, out, _ = _cli(["envs", "create", "torch==1.12.1+cu113", "--dry-run", "--json"])
    plan = json.loads(out)
    assert code == 0 and plan["version"] == "1.12.1" and "CUDA 11.3" in plan["why"]
    if plan["backend"] == "venv":
        assert plan["commands"][1][-3:] == ["torch==1.12.1", "numpy==1.23.*", "scipy==1.9.*"]
    code, out, err = _cli(["envs", "remove", "nope"])
    assert code == 6 and "no environment named 'nope'" in err
    if not any(shutil.which(k) for k in ("conda", "mamba", "micromamba")):
        code, out, err = _cli(["envs", "lock"])
        assert code == 0 and "needs micromamba/mamba/conda" in out and "no lockfile written" in err


@pytest.mark.slow
@pytest.mark.skipif(not list(PYENV.glob("3.11.*")) or not Path("/opt/wheels").is_dir()
                    or not Path("/opt/pypi/simple").is_dir(),
                    reason="needs pyenv's Python 3.11, the local torch wheel in /opt/wheels and the /opt/pypi mirror")
def test_venv_backend_builds_offline_and_is_reused(tmp_path: Path) -> None:
    """A real venv of torch 2.13.0 from the local wheel and index; then a replay runs in it."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "PIP_FIND_LINKS": "/opt/wheels",
           "PIP_INDEX_URL": "file:///opt/pypi/simple", "PIP_EXTRA_INDEX_URL": "", "PIP_NO_CACHE_DIR": "0"}
    settings = load_settings(env=env, home=tmp_path / "home")
    manager = EnvManager(settings)
    res = resolve(manager.catalog, "pytorch", "2.13.0")
    kind, *_ = manager.plan(res)
    assert kind == "venv"
    with pytest.raises(EnvError, match="not 3.6"):
        manager.create(res, python="3.6")
    handle = manager.create(res, python="3.11")  # the local mirror holds cp311 wheels
    name = handle.name
    assert name == "pytorch-2.13.0-py3.11-venv" and handle.backend == "venv" and (handle.path / "sftl-env.json").exists()
    marker = handle.path / "sftl-env.json"
    built = marker.stat().st_mtime_ns
    assert manager.create(res).path == handle.path
    assert marker.stat().st_mtime_ns == built  # reused, not rebuilt
    assert not handle.path.with_name(handle.path.name + ".partial").exists()
    assert manager.find(res, env="auto" if installed_version("pytorch") is None else name).name == name
    from sftl.model import Outcome, Traceback
    from sftl.replay import replay_snippet

    code = "import torch\nprint('MARK')\ntorch.nn.Linear(2, 2).no_such\n"
    exp = Traceback((), "AttributeError", "'Linear' object has no attribute 'no_such'")
    replay = replay_snippet(code, "pytorch", "2.13.0", settings, device="cpu", env=name, expected=exp)
    assert replay.verdict is Outcome.REPRODUCED and replay.environment.backend == "venv"
    assert "MARK" in replay.runs[0].stdout_tail
    assert manager.remove(name) == handle.path and not handle.path.exists()
    assert os.listdir(manager.root) == []
