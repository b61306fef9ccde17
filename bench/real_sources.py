"""Provision an SFTL_HOME with the sources a user of each reported release would have: wheels and Debian trees.

What `bench/bench_real.py` measures with, laid out the way sftl's own cache expects it
(`<SFTL_HOME>/cache/sources/...`), so that `sftl locate --offline` picks the layers by itself:

- **Python files of the exact release**: the release's wheel, in `cache/sources/wheels/<fw>-<ver>/`.
  Already downloaded wheels (another home's cache, e.g. `/work/cache/home`) are symlinked folder by
  folder; `--fetch` downloads the missing ones with `pip download` (the command `sftl sources fetch`
  runs, with the same platform tags).
- **PyTorch's C++/CUDA** (what wheels lack): the Debian source package trees (1.13.1 from bookworm,
  2.6.0 from trixie), registered with `sftl sources add pytorch==X DIR`. `--fetch` redoes the
  download when a tree is missing, with the recipe of ../shared/README.md: the mirror is read from
  the machine's own apt sources (`/etc/apt/sources.list.d/*.sources`, or `/etc/apt/sources.list`),
  never written down here, and the system's apt configuration is not touched.

With those in the cache, `sftl.sources.open_source(fw, version)` gives, for a release that has no
registered tree of its own, a `LayeredSource` whose first layer is the Python files of that
release's wheel, then the nearest registered tree (its C++), then the rest of the wheel: the
"release's Python files + the nearest tree for ATen" the benchmark wants, chosen by the product.

Usage: `python bench/real_sources.py [--home DIR] [--fetch] [--wheels-from DIR]`.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_HOME = Path(os.environ.get("SFTL_BENCH_HOME", "/work/cache/home-bench"))
DEFAULT_WHEELS_FROM = Path("/work/cache/home/cache/sources/wheels")
DEFAULT_TREES_DIR = Path("/work/cache/trees")

# Debian source packages holding real framework trees: (framework, release) -> (suite, package version)
DEBIAN_TREES = {
    ("pytorch", "1.13.1"): ("bookworm", "1.13.1+dfsg-4"),
    ("pytorch", "2.6.0"): ("trixie", "2.6.0+dfsg-7"),
    ("tensorflow", "2.14.1"): ("sid", "2.14.1+dfsg-3.1"),
}
# the folder a tree's presence is judged by
TREE_MARKERS = {"pytorch": "aten", "tensorflow": "tensorflow/core/kernels"}

# Releases the development rows report (framework, package, version, python the wheel is asked for).
WHEELS = [
    *(("pytorch", "torch", v, py) for v, py in (
        ("1.0.1", "3.7"), ("1.4.0", "3.7"), ("1.5.0", "3.8"), ("1.6.0", "3.8"), ("1.7.0", "3.8"),
        ("1.7.1", "3.8"), ("1.8.0", "3.8"), ("1.9.0", "3.9"), ("1.10.0", "3.9"), ("1.12.1", "3.10"),
        ("1.13.0", "3.10"), ("2.0.0", "3.10"), ("2.0.1", "3.10"), ("2.1.0", "3.11"), ("2.2.0", "3.11"),
        ("2.3.0", "3.11"), ("2.4.0", "3.11"), ("2.4.1", "3.11"), ("2.7.1", "3.12"), ("2.9.0", "3.12"),
        ("2.10.0", "3.12"), ("2.12.0", "3.12"),
    )),
    # TensorFlow: the GPU-enabled build a user reporting a GPU/CPU discrepancy runs (tensorflow-gpu up to 2.0, the
    # plain wheel after), whose libraries name the GPU kernel files; sftl.sources.frameworks.wheel_packages
    *(("tensorflow", "tensorflow-gpu" if v in ("1.15.0", "2.0.0") else "tensorflow", v, py) for v, py in (
        ("1.15.0", "3.7"), ("2.0.0", "3.7"), ("2.2.0", "3.7"), ("2.4.0", "3.8"), ("2.19.0", "3.11"), ("2.20.0", "3.12"),
    )),
]
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64")


def sftl_command() -> list[str]:
    """The CLI entry: the venv's console script when there is one, else `python -m sftl`."""
    script = Path(sys.executable).with_name("sftl")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "sftl"]


def wheels_dir(home: Path) -> Path:
    return home / "cache" / "sources" / "wheels"


