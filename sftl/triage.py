"""Backlog triage: every stored issue of a repository through screen -> locate (-> replay), on a
local process pool or a Ray cluster, with the store as the single writer; and the maintainer's report."""

from __future__ import annotations

import hashlib
import html
import json
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sftl.config import Settings
from sftl.errors import InputError
from sftl.model import Issue, to_jsonable
from sftl.store import Store

RESULT_KIND = "triage"
WORK_VERSION = "1"  # bump when the per-issue work changes, so stored results are redone


@dataclass(frozen=True)
class TriageJob:
    """One issue's work order; plain data so it pickles to a process pool or a Ray worker."""

    issue: Issue
    settings: Settings
    method: str = "sftl"
    replay: bool = False
    source_root: str | None = None
    screener: Any = None  # a fitted screener shared by all jobs (fitted once by the driver)
    corpus_size: int | None = None  # the driver's store size (workers see only a scratch store)

    @property
    def fingerprint(self) -> str:
        """Same issue text, same options -> same result: work already done is skipped on resume."""
        h = hashlib.sha256()
        for part in (WORK_VERSION, self.issue.updated_at, self.issue.title, self.issue.body, self.method,
                     str(self.replay), self.source_root or ""):
            h.update(part.encode("utf-8", "replace"))
            h.update(b"\0")
        return h.hexdigest()[:16]


@dataclass
class TriageStats:
    total: int = 0
    done: int = 0
    reused: int = 0
    failed: int = 0
    seconds: float = 0.0
    executor: str = "local"
    rows: list[dict[str, Any]] = field(default_factory=list)


def run_job(job: TriageJob) -> dict[str, Any]:
    """Screen, locate (and replay) one issue; never raises: a failure is a row with outcome 'error'.

    Runs in a worker that may sit on another machine, so it never writes the real store: the
    pipeline gets a scratch store of its own and the row flows back to the driver, the one writer.
    """
    import tempfile

    from sftl.errors import SftlError

    started = time.perf_counter()
    try:
        from sftl import pipeline

        with tempfile.TemporaryDirectory(prefix="sftl-triage-") as scratch, Store(Path(scratch) / "w.db") as local:
            report = pipeline.locate(
                job.issue, job.settings, local, method=job.method, source_root=job.source_root,
                replay=job.replay, screener=job.screener, corpus_size=job.corpus_size,
            )
            row = pipeline.report_json(report)
            row["screening_reason"] = report.screening.reason  # what decided the category, for the report's notes
    except SftlError as exc:
        row = _error_row(job.issue, str(exc))
    except Exception as exc:  # a bug on one issue must not end a backlog run; it is reported per issue
        row = _error_row(job.issue, f"internal error: {type(exc).__name__}: {exc}")
    row["seconds"] = round(time.perf_counter() - started, 3)
    return row


def fit_store_screener(store: Store) -> Any:
    """One keyword screener fitted on every stored report, shared by every job (None when too few);
    the store keeps each report's keyword terms, so a re-run reads only new or edited reports."""
    from sftl import pipeline

    return pipeline.corpus_screener(None, store)


def fit_screener(corpus: Iterable[Issue]) -> Any:
    """One keyword screener fitted on the given corpus, shared by every job (None when too few)."""
    from sftl import pipeline, screen

    issues = list(corpus)
    if len(issues) < pipeline.MIN_SCREEN_CORPUS:
        return None  # the pipeline's screening rules decide alone and say so
    return screen.default_screener(issues)


def find_duplicates(
    issues: list[Issue], threshold: float = 0.4, per_issue: int = 3
) -> list[tuple[int, int, float]]:
    """Pairs of issues whose TF-IDF cosine passes `threshold` (one sparse product, not n searches)."""
    if len(issues) < 2:
        return []
    from sklearn.feature_extraction.text import TfidfVectorizer

    from sftl.screen import duplicate_text  # what `sftl similar` compares: the tracker template left out

    vec = TfidfVectorizer(sublinear_tf=True, stop_words="english", token_pattern=r"(?u)\b[a-zA-Z_][\w.]+\b",
                          ngram_range=(1, 2), min_df=1)
    try:
        X = vec.fit_transform([duplicate_text(i) for i in issues])
    except ValueError:  # empty vocabulary
        return []
    sims = (X @ X.T).tocoo()
    best: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for a, b, s in zip(sims.row, sims.col, sims.data, strict=True):
        if a < b and s >= threshold:
            best[a].append((float(s), b))
    pairs = []
    for a, cands in best.items():
        for s, b in sorted(cands, reverse=True)[:per_issue]:
            pairs.append((issues[a].number, issues[b].number, round(s, 3)))
    return sorted(pairs, key=lambda p: -p[2])


