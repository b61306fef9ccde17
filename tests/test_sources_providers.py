"""Source providers: local trees, site-packages, wheels read as zips, GitHub through a loopback server, layering, the factory."""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from sftl.config import load_settings
from sftl.errors import InputError, SourceError
from sftl.sources import (
    NATIVE_FUNCTIONS,
    GitHubSource,
    LayeredSource,
    LocalTree,
    SitePackages,
    WheelSource,
    cached_wheel,
    candidate_pythons,
    fetch_cxx,
    fetch_wheel,
    list_cached,
    open_source,
    parse_spec,
    release_tag,
    repo_path,
    wheel_cache_dir,
)

YAML_TEXT = "- func: histc(Tensor self, int bins=100) -> Tensor\n  dispatch:\n    CPU: histogram_histc\n"


def make_wheel(folder: Path, name: str = "torch-1.12.1-cp310-cp310-manylinux1_x86_64.whl") -> Path:
    """A small but well-formed wheel laid out like torch's (Python files, the packaged yaml, a .so)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("torch/__init__.py", "__version__ = '1.12.1'\n")
        zf.writestr("torch/nn/modules/module.py", "class Module:\n    pass\n")
        zf.writestr("torchgen/packaged/ATen/native/native_functions.yaml", YAML_TEXT)
        zf.writestr("torch/include/ATen/native/cuda/Loops.cuh", "// header\n")
        zf.writestr("torch/lib/libtorch_cuda.so", b"\x7fELF")
        zf.writestr("torch-1.12.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: torch\nVersion: 1.12.1\n")
        zf.writestr(
            "torch-1.12.1.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: sftl-tests\nRoot-Is-Purelib: false\nTag: cp310-cp310-manylinux1_x86_64\n",
        )
        zf.writestr("torch-1.12.1.dist-info/RECORD", "")
    return path


def test_parse_spec_and_release_tag() -> None:
    assert parse_spec("pytorch==1.12.1") == ("pytorch", "1.12.1")
    assert parse_spec("torch==2.0") == ("pytorch", "2.0")
    assert parse_spec("tensorflow-cpu==2.6.0") == ("tensorflow", "2.6.0")
    with pytest.raises(InputError, match="FRAMEWORK==VERSION"):
        parse_spec("pytorch")
    assert release_tag("pytorch", "1.6.0a0-fb") == "v1.6.0"
    assert release_tag("tensorflow", "2.6") == "v2.6.0"
    with pytest.raises(SourceError):
        release_tag("pytorch", "nightly")


def test_repo_path_maps_wheel_layout_to_the_repository() -> None:
    assert repo_path("pytorch", "torchgen/packaged/ATen/native/native_functions.yaml") == NATIVE_FUNCTIONS
    assert repo_path("pytorch", "torch/nn/functional.py") == "torch/nn/functional.py"
    assert repo_path("pytorch", "torch/include/ATen/native/cuda/Loops.cuh") == "aten/src/ATen/native/cuda/Loops.cuh"
    assert repo_path("pytorch", "torch/lib/libtorch.so") is None
    assert repo_path("pytorch", "torch-2.0.dist-info/RECORD") is None
    assert repo_path("tensorflow", "tensorflow/python/ops/math_ops.py") == "tensorflow/python/ops/math_ops.py"
    assert (
        repo_path("tensorflow", "tensorflow/include/tensorflow/core/framework/op.h")
        == "tensorflow/core/framework/op.h"
    )


def test_candidate_pythons_prefer_what_the_release_shipped() -> None:
    assert candidate_pythons("pytorch", "1.12.1")[0] in ("3.9", "3.10")
    assert candidate_pythons("pytorch", "1.2.0")[0] == "3.7"
    assert candidate_pythons("tensorflow", "2.6.0")[0] == "3.9"
    assert len(set(candidate_pythons("pytorch", "2.6.0"))) == len(candidate_pythons("pytorch", "2.6.0"))


def test_local_tree_lists_and_reads(fixtures_dir: Path) -> None:
    tree = LocalTree(fixtures_dir / "sources" / "mini_pytorch", "pytorch")
    files = tree.list_files()
    assert NATIVE_FUNCTIONS in files
    assert "aten/src/ATen/native/cuda/SummaryOps.cu" in files
    assert "_histc_cuda" in (tree.read_text("aten/src/ATen/native/cuda/SummaryOps.cu") or "")
    assert tree.read_text("no/such/file.cpp") is None
    with pytest.raises(InputError, match="not a directory"):
        LocalTree(fixtures_dir / "nope", "pytorch")


def test_site_packages_maps_installed_files(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    (site / "torchgen/packaged/ATen/native").mkdir(parents=True)
    (site / "torchgen/packaged/ATen/native/native_functions.yaml").write_text(YAML_TEXT)
    (site / "torch/nn").mkdir(parents=True)
    (site / "torch/nn/functional.py").write_text("def relu(x):\n    return x\n")
    (site / "torch/_C.so").write_bytes(b"\x7fELF")
    (site / "torch-1.12.1.dist-info").mkdir()
    src = SitePackages("torch", site_dir=site)
    assert src.version == "1.12.1"
    assert src.read_text(NATIVE_FUNCTIONS) == YAML_TEXT
    assert "def relu" in (src.read_text("torch/nn/functional.py") or "")
    assert "torch/_C.so" not in src.list_files()
    assert src.read_text("aten/src/ATen/native/cuda/SummaryOps.cu") is None


def test_site_packages_of_this_interpreter_has_the_real_yaml() -> None:
    src = SitePackages("pytorch")  # the torch installed in this venv, found without importing it
    assert src.installed_version and src.installed_version.startswith("2.")
    text = src.read_text(NATIVE_FUNCTIONS)
    assert text is not None and "- func: histc" in text


def test_wheel_source_reads_the_zip_without_installing(tmp_path: Path) -> None:
    whl = make_wheel(tmp_path)
    src = WheelSource(whl, "pytorch")
    assert src.version == "1.12.1"
    files = src.list_files()
    assert NATIVE_FUNCTIONS in files and "torch/nn/modules/module.py" in files
    assert not any(f.endswith(".so") for f in files)
    assert src.read_text(NATIVE_FUNCTIONS) == YAML_TEXT
    assert src.read_text("aten/src/ATen/native/cuda/Loops.cuh") == "// header\n"
    assert src.read_text("aten/src/ATen/native/cuda/SummaryOps.cu") is None


def test_a_wheel_with_its_package_under_data_purelib_is_read(tmp_path: Path) -> None:
    """TensorFlow 1.x wheels keep the package under 'tensorflow-1.13.1.data/purelib/': its files are the release's."""
    import zipfile

    whl = tmp_path / "tensorflow-1.13.1-cp37-cp37m-manylinux1_x86_64.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        zf.writestr("tensorflow-1.13.1.data/purelib/tensorflow/python/ops/nn_ops.py", "def conv2d(): pass\n")
        zf.writestr("tensorflow-1.13.1.data/purelib/tensorflow/include/tensorflow/core/framework/op.h", "// op\n")
        zf.writestr("tensorflow-1.13.1.dist-info/RECORD", "")
    src = WheelSource(whl, "tensorflow")
    assert sorted(src.list_files()) == ["tensorflow/core/framework/op.h", "tensorflow/python/ops/nn_ops.py"]
    assert src.read_text("tensorflow/python/ops/nn_ops.py") == "def conv2d(): pass\n"


