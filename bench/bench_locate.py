"""Measure `sftl locate` for missing-module errors: accuracy on injected faults and real issues, and CLI wall time.

Reads ../shared/data/dev/{mme_injected,localize}.jsonl at run time (never copied into the project).
Each injected row names the method removed from its class; the bench builds that mutated source
tree as an overlay over the installed torch 2.13.0 / tensorflow-cpu 2.21.0 Python files, turns
the row into an issue (title, body with the snippet and traceback; never the row's summary) and
localizes it with both methods. Prints top-1/3/5 and MRR per framework and method.

With SFTL_HOME set, the overlay names that home's wheel cache, so the MME localizer also reads the
releases before and after the installed one (a deletion must still rank the owner, not the referrer):
`SFTL_HOME=/work/cache/home .venv/bin/python bench/bench_locate.py`.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "dev"
sys.path.insert(0, str(ROOT))

from sftl.localize.dispatch import localize_paper, localize_sftl  # noqa: E402
from sftl.model import Category, Issue, Outcome  # noqa: E402

try:
    from sftl.extract import extract as _extract
except ImportError:  # the extract stage has not landed: a minimal reader of the traceback
    _extract = None


def site_packages() -> Path:
    import sysconfig

    return Path(sysconfig.get_paths()["purelib"])


class Overlay:
    """A source provider: the installed framework's Python files with some files replaced."""

    def __init__(self, root: Path, framework: str, version: str, overrides: dict[str, str]) -> None:
        self.root = root
        self.framework = framework
        self.version = version
        self.description = f"installed {framework} {version} with an injected fault"
        self.overrides = overrides
        self._files: list[str] | None = None
        # the wheel cache of $SFTL_HOME, where the localizer finds the releases before and after this one
        home = os.environ.get("SFTL_HOME")
        wheels = Path(home) / "cache" / "sources" / "wheels" if home else None
        self.release_wheels = wheels if wheels is not None and wheels.is_dir() else None

    def list_files(self) -> list[str]:
        if self._files is None:
            pkg = "torch" if self.framework == "pytorch" else "tensorflow"
            out = []
            for dirpath, dirnames, filenames in os.walk(self.root / pkg):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
                rel = os.path.relpath(dirpath, self.root).replace(os.sep, "/")
                out.extend(f"{rel}/{f}" for f in sorted(filenames))
            self._files = out
        return self._files

    def read_text(self, path: str) -> str | None:
        if path in self.overrides:
            return self.overrides[path]
        try:
            return (self.root / path).read_text(encoding="utf-8", errors="replace")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None


