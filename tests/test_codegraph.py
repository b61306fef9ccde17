"""The code graph of a release: readers of registrations, the composed graph, its cache, and a report's walk."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from test_candidates import write_files

from sftl.cli import main
from sftl.codegraph.facts import kernel_devices, op_key, read_facts
from sftl.codegraph.graph import build_graph, sizes_on_disk
from sftl.codegraph.walk import walk
from sftl.extract import extract
from sftl.localize.candidates.corpus import build_index
from sftl.localize.candidates.features import gather
from sftl.localize.candidates.report import read_report
from sftl.model import Issue
from sftl.sources import LocalTree

TF_FILES = {
    "tensorflow/core/ops/math_ops.cc": 'REGISTER_OP("SegmentSum")\n    .Input("data: T")\n    .SetShapeFn(SegmentReductionShapeFn);\n',
    "tensorflow/core/kernels/segment_reduction_ops_impl_1.cc": (
        '#include "tensorflow/core/kernels/segment_reduction_ops_impl.h"\n'
        "#define REGISTER_CPU_KERNEL_SEGMENT(name, type)  \\\n"
        "  REGISTER_KERNEL_BUILDER(Name(name).Device(DEVICE_CPU).TypeConstraint<type>(\"T\"), SegOp<type>)\n"
        "#define REGISTER_REAL_CPU_KERNELS(type) \\\n"
        '  REGISTER_CPU_KERNEL_SEGMENT("SegmentSum", type);\n'
        "TF_CALL_REAL_NUMBER_TYPES(REGISTER_REAL_CPU_KERNELS);\n"),
    "tensorflow/core/kernels/segment_reduction_ops_impl.h": "template <typename T> class SegOp {};\n",
    "tensorflow/core/kernels/segment_reduction_ops_gpu.cu.cc": (
        'REGISTER_KERNEL_BUILDER(Name("SegmentSum").Device(DEVICE_GPU).TypeConstraint<float>("T"), SegGpu<float>);\n'),
    "tensorflow/compiler/tf2xla/kernels/segment_reduction_ops.cc": 'REGISTER_XLA_OP(Name("SegmentSum"), SegXla);\n',
    "tensorflow/lite/kernels/segment_sum.cc": "TfLiteRegistration* Register_SEGMENT_SUM() {\n  static TfLiteRegistration r = {};\n  return &r;\n}\n",
    "tensorflow/core/kernels/image/resize_bilinear_op.cc": (
        'REGISTER_KERNEL_BUILDER(Name("ResizeBilinear").Device(DEVICE_CPU).TypeConstraint<float>("T"), ResizeOp);\n'),
    "tensorflow/core/kernels/data/map_dataset_op.cc": 'REGISTER_KERNEL_BUILDER(Name("MapDataset").Device(DEVICE_CPU), MapDatasetOp);\n',
    "tensorflow/python/ops/math_grad.py": '@ops.RegisterGradient("SegmentSum")\ndef _SegmentSumGrad(op, grad):\n  return grad\n',
    "tensorflow/python/ops/gen_math_ops.py": (
        "@tf_export('math.segment_sum')\ndef segment_sum(data, segment_ids, name=None):\n"
        "  _, _, _op, _outputs = _op_def_library._apply_op_helper(\n        \"SegmentSum\", data=data)\n"),
    "tensorflow/python/ops/image_ops_impl.py": (
        "@tf_export('image.resize', v1=[])\ndef resize_images_v2(images, size):\n"
        '  """Resizes.\n\n  >>> gen_math_ops.segment_sum(x)\n  """\n'
        "  return _resize_images_common(images, size)\n\n\n"
        "def _resize_images_common(images, size):\n  return gen_image_ops.resize_bilinear(images, size)\n"),
    "tensorflow/python/data/ops/dataset_ops.py": (
        "@tf_export('data.Dataset')\nclass DatasetV2(object):\n  def map(self, fn):\n    return MapDataset(self, fn)\n\n\n"
        "class MapDataset(DatasetV2):\n  def __init__(self, d, fn):\n    gen_dataset_ops.map_dataset(d, fn)\n"),
}
TORCH_FILES = {
    "aten/src/ATen/native/native_functions.yaml": (
        "- func: histc(Tensor self, int bins=100) -> Tensor\n  dispatch:\n    CPU: histogram_histc\n    CUDA: _histc_cuda\n"
        "\n- func: group_norm(Tensor input, int num_groups) -> Tensor\n\n"
        "- func: native_group_norm(Tensor input) -> Tensor\n  dispatch:\n    CPU, CUDA: native_group_norm\n"),
    "aten/src/ATen/native/Histogram.cpp": (
        "Tensor histogram_histc(const Tensor& self, int64_t bins) {\n  histogram_stub(self.device().type(), self);\n"
        "  return self;\n}\n"),
    "aten/src/ATen/native/cpu/HistogramKernel.cpp": "REGISTER_DISPATCH(histogram_stub, &histogram_kernel_impl);\n",
    "aten/src/ATen/native/cuda/SummaryOps.cu": "Tensor _histc_cuda(const Tensor& self, int64_t bins) {\n  return self;\n}\n",
    "aten/src/ATen/native/group_norm.cpp": (
        "Tensor group_norm(const Tensor& input, int64_t num_groups) {\n  return at::native_group_norm(input);\n}\n"
        "Tensor native_group_norm(const Tensor& input) {\n  GroupNormKernel(kCPU, input);\n  return input;\n}\n"),
    "torch/_meta_registrations.py": "@register_meta([aten.histc.default, aten.histc.out])\ndef meta_histc(x):\n    return x\n",
    "torch/nn/functional.py": "def group_norm(input, num_groups):\n    return torch.group_norm(input, num_groups)\n",
    "torch/nn/modules/normalization.py": (
        "class GroupNorm(Module):\n    def forward(self, input):\n        return F.group_norm(input, self.num_groups)\n"),
}


@pytest.fixture()
def tf_tree(tmp_path: Path) -> LocalTree:
    return LocalTree(write_files(tmp_path / "tf", TF_FILES), "tensorflow", "2.4.0")


@pytest.fixture()
def torch_tree(tmp_path: Path) -> LocalTree:
    return LocalTree(write_files(tmp_path / "pt", TORCH_FILES), "pytorch", "2.4.0")


def test_one_key_for_every_spelling_of_an_op() -> None:
    assert op_key("ResizeBilinear") == op_key("resize_bilinear") == op_key("RESIZE_BILINEAR") == "resizebilinear"


def test_tensorflow_registrations_are_read_per_layer_device_and_dtype() -> None:
    kernels = read_facts("tensorflow/core/kernels/segment_reduction_ops_impl_1.cc",
                         TF_FILES["tensorflow/core/kernels/segment_reduction_ops_impl_1.cc"], "tensorflow")
    assert kernels is not None
    assert ("kernel", "SegmentSum", "cpu") in kernels.sites  # through the family macro, not a literal Name("...")
    assert {"float", "int32", "double"} <= kernels.dtypes  # TF_CALL_REAL_NUMBER_TYPES
    gpu = read_facts("tensorflow/core/kernels/segment_reduction_ops_gpu.cu.cc",
                     TF_FILES["tensorflow/core/kernels/segment_reduction_ops_gpu.cu.cc"], "tensorflow")
    assert gpu is not None and gpu.sites == (("kernel", "SegmentSum", "gpu"),) and gpu.dtypes == {"float"}
    for path, layer in (("tensorflow/core/ops/math_ops.cc", "op_def"),
                        ("tensorflow/compiler/tf2xla/kernels/segment_reduction_ops.cc", "xla"),
                        ("tensorflow/lite/kernels/segment_sum.cc", "tflite"),
                        ("tensorflow/python/ops/math_grad.py", "gradient")):
        facts = read_facts(path, TF_FILES[path], "tensorflow")
        assert facts is not None and op_key(facts.sites[0][1]) == "segmentsum" and facts.sites[0][0] == layer, path


def test_elementwise_families_register_per_device() -> None:
    text = ('REGISTER5(BinaryOp, CPU, "Add", functor::add, float, Eigen::half, double, int32, int64);\n'
            'REGISTER3(BinaryOp, GPU, "Add", functor::add, float, Eigen::half, double);\n')
    facts = read_facts("tensorflow/core/kernels/cwise_op_add_1.cc", text, "tensorflow")
    assert facts is not None
    assert {("kernel", "Add", "cpu"), ("kernel", "Add", "gpu")} <= set(facts.sites)
    assert kernel_devices("tensorflow/core/kernels/cwise_op_add_1.cc", text, "Add") == {"cpu", "gpu"}
    assert kernel_devices("tensorflow/core/kernels/cwise_op_add_1.cc", text, "Sub") == set()


def test_a_python_function_s_ops_leave_out_its_docstring_examples() -> None:
    facts = read_facts("tensorflow/python/ops/image_ops_impl.py", TF_FILES["tensorflow/python/ops/image_ops_impl.py"],
                       "tensorflow")
    assert facts is not None
    assert facts.functions["resize_images_v2"].ops == ()  # `>>> gen_math_ops.segment_sum` is an example
    assert "_resize_images_common" in facts.functions["resize_images_v2"].calls
    assert facts.functions["_resize_images_common"].ops == ("resizebilinear",)
    assert ("image.resize", "resize_images_v2") in facts.exports


def test_public_names_reach_their_ops_kernels_and_registrations(tf_tree: LocalTree, tmp_path: Path) -> None:
    graph = build_graph(tf_tree, tmp_path / "cache")
    assert dict(graph.ops_of("image.resize")) == {"resizebilinear": 2}  # through a same-file helper
    assert dict(graph.ops_of("math.segment_sum")) == {"segmentsum": 1}  # a generated wrapper is its op
    assert "mapdataset" in dict(graph.ops_of("data.Dataset.map"))  # an exported class's method
    reached = {r.path: r for r in walk(graph, ["raw_ops.SegmentSum"], [], dtypes=["half"])}
    assert {"tensorflow/core/ops/math_ops.cc", "tensorflow/core/kernels/segment_reduction_ops_impl_1.cc",
            "tensorflow/core/kernels/segment_reduction_ops_gpu.cu.cc", "tensorflow/lite/kernels/segment_sum.cc",
            "tensorflow/compiler/tf2xla/kernels/segment_reduction_ops.cc", "tensorflow/python/ops/math_grad.py"} <= set(reached)
    cpu = reached["tensorflow/core/kernels/segment_reduction_ops_impl_1.cc"]
    assert cpu.named_op and cpu.hops == 1 and cpu.layers == {"kernel"} and cpu.devices == {"cpu"}
    assert cpu.dtype_registered == 1.0  # half is among the real number types
    assert reached["tensorflow/core/kernels/segment_reduction_ops_gpu.cu.cc"].dtype_registered == 0.0  # float only
    helper = reached["tensorflow/core/kernels/segment_reduction_ops_impl.h"]  # the kernel's own header
    assert helper.layers == {"helper"} and helper.hops == 2
    assert "registers the CPU kernel of SegmentSum" in cpu.reason
    # the dataset op's kernel, from the public method the report calls
    assert "tensorflow/core/kernels/data/map_dataset_op.cc" in {r.path for r in walk(graph, ["data.Dataset.map"], [])}


def test_pytorch_ops_reach_dispatch_kernels_stubs_and_python_registrations(torch_tree: LocalTree, tmp_path: Path) -> None:
    graph = build_graph(torch_tree, tmp_path / "cache")
    sites = {(s.path, s.layer, s.device) for s in graph.sites["histc"]}
    assert {("aten/src/ATen/native/Histogram.cpp", "dispatch", "cpu"),
            ("aten/src/ATen/native/cuda/SummaryOps.cu", "dispatch", "gpu"),
            ("aten/src/ATen/native/cpu/HistogramKernel.cpp", "stub", "cpu"),
            ("torch/_meta_registrations.py", "meta", "")} <= sites
    # a module's class to its functional, then to the composite op, whose kernel calls the op that computes it
    reached = {r.path: r for r in walk(graph, ["torch.nn.GroupNorm"], ["GroupNorm"])}
    assert "aten/src/ATen/native/group_norm.cpp" in reached
    assert "nativegroupnorm" in reached["aten/src/ATen/native/group_norm.cpp"].ops
    assert {r.path for r in walk(graph, ["torch.histc"], ["histc"])} >= {"aten/src/ATen/native/Histogram.cpp"}


def test_the_graph_is_kept_and_loaded_not_rebuilt(tf_tree: LocalTree, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = build_graph(tf_tree, cache)
    kept = sizes_on_disk(cache)
    assert any(name.startswith("graph-") for name in kept) and any(name.startswith("layer-") for name in kept)
    graph_file = next((cache / "codegraph").glob("graph-*.pkl"))
    with graph_file.open("rb") as fh:
        assert pickle.load(fh).sites == first.sites
    graph_file.write_bytes(b"damaged")  # a damaged file is built again, not an error
    assert build_graph(tf_tree, cache).sites == first.sites


def test_a_report_s_walk_becomes_candidates_with_graph_features(tf_tree: LocalTree, tmp_path: Path) -> None:
    report_issue = Issue(repo="tensorflow/tensorflow", number=7, title="Segfault in tf.raw_ops.SegmentSum with half",
                         body="```python\nimport tensorflow as tf\ntf.raw_ops.SegmentSum(data=tf.ones([2], tf.float16), "
                              "segment_ids=[5, 1])\n```\nSegmentation fault (core dumped)\n",
                         created_at="2021-05-01T00:00:00Z", html_url="https://github.com/tensorflow/tensorflow/issues/7")
    report = read_report(report_issue, extract(report_issue), "tensorflow")
    assert report.named_ops == ("SegmentSum",) and "half" in report.dtypes
    assert dict(report.cues)["cue_crash"] == 1.0 and dict(report.cues)["cue_hang"] == 0.0
    cache = tmp_path / "cache"
    candidates = {c.path: c for c in gather(build_index(tf_tree, cache), report, graph=build_graph(tf_tree, cache))}
    kernel = candidates["tensorflow/core/kernels/segment_reduction_ops_impl_1.cc"].features
    assert kernel["graph_kernel"] == 1.0 and kernel["graph_named_op"] == 1.0 and kernel["graph_cpu"] == 1.0
    assert kernel["graph_dtype_registered"] == 1.0 and kernel["cue_crash"] == 1.0
    assert candidates["tensorflow/core/ops/math_ops.cc"].features["graph_op_def"] == 1.0
    assert "graph_rank" not in candidates["tensorflow/core/kernels/data/map_dataset_op.cc"].features


def test_sources_graph_prints_the_size_and_a_walk(tf_tree: LocalTree, sftl_home: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sources", "graph", "tensorflow==2.4.0", "raw_ops.SegmentSum", "--source-root", str(tf_tree.root),
                 "--offline", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ops"] >= 3 and out["kept_bytes"] > 0
    assert "tensorflow/lite/kernels/segment_sum.cc" in {r["path"] for r in out["walks"]["raw_ops.SegmentSum"]}
    assert main(["sources", "graph", "nonsense==1", "--offline"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
