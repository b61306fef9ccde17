"""The only place untrusted code runs: a contained child process with no network and hard limits."""

from __future__ import annotations

import json
import os
import re
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sftl.config import Settings
from sftl.errors import InputError, SandboxError

HARNESS = Path(__file__).resolve().parent / "_harness.py"
GiB = 1 << 30
TAIL = 4000  # characters of stdout/stderr kept in a run's record
HEAD = 512  # bytes of the start of each stream kept besides the tail
FILE_LIMIT = GiB  # RLIMIT_FSIZE: the largest file a snippet may write in its scratch folder
# credentials a snippet could read through the read-only view of the system; hidden under bubblewrap
_SECRET_PATHS = (".ssh", ".netrc", ".git-credentials", ".config/gh", ".config/git", ".docker", ".pypirc",
                 ".aws", ".config/gcloud", ".kube")


def parse_size(text: str | int) -> int:
    """'4G', '512M', '4GiB', '100000' -> bytes."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*", str(text), re.I)
    if not m:
        raise InputError(f"cannot read a size from {text!r} (use e.g. 4G, 512M)")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2).lower()]
    return int(float(m.group(1)) * scale)


@dataclass(frozen=True)
class Limits:
    timeout: float = 120.0  # wall seconds
    memory: int = 4 * GiB  # bytes of address space (CPU runs) / of the memory cgroup (GPU runs)
    max_procs: int = 256
    output: int = 10_000_000  # bytes of stdout + stderr

    def as_dict(self) -> dict[str, Any]:
        return {"timeout": self.timeout, "memory": self.memory, "max_procs": self.max_procs, "output": self.output}


@dataclass(frozen=True)
class Containment:
    """What actually contained a run, and what could not be enforced here (said plainly)."""

    network: str
    filesystem: str
    processes: str
    memory: str
    degraded: tuple[str, ...] = ()


@dataclass(frozen=True)
class SandboxResult:
    returncode: int | None
    stdout: str  # the tail
    stderr: str  # the tail
    seconds: float
    limit: str | None  # "timeout" | "output" | "memory" | "processes" | None
    result: dict[str, Any] | None  # the harness's JSON
    containment: Containment
    left_running: int = 0  # processes that survived the kill (should always be 0)
    output_bytes: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)
    cgroups: tuple[str, ...] = ()  # the run's own cgroups (removed by the time this is returned)


def _own_cgroup(controller: str) -> Path | None:
    """This process's cgroup v1 folder for `controller`, when it exists and is writable."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3 and controller in parts[1].split(","):
            path = Path("/sys/fs/cgroup") / controller / parts[2].lstrip("/")
            if path.is_dir() and os.access(path, os.W_OK):
                return path
    return None


class _Cgroup:
    """A child cgroup (v1) for one run: created, limited, swept of processes and removed."""

    def __init__(self, controller: str, settings: dict[str, str]) -> None:
        parent = _own_cgroup(controller)
        if parent is None:
            raise OSError(f"no writable cgroup v1 '{controller}' hierarchy")
        _sweep(parent)
        self.path = parent / f"sftl-{int(time.time())}-{uuid.uuid4().hex[:8]}"
        self.path.mkdir()
        try:
            for name, value in settings.items():
                (self.path / name).write_text(value)
        except OSError:
            self.remove()
            raise

    def read(self, name: str) -> str:
        try:
            return (self.path / name).read_text()
        except OSError:
            return ""

    def pids(self) -> list[int]:
        return [int(p) for p in self.read("cgroup.procs").split()]

    def kill_all(self, deadline: float = 3.0) -> int:
        """SIGKILL every process in the cgroup until none is left; returns how many survived."""
        end = time.monotonic() + deadline
        while True:
            pids = self.pids()
            if not pids or time.monotonic() > end:
                return len(pids)
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.01)

    def remove(self) -> None:
        for _ in range(100):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)


def _sweep(parent: Path, age: float = 60.0) -> None:
    """Remove run cgroups left by an sftl that was killed before cleaning up: empty and old.

    A live run's cgroup is empty only for the milliseconds between creation and the child
    joining it, and between the kill and the removal, so an empty one a minute old is stale.
    """
    now = time.time()
    for path in parent.glob("sftl-*"):
        parts = path.name.split("-")
        try:
            created = float(parts[1]) if len(parts) == 3 else path.stat().st_mtime
            if now - created < age or (path / "cgroup.procs").read_text().strip():
                continue
            path.rmdir()
        except (OSError, ValueError):
            continue