def remove_member(text: str, class_name: str, name: str) -> str:
    """The source with every definition of `name` in class `class_name` deleted (methods, properties, assignments)."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                hit = False
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name:
                    hit = True
                elif isinstance(item, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in item.targets):
                    hit = True
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.target.id == name:
                    hit = True
                if hit:
                    start = min([item.lineno, *(d.lineno for d in getattr(item, "decorator_list", []))])
                    spans.append((start, item.end_lineno or item.lineno, node))
    if not spans:
        raise ValueError(f"{class_name}.{name} not found")
    for start, end, cls in sorted(spans, reverse=True):
        indent = " " * (cls.body[0].col_offset)
        lines[start - 1 : end] = [f"{indent}pass\n"]  # keeps the class body non-empty
    return "".join(lines)


def _fallback_extraction(issue: Issue, row: dict):  # type: ignore[no-untyped-def]
    import re

    from sftl.model import Environment, Extraction, Frame, Traceback

    tb = row.get("traceback") or ""
    frames = []
    lines = tb.splitlines()
    for i, ln in enumerate(lines):
        m = re.match(r'\s*File "([^"]+)", line (\d+), in (.+)', ln)
        if m:
            src = lines[i + 1].strip() if i + 1 < len(lines) and not lines[i + 1].lstrip().startswith("File ") else ""
            if src.startswith("^") or src.startswith("~"):
                src = ""
            frames.append(Frame(path=m.group(1), line=int(m.group(2)), function=m.group(3), source=src))
    last = lines[-1] if lines else (row.get("error") or "")
    exc, _, msg = last.partition(": ")
    return Extraction(
        snippet=None,
        traceback=Traceback(tuple(frames), exc, msg) if frames else None,
        environment=Environment(framework=row.get("framework"), version=row.get("version")),
        error_line=last or None,
    )


def issue_from_row(row: dict) -> Issue:
    url = row["url"]
    repo = "/".join(url.split("/")[3:5])
    number = int(url.rstrip("/").split("/")[-1])
    body = []  # never the row's summary/truth/fix: they were written knowing the answer
    if row.get("prose"):  # text the bench composed (the error-line-only variant)
        body.append(row["prose"])
    if row.get("code"):
        body.append("```python\n" + row["code"].rstrip() + "\n```")
    if row.get("traceback"):
        body.append("```\n" + row["traceback"].rstrip() + "\n```")
    env = [f"{k}: {row[k]}" for k in ("version", "python", "os", "cuda") if row.get(k)]
    if env:
        fw = "PyTorch" if row.get("framework") == "pytorch" else "TensorFlow"
        body.append("Environment:\n" + "\n".join(f"- {fw} {e}" if e.startswith("version") else f"- {e}" for e in env))
    return Issue(repo=repo, number=number, title=row["title"], body="\n\n".join(body), html_url=url)


def extraction_for(issue: Issue, row: dict):  # type: ignore[no-untyped-def]
    if _extract is not None:
        ex = _extract(issue)
        if ex.traceback is not None or ex.error_line:
            return ex
    return _fallback_extraction(issue, row)


def rank_of(suspects, truth: set[str]) -> int | None:  # type: ignore[no-untyped-def]
    for i, s in enumerate(suspects, 1):
        if s.path in truth:
            return i
    return None


def summarize(ranks: list[int | None]) -> str:
    n = len(ranks)
    if not n:
        return "n=0"
    t = {k: sum(1 for r in ranks if r is not None and r <= k) / n for k in (1, 3, 5)}
    mrr = sum(1 / r for r in ranks if r) / n
    return f"n={n:2d}  top1={t[1]:.2f}  top3={t[3]:.2f}  top5={t[5]:.2f}  MRR={mrr:.2f}"


def bench_injected(verbose: bool) -> None:
    path = DATA / "mme_injected.jsonl"
    if not path.exists():
        print(f"skip: {path} not found")
        return
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    sp = site_packages()
    results: dict[tuple[str, str], list[int | None]] = {}
    times: list[float] = []
    cpu: list[float] = []
    for row in rows:
        mut = row["mutation"]
        original = (sp / mut["file"]).read_text(encoding="utf-8")
        mutated = remove_member(original, mut["class"], mut["name"])
        source = Overlay(sp, row["framework"], row["version"], {mut["file"]: mutated})
        truth = set(row["truth_files"])
        # the same report with only its error line (many real reports paste no frames): the snippet
        # stays (user code), the traceback goes
        err = (row.get("traceback") or "").strip().splitlines()[-1:] or [row.get("error") or ""]
        line_only = dict(row, traceback="", prose="It fails with:\n\n" + err[0], error=err[0])
        for variant, vrow in (("", row), ("/line", line_only)):
            issue = issue_from_row(vrow)
            ex = extraction_for(issue, vrow)
            for method, fn in (("paper", localize_paper), ("sftl", localize_sftl)):
                t0, c0 = time.perf_counter(), time.process_time()
                loc = fn(issue, ex, Category.MME, source, 10)
                if not variant:
                    times.append(time.perf_counter() - t0)
                    cpu.append(time.process_time() - c0)
                r = rank_of(loc.suspects, truth) if loc.outcome == Outcome.LOCATED else None
                results.setdefault((row["framework"] + variant, method), []).append(r)
                results.setdefault(("all" + variant, method), []).append(r)
                if verbose and method == "sftl" and r != 1:
                    top = loc.suspects[0] if loc.suspects else None
                    print(f"  miss{variant} {row['title'][:70]!r}: rank {r} ({loc.outcome.value}); "
                          f"{(top.path + ': ' + top.reason[:140]) if top else loc.reason[:160]}")
    print(f"mme_injected.jsonl ({len(rows)} rows; located-only counts as a hit; '/line': the error line only, no frames)")
    for key in sorted(results):
        print(f"  {key[0]:<15} {key[1]:<6} {summarize(results[key])}")
    print(
        f"  localize time per call: median {sorted(times)[len(times) // 2] * 1000:.0f} ms wall "
        f"({sorted(cpu)[len(cpu) // 2] * 1000:.0f} ms CPU), max {max(times) * 1000:.0f} ms wall ({max(cpu) * 1000:.0f} ms CPU)"
    )


def bench_real(verbose: bool) -> None:
    path = DATA / "localize.jsonl"
    if not path.exists():
        return
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r.get("category") == "mme"]
    sp = site_packages()
    print(f"localize.jsonl MME rows ({len(rows)}; against the installed torch 2.13.0 sources, not the issue's release)")
    for row in rows:
        source = Overlay(sp, row["framework"], "2.13.0", {})
        issue = issue_from_row(row)
        ex = extraction_for(issue, row)
        for method, fn in (("paper", localize_paper), ("sftl", localize_sftl)):
            loc = fn(issue, ex, Category.MME, source, 10)
            r = rank_of(loc.suspects, set(row["truth_files"]))
            top = loc.suspects[0].path if loc.suspects else None
            print(f"  {method:<6} {row['url'].rsplit('/', 1)[-1]:>6}: {loc.outcome.value:<9} rank={r} top={top} ({loc.reason[:110]})")


BENCH_CACHE = Path(os.environ.get("SFTL_BENCH_CACHE", Path.home() / ".cache" / "sftl-bench"))
HELDOUT = BENCH_CACHE / "mme_heldout_torch.jsonl"
HELDOUT_TF = BENCH_CACHE / "mme_heldout_tf.jsonl"  # made the same way for TensorFlow (optional)


def bench_heldout(generate: bool, verbose: bool) -> None:
    """Faults we inject ourselves into other classes (not the dev rows): a check of generality."""
    if not HELDOUT.exists() or generate:
        if not generate:
            print(f"held-out: {HELDOUT} not generated (run with --held-out once; ~5 min)")
            return
        HELDOUT.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(ROOT / "bench" / "mme_heldout.py"), str(HELDOUT)], check=True)
        subprocess.run([sys.executable, str(ROOT / "bench" / "mme_heldout_tf.py"), str(HELDOUT_TF)], check=False)
    from sftl.model import Environment, Extraction

    parse = getattr(sys.modules.get("sftl.extract"), "parse_tracebacks", None)
    if parse is None:
        print("held-out: needs sftl.extract.parse_tracebacks")
        return
    sp = site_packages()
    for path in (HELDOUT, HELDOUT_TF):
        if not path.exists():
            continue
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        results: dict[str, list[int | None]] = {}
        framework = "tensorflow" if path == HELDOUT_TF else "pytorch"
        version = "2.21.0" if framework == "tensorflow" else "2.13.0"
        for row in rows:
            tb = parse(row["traceback"])[-1]
            mutated = remove_member((sp / row["file"]).read_text(encoding="utf-8"), row["class"], row["name"])
            source = Overlay(sp, framework, version, {row["file"]: mutated})
            ex = Extraction(None, tb, Environment(framework=framework, version=version), error_line=row["error"])
            issue = Issue(f"{framework}/{framework}", 1, row["error"], "")
            for method, fn in (("paper", localize_paper), ("sftl", localize_sftl)):
                loc = fn(issue, ex, Category.MME, source, 10)
                r = rank_of(loc.suspects, {row["file"]}) if loc.outcome == Outcome.LOCATED else None
                results.setdefault(method, []).append(r)
                if verbose and method == "sftl" and r != 1:
                    print(f"  miss {row['class']}.{row['name']}: rank {r} ({loc.outcome.value}) {loc.reason[:140]}")
        print(f"held-out {framework} faults ({len(rows)} methods removed from {len({r['class'] for r in rows})} classes; {path})")
        for method, ranks in results.items():
            print(f"  {framework:<10} {method:<6} {summarize(ranks)}")


def bench_cli() -> None:
    """Wall time of `sftl locate` on a stored issue, CLI start included (second run = warm caches)."""
    fixtures = ROOT / "fixtures" / "demo"
    cases = sorted(fixtures.glob("*mme*.json"))
    if not cases:
        print("cli: no fixture to time")
        return
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, SFTL_HOME=home, SFTL_GITHUB_API_URL="http://127.0.0.1:9")
        exe = [sys.executable, "-m", "sftl.cli.__main__"] if (ROOT / "sftl/cli/__main__.py").exists() else [str(Path(sys.executable).parent / "sftl")]
        walls = []
        ref = json.loads(cases[0].read_text())
        stored = f"{'/'.join(ref['repository_url'].split('/')[-2:])}#{ref['number']}"
        for i in range(3):
            # the first run reads the JSON file (and stores it); then the stored issue by reference
            target = str(cases[0]) if i == 0 else stored
            t0 = time.perf_counter()
            proc = subprocess.run([*exe, "locate", target, "--offline", "--json"], env=env, capture_output=True, text=True)
            walls.append(time.perf_counter() - t0)
            if proc.returncode not in (0, 8):
                print(f"cli: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
                return
        print(
            f"cli: sftl locate {cases[0].name} --offline: {walls[0]:.2f} s; stored {stored}: "
            f"{walls[1]:.2f} s / {walls[2]:.2f} s wall, CLI start included (target <= 2 s)"
        )


if __name__ == "__main__":
    verbose = "-v" in sys.argv
    bench_injected(verbose)
    bench_real(verbose)
    bench_heldout("--held-out" in sys.argv, verbose)
    bench_cli()
