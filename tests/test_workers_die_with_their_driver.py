"""`kill -9` of `sftl triage --jobs 2` (local pool and Ray) or `sftl eval --jobs 2` leaves no process behind:
workers die with their driver."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.ghserver import make_issue

REPO = "kill/repo"
SFTL = [sys.executable, "-c", "from sftl.cli import entry; entry()"]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _descendants(pid: int) -> set[int]:
    """Live descendants of `pid` (a forkserver's workers are its grandchildren)."""
    below, grew = {pid}, True
    while grew:
        grew = False
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) not in below:
                try:
                    ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
                except OSError:
                    continue
                if ppid in below:
                    below.add(int(entry))
                    grew = True
    return {p for p in below - {pid} if _alive(p)}


@contextmanager
def _running(argv: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([*SFTL, *argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _kill_9_then_survivors(proc: subprocess.Popen[bytes], ready: Callable[[set[int]], bool], settle_s: float,
                           grace_s: float) -> list[int]:
    """Wait until `ready(descendants)`, kill -9 the driver, and return the descendants still alive after
    `grace_s` (killed here, so a failure does not leak processes into the rest of the suite)."""
    seen: set[int] = set()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None and not ready(seen):
        seen |= _descendants(proc.pid)
        time.sleep(0.05)
    assert proc.poll() is None and ready(seen), "the command never started its workers, or finished first"
    time.sleep(settle_s)
    seen |= _descendants(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + grace_s
    while any(_alive(p) for p in seen) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in seen if _alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    return left


def _import_backlog(home: Path, tmp_path: Path, body: Callable[[int], str]) -> dict[str, str]:
    lines = tmp_path / "issues.jsonl"
    lines.write_text("\n".join(json.dumps(make_issue(REPO, n, body=body(n))) for n in range(1, 41)) + "\n")
    env = {**os.environ, "SFTL_HOME": str(home), "RAY_USAGE_STATS_ENABLED": "0"}
    subprocess.run([*SFTL, "import", str(lines)], env=env, check=True, capture_output=True)
    return env


def test_kill_9_of_triage_leaves_no_worker_alive(sftl_home: Path, tmp_path: Path) -> None:
    bodies = ["torch.histc gives different counts on CUDA than on CPU", "module 'torch' has no attribute 'foo'"]
    env = _import_backlog(sftl_home, tmp_path,
                          lambda n: f"{bodies[n % 2]} (case {n})\n```python\nimport torch\nprint({n})\n```")
    with _running(["--offline", "triage", REPO, "--jobs", "2", "--out", str(tmp_path / "r")], env) as proc:
        left = _kill_9_then_survivors(proc, lambda seen: len(seen) >= 2, settle_s=0.0, grace_s=10)
    assert not left, f"workers {left} outlived their killed driver"


@pytest.mark.slow
def test_kill_9_of_triage_on_ray_leaves_no_ray_process_alive(sftl_home: Path, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    env = _import_backlog(sftl_home, tmp_path, lambda n: f"torch.histc differs on CUDA and CPU ({n})")

    def agents_and_a_worker_up(seen: set[int]) -> bool:
        names = set()
        for p in seen:
            try:
                names.add(Path(f"/proc/{p}/cmdline").read_bytes()[:40])
            except OSError:
                continue
        return any(b"Agent" in n for n in names) and any(b"ray::" in n and b"Agent" not in n for n in names)

    argv = ["--offline", "triage", REPO, "--jobs", "2", "--executor", "ray", "--out", str(tmp_path / "r")]
    with _running(argv, env) as proc:  # the reaper notes the descendants every half second: let it see them
        left = _kill_9_then_survivors(proc, agents_and_a_worker_up, settle_s=1.0, grace_s=15)
    assert not left, f"Ray processes {left} outlived their killed driver"


def test_kill_9_of_eval_leaves_no_worker_alive(sftl_home: Path, tmp_path: Path) -> None:
    fixtures = Path(__file__).resolve().parent.parent / "fixtures" / "eval"
    rows = [json.loads(line) for line in (fixtures / "labels_small.jsonl").read_text().splitlines() if line.strip()]
    labels = tmp_path / "labels.jsonl"
    with labels.open("w") as fh:  # many rows, so the two workers are busy when the driver dies
        for copy in range(30):
            for row in rows:
                issue = dict(row["issue"], number=row["issue"]["number"] * 100 + copy)
                fh.write(json.dumps({**row, "url": row["url"] + f"{copy:02d}", "issue": issue,
                                     "source_root": str(fixtures / "tree")}) + "\n")
    env = {**os.environ, "SFTL_HOME": str(sftl_home)}
    argv = ["--offline", "eval", str(labels), "--jobs", "2", "--method", "sftl,vsm,paper", "--no-plots",
            "--out", str(tmp_path / "ev")]
    with _running(argv, env) as proc:  # settle: past the spawned workers' initializer
        left = _kill_9_then_survivors(proc, lambda seen: len(seen) >= 2, settle_s=0.5, grace_s=10)
    assert not left, f"eval workers {left} outlived their killed driver"