def test_wheel_source_rejects_a_corrupt_file(tmp_path: Path) -> None:
    bad = tmp_path / "torch-1.0-cp37-cp37m-linux_x86_64.whl"
    bad.write_bytes(b"not a zip")
    with pytest.raises(SourceError, match="cannot open wheel"):
        WheelSource(bad, "pytorch")


def test_layered_source_first_hit_wins(tmp_path: Path, fixtures_dir: Path) -> None:
    tree = LocalTree(fixtures_dir / "sources" / "mini_pytorch", "pytorch", "1.12.1")
    wheel = WheelSource(make_wheel(tmp_path), "pytorch")
    layered = LayeredSource([tree, wheel])
    assert "- func: histc.out" in (layered.read_text(NATIVE_FUNCTIONS) or "")  # the tree's, not the wheel's
    assert layered.read_text("torch/nn/modules/module.py") == "class Module:\n    pass\n"  # only in the wheel
    files = layered.list_files()
    assert len(files) == len(set(files))
    assert "local tree" in layered.description and "wheel" in layered.description


def test_open_source_prefers_source_root_then_cache(tmp_path: Path, fixtures_dir: Path) -> None:
    settings = load_settings({}, home=tmp_path / "home", offline=True)
    root = fixtures_dir / "sources" / "mini_pytorch"
    assert isinstance(open_source("pytorch", "1.12.1", settings, source_root=root), LocalTree)
    with pytest.raises(SourceError, match=r"sftl sources fetch pytorch==1\.12\.1.*sftl sources add pytorch==1\.12\.1 DIR"):
        open_source("pytorch", "1.12.1", settings)
    with pytest.raises(SourceError, match="names no pytorch version"):
        open_source("pytorch", None, settings)
    make_wheel(wheel_cache_dir(settings, "pytorch", "1.12.1"))
    src = open_source("torch", "1.12.1", settings, offline=True)
    assert isinstance(src, WheelSource)
    assert src.read_text(NATIVE_FUNCTIONS) == YAML_TEXT
    listed = list_cached(settings)
    assert [(e.framework, e.version, e.kind) for e in listed] == [("pytorch", "1.12.1", "wheel")]


