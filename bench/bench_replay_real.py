"""Replay benchmark over the real reports that carry a snippet: reproduction rate per framework and era, env time and disk, why the rest did not reproduce.

    python bench/bench_replay_real.py [--rows mme|error|all] [--framework F] [--limit N] [--build]
                                      [--max-disk 40G] [--json OUT] [--no-repair]

Reads ../shared/data/dev/real_localize.jsonl, ../shared/data/dev/localize.jsonl and the peer rows with
code (../shared/data/peer/peer_given.jsonl) without copying them. Each row becomes the issue its
reporter filed (bench/real_compose.py for the dev rows; the peer rows are the reporters' own text),
goes through sftl's extraction, and is replayed on the CPU, sandboxed, in the environment of the
release it names (built with --build, reused across rows of one release; `sftl envs prune` keeps the
disk under --max-disk). A row counts as reproduced only when its replay raised the report's error
class (and, for missing-module errors, the same missing name).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from real_compose import compose_issue, number_anchors  # noqa: E402

from sftl.config import load_settings  # noqa: E402
from sftl.envs import load_catalog, resolve  # noqa: E402
from sftl.envs_build import EnvManager  # noqa: E402
from sftl.extract import extract  # noqa: E402
from sftl.github_json import issue_from_json  # noqa: E402
from sftl.model import Issue, Outcome, Replay, ReplayEnvironment  # noqa: E402
from sftl.replay import expected_error, framework_of, has_cuda_device, missing_name, replay_issue  # noqa: E402
from sftl.sandbox import Limits, parse_size  # noqa: E402
from sftl.store import Store  # noqa: E402

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
_GPU_ONLY = re.compile(r"CUDA error|_cuda_|cuda runtime error|CUDNN_STATUS|cuBLAS|device-side assert", re.I)


def _dev_rows() -> list[tuple[str, dict[str, Any]]]:
    rows = []
    for name in ("dev/real_localize.jsonl", "dev/localize.jsonl"):
        path = DATA / name
        if path.exists():
            rows += [(name, json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
    return [(src, r) for src, r in rows if isinstance(r.get("code"), str) and r["code"].strip()]


def _peer_rows() -> list[tuple[str, dict[str, Any]]]:
    path = DATA / "peer" / "peer_given.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [("peer/peer_given.jsonl", r) for r in rows if "```" in (r.get("body") or "") or ">>>" in (r.get("body") or "")]


def _issue(src: str, row: dict[str, Any], anchors: Any) -> Issue:
    if src.startswith("dev/"):
        return issue_from_json(compose_issue(row, anchors))
    m = re.match(r"https?://github\.com/([^/]+/[^/]+)/(?:issues|pull)/(\d+)", row["url"])
    assert m is not None
    body = row.get("body") or ""
    if row.get("version") and row.get("version_stated"):
        body += f"\n\nversion: {row['framework']} {row['version']}"  # the benchmark read it from the report
    return issue_from_json({
        "url": f"https://api.github.com/repos/{m.group(1)}/issues/{m.group(2)}",
        "repository_url": f"https://api.github.com/repos/{m.group(1)}",
        "html_url": f"https://github.com/{m.group(1)}/issues/{m.group(2)}", "number": int(m.group(2)),
        "title": row.get("title") or "", "user": {"login": "reporter"}, "labels": [], "state": "closed",
        "comments": 0, "created_at": row.get("created_at") or "", "updated_at": row.get("created_at") or "",
        "body": body,
    })


def era(framework: str, version: str | None) -> str:
    if not version:
        return f"{framework} ?"
    major, minor = (int(x) for x in version.split(".")[:2])
    if framework == "tensorflow":
        return "TF 1.x" if major == 1 else "TF 2.0" if (major, minor) == (2, 0) else "TF 2.1+"
    return "PyTorch 1.x" if major == 1 else "PyTorch 2.x"


def _du(path: Path | None) -> int:
    if path is None or not path.exists():
        return 0
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", choices=("mme", "error", "all"), default="error",
                        help="mme: reports whose error is a missing module/attribute; error: any report with an "
                             "error to reproduce (default); all: every row with a snippet")
    parser.add_argument("--framework", choices=("pytorch", "tensorflow"))
    parser.add_argument("--era", help="only rows of this era (e.g. 'TF 1.x')")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--build", action="store_true", help="build missing environments (network)")
    parser.add_argument("--max-disk", default="40G", help="prune built environments above this (default 40G)")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--no-repair", action="store_true")
    parser.add_argument("--json", type=Path, help="write every row's result here")
    parser.add_argument("--list", action="store_true", help="list the chosen rows and their releases; replay nothing")
    args = parser.parse_args()
    settings = load_settings()
    catalog = load_catalog()
    manager = EnvManager(settings, catalog)
    rows = _dev_rows() + _peer_rows()
    anchors = number_anchors([r for s, r in rows if s.startswith("dev/")])
    chosen = []
    for src, row in rows:
        issue = _issue(src, row, anchors)
        ex = extract(issue)
        exp = expected_error(ex)
        fw = framework_of(issue, ex) or row.get("framework")
        if args.framework and fw != args.framework:
            continue
        if args.rows != "all" and (exp is None or not exp.exception.strip()):
            continue
        if args.rows == "mme" and (exp is None or missing_name(exp.exception, exp.message) is None):
            continue
        try:
            res = resolve(catalog, str(fw), ex.environment.version, issue.created_at or None)
            row_era = era(res.framework, res.version)
        except Exception:  # noqa: BLE001 -- an unreadable version is a row like any other; replay says why
            res, row_era = None, era(str(fw), None)
        if args.era and row_era != args.era:
            continue
        chosen.append((src, row, issue, ex, row_era, res))
    if args.limit:
        chosen = chosen[: args.limit]
    # rows of one release together: each environment is built once and reused
    chosen.sort(key=lambda c: (c[5].framework, c[5].version) if c[5] else ("", ""))
    print(f"{len(chosen)} rows ({args.rows}) of {len(rows)} with a snippet", flush=True)
    if args.list:
        for _src, row, _iss, ex, row_era, res in chosen:
            exp = expected_error(ex)
            print(f"{row_era:<12} {row['url'].split('github.com/')[1]:<34} {ex.environment.version!r:<24} -> "
                  f"{res.version if res else '-':<9} {(exp.exception + ': ' + exp.message)[:90] if exp else ''}")
        return 0
    results = []
    envs_seen: dict[str, dict[str, Any]] = {}
    max_disk = parse_size(args.max_disk)
    with Store(settings.db_path) as store:
        for src, row, issue, ex, row_era, res in chosen:
            t0 = time.monotonic()
            built_before = {h.name for h in manager.built()}
            exp = expected_error(ex)
            if exp is not None and _GPU_ONLY.search(f"{exp.exception}: {exp.message}") and not has_cuda_device():
                # a CUDA error reproduces on a GPU only: no environment is built for a run that cannot happen here
                replay = Replay(ReplayEnvironment(res.framework if res else None, res.version if res else None,
                                                  None, None, None), (), Outcome.NO_DEVICE,
                                "the report's error is raised by CUDA (a GPU-only failure); this machine has no GPU")
            else:
                replay = replay_issue(issue, ex, settings, store, device="cpu", build=args.build,
                                      limits=Limits(timeout=args.timeout), repair=not args.no_repair)
            seconds = time.monotonic() - t0
            env = replay.environment
            if env.name and env.name not in envs_seen and env.backend == "venv":
                handle = manager.get(env.name)
                meta = json.loads((handle.path / "sftl-env.json").read_text()) if handle.path else {}
                envs_seen[env.name] = {"built_now": env.name not in built_before, "build_seconds": meta.get("build_seconds"),
                                       "bytes": _du(handle.path), "import_vm_bytes": meta.get("import_vm_bytes")}
            run = replay.runs[0] if replay.runs else None
            out = {
                "row": row["url"], "source": src, "era": row_era, "framework": env.framework,
                "reported_version": ex.environment.version, "replayed_on": env.version, "env": env.name,
                "expected": f"{exp.exception}: {exp.message[:160]}" if exp else None,
                "verdict": replay.verdict.value, "reason": replay.reason[:600],
                "got": f"{run.exception}: {(run.message or '')[:160]}" if run and run.exception else None,
                "repairs": [r.detail for r in replay.repairs], "packages": list(replay.packages),
                "seconds": round(seconds, 1),
            }
            results.append(out)
            print(f"{out['verdict']:<16} {row_era:<12} {row['url'].split('github.com/')[1]:<34} "
                  f"{(env.version or '-'):<9} {out['reason'][:150]}", flush=True)
            if args.build:  # `sftl envs prune`: the least recently used go first
                removed = manager.prune(max_disk, keep=(env.name,) if env.name else ())
                if removed:
                    print(f"  pruned {', '.join(n for n, _ in removed)} to stay under {args.max_disk}", flush=True)
    _summary(results, envs_seen, catalog)
    if args.json:
        args.json.write_text(json.dumps({"rows": results, "envs": envs_seen}, indent=1))
    return 0


def why_not(row: dict[str, Any]) -> str:
    """The cause of a row's failure to reproduce, in a maintainer's words."""
    got = row.get("got") or ""
    verdict = row["verdict"]
    if verdict == Outcome.NO_SNIPPET.value:
        return "no runnable snippet in the report (code only inside a traceback, or a shell command)"
    if verdict == Outcome.NO_DEVICE.value:
        return "a CUDA error: reproduces on a GPU only (none here)"
    if verdict == Outcome.ENV_UNAVAILABLE.value:
        return "no environment"
    if verdict == Outcome.NO_ERROR.value:
        return "ran without error on the CPU (fixed in that build, data- or device-dependent)"
    if got.startswith("NameError"):
        return "the snippet is a fragment: a name it uses is defined nowhere in the report"
    if got.startswith(("ModuleNotFoundError", "ImportError")):
        return "it imports a module the report does not provide (its own code, or a package not installed)"
    if got.startswith("SyntaxError"):
        return "the snippet does not parse even after its repairs"
    if got.startswith(("FileNotFoundError", "OSError", "IOError", "NotFoundError")):
        return "it reads a file the report does not provide"
    return f"a different error ({verdict})"


def _summary(results: list[dict[str, Any]], envs: dict[str, dict[str, Any]], catalog: Any) -> None:
    by_era: dict[str, Counter[str]] = defaultdict(Counter)
    for r in results:
        by_era[r["era"]][r["verdict"]] += 1
    print("\nreproduction per framework and era (CPU replays; reproduced = same error class and missing name)")
    for name in sorted(by_era):
        c = by_era[name]
        total = sum(c.values())
        print(f"  {name:<12} {c[Outcome.REPRODUCED.value]}/{total} reproduced  "
              + ", ".join(f"{k} {v}" for k, v in sorted(c.items()) if k != Outcome.REPRODUCED.value))
    total = len(results)
    hit = sum(r["verdict"] == Outcome.REPRODUCED.value for r in results)
    print(f"  all          {hit}/{total} reproduced")
    unavailable = [r for r in results if r["verdict"] == Outcome.ENV_UNAVAILABLE.value]
    print(f"env-unavailable: {len(unavailable)}")
    for r in unavailable:
        print(f"  {r['row']}: {r['reason'][:200]}")
    repaired = [r for r in results if r["repairs"]]
    print(f"rows whose snippet was repaired: {len(repaired)}; with packages installed beside the framework: "
          f"{sum(bool(r['packages']) for r in results)}")
    print("environments (build time, disk, address space of the framework's import):")
    for name, e in sorted(envs.items()):
        print(f"  {name:<34} {'built now' if e['built_now'] else 'reused':<9} build {e['build_seconds'] or '-':>6} s  "
              f"{e['bytes'] / 2**20:8.0f} MiB  import {((e['import_vm_bytes'] or 0) / 2**30):.2f} GiB")
    print("not reproduced, by cause:")
    for cause, n in Counter(why_not(r) for r in results if r["verdict"] != Outcome.REPRODUCED.value).most_common():
        print(f"  {n:>3}  {cause}")
    print("not reproduced, each row:")
    for r in results:
        if r["verdict"] != Outcome.REPRODUCED.value:
            print(f"  {r['row']} [{r['era']}, {r['reported_version']!r} -> {r['replayed_on']}] {r['verdict']}: "
                  f"expected {r['expected']!r}; got {r['got']!r}")


if __name__ == "__main__":
    sys.exit(main())
