"""The sandbox with real hostile snippets: each prints a marker first, so 'contained' is never 'never ran'."""

from __future__ import annotations

import socket
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from sftl.config import load_settings
from sftl.errors import SandboxError
from sftl.sandbox import Capabilities, Limits, Sandbox, parse_size, probe

MARK = "MARK-snippet-started"
TOKEN = "ghp_" + "S3cr3t" * 6
PY = Path(sys.executable)


@pytest.fixture(scope="module")
def settings():
    return load_settings(env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "GITHUB_TOKEN": TOKEN,
                              "AWS_SECRET_ACCESS_KEY": "aws-secret-value", "LANG": "C.UTF-8"})


@pytest.fixture(scope="module")
def box(settings):
    caps = probe(settings)
    if not (caps.bwrap or caps.unshare):
        pytest.skip("neither bubblewrap nor unshare --net works here: the sandbox refuses (tested below)")
    return Sandbox(settings, Limits(timeout=6, memory=2 << 30, max_procs=64, output=2_000_000), caps=caps)


def _run(box: Sandbox, code: str):
    res = box.run_harness(PY, f"print({MARK!r}, flush=True)\n" + code, ["--framework", "none"])
    assert MARK in res.stdout, f"the snippet never ran: {res}"
    assert res.left_running == 0
    return res


def test_a_plain_snippet_runs_and_reports(box) -> None:
    res = _run(box, "import sys\nprint(sys.version_info[:2])\nraise KeyError('k')")
    assert res.limit is None and res.result["status"] == "error"
    assert (res.result["exception"], res.result["message"]) == ("KeyError", "'k'")
    assert res.result["frames"][-1]["line"] == 4 and res.result["frames"][-1]["path"].endswith("snippet.py")
    assert MARK in res.result["stdout_tail"] and res.result["seconds"] >= 0 and res.result["device"]["requested"] == "cpu"


def test_no_network_even_to_a_local_server(box) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(5)
    port = server.getsockname()[1]
    accepted: list[object] = []

    def accept() -> None:
        try:
            accepted.append(server.accept())
        except OSError:
            pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=3).sendall(b'leak')\nprint('CONNECTED')"
    res = _run(box, code)
    assert "CONNECTED" not in res.stdout and res.result["exception"] in ("ConnectionRefusedError", "OSError", "TimeoutError")
    # the same snippet does connect when the network is allowed: the test can fail
    if box.caps.bwrap:
        open_box = Sandbox(box.settings, box.limits, allow_network=True, caps=box.caps)
        res = _run(open_box, code)
        assert "CONNECTED" in res.stdout
        thread.join(5)
        assert accepted
        for conn, _ in accepted:  # type: ignore[misc]
            conn.close()
    server.close()


def test_secrets_never_reach_the_snippet(box) -> None:
    code = (
        "import os, glob\n"
        "print(sorted(os.environ))\n"
        "print('TOKEN=' + str(os.environ.get('GITHUB_TOKEN')))\n"
        "for p in glob.glob('/proc/*/environ'):\n"
        "    try:\n"
        "        data = open(p, 'rb').read()\n"
        "    except OSError:\n"
        "        continue\n"
        f"    if b'{TOKEN}' in data: print('LEAK', p)\n"
        "print('HOME=' + os.environ['HOME'])\n"
    )
    res = _run(box, code)
    assert "TOKEN=None" in res.stdout and TOKEN not in res.stdout and "LEAK" not in res.stdout
    assert "aws-secret-value" not in res.stdout and "AWS_SECRET_ACCESS_KEY" not in res.stdout
    assert "HOME=/tmp/sftl-run-" in res.stdout or "/sftl-run-" in res.stdout


def test_fork_bomb_is_capped_and_nothing_is_left(box) -> None:
    if box.caps.root and not box.caps.pids_cgroup:
        pytest.skip("root without a writable pids cgroup: RLIMIT_NPROC does not bind root, nothing caps a fork bomb")
    code = "import os\nwhile True:\n    os.fork()\n"
    started = time.monotonic()
    res = _run(box, code)
    assert res.limit == "processes"
    assert time.monotonic() - started < box.limits.timeout  # killed at the cap, not at the timeout
    assert res.cgroups and not any(Path(p).exists() for p in res.cgroups)  # the run's cgroup is gone


def test_allocating_50_gb_fails_inside(box) -> None:
    res = _run(box, "x = bytearray(50 * 1024 ** 3)\nprint('ALLOCATED')")
    assert "ALLOCATED" not in res.stdout
    assert res.result["exception"] == "MemoryError"


