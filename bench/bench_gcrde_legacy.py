"""Measure GCRDE on PyTorch's TH/THC era: real issues located with a real wheel's headers, and the fixture trees.

Sets:
1. the dev GCRDE rows whose fix changed TH/THC/THNN/THCUNN files (../shared/data/dev/localize.jsonl),
   located with ONLY the C/C++ headers of the nearest real wheel cached in $SFTL_WHEELS (default
   /work/cache/wheels: torch 1.0.1 / 1.4.0 / 1.8.1), as sftl does when no source tree of the release exists;
2. every dev GCRDE row with the best source sftl would assemble offline: the nearest real source tree
   (Debian's PyTorch 1.13.1 / 2.6.0 under $SFTL_PYTORCH_SRC, as `sftl sources add` registers them)
   layered over the nearest wheel (`open_source`'s order), next to the tree alone (what bench_gcrde.py
   scores), so the wheel's old headers are seen to help TH/THC-era rows and not to hurt the others;
   then as `open_source` itself builds it in a throwaway offline home (trees registered, wheels linked
   in), which also consults the next cached release: the report release's binding of each op decides
   whether its TH/THC files outrank the newer tree's native kernels (notes printed per row);
3. cases over the fixture trees/wheel (fixtures/legacy_tree_*: written for the tests, modeled on 0.4,
   1.4 and the 1.0.1 wheel; an optimistic figure, their author knew the localizer).

Rows without a version use the release current at their `created_at` when the row has one, else the
oldest cached wheel (the jsonl rows carry no dates). Prints top-1/3 and MRR per set and source.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from sftl.config import Settings, load_settings
from sftl.localize.gcrde import localize_gcrde
from sftl.localize.legacy import library
from sftl.model import Environment, Extraction, Issue, Localization, Snippet
from sftl.sources import (
    LayeredSource,
    LocalTree,
    SourceProvider,
    WheelSource,
    nearest_version,
    open_source,
    register_tree,
    release_at,
    wheel_cache_dir,
)

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data" / "dev" / "localize.jsonl"
WHEELS = Path(os.environ.get("SFTL_WHEELS", "/work/cache/wheels"))
SRC = Path(os.environ.get("SFTL_PYTORCH_SRC", "/work/cache/pytorch-src"))
TREES = {"1.13.1": "pytorch-1.13.1", "2.6.0": "pytorch-v2.6.0"}
TOP = 10

# (fixture source, version, title, body, apis, truth): one report per case, written for this bench
FIXTURE_CASES: list[tuple[str, str, str, str, tuple[str, ...], str]] = [
    ("legacy_tree_0_4", "0.4.0", "x >> 1 gives x * 2 on CUDA float tensors", "CPU divides, CUDA multiplies.",
     ("torch.Tensor.__rshift__",), "aten/src/THC/generic/THCTensorMathPairwise.cu"),
    ("legacy_tree_0_4", "0.4.0", "torch.max skips nan on GPU", "The CUDA result ignores NaN, the CPU returns nan.",
     ("torch.max",), "aten/src/THC/THCTensorMathReduce.cuh"),
    ("legacy_tree_0_4", "0.4.0", "torch.max wrong on CPU with nan", "The CPU result is wrong; it works on GPU.",
     ("torch.max",), "aten/src/TH/generic/THTensorMath.c"),
    ("legacy_tree_0_4", "0.4.0", "BCELoss differs between CPU and GPU", "The CUDA loss is wrong.",
     ("torch.nn.BCELoss",), "aten/src/THCUNN/BCECriterion.cu"),
    ("legacy_tree_1_4", "1.4.0", "rshift of a float cuda tensor is wrong", "CUDA result wrong, CPU fine.",
     ("torch.Tensor.__rshift__",), "aten/src/THC/generic/THCTensorMathPairwise.cu"),
    ("legacy_tree_1_4", "1.4.0", "rshift of a float tensor is wrong on CPU", "The CPU result is wrong; GPU is correct.",
     ("torch.Tensor.__rshift__",), "aten/src/ATen/native/cpu/BinaryOpsKernel.cpp"),
    ("legacy_tree_1_4", "1.4.0", "MultiLabelMarginLoss differs on GPU", "The CUDA loss is wrong.",
     ("torch.nn.MultiLabelMarginLoss",), "aten/src/THCUNN/generic/MultiLabelMarginCriterion.cu"),
    ("legacy_tree_1_4", "1.4.0", "histc wrong on CPU", "The CPU result is wrong; it works on GPU.",
     ("torch.histc",), "aten/src/TH/generic/THTensorMoreMath.cpp"),
    ("legacy_tree_1_4", "1.4.0", "histc wrong on CUDA", "The CUDA histogram is wrong.",
     ("torch.histc",), "aten/src/ATen/native/cuda/SummaryOps.cu"),
    ("legacy_tree_1_4", "1.4.0", "max ignores nan on cuda", "CUDA max drops NaN.",
     ("torch.max",), "aten/src/THC/THCTensorMathReduce.cuh"),
    ("legacy_tree_wheel_1_0_1", "1.0.1", "rshift on cuda tensors multiplies", "The CUDA result is wrong.",
     ("torch.Tensor.__rshift__",), "aten/src/THC/generic/THCTensorMathPairwise.cu"),
    ("legacy_tree_wheel_1_0_1", "1.0.1", "torch.max ignores nan on cuda", "CUDA max drops NaN.",
     ("torch.max",), "aten/src/THC/THCTensorMathReduce.cuh"),
    ("legacy_tree_wheel_1_0_1", "1.0.1", "BCELoss wrong on GPU", "The CUDA loss is wrong.",
     ("torch.nn.BCELoss",), "aten/src/THCUNN/generic/BCECriterion.cu"),
]


def dev_rows() -> list[dict[str, object]]:
    if not SHARED.is_file():
        print(f"(no {SHARED}: dev rows skipped)")
        return []
    rows = [json.loads(line) for line in SHARED.read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("category") == "gcrde" and r.get("framework", "pytorch") == "pytorch"]


def wheels() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for whl in sorted(WHEELS.glob("torch-*.whl")):
        out.setdefault(whl.name.split("-")[1], whl)
    return out


def release_of(row: dict[str, object], have: dict[str, Path]) -> tuple[str, str]:
    """The wheel version to use for a row, and how it was chosen."""
    version = row.get("version")
    if not isinstance(version, str) or not version:
        when = str(row.get("created_at") or "")
        inferred = release_at("pytorch", when) if when else None
        if inferred:
            return nearest_version(inferred, have) or "", f"no version; {inferred} current on {when[:10]}"
        oldest = min(have, key=lambda v: tuple(int(x) for x in v.split(".")[:3]))
        return oldest, "no version, no date: the oldest cached wheel"
    return nearest_version(version, have) or "", f"v{version}"


def case(row: dict[str, object]) -> tuple[Issue, Extraction]:
    issue = Issue(repo="pytorch/pytorch", number=0, title=str(row["title"]), body=str(row.get("observed") or ""),
                  created_at=str(row.get("created_at") or ""))
    ex = Extraction(Snippet(str(row.get("code") or ""), "dev"), None, Environment(framework="pytorch"),
                    apis=tuple(row.get("apis") or ()))  # type: ignore[arg-type]
    return issue, ex


def rank_of(loc: Localization, truth: set[str]) -> int | None:
    for i, s in enumerate(loc.suspects[:TOP], 1):
        if s.path in truth:
            return i
    return None


def summarize(name: str, ranks: list[int | None], seconds: list[float]) -> str:
    n = len(ranks)
    if not n:
        return f"{name:58} n=0"
    hit = lambda k: sum(1 for r in ranks if r is not None and r <= k) / n  # noqa: E731
    mrr = sum(1 / r for r in ranks if r) / n
    return (f"{name:58} n={n:2}  top1 {hit(1):.2f}  top3 {hit(3):.2f}  MRR {mrr:.2f}"
            f"  median {statistics.median(seconds) * 1000:.0f} ms/query")


Item = tuple[str, Issue, Extraction, SourceProvider, set[str]]


def run(label: str, items: list[Item], notes: bool = False) -> None:
    """Locate each item and print its rank; `notes`: also what the report release's binding decided."""
    ranks: list[int | None] = []
    secs: list[float] = []
    for name, issue, ex, source, truth in items:
        t0 = time.perf_counter()
        loc = localize_gcrde(issue, ex, source, top=TOP)
        secs.append(time.perf_counter() - t0)
        r = rank_of(loc, truth)
        ranks.append(r)
        top = "; ".join(f"{s.path.replace('aten/src/', '')} ({s.score:.2f})" for s in loc.suspects[:3]) or loc.reason
        print(f"  {name}: rank {r} [{loc.outcome.value}] top: {top}")
        if notes:
            said = [part for part in loc.reason.split("; ") if part.startswith("at ") and " was " in part]
            print("    " + ("; ".join(said) or "(no release binding read)"))
    print(summarize(label, ranks, secs))


