"""QA regressions for the day's changes: hostile inputs give a clear error or a degraded value, never a crash."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
from test_legacy_era_layers import WHEELS, zip_tree
from test_pipeline_screen_cache import _corpus

from sftl.config import Settings, load_settings
from sftl.errors import SourceError
from sftl.extract import extract, extract_apis
from sftl.localize.gcrde import localize_gcrde
from sftl.model import Environment, Extraction, Issue, Outcome
from sftl.pipeline import corpus_screener
from sftl.screen import default_screener
from sftl.sources import LayeredSource, WheelSource, open_source, register_tree, release_at, wheel_cache_dir


def _garble_members(wheel: Path) -> None:
    """Flip bytes inside the members' data, keeping the zip's central directory intact (a bad download/disk)."""
    data = bytearray(wheel.read_bytes())
    for i in range(200, len(data) // 2):
        data[i] ^= 0x5A
    wheel.write_bytes(bytes(data))


def test_a_corrupt_deflate_stream_is_a_source_error_not_a_zlib_traceback(tmp_path: Path) -> None:
    wheel = tmp_path / "torch-1.0.0-cp36-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("torch/include/ATen/Foo.h", "int x;\n" * 5000)
    data = bytearray(wheel.read_bytes())
    for i in range(60, 70):  # inside the deflate stream, past the local header
        data[i] ^= 0xFF
    wheel.write_bytes(bytes(data))
    src = WheelSource(wheel, "pytorch")
    with pytest.raises(SourceError, match="cannot read torch/include/ATen/Foo.h"):
        src.read_text("aten/src/ATen/Foo.h")


def _offline_home(tmp_path: Path, fixtures_dir: Path) -> Settings:
    s = load_settings({}, home=tmp_path / "home", offline=True)
    tree = tmp_path / "pytorch-1.13.1"
    shutil.copytree(fixtures_dir / "legacy_era_tree_1_13", tree)
    register_tree(s, "pytorch", "1.13.1", tree)
    for version, (folder, name) in WHEELS.items():
        zip_tree(fixtures_dir / folder, wheel_cache_dir(s, "pytorch", version) / name)
    return s


def test_a_corrupt_successor_wheel_only_loses_the_op_history_hint(tmp_path: Path, fixtures_dir: Path) -> None:
    s = _offline_home(tmp_path, fixtures_dir)
    _garble_members(next(wheel_cache_dir(s, "pytorch", "1.4.0").glob("*.whl")))
    src = open_source("pytorch", "1.0.1", s)
    issue = Issue(repo="pytorch/pytorch", number=1, title="x >> 1 multiplies on CUDA float tensors",
                  body="The CUDA result is wrong; the CPU divides correctly.")
    ex = Extraction(snippet=None, traceback=None, apis=("torch.Tensor.__rshift__",),
                    environment=Environment(framework="pytorch"))
    loc = localize_gcrde(issue, ex, src, top=5)
    assert loc.outcome is Outcome.LOCATED, loc.reason  # was SKIPPED: "source unavailable: cannot read ... 1.4.0"
    assert loc.suspects[0].path == "aten/src/THC/generic/THCTensorMathPairwise.cu"


@pytest.mark.parametrize("damage", [
    {"bogus": "not a list"}, {"bogus": [10 ** 9]}, {"bogus": [-1]}, {"bogus": ["3"]}, {"bogus": [1.5]},
])
def test_damaged_kept_keyword_terms_are_ignored_and_rebuilt(tmp_path: Path, damage: dict[str, object]) -> None:
    from sftl.store import Store

    store = Store(load_settings(home=tmp_path).db_path)
    issues = _corpus(40)
    for issue in issues:
        store.upsert_issue(issue)
    assert corpus_screener(issues[0], store) is not None
    key, payload = next(store.iter_results("keyword-terms"))
    terms = payload["terms"]
    # every kept entry damaged the same way: the fit must read them all again and equal a fresh fit
    store.save_result("keyword-terms", key, {"terms": {d: next(iter(damage.values())) for d in terms}})
    fitted = corpus_screener(issues[0], store)
    others = [i for i in store.iter_issues() if i.number != issues[0].number]
    assert fitted is not None and np.allclose(fitted.idf_, default_screener([*others, issues[0]]).idf_)
    assert next(p for _, p in store.iter_results("keyword-terms"))["terms"] == terms  # rebuilt


def test_an_impossible_date_names_no_release() -> None:
    assert release_at("pytorch", "2019-13-45T00:00:00Z") is None  # was 1.3.1
    assert release_at("tensorflow", "2019-02-30") is None
    assert release_at("pytorch", "2019-02-28") == "1.0.1"


def test_open_source_guesses_no_release_for_a_date_past_its_table(tmp_path: Path, fixtures_dir: Path) -> None:
    s = load_settings({}, home=tmp_path / "home", offline=True)
    register_tree(s, "pytorch", "1.4.0", fixtures_dir / "legacy_tree_1_4")
    with pytest.raises(SourceError, match="names no pytorch version"):
        open_source("pytorch", None, s, created_at="2099-01-01T00:00:00Z")  # was "2.9.0 was current on 2099-01-01"
    dated = open_source("pytorch", None, s, created_at="2020-02-20T10:00:00Z")
    assert dated.version == "1.4.0" and "1.4.0 was current on 2020-02-20" in dated.description


@pytest.mark.parametrize("expr", ["x >> " * 1200 + "x", "x @ " * 1200 + "x", "-" * 1200 + "x", "x" + ".sum()" * 1200])
def test_a_snippet_nested_past_the_stack_keeps_the_rest_of_the_report(expr: str) -> None:
    code = f"import torch\nx = torch.ones(3)\ny = {expr}\n"
    assert "torch.ones" in extract_apis(code, "pytorch")  # was RecursionError
    body = f"Wrong on CUDA.\n\n```python\n{code}print(y)\n```\n"
    ex = extract(Issue(repo="pytorch/pytorch", number=5, title="rshift differs on CPU and CUDA", body=body))
    assert not any("extraction failed" in p for p in ex.problems), ex.problems  # was: everything dropped
    assert ex.environment.framework == "pytorch" and ex.snippet is not None


@pytest.mark.parametrize("raw", ['"hello"', "[1, 2]", "null", "not json at all"])
def test_a_kept_terms_row_that_is_no_object_is_rebuilt(tmp_path: Path, raw: str) -> None:
    import sqlite3

    from sftl.store import Store

    db = load_settings(home=tmp_path).db_path
    store = Store(db)
    issues = _corpus(40)
    for issue in issues:
        store.upsert_issue(issue)
    assert corpus_screener(issues[0], store) is not None
    key, payload = next(store.iter_results("keyword-terms"))
    store.close()
    with sqlite3.connect(db) as con:  # damaged outside sftl
        con.execute("UPDATE results SET payload=? WHERE kind='keyword-terms'", (raw,))
    con.close()
    store = Store(db)
    # was AttributeError ('str' object has no attribute 'get') / StoreError: locate could not screen at all
    assert corpus_screener(issues[0], store) is not None
    assert store.get_result("keyword-terms", key) == payload
    store.close()


def test_a_cached_wheel_without_a_version_in_its_name_takes_its_cache_folders_release(
        tmp_path: Path, fixtures_dir: Path) -> None:
    s = _offline_home(tmp_path, fixtures_dir)
    era = next(wheel_cache_dir(s, "pytorch", "1.0.1").glob("*.whl"))
    era.rename(era.with_name("torch.whl"))  # dropped into the cache by hand
    src = open_source("pytorch", "1.0.0", s)  # no wheel of 1.0.0: 1.0.1's stands for its era
    assert isinstance(src, LayeredSource)
    # was None: the era's binding was never consulted, and the era wheel itself became the "later" release
    assert src.era_release == "1.0.1"
    assert [p.version for p in src.successors] == ["1.4.0"]


def test_string_formatting_is_no_remainder_and_a_mask_inverts() -> None:
    code = ('import torch\nx = torch.ones(3)\nprint("loss: %f" % x.sum())\nprint(f"{x}" "%s" % x)\n'
            "m = x > 0\ny = ~m\n")
    apis = extract_apis(code, "pytorch")
    assert "torch.Tensor.remainder" not in apis  # was there: "loss: %f" % tensor read as torch.remainder
    assert "torch.Tensor.bitwise_not" in apis  # was missing: a comparison's mask is a tensor
    assert "torch.Tensor.remainder" in extract_apis("import torch\nx = torch.ones(3)\ny = x % 2\n")
    assert "torch.Tensor.bitwise_not" not in extract_apis("import torch\nx = torch.ones(3)\nf = ~(x is None)\n")


@pytest.mark.parametrize("damage", ["zero", "truncated"])
def test_a_broken_wheel_of_the_reports_release_says_how_to_replace_it(
        tmp_path: Path, fixtures_dir: Path, damage: str) -> None:
    s = _offline_home(tmp_path, fixtures_dir)
    wheel = next(wheel_cache_dir(s, "pytorch", "1.0.1").glob("*.whl"))
    data = wheel.read_bytes()
    wheel.write_bytes(b"" if damage == "zero" else data[: len(data) // 2])
    with pytest.raises(SourceError, match=r"cannot open wheel .*; delete it and run `sftl sources fetch pytorch==1.0.1`"):
        open_source("pytorch", "1.0.1", s)
    assert wheel.exists()  # never deleted for the user


def test_empty_tf_headers_are_not_said_to_declare_the_functor(tmp_path: Path) -> None:
    from sftl.sources import LocalTree

    kernels = tmp_path / "tf" / "tensorflow" / "core" / "kernels"
    kernels.mkdir(parents=True)
    (kernels / "argmax_op.h").write_text("")  # an empty header: named after the op, declares nothing
    issue = Issue(repo="tensorflow/tensorflow", number=1, title="tf.math.argmax returns a wrong index on GPU", body="")
    ex = Extraction(None, None, Environment(framework="tensorflow"), apis=("tensorflow.math.argmax",))
    loc = localize_gcrde(issue, ex, LocalTree(tmp_path / "tf", "tensorflow", "2.6.0"))
    assert loc.outcome is Outcome.LOCATED
    assert "declares functor" not in " ".join(s.reason for s in loc.suspects)
    assert "declaring the op's functor or named after it" in loc.reason  # was: "... declaring the op's functor"


def test_a_cross_device_report_over_a_tree_without_cuda_code_says_so(tmp_path: Path) -> None:
    from sftl.sources import LocalTree

    native = tmp_path / "pt" / "aten" / "src" / "ATen" / "native"
    (native / "cpu").mkdir(parents=True)
    (native / "BinaryOps.cpp").write_text("Tensor __rshift__(const Tensor& self, const Scalar& other) { return self; }\n")
    (native / "cpu" / "BinaryOpsKernel.cpp").write_text(
        "void rshift_kernel(TensorIteratorBase& iter) { cpu_kernel(iter, [](float a, float b) { return a / b; }); }\n")
    issue = Issue(repo="pytorch/pytorch", number=1, title="x >> 1 wrong on cuda:1 vs cuda:0",
                  body="Running on cuda:1 gives 8, cuda:0 gives 2.")
    ex = Extraction(None, None, Environment(framework="pytorch"), apis=("torch.Tensor.__rshift__",))
    loc = localize_gcrde(issue, ex, LocalTree(tmp_path / "pt", "pytorch", "1.13.1"))
    assert "non-default CUDA device" in loc.reason  # was silent: CPU files ranked as if the cue were unread
    assert "no CUDA launch path of the op" in loc.reason


@pytest.mark.parametrize("damaged", [
    b"\x80\x05\x95\xff\xff\xff\xff\xff\xff\xff\xff.",  # OverflowError: frame length
    b"\x80\x04\x8e\xff\xff\xff\xff\xff\xff\xff\x7f.",  # OverflowError: byte string too large
    b"",
])
def test_a_damaged_kernel_index_cache_is_rebuilt_not_raised(tmp_path: Path, damaged: bytes) -> None:
    from sftl.localize._native import KernelIndex

    cache = tmp_path / "index.pkl"
    cache.write_bytes(damaged)
    assert KernelIndex.load(cache, "key") is None  # was OverflowError out of locate


@pytest.mark.gpu
def test_the_soft_guide_pulls_back_a_cuda_input() -> None:
    import torch

    from sftl.nansearch.soft_assertions import SoftGuide, pull_back

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device (torch.cuda.is_available() is false)")
    leaf = torch.full((4,), 0.5, device="cuda", requires_grad=True)
    x = leaf * 2.0
    direction = SoftGuide().direction("log", x)
    assert direction is not None and direction.device == x.device  # was a CPU tensor: autograd rejected it
    pulled = pull_back(x, direction, [leaf])
    assert pulled is not None and pulled[0] is not None


def test_fields_after_many_blank_lines_are_read() -> None:
    """The speed of this case (once quadratic: 20k blank lines ~25 s) is measured by bench/bench_extract_speed.py."""
    from sftl.extract import parse_environment

    body = "PyTorch version: 1.13.1\n" + " \n" * 2000 + "- Python version: 3.10.4\n"
    env = parse_environment(body, "pytorch")
    assert (env.version, env.python) == ("1.13.1", "3.10.4")
