"""Started by sftl.sandbox inside fresh namespaces (`unshare`): builds bubblewrap's read-only view, then runs the command.

Stdlib only, run with sftl's own interpreter as the first process of a new user, mount, PID and
network namespace (`unshare --user --map-root-user --mount --pid --fork --net ...`), before any
untrusted code. It

1. builds the view sftl.sandbox gives it (`{"view": [[kind, path, source, size], ...]}`, the same
   list bubblewrap's options are spelled from) in a new, empty root: /proc of the new PID
   namespace (its /proc/sys read-only), a minimal /dev (null, zero, full, random, urandom, tty;
   the GPU's nodes when asked) made read-only, fresh size-capped tmpfs on /tmp and /dev/shm, the
   system folders and the environment bound read-only, a few files of /etc, the scratch folder
   writable; nothing else of the host exists there, and the root itself is read-only;
2. pivots into the new root and detaches the old one, so nothing of the writable system stays
   reachable;
3. forks: the child enters one more user namespace, where it is nobody (65534: no id is mapped)
   and holds no capability over the mounts or the network set up here (so it can neither remount
   nor escape), empties its bounding set, sets no-new-privileges and execs the command; this
   process stays PID 1 of the namespace, reaps, and exits with the child's status (128 + N for a
   signal, as bubblewrap does). When it exits the kernel kills every process left in the namespace.

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
PR_SET_NO_NEW_PRIVS, PR_SET_DUMPABLE, PR_SET_PDEATHSIG, PR_CAPBSET_DROP = 38, 4, 1, 24
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
    """The new root at `new`: an empty read-only folder holding the view's mounts alone, in the view's order."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing done here propagates back to the caller's namespace
    os.makedirs(new, exist_ok=True)
    mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    entries = spec["view"]
    # /dev is made read-only once its last node is in: writable, its binds let a root caller's snippet chmod
    # the host's /dev/null (a device still opens read-write on a read-only mount)
    last_dev = max((i for i, e in enumerate(entries) if e[0] in ("dev", "node")), default=-1)
    for i, (kind, path, source, size) in enumerate(entries):
        target = new + path
        if kind in ("ro", "rw", "node"):
            if not os.path.exists(source):
                raise ConfineError(f"{source}: no such file or folder to show at {path}")
            _make_target(target, source)
            bind(source, target, read_only=kind == "ro", recursive=kind == "ro")
        elif kind == "tmpfs":  # RAM-backed and capped: a snippet cannot fill memory there
            os.makedirs(target, exist_ok=True)
            mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777" + (f",size={size}" if size else ""))
        elif kind == "symlink":
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.symlink(source, target)
        elif kind == "dir":
            os.makedirs(target, exist_ok=True)
        elif kind == "proc":
            make_proc(target)
        elif kind == "dev":
            make_dev(target)
        else:
            raise ConfineError(f"unknown kind of mount {kind!r} at {path}")
        if i == last_dev:
            remount_read_only(new + "/dev")
    # the root's own folders (/etc, the mount points) fixed: nothing can be planted there
    mount(None, new, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def make_proc(target: str) -> None:
    """/proc of the new PID namespace: only the snippet's own processes (no caller's environ to read)."""
    os.makedirs(target, exist_ok=True)
    mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name in _PROC_READ_ONLY:
        path = f"{target}/{name}"
        if os.path.exists(path):
            bind(path, path, read_only=True)


def make_dev(dev: str) -> None:
    """/dev: the harmless character devices only (the host's /dev has its disks), as bwrap --dev does."""
    os.makedirs(dev, exist_ok=True)
    mount("tmpfs", dev, "tmpfs", MS_NOSUID, "mode=0755")
    for name in _DEVICES:
        node = f"/dev/{name}"
        if os.path.exists(node):
            _make_target(f"{dev}/{name}", node)
            bind(node, f"{dev}/{name}", read_only=False)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{dev}/{name}")
    os.makedirs(dev + "/shm")


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
    # no id is mapped there: the command is nobody (65534); the capabilities it holds over that empty namespace
    # are gone from the bounding set too, and the exec of a non-root id leaves none
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            if ctypes.get_errno() == errno.EINVAL and cap > 0:
                break  # past the last capability this kernel knows
            _check(-1, f"prctl(CAPBSET_DROP, {cap})")
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
