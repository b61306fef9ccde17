"""A release's sources from its archive, end to end over a loopback GitHub: one request, resumable, shared, never half-kept."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ghserver import GitHubServer, make_issue, make_tarball

from sftl.cli import main
from sftl.config import load_settings
from sftl.errors import SourceError
from sftl.sources.archive import archive_dir, archives_root, fetch_archive, read_mark

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SHA = "2ef35a0c1d2e3f405162738495a6b7c8d9e0f1a2"

MODULE_PY = '''class Module:
    def __init__(self):
        self._parameters = {}

    def __getattr__(self, name):
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
'''
GRAPH_MODULE_PY = '''from torch.nn.modules.module import Module


def _copy_attr(from_module, to_module, field):
    orig = getattr(from_module, field)
    setattr(to_module, field, orig)


class GraphModule(Module):
    def __init__(self, root, graph):
        super().__init__()
        for node in graph.nodes:
            if node.op == "get_attr":
                _copy_attr(root, self, node.target)
'''

GCRDE_BODY = """### 🐛 Describe the bug

`torch.histc` gives different counts on CPU and CUDA for the same input when values fall on the upper edge:

```python
import torch
x = torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0, 4.0])
print(torch.histc(x, bins=4, min=0, max=4))
print(torch.histc(x.cuda(), bins=4, min=0, max=4))
```

Output:

```
tensor([1., 1., 1., 3.])
tensor([1., 1., 1., 1.], device='cuda:0')
```

The CPU result counts the values equal to `max` in the last bin; the CUDA result drops them.

### Versions

PyTorch version: {version}
CUDA used to build PyTorch: 12.1
"""

MME_BODY = """### 🐛 Describe the bug

Building a GraphModule from a fresh root fails inside FX:

```python
import torch
import torch.fx
graph = torch.fx.Tracer().trace(lambda x: x + 1)
graph.get_attr("_tensor_constant0")
traced = torch.fx.GraphModule(torch.nn.Module(), graph)
```

```
Traceback (most recent call last):
  File "/home/dev/lift.py", line 5, in <module>
    traced = torch.fx.GraphModule(torch.nn.Module(), graph)
  File "/home/dev/venv/lib/python3.11/site-packages/torch/fx/graph_module.py", line 14, in __init__
    _copy_attr(root, self, node.target)
  File "/home/dev/venv/lib/python3.11/site-packages/torch/fx/graph_module.py", line 5, in _copy_attr
    orig = getattr(from_module, field)
  File "/home/dev/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 6, in __getattr__
    raise AttributeError(
AttributeError: 'Module' object has no attribute '_tensor_constant0'
```

### Versions

PyTorch version: 2.1.0+cu121
"""

TF_BODY = """**System information**
- TensorFlow version: tf 2.16

**Describe the current behavior**
`tf.math.floormod` gives different results on CPU and GPU for negative divisors:

