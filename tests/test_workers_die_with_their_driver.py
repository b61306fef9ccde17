"""`kill -9` of `sftl triage --jobs 2` (local pool and Ray) or `sftl eval --jobs 2` leaves no process behind:
workers die with their driver."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ghserver import make_issue

REPO = "kill/repo"


def _children(pid: int) -> set[int]:
    """Live (not zombie) descendants of `pid` (a forkserver's workers are its grandchildren)."""
    return {p for p in _descendants(pid) if _alive(p)}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _descendants(pid: int) -> set[int]:
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
    return below - {pid}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_kill_9_of_triage_leaves_no_worker_alive(sftl_home: Path, tmp_path: Path) -> None:
    lines = tmp_path / "issues.jsonl"
    bodies = ["torch.histc gives different counts on CUDA than on CPU", "module 'torch' has no attribute 'foo'"]
    lines.write_text("\n".join(
        json.dumps(make_issue(REPO, n, body=f"{bodies[n % 2]} (case {n})\n```python\nimport torch\nprint({n})\n```"))
        for n in range(1, 41)) + "\n")
    sftl = [sys.executable, "-c", "from sftl.cli import entry; entry()"]
    env = {**os.environ, "SFTL_HOME": str(sftl_home)}
    subprocess.run([*sftl, "import", str(lines)], env=env, check=True, capture_output=True)
    proc = subprocess.Popen([*sftl, "--offline", "triage", REPO, "--jobs", "2", "--out", str(tmp_path / "r")],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        workers: set[int] = set()
        while len(workers) < 2 and time.monotonic() < deadline and proc.poll() is None:
            workers = _children(proc.pid)
            time.sleep(0.05)
        assert len(workers) >= 2, "triage never started its two workers"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [w for w in workers if _alive(w)]
    finally:
        if proc.poll() is None:
            proc.kill()
    for w in left:  # clean up before failing, so one failure does not leak into the rest of the suite
        os.kill(w, signal.SIGKILL)
    assert not left, f"workers {left} outlived their killed driver"


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_kill_9_of_triage_on_ray_leaves_no_ray_process_alive(sftl_home: Path, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    lines = tmp_path / "issues.jsonl"
    lines.write_text("\n".join(json.dumps(make_issue(REPO, n, body=f"torch.histc differs on CUDA and CPU ({n})"))
                               for n in range(1, 41)) + "\n")
    sftl = [sys.executable, "-c", "from sftl.cli import entry; entry()"]
    env = {**os.environ, "SFTL_HOME": str(sftl_home), "RAY_USAGE_STATS_ENABLED": "0"}
    subprocess.run([*sftl, "import", str(lines)], env=env, check=True, capture_output=True)
    proc = subprocess.Popen([*sftl, "--offline", "triage", REPO, "--jobs", "2", "--executor", "ray",
                             "--out", str(tmp_path / "r")], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            seen |= _descendants(proc.pid)
            names = {Path(f"/proc/{p}/cmdline").read_bytes()[:40] for p in seen if _alive(p)}
            if any(b"Agent" in n for n in names) and any(b"ray::" in n and b"Agent" not in n for n in names):
                break  # the agents and a worker are up
            time.sleep(0.2)
        seen |= _descendants(proc.pid)
        assert proc.poll() is None, "triage finished before it could be killed"
        time.sleep(1.0)  # the reaper notes the descendants every half second
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 15
        while any(_alive(p) for p in seen) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [p for p in seen if _alive(p)]
    finally:
        if proc.poll() is None:
            proc.kill()
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, f"Ray processes {left} outlived their killed driver"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
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
    sftl = [sys.executable, "-c", "from sftl.cli import entry; entry()"]
    env = {**os.environ, "SFTL_HOME": str(sftl_home)}
    proc = subprocess.Popen([*sftl, "--offline", "eval", str(labels), "--jobs", "2", "--method", "sftl,vsm,paper",
                             "--no-plots", "--out", str(tmp_path / "ev")],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        workers: set[int] = set()
        while len(workers) < 2 and time.monotonic() < deadline and proc.poll() is None:
            workers = _children(proc.pid)
            time.sleep(0.05)
        assert len(workers) >= 2, "eval never started its two workers"
        time.sleep(0.5)  # past the workers' initializer
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [w for w in workers if _alive(w)]
    finally:
        if proc.poll() is None:
            proc.kill()
    for w in left:
        os.kill(w, signal.SIGKILL)
    assert not left, f"eval workers {left} outlived their killed driver"
