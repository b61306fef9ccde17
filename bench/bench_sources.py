"""Measure what a backlog costs in sources: `sftl triage` of 100 issues over 5 releases on a loopback GitHub.

The loopback server (tests/ghserver.py) serves two repositories' issue listings and, for each release,
the repository archive at its tag behind a redirect, as GitHub does. Issues name their release the
ways reporters do (`2.1.0+cu121`, `2.1`, `tf 2.16`, `tensorflow-gpu 2.15.0`, ...); a third are
discrepancies, a fifth missing-module errors, the rest other reports. Both backlogs run through the
real CLI (`sftl triage OWNER/REPO --jobs 2`, a fresh SFTL_HOME), then once more (everything cached).

Prints per run: archive/commit/API requests, archive bytes, per located issue, the cache's size at
the end, and whether any wheel was downloaded. The archives are built from the project's fixture
trees (small); `--real-tree DIR` makes one PyTorch release's archive from a real checkout (e.g.
/work/cache/trees/pytorch-v2.6.0) so the bytes and the extraction time are a real release's.

    .venv/bin/python bench/bench_sources.py [--real-tree /work/cache/trees/pytorch-v2.6.0]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from ghserver import GitHubServer, make_issue, make_tarball  # noqa: E402
from test_sources_archive import (  # noqa: E402
    GCRDE_BODY,
    MME_BODY,
    TF_BODY,
    pytorch_files,
    tensorflow_files,
)

SHA = "0123456789abcdef0123456789abcdef01234567"
# release tag -> the spellings its reporters use
PYTORCH = {
    "v2.1.0": ["2.1.0+cu121", "2.1.0", "2.1.0+cpu"],
    "v2.2.2": ["2.2.2", "2.2", "2.2.2+cu118"],
    "v1.13.1": ["1.13.1+cu117", "1.13.1", "1.13"],
}
TENSORFLOW = {
    "v2.15.0": ["2.15.0", "tensorflow-gpu 2.15.0", "tf 2.15"],
    "v2.16.1": ["tf 2.16", "2.16.1", "2.16"],
}
OTHER_BODY = """CUDA out of memory when training a large model on my GPU.

```
RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.90 GiB total capacity)
```

### Versions