def _error_row(issue: Issue, reason: str) -> dict[str, Any]:
    return {
        "issue": {"url": issue.url, "repo": issue.repo, "number": issue.number, "title": issue.title},
        "category": None,
        "screening": {},
        "environment": {},
        "replay": None,
        "suspects": [],
        "outcome": "error",
        "reason": reason,
    }


# -- executors ------------------------------------------------------------------------------------


def die_with_parent(parent_pid: int) -> None:
    """Worker initializer: end this worker as soon as the driver (`parent_pid`) is gone, however it went
    (`kill -9` included).

    Linux delivers SIGKILL on the death of the worker's parent (prctl PR_SET_PDEATHSIG: the driver, or a
    forkserver that ends with it); a daemon thread also polls, every half second, that the parent is the one
    the worker started with and the driver still runs (other platforms, and a death before the prctl)."""
    import ctypes
    import os
    import signal
    import sys
    import threading

    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
        except (OSError, AttributeError):
            pass
    started_under = os.getppid()

    def gone() -> bool:
        if os.getppid() != started_under:
            return True
        try:
            os.kill(parent_pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass  # alive, someone else's (a reused pid at worst)
        return False

    if gone():
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if gone():
                os._exit(1)

    threading.Thread(target=watch, name="sftl-parent-watch", daemon=True).start()


_PR_SET_PDEATHSIG = 1


def _local_map(jobs: list[TriageJob], workers: int) -> Iterator[tuple[TriageJob, dict[str, Any]]]:
    if workers <= 1:
        for job in jobs:
            yield job, run_job(job)
        return
    import os

    with ProcessPoolExecutor(max_workers=workers, initializer=die_with_parent, initargs=(os.getpid(),)) as pool:
        pending: dict[Future[dict[str, Any]], TriageJob] = {}
        queue = iter(jobs)
        for job in queue:
            pending[pool.submit(run_job, job)] = job
            if len(pending) >= workers * 2:
                break
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                job = pending.pop(fut)
                yield job, fut.result()
                nxt = next(queue, None)
                if nxt is not None:
                    pending[pool.submit(run_job, nxt)] = nxt


def _proc_table() -> dict[int, tuple[int, str, str]]:
    """pid -> (parent pid, state, start time) of every process, from /proc (Linux)."""
    import os

    table: dict[int, tuple[int, str, str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            table[int(entry)] = (int(fields[1]), fields[0], fields[19])
    return table


def reap_descendants_of(driver: int, poll_s: float = 0.5) -> None:
    """The body of a helper process: while `driver` runs, note its descendants (Ray's raylet, agents and
    workers); once it is gone (`kill -9` included), SIGKILL every one still running. Ray's own fate sharing
    ends its workers but leaves its dashboard and runtime-env agents alive forever."""
    import os
    import signal

    me = os.getpid()
    known: dict[int, str] = {}  # pid -> start time, so a pid reused since is spared
    while True:
        table = _proc_table()
        if driver not in table or table[driver][1] == "Z":
            break
        below = {driver}
        grew = True
        while grew:
            grew = False
            for pid, (ppid, _, _) in table.items():
                if ppid in below and pid not in below and pid != me:
                    below.add(pid)
                    grew = True
        known.update({pid: table[pid][2] for pid in below - {driver}})
        time.sleep(poll_s)
    table = _proc_table()
    for pid, started in known.items():
        if pid in table and table[pid][2] == started and table[pid][1] != "Z":
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _start_reaper() -> Any:
    """A detached helper that ends this process's descendants if it dies (Linux; None elsewhere)."""
    import os
    import subprocess
    import sys

    if not sys.platform.startswith("linux"):
        return None
    code = f"from sftl.triage import reap_descendants_of; reap_descendants_of({os.getpid()})"
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def _ray_map(
    jobs: list[TriageJob], workers: int, address: str | None
) -> Iterator[tuple[TriageJob, dict[str, Any]]]:
    try:
        import ray
    except ImportError:
        raise InputError("--executor ray needs Ray: pip install 'sftl[ray]'") from None
    started_here = False
    reaper = None
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address:
            kwargs["address"] = address
        else:
            kwargs["num_cpus"] = max(1, workers)
        if not address:
            reaper = _start_reaper()  # the local cluster ends with this process, however it ends
        try:
            ray.init(**kwargs)
        except Exception as exc:  # Ray raises ConnectionError/RuntimeError variants
            if reaper is not None:
                reaper.kill()
                reaper.wait()
            raise InputError(f"cannot start or reach the Ray cluster{' at ' + address if address else ''}: {exc}") from exc
        started_here = True
    try:
        # replays ask for a GPU when they will run on one; everything else is one CPU
        cpu_task = ray.remote(num_cpus=1)(run_job)
        gpu_task = ray.remote(num_cpus=1, num_gpus=1)(run_job)
        has_gpu = ray.cluster_resources().get("GPU", 0) > 0
        refs = {}
        for job in jobs:
            task = gpu_task if (job.replay and has_gpu) else cpu_task
            refs[task.remote(job)] = job
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1)
            for ref in ready:
                job = refs.pop(ref)
                yield job, ray.get(ref)
    finally:
        if started_here:
            ray.shutdown()
        if reaper is not None:
            reaper.kill()
            reaper.wait()


EXECUTORS: dict[str, Callable[..., Iterator[tuple[TriageJob, dict[str, Any]]]]] = {
    "local": lambda jobs, workers, address: _local_map(jobs, workers),
    "ray": _ray_map,
}


def triage_issues(
    issues: Iterable[Issue],
    settings: Settings,
    store: Store,
    *,
    repo: str,
    method: str = "sftl",
    replay: bool = False,
    source_root: str | None = None,
    executor: str = "local",
    jobs: int = 2,
    ray_address: str | None = None,
    screener: Any = None,
    progress: Callable[[int, int], None] | None = None,
) -> TriageStats:
    """Run the per-issue work for every issue not already done; the driver alone writes the store."""
    if executor not in EXECUTORS:
        raise InputError(f"unknown executor {executor!r}; choose local or ray")
    started = time.perf_counter()
    stats = TriageStats(executor=executor)
    todo: list[TriageJob] = []
    corpus_size = store.count_issues()
    for issue in issues:
        stats.total += 1
        job = TriageJob(issue, settings, method, replay, source_root, screener, corpus_size)
        stored = store.get_result(RESULT_KIND, _key(issue))
        if stored and stored.get("fingerprint") == job.fingerprint:
            stats.reused += 1
            stats.rows.append(stored["row"])
        else:
            todo.append(job)
    if progress:
        progress(stats.reused, stats.total)
    for job, row in EXECUTORS[executor](todo, jobs, ray_address):
        _persist(store, job, row)
        stats.rows.append(row)
        stats.done += 1
        stats.failed += row.get("outcome") == "error"
        if progress:
            progress(stats.reused + stats.done, stats.total)
    stats.rows.sort(key=lambda r: r["issue"]["number"])
    stats.seconds = time.perf_counter() - started
    return stats


def _key(issue: Issue) -> str:
    return f"{issue.repo}#{issue.number}"


def _persist(store: Store, job: TriageJob, row: dict[str, Any]) -> None:
    """One transaction per issue, so an interrupted run keeps everything finished before it."""
    store.save_result(RESULT_KIND, _key(job.issue), {"fingerprint": job.fingerprint, "row": row})
    repo, number = job.issue.repo, job.issue.number
    if row.get("outcome") != "error":
        store.save_localization(repo, number, row)


# -- the report -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TriageReport:
    repo: str
    rows: tuple[dict[str, Any], ...]
    counts: dict[str, int]
    by_suspect: dict[str, list[int]]  # module/file -> issue numbers
    duplicates: tuple[tuple[int, int, float], ...]  # (a, b, cosine)
    needs_human: tuple[tuple[int, str], ...]  # (number, why)
    notes: tuple[tuple[str, int], ...] = ()  # (a clause many rows' reasons share, how many): said once at the top
    top: int = 3  # suspects shown per issue


_NOTE_MIN_CHARS = 30  # shorter clauses ("read the installed 2.13.0") stay where they are


def _clauses(text: str) -> list[str]:
    """The top-level clauses of a reason: parts between '; ' or ': ', and parenthesised asides, brackets respected."""
    out: list[str] = []
    depth = 0
    start = 0
    group_start = -1
    for k, ch in enumerate(text):
        if ch in "([":
            if depth == 0 and ch == "(":
                group_start = k
            depth += 1
        elif ch in ")]" and depth:
            depth -= 1
            if depth == 0 and ch == ")" and group_start >= 0:
                out.append(text[group_start:k + 1])
                group_start = -1
        elif depth == 0 and (text.startswith("; ", k) or text.startswith(": ", k)):
            out.append(text[start:k])
            start = k + 2
    out.append(text[start:])
    return [c.strip() for c in out if c.strip()]


def common_notes(reasons: list[str], min_rows: int = 2, share: float = 0.25) -> list[tuple[str, int]]:
    """Clauses that recur across many rows' reasons (a store too small for the IDF, a missing source tree),
    most frequent first: said once at the top of the report instead of on every row. The most widely shared
    clause wins over a longer one holding it; what is left of the longer one is looked at again."""
    need = max(min_rows, int(share * len(reasons) + 0.999))
    notes: list[tuple[str, int]] = []
    left = list(reasons)
    for _ in range(4):
        counts: Counter[str] = Counter()
        for reason in left:
            counts.update({c for c in _clauses(reason) if len(c) >= (2 * _NOTE_MIN_CHARS if c[0] == "(" else _NOTE_MIN_CHARS)})
        found = [(c, n) for c, n in counts.most_common() if n >= need]
        found = [(c, n) for c, n in found if not any(o != c and o in c for o, _ in found)]
        if not found:
            break
        notes.extend(found)
        left = [_without(reason, found) for reason in left]
    return notes  # in the order they were found: removed in that order (see `_without`)


def _without(reason: str, notes: Iterable[tuple[str, int]]) -> str:
    out = reason
    for clause, _ in notes:
        out = out.replace(clause, "")
    out = out.replace("()", "").replace(" ; ", "; ").replace(";;", ";")
    return " ".join(out.split()).strip(" ;:,")


def shorten_reason(reason: str, notes: Iterable[tuple[str, int]]) -> str:
    """`reason` without the clauses said once at the top (marked 'see the notes')."""
    notes = list(notes)
    if not any(clause in reason for clause, _ in notes):
        return reason
    out = _without(reason, notes)
    return (out + " " if out else "") + "(see the notes above)"


def row_reason(row: dict[str, Any]) -> str:
    return str(row.get("reason") or "")


def build_report(
    repo: str, rows: list[dict[str, Any]], duplicates: Iterable[tuple[int, int, float]] = (), top: int = 3
) -> TriageReport:
    counts: Counter[str] = Counter()
    by_suspect: dict[str, list[int]] = defaultdict(list)
    notes = tuple(common_notes([row_reason(r) for r in rows if row_reason(r)]))
    needs: list[tuple[int, str]] = []
    for row in rows:
        number = row["issue"]["number"]
        counts[row.get("category") or "error"] += 1
        suspects = row.get("suspects") or []
        if suspects:
            by_suspect[suspects[0]["path"]].append(number)
        outcome = row.get("outcome")
        replay = row.get("replay") or {}
        why = shorten_reason(row_reason(row), notes)
        if outcome in ("abstained", "error"):
            needs.append((number, f"{outcome}: {why}"))
        elif outcome == "skipped" and row.get("category") in ("gcrde", "mme"):
            needs.append((number, f"skipped {row['category']}: {why}"))  # a discrepancy nobody localized
        elif replay.get("verdict") == "env-unavailable":
            needs.append((number, f"replay environment unavailable: {replay.get('reason', '')}"))
    return TriageReport(
        repo=repo,
        rows=tuple(rows),
        counts=dict(sorted(counts.items())),
        by_suspect={k: sorted(v) for k, v in sorted(by_suspect.items(), key=lambda kv: (-len(kv[1]), kv[0]))},
        duplicates=tuple(duplicates),
        needs_human=tuple(sorted(needs)),
        notes=notes,
        top=top,
    )


def _confidence(row: dict[str, Any]) -> float:
    cat = row.get("category")
    scores = row.get("screening") or {}
    return float(scores.get(cat, 0.0)) if cat else 0.0


def _top(row: dict[str, Any], k: int = 3) -> list[dict[str, Any]]:
    return list(row.get("suspects") or [])[:k]


def _env(row: dict[str, Any]) -> str:
    env = row.get("environment") or {}
    parts = [f"{env.get('framework') or '?'} {env.get('version') or '?'}"]
    if env.get("cuda"):
        parts.append(f"CUDA {env['cuda']}")
    return ", ".join(parts)


def _outcome(row: dict[str, Any], notes: Iterable[tuple[str, int]]) -> str:
    """located / abstained / skipped / error, and why when it is not located."""
    outcome = str(row.get("outcome") or "error")
    reason = shorten_reason(row_reason(row), notes)
    return outcome if outcome == "located" or not reason else f"{outcome}: {reason}"


def _issues_by_number(report: TriageReport) -> dict[int, dict[str, Any]]:
    return {row["issue"]["number"]: row["issue"] for row in report.rows}


def _md_issue(number: int, known: dict[int, dict[str, Any]], with_title: bool = True) -> str:
    issue = known.get(number)
    if issue is None:
        return f"#{number}"
    title = " ".join(str(issue.get("title") or "").split()).replace("[", "(").replace("]", ")")
    return f"[#{number}]({issue['url']})" + (f" {title}" if with_title and title else "")


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: TriageReport) -> str:
    known = _issues_by_number(report)
    out = [f"# sftl triage: {report.repo}", ""]
    if report.notes:
        out += ["Said of many issues (left out of their rows):", ""]
        out.extend(f"- {n} issues: {_md_cell(clause)}" for clause, n in sorted(report.notes, key=lambda cn: -cn[1]))
        out.append("")
    out.append("| category | issues |")
    out.append("|---|---|")
    out.extend(f"| {cat} | {n} |" for cat, n in report.counts.items())
    out += ["", "## Issues", "", "| # | title | category | confidence | outcome | environment | replay | top suspects |",
            "|---|---|---|---|---|---|---|---|"]
    for row in report.rows:
        issue = row["issue"]
        suspects = "<br>".join(
            f"`{s['path']}` ({s['score']:.2f}): {_md_cell(shorten_reason(s['reason'], report.notes))}"
            for s in _top(row, report.top)
        ) or "-"
        replay = (row.get("replay") or {}).get("verdict") or "-"
        out.append(
            f"| [{issue['number']}]({issue['url']}) | {_md_cell(issue['title'])} | {row.get('category') or 'error'} | "
            f"{_confidence(row):.2f} | {_md_cell(_outcome(row, report.notes))} | {_env(row)} | {replay} | {suspects} |"
        )
    out += ["", "## By suspected file (who to ping)", ""]
    for path, numbers in report.by_suspect.items():
        out.append(f"- `{path}`: " + "; ".join(_md_issue(n, known) for n in numbers))
    if not report.by_suspect:
        out.append("- none")
    out += ["", "## Likely duplicates", ""]
    out.extend(f"- {_md_issue(a, known)} and {_md_issue(b, known)} (cosine {s:.2f})" for a, b, s in report.duplicates)
    if not report.duplicates:
        out.append("- none found")
    out += ["", "## Needs a human", ""]
    out.extend(f"- {_md_issue(n, known)}: {_md_cell(why)}" for n, why in report.needs_human)
    if not report.needs_human:
        out.append("- nothing")
    return "\n".join(out) + "\n"


_HTML_SCRIPT = """
const table = document.getElementById('issues');
const body = table.tBodies[0];
let sortState = {col: -1, dir: 1};
function cellValue(row, col) {
  const cell = row.cells[col];
  const v = cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent.trim();
  const n = parseFloat(v);
  return isNaN(n) ? v.toLowerCase() : n;
}
function sortBy(col) {
  sortState.dir = sortState.col === col ? -sortState.dir : 1;
  sortState.col = col;
  const rows = Array.from(body.rows);
  rows.sort((a, b) => {
    const x = cellValue(a, col), y = cellValue(b, col);
    return (x < y ? -1 : x > y ? 1 : 0) * sortState.dir;
  });
  rows.forEach(r => body.appendChild(r));
  table.querySelectorAll('th').forEach((th, i) =>
    th.setAttribute('aria-sort', i === col ? (sortState.dir > 0 ? 'ascending' : 'descending') : 'none'));
}
table.querySelectorAll('th').forEach((th, i) => th.addEventListener('click', () => sortBy(i)));
function applyFilter() {
  const q = document.getElementById('filter').value.toLowerCase();
  const cat = document.getElementById('category').value;
  let shown = 0;
  Array.from(body.rows).forEach(r => {
    const ok = (!q || r.textContent.toLowerCase().includes(q)) && (!cat || r.dataset.category === cat);
    r.hidden = !ok; shown += ok;
  });
  document.getElementById('shown').textContent = shown;
}
document.getElementById('filter').addEventListener('input', applyFilter);
document.getElementById('category').addEventListener('change', applyFilter);
applyFilter();
"""

_HTML_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;width:100%}th,td{border:1px solid #ccc;padding:4px 6px;vertical-align:top}
th{background:#f3f3f3;cursor:pointer;user-select:none}th[aria-sort=ascending]::after{content:' \\25B2'}
th[aria-sort=descending]::after{content:' \\25BC'}code{font-size:12px}.controls{margin:1em 0}
.mme{background:#fff4e5}.gcrde{background:#e8f4ff}.error{background:#fde8e8}
"""


def _html_issue(number: int, known: dict[int, dict[str, Any]]) -> str:
    e = html.escape
    issue = known.get(number)
    if issue is None:
        return f"#{number}"
    title = str(issue.get("title") or "")
    return f'<a href="{e(issue["url"])}" title="{e(title)}">#{number}</a> {e(title)}'


def render_html(report: TriageReport) -> str:
    """A self-contained page (no external assets): a sortable, filterable table plus the groupings."""
    e = html.escape
    known = _issues_by_number(report)
    rows_html = []
    for row in report.rows:
        issue = row["issue"]
        cat = row.get("category") or "error"
        suspects = "".join(
            f"<div><code>{e(s['path'])}</code> {s['score']:.2f} &mdash; {e(shorten_reason(s['reason'], report.notes))}</div>"
            for s in _top(row, report.top)
        ) or "-"
        replay = (row.get("replay") or {}).get("verdict") or "-"
        rows_html.append(
            f'<tr class="{e(cat)}" data-category="{e(cat)}">'
            f'<td data-sort="{issue["number"]}"><a href="{e(issue["url"])}">#{issue["number"]}</a></td>'
            f"<td>{e(issue['title'])}</td><td>{e(cat)}</td>"
            f'<td data-sort="{_confidence(row):.4f}">{_confidence(row):.2f}</td>'
            f"<td>{e(_outcome(row, report.notes))}</td>"
            f"<td>{e(_env(row))}</td><td>{e(replay)}</td><td>{suspects}</td></tr>"
        )
    counts = " &middot; ".join(f"{e(c)}: {n}" for c, n in report.counts.items())
    notes = "".join(f"<li>{n} issues: {e(c)}</li>" for c, n in sorted(report.notes, key=lambda cn: -cn[1]))
    notes_html = f'<p>Said of many issues (left out of their rows):</p><ul id="notes">{notes}</ul>' if notes else ""
    groups = "".join(
        f"<li><code>{e(p)}</code>: {'; '.join(_html_issue(n, known) for n in ns)}</li>" for p, ns in report.by_suspect.items()
    ) or "<li>none</li>"
    dups = "".join(
        f"<li>{_html_issue(a, known)} and {_html_issue(b, known)} (cosine {s:.2f})</li>" for a, b, s in report.duplicates
    ) or "<li>none found</li>"
    needs = "".join(f"<li>{_html_issue(n, known)}: {e(w)}</li>" for n, w in report.needs_human) or "<li>nothing</li>"
    options = "".join(f'<option value="{e(c)}">{e(c)}</option>' for c in report.counts)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sftl triage: {e(report.repo)}</title>
<style>{_HTML_STYLE}</style></head><body>
<h1>sftl triage: {e(report.repo)}</h1>
{notes_html}
<p id="counts">{counts}</p>
<div class="controls"><input id="filter" placeholder="filter (title, file, reason...)" size="40">
<select id="category"><option value="">all categories</option>{options}</select>
showing <span id="shown"></span> of {len(report.rows)}</div>
<table id="issues"><thead><tr><th>#</th><th>title</th><th>category</th><th>confidence</th><th>outcome</th>
<th>environment</th><th>replay</th><th>top suspects</th></tr></thead>
<tbody>{''.join(rows_html)}</tbody></table>
<h2>By suspected file (who to ping)</h2><ul id="by-suspect">{groups}</ul>
<h2>Likely duplicates</h2><ul id="duplicates">{dups}</ul>
<h2>Needs a human</h2><ul id="needs-human">{needs}</ul>
<script>{_HTML_SCRIPT}</script></body></html>
"""


def write_report(report: TriageReport, out_dir: str | Path) -> dict[str, Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": out / "triage.md", "html": out / "triage.html", "json": out / "triage.json"}
    for kind, text in (
        ("markdown", render_markdown(report)),
        ("html", render_html(report)),
        ("json", json.dumps(to_jsonable(report), indent=2, ensure_ascii=False)),
    ):
        import os
        import tempfile

        # a temporary of its own (two runs writing one --out never share one), renamed into place: atomic
        fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{paths[kind].name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.chmod(tmp, 0o644)  # a report to share, not mkstemp's 0600
            os.replace(tmp, paths[kind])
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return paths
