"""Labelling by execution: batches of calls run in restartable worker processes; a crash kills a worker, never sftl."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sftl.config import Settings
from sftl.errors import SandboxError
from sftl.fuzz.generate import FuzzInput
from sftl.fuzz.specs import ApiSpec

WORKER = Path(__file__).with_name("_worker.py")
_FATAL = re.compile(r"Check failed|INTERNAL ASSERT|terminate called|Fatal Python error|what\(\)|Assertion|"
                    r"^F\d{4}|Segmentation fault|Aborted")
MEMORY_LIMIT = 8 * 2**30  # address space per worker: a runaway allocation fails inside it, not the machine


@dataclass(frozen=True)
class ExecResult:
    """What one call did: `ok`, `error` (rejected input), `crash` (the worker died), `timeout`, or `skipped`
    (not run: the run had reached its crash limit)."""

    status: str
    exception: str | None = None
    message: str = ""
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class Crash:
    """A finding: the input that killed a worker (signal) or hung it (timeout)."""

    kind: str  # "signal" | "exit" | "timeout"
    signal: str | None
    api: str
    input: dict[str, Any]
    seed: int
    stderr_tail: str = ""

    @property
    def message(self) -> str:
        """The line of the worker's last words that says why (a failed CHECK, an assertion, terminate)."""
        lines = [ln.strip() for ln in self.stderr_tail.splitlines() if ln.strip()]
        for ln in lines:
            if _FATAL.search(ln):
                return ln[:300]
        return lines[-1][:300] if lines else ""


def make_job(spec: ApiSpec, inp: FuzzInput, job_id: int, compare: bool = False) -> dict[str, Any]:
    """The worker's view of one call: positional values until the first left-out argument, then keywords."""
    pos: list[Any] = []
    kw: dict[str, Any] = {}
    positional = spec.framework != "tensorflow"
    for a in spec.args:
        v = inp.call.get(a.name)
        if v is None:
            positional = False
            continue
        if positional and not a.keyword_only:
            if spec.varargs == a.name:
                v = dict(v, spread=True)
            pos.append(v)
        else:
            kw[a.name] = v
    job: dict[str, Any] = {"id": job_id, "target": spec.target, "pos": pos, "kw": kw, "seed": inp.seed}
    if compare:
        job["compare"] = True
    return job


