"""The GCRDE localizer on small synthetic trees in PyTorch's and TensorFlow's real layouts, and on the installed torch."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from sftl.codegraph import native as nat
from sftl.localize.gcrde import (
    apis_from_code,
    divergent_side,
    localize_gcrde,
    tf_raw_ops,
    torch_op_names,
)
from sftl.localize.legacy import parse_cwrap
from sftl.model import Environment, Extraction, Issue, Outcome, Side, Snippet
from sftl.sources import LocalTree, SitePackages, WheelSource

NATIVE = "aten/src/ATen/native/"


@pytest.fixture
def mini(fixtures_dir: Path) -> LocalTree:
    return LocalTree(fixtures_dir / "sources" / "mini_pytorch", "pytorch", "2.6.0")


def report(title: str, apis: tuple[str, ...] = (), body: str = "", code: str = "", fw: str = "pytorch"):
    issue = Issue(repo=f"{fw}/{fw}", number=1, title=title, body=body)
    snippet = Snippet(code, "test") if code else None
    return issue, Extraction(snippet, None, Environment(framework=fw), apis=apis)


def test_histc_ranks_the_cuda_family_file_first_with_side_and_reason(mini: LocalTree) -> None:
    issue, ex = report("torch.histc gives a wrong last bin on CUDA", ("torch.randn", "torch.histc", "torch.Tensor.cuda"))
    loc = localize_gcrde(issue, ex, mini)
    assert loc.outcome is Outcome.LOCATED and loc.method == "sftl"
    first = loc.suspects[0]
    assert first.path == NATIVE + "cuda/SummaryOps.cu"
    assert first.side is Side.CUDA
    assert "_histc_cuda" in first.reason and "dispatch CUDA" in first.reason
    paths = [s.path for s in loc.suspects]
    # the CPU side is ranked too: the generic front end and the file registering its stub
    assert NATIVE + "Histogram.cpp" in paths and NATIVE + "cpu/HistogramKernel.cpp" in paths
    cpu = next(s for s in loc.suspects if s.path.endswith("HistogramKernel.cpp"))
    assert cpu.side is Side.CPU and "REGISTER_DISPATCH(histogramdd_stub" in cpu.reason
    assert [s.score for s in loc.suspects] == sorted((s.score for s in loc.suspects), reverse=True)


def test_cpu_divergence_puts_the_cpu_kernel_first(mini: LocalTree) -> None:
    issue, ex = report("histc differs", ("torch.histc",), body="The CPU result is wrong, the CUDA one is correct.")
    loc = localize_gcrde(issue, ex, mini)
    assert loc.suspects[0].side in (Side.CPU, Side.SHARED)
    assert "CPU result wrong" in loc.reason


def test_structured_op_is_followed_through_its_stub_to_both_devices(mini: LocalTree) -> None:
    issue, ex = report("Different results between CPU and CUDA", ("torch.tensor", "torch.add", "torch.Tensor.cuda"))
    loc = localize_gcrde(issue, ex, mini)
    top = loc.suspects[0]
    assert top.path == NATIVE + "cuda/BinaryAddSubKernel.cu"
    assert "REGISTER_DISPATCH(add_stub" in top.reason
    paths = [s.path for s in loc.suspects]
    # the shared launcher header is reachable, and so is the CPU registration
    assert NATIVE + "cuda/Loops.cuh" in paths[:3]
    assert NATIVE + "cpu/BinaryOpsKernel.cpp" in paths


def test_composite_op_reaches_the_kernels_it_calls(mini: LocalTree) -> None:
    issue, ex = report("nn.Softmax output differs on the GPU", ("torch.nn.Softmax",))
    loc = localize_gcrde(issue, ex, mini)
    assert loc.suspects[0].path == NATIVE + "cuda/SoftMax.cu"
    assert "softmax calls _softmax" in loc.suspects[0].reason


def test_same_file_helpers_lead_to_the_stub(mini: LocalTree) -> None:
    issue, ex = report("std is wrong on cuda", ("torch.Tensor.std",))
    loc = localize_gcrde(issue, ex, mini)
    assert loc.suspects[0].path == NATIVE + "cuda/ReduceMomentKernel.cu"
    assert "std_var_out" in loc.suspects[0].reason
    quantized = [s for s in loc.suspects if "/quantized/" in s.path]
    assert all(q.score < loc.suspects[0].score / 2 for q in quantized)  # a dense report: quantized kernels sink


def test_op_named_only_in_the_title_counts(mini: LocalTree) -> None:
    issue, ex = report("arange cuda bug", ())
    loc = localize_gcrde(issue, ex, mini)
    assert loc.suspects[0].path == NATIVE + "cuda/RangeFactories.cu"


def test_incidental_calls_do_not_outrank_the_subject(mini: LocalTree) -> None:
    apis = ("torch.manual_seed", "torch.randn", "torch.Tensor.cuda", "torch.arange", "torch.Tensor.cpu", "torch.allclose")
    issue, ex = report("Results differ between devices", apis)
    loc = localize_gcrde(issue, ex, mini)
    assert loc.suspects[0].path == NATIVE + "cuda/RangeFactories.cu"


def test_code_is_the_fallback_when_extraction_found_no_apis(mini: LocalTree) -> None:
    code = "import torch\nx = torch.rand(100)\nprint(torch.histc(x, bins=4), torch.histc(x.cuda(), bins=4))\n"
    assert "torch.histc" in apis_from_code(code, "pytorch")
    issue, ex = report("wrong result on GPU", (), code=code)
    loc = localize_gcrde(issue, ex, mini)
    assert loc.suspects[0].path == NATIVE + "cuda/SummaryOps.cu"


def test_th_era_ops_outside_the_yaml_are_found_by_definition(fixtures_dir: Path) -> None:
    tree = LocalTree(fixtures_dir / "sources" / "mini_pytorch_th", "pytorch", "0.4.0")
    issue, ex = report("Weird bug when using __rshift__() on cuda tensors", ("torch.Tensor.__rshift__",))
    loc = localize_gcrde(issue, ex, tree)
    assert loc.suspects[0].path == "aten/src/THC/generic/THCTensorMathPairwise.cu"
    assert "THCTensor" in loc.suspects[0].reason or "TH*Tensor_(rshift)" in loc.suspects[0].reason
    assert "not in native_functions.yaml" in loc.reason


def test_unknown_op_abstains_with_the_reason(mini: LocalTree) -> None:
    issue, ex = report("frobnicate is broken", ("torch.frobnicate",))
    for method in ("sftl", "paper"):
        loc = localize_gcrde(issue, ex, mini, method=method)
        assert loc.outcome is Outcome.ABSTAINED
        assert loc.suspects == ()
        assert "frobnicate" in loc.reason


def test_no_source_and_bad_method_are_skipped(mini: LocalTree) -> None:
    issue, ex = report("histc", ("torch.histc",))
    assert localize_gcrde(issue, ex, None).outcome is Outcome.SKIPPED
    assert localize_gcrde(issue, ex, mini, method="magic").outcome is Outcome.SKIPPED


def test_corrupt_yaml_paper_abstains_sftl_backs_off_to_contents(fixtures_dir: Path) -> None:
    tree = LocalTree(fixtures_dir / "sources" / "mini_pytorch_corrupt_yaml", "pytorch")
    issue, ex = report("histc bug on cuda", ("torch.histc",))
    paper = localize_gcrde(issue, ex, tree, method="paper")
    assert paper.outcome is Outcome.ABSTAINED and "line 4" in paper.reason
    ours = localize_gcrde(issue, ex, tree)
    assert ours.outcome is Outcome.LOCATED
    assert ours.suspects[0].path == NATIVE + "cuda/SummaryOps.cu"
    assert "back-off" in ours.reason and "dispatch kernels unknown" in ours.reason
    with pytest.raises(nat.NativeYamlError):
        nat.parse_native_functions("just: a mapping\n")


def test_a_wheel_without_kernels_is_skipped_with_what_to_do(tmp_path: Path, mini: LocalTree) -> None:
    whl = tmp_path / "torch-2.6.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        zf.writestr("torchgen/packaged/ATen/native/native_functions.yaml", mini.read_text(nat.NATIVE_YAML) or "")
    issue, ex = report("histc", ("torch.histc",))
    loc = localize_gcrde(issue, ex, WheelSource(whl, "pytorch"))
    assert loc.outcome is Outcome.SKIPPED and "--cxx" in loc.reason
    # the commands name the wheel's own release, ready to paste
    assert "`sftl sources fetch pytorch==2.6.0 --cxx`" in loc.reason and "sftl sources add pytorch==2.6.0 DIR" in loc.reason
    assert "--source-root" in loc.reason
    # the paper needs only names: it still answers from the yaml alone, and finds no file
    assert localize_gcrde(issue, ex, WheelSource(whl, "pytorch"), method="paper").outcome is Outcome.ABSTAINED


def test_paper_method_matches_names_as_published(mini: LocalTree) -> None:
    issue, ex = report("histc", ("torch.histc",))
    loc = localize_gcrde(issue, ex, mini, method="paper", top=5)
    assert loc.method == "paper" and loc.outcome is Outcome.LOCATED
    assert loc.suspects[0].path == NATIVE + "Histogram.cpp"  # 'HistogramHistc' ~ 'Histogram': the name trap
    assert "ratio" in loc.suspects[0].reason


def test_divergent_op_from_replay_leads(mini: LocalTree) -> None:
    issue, ex = report("model output differs on GPU", ("torch.histc", "torch.add"))
    loc = localize_gcrde(issue, ex, mini, divergent_op="aten::add")
    assert loc.suspects[0].path == NATIVE + "cuda/BinaryAddSubKernel.cu"
    assert "diverged in replay" in loc.suspects[0].reason or "add" in loc.reason.split(";")[0]


def test_top_limits_the_list(mini: LocalTree) -> None:
    issue, ex = report("histc", ("torch.histc",))
    assert len(localize_gcrde(issue, ex, mini, top=2).suspects) == 2


@pytest.mark.parametrize(
    ("api", "expected"),
    [
        ("torch.histc", "histc"),
        ("torch.Tensor.histc", "histc"),
        ("torch.nn.functional.interpolate", "upsample_nearest2d"),
        ("torch.nn.Conv2d", "conv2d"),
        ("torch.nn.LeakyReLU", "leaky_relu"),
        ("torch.nn.GELU", "gelu"),
        ("torch.nn.MSELoss", "mse_loss"),
        ("torch.nn.BCELoss", "binary_cross_entropy"),
        ("torch.nn.BatchNorm2d", "batch_norm"),
        ("torch.nn.CrossEntropyLoss", "cross_entropy_loss"),
        ("torch.nn.MaxPool2d", "max_pool2d"),
        ("torch.ops.aten.index_put", "index_put"),
        ("at::Tensor::__rshift__", "__rshift__"),
        ("torch.linalg.svd", "linalg_svd"),
        ("torch.distributions.Normal.icdf", "erfinv"),
    ],
)
def test_torch_op_names(api: str, expected: str) -> None:
    assert expected in torch_op_names(api)


def test_tf_raw_ops_from_table_python_source_and_rules(fixtures_dir: Path) -> None:
    tree = LocalTree(fixtures_dir / "sources" / "mini_tensorflow", "tensorflow")
    assert tf_raw_ops("tensorflow.math.reduce_mean") == ("Mean",)
    assert tf_raw_ops("tensorflow.math.bessel_i0e", tree) == ("BesselI0e",)  # from gen_special_math_ops.bessel_i0e
    assert tf_raw_ops("tensorflow.raw_ops.FloorMod") == ("FloorMod",)
    assert tf_raw_ops("tensorflow.math.some_new_op") == ("SomeNewOp",)


def test_tensorflow_registration_and_gpu_companion(fixtures_dir: Path) -> None:
    tree = LocalTree(fixtures_dir / "sources" / "mini_tensorflow", "tensorflow")
    issue, ex = report("tf.math.floormod gives wrong result on GPU", ("tensorflow.constant", "tensorflow.math.floormod"),
                       fw="tensorflow")
    loc = localize_gcrde(issue, ex, tree)
    assert loc.outcome is Outcome.LOCATED
    assert loc.suspects[0].path == "tensorflow/core/kernels/cwise_op_gpu_floor_mod.cu.cc"
    assert loc.suspects[0].side is Side.CUDA
    assert any('Name("FloorMod")' in s.reason for s in loc.suspects)
    issue, ex = report("reduce_mean differs on GPU", ("tensorflow.math.reduce_mean",), fw="tensorflow")
    loc = localize_gcrde(issue, ex, tree)
    assert loc.suspects[0].path == "tensorflow/core/kernels/reduction_ops_mean.cc"
    assert "GPU" in loc.suspects[0].reason


def test_tensorflow_without_contents_matches_names(tmp_path: Path) -> None:
    kernels = tmp_path / "tensorflow" / "core" / "kernels"
    kernels.mkdir(parents=True)
    for name in ("bincount_op.cc", "bincount_op_gpu.cu.cc", "cwise_op_add_1.cc"):
        (kernels / name).write_text("")  # listed but empty: no registration to read
    tree = LocalTree(tmp_path, "tensorflow")
    issue, ex = report("tf.math.bincount wrong on GPU", ("tensorflow.math.bincount",), fw="tensorflow")
    loc = localize_gcrde(issue, ex, tree)
    assert {s.path.rsplit("/", 1)[-1] for s in loc.suspects[:2]} == {"bincount_op.cc", "bincount_op_gpu.cu.cc"}
    assert "names" in loc.reason


@pytest.mark.parametrize(
    ("title", "body", "side"),
    [
        ("arange cuda bug", "", Side.CUDA),
        ("x", "works fine on CPU but gives nan on GPU", Side.CUDA),
        ("x", "It works on GPU but the CPU gives garbage", Side.CPU),
        ("x", "CPU result is wrong, cuda is correct", Side.CPU),
        ("results differ", "", Side.CUDA),
    ],
)
def test_divergent_side(title: str, body: str, side: Side) -> None:
    issue, ex = report(title, body=body)
    assert divergent_side(issue, ex).side is side


def test_line_reader_agrees_with_yaml_on_the_real_file() -> None:
    import yaml

    text = SitePackages("pytorch").read_text(nat.NATIVE_YAML)
    assert text is not None
    ours = nat.parse_native_functions(text)
    data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506
    assert sum(len(v) for v in ours.values()) == len(data)
    by_full = {f.full_name: f for fs in ours.values() for f in fs}
    for entry in data:
        full = entry["func"].split("(", 1)[0]
        expected: dict[str, str] = {}
        raw = entry.get("dispatch") or {}
        for keys, kernel in raw.items():
            for key in str(keys).split(","):
                expected[key.strip()] = str(kernel)
        assert by_full[full].dispatch == expected, full
        assert by_full[full].structured_delegate == entry.get("structured_delegate"), full


def test_th_era_reductions_reach_the_shared_functor_header(fixtures_dir: Path) -> None:
    tree = LocalTree(fixtures_dir / "sources" / "mini_pytorch_th", "pytorch", "0.4.0")
    issue, ex = report("torch.min and torch.max ignore nan in cuda", ("torch.max", "torch.min"))
    loc = localize_gcrde(issue, ex, tree, top=3)
    paths = [s.path for s in loc.suspects]
    # THCTensor_(maxall) only hands ReduceMax to THC_reduceAll: the functor's header holds the math (the real
    # fix of pytorch#6996 landed there), the generic definition (via Declarations.cwrap) right behind it
    assert paths[0] == "aten/src/THC/THCTensorMathReduce.cuh" and "ReduceMax" in loc.suspects[0].reason
    assert "aten/src/THC/generic/THCTensorMathReduce.cu" in paths
    assert "maxall" in loc.suspects[paths.index("aten/src/THC/generic/THCTensorMathReduce.cu")].reason


def test_th_era_nn_ops_follow_nn_yaml_cnames(fixtures_dir: Path) -> None:
    tree = LocalTree(fixtures_dir / "sources" / "mini_pytorch_th", "pytorch", "0.4.0")
    issue, ex = report("bilinear upsampling differs on GPU", ("torch.nn.functional.upsample_bilinear",))
    loc = localize_gcrde(issue, ex, tree)
    assert loc.suspects[0].path == "aten/src/THCUNN/generic/SpatialUpSamplingBilinear.cu"
    assert "SpatialUpSamplingBilinear" in loc.suspects[0].reason
    tables = parse_cwrap((tree.root / "aten/src/ATen/Declarations.cwrap").read_text())
    bindings = {op: {b.th for b in tables[op]} for op in ("max", "min")}
    assert bindings["max"] == {"maxall", "cmax"} and bindings["min"] == {"minall"}


def test_tf_op_names_come_from_the_generated_wrappers(fixtures_dir: Path) -> None:
    tree = LocalTree(fixtures_dir / "sources" / "mini_tensorflow", "tensorflow")
    assert tf_raw_ops("tensorflow.nn.lrn", tree) == ("LRN",)  # not "Lrn": the wrapper names the op
    issue, ex = report("tf.nn.lrn output differs on GPU", ("tensorflow.nn.lrn",), fw="tensorflow")
    loc = localize_gcrde(issue, ex, tree)
    assert loc.suspects[0].path == "tensorflow/core/kernels/lrn_op.cc"


def test_device_words_in_the_title_do_not_make_plumbing_a_subject(mini: LocalTree) -> None:
    issue, ex = report(
        "histc returns different results on CPU and CUDA",
        ("torch.tensor", "torch.histc", "torch.Tensor.cuda"),
        body="The CUDA result drops the values on the upper edge.",
    )
    loc = localize_gcrde(issue, ex, mini)
    assert loc.reason.startswith("ops: histc;")  # not "histc, cuda"
    assert "CUDA result wrong" in loc.reason
    assert all("for cuda" not in s.reason for s in loc.suspects)


def test_no_operator_at_all_abstains_but_shows_the_content_guesses(mini: LocalTree) -> None:
    issue, ex = report("weird histogram numbers on the gpu")
    loc = localize_gcrde(issue, ex, mini)
    assert loc.outcome is Outcome.ABSTAINED
    assert "no operator found" in loc.reason
    assert loc.suspects and all("TF-IDF" in s.reason for s in loc.suspects)


def test_installed_torch_has_headers_but_no_kernels_so_sftl_skips() -> None:
    issue, ex = report("histc wrong on cuda", ("torch.histc",))
    src = SitePackages("pytorch")  # the real torch 2.13.0 of this venv: torch/include headers only
    loc = localize_gcrde(issue, ex, src)
    assert loc.outcome is Outcome.SKIPPED and "headers only" in loc.reason
    paper = localize_gcrde(issue, ex, src, method="paper")  # names only: the yaml is enough to try
    assert paper.outcome in (Outcome.LOCATED, Outcome.ABSTAINED)


def test_local_tree_index_is_cached_on_disk_and_invalidated_by_edits(tmp_path: Path, fixtures_dir: Path) -> None:
    import shutil

    root = tmp_path / "tree"
    shutil.copytree(fixtures_dir / "sources" / "mini_pytorch", root)
    cache = tmp_path / "cache"
    issue, ex = report("torch.histc gives a wrong last bin on CUDA", ("torch.histc",))
    first = localize_gcrde(issue, ex, LocalTree(root, "pytorch", "2.6.0", cache_dir=cache))
    pickles = sorted((cache / "index").glob("tree-pytorch-*.pickle"))
    assert len(pickles) == 2  # the kernel index and the parsed native_functions.yaml
    stamps = {p: p.stat().st_mtime_ns for p in pickles}
    # a fresh provider object (a new process, as far as the memo knows) reads the saved index
    again = localize_gcrde(issue, ex, LocalTree(root, "pytorch", "2.6.0", cache_dir=cache))
    assert [s.path for s in again.suspects] == [s.path for s in first.suspects]
    assert {p: p.stat().st_mtime_ns for p in pickles} == stamps
    for pickled in pickles:  # a corrupt cache is rebuilt, never an error
        pickled.write_bytes(b"\x80\x05not a pickle")
    rebuilt = localize_gcrde(issue, ex, LocalTree(root, "pytorch", "2.6.0", cache_dir=cache))
    assert [s.path for s in rebuilt.suspects] == [s.path for s in first.suspects]
    assert all(p.stat().st_size > 100 for p in pickles)
    # an edit to an indexed file makes the saved index stale: the new definition is found
    extra = root / NATIVE / "cuda" / "HistcFix.cu"
    extra.write_text("namespace at::native {\nTensor& _histc_out_cuda(const Tensor& self, Tensor& out) {\n"
                     "  return out;\n}\n}\n")
    edited = localize_gcrde(issue, ex, LocalTree(root, "pytorch", "2.6.0", cache_dir=cache))
    assert NATIVE + "cuda/HistcFix.cu" in [s.path for s in edited.suspects]
    body = root / NATIVE / "cuda" / "SummaryOps.cu"
    body.write_text(body.read_text().replace("_histc_cuda", "_renamed_cuda"))
    renamed = localize_gcrde(issue, ex, LocalTree(root, "pytorch", "2.6.0", cache_dir=cache))
    top = next(s for s in renamed.suspects if s.path.endswith("SummaryOps.cu")) if any(
        s.path.endswith("SummaryOps.cu") for s in renamed.suspects) else None
    assert top is None or "_histc_cuda" not in top.reason
    # a tree without a cache dir works as before and writes nothing
    assert localize_gcrde(issue, ex, LocalTree(root, "pytorch", "2.6.0")).outcome is Outcome.LOCATED


@pytest.fixture
def math_tree(fixtures_dir: Path) -> LocalTree:
    return LocalTree(fixtures_dir / "sources" / "mini_pytorch_math", "pytorch", "2.6.0")


def test_the_header_defining_the_cuda_math_ranks_right_after_the_kernel(math_tree: LocalTree) -> None:
    issue, ex = report("torch.digamma returns a wrong value on CUDA", ("torch.digamma",))
    loc = localize_gcrde(issue, ex, math_tree)
    paths = [s.path for s in loc.suspects]
    assert paths[0] == NATIVE + "cuda/UnaryGammaKernels.cu"
    assert paths[1] == NATIVE + "cuda/Math.cuh"  # the device calc_digamma, above the generic launcher
    math = loc.suspects[1]
    assert math.side is Side.CUDA and "calc_digamma" in math.reason and "CUDA-only math" in math.reason
    assert paths.index(NATIVE + "cuda/Math.cuh") < paths.index(NATIVE + "cuda/Loops.cuh")
    # the host calc_digamma in Math.h is not what the CUDA kernel runs: never credited as its math
    assert all("used by digamma_kernel_cuda" not in s.reason for s in loc.suspects if s.path.endswith("/Math.h"))


def test_host_math_counts_as_cpu_code_for_a_cpu_divergence(math_tree: LocalTree) -> None:
    issue, ex = report("digamma differs", ("torch.digamma",), body="The CPU result is wrong, the CUDA one is correct.")
    loc = localize_gcrde(issue, ex, math_tree)
    paths = [s.path for s in loc.suspects]
    assert paths[0] == NATIVE + "cpu/UnaryOpsKernel.cpp"
    host = next(s for s in loc.suspects if s.path == NATIVE + "Math.h")
    # reached although the CPU kernel includes Math.h only through a header outside ATen/native
    assert paths.index(host.path) <= 2 and host.side is Side.CPU and "CPU-only math" in host.reason


def test_reduction_functors_are_followed_through_same_file_template_helpers(math_tree: LocalTree) -> None:
    issue, ex = report("torch.var is wrong on CUDA", ("torch.var",))
    loc = localize_gcrde(issue, ex, math_tree)
    shared = next(s for s in loc.suspects if s.path == NATIVE + "SharedReduceOps.h")
    # shared by both devices: credited, but as plain math, below the CUDA kernel
    # WelfordOps is named only inside std_var_kernel_impl<float>(...), the registered kernel's helper
    assert "defines WelfordOps (math) used by std_var_kernel_cuda" in shared.reason and "-only" not in shared.reason
    assert loc.suspects[0].path == NATIVE + "cuda/ReduceMomentKernel.cu"
    assert shared.score < loc.suspects[0].score


def test_registrations_generated_by_same_file_macros_are_indexed() -> None:
    text = (
        "#define IMPLEMENT_FLOAT_KERNEL(op)                                  \\\n"
        "  inline namespace CPU_CAPABILITY {                                 \\\n"
        "  static void op##_kernel(TensorIteratorBase& iter) { }             \\\n"
        "  }                                                                 \\\n"
        "  REGISTER_DISPATCH(op##_stub, &CPU_CAPABILITY::op##_kernel)\n"
        "\n"
        "IMPLEMENT_FLOAT_KERNEL(erfinv)\n"
        "IMPLEMENT_FLOAT_KERNEL(expm1)\n"
        "REGISTER_DISPATCH(digamma_stub, &CPU_CAPABILITY::digamma_kernel)\n"
    )
    assert nat.macro_registrations(text) == [("erfinv_stub", "erfinv_kernel"), ("expm1_stub", "expm1_kernel")]
    index = nat.KernelIndex({NATIVE + "cpu/UnaryOpsKernel.cpp": text})
    assert index.registrations["erfinv_stub"] == [(NATIVE + "cpu/UnaryOpsKernel.cpp", "erfinv_kernel")]
    assert index.registrations["digamma_stub"] == [(NATIVE + "cpu/UnaryOpsKernel.cpp", "digamma_kernel")]
    assert "op" not in {s.removesuffix("_stub") for s in index.registrations}  # the template is no registration