class _FakeGitHub(BaseHTTPRequestHandler):
    """Serves a repository's git tree and raw contents the way GitHub's REST API does."""

    files: dict[str, str] = {}
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        url = urlparse(self.path)
        type(self).hits.append(url.path)
        if url.path == "/repos/pytorch/pytorch/git/trees/v1.12.1":
            tree = [{"path": p, "type": "blob", "mode": "100644", "sha": "0" * 40} for p in self.files]
            tree.append({"path": "aten", "type": "tree", "mode": "040000", "sha": "1" * 40})
            self._send(200, json.dumps({"sha": "f" * 40, "tree": tree, "truncated": False}), "application/json")
            return
        prefix = "/repos/pytorch/pytorch/contents/"
        if url.path.startswith(prefix) and "ref=v1.12.1" in (url.query or ""):
            path = unquote(url.path[len(prefix) :])
            if path in self.files:
                self._send(200, self.files[path], "application/vnd.github.raw")
                return
        self._send(404, json.dumps({"message": "Not Found"}), "application/json")

    def _send(self, code: int, body: str, ctype: str) -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-RateLimit-Remaining", "4999")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def github_server(fixtures_dir: Path) -> Iterator[str]:
    root = fixtures_dir / "sources" / "mini_pytorch"
    _FakeGitHub.files = {
        p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()
    }
    _FakeGitHub.hits = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeGitHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_github_source_fetches_caches_and_works_offline(tmp_path: Path, github_server: str) -> None:
    settings = load_settings({}, home=tmp_path / "home", api_url=github_server)
    src = GitHubSource("pytorch", "1.12.1", settings)
    files = src.list_files()
    assert "aten/src/ATen/native/cuda/SummaryOps.cu" in files and "aten" not in files
    assert "_histc_cuda" in (src.read_text("aten/src/ATen/native/cuda/SummaryOps.cu") or "")
    assert src.read_text("aten/src/ATen/native/cuda/Missing.cu") is None  # not in the tree: no request
    count = fetch_cxx("pytorch", "1.12.1", settings)
    assert count == sum(1 for f in files if f.startswith("aten/src/ATen/native/") and not f.endswith("SummaryOps.cu"))
    # offline afterwards: everything comes from the cache, nothing from the server
    before = len(_FakeGitHub.hits)
    offline = load_settings({}, home=tmp_path / "home", api_url="http://127.0.0.1:9", offline=True)
    cached = open_source("pytorch", "1.12.1", offline)
    assert isinstance(cached, GitHubSource)
    assert "arange_cuda_out" in (cached.read_text("aten/src/ATen/native/cuda/RangeFactories.cu") or "")
    assert len(_FakeGitHub.hits) == before
    kinds = {(e.kind, e.version) for e in list_cached(offline)}
    assert ("github", "1.12.1") in kinds
    # the GCRDE localizer keeps its kernel index beside the cached tree and reuses it in a new process
    from sftl.localize.gcrde import localize_gcrde
    from sftl.model import Environment, Extraction, Issue

    issue = Issue("pytorch/pytorch", 1, "histc wrong on cuda", "")
    ex = Extraction(None, None, Environment(framework="pytorch"), apis=("torch.histc",))
    first = localize_gcrde(issue, ex, cached)
    index_file = cached.index_cache_path()
    assert index_file.is_file()
    stamp = index_file.stat().st_mtime_ns
    again = localize_gcrde(issue, ex, open_source("pytorch", "1.12.1", offline))
    assert again == first and again.suspects[0].path.endswith("cuda/SummaryOps.cu")
    assert index_file.stat().st_mtime_ns == stamp  # loaded, not rebuilt
    index_file.write_bytes(b"garbage")  # a corrupt cache is rebuilt, never an error
    assert localize_gcrde(issue, ex, open_source("pytorch", "1.12.1", offline)) == first


