"""sftl's bundled release index: per release, the kernel files its compiled libraries name and what its headers declare, for a source with no wheel."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

# Built by tools/build_release_index.py from release wheels (sftl.sources.inventory.wheel_named_paths); read when
# the source at hand holds neither the report's wheel nor its libraries (a --source-root tree of Python files).

INDEX_PATH = Path(__file__).resolve().parent.parent / "data" / "release-index-v1.json.gz"
FORMAT = 1
# what the localizers read of the named paths (gcrde/release.py: ATen/native; tensorflow.py: core/kernels)
KEEP: dict[str, tuple[str, ...]] = {
    "pytorch": ("aten/src/ATen/",),
    "tensorflow": ("tensorflow/core/kernels/",),
}
_RELEASE = re.compile(r"r?(\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class IndexedRelease:
    framework: str
    release: str  # the indexed release these paths are of
    paths: frozenset[str]
    exact: bool  # True when it is the report's own release number
    origin: str  # for reasons, e.g. "torch 1.9.0's libraries (sftl's bundled release index)"
    gpu_build: bool  # the indexed build names GPU files
    # what the localizers read of the release wheel's headers, for a source without them: header -> names
    # (PyTorch: the dispatch stubs a native header declares and, in the TH era, legacy.th_era_declarations' prefixed
    # names; TensorFlow: the types a GPU header's device code declares)
    declarations: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def release_key(version: str | None) -> tuple[int, int, int] | None:
    """'1.7.0.dev20201001' -> (1, 7, 0), '2.10.0+cu128' -> (2, 10, 0), '1.10' / 'r2.2' -> (1, 10, 0) / (2, 2, 0)."""
    m = _RELEASE.match((version or "").strip().lower().removeprefix("v"))
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def build_index(entries: list[dict[str, Any]], builder: str, date: str) -> dict[str, Any]:
    """The index document from [{framework, release, paths, wheel, size, sha256}], paths kept under KEEP and stored
    per path as ranges [first, last] of positions in the framework's sorted release list."""
    frameworks: dict[str, Any] = {}
    for fw in sorted({e["framework"] for e in entries}):
        rows = sorted((e for e in entries if e["framework"] == fw), key=lambda e: release_key(e["release"]) or (0, 0, 0))
        releases = [e["release"] for e in rows]
        holders: dict[str, list[int]] = {}
        declaring: dict[str, list[int]] = {}  # "header|Name" -> the releases whose header declares Name
        for i, e in enumerate(rows):
            for p in e["paths"]:
                if p.startswith(KEEP.get(fw, ())):
                    holders.setdefault(p, []).append(i)
            for header, names in (e.get("declarations") or {}).items():
                for name in names:
                    declaring.setdefault(f"{header}|{name}", []).append(i)
        frameworks[fw] = {
            "releases": releases,
            "wheels": [{"release": e["release"], "wheel": e["wheel"], "size": e["size"], "sha256": e["sha256"],
                        "gpu_build": _gpu(fw, e["paths"])} for e in rows],
            "paths": {p: _ranges(holders[p]) for p in sorted(holders)},
            "declarations": {k: _ranges(declaring[k]) for k in sorted(declaring)},
        }
    return {"format": FORMAT, "builder": builder, "date": date, "keep": KEEP, "frameworks": frameworks}


def _ranges(positions: list[int]) -> list[list[int]]:
    """[0, 1, 2, 5] -> [[0, 2], [5, 5]]: the runs of release positions."""
    ranges: list[list[int]] = []
    for i in positions:
        if ranges and ranges[-1][1] == i - 1:
            ranges[-1][1] = i
        else:
            ranges.append([i, i])
    return ranges


def _gpu(framework: str, paths: Any) -> bool:
    kinds = (".cu", ".cuh") if framework == "pytorch" else (".cu.cc", ".cu.h")
    return any(str(p).endswith(kinds) for p in paths)


def write_index(doc: dict[str, Any], path: Path) -> None:
    path.write_bytes(gzip.compress(json.dumps(doc, separators=(",", ":"), sort_keys=True).encode(), mtime=0))


@lru_cache(maxsize=4)
def _load(path: str) -> dict[str, Any] | None:
    try:
        doc = json.loads(gzip.decompress(Path(path).read_bytes()))
    except (OSError, ValueError, EOFError):
        return None
    return doc if isinstance(doc, dict) and doc.get("format") == FORMAT else None


@lru_cache(maxsize=256)
def _release_paths(path: str, framework: str, position: int) -> frozenset[str]:
    doc = _load(path)
    assert doc is not None
    table = doc["frameworks"][framework]["paths"]
    return frozenset(p for p, ranges in table.items() if any(a <= position <= b for a, b in ranges))