```python
import tensorflow as tf
with tf.device("/CPU:0"):
    print(tf.math.floormod(tf.constant([-7.0]), tf.constant([2.0])))
with tf.device("/GPU:0"):
    print(tf.math.floormod(tf.constant([-7.0]), tf.constant([2.0])))
```
CPU prints [1.] but GPU prints [-1.]: the GPU result differs from the CPU result.
"""


def pytorch_files(blob: int = 0) -> dict[str, str | bytes]:
    """The mini PyTorch tree with the FX/Module Python files, plus folders no localizer reads (dropped on extraction)."""
    root = FIXTURES / "sources" / "mini_pytorch"
    files: dict[str, str | bytes] = {
        str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()
    }
    files["torch/nn/modules/module.py"] = MODULE_PY
    files["torch/fx/graph_module.py"] = GRAPH_MODULE_PY
    files["test/test_torch.py"] = "def test_nothing():\n    pass\n"
    files["third_party/cub/cub.cuh"] = "// vendored\n"
    files["README.md"] = "# PyTorch\n"
    if blob:
        files["docs/blob.bin"] = os.urandom(blob)  # incompressible: a download long enough to kill half-way
    return files


def tensorflow_files() -> dict[str, str | bytes]:
    root = FIXTURES / "sources" / "mini_tensorflow"
    files: dict[str, str | bytes] = {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    files["tensorflow/lite/kernels/floor_mod.cc"] = "// not read by the localizers\n"
    files["tensorflow/lite/python/lite.py"] = "class TFLiteConverter:\n    pass\n"  # Python anywhere: an MME may need it
    return files


@pytest.fixture
def gh(sftl_home: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    with GitHubServer() as server:
        monkeypatch.setenv("SFTL_GITHUB_API_URL", server.url)
        monkeypatch.setenv("SFTL_BACKOFF", "0.01")
        monkeypatch.setenv("SFTL_MAX_RETRIES", "2")
        monkeypatch.setenv("SFTL_RATE_LIMIT_WAIT", "1")
        yield server


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def source_requests(gh: GitHubServer) -> int:
    return gh.count(r"/tarball/") + gh.count(r"^/_codeload/") + gh.count(r"/commits$")


def test_a_gcrde_issue_online_with_an_empty_home_is_located_from_one_archive(gh: GitHubServer, sftl_home: Path) -> None:
    gh.add_issues("pytorch/pytorch", [make_issue("pytorch/pytorch", 7001, title="torch.histc differs between CPU and CUDA",
                                                 body=GCRDE_BODY.format(version="2.1.0+cu121"))])
    gh.add_archive("pytorch/pytorch", "v2.1.0", make_tarball("pytorch/pytorch", SHA, pytorch_files()))
    code, out, err = run("locate", "https://github.com/pytorch/pytorch/issues/7001", "--json")
    assert code == 0, err
    payload = json.loads(out)
    assert payload["outcome"] == "located" and payload["suspects"][0]["path"] == "aten/src/ATen/native/cuda/SummaryOps.cu"
    assert "archive pytorch/pytorch@v2.1.0" in payload["reason"] and "local build (+cu121)" in payload["reason"]
    assert gh.count(r"/tarball/") == 1 and gh.count(r"^/_codeload/") == 1  # one archive request (and its redirect)
    assert "downloading the pytorch sources at v2.1.0" in err  # the size notice
    tree = archive_dir(load_settings(), "pytorch", "v2.1.0") / "tree"
    assert (tree / "aten/src/ATen/native/cuda/SummaryOps.cu").is_file()
    assert not (tree / "test").exists() and not (tree / "third_party").exists() and not (tree / "README.md").exists()
    assert not list(archives_root(load_settings()).rglob("*.tar.gz*"))  # the archive goes once extracted
    mark = json.loads((tree.parent / "release.json").read_text())
    assert mark["commit"] == SHA and mark["ref"] == "v2.1.0" and mark["version"] == "2.1.0"
    assert not (sftl_home / "cache" / "sources" / "wheels").exists()  # and no wheel, ever
    # a second locate costs no source request (the issue itself is revalidated: a 304)
    before = source_requests(gh)
    code, out2, _ = run("locate", "https://github.com/pytorch/pytorch/issues/7001", "--json", "--rescreen")
    assert code == 0 and json.loads(out2)["suspects"] == payload["suspects"]
    assert source_requests(gh) == before
    everything = len(gh.requests)
    code, out3, _ = run("locate", "https://github.com/pytorch/pytorch/issues/7001", "--json", "--offline")
    assert code == 0 and json.loads(out3)["suspects"] == payload["suspects"] and len(gh.requests) == everything


def test_a_missing_module_error_is_located_from_the_archives_python_files(gh: GitHubServer, sftl_home: Path) -> None:
    gh.add_issues("pytorch/pytorch", [make_issue("pytorch/pytorch", 7002, title="GraphModule: no attribute _tensor_constant0",
                                                 body=MME_BODY)])
    gh.add_archive("pytorch/pytorch", "v2.1.0", make_tarball("pytorch/pytorch", SHA, pytorch_files()))
    code, out, err = run("locate", "pytorch/pytorch#7002", "--json")
    assert code == 0, err
    payload = json.loads(out)
    assert payload["category"] == "mme" and payload["outcome"] == "located", payload["reason"]
    assert payload["suspects"][0]["path"] in ("torch/fx/graph_module.py", "torch/nn/modules/module.py")
    assert gh.count(r"/tarball/") == 1
    assert not (sftl_home / "cache" / "sources" / "wheels").exists()


def test_a_tensorflow_discrepancy_is_located_from_its_kernels(gh: GitHubServer) -> None:
    gh.add_issues("tensorflow/tensorflow", [make_issue("tensorflow/tensorflow", 7003, title="floormod differs on GPU",
                                                       body=TF_BODY)])
    gh.add_archive("tensorflow/tensorflow", "v2.16.1", make_tarball("tensorflow/tensorflow", SHA, tensorflow_files()))
    code, out, err = run("locate", "tensorflow/tensorflow#7003", "--json")
    assert code == 0, err
    payload = json.loads(out)
    assert payload["outcome"] == "located", payload["reason"]
    # the kernels the discrepancy localizer found are among the first the ranker gives (the op's Python wrapper,
    # which defines and exports floormod, may rank beside them)
    top = [s["path"] for s in payload["suspects"][:3]]
    assert {"tensorflow/core/kernels/cwise_op_floor_mod.cc", "tensorflow/core/kernels/cwise_op_gpu_floor_mod.cu.cc"} <= set(top)
    assert "REGISTER_KERNEL_BUILDER in contents" in payload["reason"] and "2.16: the newest 2.16.x release sftl knows, tag v2.16.1" in payload["reason"]
    assert gh.count(r"/tarball/") == 1
    tree = archive_dir(load_settings(), "tensorflow", "v2.16.1") / "tree"
    assert not (tree / "tensorflow/lite/kernels").exists() and (tree / "tensorflow/lite/python/lite.py").is_file()


def test_a_versionless_report_is_read_at_the_commit_current_when_it_was_filed(gh: GitHubServer) -> None:
    body = GCRDE_BODY.split("### Versions")[0]
    gh.add_issues("pytorch/pytorch", [make_issue("pytorch/pytorch", 7004, title="torch.histc differs between CPU and CUDA",
                                                 body=body, created_at="2023-06-01T10:00:00Z")])
    gh.add_commit("pytorch/pytorch", "a" * 40, "2023-05-31T22:00:00Z")
    gh.add_commit("pytorch/pytorch", "b" * 40, "2023-06-02T09:00:00Z")  # after the report: not it
    gh.add_archive("pytorch/pytorch", "a" * 40, make_tarball("pytorch/pytorch", "a" * 40, pytorch_files()))
    code, out, err = run("locate", "pytorch/pytorch#7004", "--json")
    assert code == 0, err
    payload = json.loads(out)
    assert payload["outcome"] == "located" and f"commit {'a' * 10}" in payload["reason"]
    assert gh.count(r"/commits$") == 1 and gh.count(r"/tarball/") == 1
    run("locate", "pytorch/pytorch#7004", "--json", "--rescreen")
    assert gh.count(r"/commits$") == 1 and gh.count(r"/tarball/") == 1  # the lookup is kept
    code, out, err = run("locate", "pytorch/pytorch#7004", "--json", "--rescreen", "--offline")
    assert code == 0 and f"commit {'a' * 10}" in json.loads(out)["reason"], err  # offline: the same commit's archive


def test_offline_names_what_is_missing_and_the_one_command(sftl_home: Path) -> None:
    settings = load_settings(offline=True)
    from sftl.sources import open_source

    with pytest.raises(SourceError) as caught:
        open_source("pytorch", "2.1.0+cu121", settings, needs_cxx=True)
    message = str(caught.value)
    assert "no cached sources of pytorch at v2.1.0 (its C++/CUDA kernels; offline)" in message
    assert "run `sftl sources fetch pytorch==2.1.0` once online" in message
    code, _, err = run("sources", "fetch", "pytorch==2.1.0", "--offline")
    assert code == 5 and "sftl sources fetch pytorch==2.1.0" in err


def _fetch_process(home: Path, url: str, spec: str = "pytorch==2.1.0") -> subprocess.Popen[str]:
    env = {**os.environ, "SFTL_HOME": str(home), "SFTL_GITHUB_API_URL": url, "SFTL_BACKOFF": "0.01"}
    env.pop("GITHUB_TOKEN", None)
    code = "import sys; from sftl.cli import main; sys.exit(main())"
    return subprocess.Popen([sys.executable, "-c", code, "sources", "fetch", spec], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("ranges", [True, False])
def test_a_download_killed_half_way_resumes(gh: GitHubServer, sftl_home: Path, ranges: bool) -> None:
    data = make_tarball("pytorch/pytorch", SHA, pytorch_files(blob=1_500_000))
    gh.add_archive("pytorch/pytorch", "v2.1.0", data)
    gh.archive_chunk, gh.archive_chunk_delay = 32 * 1024, 0.05
    proc = _fetch_process(sftl_home, gh.url)
    part = archives_root(load_settings()) / "pytorch" / "v2.1.0.tar.gz.part"
    deadline = time.time() + 30
    while time.time() < deadline and (not part.is_file() or part.stat().st_size < 300_000):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)
    kept = part.stat().st_size
    assert 0 < kept < len(data)
    assert read_mark(archive_dir(load_settings(), "pytorch", "v2.1.0")) is None  # nothing looks complete
    gh.archive_chunk_delay, gh.archive_ranges = 0.0, ranges
    gh.requests.clear()
    code, out, err = run("sources", "fetch", "pytorch==2.1.0")
    assert code == 0, err
    resumed = [r for r in gh.requests if r.path.startswith("/_codeload/")]
    assert resumed[0].headers.get("Range") == f"bytes={kept}-"
    assert resumed[0].status == (206 if ranges else 200)
    assert ("resuming at" in err) == ranges and ("starting over" in err) == (not ranges)
    assert gh.count(r"/tarball/") == 0  # the saved archive URL is asked again, not the API
    tree = archive_dir(load_settings(), "pytorch", "v2.1.0") / "tree"
    assert (tree / "aten/src/ATen/native/cuda/SummaryOps.cu").read_bytes() == (
        FIXTURES / "sources/mini_pytorch/aten/src/ATen/native/cuda/SummaryOps.cu").read_bytes()


@pytest.mark.parametrize("damage", ["truncated", "garbage", "no tree"])
def test_a_truncated_or_corrupt_archive_is_a_clear_error_and_nothing_is_kept(gh: GitHubServer, damage: str) -> None:
    good = make_tarball("pytorch/pytorch", SHA, pytorch_files(blob=200_000))
    bad = {"truncated": good[: len(good) // 2], "garbage": os.urandom(5000),
           "no tree": make_tarball("pytorch/pytorch", SHA, {"README.md": "# nothing the localizers read\n"})}[damage]
    gh.add_archive("pytorch/pytorch", "v2.1.0", bad)
    code, _, err = run("sources", "fetch", "pytorch==2.1.0")
    lines = err.splitlines()  # the version read, the download notice, then the one error line
    assert code == 5 and len(lines) == 3 and "Traceback" not in err
    assert ("truncated or corrupt" in err) if damage != "no tree" else ("holds no pytorch tree" in err)
    folder = archive_dir(load_settings(), "pytorch", "v2.1.0")
    assert not folder.exists() and not list(folder.parent.glob(".tmp-*")) and not list(folder.parent.glob("*.tar.gz*"))
    gh.add_archive("pytorch/pytorch", "v2.1.0", good)  # the next run downloads it anew
    code, _, err = run("sources", "fetch", "pytorch==2.1.0")
    assert code == 0, err and read_mark(folder) is not None


def test_an_unknown_ref_is_a_404_in_one_line(gh: GitHubServer) -> None:
    code, _, err = run("sources", "fetch", "pytorch==9.9.9")
    assert code == 5 and err.splitlines()[-1] == "sftl: pytorch/pytorch has no ref 'v9.9.9' (GitHub answered 404 for its archive)"
    code, _, err = run("sources", "fetch", "pytorch==banana")
    assert code == 2 and "cannot read a version from 'banana'" in err


def test_a_rate_limit_names_its_reset_and_keeps_nothing_half_done(gh: GitHubServer) -> None:
    gh.add_archive("pytorch/pytorch", "v2.1.0", make_tarball("pytorch/pytorch", SHA, pytorch_files()))
    gh.set_rate_limit(0, reset_in=3600)
    code, _, err = run("sources", "fetch", "pytorch==2.1.0")
    assert code == 5 and "rate limit exhausted until" in err and "GITHUB_TOKEN" in err
    assert not archive_dir(load_settings(), "pytorch", "v2.1.0").exists()
    gh.set_rate_limit(100)
    assert run("sources", "fetch", "pytorch==2.1.0")[0] == 0


def test_two_processes_fetching_one_release_share_one_download(gh: GitHubServer, sftl_home: Path) -> None:
    gh.add_archive("pytorch/pytorch", "v2.1.0", make_tarball("pytorch/pytorch", SHA, pytorch_files(blob=1_000_000)))
    gh.archive_chunk, gh.archive_chunk_delay = 64 * 1024, 0.06  # about a second: the second process comes meanwhile
    procs = [_fetch_process(sftl_home, gh.url) for _ in range(2)]
    results = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    assert gh.count(r"/tarball/") == 1 and gh.count(r"^/_codeload/") == 1
    assert any("waiting for another sftl process" in err for _, err in results)
    assert read_mark(archive_dir(load_settings(), "pytorch", "v2.1.0")) is not None


def test_list_shows_ref_size_and_age_and_prune_bounds_the_archives(gh: GitHubServer) -> None:
    gh.add_archive("pytorch/pytorch", "v2.1.0", make_tarball("pytorch/pytorch", SHA, pytorch_files()))
    settings = load_settings()
    fetch_archive(settings, "pytorch", "v2.1.0", "2.1.0", "2.1.0: release 2.1.0, tag v2.1.0")
    code, out, _ = run("sources", "list", "--json")
    (entry,) = [e for e in json.loads(out) if e["kind"] == "archive"]
    assert entry["ref"] == "v2.1.0" and entry["version"] == "2.1.0" and entry["size_bytes"] > 0 and entry["fetched_at"]
    code, out, _ = run("sources", "list")
    assert "v2.1.0" in out and "MB" in out
    code, out, _ = run("sources", "prune", "--max-size", "0", "--json")
    assert code == 0 and json.loads(out)["removed"] == 1
    assert read_mark(archive_dir(settings, "pytorch", "v2.1.0")) is None


def test_progress_is_drawn_on_a_terminal_only() -> None:
    from sftl.cli.sources_cmd import StderrReporter

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, pipe = Terminal(), io.StringIO()
    for stream in (tty, pipe):
        reporter = StderrReporter(stream)
        reporter.notice("downloading the pytorch sources at v2.1.0 (70 MB)")
        for event, done in (("start", 0), ("update", 5_000_000), ("end", 10_000_000)):
            reporter.progress("pytorch v2.1.0 archive", event, done, 10_000_000)
    assert "\r" in tty.getvalue() and "MB/s" in tty.getvalue() and "10.0/10.0 MB" in tty.getvalue()
    assert pipe.getvalue() == "sftl: downloading the pytorch sources at v2.1.0 (70 MB)\n"


def test_cache_prune_knows_the_release_archives(gh: GitHubServer) -> None:
    gh.add_archive("pytorch/pytorch", "v2.1.0", make_tarball("pytorch/pytorch", SHA, pytorch_files()))
    settings = load_settings()
    fetch_archive(settings, "pytorch", "v2.1.0", "2.1.0")
    code, out, err = run("cache", "prune", "--max-age", "30d", "--json")
    assert code == 0 and json.loads(out)["sources"]["releases"] == 1 and "release archives: removed 0" in err
    mark = archive_dir(settings, "pytorch", "v2.1.0") / "release.json"
    os.utime(mark, (time.time() - 40 * 86400,) * 2)  # unused for 40 days
    code, out, err = run("cache", "prune", "--max-age", "30d", "--json")
    assert code == 0 and json.loads(out)["sources"]["removed"] == 1 and read_mark(mark.parent) is None


def test_the_token_is_sent_to_the_api_and_never_to_the_archive_host(sftl_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with GitHubServer(token="s3cret") as api, GitHubServer() as host:
        host.add_archive("pytorch/pytorch", "v2.1.0", make_tarball("pytorch/pytorch", SHA, pytorch_files()))
        api.add_archive("pytorch/pytorch", "v2.1.0", b"")
        api.archive_host = host.url
        monkeypatch.setenv("SFTL_GITHUB_API_URL", api.url)
        monkeypatch.setenv("GITHUB_TOKEN", "s3cret")
        code, _, err = run("sources", "fetch", "pytorch==2.1.0")
        assert code == 0, err
        (asked,) = [r for r in api.requests if "/tarball/" in r.path]
        (served,) = host.requests
        assert asked.headers.get("Authorization") == "Bearer s3cret" and asked.status == 302
        assert "Authorization" not in served.headers and served.status == 200


def test_a_registered_tree_of_the_release_wins_over_any_download(gh: GitHubServer, fixtures_dir: Path) -> None:
    gh.add_issues("pytorch/pytorch", [make_issue("pytorch/pytorch", 7005, title="torch.histc differs between CPU and CUDA",
                                                 body=GCRDE_BODY.format(version="2.1.0+cu121"))])
    gh.add_archive("pytorch/pytorch", "v2.1.0", make_tarball("pytorch/pytorch", SHA, pytorch_files()))
    assert run("sources", "add", "pytorch==2.1.0", str(fixtures_dir / "sources" / "mini_pytorch"))[0] == 0
    code, out, err = run("locate", "pytorch/pytorch#7005", "--json")
    assert code == 0 and json.loads(out)["suspects"][0]["path"].endswith("cuda/SummaryOps.cu"), err
    assert gh.count(r"/tarball/") == 0 and gh.count(r"^/_codeload/") == 0


def test_a_missing_module_error_reads_the_releases_cached_wheel_rather_than_download(gh: GitHubServer) -> None:
    import zipfile

    from sftl.sources import WheelSource, open_source, wheel_cache_dir

    gh.add_archive("pytorch/pytorch", "v2.1.0", make_tarball("pytorch/pytorch", SHA, pytorch_files()))
    settings = load_settings()
    folder = wheel_cache_dir(settings, "pytorch", "2.1.0")
    folder.mkdir(parents=True)
    with zipfile.ZipFile(folder / "torch-2.1.0-cp311-cp311-manylinux1_x86_64.whl", "w") as zf:
        zf.writestr("torch/nn/modules/module.py", MODULE_PY)
    assert isinstance(open_source("pytorch", "2.1.0+cu121", settings, needs_cxx=False), WheelSource)
    assert gh.count(r"/tarball/") == 0  # Python files at hand: no download
    assert open_source("pytorch", "2.1.0+cu121", settings, needs_cxx=True).description.startswith("archive ")
    assert gh.count(r"/tarball/") == 1  # the kernels are not in a wheel: the archive


def test_a_resume_that_joins_two_different_archives_downloads_once_more_whole(gh: GitHubServer) -> None:
    old = make_tarball("pytorch/pytorch", SHA, pytorch_files(blob=400_000))
    new = make_tarball("pytorch/pytorch", SHA, pytorch_files(blob=400_000))  # regenerated: other bytes
    gh.add_archive("pytorch/pytorch", "v2.1.0", new)
    folder = archives_root(load_settings()) / "pytorch"
    folder.mkdir(parents=True)
    (folder / "v2.1.0.tar.gz.part").write_bytes(old[:200_000])  # a killed run's part, with no validator kept
    (folder / "v2.1.0.tar.gz.part.json").write_text(json.dumps(
        {"url": f"{gh.url}/_codeload/pytorch/pytorch/legacy.tar.gz/v2.1.0", "validator": None}))
    code, _, err = run("sources", "fetch", "pytorch==2.1.0")
    assert code == 0, err
    assert "is corrupt; downloading it again from the start" in err
    assert [r.status for r in gh.requests if r.path.startswith("/_codeload/")] == [206, 200]
    assert read_mark(archive_dir(load_settings(), "pytorch", "v2.1.0")) is not None


def test_a_server_error_of_the_archive_host_is_retried(gh: GitHubServer) -> None:
    gh.add_archive("pytorch/pytorch", "v2.1.0", make_tarball("pytorch/pytorch", SHA, pytorch_files()))
    gh.inject(r"^/_codeload/", status=502, times=1)
    code, _, err = run("sources", "fetch", "pytorch==2.1.0")
    assert code == 0, err
    assert [r.status for r in gh.requests if r.path.startswith("/_codeload/")] == [502, 200]
    assert gh.count(r"/tarball/") == 1


def test_the_archive_keeps_who_to_ask_and_the_comment_names_them(gh: GitHubServer) -> None:
    """CODEOWNERS and the labeler map are kept from a release's archive (the rest of .github/ is not), so
    `sftl comment` can name the suspects' owners and labels."""
    gh.add_issues("pytorch/pytorch", [make_issue("pytorch/pytorch", 7002, title="GraphModule: no attribute _tensor_constant0",
                                                 body=MME_BODY)])
    files = pytorch_files()
    files[".github/CODEOWNERS"] = "/torch/fx/ @fx-owner\n"
    files[".github/labeler.yml"] = '"module: fx":\n- torch/fx/**\n'
    files[".github/workflows/ci.yml"] = "on: push\n"
    gh.add_archive("pytorch/pytorch", "v2.1.0", make_tarball("pytorch/pytorch", SHA, files))
    code, out, err = run("comment", "pytorch/pytorch#7002")
    assert code == 0, err
    assert "- owners of `/torch/fx/`: `@fx-owner`; label: `module: fx` (suspect 1)" in out
    tree = archive_dir(load_settings(), "pytorch", "v2.1.0") / "tree"
    assert (tree / ".github/CODEOWNERS").is_file() and (tree / ".github/labeler.yml").is_file()
    assert not (tree / ".github/workflows").exists()