class Worker:
    """One worker process and its pipes; `run` returns results up to the first crash/timeout."""

    def __init__(self, framework: str, env: dict[str, str], python: str, start_timeout: float) -> None:
        self.framework = framework
        self.env = env
        self.python = python
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.hello: dict[str, Any] = {}
        self._buf = b""
        self._eof = False
        self._err = tempfile.TemporaryFile()

    def start(self) -> None:
        self._err.seek(0)
        self._err.truncate()
        self._buf = b""
        self.proc = subprocess.Popen(
            [self.python, "-u", str(WORKER), self.framework],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
            env=self.env,
        )
        line = self._readline(time.monotonic() + self.start_timeout)
        hello = json.loads(line) if line else {}
        if not hello.get("hello"):
            self.kill()
            raise SandboxError(f"{self.framework} fuzzing worker did not start: "
                               f"{hello.get('error') or self.stderr_tail(300) or 'no answer'}")
        self.hello = hello

    def _readline(self, deadline: float) -> bytes | None:
        import selectors

        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    return None
                chunk = os.read(fd, 65536)
                if not chunk:
                    self._eof = True  # the worker closed its end: it died (or is dying)
                    return None
                self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def stderr_tail(self, n: int = 2000) -> str:
        self._err.flush()
        self._err.seek(0, os.SEEK_END)
        size = self._err.tell()
        self._err.seek(max(0, size - n))
        return self._err.read().decode("utf-8", "replace").strip()

    def run(self, jobs: Sequence[dict[str, Any]], timeout: float) -> tuple[list[dict[str, Any]], str | None]:
        """Results in order; on a crash or hang, the results so far and why it stopped."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(b"".join(json.dumps(j).encode() + b"\n" for j in jobs))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it died on an earlier call; reading tells us
        out: list[dict[str, Any]] = []
        for _ in jobs:
            self._eof = False
            line = self._readline(time.monotonic() + timeout)
            if line is None:
                if self._eof:
                    try:  # its pipe closes a moment before its exit status can be read
                        self.proc.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        pass
                self.kill()
                return out, "died" if self._eof else "timeout"
            out.append(json.loads(line))
        return out, None

    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.returncode

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:
                        pass

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None and self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        self._err.close()


def _signal_name(rc: int | None) -> str | None:
    if rc is None or rc >= 0:
        return None
    try:
        return signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"


class WorkerPool:
    """A few long-lived workers for one framework; `run` labels a batch of inputs and collects crashes."""

    def __init__(self, framework: str, settings: Settings, workers: int | None = None, chunk: int = 32,
                 timeout: float = 10.0, cuda: bool = False, python: str | None = None,
                 start_timeout: float = 120.0, max_crashes: int = 8) -> None:
        self.framework = framework
        self.chunk = chunk
        self.timeout = timeout
        self.cuda = cuda
        extra = {"SFTL_FUZZ_MEMORY": str(MEMORY_LIMIT), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0",
                 "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONDONTWRITEBYTECODE": "1"}
        if cuda:  # the GPU is visible only when asked; its libraries' paths come along then
            for k in ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CUDA_HOME"):
                if settings.base_env.get(k):
                    extra[k] = settings.base_env[k]
        else:
            extra["CUDA_VISIBLE_DEVICES"] = ""
        env = settings.child_env(extra)
        n = workers or max(1, min(2, os.cpu_count() or 1))
        self.workers = [Worker(framework, env, python or sys.executable, start_timeout) for _ in range(n)]
        self.crashes: list[Crash] = []
        self.restarts = 0
        # each crash costs a worker restart (seconds for TensorFlow): past this many in one run the
        # rest of the run is skipped rather than letting one crashing region eat the budget
        self.max_crashes = max_crashes
        self._lock = threading.Lock()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for w in self.workers:
            w.close()

    def info(self) -> dict[str, Any]:
        """The first worker's hello: framework version and whether it sees a CUDA device."""
        w = self.workers[0]
        if w.proc is None or w.proc.poll() is not None:
            w.start()
        return dict(w.hello)

    def run(self, spec: ApiSpec, inputs: Sequence[FuzzInput], compare: bool = False) -> list[ExecResult]:
        jobs = [make_job(spec, inp, i, compare) for i, inp in enumerate(inputs)]
        results: list[ExecResult | None] = [None] * len(jobs)
        todo: queue.Queue[list[dict[str, Any]]] = queue.Queue()
        for k in range(0, len(jobs), self.chunk):
            todo.put(jobs[k:k + self.chunk])
        errors: list[BaseException] = []
        crashed = [0]

        def drive(w: Worker) -> None:
            try:
                while True:
                    try:
                        batch = todo.get_nowait()
                    except queue.Empty:
                        return
                    while batch:
                        if crashed[0] >= self.max_crashes:
                            for j in batch:
                                results[j["id"]] = ExecResult("skipped", None, "crash limit of the run reached")
                            break
                        got, stop = w.run(batch, self.timeout)
                        for r in got:
                            results[r["id"]] = ExecResult(
                                "ok" if r.get("ok") else "error", r.get("exc"), r.get("msg", ""),
                                float(r.get("sec", 0.0)),
                                {k: v for k, v in r.items() if k not in ("id", "ok", "exc", "msg", "sec")})
                        if stop is None:
                            break
                        bad = batch[len(got)]
                        sig = _signal_name(w.returncode())
                        kind = "timeout" if stop == "timeout" else ("signal" if sig else "exit")
                        tail = w.stderr_tail(8000)
                        results[bad["id"]] = ExecResult("crash" if kind != "timeout" else "timeout",
                                                        sig or kind, tail[-300:])
                        with self._lock:
                            crashed[0] += 1
                            self.crashes.append(Crash(kind, sig, spec.api, inputs[bad["id"]].call,
                                                      inputs[bad["id"]].seed, tail))
                            self.restarts += 1
                        batch = batch[len(got) + 1:]  # the rest goes to a fresh worker
            except BaseException as exc:  # surfaced in the caller's thread
                errors.append(exc)

        threads = [threading.Thread(target=drive, args=(w,), daemon=True) for w in self.workers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return [r if r is not None else ExecResult("error", "Unrun", "") for r in results]