def test_github_source_offline_without_cache_names_the_fetch(tmp_path: Path) -> None:
    settings = load_settings({}, home=tmp_path / "home", offline=True)
    with pytest.raises(SourceError, match="--cxx"):
        GitHubSource("pytorch", "1.12.1", settings).list_files()


@pytest.fixture
def local_index(tmp_path: Path) -> Path:
    """A find-links folder holding one wheel: pip resolves from it with no index and no network."""
    links = tmp_path / "links"
    make_wheel(links)
    return links


def _pip_env(links: Path) -> dict[str, str]:
    import os

    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/root"),
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(links),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }


def test_fetch_wheel_runs_pip_download_and_caches(tmp_path: Path, local_index: Path) -> None:
    settings = load_settings(_pip_env(local_index), home=tmp_path / "home")
    wheel = fetch_wheel("pytorch", "1.12.1", settings, python="3.10")
    assert wheel.parent == wheel_cache_dir(settings, "pytorch", "1.12.1")
    assert cached_wheel(settings, "pytorch", "1.12.1") == wheel
    from sftl.sources.inventory import cache_path

    assert cache_path(wheel).is_file()  # the files its libraries name are scanned at fetch time, not at locate
    shutil.rmtree(local_index)  # a second call must not need pip at all
    assert fetch_wheel("pytorch", "1.12.1", settings, python="3.10") == wheel
    assert WheelSource(wheel, "pytorch").read_text(NATIVE_FUNCTIONS) == YAML_TEXT


def test_fetch_wheel_of_an_absent_version_says_so(tmp_path: Path, local_index: Path) -> None:
    settings = load_settings(_pip_env(local_index), home=tmp_path / "home")
    with pytest.raises(SourceError, match=r"no wheel of pytorch 9\.9\.9"):
        fetch_wheel("pytorch", "9.9.9", settings, python="3.10")
    assert cached_wheel(settings, "pytorch", "9.9.9") is None


