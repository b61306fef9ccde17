"""The sandbox against real hostile snippets, on every backend this machine gives (bubblewrap, user namespaces).

Each snippet first prints a marker, so "contained" is never "never ran", and leaves a detached
process behind it, so "no process left" is checked on every run. Nothing is mocked: real child
processes, a real loopback listener, real cgroups.
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from sftl.config import load_settings
from sftl.errors import ConfinementError
from sftl.sandbox import Capabilities, Limits, Sandbox, check_confinement, guards, parse_size, probe
from sftl.store import Store

MARK = "MARK-snippet-started"
TOKEN = "ghp_" + "S3cr3t" * 6
PY = Path(sys.executable)
BACKENDS = ("bubblewrap", "unshare")
LIMITS = Limits(timeout=20, memory=1 << 30, max_procs=64, output=2_000_000)


@pytest.fixture(scope="module")
def settings():
    return load_settings(env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "GITHUB_TOKEN": TOKEN,
                              "AWS_SECRET_ACCESS_KEY": "aws-secret-value", "LANG": "C.UTF-8"})


@pytest.fixture(scope="module")
def machine(settings) -> Capabilities:
    return probe(settings)


def only(caps: Capabilities, backend: str) -> Capabilities:
    """This machine's capabilities with one backend alone, or a skip saying why it is not here."""
    if backend == "bubblewrap":
        if not caps.bwrap:
            pytest.skip(f"bubblewrap is not available here: {'; '.join(caps.why)}")
        return caps
    if not caps.unshare:
        pytest.skip(f"user namespaces (unshare) do not work here: {'; '.join(caps.why)}")
    return replace(caps, bwrap=None)


def confined(backend: str, settings, machine: Capabilities, limits: Limits) -> Sandbox:
    """A sandbox on one backend with these limits, or a skip saying which guard this machine cannot give."""
    caps = only(machine, backend)
    missing = [g for g in guards(caps, limits) if not g.held]
    if missing:
        pytest.skip(f"{backend}: this machine cannot give {', '.join(g.name for g in missing)}")
    return Sandbox(settings, limits, caps=caps)


@pytest.fixture(scope="module", params=BACKENDS)
def box(request, settings, machine) -> Sandbox:
    return confined(request.param, settings, machine, LIMITS)


def _tag() -> str:
    """A unique `sleep` argument (about nine days): a process carrying it is one a snippet left behind."""
    return f"7{uuid.uuid4().int % 10**5:05d}.{uuid.uuid4().int % 10**6:06d}"


def _alive(tag: str) -> list[str]:
    alive = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if tag.encode() in cmdline.read_bytes():
                alive.append(cmdline.parent.name)
        except OSError:
            continue
    return alive


def attack(box: Sandbox, code: str, python: Path = PY):
    """Run a hostile snippet: it prints the marker, leaves a detached `sleep` behind, then attacks."""
    tag = _tag()
    prologue = (f"print({MARK!r}, flush=True)\n"
                "import subprocess as _sp\n"
                f"_sp.Popen(['sleep', '{tag}'], start_new_session=True, stdout=_sp.DEVNULL, stderr=_sp.DEVNULL)\n"
                "print('LEFT-A-SLEEPER', flush=True)\n")
    res = box.run_harness(python, prologue + code, ["--framework", "none"])
    assert MARK in res.stdout and "LEFT-A-SLEEPER" in res.stdout, f"the snippet never ran: {res}"
    assert res.left_running == 0
    assert not _alive(tag), "a process of the snippet outlived its run"
    assert res.cgroups and not any(Path(p).exists() for p in res.cgroups)  # the run's cgroups are gone
    return res


# -- the eight attacks ------------------------------------------------------------------------------