@lru_cache(maxsize=256)
def _release_declarations(path: str, framework: str, position: int) -> Mapping[str, tuple[str, ...]]:
    doc = _load(path)
    assert doc is not None
    found: dict[str, list[str]] = {}
    for key, ranges in doc["frameworks"][framework].get("declarations", {}).items():
        if any(a <= position <= b for a, b in ranges):
            header, _, name = key.partition("|")
            found.setdefault(header, []).append(name)
    return MappingProxyType({h: tuple(sorted(names)) for h, names in found.items()})


def indexed_release(framework: str, version: str | None, index: str | Path | None = None) -> IndexedRelease | None:
    """The indexed release standing for `version`: the same release number (exact), else the nearest indexed release
    not after it, else (a version before them all) the first one; None for an unknown framework or version."""
    fw = "pytorch" if framework in ("torch", "pytorch") else framework
    key = release_key(version)
    path = str(index or INDEX_PATH)
    doc = _load(path)
    if key is None or doc is None or fw not in doc.get("frameworks", {}):
        return None
    table = doc["frameworks"][fw]
    keys = [release_key(r) for r in table["releases"]]
    exact = [i for i, k in enumerate(keys) if k == key]
    before = [i for i, k in enumerate(keys) if k is not None and k < key]
    if exact:
        pos, how = exact[0], ""
    elif before:
        pos = before[-1]
        how = f", the nearest indexed release before {version}"
    elif keys:
        pos = 0
        how = f", the first indexed release, after {version}"
    else:
        return None
    release = table["releases"][pos]
    package = "torch" if fw == "pytorch" else "tensorflow"
    return IndexedRelease(fw, release, _release_paths(path, fw, pos), bool(exact),
                          f"{package} {release}'s libraries (sftl's bundled release index{how})",
                          bool(table["wheels"][pos].get("gpu_build")), _release_declarations(path, fw, pos))


# how DeclaredHeaders writes a kept name back as a header line (sftl.localize.legacy.th_era_declarations keeps them)
_LINES = {
    "fn": "{api} void {prefix}({name})(void);",
    "nn": "TH_API void THNN_({name}_updateOutput)(void);",
    "struct": "struct {name} {{}};",
    "decl": "Tensor {name}(const Tensor & self);",
}


class DeclaredHeaders:
    """A TH-era release's headers as the bundled index keeps them, for a source without them: each header's kept
    declarations written back as lines the TH-era reader parses (`THCTensor_(max)`, `struct ReduceMax {};`,
    `_th_max(`); never the file's text, and the first line says so. A layer of the report's release."""

    declarations_only = True  # its files are the kept declarations, not texts: reasons say so

    def __init__(self, hit: IndexedRelease, version: str | None) -> None:
        self.framework = hit.framework
        self.version = version
        self.description = (f"the declarations of torch {hit.release}'s headers kept by sftl's bundled release index"
                            + ("" if hit.exact else f", standing for {version}"))
        self._hit = hit
        self._files = frozenset(h for h, names in hit.declarations.items()
                                if any(n.partition(":")[0] in _LINES for n in names))

    def list_files(self) -> list[str]:
        return sorted(self._files)

    def read_text(self, path: str) -> str | None:
        names = self._hit.declarations.get(path)
        if not names or path not in self._files:
            return None
        cuda = path.startswith(("aten/src/THC/", "aten/src/THCS/", "aten/src/THCUNN/"))
        api, prefix = ("THC_API", "THCTensor_") if cuda else ("TH_API", "THTensor_")
        lines = [f"// {path}: {self.description} (not the file's text)"]
        for entry in names:
            kind, _, name = entry.partition(":")
            if kind in _LINES:
                lines.append(_LINES[kind].format(api=api, prefix=prefix, name=name))
        return "\n".join(lines) + "\n"


def declared_headers(framework: str, version: str | None) -> DeclaredHeaders | None:
    """The TH-era headers the index keeps for the release standing for `version`, as a layer; None when it keeps none
    (a release after the TH era, an unindexed framework)."""
    hit = indexed_release(framework, version)
    return DeclaredHeaders(hit, version) if hit is not None and _th_era(hit) else None


def declared_headers_after(framework: str, version: str | None) -> DeclaredHeaders | None:
    """The next indexed release's TH-era headers after the one standing for `version`, as a successor layer (what op
    history reads: was the op ported to a native kernel by then?); None past the TH era or the index."""
    hit = indexed_release(framework, version)
    doc = _load(str(INDEX_PATH))
    if hit is None or doc is None:
        return None
    releases = doc["frameworks"][hit.framework]["releases"]
    later = releases[releases.index(hit.release) + 1:] if hit.release in releases else []
    after = indexed_release(framework, later[0]) if later else None
    return DeclaredHeaders(after, after.release) if after is not None and _th_era(after) else None


def _th_era(hit: IndexedRelease) -> bool:
    return any(n.startswith(("fn:", "nn:")) for names in hit.declarations.values() for n in names)
