"""Extraction: snippets, tracebacks, frame paths, error lines and API calls from real-format reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sftl.extract import (
    classify_block,
    code_blocks,
    doctest_to_script,
    extract,
    extract_apis,
    extract_text,
    map_frame_path,
    parse_tracebacks,
)
from sftl.github import issue_from_json

REPORTS = Path(__file__).resolve().parent.parent / "fixtures" / "reports"


def load(name: str):
    return issue_from_json(json.loads((REPORTS / f"{name}.json").read_text(encoding="utf-8")))


# -- code blocks ----------------------------------------------------------------------------


def test_fenced_python_chosen_over_output_block() -> None:
    ex = extract(load("gcrde__collect_env_histc_cpu_vs_cuda"))
    assert ex.snippet is not None
    assert ex.snippet.code.startswith("import torch\nx = torch.tensor(")
    kinds = [c.kind for c in ex.snippet.candidates]
    assert kinds == ["python", "output"]  # the pasted tensor output is not code
    assert "fenced python block" in ex.snippet.reason


def test_output_that_parses_as_python_is_still_output() -> None:
    kind, parses, why = classify_block("tensor([1., 1., 2., 1.], device='cuda:0')")
    assert (kind, parses) == ("output", True)
    assert "printed values" in why
    assert classify_block("import torch\nprint(torch.ones(2))")[0] == "python"
    assert classify_block("$ pip install torch==2.1.0\n$ python repro.py")[0] == "shell"
    assert classify_block("2024-01-01 10:00:00.123: W tensorflow/core/x.cc:12] warn\nI0101 10:00:00 y")[0] == "log"
    assert classify_block("#include <ATen/ATen.h>\nint main() { return 0; }", "cpp")[0] == "cpp"


def test_doctest_session_becomes_a_script() -> None:
    ex = extract(load("gcrde__doctest_session_cumsum"))
    assert ex.snippet is not None
    code = ex.snippet.code
    assert code.splitlines()[0] == "import torch"
    assert "tensor(0.)" not in code  # the session's output is dropped
    assert ex.snippet.candidates[0].source == "doctest"
    assert doctest_to_script(">>> for i in range(2):\n...     print(i)\n0\n1") == "for i in range(2):\n    print(i)"


def test_program_split_over_two_blocks_is_joined() -> None:
    ex = extract(load("mme__program_split_over_blocks"))
    assert ex.snippet is not None
    assert "joined 2 python blocks" in ex.snippet.reason
    assert "gm = fx.symbolic_trace(M())" in ex.snippet.code and "gm2 = copy.deepcopy(gm)" in ex.snippet.code
    compile(ex.snippet.code, "<snippet>", "exec")  # the joined program parses


def test_indented_block_is_code() -> None:
    ex = extract(load("mme__indented_code_and_conda_list"))
    assert ex.snippet is not None
    assert ex.snippet.code.startswith("import tensorflow.keras.engine as KE")
    assert ex.snippet.candidates[0].source == "indented"


def test_code_pasted_with_its_traceback_in_one_block() -> None:
    body = ("```python\nimport torch\nx = torch.ones(2)\nx.foo()\nTraceback (most recent call last):\n"
            '  File "a.py", line 3, in <module>\n    x.foo()\nAttributeError: \'Tensor\' object has no attribute \'foo\'\n```')
    blocks = code_blocks(body)
    assert [b.kind for b in blocks] == ["python", "traceback"]
    assert blocks[0].code == "import torch\nx = torch.ones(2)\nx.foo()"


# -- tracebacks ------------------------------------------------------------------------------


def test_chained_traceback_with_windows_paths() -> None:
    ex = extract(load("mme__chained_traceback_windows_paths"))
    tb = ex.traceback
    assert tb is not None
    assert (tb.exception, tb.message) == ("AttributeError", "module 'torch' has no attribute 'library'")
    assert tb.chain_kind == "context"
    assert tb.cause is not None and tb.cause.exception == "ModuleNotFoundError"
    assert tb.cause.message == "No module named 'torch._custom_ops'"
    paths = [f.repo_path for f in tb.frames]
    assert paths == [None, "torchvision/__init__.py", "torchvision/_meta_registrations.py"]
    last = tb.frames[-1]
    assert last.line == 25 and last.function == "<module>"
    assert last.source == '@torch.library.impl_abstract("torchvision::nms")'
    assert ex.error_line == "AttributeError: module 'torch' has no attribute 'library'"


def test_direct_cause_chain_and_python311_carets() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/opt/conda/lib/python3.11/site-packages/torch/_dynamo/eval_frame.py", line 10, in f\n'
        "    foo()\n    ^^^^^\n"
        "KeyError: 'x'\n\n"
        "The above exception was the direct cause of the following exception:\n\n"
        "Traceback (most recent call last):\n"
        '  File "repro.py", line 4, in <module>\n    g()\n'
        "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\n"
        "AttributeError: 'StrictLessThan' object has no attribute 'diff'\n"
    )
    tbs = parse_tracebacks(text)
    assert len(tbs) == 1
    outer = tbs[0]
    assert outer.exception == "BackendCompilerFailed" and outer.chain_kind == "cause"
    assert outer.cause is not None and outer.cause.exception == "KeyError"
    assert outer.cause.frames[0].source == "foo()"
    assert outer.cause.frames[0].repo_path == "torch/_dynamo/eval_frame.py"


def test_bare_error_line_without_traceback() -> None:
    ex = extract_text("TF 2.0 'Tensor' object has no attribute 'numpy'",
                      "Calling .numpy() fails with AttributeError: 'Tensor' object has no attribute 'numpy'. Any idea?")
    assert ex.traceback is None
    assert ex.error_line == "AttributeError: 'Tensor' object has no attribute 'numpy'"
    title_only = extract_text("AttributeError: module 'torch' has no attribute '_TensorBase'", "")
    assert title_only.error_line == "AttributeError: module 'torch' has no attribute '_TensorBase'"


def test_tf_reraised_import_error_reports_the_inner_line() -> None:
    ex = extract(load("other__hard_negative_dll_load_failed"))
    assert ex.error_line is not None
    assert ex.error_line.startswith("ImportError: DLL load failed while importing _pywrap_tensorflow_internal")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (r"C:\Users\me\anaconda3\envs\dl\Lib\site-packages\torch\nn\functional.py", "torch/nn/functional.py"),
        ("/usr/local/lib/python3.10/dist-packages/torch/fx/graph_module.py", "torch/fx/graph_module.py"),
        ("/opt/conda/lib/python3.8/site-packages/tensorflow/python/framework/ops.py", "tensorflow/python/framework/ops.py"),
        ("/home/u/.venv/lib/python3.9/site-packages/tensorflow_core/python/keras/engine/training.py",
         "tensorflow/python/keras/engine/training.py"),
        ("/home/u/miniconda3/envs/x/lib/python3.7/site-packages/keras/engine/base_layer.py", "keras/engine/base_layer.py"),
        ("/usr/lib/python3/dist-packages/torchvision/ops/boxes.py", "torchvision/ops/boxes.py"),
        ("/root/tensorflow/tensorflow/python/ops/array_ops.py", "tensorflow/python/ops/array_ops.py"),
        ("/home/dev/pytorch/torch/_inductor/codegen/cpp.py", "torch/_inductor/codegen/cpp.py"),
        ("/lib/site-packages/torch-1.0.0-py3.6-linux-x86_64.egg/torch/autograd/function.py", "torch/autograd/function.py"),
        ("/home/jansel/torchdynamo/torchinductor/ir.py", "torchinductor/ir.py"),  # a pytorch/torchdynamo checkout
        ("/home/dev/torchdynamo/torchdynamo/eval_frame.py", "torchdynamo/eval_frame.py"),
        ("/usr/lib/python3.9/site-packages/torchinductor/lowering.py", "torchinductor/lowering.py"),
        ("/home/me/project/torchdynamo_test.py", None),
        ("/home/me/project/train.py", None),
        ("/usr/lib/python3.10/site-packages/numpy/core/fromnumeric.py", None),
        ("<frozen importlib._bootstrap>", None),
        ("<ipython-input-3-abc>", None),
        ("/home/me/torch/my_model.py", None),
        ("", None),
    ],
)
def test_map_frame_path(path: str, expected: str | None) -> None:
    assert map_frame_path(path) == expected


# -- API calls -------------------------------------------------------------------------------


def test_apis_resolved_through_aliases_in_order() -> None:
    code = (
        "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"
        "x = torch.randn(8)\n"
        "y = F.interpolate(x[None, None], scale_factor=2)\n"
        "conv = nn.Conv2d(1, 1, 3)\n"
        "h = x.histc(bins=4)\n"
        "z = (x * 2).cuda().histc(bins=4)\n"
        "print(torch.ops.aten.index_put(x, [x.long()], x, accumulate=True))\n"
        "model.fit(x)\n"
    )
    assert extract_apis(code) == (
        "torch.randn", "torch.nn.functional.interpolate", "torch.nn.Conv2d", "torch.Tensor.histc",
        "torch.Tensor.cuda", "torch.ops.aten.index_put", "torch.Tensor.long",
    )


def test_apis_tensorflow() -> None:
    code = ("import tensorflow as tf\nx = tf.constant([1.0, 2.0])\nm = tf.math.reduce_mean(x)\n"
            "y = x.numpy()\nsess = tf.compat.v1.Session()\nsess.run(m)\n")
    # x.numpy() is a Tensor method; sess.run is a Session's (a Session is not a tensor)
    assert extract_apis(code) == ("tensorflow.constant", "tensorflow.math.reduce_mean", "tensorflow.Tensor.numpy",
                                  "tensorflow.Session", "tensorflow.Session.run")
    assert extract_apis("y = tf.nn.relu(x)\n", framework="tensorflow") == ("tensorflow.nn.relu",)


def test_apis_regex_fallback_for_code_that_does_not_parse() -> None:
    code = "print torch.histc(x, bins=4)\ny = F.interpolate(x)"
    assert extract_apis(code) == ("torch.histc", "torch.nn.functional.interpolate")


def test_apis_from_text_when_no_snippet() -> None:
    ex = extract_text("`tf.linalg.lu_solve` returns inconsistent output", "Calling `tf.linalg.lu_solve(lu, p, rhs)` differs.")
    assert ex.apis == ("tensorflow.linalg.lu_solve",)


def test_device_labelled_output_is_output_not_annotations() -> None:
    # "cpu: tensor([...])" parses as a Python annotation; it is printed output
    assert classify_block("cpu: tensor([ 1., nan, -1.])\ngpu: tensor([1., 1., -1.], device='cuda:0')")[0] == "output"
    assert classify_block("x: int = 3\nprint(x)")[0] == "python"


IPY7 = """---------------------------------------------------------------------------
AttributeError                            Traceback (most recent call last)
<ipython-input-5-1b2c3d> in <module>
      1 import torch
