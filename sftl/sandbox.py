"""The only place untrusted code runs: a confined child process (no network, read-only system, hidden credentials, hard limits), or none at all."""

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sftl.cgroups import Parent, RunCgroup, find_parent
from sftl.config import Settings
from sftl.errors import ConfinementError, InputError, SandboxError

HARNESS = Path(__file__).resolve().parent / "_harness.py"
CONFINE = Path(__file__).resolve().parent / "_confine.py"
GiB = 1 << 30
TAIL = 4000  # characters of stdout/stderr kept in a run's record
HEAD = 512  # bytes of the start of each stream kept besides the tail
FILE_LIMIT = GiB  # RLIMIT_FSIZE: the largest file a snippet may write in its scratch folder
CONFINE_FAILED = 125  # _confine.py's exit status when it could not set the namespaces up (nothing ran)
# the caller's home is hidden whole; these credential files are hidden too where a path bound back (an
# environment under the home) would show them
SECRET_PATHS = (".ssh", ".netrc", ".git-credentials", ".config/gh", ".config/git", ".docker", ".pypirc",
                ".aws", ".config/gcloud", ".kube", ".npmrc", ".gnupg", ".pgpass", ".cargo/credentials.toml")
# the namespaces of the fallback: a user namespace (so its root holds no power outside), its own mounts,
# processes, network, IPC, host name and cgroup view; --kill-child ends it all when sftl dies
UNSHARE_ARGS = ("--user", "--map-root-user", "--mount", "--pid", "--fork", "--kill-child", "--net", "--ipc", "--uts",
                "--cgroup")
# bubblewrap run by root keeps every capability unless told otherwise: the snippet could remount / writable.
# A user namespace, and no capabilities left by the time the snippet starts, make its root powerless outside
# the sandbox's own namespaces: bubblewrap drops them itself, or, for root, _confine.py does once it has made
# the device binds read-only (root owns the host's device nodes: writable binds let a snippet chmod them)
BWRAP_ARGS = ("--unshare-all", "--unshare-user", "--die-with-parent")
BWRAP_DEVICES = tuple(f"/dev/{n}" for n in ("null", "zero", "full", "random", "urandom", "tty"))
UNCONFINED_FLAG = "--unconfined"


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
    memory: int = 4 * GiB  # bytes: the memory cgroup's limit, or RLIMIT_AS where there is none (CPU runs)
    max_procs: int = 256
    output: int = 10_000_000  # bytes of stdout + stderr

    def as_dict(self) -> dict[str, Any]:
        return {"timeout": self.timeout, "memory": self.memory, "max_procs": self.max_procs, "output": self.output}


@dataclass(frozen=True)
class Guard:
    """One property report code must run under: whether this machine gives it, how, and what would provide it."""

    name: str
    held: bool
    how: str
    provide: str = ""  # the one command that provides it, when not held


@dataclass(frozen=True)
class Containment:
    """What actually contained a run, and what could not be enforced here (said plainly)."""

    network: str
    filesystem: str
    processes: str
    memory: str
    degraded: tuple[str, ...] = ()
    environment: str = ""
    backend: str = ""  # "bubblewrap", "unshare", or "none" (only with --unconfined)
    unconfined: bool = False  # ran with --unconfined although a guard was missing


@dataclass(frozen=True)
class SandboxResult:
    returncode: int | None
    stdout: str  # the tail
    stderr: str  # the tail
    seconds: float
    limit: str | None  # "timeout" | "output" | "memory" | "processes" | "cpu" | None
    result: dict[str, Any] | None  # the harness's JSON
    containment: Containment
    left_running: int = 0  # processes that survived the kill (should always be 0)
    output_bytes: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)
    cgroups: tuple[str, ...] = ()  # the run's own cgroups (removed by the time this is returned)


