"""Writes envs/ (index.yml, one spec per minor release, packages.json) from the package index's own metadata.

    python tools/gen_envs.py [--cache DIR]

Reads, through the index pip is configured with (PEP 691 JSON: files, upload times), every release of
torch, tensorflow and tensorflow-cpu that has a Linux x86_64 wheel for a CPython sftl can build with
(3.6-3.13), and the upload dates of the packages a replay installs beside them. Nothing is hand-written:
per minor release the patches, the Pythons its wheels serve, the distribution that holds its CPU build
(`tensorflow` up to 2.0, `tensorflow-cpu` from 2.1 where served), its release date and the numpy/scipy of
its day. `envs/packages.json` holds the upload date of every release of the packages whose versions a
replay caps at the release's day (see sftl.envs_build.period_constraints).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ENVS = ROOT / "envs"
PYTHONS = [f"3.{m}" for m in range(6, 14)]
FIRST = {"pytorch": (1, 0), "tensorflow": (1, 0)}
# packages whose versions a replay caps at the release's day: the frameworks' own dependencies that
# broke old releases when they moved on (protobuf 4, numpy 2, setuptools' distutils), and the packages
# reports import beside the framework
PACKAGES = sorted({
    "numpy", "scipy", "protobuf", "six", "absl-py", "astor", "gast", "grpcio", "keras-applications",
    "keras-preprocessing", "markdown", "termcolor", "werkzeug", "wrapt", "h5py", "tensorboard",
    "tensorflow-estimator", "opt-einsum", "google-pasta", "astunparse", "flatbuffers", "typing-extensions",
    "ml-dtypes", "keras", "tf-keras", "tensorflow-probability", "tensorflow-datasets", "tensorflow-addons",
    "tensorflow-hub", "future", "pyyaml", "filelock", "sympy", "networkx", "jinja2", "fsspec", "mpmath",
    "markupsafe", "pillow", "torchvision", "torchaudio", "torchtext", "setuptools", "matplotlib", "pandas",
    "scikit-learn", "tqdm", "transformers", "tokenizers", "huggingface-hub", "safetensors", "opencv-python",
    "tensorboardx", "requests", "dill", "cloudpickle", "numba", "onnx", "onnxruntime", "einops", "timm",
    "jax", "jaxlib", "tensorflow-io-gcs-filesystem", "libclang", "wheel", "cffi", "psutil", "ninja",
    "sentencepiece", "accelerate", "pytorch-lightning", "scikit-image", "imageio", "seaborn", "gym",
    "tf-slim", "tensorflow-text", "packaging", "regex", "functorch", "torchdata",
})

_WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(?:-\d[^-]*)?-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$")
_FINAL = re.compile(r"^\d+(?:\.\d+)*$")
_PRE = re.compile(r"^\d+(?:\.\d+)*(?:a|b|rc)\d+$")


def index_url() -> str:
    """The index pip is configured with (pip's own default when none is set)."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.index-url"],
                         capture_output=True, text=True, check=False)
    if out.returncode == 0 and out.stdout.strip():
        return out.stdout.strip().rstrip("/") + "/"
    from pip._internal.models.index import PyPI

    return str(PyPI.simple_url).rstrip("/") + "/"


def project(name: str, cache: Path) -> dict[str, Any]:
    path = cache / f"{name}.json"
    if path.exists():
        return json.loads(path.read_text())
    req = urllib.request.Request(index_url() + name + "/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        data = json.load(resp)
    cache.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return data


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v.split("rc")[0].split("a")[0].split("b")[0]))


