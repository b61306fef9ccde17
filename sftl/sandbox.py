"""The only place untrusted code runs: a confined child process (no network, an allowlisted read-only view, nobody, hard limits), or none at all."""

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
import unicodedata
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
SHOWN_LINES, SHOWN_CHARS = 20, 2000  # the tail of a run's output that is stored and shown (output_tail)
FILE_LIMIT = GiB  # RLIMIT_FSIZE: the largest file a snippet may write in its scratch folder
CONFINE_FAILED = 125  # _confine.py's exit status when it could not set the namespaces up (nothing ran)
NOBODY = 65534  # the snippet's user and group inside: nobody, who owns nothing in its view
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
# the system a snippet sees, read-only (a merged-/usr system has the others as links, shown as links)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# the few files of /etc a runtime reads: the loader's cache, certificates (never their private keys), host and
# service tables, name-service order, locale and time zone, the alternatives' links; never machine-id, the
# password hashes, SSH keys, a package manager's or a tool's configuration (they name hosts and hold tokens)
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "ssl/certs", "ssl/openssl.cnf", "ssl/cert.pem",
             "ca-certificates", "ca-certificates.conf", "pki/tls/certs", "pki/ca-trust/extracted", "hosts",
             "host.conf", "nsswitch.conf", "gai.conf", "protocols", "services", "localtime", "timezone",
             "locale.alias", "locale.conf", "default/locale", "alternatives", "fonts", "mime.types")
# written for each run: its own user and group alone, and no name server (there is no network)
ETC_WRITTEN = {"passwd": f"nobody:x:{NOBODY}:{NOBODY}:nobody:/nonexistent:/usr/sbin/nologin\n",
               "group": f"nogroup:x:{NOBODY}:\n", "resolv.conf": ""}
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


@dataclass(frozen=True)
class Mount:
    """One entry of the filesystem a snippet sees: what lies at `path`, from where, and why it is there."""

    kind: str  # "ro" | "rw" (host paths bound) | "node" (a device) | "tmpfs" | "symlink" | "dir" | "proc" | "dev"
    path: str  # where the snippet sees it
    source: str = ""  # the host path bound there; a link's text
    why: str = ""
    size: int = 0  # a tmpfs's cap in bytes (0: none)

    @property
    def access(self) -> str:
        return {"ro": "read-only", "rw": "writable", "node": "device", "tmpfs": "writable, fresh (memory)",
                "symlink": "link", "dir": "read-only", "proc": "own PID namespace", "dev": "minimal"}[self.kind]


@dataclass(frozen=True)
class View:
    """The whole filesystem a snippet sees, an allowlist built alike by both backends: nothing outside these
    mounts exists for it, and all but its scratch folder, /tmp and /dev/shm is read-only."""

    mounts: tuple[Mount, ...]
    cwd: str

    def spec(self) -> list[list[str | int]]:
        """The view as _confine.py reads it (JSON)."""
        return [[m.kind, m.path, m.source, m.size] for m in self.mounts]

    def lines(self) -> list[str]:
        """One line per mount, as `sftl doctor` prints them."""
        width = max(len(m.path) for m in self.mounts)
        out = []
        for m in self.mounts:
            what = f"-> {m.source}" if m.kind == "symlink" else m.access
            if m.kind == "tmpfs" and m.size:
                what += f", capped at {m.size} bytes"
            out.append(f"{m.path:<{width}}  {what}" + (f"  ({m.why})" if m.why else ""))
        return out


