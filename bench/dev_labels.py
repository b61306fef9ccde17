"""Turn ../shared/data/dev/ rows into `sftl eval` label files (inline GitHub issue objects), at run time.

    .venv/bin/python bench/dev_labels.py OUT_DIR

writes OUT_DIR/dev_triage.jsonl (164 screening rows), OUT_DIR/dev_localize.jsonl (the 6 real
localization rows and the 25 injected missing-module faults) and OUT_DIR/dev_all.jsonl (both),
OUT_DIR/dev_real.jsonl (the 49 real mme/gcrde rows composed as bench/bench_real.py files them, read at
their release through the home's wheels and Debian trees, as `sftl locate` reads them; for
`sftl eval --keep-features` and `sftl model fit`) and OUT_DIR/dev_injected.jsonl (the injected faults alone),
plus OUT_DIR/trees/<fault>/: for each injected fault, the installed torch 2.13.0 / tensorflow-cpu
2.21.0 Python files (symlinks into site-packages) with the named member removed from its class
(the removal is bench/bench_locate.py's `remove_member`, shared rather than written twice).
Real localization rows get the Debian PyTorch tree under /work/cache/pytorch-src/ closest to
their release (1.13.1 below 2.0 or unknown, else 2.6.0) when it is there. Nothing is written into
the repository.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEV = ROOT.parent / "shared" / "data" / "dev"
DEBIAN = Path("/work/cache/pytorch-src")
sys.path.insert(0, str(ROOT / "bench"))

from bench_locate import issue_from_row, remove_member, site_packages  # noqa: E402
from bench_screen import as_issue_body  # noqa: E402

from sftl.github import issue_to_json  # noqa: E402
from sftl.model import Issue  # noqa: E402

_PACKAGE = {"pytorch": "torch", "tensorflow": "tensorflow"}
_SKIP_DIRS = {"__pycache__", "include", "lib", "bin", "share"}


def _read(name: str) -> list[dict[str, Any]]:
    path = DEV / name
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _issue_json(issue: Issue) -> dict[str, Any]:
    obj = issue_to_json(issue)
    obj.setdefault("state", "closed")
    return obj


def triage_labels() -> list[dict[str, Any]]:
    out = []
    for row in _read("triage.jsonl"):
        repo = "/".join(row["url"].split("/")[3:5])
        number = int(row["url"].rstrip("/").split("/")[-1])
        issue = Issue(repo=repo, number=number, title=row["title"], body=as_issue_body(row), html_url=row["url"])
        out.append({"url": row["url"], "category": row["label"], "truth_files": [], "framework": row["framework"],
                    "version": row.get("version"), "issue": _issue_json(issue)})
    return out


def debian_tree(version: str | None) -> Path | None:
    """The Debian PyTorch source tree nearest the release (only 1.13.1 and 2.6.0 exist)."""
    try:
        major = int((version or "1").split(".")[0])
    except ValueError:
        major = 1
    name = "pytorch-v2.6.0" if major >= 2 else "pytorch-1.13.1"
    tree = DEBIAN / name
    return tree if (tree / "aten").is_dir() else None


def mutated_tree(out: Path, row: dict[str, Any]) -> Path:
    """A tree of symlinks to the installed release's files, with the mutated file written for real."""
    mut = row["mutation"]
    name = f"{row['framework']}-{row['version']}-{mut['class']}-{mut['name']}"
    root = out / "trees" / name
    target = root / mut["file"]
    if target.exists() and not target.is_symlink():
        return root  # built by an earlier run
    site = site_packages()
    pkg = _PACKAGE[row["framework"]]
    for dirpath, dirnames, filenames in os.walk(site / pkg):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS]
        rel = Path(dirpath).relative_to(site)
        (root / rel).mkdir(parents=True, exist_ok=True)
        for f in filenames:
            link = root / rel / f
            if not link.exists() and not link.is_symlink():
                link.symlink_to(Path(dirpath) / f)
    original = (site / mut["file"]).read_text(encoding="utf-8")
    target.unlink()
    target.write_text(remove_member(original, mut["class"], mut["name"]), encoding="utf-8")
    return root


def localize_labels(out: Path) -> list[dict[str, Any]]:
    labels = []
    for row in _read("localize.jsonl"):
        line = {"url": row["url"], "category": row["category"], "truth_files": row["truth_files"],
                "framework": row["framework"], "version": row.get("version"), "issue": _issue_json(issue_from_row(row))}
        tree = debian_tree(row.get("version")) if row["framework"] == "pytorch" else None
        if tree is not None:
            line["source_root"] = str(tree)
        labels.append(line)
    for row in _read("mme_injected.jsonl"):
        labels.append({"url": row["url"], "category": row["category"], "truth_files": row["truth_files"],
                       "framework": row["framework"], "version": row["version"],
                       "issue": _issue_json(issue_from_row(row)), "source_root": str(mutated_tree(out, row))})
    return labels


def real_labels() -> list[dict[str, Any]]:
    """The 49 real mme/gcrde rows as their reporters filed them (title, code, output, version: never the row's
    summary, fix or truth fields), dated by issue number between the rows, and the peer rows, that say when."""
    from real_compose import compose_issue, number_anchors, repo_and_number

    raws = _read("real_localize.jsonl") + _read("localize.jsonl")
    anchors = number_anchors(raws)
    peer = DEV.parent / "peer" / "peer_given.jsonl"
    if peer.is_file():  # the peer rows' filing days anchor the dates of the dev rows between them
        for line in peer.read_text(encoding="utf-8").splitlines():
            row = json.loads(line) if line.strip() else {}
            if row.get("url") and row.get("filed"):
                repo, number = repo_and_number(row["url"])
                anchors.setdefault(repo, []).append((number, str(row["filed"])[:10]))
        for pairs in anchors.values():
            pairs.sort()
    out = []
    for raw in raws:
        issue = compose_issue(raw, anchors)
        out.append({"url": raw["url"], "category": raw["category"], "truth_files": raw.get("truth_files") or [],
                    "framework": raw.get("framework") or "pytorch",  # the version: as sftl reads it from the body
                    "created_at": issue["created_at"], "issue": issue})
    return out


def write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def build(out: Path) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    triage = triage_labels()
    localize = localize_labels(out)
    injected = [line for line in localize if "source_root" in line and "/trees/" in line["source_root"]]
    return {
        "real": write(out / "dev_real.jsonl", real_labels()),
        "injected": write(out / "dev_injected.jsonl", injected),
        "triage": write(out / "dev_triage.jsonl", triage),
        "localize": write(out / "dev_localize.jsonl", localize),
        "all": write(out / "dev_all.jsonl", triage + localize),
    }


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    target = Path(sys.argv[1]).resolve()
    if target == ROOT or ROOT in target.parents:
        sys.exit("dev_labels: write outside the repository")
    if not DEV.is_dir():  # a checkout without the shared data beside it: say where it was looked for
        sys.exit(f"dev_labels: the development rows are not at {DEV} (this script reads ../shared/data/dev/ "
                 "beside the repository, as the team's layout has it)")
    for name, path in build(target).items():
        print(f"{name}: {path}")