def link_wheels(home: Path, wheels_from: Path) -> list[str]:
    """Symlink every complete `<fw>-<ver>/` folder of `wheels_from` (one holding a .whl) into the home's cache."""
    dest = wheels_dir(home)
    dest.mkdir(parents=True, exist_ok=True)
    linked: list[str] = []
    if not wheels_from.is_dir() or wheels_from.resolve() == dest.resolve():
        return linked
    for folder in sorted(wheels_from.iterdir()):
        if folder.name.endswith(".partial") or not folder.is_dir() or not any(folder.glob("*.whl")):
            continue
        link = dest / folder.name
        if link.is_symlink() and not link.exists():
            link.unlink()  # a dangling link from an earlier layout
        if not link.exists():
            try:
                link.symlink_to(folder.resolve(), target_is_directory=True)
            except FileExistsError:  # another bench run linked it meanwhile
                continue
            linked.append(folder.name)
    return linked


def alias_release(home: Path, framework: str, version: str) -> bool:
    """Let a release named without its patch level ('1.10', 'r2.2' read as '2.2') find its wheel, as
    `sftl sources fetch fw==1.10` would have filed it: pip's `==1.10` is exactly 1.10.0, and the wheel
    goes to `wheels/<fw>-1.10/`. True when the alias exists afterwards."""
    if not re.fullmatch(r"\d+\.\d+", version):
        return False
    dest = wheels_dir(home)
    alias, target = dest / f"{framework}-{version}", dest / f"{framework}-{version}.0"
    if alias.exists():
        return True
    if not (target.is_dir() and any(target.glob("*.whl"))):
        return False
    try:
        alias.symlink_to(target.resolve(), target_is_directory=True)
    except FileExistsError:  # another bench run made it meanwhile
        pass
    return True