def test_writes_outside_the_scratch_folder_never_land(box, tmp_path: Path) -> None:
    home_dir = Path.home() / f".sftl-attack-{uuid.uuid4().hex}"
    home_dir.mkdir()  # a store outside /tmp, as SFTL_HOME usually is (~/.local/share/sftl)
    try:
        with Store(home_dir / "sftl.db"):
            pass
        store = home_dir / "sftl.db"
        victim = tmp_path / "victim.txt"  # an existing file under the host's /tmp
        victim.write_text("untouched")
        before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (store, victim)}
        site = Path(subprocess.run([str(PY), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip())
        new = [Path.home() / f".sftl-attack-{uuid.uuid4().hex}", Path("/tmp") / f"sftl-attack-{uuid.uuid4().hex}",
               site / f"sitecustomize_{uuid.uuid4().hex}.py", Path("/etc") / f"sftl-attack-{uuid.uuid4().hex}",
               home_dir / "planted.txt"]
        targets = [*new, store, victim]
        code = (
            "import os\n"
            f"for t in {[str(t) for t in targets]!r}:\n"
            "    try:\n"
            "        with open(t, 'ab') as fh:\n"
            "            fh.write(b'pwned')\n"
            "        print('WROTE', t)\n"
            "    except OSError as e:\n"
            "        print('DENIED', t, e.errno)\n"
            "open('inside.txt', 'w').write('ok')\n"
            "print('SCRATCH-WRITABLE')\n"
        )
        res = attack(box, code)
        for t in targets:
            assert f"WROTE {t}" in res.stdout or f"DENIED {t}" in res.stdout, f"{t} was not tried"
        for t in (new[2], new[3]):  # the system and the environment: read-only (EROFS)
            assert f"DENIED {t} 30" in res.stdout
        for t in (new[0], new[4], store):  # the home and the store in it: hidden (ENOENT), else read-only
            assert f"DENIED {t} 2" in res.stdout or f"DENIED {t} 30" in res.stdout
        assert "SCRATCH-WRITABLE" in res.stdout
        assert not [t for t in new if t.exists()], "a file was written outside the scratch folder"
        assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (store, victim)} == before
    finally:
        for path in sorted(home_dir.rglob("*"), reverse=True):
            path.unlink()
        home_dir.rmdir()


def test_credentials_stay_out_of_reach(box) -> None:
    # a credential file of a name no list foresees, in the caller's home
    secret = Path.home() / f".sftl-attack-credentials-{uuid.uuid4().hex}"
    secret.write_text(TOKEN)
    secret.chmod(0o600)
    # a process of the caller holding the token in its environment, as sftl itself would
    caller = subprocess.Popen([str(PY), "-c", "import sys; print('READY', flush=True); sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**os.environ, "GITHUB_TOKEN": TOKEN})
    try:
        assert caller.stdout is not None and caller.stdout.readline() == b"READY\n"  # it has started
        assert TOKEN.encode() in Path(f"/proc/{caller.pid}/environ").read_bytes()  # readable when unconfined
        code = (
            "import os, glob\n"
            "print('ENV', sorted(os.environ))\n"
            "print('TOKEN=' + str(os.environ.get('GITHUB_TOKEN')))\n"
            f"paths = ['/proc/1/environ', '/proc/{caller.pid}/environ', '/proc/%d/environ' % os.getppid()]\n"
            "for p in paths + glob.glob('/proc/*/environ'):\n"
            "    try:\n"
            "        data = open(p, 'rb').read()\n"
            "    except OSError as e:\n"
            "        print('UNREADABLE', p, e.errno)\n"
            "        continue\n"
            f"    if b'{TOKEN}' in data or b'aws-secret-value' in data:\n"
            "        print('LEAK', p)\n"
            "try:\n"
            f"    print('READ', open({str(secret)!r}).read())\n"
            "except OSError as e:\n"
            "    print('NO-FILE', e.errno)\n"
            "try:\n"
            "    print('SHADOW-BYTES', len(open('/etc/shadow', 'rb').read()))\n"
            "except OSError as e:\n"
            "    print('SHADOW-UNREADABLE', e.errno)\n"
            "print('SCANNED')\n"
        )
        res = attack(box, code)
    finally:
        caller.stdin.close()  # type: ignore[union-attr]
        caller.wait()
        caller.stdout.close()  # type: ignore[union-attr]
        secret.unlink()
    assert "SCANNED" in res.stdout and "TOKEN=None" in res.stdout and "NO-FILE" in res.stdout
    assert "SHADOW-BYTES 0" in res.stdout or "SHADOW-UNREADABLE" in res.stdout  # the password hashes
    assert "LEAK" not in res.stdout and TOKEN not in res.stdout + res.stderr
    assert "aws-secret-value" not in res.stdout and "AWS_SECRET_ACCESS_KEY" not in res.stdout


def _listener() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    return server


def _connections(server: socket.socket) -> int:
    """Connections the kernel completed to the listener (its backlog holds them whether or not accepted)."""
    count = 0
    while True:
        try:
            conn, _ = server.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


def test_no_network_even_to_a_loopback_listener(box) -> None:
    server = _listener()
    port = server.getsockname()[1]
    code = (
        "import socket\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=5).sendall(b'leak')\n"
        "    print('CONNECTED')\n"
        "except OSError as e:\n"
        "    print('NO-ROUTE', e.errno)\n"
    )
    try:
        res = attack(box, code)
        assert "NO-ROUTE" in res.stdout and "CONNECTED" not in res.stdout
        assert _connections(server) == 0
        # the same snippet reaches the listener once the network is allowed: the test can fail
        opened = Sandbox(box.settings, box.limits, allow_network=True, caps=box.caps)
        res = attack(opened, code)
        assert "CONNECTED" in res.stdout and _connections(server) == 1
    finally:
        server.close()


def test_no_service_socket_under_run(box) -> None:
    """A service's Unix socket (a container engine's, the system bus's): a read-only mount does not stop a connect."""
    run = Path("/run")
    if not os.access(run, os.W_OK):
        pytest.skip("/run is not writable by this test: no service socket can be planted there")
    path = run / f"sftl-test-{uuid.uuid4().hex[:12]}.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(4)
    server.setblocking(False)
    code = (
        "import socket\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        f"    s.connect({str(path)!r})\n"
        "    print('CONNECTED')\n"
        "except OSError as e:\n"
        "    print('NO-SOCKET', e.errno)\n"
    )
    try:
        res = attack(box, code)
        assert "NO-SOCKET" in res.stdout and "CONNECTED" not in res.stdout and _connections(server) == 0
    finally:
        server.close()
        path.unlink()


def test_a_fork_bomb_is_stopped_at_the_process_cap(box) -> None:
    code = ("import os\n"
            "while True:\n"
            "    try:\n"
            "        os.fork()\n"
            "    except OSError:\n"
            "        print('FORK-REFUSED', flush=True)\n"
            "        os._exit(0)\n")
    res = attack(box, code)
    if box.caps.pids_cgroup:
        assert res.limit == "processes"  # the pids cgroup's cap was reached, and the run killed there
    else:  # a non-root user: RLIMIT_NPROC refuses the fork
        assert "FORK-REFUSED" in res.stdout
    assert res.seconds < box.limits.timeout  # stopped at the cap, not at the timeout


def test_allocating_12_gb_is_stopped_at_the_memory_cap(box) -> None:
    code = (
        "chunks = []\n"
        "for i in range(12 * 16):\n"  # 12 GB in 64 MB steps, every page touched
        "    chunks.append(bytearray(64 << 20))\n"
        "    if i % 4 == 3: print('GOT', (i + 1) * 64, 'MB', flush=True)\n"
        "print('ALLOCATED-12-GB')\n"
    )
    res = attack(box, code)
    assert "ALLOCATED-12-GB" not in res.stdout
    got = [int(line.split()[1]) for line in res.stdout.splitlines() if line.startswith("GOT ")]
    assert got and max(got) <= box.limits.memory >> 20  # it ran, and never held more than the cap
    assert res.limit == "memory" or (res.result or {}).get("exception") == "MemoryError"


def test_spinning_forever_is_killed_at_the_timeout(box) -> None:
    quick = Sandbox(box.settings, replace(box.limits, timeout=2), caps=box.caps)
    res = attack(quick, "while True:\n    pass\n")
    assert res.limit == "timeout" and 2 <= res.seconds < 2 + 3


def test_flooding_stdout_is_cut_at_the_output_cap(box) -> None:
    res = attack(box, "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(chunk)\n")
    assert res.limit == "output" and box.limits.output < res.output_bytes < box.limits.output + (1 << 21)
    assert res.seconds < box.limits.timeout
    assert "[... output cut ...]" in res.stdout


def test_escapes_fail_and_nothing_outlives_the_run(box) -> None:
    daemon = _tag()
    code = (
        "import ctypes, os, signal\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        # make the system writable again
        "rc = libc.mount(None, b'/', None, ctypes.c_ulong(32 | 4096), None)\n"  # MS_REMOUNT | MS_BIND, read-write
        "print('REMOUNT', rc, ctypes.get_errno())\n"
        "try:\n"
        "    open('/usr/sftl-attack-after-remount', 'w')\n"
        "    print('REMOUNTED-WRITABLE')\n"
        "except OSError as e:\n"
        "    print('STILL-READ-ONLY', e.errno)\n"
        # leave the run's cgroups for their parents
        "for path in ('/sys/fs/cgroup/pids/cgroup.procs', '/sys/fs/cgroup/memory/cgroup.procs', '/sys/fs/cgroup/cgroup.procs'):\n"
        "    try:\n"
        "        open(path, 'w').write(str(os.getpid()))\n"
        "        print('LEFT-CGROUP', path)\n"
        "    except OSError as e:\n"
        "        print('STAYED', path, e.errno)\n"
        # the host's device nodes, which root owns: chmod to the mode they have (harmless if it ever passed)
        "for node in ('/dev/null', '/dev/full'):\n"
        "    try:\n"
        "        os.chmod(node, 0o666)\n"
        "        print('CHMODDED', node)\n"
        "    except OSError as e:\n"
        "        print('NODE-KEPT', node, e.errno)\n"
        "open('/dev/null', 'w').write('still usable')\n"
        "print('NULL-WRITABLE')\n"
        # signal the test process (sftl's side)
        "try:\n"
        f"    os.kill({os.getpid()}, 0)\n"
        "    print('SEES-THE-CALLER')\n"
        "except OSError as e:\n"
        "    print('CALLER-UNSEEN', e.errno)\n"
        # a double-forked daemon, the classic way to outlive a parent
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execvp('sleep', ['sleep', '{daemon}'])\n"
        "    os._exit(0)\n"
        "print('DAEMONIZED', flush=True)\n"
    )
    res = attack(box, code)
    assert "DAEMONIZED" in res.stdout and "STILL-READ-ONLY" in res.stdout
    assert "REMOUNTED-WRITABLE" not in res.stdout and not Path("/usr/sftl-attack-after-remount").exists()
    assert "LEFT-CGROUP" not in res.stdout and "STAYED" in res.stdout
    assert "SEES-THE-CALLER" not in res.stdout and "CALLER-UNSEEN" in res.stdout
    assert "CHMODDED" not in res.stdout and res.stdout.count("NODE-KEPT") == 2 and "NULL-WRITABLE" in res.stdout
    assert not _alive(daemon)


# -- the rest of the sandbox's contract ------------------------------------------------------------


def test_a_plain_snippet_runs_and_reports(box) -> None:
    res = attack(box, "import sys\nprint(sys.version_info[:2])\nraise KeyError('k')")
    assert res.limit is None and res.result["status"] == "error"
    assert (res.result["exception"], res.result["message"]) == ("KeyError", "'k'")
    assert res.result["frames"][-1]["line"] == 7 and res.result["frames"][-1]["path"].endswith("snippet.py")
    assert MARK in res.result["stdout_tail"] and res.result["seconds"] >= 0 and res.result["device"]["requested"] == "cpu"
    assert res.containment.backend in BACKENDS and not res.containment.degraded


def test_a_signal_death_reads_as_the_signal(box) -> None:
    res = attack(box, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    assert res.returncode == -11 and res.result is None


@pytest.mark.skipif(not list((Path.home() / ".pyenv" / "versions").glob("3.6.*")), reason="needs pyenv's Python 3.6")
def test_the_harness_runs_under_python_3_6(box) -> None:
    py36 = sorted((Path.home() / ".pyenv" / "versions").glob("3.6.*"))[-1] / "bin" / "python"
    res = box.run_harness(py36, f"print({MARK!r})\nimport sys\nv = sys.version_info[1]\nnone = None\nnone.x\n",
                          ["--framework", "none"])
    assert MARK in res.stdout and res.result["python"].startswith("3.6.")
    assert res.result["exception"] == "AttributeError" and res.result["values"] == []


def test_an_environment_under_tmp_stays_visible(box, tmp_path: Path) -> None:
    """The sandbox mounts a fresh /tmp; an interpreter living under /tmp is bound back read-only."""
    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    res = box.run_harness(env / "bin" / "python", f"print({MARK!r})\nimport sys\nprint(sys.prefix)\n",
                          ["--framework", "none"])
    assert MARK in res.stdout and str(env) in res.stdout and res.result["status"] == "ok"


# -- refusal ---------------------------------------------------------------------------------------


def test_without_bubblewrap_or_unshare_it_refuses_and_says_what_provides_them(settings, tmp_path: Path) -> None:
    bare = load_settings(env={"PATH": str(tmp_path), "HOME": str(Path.home())})  # a PATH holding neither
    caps = probe(bare)
    assert caps.backend is None
    with pytest.raises(ConfinementError) as refused:
        Sandbox(bare, LIMITS, caps=caps)
    line = str(refused.value)
    assert "\n" not in line and "no network, read-only filesystem, hidden environment" in line
    assert "install bubblewrap" in line and "--unconfined" in line
    # the opt-in runs it, and says so in every run's record
    opened = Sandbox(bare, LIMITS, caps=caps, unconfined=True).describe()
    assert opened.unconfined and opened.backend == "none"
    assert any(d.startswith("read-only filesystem MISSING") for d in opened.degraded)


def test_root_without_a_pids_cgroup_is_refused_with_the_command_that_gives_one(settings, machine) -> None:
    caps = replace(machine, bwrap=machine.bwrap or None, pids_cgroup=False, root=True,
                   pids_how="no writable pids cgroup", unshare=machine.unshare or ("unshare",))
    with pytest.raises(ConfinementError, match=r"missing process cap .*`(echo \+pids|mkdir -p .*pids)"):
        check_confinement(settings, LIMITS, caps=caps)


def test_a_gpu_run_without_a_memory_cgroup_is_refused(settings, machine) -> None:
    caps = replace(machine, memory_cgroup=False, memory_how="no writable memory cgroup",
                   unshare=machine.unshare or ("unshare",))
    assert check_confinement(settings, LIMITS, gpu=False, caps=caps) is caps  # CPU runs: RLIMIT_AS caps them
    with pytest.raises(ConfinementError, match="missing memory cap"):
        check_confinement(settings, LIMITS, gpu=True, caps=caps)


def test_sizes() -> None:
    assert parse_size("4G") == 4 << 30 and parse_size("512MiB") == 512 << 20 and parse_size("10M") == 10 << 20
    with pytest.raises(Exception, match="cannot read a size"):
        parse_size("lots")