def offline_home(home: Path, trees: dict[str, LocalTree], have: dict[str, Path]) -> Settings:
    """A throwaway sftl home set up as an offline user's: the real trees registered, the cached wheels linked in."""
    settings = load_settings({}, home=home, offline=True)
    for version, tree in trees.items():
        register_tree(settings, "pytorch", version, tree.root)
    for version, whl in have.items():
        folder = wheel_cache_dir(settings, "pytorch", version)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / whl.name).symlink_to(whl)
    return settings


def main() -> int:
    have = wheels()
    rows = dev_rows()
    if not have:
        print(f"no torch wheels under {WHEELS}: nothing to measure")
        return 0
    print(f"wheels: {', '.join(have)}  (from {WHEELS})")
    opened: dict[str, WheelSource] = {v: WheelSource(p, "pytorch", v) for v, p in have.items()}

    print("\n-- 1. dev rows fixed in TH/THC/THNN/THCUNN files, located with a real wheel's headers only")
    items: list[Item] = []
    for row in rows:
        truth = set(row["truth_files"])  # type: ignore[call-overload]
        if not any(library(t) for t in truth):
            continue
        version, how = release_of(row, have)
        issue, ex = case(row)
        items.append((f"{row['url']} ({how} -> wheel {version})", issue, ex, opened[version], truth))
    run("THC-era dev rows, wheel headers only [sftl]", items)

    trees = {v: LocalTree(SRC / d, "pytorch", v) for v, d in TREES.items() if (SRC / d).is_dir()}
    if trees:
        print("\n-- 2. all dev GCRDE rows: nearest real tree alone vs. layered over the nearest wheel")
        alone: list[Item] = []
        layered: list[Item] = []
        opened_as_user: list[Item] = []
        with tempfile.TemporaryDirectory() as home:
            settings = offline_home(Path(home), trees, have)
            for row in rows:
                truth = set(row["truth_files"])  # type: ignore[call-overload]
                version, how = release_of(row, have)
                v = str(row.get("version") or version)
                tv = "2.6.0" if v.startswith("2") and "2.6.0" in trees else min(trees)
                issue, ex = case(row)
                alone.append((f"{row['url']} ({how}; tree {tv})", issue, ex, trees[tv], truth))
                stack = LayeredSource([trees[tv], opened[version]])
                stack.version = version  # as open_source layers them: the report's release, read through a stand-in tree
                stack.description = f"nearest registered tree pytorch {tv} + wheel {have[version].name}"
                layered.append((f"{row['url']} ({how}; tree {tv} + wheel {version})", issue, ex, stack, truth))
                provider = open_source("pytorch", version, settings, offline=True)
                later = ", ".join(str(p.version) for p in getattr(provider, "successors", ())) or "none"
                opened_as_user.append((f"{row['url']} ({how}; open_source {version}: later release consulted: {later})",
                                       issue, ex, provider, truth))
            run("dev GCRDE rows, nearest tree alone [sftl]", alone)
            run("dev GCRDE rows, nearest tree + nearest wheel [sftl]", layered)
            run("dev GCRDE rows, open_source (tree + wheel + next cached release) [sftl]", opened_as_user, notes=True)
    else:
        print(f"\n(no source trees under {SRC}: set 2 skipped; bench_gcrde.py unpacks them)")

    print("\n-- 3. fixture trees and wheel (written for the tests; optimistic)")
    items = []
    with tempfile.TemporaryDirectory() as tmp:
        for src, version, title, body, apis, truth in FIXTURE_CASES:
            folder = ROOT / "fixtures" / src
            if "wheel" in src:
                whl = Path(tmp) / f"torch-{version}-cp36-cp36m-manylinux1_x86_64.whl"
                if not whl.exists():
                    with zipfile.ZipFile(whl, "w") as zf:
                        for p in sorted(folder.rglob("*")):
                            if p.is_file():
                                zf.write(p, p.relative_to(folder).as_posix())
                source: SourceProvider = WheelSource(whl, "pytorch", version)
            else:
                source = LocalTree(folder, "pytorch", version)
            issue = Issue(repo="pytorch/pytorch", number=0, title=title, body=body)
            ex = Extraction(None, None, Environment(framework="pytorch", version=version), apis=apis)
            items.append((f"{src}: {title}", issue, ex, source, {truth}))
        run("fixture cases [sftl]", items)
    return 0


if __name__ == "__main__":
    sys.exit(main())
