"""TensorFlow GCRDE: an API's raw ops read through the module's own helpers, and GPU headers named otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from sftl.localize.gcrde import localize_gcrde
from sftl.localize.gcrde.tensorflow import tf_raw_ops
from sftl.model import Environment, Extraction, Issue, Side
from sftl.sources import SitePackages

K = "tensorflow/core/kernels/"

ARRAY_OPS = '''
@tf_export("linalg.matrix_transpose", v1=["linalg.transpose"])
def matrix_transpose(a, name="matrix_transpose", conjugate=False):
  perm = gen_math_ops._range(0, 2, 1)
  return transpose(a, perm=perm, conjugate=conjugate)


@tf_export(v1=["transpose"])
def transpose(a, perm=None, name="transpose", conjugate=False):
  if conjugate:
    transpose_fn = gen_array_ops.conjugate_transpose
  else:
    transpose_fn = gen_array_ops.transpose
  return transpose_fn(a, perm, name=name)
'''
GEN_ARRAY_OPS = '''
def transpose(x, perm, name=None):
  _, _, _op, _outputs = _op_def_library._apply_op_helper("Transpose", x=x, perm=perm, name=name)

def conjugate_transpose(x, perm, name=None):
  _, _, _op, _outputs = _op_def_library._apply_op_helper("ConjugateTranspose", x=x, perm=perm, name=name)
'''
GEN_MATH_OPS = '''
def cos(x, name=None):
  _, _, _op, _outputs = _op_def_library._apply_op_helper("Cos", x=x, name=name)

def _range(start, limit, delta, name=None):
  _, _, _op, _outputs = _op_def_library._apply_op_helper("Range", start=start, limit=limit, delta=delta, name=name)
'''
HEADERS = {
    "transpose_functor.h": "namespace functor {\ntemplate <typename Device, typename T, bool conjugate = false>\n"
                           "struct Transpose {\n  static void run();\n};\n}\n",
    # the GPU transpose's tiles: device code in a header named after convolutions
    "conv_2d_gpu.h": "__global__ void SwapDimension1And2InTensor3UsingTiles(const float* in, float* out) {}\n"
                     "template <typename T, bool conjugate>\nstruct BatchNarrowMatrixTransposeDispatcher {\n};\n"
                     "template <int N>\nstruct TransposeElemType<N> {\n};\n",
    # device code too, but of another op
    "bias_op_gpu.h": "__global__ void BiasNHWCKernel(const float* in, float* out) {}\nstruct BiasGPU {\n};\n",
}


@pytest.fixture
def site(tmp_path: Path) -> SitePackages:
    ops = tmp_path / "tensorflow" / "python" / "ops"
    ops.mkdir(parents=True)
    (ops / "array_ops.py").write_text(ARRAY_OPS, encoding="utf-8")
    # listed first, the API's name only as a string, not in a @tf_export: never read as its definition
    (ops / "a_ops.py").write_text('handling = dict(mode="linalg.matrix_transpose")\n\n\ndef cosine(x):\n'
                                  '  return gen_math_ops.cos(x)\n', encoding="utf-8")
    (ops / "gen_array_ops.py").write_text(GEN_ARRAY_OPS, encoding="utf-8")
    (ops / "gen_math_ops.py").write_text(GEN_MATH_OPS, encoding="utf-8")
    include = tmp_path / "tensorflow" / "include" / K
    include.mkdir(parents=True)
    for name, text in HEADERS.items():
        (include / name).write_text(text, encoding="utf-8")
    return SitePackages("tensorflow", site_dir=tmp_path)


def test_an_api_returning_a_module_helper_runs_the_ops_the_helper_picks(site: SitePackages) -> None:
    ops = tf_raw_ops("tensorflow.linalg.matrix_transpose", site)
    # the helper's picks (referenced, not called) named like the API first; the range that builds perm after
    assert ops[:2] == ("Transpose", "ConjugateTranspose") and "Range" in ops and "Cos" not in ops


def test_a_gpu_header_whose_device_code_declares_types_named_after_the_op_is_a_suspect(site: SitePackages) -> None:
    issue = Issue(repo="tensorflow/tensorflow", number=1, title="matrix_transpose ignores conjugate on GPU",
                  body="The GPU result is wrong; the CPU one is right.")
    ex = Extraction(None, None, Environment(framework="tensorflow"), apis=("tensorflow.linalg.matrix_transpose",))
    loc = localize_gcrde(issue, ex, site)
    by_path = {s.path: s for s in loc.suspects}
    conv = by_path[K + "conv_2d_gpu.h"]
    assert conv.side is Side.CUDA
    assert "device code declares BatchNarrowMatrixTransposeDispatcher, TransposeElemType, named after Transpose" \
        in conv.reason
    assert K + "bias_op_gpu.h" not in by_path  # device code of another op
    order = [s.path for s in loc.suspects]
    assert order.index(K + "transpose_functor_gpu.cu.cc") < order.index(K + "conv_2d_gpu.h")  # the op's own first
