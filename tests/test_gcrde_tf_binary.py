"""TensorFlow GCRDE from a wheel without kernel sources: the kernel files its compiled libraries name (real gcc builds)."""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from sftl.localize.gcrde import localize_gcrde
from sftl.model import Environment, Extraction, Issue, Localization, Outcome, Side
from sftl.sources import LocalTree, WheelSource

K = "tensorflow/core/kernels/"
NAMED = "named by the release's compiled libraries"

C_SOURCE = r"""
#include <stdio.h>
static const char *files[] = { NAMES };
int log_at(int i) { fprintf(stderr, "%s:%d\n", __FILE__, __LINE__); return puts(files[i]); }
"""


def tf_wheel(tmp: Path, version: str, named: list[str], headers: dict[str, str] | None = None) -> WheelSource:
    """A wheel whose library was compiled from tensorflow/core/kernels/<named[0]> and names the rest (as CHECKs do)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    tmp.mkdir(parents=True, exist_ok=True)
    src = tmp / "repo" / named[0]
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(C_SOURCE.replace("NAMES", ", ".join(json.dumps(n) for n in named[1:]) or '""'), encoding="utf-8")
    lib = tmp / "libtensorflow_framework.so.2"
    subprocess.run(["gcc", "-x", "c", "-shared", "-fPIC", "-o", str(lib), named[0]], cwd=tmp / "repo",
                   check=True, capture_output=True)
    wheel = tmp / f"tensorflow-{version}-cp37-cp37m-manylinux2010_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("tensorflow/__init__.py", "")
        zf.write(lib, "tensorflow/libtensorflow_framework.so.2")
        for path, text in (headers or {}).items():
            zf.writestr("tensorflow/include/" + path, text)
    return WheelSource(wheel, "tensorflow")


def locate(source: WheelSource | LocalTree, title: str, op: str, body: str = "") -> Localization:
    issue = Issue(repo="tensorflow/tensorflow", number=1, title=title, body=body)
    ex = Extraction(None, None, Environment(framework="tensorflow"), apis=(f"tensorflow.raw_ops.{op}",))
    return localize_gcrde(issue, ex, source)


def paths(loc: Localization) -> list[str]:
    return [s.path for s in loc.suspects]


CPU_BUILD = [K + "image/non_max_suppression_op.cc", K + "linalg/matrix_solve_op.cc",
             K + "linalg/matrix_solve_ls_op_impl.h", K + "cwise_op_floor_div.cc", K + "constant_op.cc",
             K + "depthwise_conv_op.cc",
             "tensorflow/core/framework/op_kernel.cc"]


def test_a_cpu_build_names_the_ops_cc_and_a_gpu_report_puts_the_inferred_gpu_files_first(tmp_path: Path) -> None:
    wheel = tf_wheel(tmp_path, "2.4.0", CPU_BUILD)
    loc = locate(wheel, "NonMaxSuppressionV3 is wrong on GPU", "NonMaxSuppressionV3",
                 body="It works on CPU but returns a different result on GPU.")
    assert loc.outcome is Outcome.LOCATED
    assert paths(loc)[:4] == [K + "image/non_max_suppression_op_gpu.cu.cc", K + "image/non_max_suppression_op.cu.cc",
                              K + "image/non_max_suppression_op_gpu.h", K + "image/non_max_suppression_op.cc"]
    guess, named = loc.suspects[0], loc.suspects[3]
    assert guess.side is Side.CUDA and "CPU-only build that names no GPU file: inferred from non_max_suppression_op.cc" \
        in guess.reason and "source not available" in guess.reason
    assert named.reason.startswith(f"non_max_suppression_op.cc: {NAMED} ({wheel.wheel.name}); its source is not at hand")
    assert "kernel files named by the release's compiled libraries (6 under tensorflow/core/kernels/" in loc.reason
    assert "a CPU-only build" in loc.reason
    assert wheel.read_text(named.path) is None  # named, never read


def test_a_report_not_saying_which_side_puts_the_named_file_above_guesses_and_likenesses(tmp_path: Path) -> None:
    wheel = tf_wheel(tmp_path, "2.4.0", CPU_BUILD)
    loc = locate(wheel, "linalg.solve gives different results on CPU and GPU", "MatrixSolve")
    assert paths(loc)[0] == K + "linalg/matrix_solve_op.cc"
    assert K + "linalg/matrix_solve_ls_op_impl.h" not in paths(loc)  # a likeness beside the op's own file
    order = paths(loc)
    assert order.index(K + "linalg/matrix_solve_op.cc") < order.index(K + "linalg/matrix_solve_op_gpu.cu.cc")


def test_a_cwise_op_is_found_by_its_family_file_name(tmp_path: Path) -> None:
    wheel = tf_wheel(tmp_path, "2.4.0", CPU_BUILD)
    loc = locate(wheel, "floordiv differs", "FloorDiv", body="The CPU result is wrong, GPU is right.")
    assert paths(loc)[0] == K + "cwise_op_floor_div.cc"


def test_a_file_named_with_a_letter_or_two_off_is_a_weaker_match(tmp_path: Path) -> None:
    wheel = tf_wheel(tmp_path, "2.4.0", CPU_BUILD)
    loc = locate(wheel, "depthwise conv differs", "DepthwiseConv2dNative", body="Wrong on CPU, right on GPU.")
    first = loc.suspects[0]
    assert first.path == K + "depthwise_conv_op.cc" and "file name depthwise_conv_op ~ DepthwiseConv2dNative" in first.reason


def test_a_gpu_build_names_the_gpu_files_and_none_is_guessed(tmp_path: Path) -> None:
    gpu_build = [K + "topk_op.cc", K + "topk_op_gpu_float.cu.cc", K + "topk_op_gpu_double.cu.cc",
                 K + "linalg/matrix_solve_op.cc", K + "bias_op_gpu.cu.cc"]
    wheel = tf_wheel(tmp_path, "2.1.0", gpu_build)
    loc = locate(wheel, "[CUDA] illegal memory read on TopK", "TopKV2",
                 body="The GPU kernel reads out of bounds; the CPU one is fine.")
    assert set(paths(loc)[:2]) == {K + "topk_op_gpu_float.cu.cc", K + "topk_op_gpu_double.cu.cc"}
    assert loc.suspects[0].side is Side.CUDA and NAMED in loc.suspects[0].reason
    assert "CPU-only build" not in loc.reason
    # the build names no GPU file of MatrixSolve: the named .cc leads (the linalg ops keep their GPU code there), its
    # GPU files guessed below it even with CUDA blamed, since a GPU build names only the GPU files holding checks
    solve = locate(wheel, "tf.linalg.solve differs on GPU", "MatrixSolve", body="Wrong on GPU, fine on CPU.")
    assert paths(solve)[:2] == [K + "linalg/matrix_solve_op.cc", K + "linalg/matrix_solve_op_gpu.cu.cc"]
    assert "a GPU build that names only the GPU files holding checks" in solve.suspects[1].reason
    assert solve.suspects[1].score < solve.suspects[0].score


def test_a_listed_gpu_header_of_the_op_stops_the_guessing(tmp_path: Path) -> None:
    header = "namespace tensorflow { namespace functor { template <typename T> struct TopKFunctor {}; } }\n"
    wheel = tf_wheel(tmp_path, "2.4.0", [K + "topk_op.cc"], headers={K + "topk_op_gpu.h": header})
    loc = locate(wheel, "top_k wrong on GPU", "TopKV2", body="Wrong on GPU, fine on CPU.")
    assert K + "topk_op_gpu.h" in paths(loc)
    assert not any("CPU-only build that names no GPU file" in s.reason for s in loc.suspects)


def test_a_named_header_with_no_named_cc_seeds_the_guesses_and_a_listed_one_does_not(tmp_path: Path) -> None:
    named_only = tf_wheel(tmp_path / "a", "2.4.0", [K + "relu_op.h", K + "constant_op.cc"])
    loc = locate(named_only, "relu wrong on GPU", "Relu", body="Wrong on GPU, fine on CPU.")
    assert paths(loc)[0] == K + "relu_op_gpu.cu.cc" and "inferred from relu_op.h" in loc.suspects[0].reason
    # at hand, a header is read by the header rules (which know when it registers the GPU kernel itself)
    listed = tf_wheel(tmp_path / "b", "2.4.0", [K + "matmul_op_impl.h"], headers={K + "matmul_op_impl.h": (
        'REGISTER_KERNEL_BUILDER(Name("MatMul").Device(DEVICE_GPU), MatMulOp<GPUDevice, float>);\n')})
    order = paths(locate(listed, "matmul wrong on GPU", "MatMul", body="Wrong on GPU, fine on CPU."))
    assert order[0] == K + "matmul_op_impl.h" and not any(".cu." in p for p in order)


def test_an_incidental_call_gets_no_guessed_gpu_files(tmp_path: Path) -> None:
    wheel = tf_wheel(tmp_path, "2.4.0", CPU_BUILD)
    issue = Issue(repo="tensorflow/tensorflow", number=1, title="NonMaxSuppressionV3 is wrong on GPU",
                  body="It works on CPU but returns a different result on GPU.")
    ex = Extraction(None, None, Environment(framework="tensorflow"),
                    apis=("tensorflow.constant", "tensorflow.raw_ops.NonMaxSuppressionV3"))
    order = paths(localize_gcrde(issue, ex, wheel))
    assert K + "constant_op.cc" in order  # named, at the weight of an incidental call
    assert not any(p.startswith(K + "constant_op") and ".cu." in p for p in order)


def test_no_matching_named_file_abstains_and_says_what_was_searched(tmp_path: Path) -> None:
    wheel = tf_wheel(tmp_path, "2.4.0", CPU_BUILD)
    loc = locate(wheel, "Qr differs on GPU", "Qr")
    assert loc.outcome is Outcome.ABSTAINED
    assert "nor among the 6 kernel files its libraries name" in loc.reason


def test_an_unpacked_wheel_given_as_a_tree_is_read_through_its_libraries_on_disk(tmp_path: Path) -> None:
    wheel = tf_wheel(tmp_path / "w", "2.4.0", CPU_BUILD)
    root = tmp_path / "unpacked"
    with zipfile.ZipFile(wheel.wheel) as zf:
        zf.extractall(root)
    tree = LocalTree(root, "tensorflow", "2.4.0", cache_dir=tmp_path / "cache")
    loc = locate(tree, "linalg.solve gives different results on CPU and GPU", "MatrixSolve")
    assert paths(loc)[0] == K + "linalg/matrix_solve_op.cc"
    assert f"{NAMED} (1 compiled library on disk)" in loc.suspects[0].reason
    assert list((tmp_path / "cache" / "index").glob("named-libraries-*.json"))  # scanned once, kept


def python_files_tree(tmp: Path, version: str | None) -> LocalTree:
    """A TensorFlow tree of Python files alone (what an evaluator's --source-root gives): no wheel, no libraries, no
    kernel C++; wheels keep Python files under core/kernels/ too (boosted_trees/)."""
    root = tmp / "py"
    (root / "tensorflow/core/kernels").mkdir(parents=True, exist_ok=True)
    (root / "tensorflow" / "__init__.py").write_text("")
    (root / "tensorflow/core/kernels/__init__.py").write_text("")
    return LocalTree(root, "tensorflow", version)


def test_a_tree_of_python_files_alone_reads_the_bundled_index_of_its_release(tmp_path: Path) -> None:
    # no wheel and no libraries at hand (what an evaluator's --source-root of Python files gives): the kernel files the
    # shipped index holds for the reported release, or the nearest indexed release before it, which the reason names
    body = "It works on CPU but returns a different result on GPU."
    exact = locate(python_files_tree(tmp_path, "2.0.0"), "NonMaxSuppressionV3 differs on GPU", "NonMaxSuppressionV3",
                   body)
    assert exact.outcome is Outcome.LOCATED
    assert paths(exact)[0] == K + "non_max_suppression_op.cu.cc"  # 2.0 keeps it at the top of kernels/, a GPU build
    assert "tensorflow 2.0.0's libraries (sftl's bundled release index)" in exact.suspects[0].reason
    near = locate(python_files_tree(tmp_path, "2.6.1"), "NonMaxSuppressionV3 differs on GPU", "NonMaxSuppressionV3",
                  body)
    assert paths(near)[0] == K + "image/non_max_suppression_op.cu.cc"  # moved to image/ by 2.4
    assert "the nearest indexed release before 2.6.1" in near.reason
    assert locate(python_files_tree(tmp_path, None), "NonMaxSuppressionV3 differs on GPU",
                  "NonMaxSuppressionV3", body).outcome is Outcome.ABSTAINED  # no release, no index entry to read


def test_the_index_keeps_what_the_releases_gpu_headers_declare_for_a_tree_without_them(tmp_path: Path) -> None:
    # the GPU transpose's tiles live in conv_2d_gpu.h (BatchNarrowMatrixTransposeDispatcher): a header that names no
    # op, found by the types its device code declares, which the shipped index keeps of the 2.20.0 wheel's headers
    loc = locate(python_files_tree(tmp_path, "2.20.0"), "conjugate transpose differs on GPU", "Transpose",
                 "It works on CPU but returns a different result on GPU.")
    header = next(s for s in loc.suspects if s.path == K + "conv_2d_gpu.h")
    assert paths(loc).index(header.path) < 5 and header.side is Side.CUDA
    assert "declares BatchNarrowMatrixTransposeDispatcher" in header.reason
    assert "its text is not at hand: the types sftl's bundled index keeps of the release's headers" in header.reason
    assert paths(loc)[0] == K + "transpose_functor_gpu.cu.cc"  # the op's own GPU file, named, leads


def test_a_reduction_reported_wrong_on_gpu_ranks_its_familys_gpu_kernels_first(tmp_path: Path) -> None:
    # Sum's GPU code is the reduction family's reduction_gpu_kernels.cu.h, a name that holds neither the op nor the
    # family's whole stem; 2.19.0's libraries name it (the shipped index), beside reduction_ops_common.cc
    loc = locate(python_files_tree(tmp_path, "2.19.0"), "reduce_sum differs on GPU", "Sum",
                 "It works on CPU but returns a different result on GPU.")
    assert paths(loc)[:2] == [K + "reduction_gpu_kernels.cu.h", K + "reduction_ops_common.cc"]
    assert "Sum belongs to the reduction_ops family" in loc.suspects[0].reason


def test_a_kernel_the_stand_in_tree_moved_is_ranked_at_the_releases_path(tmp_path: Path) -> None:
    """The release compiled non_max_suppression_op.cu.cc from kernels/; the later tree keeps it in kernels/image/:
    the suspect is the release's file, its text read from the tree, and the reason says so."""
    from sftl.sources import LayeredSource, PythonFilesOf

    wheel = tf_wheel(tmp_path / "w", "2.0.0", [K + "non_max_suppression_op.cu.cc", K + "non_max_suppression_op.cc"])
    tree = tmp_path / "tree"
    registration = ('REGISTER_KERNEL_BUILDER(Name("NonMaxSuppressionV3").Device(DEVICE_{d}), NonMaxSuppressionV3Op);\n')
    for rel, device in (("image/non_max_suppression_op.cu.cc", "GPU"), ("image/non_max_suppression_op.cc", "CPU")):
        (tree / K / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / K / rel).write_text(registration.format(d=device))
    source = LayeredSource([PythonFilesOf(wheel), LocalTree(tree, "tensorflow", "2.14.1"), wheel])
    source.version = "2.0.0"
    loc = locate(source, "tf.image.non_max_suppression differs on GPU", "NonMaxSuppressionV3",
                 body="Wrong on GPU, fine on CPU.")
    assert paths(loc)[:2] == [K + "non_max_suppression_op.cu.cc", K + "non_max_suppression_op.cc"]
    assert "compiled it as" in loc.suspects[0].reason and "image/non_max_suppression_op.cu.cc" in loc.suspects[0].reason


def test_an_op_registered_through_its_familys_macro_is_found(tmp_path: Path) -> None:
    """REGISTER_LINALG_OP("MatrixSolve", ...) registers the op as REGISTER_KERNEL_BUILDER(Name(...)) would."""
    tree = tmp_path / "tree"
    for rel, text in {"linalg/matrix_solve_op.cc": 'REGISTER_LINALG_OP("MatrixSolve", (MatrixSolveOp<float>), float);\n'
                                                   'REGISTER_LINALG_OP_GPU("MatrixSolve", (MatrixSolveOpGpu<float>), float);\n',
                      "reshape_op.cc": 'REGISTER_KERNEL_BUILDER(Name("Reshape").Device(DEVICE_CPU), ReshapeOp);\n'}.items():
        (tree / K / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / K / rel).write_text(text)
    issue = Issue(repo="tensorflow/tensorflow", number=2, title="tf.linalg.solve differs on GPU",
                  body="Wrong on GPU, fine on CPU.")
    ex = Extraction(None, None, Environment(framework="tensorflow"),
                    apis=("tensorflow.raw_ops.MatrixSolve", "tensorflow.raw_ops.Reshape"))
    loc = localize_gcrde(issue, ex, LocalTree(tree, "tensorflow", "2.14.1"))
    assert paths(loc)[0] == K + "linalg/matrix_solve_op.cc"
    assert "MatrixSolve" in loc.suspects[0].reason