def test_infinite_loop_is_killed_at_the_timeout(box) -> None:
    quick = Sandbox(box.settings, Limits(timeout=2), caps=box.caps)
    res = _run(quick, "while True:\n    pass\n")
    assert res.limit == "timeout" and 2 <= res.seconds < 2 + 3


def test_writing_outside_scratch_fails(box) -> None:
    target = Path.home() / f".sftl-sandbox-test-{uuid.uuid4().hex}"
    code = f"open({str(target)!r}, 'w').write('x')\nprint('WROTE')\nopen('inside.txt', 'w').write('ok')"
    res = _run(box, code)
    if not box.caps.bwrap:
        target.unlink(missing_ok=True)
        pytest.skip("bubblewrap unavailable: the system is not read-only here (stated as degraded)")
    assert not target.exists() and "WROTE" not in res.stdout
    assert res.result["exception"] in ("OSError", "PermissionError") and "Read-only" in res.result["message"]


def test_printing_a_gigabyte_is_cut_at_the_output_cap(box) -> None:
    started = time.monotonic()
    res = _run(box, "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(chunk)\n")
    assert res.limit == "output" and res.output_bytes < box.limits.output + (1 << 21)
    assert time.monotonic() - started < box.limits.timeout
    assert "[... output cut ...]" in res.stdout


def test_detached_background_processes_do_not_survive(box) -> None:
    tag = f"{int(time.time() * 1000) % 100000}.{uuid.uuid4().int % 1000:03d}"
    code = f"import subprocess\nsubprocess.Popen(['sleep', '{tag}'], start_new_session=True)\nprint('SPAWNED')"
    res = _run(box, code)
    assert "SPAWNED" in res.stdout
    time.sleep(0.2)
    alive = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if tag.encode() in cmdline.read_bytes():
                alive.append(cmdline.parent.name)
        except OSError:
            continue
    assert not alive, f"left running: {alive}"


@pytest.mark.skipif(not list((Path.home() / ".pyenv" / "versions").glob("3.6.*")), reason="needs pyenv's Python 3.6")
def test_the_harness_runs_under_python_3_6(box) -> None:
    py36 = sorted((Path.home() / ".pyenv" / "versions").glob("3.6.*"))[-1] / "bin" / "python"
    res = box.run_harness(py36, f"print({MARK!r})\nimport sys\nv = sys.version_info[1]\nnone = None\nnone.x\n",
                          ["--framework", "none"])
    assert MARK in res.stdout and res.result["python"].startswith("3.6.")
    assert res.result["exception"] == "AttributeError" and res.result["values"] == []


def test_an_environment_under_tmp_stays_visible(box, tmp_path: Path) -> None:
    """The sandbox mounts a fresh /tmp; an interpreter living under /tmp is bound back read-only."""
    import subprocess

    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    res = box.run_harness(env / "bin" / "python", f"print({MARK!r})\nimport sys\nprint(sys.prefix)\n", ["--framework", "none"])
    assert MARK in res.stdout and str(env) in res.stdout and res.result["status"] == "ok"


def test_without_bubblewrap_unshare_still_cuts_the_network_and_says_what_degraded(box) -> None:
    if box.caps.unshare is None:
        pytest.skip("unshare --net does not work here")
    caps = Capabilities(bwrap=None, unshare=box.caps.unshare, pids_cgroup=box.caps.pids_cgroup,
                        memory_cgroup=box.caps.memory_cgroup, root=box.caps.root, why=("bwrap disabled for this test",))
    fallback = Sandbox(box.settings, box.limits, caps=caps)
    res = _run(fallback, "import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=2)\nprint('CONNECTED')")
    assert "CONNECTED" not in res.stdout and res.result["status"] == "error"
    assert res.containment.network == "none (unshare --net)"
    assert "filesystem not read-only (no bubblewrap)" in res.containment.degraded


def test_without_network_isolation_it_refuses_unless_allowed(settings) -> None:
    caps = Capabilities(bwrap=None, unshare=None, pids_cgroup=False, memory_cgroup=False, root=True,
                        why=("bubblewrap (bwrap) is not installed",))
    with pytest.raises(SandboxError, match="--allow-network"):
        Sandbox(settings, caps=caps)
    opened = Sandbox(settings, caps=caps, allow_network=True).describe()
    assert {"network allowed by the user", "filesystem not read-only (no bubblewrap)", "process count not capped"} <= set(opened.degraded)


def test_sizes() -> None:
    assert parse_size("4G") == 4 << 30 and parse_size("512MiB") == 512 << 20 and parse_size("10M") == 10 << 20
    with pytest.raises(Exception, match="cannot read a size"):
        parse_size("lots")
