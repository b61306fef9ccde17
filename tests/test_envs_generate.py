"""tools/gen_envs.py: specs from the index's metadata, read from answers the test writes (no network)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_envs", ROOT / "tools" / "gen_envs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _files(name: str, rows: list[tuple[str, str, str]]) -> dict:
    """A PEP 691 project page: (version, wheel tag 'cp36-cp36m-manylinux1_x86_64' or 'sdist', upload day)."""
    files = []
    for version, tag, day in rows:
        filename = f"{name}-{version}.tar.gz" if tag == "sdist" else f"{name.replace('-', '_')}-{version}-{tag}.whl"
        files.append({"filename": filename, "upload-time": f"{day}T10:00:00.000000Z", "yanked": False})
    return {"name": name, "files": files, "meta": {}, "versions": sorted({r[0] for r in rows})}


def test_specs_come_from_the_index_metadata(tmp_path: Path) -> None:
    gen = _gen()
    cache = tmp_path / "cache"
    cache.mkdir()
    lin36, lin37 = "cp36-cp36m-manylinux1_x86_64", "cp37-cp37m-manylinux2010_x86_64"
    pages = {
        "tensorflow": [("1.3.0", lin36, "2017-08-16"), ("1.3.0", "cp35-cp35m-manylinux1_x86_64", "2017-08-16"),
                       ("2.0.0", lin37, "2019-09-30"), ("2.0.4", lin37, "2021-01-04"), ("2.1.0", lin37, "2020-01-08"),
                       ("2.1.0rc1", lin37, "2019-12-10"), ("0.12.0", "cp35-cp35m-manylinux1_x86_64", "2016-12-20"),
                       ("1.3.0", "cp36-cp36m-macosx_10_11_x86_64", "2017-08-16")],
        "tensorflow-cpu": [("2.1.0", lin37, "2020-01-09")],
        "torch": [("1.0.0", lin36, "2018-12-07"), ("1.0.1", lin37, "2019-02-07")],
        "numpy": [("1.13.1", lin36, "2017-07-06"), ("1.13.3", lin36, "2017-09-29"), ("1.16.0", lin37, "2019-01-14"),
                  ("1.18.0", lin37, "2019-12-22"), ("1.20.0", lin37, "2021-01-30")],
        "scipy": [("0.19.1", lin36, "2017-06-23"), ("1.2.0", lin37, "2018-12-17"), ("1.4.1", lin37, "2019-12-19")],
    }
    for name, rows in pages.items():
        (cache / f"{name}.json").write_text(json.dumps(_files(name, rows)))
    tf = {r["minor"]: r for r in gen.releases("tensorflow", cache)}
    assert sorted(tf) == ["1.3", "2.0", "2.1"]  # 0.12 serves no CPython 3.6+ wheel
    assert tf["1.3"]["pythons"] == ["3.6"] and tf["1.3"]["dist"] == "tensorflow"
    assert tf["1.3"]["numpy"] == "1.13" and tf["1.3"]["dates"] == {"1.3.0": "2017-08-16"}
    assert tf["2.0"]["dist"] == "tensorflow" and tf["2.0"]["patches"] == ["2.0.0", "2.0.4"]  # no tensorflow-cpu 2.0
    assert tf["2.1"]["dist"] == "tensorflow-cpu" and tf["2.1"]["prereleases"] == ["2.1.0rc1"]
    spec = yaml.safe_load(gen.spec_text(tf["2.0"]))
    assert {"pip": ["tensorflow==2.0.4"]} in spec["dependencies"] and "python=3.7" in spec["dependencies"]
    index = yaml.safe_load(gen.index_text(list(tf.values())))
    assert index["frameworks"]["tensorflow"]["2.1"]["pip"] == "tensorflow-cpu==2.1.0"
    torch = gen.releases("pytorch", cache)
    assert [r["minor"] for r in torch] == ["1.0"] and torch[0]["pythons"] == ["3.7"]  # the latest patch's wheels
    assert "- cpuonly" in gen.spec_text(torch[0])