@dataclass(frozen=True)
class Capabilities:
    bwrap: str | None  # path when bubblewrap can create namespaces here
    unshare: tuple[str, ...] | None  # the `unshare ... --net` command prefix that works here
    pids_cgroup: bool
    memory_cgroup: bool
    root: bool
    why: tuple[str, ...] = ()
    tmpfs_size: bool = False  # bubblewrap >= 0.8 can cap the size of the tmpfs it mounts


def probe(settings: Settings) -> Capabilities:
    """What containment this machine allows (a few milliseconds; run once per Sandbox)."""
    path = settings.base_env.get("PATH", os.defpath)
    why = []
    env = settings.child_env()
    bwrap = shutil.which("bwrap", path=path)
    if bwrap:
        try:
            ok = subprocess.run([bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev",
                                 "--proc", "/proc", "true"], capture_output=True, timeout=10, env=env).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if not ok:
            why.append("bubblewrap cannot create namespaces here")
            bwrap = None
    sized = False
    if bwrap:
        try:
            sized = subprocess.run([bwrap, "--ro-bind", "/", "/", "--size", "1048576", "--tmpfs", "/tmp", "true"],
                                   capture_output=True, timeout=10, env=env).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            sized = False
    else:
        why.append("bubblewrap (bwrap) is not installed")
    unshare_exe = shutil.which("unshare", path=path)
    unshare: tuple[str, ...] | None = None
    # root can make a network namespace directly; others need a user namespace mapped to root
    # a PID namespace too, where allowed: the snippet then cannot see or signal sftl's processes
    for args in (("--net", "--pid", "--fork", "--mount", "--mount-proc"), ("--net",),
                 ("--user", "--map-root-user", "--net", "--pid", "--fork", "--mount", "--mount-proc"),
                 ("--user", "--map-root-user", "--net")):
        if unshare_exe is None:
            break
        try:
            ok = subprocess.run([unshare_exe, *args, "true"], capture_output=True, timeout=10, env=env).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if ok:
            unshare = (unshare_exe, *args)
            break
    return Capabilities(bwrap, unshare, _own_cgroup("pids") is not None, _own_cgroup("memory") is not None,
                        os.geteuid() == 0, tuple(why), sized)


def _tail(head: bytearray, data: bytearray) -> str:
    """The output's tail; when it was cut, its head too, so a first line (a marker) survives."""
    tail = bytes(data[-TAIL * 4:]).decode("utf-8", "replace")[-TAIL:]
    head_text = bytes(head).decode("utf-8", "replace")
    if tail.startswith(head_text) or head_text.endswith(tail) and len(head_text) >= len(tail):
        return head_text if len(head_text) >= len(tail) else tail
    return head_text + "\n[... output cut ...]\n" + tail