def fetch_wheel(home: Path, framework: str, package: str, version: str, python: str) -> bool:
    """`pip download` the release's wheel into `wheels/<fw>-<ver>/` unless one is there; True when present after."""
    dest = wheels_dir(home) / f"{framework}-{version}"
    if dest.is_dir() and any(dest.glob("*.whl")):
        return True
    partial = dest.with_name(dest.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
            "--disable-pip-version-check", "--implementation", "cp", "--python-version", python]
    for plat in PLATFORMS:
        argv += ["--platform", plat]
    argv += ["-d", str(partial), f"{package}=={version}"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    got = sorted(partial.glob("*.whl"))
    if done.returncode != 0 or not got:
        print(f"  no wheel of {package}=={version} (py{python}): {(done.stderr or done.stdout).strip()[-200:]}", file=sys.stderr)
        return False
    dest.mkdir(parents=True, exist_ok=True)
    os.replace(got[0], dest / got[0].name)
    shutil.rmtree(partial, ignore_errors=True)
    return True


def apt_mirror() -> str | None:
    """The (non-security) mirror the machine's apt already uses, read from its own configuration."""
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("URIs:") and "security" not in line:
                return line.split()[1]
    legacy = Path("/etc/apt/sources.list")
    if legacy.is_file():
        for line in legacy.read_text(encoding="utf-8", errors="replace").splitlines():
            m = re.match(r"\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)", line)
            if m and "security" not in m.group(1):
                return m.group(1)
    return None


def fetch_debian_tree(release: str, trees_dir: Path, framework: str = "pytorch") -> Path | None:
    """Download and unpack Debian's source package of `framework` `release` into `trees_dir/<framework>-<release>`."""
    suite, debver = DEBIAN_TREES[(framework, release)]
    mirror = apt_mirror()
    if mirror is None:
        print("  no apt mirror configured on this machine; cannot fetch the Debian tree", file=sys.stderr)
        return None
    work = Path(tempfile.mkdtemp(prefix="sftl-debsrc-"))
    (work / "lists" / "partial").mkdir(parents=True)
    (work / "sources.list").write_text(f"deb-src [trusted=yes] {mirror} {suite} main\n", encoding="utf-8")
    opts = ["-o", f"Dir::Etc::SourceList={work / 'sources.list'}", "-o", "Dir::Etc::SourceParts=/dev/null",
            "-o", f"Dir::State::Lists={work / 'lists'}"]
    for argv in (["apt-get", *opts, "update"], ["apt-get", *opts, "source", "--download-only", f"{framework}={debver}"]):
        done = subprocess.run(argv, cwd=work, capture_output=True, text=True, check=False)
        # the .orig tarball is what holds the tree; a missing Debian diff or .dsc (seen: 1.13.1+dfsg-4) does not matter
        if done.returncode != 0 and not (argv[-2] == "--download-only" and any(work.glob(f"{framework}_*.orig.tar.*"))):
            print(f"  {' '.join(argv[:1] + argv[-2:])} failed: {done.stderr.strip()[-200:]}", file=sys.stderr)
            return None
    tarballs = sorted(work.glob(f"{framework}_*.orig.tar.*"))
    if not tarballs:
        print("  the source package holds no .orig tarball", file=sys.stderr)
        return None
    unpack = work / "unpack"
    unpack.mkdir()
    subprocess.run(["tar", "-xf", str(tarballs[0]), "-C", str(unpack)], check=True)
    tops = [p for p in unpack.iterdir() if p.is_dir()]
    if len(tops) != 1:
        return None
    dest = trees_dir / f"{framework}-{release}"
    trees_dir.mkdir(parents=True, exist_ok=True)
    shutil.move(str(tops[0]), dest)
    shutil.rmtree(work, ignore_errors=True)
    return dest


def find_tree(release: str, trees_dir: Path, framework: str = "pytorch") -> Path | None:
    for name in (f"{framework}-{release}", f"{framework}-v{release}"):
        if (trees_dir / name / TREE_MARKERS[framework]).is_dir():
            return trees_dir / name
    return None


def register_trees(home: Path, trees_dir: Path, fetch: bool) -> dict[str, Path]:
    """`sftl sources add FW==X DIR` for each Debian tree (fetched first with `fetch` when missing)."""
    out = {}
    env = {**os.environ, "SFTL_HOME": str(home)}
    for framework, release in DEBIAN_TREES:
        tree = find_tree(release, trees_dir, framework)
        if tree is None and fetch:
            tree = fetch_debian_tree(release, trees_dir, framework)
        if tree is None:
            print(f"  no {framework} {release} tree under {trees_dir} (run with --fetch)", file=sys.stderr)
            continue
        entry = home / "cache" / "sources" / "trees" / f"{framework}-{release}.json"
        if not entry.is_file():
            done = subprocess.run([*sftl_command(), "sources", "add", f"{framework}=={release}", str(tree)],
                                  env=env, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(f"  sftl sources add {framework}=={release} failed: {done.stderr.strip()}", file=sys.stderr)
                continue
        out[f"{framework}-{release}"] = tree
    return out


# -- the evaluator's composite trees (bench_real --source-root-mode) ------------------------------

DEFAULT_COMPOSITE_DIR = Path(os.environ.get("SFTL_BENCH_COMPOSITE", "/work/cache/composite"))
# the C++ folders of a PyTorch tree a composite links (the wheel has none of their sources)
CXX_DIRS = ("aten", "c10", "torch/csrc", "caffe2")
_COMPOSE_FORMAT = 1


def _materialize(dest: Path, rel: str) -> Path:
    """Make `dest/rel` a real directory, turning each linked folder on the way into a folder of links to its
    entries (so a file written there does not land in the linked tree); returns it."""
    cur = dest
    for part in Path(rel).parts:
        cur = cur / part
        if cur.is_symlink() and cur.is_dir():
            target = cur.resolve()
            cur.unlink()
            cur.mkdir()
            for entry in sorted(target.iterdir()):
                (cur / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
        elif not cur.exists():
            cur.mkdir()
    return cur


def compose_tree(wheel: Path, framework: str, release: str, dest: Path, trees_dir: Path = DEFAULT_TREES_DIR,
                 with_libraries: bool = False, whole_wheel: bool = False, link_from: Path | None = None) -> dict[str, Any]:
    """A TREE as issue #13's evaluator describes it: the release's Python files (.py/.pyi, and torchgen's
    packaged native_functions.yaml at its repository path) from its wheel, and, for PyTorch, the C++ folders
    (aten/, c10/, torch/csrc/, caffe2/) of the Debian tree nearest the release, linked; the wheel's files win.
    `with_libraries`: the wheel's compiled libraries (*.so*) too, at their wheel paths. `whole_wheel`: every
    member of the wheel at its wheel path (headers under torch/include/, torchgen/packaged/, libraries), as an
    unzipped wheel; a library already extracted under `link_from` (same path and size) is hard-linked from
    there. Built once (a stamp file says with what); returns that stamp."""
    from sftl.releases import nearest_version
    from sftl.sources.frameworks import NATIVE_FUNCTIONS, repo_path
    from sftl.sources.inventory import is_library

    want: dict[str, Any] = {"format": _COMPOSE_FORMAT, "wheel": str(wheel), "size": wheel.stat().st_size,
                            "framework": framework, "release": release, "with_libraries": with_libraries,
                            "whole_wheel": whole_wheel}
    stamp = dest / ".composed.json"
    if stamp.is_file():
        try:
            have = json.loads(stamp.read_text(encoding="utf-8"))
            if {k: have.get(k) for k in want} == want:
                return have
        except (OSError, ValueError):
            pass
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    tree_release = None
    if framework == "pytorch":
        trees = {r: t for f, r in DEBIAN_TREES if f == "pytorch" and (t := find_tree(r, trees_dir)) is not None}
        tree_release = nearest_version(release.split("+", 1)[0], trees) if trees else None
        if tree_release is not None:
            tree = trees[tree_release]
            for rel in CXX_DIRS:
                if (tree / rel).is_dir():
                    (partial / rel).parent.mkdir(parents=True, exist_ok=True)
                    (partial / rel).symlink_to((tree / rel).resolve(), target_is_directory=True)
    written: dict[str, str] = {}  # repo path -> member (tensorflow_core/ wins over the tensorflow/ shim)
    libraries: list[str] = []
    whole: list[str] = []  # members kept at their wheel paths
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            name = info.filename
            if name.endswith("/"):
                continue
            if (with_libraries or whole_wheel) and is_library(name):
                libraries.append(name)
                continue
            if whole_wheel:
                whole.append(name)
                continue
            repo = repo_path(framework, name)
            if repo is None or not (repo.endswith((".py", ".pyi")) or repo == NATIVE_FUNCTIONS):
                continue
            if repo in written and not name.startswith("tensorflow_core/"):
                continue
            written[repo] = name
        # each member at its repository path (Python files) or at its wheel path (a whole wheel)
        for at, name in [*sorted(written.items()), *((n, n) for n in whole)]:
            folder = _materialize(partial, str(Path(at).parent)) if "/" in at else partial
            target = folder / Path(at).name
            if target.is_symlink():
                target.unlink()
            with zf.open(name) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
        for name in libraries:
            folder = _materialize(partial, str(Path(name).parent)) if "/" in name else partial
            there = link_from / name if link_from is not None else None
            if there is not None and there.is_file() and there.stat().st_size == zf.getinfo(name).file_size:
                os.link(there, folder / Path(name).name)
                continue
            with zf.open(name) as src, open(folder / Path(name).name, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
    want.update({"tree_release": tree_release, "python_files": len(written) + len(whole), "libraries": len(libraries)})
    (partial / ".composed.json").write_text(json.dumps(want, indent=1), encoding="utf-8")
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(partial, dest)
    return want


def provision(home: Path = DEFAULT_HOME, wheels_from: Path = DEFAULT_WHEELS_FROM,
              trees_dir: Path = DEFAULT_TREES_DIR, fetch: bool = False) -> dict[str, Any]:
    """Make `home` hold the benchmark's sources; returns what it holds (trees, wheel releases)."""
    home.mkdir(parents=True, exist_ok=True)
    link_wheels(home, wheels_from)
    if fetch:
        for framework, package, version, python in WHEELS:
            fetch_wheel(home, framework, package, version, python)
    trees = register_trees(home, trees_dir, fetch)
    wheels = sorted(p.name for p in wheels_dir(home).iterdir() if p.is_dir() and any(p.glob("*.whl")))
    return {"home": str(home), "trees": {k: str(v) for k, v in trees.items()}, "wheels": wheels}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, default=DEFAULT_HOME, help=f"the SFTL_HOME to provision (default {DEFAULT_HOME})")
    ap.add_argument("--wheels-from", type=Path, default=DEFAULT_WHEELS_FROM, help="a wheels cache to link from")
    ap.add_argument("--trees", type=Path, default=DEFAULT_TREES_DIR, help="where the Debian trees are (or go)")
    ap.add_argument("--fetch", action="store_true", help="download missing wheels and Debian trees (needs the registries)")
    args = ap.parse_args(argv)
    got = provision(args.home, args.wheels_from, args.trees, args.fetch)
    print(f"SFTL_HOME={got['home']}")
    print(f"  trees: {', '.join(f'{k} ({v})' for k, v in got['trees'].items()) or 'none'}")
    print(f"  wheels: {', '.join(got['wheels']) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
