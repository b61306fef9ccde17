"""A cgroup (v1 or v2) per sandboxed run: its process and memory caps, whether they were hit, and the kill of all it holds."""

from __future__ import annotations

import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
STALE_AFTER = 60.0  # seconds: an empty run cgroup this old was left by an sftl killed before cleaning up


@dataclass(frozen=True)
class Parent:
    """Where this process may create child cgroups for `controller`, or why it may not."""

    controller: str
    path: Path | None
    version: int  # 1 or 2; 0 when there is none
    why: str = ""

    @property
    def usable(self) -> bool:
        return self.path is not None

    def describe(self) -> str:
        return f"cgroup v{self.version} {self.controller} ({self.path})" if self.path else self.why


def _own_paths() -> dict[str, str]:
    """controller (or '' for the v2 hierarchy) -> this process's cgroup path, from /proc/self/cgroup."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return {}
    own: dict[str, str] = {}
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            for name in parts[1].split(",") if parts[1] else [""]:
                own[name] = parts[2].lstrip("/")
    return own


def _v2_mount() -> Path | None:
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            if right.split()[:1] == ["cgroup2"]:
                return Path(left.split()[4])
    except (OSError, IndexError):
        return None
    return None


def find_parent(controller: str) -> Parent:
    """The writable cgroup under which runs get a `controller` limit: v1 first, else v2 with it delegated."""
    own = _own_paths()
    if controller in own:
        path = CGROUP_ROOT / controller / own[controller]
        if path.is_dir() and os.access(path, os.W_OK):
            return Parent(controller, path, 1)
        return Parent(controller, None, 0, f"cgroup v1 {controller} hierarchy {path} is not writable")
    mount = _v2_mount()
    if mount is None or "" not in own:
        return Parent(controller, None, 0, f"no {controller} cgroup (neither a v1 hierarchy nor cgroup v2)")
    own_path = mount / own[""]
    try:
        if controller not in (own_path / "cgroup.controllers").read_text().split():
            return Parent(controller, None, 0, f"cgroup v2 at {own_path} does not offer the {controller} controller")
    except OSError as exc:
        return Parent(controller, None, 0, f"cgroup v2 at {own_path} cannot be read ({exc.strerror or exc})")
    # the nearest cgroup, ours or an ancestor, that already hands the controller to its children (ours cannot
    # start to: the kernel lets no cgroup holding processes enable a controller for children)
    for path in (own_path, *own_path.parents):
        if path == mount.parent:
            break
        try:
            delegated = controller in (path / "cgroup.subtree_control").read_text().split()
        except OSError:
            continue
        if delegated and os.access(path, os.W_OK):
            return Parent(controller, path, 2)
    # enabling it is the administrator's call (`sftl doctor` prints the command): probing changes nothing
    return Parent(controller, None, 0, f"cgroup v2 at {own_path}: no writable cgroup delegates {controller} to children")


class RunCgroup:
    """A child cgroup for one run: created with its limit, joined by the child, swept of processes and removed."""

    def __init__(self, parent: Parent, limit: int) -> None:
        if parent.path is None:
            raise OSError(parent.why)
        self.parent = parent
        sweep(parent.path)
        self.path = parent.path / f"sftl-{int(time.time())}-{uuid.uuid4().hex[:8]}"
        self.path.mkdir()
        try:
            for name, value in self._settings(limit):
                if name.endswith("?"):  # optional: a kernel without swap accounting has no such file
                    if not (self.path / name[:-1]).exists():
                        continue
                    name = name[:-1]
                (self.path / name).write_text(value)
        except OSError:
            self.remove()
            raise

    def _settings(self, limit: int) -> list[tuple[str, str]]:
        v1 = self.parent.version == 1
        if self.parent.controller == "pids":
            return [("pids.max", str(limit))]
        if v1:  # swap counted with memory where the kernel accounts it, or the cap only moves the pages out
            return [("memory.limit_in_bytes", str(limit)), ("memory.memsw.limit_in_bytes?", str(limit))]
        return [("memory.max", str(limit)), ("memory.swap.max?", "0")]

    @property
    def procs_file(self) -> Path:
        return self.path / "cgroup.procs"

    def read(self, name: str) -> str:
        try:
            return (self.path / name).read_text()
        except OSError:
            return ""

    def hit(self) -> bool:
        """Whether the run reached the cap: a fork refused at pids.max, or a process killed for memory."""
        if self.parent.controller == "pids":
            return _field(self.read("pids.events"), "max") > 0
        if self.parent.version == 1:  # oom_kill is counted since Linux 4.13; before, any failed charge
            control = self.read("memory.oom_control")
            if "oom_kill " in control:
                return _field(control, "oom_kill") > 0
            return self.read("memory.failcnt").strip() not in ("", "0")
        return _field(self.read("memory.events"), "oom_kill") > 0

    def pids(self) -> list[int]:
        return [int(p) for p in self.read("cgroup.procs").split()]

    def kill_all(self, deadline: float = 3.0) -> int:
        """SIGKILL every process in the cgroup until none is left; returns how many survived."""
        if (self.path / "cgroup.kill").exists():
            try:
                (self.path / "cgroup.kill").write_text("1")
            except OSError:
                pass
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
            time.sleep(0.01)  # killed processes leave the cgroup asynchronously: poll until it is empty

    def remove(self) -> None:
        for _ in range(100):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)  # the last process is still leaving


def sweep(parent: Path, age: float = STALE_AFTER) -> None:
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


def _field(text: str, key: str) -> int:
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key:
            try:
                return int(parts[1])
            except ValueError:
                return 0
    return 0