def linux_wheels(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """version -> {"pythons": {X.Y...}, "date": first upload day} for Linux x86_64 CPython wheels."""
    out: dict[str, dict[str, Any]] = {}
    for f in data["files"]:
        m = _WHEEL.match(f["filename"])
        if not m or f.get("yanked") or "x86_64" not in m["plat"] or "linux" not in m["plat"]:
            continue
        pys = {f"{t[2]}.{t[3:]}" for t in m["py"].split(".") if re.fullmatch(r"cp3\d+", t)}
        pys &= set(PYTHONS)
        if not pys:
            continue
        row = out.setdefault(m["version"], {"pythons": set(), "date": f["upload-time"][:10]})
        row["pythons"] |= pys
        row["date"] = min(row["date"], f["upload-time"][:10])
    return out


def release_dates(data: dict[str, Any]) -> dict[str, str]:
    """version -> the day its first file was uploaded (final releases only)."""
    out: dict[str, str] = {}
    for f in data["files"]:
        m = re.match(r"^[A-Za-z0-9_.]+?-(\d[^-]*?)(?:\.tar\.gz|\.zip|-[^-]+-[^-]+-[^-]+\.whl|\.whl)$", f["filename"])
        if not m or not _FINAL.match(m.group(1)) or f.get("yanked"):
            continue
        day = (f.get("upload-time") or "")[:10]
        if day:
            out[m.group(1)] = min(out.get(m.group(1), day), day)
    return out


def of_the_day(dates: dict[str, str], wheels: dict[str, dict[str, Any]], python: str, cutoff: str) -> str | None:
    """The newest final release uploaded by `cutoff` that has a wheel for `python` (else any file)."""
    cands = [v for v, d in dates.items() if d <= cutoff and (not wheels or python in wheels.get(v, {}).get("pythons", ()))]
    return max(cands, key=_vkey) if cands else None


def preferred_python(pythons: list[str], python_day: dict[str, str], released: str) -> str:
    """The newest Python a release serves that had been out a year when it came out (what most of its users
    ran; a Python new to a release is often only partly supported: "Dynamo is not supported on Python
    3.13+" in torch 2.5), else the oldest it serves."""
    settled = [py for py in pythons if python_day.get(py, "9999") <= _plus(released, -365)]
    return settled[-1] if settled else pythons[0]


def _plus(day: str, days: int) -> str:
    return (dt.date.fromisoformat(day) + dt.timedelta(days=days)).isoformat()


def releases(framework: str, cache: Path) -> list[dict[str, Any]]:
    dists = ["torch"] if framework == "pytorch" else ["tensorflow", "tensorflow-cpu"]
    served = {d: linux_wheels(project(d, cache)) for d in dists}
    main = served[dists[0]]
    minors: dict[tuple[int, int], list[str]] = {}
    pres: dict[tuple[int, int], list[str]] = {}
    for v in main:
        parts = _vkey(v)
        key = (parts[0], parts[1] if len(parts) > 1 else 0)
        if key < FIRST[framework]:
            continue
        if _FINAL.match(v):
            minors.setdefault(key, []).append(v)
        elif _PRE.match(v):
            pres.setdefault(key, []).append(v)
    np_data, sp_data = project("numpy", cache), project("scipy", cache)
    np_w, sp_w = linux_wheels(np_data), linux_wheels(sp_data)
    np_d, sp_d = release_dates(np_data), release_dates(sp_data)
    # the day each CPython came into use: numpy's first wheel for it (numpy ships them as a Python comes out)
    python_day: dict[str, str] = {}
    for row in np_w.values():
        for py in row["pythons"]:
            python_day[py] = min(python_day.get(py, row["date"]), row["date"])
    rows = []
    for key in sorted(minors):
        patches = sorted(minors[key], key=_vkey)
        latest = patches[-1]
        # the CPU build: tensorflow-cpu from 2.1 where the index serves that version, else the package itself
        dist = dists[0]
        if framework == "tensorflow" and key >= (2, 1) and latest in served["tensorflow-cpu"]:
            dist = "tensorflow-cpu"
        pythons = sorted(served[dist][latest]["pythons"], key=_vkey)
        first_day = served[dists[0]][patches[0]]["date"]
        py = preferred_python(pythons, python_day, first_day)
        cutoff = _plus(served[dist][latest]["date"], 30)
        rows.append({
            "framework": framework, "minor": f"{key[0]}.{key[1]}", "patches": patches,
            "prereleases": sorted(pres.get(key, []), key=_vkey),
            "dates": {p: main[p]["date"] for p in patches},
            "pythons": pythons, "python": py, "dist": dist,
            "numpy": ".".join((of_the_day(np_d, np_w, py, cutoff) or "1.0").split(".")[:2]),
            "scipy": ".".join((of_the_day(sp_d, sp_w, py, cutoff) or "1.0").split(".")[:2]),
        })
    return rows


_HEAD = """# {framework} {minor}.x (patch releases: {patches}); Python {lo}-{hi} supported.
# Generated by tools/gen_envs.py from the package index's metadata: do not edit.
# Pinned: the latest patch, the Python most of its users ran, numpy/scipy of the release's time.
# venv equivalent: {dist}=={latest} numpy=={numpy}.* scipy=={scipy}.* (capped at the release's day)
"""


def spec_text(row: dict[str, Any]) -> str:
    latest = row["patches"][-1]
    lines = [_HEAD.format(lo=row["pythons"][0], hi=row["pythons"][-1], latest=latest,
                          **{**row, "patches": ", ".join(row["patches"])}).rstrip("\n")]
    lines.append(f"name: sftl-{row['framework']}-{row['minor']}")
    lines.append("channels:")
    key = tuple(int(x) for x in row["minor"].split("."))
    if row["framework"] == "pytorch" and key < (2, 6):
        lines.append("- pytorch")
    lines += ["- conda-forge", "- nodefaults", "dependencies:", f"- python={row['python']}"]
    if row["framework"] == "pytorch":
        lines.append(f"- pytorch={latest}")
        if key < (2, 6):
            lines.append("- cpuonly")
    lines += [f"- numpy={row['numpy']}", f"- scipy={row['scipy']}", "- pip"]
    if row["framework"] == "tensorflow":
        lines += ["- pip:", f"  - {row['dist']}=={latest}"]
    lines += ["platforms:", "- linux-64"]
    return "\n".join(lines) + "\n"


def index_text(rows: list[dict[str, Any]]) -> str:
    out = ["# Releases sftl can replay: one conda spec per minor release (see README, 'Replay').",
           "# Generated by tools/gen_envs.py from the package index's metadata: do not edit.",
           "# patches: the published patch releases; pythons: the CPython minors its Linux wheels serve;",
           "# dist: the distribution holding the CPU build; dates: the day each patch was uploaded.",
           "version: 1", "frameworks:"]
    for fw in ("pytorch", "tensorflow"):
        out.append(f"  {fw}:")
        for r in (r for r in rows if r["framework"] == fw):
            out.append(f"    '{r['minor']}':")
            out.append(f"      spec: {fw}-{r['minor']}.yml")
            out.append("      patches:")
            out += [f"      - {p}" for p in r["patches"]]
            if r["prereleases"]:
                out.append("      prereleases:")
                out += [f"      - {p}" for p in r["prereleases"]]
            out.append("      dates:")
            out += [f"        {p}: '{d}'" for p, d in r["dates"].items()]
            out.append("      pythons:")
            out += [f"      - '{p}'" for p in r["pythons"]]
            out.append(f"      python: '{r['python']}'")
            out += [f"      numpy: '{r['numpy']}'", f"      scipy: '{r['scipy']}'", f"      dist: {r['dist']}",
                    f"      pip: {r['dist']}=={r['patches'][-1]}"]
    return "\n".join(out) + "\n"


def packages_json(cache: Path) -> str:
    table = {}
    for name in PACKAGES:
        dates = release_dates(project(name, cache))
        table[name] = dict(sorted(dates.items(), key=lambda kv: (kv[1], _vkey(kv[0]))))
    lines = ["{"]
    items = list(table.items())
    for i, (name, dates) in enumerate(items):
        lines.append(f"  {json.dumps(name)}: {json.dumps(dates, separators=(',', ':'))}{',' if i < len(items) - 1 else ''}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/sftl-gen-envs"), help="where index answers are kept")
    parser.add_argument("--out", type=Path, default=ENVS)
    args = parser.parse_args()
    rows = releases("pytorch", args.cache) + releases("tensorflow", args.cache)
    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob("*.yml"):
        if old.name != "index.yml":
            old.unlink()
    for r in rows:
        (args.out / f"{r['framework']}-{r['minor']}.yml").write_text(spec_text(r))
    (args.out / "index.yml").write_text(index_text(rows))
    (args.out / "packages.json").write_text(packages_json(args.cache))
    print(f"wrote {len(rows)} specs, index.yml and packages.json ({len(PACKAGES)} packages) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