----> 2 y = model(x)

~/anaconda3/lib/python3.7/site-packages/torch/nn/modules/module.py in __call__(self, *input, **kwargs)
    488         else:
--> 489             result = self.forward(*input, **kwargs)
    490         for hook in self._forward_hooks.values():

AttributeError: 'Net' object has no attribute 'fc'
"""

IPY8 = """AttributeError                            Traceback (most recent call last)
Cell In[3], line 2
      1 import torch
----> 2 y = model(x)

File ~/miniconda3/lib/python3.10/site-packages/torch/nn/modules/module.py:1501, in Module._call_impl(self, *args)
   1496 # If we don't have any hooks, we want to skip the rest of the logic in
-> 1501     return forward_call(*args, **kwargs)

AttributeError: 'Net' object has no attribute 'fc'
"""


def test_ipython_and_jupyter_tracebacks() -> None:
    for text, func in ((IPY7, "__call__"), (IPY8, "Module._call_impl")):
        (tb,) = parse_tracebacks(text)
        assert (tb.exception, tb.message) == ("AttributeError", "'Net' object has no attribute 'fc'")
        user, fw = tb.frames
        assert (user.line, user.source, user.repo_path) == (2, "y = model(x)", None)
        assert (fw.function, fw.repo_path) == (func, "torch/nn/modules/module.py")
        assert fw.source.startswith(("result = self.forward", "return forward_call"))


def test_python_in_a_shell_fence_is_code_and_commands_stay_shell() -> None:
    script = "import tensorflow as tf\nx = tf.ones([2])\nprint(tf.reduce_sum(x))"
    assert classify_block(script, "shell")[0] == "python"
    assert classify_block("pip install tensorflow==2.15\npython train.py", "shell")[0] == "shell"
    assert classify_block("import torch", "bash")[0] == "shell"  # only TF's form default is re-read
    issue = load("gcrde__tf_form_code_in_shell_fence")
    ex = extract(issue)
    assert ex.snippet is not None and "depthwise_conv2d" in ex.snippet.code


def test_operator_syntax_on_tensors_names_the_operator_op() -> None:
    from sftl.extract import extract_apis

    code = "import torch\nx = torch.tensor([4.0])\nprint(x.cuda() >> 1)\ny = x @ x.T\nn = 7 % 2\nx **= 2\nz = x + 1\n"
    apis = extract_apis(code)
    assert "torch.Tensor.__rshift__" in apis and "torch.Tensor.matmul" in apis and "torch.Tensor.pow" in apis
    assert not any(a.endswith(("remainder", "__add__", "add")) for a in apis)  # ints are not tensors; + is noise
    tf_apis = extract_apis("import tensorflow as tf\nx = tf.constant([4])\ny = x % 3\n")
    assert tf_apis == ("tensorflow.constant", "tensorflow.Tensor.__mod__")


def test_cxx_reports_and_operator_methods_in_prose_name_their_ops() -> None:
    from sftl.extract import extract_text

    body = ("Using the ATen API from a C++ extension:\n\n```cpp\n#include <torch/torch.h>\n"
            "at::Tensor shift_right(at::Tensor x, int n) {\n  return x.__rshift__(n);\n}\n"
            "at::Tensor counts(at::Tensor x) { return at::histc(x, 10); }\n```\n\n"
            "On CUDA tensors the result is 8, on the CPU 2.")
    ex = extract_text("Weird bug when using ATen __rshift__() on cuda tensors", body, "pytorch/pytorch")
    assert ex.apis[:2] == ("torch.Tensor.__rshift__", "torch.histc") or set(ex.apis) >= {"torch.Tensor.__rshift__", "torch.histc"}
    assert "torch.Tensor.__init__" not in ex.apis
    tf = extract_text("x.__mod__(3) differs on GPU", "```\nnot python at all {\n```", "tensorflow/tensorflow")
    assert tf.apis == ("tensorflow.Tensor.__mod__",)


def test_methods_of_framework_class_instances_are_qualified() -> None:
    from sftl.extract import extract_apis

    code = ("import torch\nx = torch.rand(10)\nnormal = torch.distributions.Normal(0, 1)\nnormal.icdf(x)\n"
            "normal = 3\nnormal.icdf(x)\n")
    apis = extract_apis(code)
    assert "torch.distributions.Normal.icdf" in apis
    assert apis.count("torch.distributions.Normal.icdf") == 1  # rebinding to a non-framework value forgets it