class Sandbox:
    """Runs the harness on a snippet, contained. One instance can run many snippets."""

    def __init__(self, settings: Settings, limits: Limits | None = None, allow_network: bool = False,
                 caps: Capabilities | None = None) -> None:
        self.settings = settings
        self.limits = limits or Limits()
        self.allow_network = allow_network
        self.caps = caps or probe(settings)
        if not self.allow_network and not (self.caps.bwrap or self.caps.unshare):
            raise SandboxError(
                "no way to cut the network here (" + "; ".join(self.caps.why or ("unshare --net failed",))
                + "; unshare --net failed): refusing to run untrusted code; pass --allow-network to run anyway"
            )

    def describe(self, gpu: bool = False) -> Containment:
        caps, degraded = self.caps, []
        if self.allow_network:
            network = "allowed (--allow-network)"
            degraded.append("network allowed by the user")
        elif caps.bwrap:
            network = "none (bubblewrap --unshare-all)"
        else:
            network = "none (unshare --net)"
            if caps.unshare and "--pid" not in caps.unshare:
                degraded.append("no PID namespace: the snippet can see and signal other processes")
        if caps.bwrap:
            filesystem = "read-only system, writable scratch (bubblewrap)"
        else:
            filesystem = "writable: bubblewrap unavailable, the snippet can write wherever its user can"
            degraded.append("filesystem not read-only (no bubblewrap)")
        if caps.pids_cgroup:
            processes = f"pids cgroup, pids.max={self.limits.max_procs}"
        elif not caps.root:
            processes = f"RLIMIT_NPROC={self.limits.max_procs} (non-root user)"
        else:
            processes = "NOT capped: running as root (RLIMIT_NPROC does not bind) and no writable pids cgroup"
            degraded.append("process count not capped")
        if not gpu:
            memory = f"RLIMIT_AS={self.limits.memory}"
        elif caps.memory_cgroup:
            memory = f"memory cgroup limit {self.limits.memory} (RLIMIT_AS breaks CUDA)"
        else:
            memory = "NOT capped on GPU runs: RLIMIT_AS breaks CUDA and no writable memory cgroup"
            degraded.append("memory not capped on the GPU run")
        return Containment(network, filesystem, processes, memory, tuple(degraded))

    # -- the run ----------------------------------------------------------------------------------

    def run_harness(self, python: Path, code: str, harness_args: list[str], gpu: bool = False) -> SandboxResult:
        """Write the snippet into a fresh scratch folder and run the harness on it there."""
        scratch = Path(tempfile.mkdtemp(prefix="sftl-run-"))
        try:
            (scratch / "home").mkdir()
            (scratch / "tmp").mkdir()
            (scratch / "snippet.py").write_text(code, encoding="utf-8")
            shutil.copyfile(HARNESS, scratch / "_harness.py")
            argv = [str(python), "-I", "-B", str(scratch / "_harness.py"), "--snippet", str(scratch / "snippet.py"),
                    "--result", str(scratch / "result.json"), *harness_args]
            # the interpreter's environment must stay visible where the sandbox mounts fresh tmpfs
            prefixes = {python.absolute().parent.parent, python.resolve().parent.parent}
            return self.run(argv, scratch, gpu=gpu, ro_paths=tuple(sorted(prefixes)))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _wrap(self, argv: list[str], scratch: Path, gpu: bool, ro_paths: tuple[Path, ...] = ()) -> list[str]:
        caps = self.caps
        if caps.bwrap:
            cmd = [caps.bwrap, "--unshare-all"]
            if self.allow_network:
                cmd.append("--share-net")
            cmd += ["--die-with-parent", "--new-session", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                    ]
            for mount in ("/tmp", "/dev/shm"):  # RAM-backed: capped, or a snippet could fill memory there
                cmd += (["--size", str(FILE_LIMIT)] if caps.tmpfs_size else []) + ["--tmpfs", mount]
            if gpu:  # the GPU's device nodes, which --dev /dev does not carry
                for node in sorted(Path("/dev").glob("nvidia*")):
                    cmd += ["--dev-bind", str(node), str(node)]
            home = Path(self.settings.base_env.get("HOME") or "/root")
            for rel in _SECRET_PATHS:
                p = home / rel
                if p.is_dir():
                    cmd += ["--tmpfs", str(p)]
                elif p.exists():
                    cmd += ["--ro-bind", "/dev/null", str(p)]
            # sftl's own interpreter and package (the fuzz worker and the NaN-search runner import them) must stay visible too
            # when they live under a fresh tmpfs mount, as in a checkout or CI clone under /tmp
            own = (Path(sys.prefix), Path(sys.base_prefix), Path(__file__).resolve().parent.parent)
            for path in sorted({p.absolute() for p in (*ro_paths, *own)}):
                if any(path == Path(t) or Path(t) in path.parents for t in ("/tmp", "/dev/shm")):
                    cmd += ["--ro-bind", str(path), str(path)]
            cmd += ["--bind", str(scratch), str(scratch), "--chdir", str(scratch), "--"]
            return cmd + argv
        if caps.unshare and not self.allow_network:
            return [*caps.unshare, "--"] + argv
        return argv

    def run(self, argv: list[str], scratch: Path, gpu: bool = False, ro_paths: tuple[Path, ...] = ()) -> SandboxResult:
        limits = self.limits
        containment = self.describe(gpu)
        notes: list[str] = []
        pids_cg = mem_cg = None
        if self.caps.pids_cgroup:
            try:
                pids_cg = _Cgroup("pids", {"pids.max": str(limits.max_procs)})
            except OSError as exc:
                notes.append(f"pids cgroup unavailable: {exc}")
        if gpu and self.caps.memory_cgroup:
            try:
                mem_cg = _Cgroup("memory", {"memory.limit_in_bytes": str(limits.memory)})
            except OSError as exc:
                notes.append(f"memory cgroup unavailable: {exc}")
        procs_files = [cg.path / "cgroup.procs" for cg in (pids_cg, mem_cg) if cg is not None]

        def in_child() -> None:  # runs between fork and exec: join the cgroups, set the rlimits
            for f in procs_files:
                with open(f, "w") as fh:
                    fh.write(str(os.getpid()))
            cpu = int(limits.timeout) + 5
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_procs, limits.max_procs))
            if not gpu:
                resource.setrlimit(resource.RLIMIT_AS, (limits.memory, limits.memory))

        env = self.settings.child_env({
            "HOME": str(scratch / "home"),
            "TMPDIR": str(scratch / "tmp"),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0",
            "MPLBACKEND": "Agg",
            "TF_CPP_MIN_LOG_LEVEL": "2",
        })
        if not gpu:
            env["CUDA_VISIBLE_DEVICES"] = ""  # hide CUDA from the CPU run
        cmd = self._wrap(argv, scratch, gpu, ro_paths)
        started = time.monotonic()
        limit: str | None = None
        out, err = bytearray(), bytearray()
        heads = {id(out): bytearray(), id(err): bytearray()}
        total = 0
        try:
            proc = subprocess.Popen(cmd, cwd=scratch, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True, preexec_fn=in_child)
        except (OSError, subprocess.SubprocessError) as exc:
            for cg in (pids_cg, mem_cg):
                if cg is not None:
                    cg.remove()
            raise SandboxError(f"cannot start the sandboxed process: {exc}") from exc
        sel = selectors.DefaultSelector()
        assert proc.stdout is not None and proc.stderr is not None
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        deadline = started + limits.timeout
        try:
            while sel.get_map():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    limit = "timeout"
                    break
                for key, _ in sel.select(timeout=min(remaining, 0.5)):
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        sel.unregister(key.fileobj)
                        continue
                    total += len(chunk)
                    buf: bytearray = key.data
                    head = heads[id(buf)]
                    if len(head) < HEAD:
                        head += chunk[: HEAD - len(head)]
                    buf += chunk
                    if len(buf) > 2 * TAIL * 4:  # keep only a tail; the size is what is limited
                        del buf[: len(buf) - TAIL * 4]
                    if total > limits.output:
                        limit = "output"
                        break
                if limit:
                    break
                if pids_cg is not None and _events_max(pids_cg.read("pids.events")) > 0:
                    limit = "processes"  # a fork bomb: killed at the cap, not left to spin until the timeout
                    break
            if limit is None:
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    limit = "timeout"
        finally:
            sel.close()
            # the whole process group, then whatever else the cgroup still holds
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
            left = 0
            for cg in (pids_cg, mem_cg):
                if cg is not None:
                    left = max(left, cg.kill_all())
            pids_hit = pids_cg is not None and _events_max(pids_cg.read("pids.events")) > 0
            mem_hit = mem_cg is not None and _int(mem_cg.read("memory.failcnt")) > 0
            for cg in (pids_cg, mem_cg):
                if cg is not None:
                    cg.remove()
            proc.stdout.close()
            proc.stderr.close()
        seconds = time.monotonic() - started
        if limit is None and proc.returncode == -signal.SIGXCPU:
            limit = "cpu"
        if limit is None and mem_hit and proc.returncode not in (0, None):
            limit = "memory"
        if pids_hit:
            notes.append(f"the snippet hit the process cap ({limits.max_procs})")
        result = None
        result_path = scratch / "result.json"
        if limit is None and result_path.is_file():
            try:
                loaded = json.loads(result_path.read_text(encoding="utf-8"))
                result = loaded if isinstance(loaded, dict) else None
            except (OSError, ValueError):
                notes.append("the harness's result could not be read")
        if pids_hit and limit in (None, "timeout"):
            limit = "processes"
        return SandboxResult(proc.returncode, _tail(heads[id(out)], out), _tail(heads[id(err)], err), seconds, limit, result, containment, left,
                             total, tuple(notes),
                             tuple(str(cg.path) for cg in (pids_cg, mem_cg) if cg is not None))


def _int(text: str) -> int:
    try:
        return int(text.strip() or 0)
    except ValueError:
        return 0


def _events_max(text: str) -> int:
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "max":
            return _int(parts[1])
    return 0
