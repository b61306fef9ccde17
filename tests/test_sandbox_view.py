"""The view a snippet gets is an allowlist: secrets planted where a maintainer's machine keeps things stay out of a
hostile replay's reach, and so out of sftl's output, the store and the triage report, on bubblewrap and on the
fallback (user namespaces).

Real files are planted in /opt, /srv, /var/lib, /etc, /mnt, the checkout's parent folder, the checkout and the
home (world-readable: only the view keeps them out), and removed afterwards. The snippet prints a marker first,
so "nothing leaked" is never "never ran". Nothing is mocked: real sftl processes, real bubblewrap, real SQLite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_sandbox import BACKENDS, confined, only

from sftl.config import load_settings
from sftl.errors import SandboxError
from sftl.sandbox import (
    ETC_FILES,
    ETC_WRITTEN,
    NOBODY,
    SYSTEM_DIRS,
    Capabilities,
    Limits,
    Sandbox,
    environment_paths,
    finisher,
    guards,
    output_tail,
    probe,
)

ROOT = Path(__file__).resolve().parent.parent
PY = Path(sys.executable)
MARK = "MARK-hostile-started"
LIMITS = Limits(timeout=60, memory=2 << 30, max_procs=64, output=2_000_000)
SYSTEM_PLACES = ("/opt", "/srv", "/var/lib", "/etc", "/mnt")
PLACES = (*SYSTEM_PLACES, str(ROOT.parent), str(ROOT), str(Path.home()))


@pytest.fixture(scope="module")
def settings():
    return load_settings(env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "LANG": "C.UTF-8"})


@pytest.fixture(scope="module")
def machine(settings) -> Capabilities:
    return probe(settings)


@pytest.fixture(scope="module", params=BACKENDS)
def box(request, settings, machine) -> Sandbox:
    return confined(request.param, settings, machine, LIMITS)


@pytest.fixture
def planted() -> Iterator[tuple[str, tuple[Path, ...]]]:
    """A random secret in a world-readable file in each place this test can write to; removed afterwards."""
    secret = f"planted-{uuid.uuid4().hex}"  # the files' names carry another random part: the snippet names them
    files: list[Path] = []
    try:
        for place in PLACES:
            path = Path(place) / f"sftl-secret-{uuid.uuid4().hex[:12]}.txt"
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except OSError:
                continue  # no such folder here, or not ours to write
            files.append(path)
            with os.fdopen(fd, "w") as fh:
                fh.write(secret)
            path.chmod(0o644)
        if not any(str(f.parent) in SYSTEM_PLACES for f in files):
            pytest.skip(f"none of {', '.join(SYSTEM_PLACES)} is writable here: no secret to plant (run as root, as CI)")
        yield secret, tuple(files)
    finally:
        for path in files:
            path.unlink(missing_ok=True)


def hostile(files: tuple[Path, ...]) -> str:
    """Reads every planted file, lists every place and walks the whole view for the planted names; prints its
    findings on three lines and raises them, so they reach the output, the store and the report if anything does."""
    places = sorted({*PLACES, "/", "/var", "/home", "/root", "/run"})
    return (
        f"print({MARK!r}, flush=True)\n"
        "import os\n"
        "got, seen = [], {}\n"
        f"for p in {[str(f) for f in files]!r} + ['/etc/machine-id', '/etc/shadow']:\n"
        "    try:\n"
        "        got.append(open(p).read())\n"
        "    except OSError as e:\n"
        "        seen[p] = e.errno\n"
        f"for d in {places!r}:\n"
        "    try:\n"
        "        seen[d] = sorted(os.listdir(d))\n"
        "    except OSError as e:\n"
        "        seen[d] = e.errno\n"
        "for top, dirs, names in os.walk('/'):\n"
        "    if top in ('/proc', '/dev', '/usr'):\n"
        "        dirs[:] = []\n"
        "        continue\n"
        "    got += [os.path.join(top, n) for n in names + dirs if n.startswith('sftl-secret-')]\n"
        "print('\\x1b]52;c;cGF5bG9hZA==\\x07\\x1b[2J a terminal escape, shown as text')\n"
        "print('VIEW ' + __import__('json').dumps(seen))\n"
        "print('GOT', got)\n"
        "raise RuntimeError('exfiltrated: %r' % (got,))\n"
    )


SCRATCH_PREFIX = "sftl-run-"  # the sandbox's scratch folders (sftl/sandbox.py)


def toward(folder: str, shown: list[Path]) -> set[str]:
    """The names a listing of `folder` may show: the next step toward each folder bound into the view."""
    base = Path(folder)
    return {p.relative_to(base).parts[0] for p in shown if base in p.parents}


def test_a_hostile_snippet_finds_no_planted_secret_and_sees_only_the_allowlist(box, planted) -> None:
    secret, files = planted
    res = box.run_harness(PY, hostile(files), ["--framework", "none"])
    assert res.stdout.startswith(MARK), f"the snippet never ran: {res}"
    everything = res.stdout + res.stderr + json.dumps(res.result)
    assert secret not in everything
    assert "GOT []" in res.stdout and res.result["message"] == "exfiltrated: []"
    seen = json.loads(next(ln for ln in res.stdout.splitlines() if ln.startswith("VIEW "))[5:])
    shown = list(environment_paths(PY, str(Path.home())))
    if box.caps.bwrap and box.caps.root:
        shown.append(finisher().parent.parent)  # the last set-up step's interpreter
    system = {Path(d).name for d in SYSTEM_DIRS if os.path.lexists(d)}
    assert set(seen["/"]) == system | {"etc", "dev", "proc", "tmp"} | toward("/", shown)
    assert set(seen["/etc"]) <= {rel.split("/")[0] for rel in ETC_FILES} | set(ETC_WRITTEN)
    for place in (*SYSTEM_PLACES, "/var", "/home", "/root", "/run", str(ROOT.parent), str(ROOT), str(Path.home())):
        if place == "/etc":
            continue
        # absent (ENOENT), or holding nothing but the way to the environment (a venv in the checkout) and, where the
        # place is the temporary folder (a checkout in /tmp), the run's own scratch folder in its fresh /tmp
        own = {n for n in seen[place] if n.startswith(SCRATCH_PREFIX)} if place == tempfile.gettempdir() else set()
        assert seen[place] == 2 or set(seen[place]) <= toward(place, shown) | own, (place, seen[place])
    assert seen["/etc/machine-id"] == 2 and seen["/etc/shadow"] == 2
    assert all(seen[str(f)] == 2 for f in files)  # every planted file: no such file, not "permission denied"


def test_it_runs_as_nobody_without_capabilities(box) -> None:
    code = (f"print({MARK!r}, flush=True)\n"
            "import os\n"
            "print('IDS', os.getuid(), os.geteuid(), os.getgid(), os.getegid())\n"
            "print('CAPS', [ln.split()[1] for ln in open('/proc/self/status') if ln.startswith('Cap')])\n"
            "import pwd\n"
            "print('NAME', pwd.getpwuid(os.getuid()).pw_name)\n")
    res = box.run_harness(PY, code, ["--framework", "none"])
    assert res.stdout.startswith(MARK), f"the snippet never ran: {res}"
    assert f"IDS {NOBODY} {NOBODY} {NOBODY} {NOBODY}" in res.stdout and "NAME nobody" in res.stdout
    assert "CAPS ['0000000000000000', '0000000000000000', '0000000000000000', '0000000000000000', " \
           "'0000000000000000']" in res.stdout  # inheritable, permitted, effective, bounding, ambient


def test_a_gpu_run_adds_only_the_gpus_nodes(box) -> None:
    from sftl.sandbox import gpu_nodes

    if not gpu_nodes() or not box.caps.memory_cgroup:
        pytest.skip("no NVIDIA device node (/dev/nvidia*) or no memory cgroup here: no GPU run is possible")
    code = f"print({MARK!r}, flush=True)\nimport json, os\nprint('DEV ' + json.dumps(sorted(os.listdir('/dev'))))\n"

    def devices(gpu: bool) -> set[str]:
        res = box.run_harness(PY, code, ["--framework", "none"], gpu=gpu)
        assert res.stdout.startswith(MARK), f"the snippet never ran: {res}"
        return set(json.loads(next(ln for ln in res.stdout.splitlines() if ln.startswith("DEV "))[4:]))

    assert devices(True) - devices(False) == {Path(n).name for n in gpu_nodes()}


# -- end to end: sftl's processes, its store and its report --------------------------------------------------


def _sftl(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "import sys; from sftl.cli import main; sys.exit(main(sys.argv[1:]))",
                           *args], capture_output=True, text=True, env=env, timeout=600)


def _issue(code: str, number: int) -> dict[str, object]:
    fixture = ROOT / "fixtures" / "replay" / "mme_attribute_error_torch_2_13.json"
    issue = json.loads(fixture.read_text(encoding="utf-8"))
    issue.update(number=number, id=3100000000 + number, title="RuntimeError: exfiltrated on torch 2.13",
                 url=issue["url"].rsplit("/", 1)[0] + f"/{number}",
                 html_url=issue["html_url"].rsplit("/", 1)[0] + f"/{number}",
                 body=f"It fails.\n\n```python\n{code}```\n\n```\nTraceback (most recent call last):\n"
                      "  File \"repro.py\", line 30, in <module>\nRuntimeError: exfiltrated: []\n```\n\n"
                      "### Versions\n\nPyTorch version: 2.13.0+cpu\n")
    return issue


@pytest.mark.parametrize("backend", BACKENDS)
def test_nothing_planted_reaches_sftls_output_store_or_report(backend, machine, planted, tmp_path: Path) -> None:
    caps = only(machine, backend)
    if [g for g in guards(caps, Limits()) if not g.held]:
        pytest.skip(f"{backend}: this machine cannot confine report code")
    secret, files = planted
    if backend == "bubblewrap":
        path = "/usr/bin:/bin"
    else:  # the fallback is chosen where bubblewrap is not on the PATH: a PATH holding unshare alone
        (tmp_path / "bin").mkdir()
        (tmp_path / "bin" / "unshare").symlink_to(caps.unshare[0])  # type: ignore[index]
        path = str(tmp_path / "bin")
    home = tmp_path / "home"
    env = {"PATH": path, "HOME": str(Path.home()), "PYTHONPATH": str(ROOT), "SFTL_HOME": str(home),
           "SFTL_GITHUB_API_URL": "http://127.0.0.1:9", "LANG": "C.UTF-8"}
    issues = tmp_path / "issues.jsonl"
    issues.write_text(json.dumps(_issue(hostile(files), 180034)) + "\n", encoding="utf-8")
    done = [_sftl(["import", str(issues)], env)]
    assert done[-1].returncode == 0, done[-1].stderr
    done.append(_sftl(["replay", "pytorch/pytorch#180034", "--device", "cpu", "--env", "current", "--json",
                       "--offline"], env))
    assert secret not in done[-1].stdout + done[-1].stderr  # before anything else: a leak says so first
    assert done[-1].returncode == 0, done[-1].stderr
    replay = json.loads(done[-1].stdout)
    run = replay["runs"][0]
    assert replay["verdict"] == "reproduced" and run["stdout_tail"].startswith(MARK), replay  # it ran, found nothing
    assert run["message"] == "exfiltrated: []" and "GOT []" in run["stdout_tail"]
    done.append(_sftl(["replay", "pytorch/pytorch#180034", "--device", "cpu", "--env", "current", "--offline",
                       "--no-cache"], env))
    assert done[-1].returncode == 0 and MARK in done[-1].stdout, done[-1].stderr
    out = tmp_path / "report"
    done.append(_sftl(["triage", "pytorch/pytorch", "--offline", "--replay", "--jobs", "1", "--out", str(out),
                       "--state", "all"], env))
    assert done[-1].returncode == 0, done[-1].stderr
    rows = json.loads((out / "triage.json").read_text(encoding="utf-8"))
    row = next(r for r in rows["rows"] if r["issue"]["number"] == 180034)
    assert row["replay"]["verdict"] == "reproduced", row["replay"]
    assert {"triage.html", "triage.md"} <= {p.name for p in out.iterdir()}
    for proc in done:
        assert secret not in proc.stdout + proc.stderr
        assert "\x1b" not in proc.stdout + proc.stderr and "\x07" not in proc.stdout + proc.stderr
    assert "\\x1b[2J a terminal escape, shown as text" in done[2].stdout  # the text CLI's tail, escaped
    for folder in (home, out):  # the store (its database, journal, caches) and the report, byte by byte
        for path in folder.rglob("*"):
            if path.is_file() and not path.is_symlink():
                assert secret.encode() not in path.read_bytes(), path
    for report in out.iterdir():
        assert "\x1b" not in report.read_text(encoding="utf-8"), report
    assert backend in json.dumps(rows)  # the containment recorded is this backend's


def test_an_interpreter_whose_prefix_would_show_its_siblings_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    for python, why in ((Path("/opt/bin/python3"), "/opt"), (home / "bin" / "python3", str(home))):
        with pytest.raises(SandboxError, match=f"lives in {why}: binding that folder would show the snippet"):
            environment_paths(python, str(home))
    venv = home / "envs" / "torch-2.13"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(PY.resolve())
    assert environment_paths(venv / "bin" / "python", str(home)) == tuple(
        sorted({venv, PY.resolve().parent.parent} - {Path("/usr")}))


def test_output_tail_bounds_and_escapes() -> None:
    text = "".join(f"line {i}\n" for i in range(100)) + "\x1b]52;c;cGF5bG9hZA==\x07\x1b[2J\u202eevil\x00 end\n"
    tail = output_tail(text)
    assert len(tail.splitlines()) == 20 and tail.splitlines()[0] == "line 81" and len(tail) <= 2000
    assert "\x1b" not in tail and "\x07" not in tail and "\u202e" not in tail and "\x00" not in tail
    assert "\\x1b]52;c;cGF5bG9hZA==\\x07\\x1b[2J\\u202eevil\\x00 end\n" in tail  # shown, as text
    assert output_tail("x" * 10_000).startswith("x") and len(output_tail("x" * 10_000)) == 2000
    assert output_tail(tail) == tail  # stored tails are shown as they were kept
    assert output_tail("héllo — 中文\ttab\n") == "héllo — 中文\ttab\n"