PyTorch version: {version}
"""
DOCS_BODY = "The documentation page of {api} has a broken link in its second example.\n\nVersion: {version}\n"


def backlog() -> tuple[list[dict], list[dict]]:
    """60 PyTorch issues (3 releases) and 40 TensorFlow issues (2 releases)."""
    torch_issues, tf_issues = [], []
    number = 1000
    for _tag, spellings in PYTORCH.items():
        for i in range(20):
            number += 1
            version = spellings[i % len(spellings)]
            if i < 8:
                title, body = "torch.histc differs between CPU and CUDA", GCRDE_BODY.format(version=version)
            elif i < 14:
                title, body = "GraphModule: no attribute _tensor_constant0", MME_BODY.replace("2.1.0+cu121", version)
            elif i < 17:
                title, body = "CUDA out of memory in training", OTHER_BODY.format(version=version)
            else:
                title, body = "Broken link in the docs", DOCS_BODY.format(api="torch.histc", version=version)
            torch_issues.append(make_issue("pytorch/pytorch", number, title=title, body=body))
    for _tag, spellings in TENSORFLOW.items():
        for i in range(20):
            number += 1
            version = spellings[i % len(spellings)]
            if i < 12:
                title, body = "floormod differs on GPU", TF_BODY.replace("tf 2.16", version)
            else:
                title, body = "Broken link in the docs", DOCS_BODY.format(api="tf.math.floormod", version=version)
            tf_issues.append(make_issue("tensorflow/tensorflow", number, title=title, body=body))
    return torch_issues, tf_issues


def real_files(root: Path) -> dict[str, str | bytes]:
    """Every file of a real checkout (the archive GitHub would serve holds them all; extraction keeps a part)."""
    files: dict[str, str | bytes] = {}
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and ".git" not in path.parts:
            files[str(path.relative_to(root))] = path.read_bytes()
    return files


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.1f} kB"


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def triage(repo: str, home: Path, url: str, out: Path) -> dict:
    env = {**os.environ, "SFTL_HOME": str(home), "SFTL_GITHUB_API_URL": url, "SFTL_BACKOFF": "0.05"}
    env.pop("GITHUB_TOKEN", None)
    code = "import sys; from sftl.cli import main; sys.exit(main())"
    done = subprocess.run([sys.executable, "-c", code, "triage", repo, "--jobs", "2", "--json", "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"triage {repo} failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def outcomes(home: Path) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """Counts of category:outcome, and per (repo, category) the top-1 files the located issues got."""
    from sftl.store import Store
    from sftl.triage import RESULT_KIND

    counts: dict[str, int] = {}
    tops: dict[str, dict[str, int]] = {}
    with Store(home / "sftl.db") as store:
        for _, payload in store.iter_results(RESULT_KIND):
            row = payload.get("row") or {}
            key = f"{row.get('category')}:{row.get('outcome')}"
            counts[key] = counts.get(key, 0) + 1
            if row.get("outcome") == "located" and row.get("suspects"):
                group = tops.setdefault(f"{row['issue']['repo']} {row.get('category')}", {})
                path = row["suspects"][0]["path"]
                group[path] = group.get(path, 0) + 1
    return counts, tops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real-tree", type=Path, help="a real PyTorch checkout to serve as the v2.1.0 archive")
    args = parser.parse_args()
    torch_issues, tf_issues = backlog()
    with GitHubServer() as gh, tempfile.TemporaryDirectory(prefix="bench-sources-") as tmp:
        sizes: dict[str, int] = {}
        started = time.perf_counter()
        for tag in PYTORCH:
            files = real_files(args.real_tree) if args.real_tree and tag == "v2.1.0" else pytorch_files()
            if args.real_tree and tag == "v2.1.0":
                from test_sources_archive import GRAPH_MODULE_PY, MODULE_PY

                files.update({"torch/nn/modules/module.py": MODULE_PY, "torch/fx/graph_module.py": GRAPH_MODULE_PY})
            data = make_tarball("pytorch/pytorch", SHA, files)
            gh.add_archive("pytorch/pytorch", tag, data)
            sizes[f"pytorch/pytorch@{tag}"] = len(data)
        for tag in TENSORFLOW:
            data = make_tarball("tensorflow/tensorflow", SHA, tensorflow_files())
            gh.add_archive("tensorflow/tensorflow", tag, data)
            sizes[f"tensorflow/tensorflow@{tag}"] = len(data)
        print(f"archives built in {time.perf_counter() - started:.1f}s: "
              + ", ".join(f"{k} {_size(v)}" for k, v in sizes.items()))
        gh.add_issues("pytorch/pytorch", torch_issues)
        gh.add_issues("tensorflow/tensorflow", tf_issues)
        home = Path(tmp) / "home"
        for run in ("first (empty SFTL_HOME)", "second (all cached)"):
            gh.requests.clear()
            started = time.perf_counter()
            summaries = [triage(repo, home, gh.url, Path(tmp) / f"report-{repo.split('/')[0]}")
                         for repo in ("pytorch/pytorch", "tensorflow/tensorflow")]
            seconds = time.perf_counter() - started
            counts, tops = outcomes(home)
            located = sum(v for k, v in counts.items() if k.endswith(":located"))
            archive_reqs = gh.count(r"/tarball/")
            codeload = [r for r in gh.requests if r.path.startswith("/_codeload/")]
            downloaded = 0
            for r in codeload:
                repo, _, ref = r.path[len("/_codeload/"):].partition("/legacy.tar.gz/")
                downloaded += sizes.get(f"{repo}@{ref}", 0) if r.status == 200 else 0
            api = [r for r in gh.requests if r.path.startswith("/repos/") and "/tarball/" not in r.path]
            cache = home / "cache" / "sources"
            print(f"\n== {run}: {sum(s['issues'] for s in summaries)} issues in {seconds:.1f}s")
            print(f"   outcomes: {dict(sorted(counts.items()))}")
            for group, paths in sorted(tops.items()):
                print(f"   top-1 of {group}: " + ", ".join(f"{p} x{n}" for p, n in sorted(paths.items(), key=lambda kv: -kv[1])))
            print(f"   source requests: {archive_reqs} archive (API) + {len(codeload)} archive host "
                  f"+ {gh.count(r'/commits$')} commits; other API requests (listings, comments): "
                  f"{len(api) - gh.count(r'/commits$')}")
            print(f"   archive bytes downloaded: {_size(downloaded)}; per located issue ({located}): "
                  f"{archive_reqs / max(1, located):.3f} archive requests, {_size(downloaded // max(1, located))}")
            print(f"   sources cache at the end: {_size(du(cache))} "
                  f"({len(list((cache / 'archives').glob('*/*/release.json')))} releases); "
                  f"wheels downloaded: {len(list((cache / 'wheels').rglob('*.whl'))) if (cache / 'wheels').exists() else 0}")


if __name__ == "__main__":
    main()