@dataclass(frozen=True)
class Capabilities:
    """What this machine allows, as probed: the confining backends that work and the cgroups that can cap."""

    bwrap: str | None  # path when bubblewrap can create namespaces here
    unshare: tuple[str, ...] | None  # the `unshare ...` prefix under which _confine.py builds the view
    pids_cgroup: bool
    memory_cgroup: bool
    root: bool
    why: tuple[str, ...] = ()  # why a backend is unavailable
    tmpfs_size: bool = False  # bubblewrap >= 0.8 can cap the size of the tmpfs it mounts
    pids_how: str = ""  # which cgroup caps processes, or why none can
    memory_how: str = ""

    @property
    def backend(self) -> str | None:
        return "bubblewrap" if self.bwrap else "unshare" if self.unshare else None


def _works(cmd: list[str], env: dict[str, str], cwd: str | None = None) -> tuple[bool, str]:
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=20, env=env, cwd=cwd, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    last = (done.stderr.decode("utf-8", "replace").strip().splitlines() or [""])[-1]
    return done.returncode == 0, last


def probe(settings: Settings) -> Capabilities:
    """What containment this machine allows (tens of milliseconds: each backend is tried for real)."""
    path = settings.base_env.get("PATH", os.defpath)
    why = []
    env = settings.child_env()
    bwrap = shutil.which("bwrap", path=path)
    sized = False
    if bwrap:
        root = os.geteuid() == 0
        ok, err = _works([bwrap, *BWRAP_ARGS, *_bwrap_caps(root), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                          *_bwrap_finish(root, list(BWRAP_DEVICES), "/"), "/bin/sh", "-c", ":"], env)
        if not ok:
            why.append(f"bubblewrap cannot create namespaces here ({err})")
            bwrap = None
        else:
            sized = _works([bwrap, "--ro-bind", "/", "/", "--size", "1048576", "--tmpfs", "/tmp", "true"], env)[0]
    else:
        why.append("bubblewrap (bwrap) is not installed")
    unshare_exe = shutil.which("unshare", path=path)
    unshare: tuple[str, ...] | None = None
    if unshare_exe is None:
        why.append("unshare (util-linux) is not installed")
    else:
        prefix = (unshare_exe, *UNSHARE_ARGS)
        scratch = tempfile.mkdtemp(prefix="sftl-probe-")
        try:
            ok, err = _works([*prefix, "--", *_confine_argv({"scratch": scratch}), "--", "/bin/sh", "-c", ":"], env,
                             cwd=scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if ok:
            unshare = prefix
        else:
            why.append(f"unprivileged user namespaces do not work here ({err or 'unshare --user failed'})")
    pids, memory = find_parent("pids"), find_parent("memory")
    return Capabilities(bwrap, unshare, pids.usable, memory.usable, os.geteuid() == 0, tuple(why), sized,
                        pids.describe(), memory.describe())


def _bwrap_caps(root: bool) -> list[str]:
    """bubblewrap drops every capability itself, except for root: _confine.py --finish needs them a moment longer."""
    return [] if root else ["--cap-drop", "ALL"]


def _bwrap_finish(root: bool, devices: list[str], cwd: str) -> list[str]:
    """What follows bubblewrap's options: `--`, and for root _confine.py's last step before the command."""
    if not root:
        return ["--"]
    return ["--", *_confine_argv({"finish": True, "devices": devices, "cwd": cwd}), "--"]


def _confine_argv(spec: dict[str, Any]) -> list[str]:
    """sftl's own interpreter running _confine.py, isolated from site-packages and the environment."""
    return [sys.executable, "-I", "-S", str(CONFINE), json.dumps(spec)]


def _cgroup_command(controller: str, root: bool) -> str:
    """The one command that gives this machine a cgroup `controller` runs can be capped with."""
    from sftl.cgroups import CGROUP_ROOT

    sudo = "" if root else "sudo "
    if (CGROUP_ROOT / "cgroup.controllers").exists():  # cgroup v2 alone
        return f"echo +{controller} | {sudo}tee {CGROUP_ROOT}/cgroup.subtree_control"
    return (f"{sudo}mkdir -p {CGROUP_ROOT}/{controller} && "
            f"{sudo}mount -t cgroup -o {controller} {controller} {CGROUP_ROOT}/{controller}")


def install_command(root: bool) -> str:
    """The one command that makes bubblewrap available: the system's package manager (make install runs it as root)."""
    def have(tool: str) -> bool:  # looked up on the system's own folders too: a caller's PATH may lack them
        return bool(shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin"))

    manager = "apt-get" if have("apt-get") else "dnf" if have("dnf") else None
    if manager is None:
        return "install bubblewrap with the system's package manager"
    return ("" if root else "sudo ") + f"{manager} install bubblewrap"


def guards(caps: Capabilities, limits: Limits, gpu: bool = False, allow_network: bool = False) -> tuple[Guard, ...]:
    """Every property report code runs under, held or not, on this machine."""
    backend = caps.backend
    via = {"bubblewrap": f"bubblewrap {caps.bwrap}", "unshare": "user namespaces: unshare and sftl/_confine.py"}.get(
        backend or "", "")
    fix = install_command(caps.root)
    if backend is None:
        network = Guard("no network", False, "; ".join(caps.why), fix)
    elif allow_network:
        network = Guard("no network", True, "NETWORK ALLOWED by --allow-network")
    else:
        network = Guard("no network", True, f"own network namespace, loopback only ({via})")
    filesystem = Guard("read-only filesystem", bool(backend),
                       f"the system bound read-only, a fresh writable scratch folder, fresh /tmp and /dev/shm ({via})"
                       if backend else "; ".join(caps.why), "" if backend else fix)
    environment = Guard("hidden environment", bool(backend),
                        "only PATH and locale passed, own PID namespace and /proc, the home hidden "
                        f"({via})" if backend else "other processes' /proc/*/environ readable (no PID namespace)",
                        "" if backend else fix)
    if caps.pids_cgroup:
        processes = Guard("process cap", True, f"pids.max={limits.max_procs} in {caps.pids_how}")
    elif not caps.root:
        processes = Guard("process cap", True, f"RLIMIT_NPROC={limits.max_procs} (a non-root user)")
    else:
        processes = Guard("process cap", False, f"running as root (RLIMIT_NPROC does not bind it) and {caps.pids_how}",
                          _cgroup_command("pids", caps.root))
    if caps.memory_cgroup:
        memory = Guard("memory cap", True, f"{limits.memory} bytes in {caps.memory_how}")
    elif not gpu:
        memory = Guard("memory cap", True, f"RLIMIT_AS={limits.memory} ({caps.memory_how})")
    else:
        memory = Guard("memory cap", False, f"GPU runs: RLIMIT_AS breaks CUDA and {caps.memory_how}",
                       _cgroup_command("memory", caps.root))
    return (network, filesystem, environment, processes, memory,
            Guard("time limit", True, f"killed after {limits.timeout:g} s of wall time (and RLIMIT_CPU)"),
            Guard("output cap", True, f"killed past {limits.output} bytes of stdout + stderr"))


def refusal(missing: tuple[Guard, ...]) -> str:
    """The one line a command prints when it will not run report code here."""
    by_fix: dict[str, list[str]] = {}
    for guard in missing:
        by_fix.setdefault(guard.provide, []).append(guard.name)
    if len(by_fix) == 1:
        provides = f"`{missing[0].provide}` provides {'it' if len(missing) == 1 else 'them'}"
    else:
        provides = "; ".join(f"`{fix}` provides {', '.join(names)}" for fix, names in by_fix.items())
    return (f"refusing to run report code: missing {', '.join(g.name for g in missing)} ({missing[0].how}); "
            f"{provides} (or pass {UNCONFINED_FLAG} to run it anyway, unconfined)")


def check_confinement(settings: Settings, limits: Limits | None = None, gpu: bool = False,
                      unconfined: bool = False, caps: Capabilities | None = None) -> Capabilities:
    """Raise ConfinementError (before any work) where report code could not run confined, unless `unconfined`."""
    caps = caps or probe(settings)
    missing = tuple(g for g in guards(caps, limits or Limits(), gpu) if not g.held)
    if missing and not unconfined:
        raise ConfinementError(refusal(missing))
    return caps


def _tail(head: bytearray, data: bytearray) -> str:
    """The output's tail; when it was cut, its head too, so a first line (a marker) survives."""
    tail = bytes(data[-TAIL * 4:]).decode("utf-8", "replace")[-TAIL:]
    head_text = bytes(head).decode("utf-8", "replace")
    if tail.startswith(head_text) or head_text.endswith(tail) and len(head_text) >= len(tail):
        return head_text if len(head_text) >= len(tail) else tail
    return head_text + "\n[... output cut ...]\n" + tail


def _started(pid: int) -> str | None:
    """A process's start time (field 22 of its stat), which tells it from a later process with its number;
    None once it is gone or a zombie (it has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def _descendants(pid: int) -> list[tuple[int, str]]:
    """Every live process under `pid` (its children, theirs, ...), each with its start time."""
    found: list[tuple[int, str]] = []
    todo = [pid]
    while todo and len(found) < 100_000:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except (OSError, ValueError):
                continue
            for child in children:
                started = _started(child)
                if started is not None:
                    found.append((child, started))
                    todo.append(child)
    return found


def _kill(tree: list[tuple[int, str]]) -> None:
    for pid, started in tree:
        if _started(pid) == started:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _wait_gone(tree: list[tuple[int, str]], deadline: float = 5.0) -> int:
    """Wait until every process of `tree` has ended; how many outlived the deadline."""
    end = time.monotonic() + deadline
    while True:
        alive = [(pid, started) for pid, started in tree if _started(pid) == started]
        if not alive or time.monotonic() > end:
            return len(alive)
        _kill(alive)
        time.sleep(0.01)  # they end asynchronously once killed: poll for that event, bounded


class Sandbox:
    """Runs the harness (or any command) on a snippet, confined; refuses where it cannot be. Runs many snippets."""

    def __init__(self, settings: Settings, limits: Limits | None = None, allow_network: bool = False,
                 caps: Capabilities | None = None, unconfined: bool = False) -> None:
        self.settings = settings
        self.limits = limits or Limits()
        self.allow_network = allow_network
        self.unconfined = unconfined
        self.caps = check_confinement(settings, self.limits, unconfined=unconfined, caps=caps)

    def guards(self, gpu: bool = False) -> tuple[Guard, ...]:
        return guards(self.caps, self.limits, gpu, self.allow_network)

    def describe(self, gpu: bool = False) -> Containment:
        by = {g.name: g for g in self.guards(gpu)}
        missing = [g for g in by.values() if not g.held]
        degraded = [f"{g.name} MISSING: {g.how}" for g in missing]
        if self.allow_network and self.caps.backend:
            degraded.insert(0, "network allowed by the user (--allow-network)")

        def said(name: str) -> str:
            g = by[name]
            return g.how if g.held else f"NONE: {g.how}"

        return Containment(said("no network"), said("read-only filesystem"), said("process cap"), said("memory cap"),
                           tuple(degraded), said("hidden environment"), self.caps.backend or "none",
                           bool(missing) and self.unconfined)

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

    def _hidden(self) -> list[str]:
        """Folders hidden under an empty read-only tmpfs: the caller's home and the other users' (their dotfiles
        hold tokens), and /run (the sockets of services — a container engine, the system bus, agents: a
        read-only mount does not stop a connect, and the snippet's files' owner may be root)."""
        home = Path(self.settings.base_env.get("HOME") or "/root").absolute()
        found = [p for p in (home, Path("/home"), Path("/run"))
                 if p.is_dir() and not p.is_symlink() and p != Path("/")]
        # one inside another is hidden with it
        return sorted({str(p) for p in found if not any(q in p.parents for q in found)})

    @staticmethod
    def _masked() -> list[str]:
        """System files root may read that hold secrets (password hashes, the host's SSH keys): /dev/null in their place."""
        files = [Path(p) for p in ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-")]
        files += sorted(Path("/etc/ssh").glob("ssh_host_*_key"))
        return [str(p) for p in files if p.is_file() and not p.is_symlink()]

    def _visible_paths(self, ro_paths: tuple[Path, ...]) -> list[str]:
        """Paths under a fresh mount (/tmp, /dev/shm, the hidden home) to bind back read-only: an environment
        there (a pyenv Python, a venv under SFTL_HOME), and sftl's own interpreter and package (the fuzz worker
        and the NaN-search runner import them), as in a checkout or CI clone under /tmp."""
        own = (Path(sys.prefix), Path(sys.base_prefix), Path(__file__).resolve().parent.parent)
        roots = [Path(p) for p in ("/tmp", "/dev/shm", *self._hidden())]
        # a hidden folder itself (a script kept in the home's top) is never bound back: that would undo the hiding
        return [str(path) for path in sorted({p.absolute() for p in (*ro_paths, *own)})
                if any(root in path.parents for root in roots)]

    def _gpu_nodes(self) -> list[str]:
        return [str(node) for node in sorted(Path("/dev").glob("nvidia*"))]

    def _wrap(self, argv: list[str], scratch: Path, gpu: bool, ro_paths: tuple[Path, ...] = ()) -> list[str]:
        caps = self.caps
        home = self.settings.base_env.get("HOME") or "/root"
        if caps.bwrap:
            cmd = [caps.bwrap, *BWRAP_ARGS, *_bwrap_caps(caps.root)]
            if self.allow_network:
                cmd.append("--share-net")
            cmd += ["--new-session", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
            for mount in ("/tmp", "/dev/shm"):  # RAM-backed: capped, or a snippet could fill memory there
                cmd += (["--size", str(FILE_LIMIT)] if caps.tmpfs_size else []) + ["--tmpfs", mount]
            if gpu:  # the GPU's device nodes, which --dev /dev does not carry
                for node in self._gpu_nodes():
                    cmd += ["--dev-bind", node, node]
            hidden = self._hidden()
            for folder in hidden:  # an empty tmpfs over the home and /run, made read-only once the binds are in
                cmd += ["--size", "1048576", "--tmpfs", folder] if caps.tmpfs_size else ["--tmpfs", folder]
            visible = self._visible_paths(ro_paths)
            for path in visible:
                cmd += ["--ro-bind", path, path]
            for path in self._masked():
                cmd += ["--ro-bind", "/dev/null", path]
            for rel in SECRET_PATHS:  # those still in sight through a path bound back
                p = Path(home) / rel
                if hidden and not any(p == Path(v) or Path(v) in p.parents for v in visible):
                    continue
                if p.is_dir():
                    cmd += ["--tmpfs", str(p)]
                elif p.exists():
                    cmd += ["--ro-bind", "/dev/null", str(p)]
            cmd += ["--bind", str(scratch), str(scratch)]
            for folder in hidden:
                cmd += ["--remount-ro", folder]
            cmd += ["--chdir", str(scratch)]
            devices = list(BWRAP_DEVICES) + (self._gpu_nodes() if gpu else [])
            return cmd + _bwrap_finish(caps.root, devices, str(scratch)) + argv
        if caps.unshare:
            prefix = [a for a in caps.unshare if not (self.allow_network and a == "--net")]
            spec = {"scratch": str(scratch), "cwd": str(scratch), "home": home, "secrets": list(SECRET_PATHS),
                    "hide": self._hidden(), "mask": self._masked(),
                    "tmpfs_size": FILE_LIMIT, "devices": self._gpu_nodes() if gpu else [],
                    "read_only": self._visible_paths(ro_paths), "share_net": self.allow_network}
            return [*prefix, "--", *_confine_argv(spec), "--", *argv]
        return argv  # only with --unconfined: check_confinement refused otherwise

    def run(self, argv: list[str], scratch: Path, gpu: bool = False, ro_paths: tuple[Path, ...] = ()) -> SandboxResult:
        limits = self.limits
        if gpu:  # a GPU run needs a memory cgroup (RLIMIT_AS breaks CUDA): refused where there is none
            check_confinement(self.settings, limits, gpu=True, unconfined=self.unconfined, caps=self.caps)
        containment = self.describe(gpu)
        notes: list[str] = []
        pids_cg = self._cgroup(find_parent("pids"), limits.max_procs, notes) if self.caps.pids_cgroup else None
        mem_cg = self._cgroup(find_parent("memory"), limits.memory, notes) if self.caps.memory_cgroup else None
        if (pids_cg is None and self.caps.pids_cgroup) or (mem_cg is None and self.caps.memory_cgroup and gpu):
            for cg in (pids_cg, mem_cg):
                if cg is not None:
                    cg.remove()
            if not self.unconfined:
                raise SandboxError(f"cannot set the run's cgroup up: {'; '.join(notes)}")
        procs_files = [cg.procs_file for cg in (pids_cg, mem_cg) if cg is not None]
        address_cap = mem_cg is None and not gpu  # RLIMIT_AS only where no cgroup caps memory: it breaks CUDA builds

        def in_child() -> None:  # runs between fork and exec: join the cgroups, set the rlimits
            for f in procs_files:
                with open(f, "w") as fh:
                    fh.write(str(os.getpid()))
            cpu = int(limits.timeout) + 5
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_procs, limits.max_procs))
            if address_cap:
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
                if pids_cg is not None and pids_cg.hit():
                    limit = "processes"  # a fork bomb: killed at the cap, not left to spin until the timeout
                    break
            if limit is None:
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    limit = "timeout"
        finally:
            sel.close()
            # the process tree as it stands (the namespace's first process among it), the whole process
            # group, then whatever else the cgroup still holds
            tree = _descendants(proc.pid)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            _kill(tree)
            proc.wait()
            left = 0
            for cg in (pids_cg, mem_cg):
                if cg is not None:
                    left = max(left, cg.kill_all())
            # without a cgroup (a non-root user) the namespace's first process dies last, once the kernel has
            # killed every other process of the namespace: its end is the end of the run
            left = max(left, _wait_gone(tree))
            pids_hit = pids_cg is not None and pids_cg.hit()
            mem_hit = mem_cg is not None and mem_cg.hit()
            for cg in (pids_cg, mem_cg):
                if cg is not None:
                    cg.remove()
            proc.stdout.close()
            proc.stderr.close()
        seconds = time.monotonic() - started
        stderr = _tail(heads[id(err)], err)
        if cmd is not argv and proc.returncode == CONFINE_FAILED and "sftl-confine:" in stderr:
            line = next(ln for ln in stderr.splitlines() if "sftl-confine:" in ln)
            raise SandboxError(f"the sandbox could not be set up: {line.split('sftl-confine:', 1)[1].strip()}")
        returncode = proc.returncode
        if cmd is not argv and returncode is not None and 128 < returncode < 128 + signal.NSIG:
            returncode = 128 - returncode  # both wrappers report a signal death as 128 + N, as a shell does
        if limit is None and returncode == -signal.SIGXCPU:
            limit = "cpu"
        if limit is None and mem_hit and returncode not in (0, None):
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
        return SandboxResult(returncode, _tail(heads[id(out)], out), stderr, seconds, limit, result, containment, left,
                             total, tuple(notes),
                             tuple(str(cg.path) for cg in (pids_cg, mem_cg) if cg is not None))

    @staticmethod
    def _cgroup(parent: Parent, limit: int, notes: list[str]) -> RunCgroup | None:
        try:
            return RunCgroup(parent, limit)
        except OSError as exc:
            notes.append(f"{parent.controller} cgroup unavailable: {exc}")
            return None