def test_sources_cli_fetch_and_list(tmp_path: Path, local_index: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from sftl.cli import main

    for key, value in _pip_env(local_index).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("SFTL_HOME", str(tmp_path / "home"))
    out, err = io.StringIO(), io.StringIO()
    assert main(["sources", "fetch", "pytorch==1.12.1", "--offline"], out=out, err=err) == 5
    assert "sftl sources fetch pytorch==1.12.1" in err.getvalue()
    out = io.StringIO()
    assert main(["sources", "fetch", "torch==1.12.1", "--python", "3.10", "--json"], out=out, err=err) == 0
    fetched = json.loads(out.getvalue())
    assert fetched["framework"] == "pytorch" and fetched["wheel"].endswith(".whl")
    out = io.StringIO()
    assert main(["sources", "list", "--json"], out=out, err=err) == 0
    listed = json.loads(out.getvalue())
    assert listed[0]["framework"] == "pytorch" and listed[0]["kind"] == "wheel"
    assert main(["sources", "fetch", "pytorch"], out=io.StringIO(), err=err) == 2  # bad input
    assert sys.executable  # the pip used is this interpreter's


def test_layered_source_exposes_the_github_index_cache(tmp_path: Path) -> None:
    settings = load_settings({}, home=tmp_path / "home", offline=True)
    github = GitHubSource("pytorch", "1.12.1", settings)
    wheel = WheelSource(make_wheel(tmp_path), "pytorch")
    assert LayeredSource([github, wheel]).index_cache_path() == github.index_cache_path()
    assert LayeredSource([wheel]).index_cache_path() is None


def test_registered_trees_serve_their_release_and_the_nearest_ones(tmp_path: Path, fixtures_dir: Path) -> None:
    from sftl.sources import nearest_version, register_tree, registered_trees

    settings = load_settings({}, home=tmp_path / "home", offline=True)
    root = fixtures_dir / "sources" / "mini_pytorch"
    register_tree(settings, "torch", "2.6.0", root)
    assert registered_trees(settings, "pytorch") == {"2.6.0": root.resolve()}
    exact = open_source("pytorch", "2.6.0", settings)
    assert isinstance(exact, LocalTree) and exact.version == "2.6.0"
    # 2.3.0 has nothing of its own cached: the 2.6.0 tree stands in, and says so
    near = open_source("pytorch", "2.3.0", settings)
    assert "nearest registered tree pytorch 2.6.0" in near.description and near.version == "2.3.0"
    assert near.read_text(NATIVE_FUNCTIONS) is not None
    # with the release's own wheel cached, its Python files come along, the tree's C++ first
    make_wheel(wheel_cache_dir(settings, "pytorch", "2.3.0"), "torch-2.3.0-cp311-cp311-manylinux1_x86_64.whl")
    both = open_source("pytorch", "2.3.0", settings)
    assert "torch/nn/modules/module.py" in both.list_files() and "nearest" in both.description
    assert "- func: histc.out" in (both.read_text(NATIVE_FUNCTIONS) or "")
    assert nearest_version("1.0.1", ["1.13.1", "2.6.0"]) == "1.13.1"
    assert nearest_version("2.7", ["1.13.1", "2.6.0"]) == "2.6.0"
    assert nearest_version("1.0", []) is None
    with pytest.raises(InputError, match="does not look like"):
        register_tree(settings, "pytorch", "1.0", tmp_path)
    assert ("pytorch", "2.6.0", "tree") in {(e.framework, e.version, e.kind) for e in list_cached(settings)}


def test_the_reports_own_python_files_win_over_a_stand_in_tree(tmp_path: Path, fixtures_dir: Path) -> None:
    import shutil

    from sftl.sources import register_tree

    settings = load_settings({}, home=tmp_path / "home", offline=True)
    tree = tmp_path / "tree"
    shutil.copytree(fixtures_dir / "sources" / "mini_pytorch", tree)
    (tree / "torch/nn/modules").mkdir(parents=True, exist_ok=True)
    (tree / "torch/nn/modules/module.py").write_text("class Module:\n    def newer_method(self): ...\n")
    register_tree(settings, "pytorch", "2.6.0", tree)
    make_wheel(wheel_cache_dir(settings, "pytorch", "2.3.0"), "torch-2.3.0-cp311-cp311-manylinux1_x86_64.whl")
    both = open_source("pytorch", "2.3.0", settings)
    assert isinstance(both, LayeredSource) and both.releases() == ["2.6.0", "2.3.0"]
    # an MME is about the report's release: its module.py is read, not the newer tree's
    assert both.read_text("torch/nn/modules/module.py") == "class Module:\n    pass\n"
    assert both.release_of("torch/nn/modules/module.py") == "2.3.0"
    # C++ stays the stand-in tree's, consistent with its kernels
    assert "- func: histc.out" in (both.read_text(NATIVE_FUNCTIONS) or "")
    assert both.list_files().count("torch/nn/modules/module.py") == 1


def test_a_nearer_releases_python_files_win_over_a_stand_in_tree_when_the_reports_own_are_missing(
        tmp_path: Path, fixtures_dir: Path) -> None:
    """The layer rule, for every localizer: Python files come from the release nearest the report first.
    No wheel of 0.4.0: the cached 1.0.1 wheel (nearer than the 2.6.0 tree) gives the Python files, the tree the C++."""
    import shutil

    from sftl.sources import register_tree

    settings = load_settings({}, home=tmp_path / "home", offline=True)
    tree = tmp_path / "tree"
    shutil.copytree(fixtures_dir / "sources" / "mini_pytorch", tree)
    (tree / "torch/nn/modules").mkdir(parents=True, exist_ok=True)
    (tree / "torch/nn/modules/module.py").write_text("class Module:\n    def newer_method(self): ...\n")
    register_tree(settings, "pytorch", "2.6.0", tree)
    make_wheel(wheel_cache_dir(settings, "pytorch", "1.0.1"), "torch-1.0.1-cp37-cp37m-manylinux1_x86_64.whl")
    src = open_source("pytorch", "0.4.0", settings)
    assert isinstance(src, LayeredSource) and src.version == "0.4.0" and src.era_release == "1.0.1"
    assert src.read_text("torch/nn/modules/module.py") == "class Module:\n    pass\n"
    assert src.release_of("torch/nn/modules/module.py") == "1.0.1"
    assert src.release_of("aten/src/ATen/native/cuda/SummaryOps.cu") == "2.6.0"
    assert "- func: histc.out" in (src.read_text(NATIVE_FUNCTIONS) or "")  # the tree's yaml, with its kernels


def test_a_wheel_alone_gets_the_nearest_trees_kernels_under_its_python_files(tmp_path: Path, fixtures_dir: Path) -> None:
    from sftl.sources import holds_kernel_sources, register_tree, with_nearest_kernels

    settings = load_settings({}, home=tmp_path / "home", offline=True)
    wheel = WheelSource(make_wheel(tmp_path / "w", "torch-2.3.0-cp311-cp311-manylinux1_x86_64.whl"), "pytorch", "2.3.0")
    assert not holds_kernel_sources(wheel)  # headers only
    same, note = with_nearest_kernels(wheel, settings, "2.3.0")
    assert same is wheel and "`sftl sources fetch pytorch==2.3.0`" in note
    register_tree(settings, "pytorch", "1.13.1", fixtures_dir / "sources" / "mini_pytorch")
    register_tree(settings, "pytorch", "2.6.0", fixtures_dir / "sources" / "mini_pytorch")
    both, note = with_nearest_kernels(wheel, settings, "2.3.0")
    assert holds_kernel_sources(both) and "C++/CUDA of pytorch 2.6.0, another release" in note
    assert isinstance(both, LayeredSource) and both.release_of("torch/nn/modules/module.py") == "2.3.0"
    assert both.release_of("aten/src/ATen/native/cuda/SummaryOps.cu") == "2.6.0"


def test_a_nearest_tree_is_named_in_the_localization(tmp_path: Path, fixtures_dir: Path) -> None:
    from sftl.localize.gcrde import localize_gcrde
    from sftl.model import Environment, Extraction, Issue
    from sftl.sources import register_tree

    settings = load_settings({}, home=tmp_path / "home", offline=True)
    register_tree(settings, "pytorch", "2.6.0", fixtures_dir / "sources" / "mini_pytorch")
    issue = Issue("pytorch/pytorch", 1, "histc wrong on cuda", "")
    ex = Extraction(None, None, Environment(framework="pytorch", version="2.1.0"), apis=("torch.histc",))
    loc = localize_gcrde(issue, ex, open_source("pytorch", "2.1.0", settings))
    assert loc.suspects[0].path.endswith("cuda/SummaryOps.cu")
    assert "nearest registered tree pytorch 2.6.0" in loc.reason


def test_sources_cli_add(tmp_path: Path, fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from sftl.cli import main

    monkeypatch.setenv("SFTL_HOME", str(tmp_path / "home"))
    out, err = io.StringIO(), io.StringIO()
    root = str(fixtures_dir / "sources" / "mini_pytorch")
    assert main(["sources", "add", "pytorch==2.6.0", root], out=out, err=err) == 0
    # the kernels are indexed at registration, so the first locate on the tree finds its cache warm
    assert "indexed" in err.getvalue() and "ATen kernel files" in err.getvalue()
    saved = sorted((tmp_path / "home").rglob("tree-pytorch-*.pickle"))
    assert saved
    stamps = [p.stat().st_mtime_ns for p in saved]
    # the tree standing in for another release reads that index as it is (no rebuild)
    from sftl.config import load_settings as settings_for
    from sftl.localize.gcrde import prepare_index

    near = open_source("pytorch", "2.1.0", settings_for({}, home=tmp_path / "home", offline=True))
    assert "nearest registered tree" in near.description and prepare_index(near) > 0
    assert [p.stat().st_mtime_ns for p in saved] == stamps
    assert main(["sources", "add", "pytorch==2.6.0", str(tmp_path / "missing")], out=out, err=err) == 2  # bad input
    out = io.StringIO()
    assert main(["sources", "list", "--json"], out=out, err=err) == 0
    assert json.loads(out.getvalue())[0]["kind"] == "tree"


def test_locate_without_kernels_says_what_to_run_and_uses_a_registered_tree(
    tmp_path: Path, fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo GCRDE issue (torch 2.13.0, the installed wheel: headers, no kernels) through the real CLI."""
    import io

    from sftl.cli import main

    pytest.importorskip("torch")
    monkeypatch.setenv("SFTL_HOME", str(tmp_path / "home"))
    demo = str(fixtures_dir / "demo" / "gcrde_histc_cpu_vs_cuda.json")
    out, err = io.StringIO(), io.StringIO()
    assert main(["locate", demo, "--offline", "--json"], out=out, err=err) == 8
    skipped = json.loads(out.getvalue())
    assert skipped["outcome"] == "skipped"
    assert "nor of any other release" in skipped["reason"]  # the one fetch, not the localizer's guesses
    for command in ("`sftl sources fetch pytorch==2.13.0`", "sftl sources add pytorch==2.13.0 DIR", "--source-root"):
        assert command in skipped["reason"]
    # a tree registered for another release stands in, and the reason names it
    assert main(["sources", "add", "pytorch==2.6.0", str(fixtures_dir / "sources" / "mini_pytorch")],
                out=io.StringIO(), err=io.StringIO()) == 0
    out = io.StringIO()
    assert main(["locate", demo, "--offline", "--json"], out=out, err=err) == 0
    located = json.loads(out.getvalue())
    assert located["outcome"] == "located" and located["suspects"][0]["path"].endswith("cuda/SummaryOps.cu")
    assert "nearest registered tree pytorch 2.6.0" in located["reason"]


def test_a_local_tree_listing_is_cached_until_a_folder_changes(tmp_path: Path, fixtures_dir: Path) -> None:
    root = tmp_path / "tree"
    shutil.copytree(fixtures_dir / "sources" / "mini_pytorch", root)
    cache = tmp_path / "cache"
    fresh = LocalTree(root, "pytorch", cache_dir=cache).list_files()
    assert list((cache / "index").glob("tree-pytorch-*-files.json"))
    assert LocalTree(root, "pytorch", cache_dir=cache).list_files() == fresh
    kernels = root / "aten/src/ATen/native/cuda"
    (kernels / "NewKernel.cu").write_text("// added\n")
    os.utime(kernels, ns=(time.time_ns(), time.time_ns() + 1_000_000_000))  # coarse-mtime filesystems too
    added = LocalTree(root, "pytorch", cache_dir=cache).list_files()
    assert "aten/src/ATen/native/cuda/NewKernel.cu" in added and len(added) == len(fresh) + 1
    (kernels / "NewKernel.cu").unlink()
    os.utime(kernels, ns=(time.time_ns(), time.time_ns() + 2_000_000_000))
    assert LocalTree(root, "pytorch", cache_dir=cache).list_files() == fresh
    assert LocalTree(root, "pytorch").list_files() == fresh  # no cache dir: listed as before


def test_tf_2_1_wheel_layout_maps_tensorflow_core_over_the_shim(tmp_path: Path) -> None:
    """TF 2.0/2.1 wheels keep the real package in tensorflow_core/; tensorflow/ is a shim over it."""
    import zipfile

    from sftl.sources import WheelSource, repo_path

    assert repo_path("tensorflow", "tensorflow_core/python/framework/ops.py") == "tensorflow/python/framework/ops.py"
    wheel = tmp_path / "tensorflow_cpu-2.1.0-cp37-cp37m-manylinux2010_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("tensorflow/__init__.py", "# shim\nfrom tensorflow_core import *\n")
        zf.writestr("tensorflow_core/__init__.py", "# the real package\n")
        zf.writestr("tensorflow_core/python/framework/ops.py", "class Tensor:\n    pass\n")
    src = WheelSource(wheel, "tensorflow", "2.1.0")
    assert sorted(src.list_files()) == ["tensorflow/__init__.py", "tensorflow/python/framework/ops.py"]
    assert src.read_text("tensorflow/__init__.py") == "# the real package\n"
    assert "class Tensor" in (src.read_text("tensorflow/python/framework/ops.py") or "")


def test_tensorflow_wheels_prefer_the_gpu_enabled_build() -> None:
    from sftl.sources.frameworks import wheel_packages

    assert wheel_packages("tensorflow", "1.15.0")[0] == "tensorflow-gpu"
    assert wheel_packages("tensorflow", "2.0.0")[0] == "tensorflow-gpu"
    assert wheel_packages("tensorflow", "2.1.0")[0] == "tensorflow"
    assert wheel_packages("tensorflow", "2.19.0") == ("tensorflow", "tensorflow-cpu")
    assert wheel_packages("pytorch", "2.0.0") == ("torch",)


def test_fetch_wheel_takes_the_gpu_build_and_falls_back_to_the_cpu_one(tmp_path: Path) -> None:
    links = tmp_path / "links"
    links.mkdir()
    for dist, ver, tag in (("tensorflow_gpu", "2.0.0", "cp37-cp37m-manylinux2010_x86_64"),
                           ("tensorflow_cpu", "2.0.0", "cp37-cp37m-manylinux2010_x86_64"),
                           ("tensorflow_cpu", "2.19.0", "cp311-cp311-manylinux2014_x86_64")):
        with zipfile.ZipFile(links / f"{dist}-{ver}-{tag}.whl", "w") as zf:
            zf.writestr("tensorflow/__init__.py", "")
            info = f"{dist}-{ver}.dist-info/"
            zf.writestr(info + "METADATA", f"Metadata-Version: 2.1\nName: {dist.replace('_', '-')}\nVersion: {ver}\n")
            zf.writestr(info + "WHEEL", f"Wheel-Version: 1.0\nGenerator: sftl-tests\nRoot-Is-Purelib: false\nTag: {tag}\n")
            zf.writestr(info + "RECORD", "")
    settings = load_settings(_pip_env(links), home=tmp_path / "home")
    assert fetch_wheel("tensorflow", "2.0.0", settings, python="3.7").name.startswith("tensorflow_gpu-")
    # no plain tensorflow 2.19.0 wheel in the index: the CPU-only one
    assert fetch_wheel("tensorflow", "2.19.0", settings, python="3.11").name.startswith("tensorflow_cpu-")
