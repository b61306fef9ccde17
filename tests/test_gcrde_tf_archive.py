"""TensorFlow discrepancies over full kernel sources (a release archive): registrations, their GPU files, functor headers."""

from __future__ import annotations

from pathlib import Path

import pytest

from sftl.localize.gcrde import localize_gcrde
from sftl.model import Environment, Extraction, Issue, Outcome
from sftl.sources import LocalTree

TREE = {
    'tensorflow/core/kernels/cwise_op_floor_mod.cc': '#include "tensorflow/core/kernels/cwise_ops_common.h"\nREGISTER3(BinaryOp, CPU, "FloorMod", functor::safe_floor_mod, int32, int64, float);\nREGISTER(BinaryOp, GPU, "FloorMod", functor::floor_fmod, float);\n',
    'tensorflow/core/kernels/cwise_op_gpu_floor_mod.cu.cc': '#include "tensorflow/core/kernels/cwise_ops_gpu_common.cu.h"\nDEFINE_BINARY1(floor_fmod, float);\n',
    'tensorflow/core/kernels/cwise_ops.h': 'namespace functor {\ntemplate <typename T>\nstruct safe_floor_mod : safe_base<T, Eigen::internal::google_floor_mod<T>> {};\ntemplate <typename T>\nstruct floor_fmod : base<T, Eigen::internal::google_floor_fmod<T>> {};\nstruct unrelated_functor {};\n}\n',
    'tensorflow/core/kernels/non_max_suppression_op.cc': 'REGISTER_KERNEL_BUILDER(Name("NonMaxSuppressionV3").TypeConstraint<float>("T").Device(DEVICE_CPU), NonMaxSuppressionV3Op<CPUDevice, float>);\n',
    'tensorflow/core/kernels/non_max_suppression_op.cu.cc': 'REGISTER_KERNEL_BUILDER(Name("NonMaxSuppressionV3").TypeConstraint<float>("T").Device(DEVICE_GPU).HostMemory("max_output_size"), NonMaxSuppressionV3GPUOp);\n',
    'tensorflow/core/kernels/relu_op.cc': 'REGISTER_KERNEL_BUILDER(Name("Relu").Device(DEVICE_CPU), ReluOp<CPUDevice, float>);\n',
    'tensorflow/core/kernels/topk_op.cc': '#include "tensorflow/core/kernels/topk_op.h"\ntemplate <typename Device, typename T>\nclass TopK : public OpKernel {\n  void Compute(OpKernelContext* context) override { functor::TopKFunctor<Device, T>::Compute(context); }\n};\n#define REGISTER_KERNELS(type) \\\n  REGISTER_KERNEL_BUILDER(Name("TopKV2").Device(DEVICE_CPU).TypeConstraint<type>("T"), TopK<CPUDevice, type>)\nTF_CALL_REAL_NUMBER_TYPES(REGISTER_KERNELS);\n#define REGISTER_KERNELS_GPU(type) \\\n  REGISTER_KERNEL_BUILDER(Name("TopKV2").Device(DEVICE_GPU).TypeConstraint<type>("T").HostMemory("k"), TopK<GPUDevice, type>)\n',
    'tensorflow/core/kernels/topk_op.h': 'namespace functor {\ntemplate <typename Device, typename T>\nstruct TopKFunctor;\n}\n',
    'tensorflow/core/kernels/topk_op_gpu.h': 'namespace functor {\ntemplate <typename T>\nstruct TopKFunctor<GPUDevice, T> {\n  static Status Compute(OpKernelContext* context) { for (int i = 0; i < n; i++) {} }\n};\n}\n',
    'tensorflow/core/kernels/topk_op_gpu_double.cu.cc': '#include "tensorflow/core/kernels/topk_op_gpu.h"\ntemplate struct functor::TopKFunctor<GPUDevice, double>;\n',
    'tensorflow/core/kernels/topk_op_gpu_float.cu.cc': '#include "tensorflow/core/kernels/topk_op_gpu.h"\ntemplate struct functor::TopKFunctor<GPUDevice, float>;\n',
}


@pytest.fixture
def tree(tmp_path: Path) -> LocalTree:
    for rel, text in TREE.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return LocalTree(tmp_path, "tensorflow", "2.16.1")


def _locate(tree: LocalTree, title: str, api: str) -> list[tuple[str, str]]:
    issue = Issue("tensorflow/tensorflow", 1, title, "the GPU result differs from the CPU result")
    ex = Extraction(None, None, Environment(framework="tensorflow", version="2.16.1"), apis=(api,))
    loc = localize_gcrde(issue, ex, tree)
    assert loc.outcome is Outcome.LOCATED and "REGISTER_KERNEL_BUILDER in contents" in loc.reason
    return [(s.path.rsplit("/", 1)[-1], s.reason) for s in loc.suspects]


def test_gpu_kernels_split_by_dtype_rank_beside_the_registering_file(tree: LocalTree) -> None:
    ranked = [p for p, _ in _locate(tree, "tf.math.top_k gives wrong indices on GPU, right on CPU", "tensorflow.math.top_k")]
    assert set(ranked[:3]) == {"topk_op_gpu.h", "topk_op_gpu_float.cu.cc", "topk_op_gpu_double.cu.cc"}
    assert ranked.index("topk_op.cc") < ranked.index("topk_op.h")


def test_the_header_declaring_a_registered_functor_is_ranked_with_the_reason(tree: LocalTree) -> None:
    ranked = _locate(tree, "tf.math.floormod differs on GPU vs CPU", "tensorflow.math.floormod")
    assert [p for p, _ in ranked[:2]] == ["cwise_op_gpu_floor_mod.cu.cc", "cwise_op_floor_mod.cc"]
    header = dict(ranked)["cwise_ops.h"]
    assert "declares functor::floor_fmod" in header and "unrelated_functor" not in header


def test_a_gpu_registration_in_a_cu_cc_file_ranks_first(tree: LocalTree) -> None:
    ranked = [p for p, _ in _locate(tree, "tf.image.non_max_suppression GPU differs from CPU",
                                     "tensorflow.image.non_max_suppression")]
    assert ranked[:2] == ["non_max_suppression_op.cu.cc", "non_max_suppression_op.cc"]
    assert "relu_op.cc" not in ranked