def _under(path: Path, roots: tuple[Path, ...] | list[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def too_wide(folder: Path, home: str | None) -> bool:
    """Whether showing `folder` would show what lies beside what is wanted: `/`, a top-level folder (/opt, /srv),
    the home or a folder above it."""
    own = Path(home).absolute() if home else None
    return len(folder.absolute().parts) <= 2 or (own is not None and (folder == own or folder in own.parents))


def environment_paths(python: Path, home: str | None = None) -> tuple[Path, ...]:
    """The folders an interpreter needs besides the system: its environment (a venv, a conda prefix) and the
    installation a venv was made from, and nothing beside them. Raises SandboxError where one is `/`, a
    top-level folder (/opt itself) or the home or a parent of it: binding it would show its siblings."""
    env = python.absolute().parent.parent
    found = [env, python.resolve().parent.parent]
    cfg = env / "pyvenv.cfg"
    if cfg.is_file():  # a venv of copies: the base is named there, not reached by a link
        for line in cfg.read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                found += [Path(value.strip()).absolute().parent, Path(value.strip()).resolve().parent]
    system = [Path(d) for d in SYSTEM_DIRS]
    kept = sorted({p for p in found if not _under(p, system)})
    for p in kept:
        if too_wide(p, home):
            raise SandboxError(f"the interpreter {python} lives in {p}: binding that folder would show the snippet "
                               "everything beside it; install the Python in a folder of its own")
    return tuple(p for p in kept if not _under(p, [q for q in kept if q != p]))


def write_etc(folder: Path) -> None:
    """The /etc files written for each run (its own user and group, no name server) into `folder`."""
    for name, text in ETC_WRITTEN.items():
        (folder / name).write_text(text, encoding="utf-8")


def snippet_view(scratch: Path, etc: Path, ro_paths: tuple[Path, ...] = (), gpu: bool = False,
                 tmpfs_size: int = FILE_LIMIT, finish: Path | None = None, etc_root: Path = Path("/etc")) -> View:
    """The allowlist: /proc and a minimal /dev, fresh /tmp and /dev/shm, the system read-only, a few files of /etc
    (those of `write_etc` from `etc`), `ro_paths` (the environment) read-only, the scratch folder writable;
    a GPU run adds its device nodes and any driver library outside the system folders; `finish`, the
    interpreter of _confine.py's last step inside bubblewrap run by root, adds its installation."""
    mounts = [Mount("proc", "/proc", why="its own processes only"),
              Mount("dev", "/dev", why=", ".join(Path(d).name for d in BWRAP_DEVICES))]
    if gpu:
        mounts += [Mount("node", n, n, "the GPU") for n in gpu_nodes()]
    mounts += [Mount("tmpfs", "/dev/shm", size=tmpfs_size), Mount("tmpfs", "/tmp", size=tmpfs_size)]
    for name in SYSTEM_DIRS:
        path = Path(name)
        if path.is_symlink():
            mounts.append(Mount("symlink", name, os.readlink(path)))
        elif path.is_dir():
            mounts.append(Mount("ro", name, name, "the system"))
    mounts.append(Mount("dir", "/etc"))
    for rel in ETC_FILES:
        host = etc_root / rel
        if host.is_symlink() and _under(host.resolve(), [Path(d) for d in SYSTEM_DIRS]):
            mounts.append(Mount("symlink", f"/etc/{rel}", str(host.resolve())))  # a zone file in /usr
        elif host.exists():
            mounts.append(Mount("ro", f"/etc/{rel}", str(host)))
    mounts += [Mount("ro", f"/etc/{name}", str(etc / name), "written for the run") for name in ETC_WRITTEN]
    shown = [Path(d) for d in SYSTEM_DIRS]
    if gpu:
        mounts += [Mount("ro", str(lib), str(lib), "the GPU's driver") for lib in gpu_libraries()
                   if not _under(lib, shown)]
        mounts += [Mount("ro", str(p), str(p), "the GPU's driver reads it") for p in gpu_sysfs()]
    bound = [(p.absolute(), "the environment") for p in ro_paths]
    if finish is not None:
        bound.append((finish.parent.parent, "sftl's interpreter: the sandbox's last set-up step (root)"))
    for path, why in sorted(bound, key=lambda b: (len(b[0].parts), b[0])):  # a parent first: its child is in it
        if path.exists() and not _under(path, shown):
            mounts.append(Mount("ro", str(path), str(path), why))
            shown.append(path)
    mounts.append(Mount("rw", str(scratch), str(scratch), "the run's scratch folder"))
    return View(tuple(mounts), str(scratch))


def gpu_nodes() -> list[str]:
    """The GPU's device nodes (NVIDIA's), which a minimal /dev lacks."""
    return [str(node) for node in sorted(Path("/dev").glob("nvidia*")) if not node.is_dir()]


def gpu_sysfs() -> list[Path]:
    """What of /sys the GPU's driver reads (the PCI devices and their topology, NUMA nodes, the driver module's
    version), read-only; the rest of /sys (a machine's serial numbers among it) stays out, as on CPU runs."""
    found = [Path(p) for p in ("/sys/bus/pci", "/sys/devices/system/node", "/sys/module/nvidia")]
    found += sorted(Path("/sys/devices").glob("pci*"))
    return [p for p in found if p.is_dir()]


def gpu_libraries() -> list[Path]:
    """The driver's user-space libraries (libcuda, libnvidia-*) the loader knows, as files: a GPU run needs those
    outside the system folders too (a container's /usr/local/nvidia)."""
    ldconfig = shutil.which("ldconfig", path="/usr/sbin:/sbin:/usr/bin:/bin")
    if ldconfig is None:
        return []
    try:
        listed = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    found = {Path(line.rsplit("=>", 1)[1].strip()) for line in listed.splitlines()
             if "=>" in line and re.search(r"\blib(cuda|nvidia-[\w-]+|nvcuvid)\.so", line)}
    return sorted(p for p in found if p.exists())


def _works(cmd: list[str], env: dict[str, str], cwd: str | None = None) -> tuple[bool, str]:
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=20, env=env, cwd=cwd, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    last = (done.stderr.decode("utf-8", "replace").strip().splitlines() or [""])[-1]
    return done.returncode == 0, last


def probe(settings: Settings) -> Capabilities:
    """What containment this machine allows (tens of milliseconds: each backend is tried for real, on the view a
    snippet gets)."""
    path = settings.base_env.get("PATH", os.defpath)
    why = []
    env = settings.child_env()
    root = os.geteuid() == 0
    bwrap = shutil.which("bwrap", path=path)
    unshare_exe = shutil.which("unshare", path=path)
    sized = False
    unshare: tuple[str, ...] | None = None
    scratch, etc = Path(tempfile.mkdtemp(prefix="sftl-probe-")), Path(tempfile.mkdtemp(prefix="sftl-view-"))
    try:
        write_etc(etc)
        if bwrap:
            sized = _works([bwrap, "--ro-bind", "/", "/", "--size", "1048576", "--tmpfs", "/tmp", "true"], env)[0]
            caps = Capabilities(bwrap, None, False, False, root, tmpfs_size=sized)
            view = view_for(caps, scratch, etc)
            ok, err = _works(confined_command(caps, view, ["/bin/sh", "-c", ":"]), env, cwd=str(scratch))
            if not ok:
                why.append(f"bubblewrap cannot create namespaces here ({err})")
                bwrap, sized = None, False
        else:
            why.append("bubblewrap (bwrap) is not installed")
        if unshare_exe is None:
            why.append("unshare (util-linux) is not installed")
        else:
            caps = Capabilities(None, (unshare_exe, *UNSHARE_ARGS), False, False, root)
            view = view_for(caps, scratch, etc)
            ok, err = _works(confined_command(caps, view, ["/bin/sh", "-c", ":"]), env, cwd=str(scratch))
            if ok:
                unshare = caps.unshare
            else:
                why.append(f"unprivileged user namespaces do not work here ({err or 'unshare --user failed'})")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(etc, ignore_errors=True)
    pids, memory = find_parent("pids"), find_parent("memory")
    return Capabilities(bwrap, unshare, pids.usable, memory.usable, root, tuple(why), sized,
                        pids.describe(), memory.describe())


def view_for(caps: Capabilities, scratch: Path, etc: Path, ro_paths: tuple[Path, ...] = (),
             gpu: bool = False) -> View:
    """The view a run gets on this backend (bubblewrap run by root adds its last set-up step: sftl's interpreter,
    and _confine.py copied into the scratch folder beside the snippet)."""
    finish = caps.bwrap is not None and caps.root
    if finish:
        shutil.copyfile(CONFINE, scratch / CONFINE.name)
    return snippet_view(scratch, etc, ro_paths, gpu, finish=finisher() if finish else None)


def sample_view(settings: Settings, caps: Capabilities, gpu: bool = False, python: Path | None = None) -> View:
    """The view a snippet run with `python` (sftl's own interpreter by default; a replay environment shows its
    own instead) gets on this machine, as `sftl doctor` prints it: the folders named are those of a fresh run."""
    scratch, etc = Path(tempfile.mkdtemp(prefix="sftl-run-")), Path(tempfile.mkdtemp(prefix="sftl-view-"))
    try:
        write_etc(etc)
        paths = environment_paths(python or Path(sys.executable), settings.base_env.get("HOME"))
        return view_for(caps, scratch, etc, paths, gpu)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(etc, ignore_errors=True)


def finisher() -> Path:
    """The interpreter that runs _confine.py's last step inside bubblewrap run by root: sftl's own, resolved (run
    with -I -S it needs its installation alone, not sftl's environment)."""
    return Path(sys.executable).resolve()


def confined_command(caps: Capabilities, view: View, argv: list[str], allow_network: bool = False) -> list[str]:
    """`argv` under the machine's backend, in `view`: bubblewrap's options spelled from it, or `unshare` starting
    _confine.py, which builds the same view (the command alone only with --unconfined, where neither works).

    bubblewrap run by root keeps its capabilities for _confine.py's last step (the device binds made read-only),
    which the view then carries: sftl's interpreter read-only and _confine.py copied into the scratch folder."""
    if caps.bwrap:
        cmd = [caps.bwrap, *BWRAP_ARGS]
        if not caps.root:  # bubblewrap maps nobody to the caller and drops every capability itself
            cmd += ["--uid", str(NOBODY), "--gid", str(NOBODY), "--cap-drop", "ALL"]
        if allow_network:
            cmd.append("--share-net")
        cmd.append("--new-session")
        flag = {"ro": "--ro-bind", "rw": "--bind", "node": "--dev-bind"}
        for m in view.mounts:
            if m.kind in flag:
                cmd += [flag[m.kind], m.source, m.path]
            elif m.kind == "tmpfs":
                cmd += (["--size", str(m.size)] if caps.tmpfs_size and m.size else []) + ["--tmpfs", m.path]
            elif m.kind == "symlink":
                cmd += ["--symlink", m.source, m.path]
            else:
                cmd += [f"--{m.kind}", m.path]  # --dir, --proc, --dev
        cmd += ["--remount-ro", "/", "--chdir", view.cwd]  # the root's own folders (/etc, mount points): fixed
        if not caps.root:
            return [*cmd, "--", *argv]
        devices = [*BWRAP_DEVICES, *(m.path for m in view.mounts if m.kind == "node")]
        spec = {"finish": True, "devices": devices, "cwd": view.cwd}
        return [*cmd, "--", str(finisher()), "-I", "-S", str(Path(view.cwd) / CONFINE.name), json.dumps(spec), "--",
                *argv]
    if caps.unshare:
        prefix = [a for a in caps.unshare if not (allow_network and a == "--net")]
        spec = {"scratch": view.cwd, "cwd": view.cwd, "view": view.spec(), "share_net": allow_network}
        return [*prefix, "--", sys.executable, "-I", "-S", str(CONFINE), json.dumps(spec), "--", *argv]
    return argv


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
                       f"an allowlist: the system, a few /etc files and the environment read-only, a fresh writable scratch "
                       f"folder, fresh /tmp and /dev/shm, nothing else ({via})"
                       if backend else "; ".join(caps.why), "" if backend else fix)
    environment = Guard("hidden environment", bool(backend),
                        "only PATH and locale passed, own PID namespace and /proc, run as nobody with no "
                        f"capabilities ({via})" if backend else "other processes' /proc/*/environ readable (no PID namespace)",
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


def escape_control(text: str) -> str:
    """`text` with every control, format and unassigned character but newline and tab written as an escape
    (`\\x1b`, `\\u202e`): no terminal sequence, carriage return or bidirectional override reaches a reader."""
    if text.isprintable():
        return text
    return "".join(c if c in "\n\t" or unicodedata.category(c)[0] != "C" else c.encode("unicode_escape").decode("ascii")
                   for c in text)


def output_tail(text: str, lines: int = SHOWN_LINES, chars: int = SHOWN_CHARS) -> str:
    """What of report code's output is kept and shown anywhere (the store, reports, the terminal): its last
    `lines` lines, at most `chars` characters, control characters escaped. Output is data, not a channel."""
    ending = "\n" if text.endswith("\n") and lines > 0 else ""
    kept = escape_control("\n".join(text.splitlines()[-lines:]) + ending) if lines > 0 else ""
    return kept[-chars:]


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
            # the view shows the interpreter's environment and the installation it was made from, nothing else
            paths = environment_paths(python, self.settings.base_env.get("HOME"))
            return self.run(argv, scratch, gpu=gpu, ro_paths=paths)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def view(self, scratch: Path, etc: Path, gpu: bool = False, ro_paths: tuple[Path, ...] = ()) -> View:
        """The filesystem a run in `scratch` gets (`etc`: the folder of the /etc files written for it)."""
        return view_for(self.caps, scratch, etc, ro_paths, gpu)

    def run(self, argv: list[str], scratch: Path, gpu: bool = False, ro_paths: tuple[Path, ...] = ()) -> SandboxResult:
        """Run `argv` confined in `scratch` (its folder, writable), seeing the system and `ro_paths` read-only."""
        if gpu:  # a GPU run needs a memory cgroup (RLIMIT_AS breaks CUDA): refused where there is none
            check_confinement(self.settings, self.limits, gpu=True, unconfined=self.unconfined, caps=self.caps)
        etc = Path(tempfile.mkdtemp(prefix="sftl-view-"))
        try:
            write_etc(etc)
            cmd = confined_command(self.caps, self.view(scratch, etc, gpu, ro_paths), argv, self.allow_network)
            return self._run(cmd, argv, scratch, gpu)
        finally:
            shutil.rmtree(etc, ignore_errors=True)

    def _run(self, cmd: list[str], argv: list[str], scratch: Path, gpu: bool) -> SandboxResult:
        """Start `cmd` in its cgroups, keep its output's tails within the limits, then end every process it left."""
        limits = self.limits
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
