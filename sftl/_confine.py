"""Started by sftl.sandbox inside fresh namespaces (`unshare`): builds bubblewrap's read-only view, then runs the command.

Stdlib only, run with sftl's own interpreter as the first process of a new user, mount, PID and
network namespace (`unshare --user --map-root-user --mount --pid --fork --net ...`), before any
untrusted code. It

1. binds the whole system read-only into a new root (every mount under `/`, one by one, as
   `bwrap --ro-bind / /` does), with a fresh /proc of the new PID namespace (its /proc/sys
   read-only), a minimal /dev (null, zero, full, random, urandom, tty; the GPU's nodes when
   asked), fresh size-capped tmpfs on /tmp and /dev/shm, the homes and /run (services' sockets)
   hidden under empty read-only tmpfs, /etc/shadow and the host's SSH keys masked (credential files
   among what is bound back hidden too);
2. binds the scratch folder writable at its own path, and the read-only paths that lived under
   /tmp or the home (an environment there) back in;
3. pivots into the new root and detaches the old one, so nothing of the writable system stays
   reachable;
4. forks: the child enters one more user namespace, where it holds no capability over the mounts
   or the network set up here (so it can neither remount nor escape), sets no-new-privileges and
   execs the command; this process stays PID 1 of the namespace, reaps, and exits with the child's
   status (128 + N for a signal, as bubblewrap does). When it exits the kernel kills every process
   left in the namespace.

Inside bubblewrap run by root (`{"finish": true}`) it does only the last step, after making
bubblewrap's device binds read-only: writable, they let the snippet, whose files' owner is root,
chmod the host's /dev/null.

Any failure before the exec ends the run with exit status 125 and one line on stderr: the
command never runs half-confined.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import platform
import socket
import struct
import sys
from typing import Any

FAILED = 125  # exit status when confinement could not be set up; the command did not run

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME, MS_STRICTATIME = 1024, 2048, 1 << 21, 1 << 24
MNT_DETACH = 2
CLONE_NEWUSER = 0x10000000
PR_SET_NO_NEW_PRIVS, PR_SET_DUMPABLE, PR_SET_PDEATHSIG = 38, 4, 1
SIGKILL = 9
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203, "s390x": 217}
# per-mount options as /proc/self/mountinfo spells them; kept on the read-only remount, since a user
# namespace may not drop the ones the parent namespace locked
_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
          "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME, "strictatime": MS_STRICTATIME}
_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
_PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus")

_libc = ctypes.CDLL(None, use_errno=True)


class ConfineError(Exception):
    """A step of the set-up failed: the run is abandoned."""


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise ConfineError(f"{what}: {os.strerror(code)} (errno {errno.errorcode.get(code, code)})")


def _bytes(text: str | None) -> bytes | None:
    return text.encode() if text is not None else None


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(_bytes(source), _bytes(target), _bytes(fstype), ctypes.c_ulong(flags), _bytes(data)),
           f"mount {source or ''} on {target}")


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1:i + 4].isdigit() and len(field[i + 1:i + 4]) == 3:
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mounts_under(root: str) -> list[tuple[str, int]]:
    """(mount point, its per-mount flags) of every mount at or below `root`, parents first."""
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            fields = line.split()
            point = _unescape(fields[4])
            if point == root or point.startswith(root.rstrip("/") + "/"):
                flags = 0
                for opt in fields[5].split(","):
                    flags |= _FLAGS.get(opt, 0)
                found.append((point, flags))
    return found


def remount_read_only(root: str) -> None:
    """Every mount at or below `root` read-only; one that refuses is detached, never left writable."""
    for point, flags in mounts_under(root):
        try:
            mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
        except ConfineError:
            if not os.path.ismount(point):
                continue  # covered by a later mount: unreachable, and made read-only before it was covered
            if _libc.umount2(point.encode(), MNT_DETACH) != 0:
                raise
    writable = [p for p, _ in mounts_under(root) if not _read_only(p)]
    if writable:
        raise ConfineError(f"still writable after the read-only remount: {', '.join(writable[:3])}")


def _read_only(point: str) -> bool:
    try:
        return bool(os.statvfs(point).f_flag & os.ST_RDONLY)
    except OSError:
        return True  # gone (detached under a parent that was): nothing to write to


def bind(source: str, target: str, read_only: bool, recursive: bool = False) -> None:
    mount(source, target, None, MS_BIND | (MS_REC if recursive else 0))
    if read_only:
        remount_read_only(target)


def _make_target(path: str, like: str) -> None:
    """A mount point for `like` (a folder or a file) at `path`."""
    if os.path.isdir(like):
        os.makedirs(path, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if not os.path.lexists(path):
            with open(path, "w"):
                pass


def build_root(spec: dict[str, Any], new: str) -> None:
    """The new root at `new`: the system read-only, fresh /proc, /dev, /tmp, /dev/shm, the scratch writable."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing done here propagates back to the caller's namespace
    os.makedirs(new, exist_ok=True)
    bind("/", new, read_only=True, recursive=True)
    size = int(spec.get("tmpfs_size") or 0)
    opts = f"size={size}" if size else None
    # /proc of the new PID namespace: only the snippet's own processes (no caller's environ to read)
    mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name in _PROC_READ_ONLY:
        path = f"{new}/proc/{name}"
        if os.path.exists(path):
            bind(path, path, read_only=True)
    # /dev: the harmless character devices only (the host's /dev has its disks), as bwrap --dev does
    dev = new + "/dev"
    mount("tmpfs", dev, "tmpfs", MS_NOSUID, "mode=0755")
    nodes = [f"/dev/{n}" for n in _DEVICES] + list(spec.get("devices") or [])
    for node in nodes:
        if os.path.exists(node):
            _make_target(new + node, node)
            bind(node, new + node, read_only=False)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{dev}/{name}")
    os.makedirs(dev + "/shm")
    # the node list fixed, and the nodes' binds read-only too (still usable: a device opens read-write on a
    # read-only mount): writable, they let a root caller's snippet chmod the host's /dev/null
    remount_read_only(dev)
    for point in ("/tmp", "/dev/shm"):  # RAM-backed and capped: a snippet cannot fill memory there
        mount("tmpfs", new + point, "tmpfs", MS_NOSUID | MS_NODEV, ",".join(filter(None, ("mode=1777", opts))))
    hidden = [h for h in spec.get("hide") or () if os.path.isdir(h) and not _covered(h)]
    for folder in hidden:  # the caller's home (its dotfiles hold tokens no list of names can cover) and /run
        mount("tmpfs", new + folder, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    for path in spec.get("read_only") or ():  # an environment under /tmp or the home, hidden above
        if os.path.exists(path) and _covered(path, hidden):
            _make_target(new + path, path)
            bind(path, new + path, read_only=True, recursive=True)
    for path in spec.get("mask") or ():  # system files holding secrets root could read
        if os.path.isfile(new + path):
            bind("/dev/null", new + path, read_only=True)
    home: str = spec.get("home") or ""
    for rel in spec.get("secrets") or () if home else ():  # those still in sight through a path bound back
        path = os.path.join(home, rel)
        if not os.path.lexists(new + path) or os.path.islink(path):
            continue
        if os.path.isdir(path):
            mount("tmpfs", new + path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k,mode=0755")
        else:
            bind("/dev/null", new + path, read_only=True)
    scratch = spec["scratch"]
    _make_target(new + scratch, scratch)
    bind(scratch, new + scratch, read_only=False)
    for folder in hidden:  # empty and read-only: nothing can be planted there
        mount(None, new + folder, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _covered(path: str, hidden: list[str] | tuple[str, ...] = ()) -> bool:
    """Whether `path` lies under a fresh mount (/tmp, /dev/shm, a hidden folder) and must be bound back to be seen."""
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in ("/tmp", "/dev/shm", *hidden))


def pivot(new: str) -> None:
    """Make `new` the root and detach the old one: no path leads back to the writable system."""
    number = _PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise ConfineError(f"pivot_root: unknown system call number on {platform.machine()}")
    os.chdir(new)
    _check(_libc.syscall(ctypes.c_long(number), b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "detach the old root")
    os.chdir("/")


def loopback_up() -> None:
    """Bring up `lo` of the new network namespace, as bwrap does: local servers inside work, nothing leaves."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, siocgifflags, req))[1]
        fcntl.ioctl(s, siocsifflags, struct.pack("16sH14x", b"lo", flags | iff_up))


def run_child(argv: list[str], cwd: str) -> None:
    """In the forked child: give up every capability over this namespace, then exec the command."""
    _check(_libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
    _check(_libc.unshare(CLONE_NEWUSER), "enter a user namespace without capabilities")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
    os.chdir(cwd)
    os.execv(argv[0], argv)


def reap(child: int) -> int:
    """Wait as PID 1 (reaping orphans too) until `child` ends; its status as a shell reports it."""
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return FAILED
        if pid == child:
            return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def finish(spec: dict[str, Any]) -> None:
    """Inside bubblewrap run by root: its device binds read-only (still usable), before the capabilities go."""
    for node in spec.get("devices") or ():
        if os.path.exists(node):
            remount_read_only(node)


def main(args: list[str]) -> int:
    if len(args) < 3 or args[1] != "--":
        sys.stderr.write("usage: _confine.py SPEC-JSON -- COMMAND...\n")
        return FAILED
    spec, argv = json.loads(args[0]), args[2:]
    try:
        if spec.get("finish"):  # bubblewrap built the view; only the device nodes and the capabilities remain
            finish(spec)
        else:
            new = spec["scratch"] + "/.root"
            build_root(spec, new)
            pivot(new)
            os.rmdir(spec["scratch"] + "/.root")  # only the mount point was there; the snippet's folder stays clean
            if not spec.get("share_net"):
                loopback_up()
        _check(_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(DUMPABLE)")
    except (ConfineError, OSError, ValueError, KeyError) as exc:
        sys.stderr.write(f"sftl-confine: {exc}; the command was not run\n")
        return FAILED
    child = os.fork()
    if child == 0:
        try:
            run_child(argv, spec.get("cwd") or spec["scratch"])
        except (ConfineError, OSError) as exc:
            sys.stderr.write(f"sftl-confine: {exc}; the command was not run\n")
        os._exit(FAILED)
    return reap(child)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
