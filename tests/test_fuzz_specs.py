"""Argument specs from native_functions.yaml, inspect signatures and TensorFlow op_defs; seeds read from snippets."""

from __future__ import annotations

import pytest

from sftl.errors import InputError
from sftl.fuzz.seed import find_seed
from sftl.fuzz.specs import api_spec, parse_torch_schema


def test_torch_schema_parsing() -> None:
    name, overload, args = parse_torch_schema(
        "max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
        "int[2] dilation=1, bool ceil_mode=False) -> Tensor") or ("", "", [])
    assert name == "max_pool2d" and overload == ""
    kinds = {a.name: (a.kind, a.length, a.has_default) for a in args}
    assert kinds["kernel_size"] == ("ints", 2, False)
    assert kinds["stride"] == ("ints", 2, True)
    assert kinds["ceil_mode"] == ("bool", None, True)
    assert parse_torch_schema("bmm.out(Tensor self, Tensor mat2, *, Tensor(a!) out) -> Tensor(a!)") is None


@pytest.mark.parametrize("api,target,first", [
    ("bmm", "torch.bmm", "self"), ("linalg.inv", "torch.linalg.inv", "A"),
    ("torch.topk", "torch.topk", "self"), ("cartesian_prod", "torch.cartesian_prod", "tensors"),
])
def test_torch_specs_come_from_native_functions(api: str, target: str, first: str) -> None:
    spec = api_spec(api)
    assert spec.source == "native_functions.yaml"
    assert spec.target == target and spec.args[0].name == first
    assert spec.version.startswith("2.")


def test_einsum_spec_spreads_its_operands_and_drops_what_python_refuses() -> None:
    spec = api_spec("einsum")
    assert [a.name for a in spec.args] == ["equation", "tensors"]
    assert spec.varargs == "tensors"


def test_python_wrappers_use_inspect() -> None:
    spec = api_spec("nn.functional.interpolate")
    assert spec.source == "inspect"
    assert spec.args[0].kind == "tensor"
    assert "mode" in {a.name for a in spec.args}


def test_unknown_api_is_an_input_error() -> None:
    with pytest.raises(InputError):
        api_spec("no_such_op_anywhere")
    with pytest.raises(InputError):
        api_spec("bmm", "mxnet")


def test_tensorflow_spec_from_op_def() -> None:
    spec = api_spec("BatchMatMulV2", "tensorflow")
    args = {a.name: a for a in spec.args}
    assert spec.target == "tf.raw_ops.BatchMatMulV2" and spec.source == "op_def"
    assert args["x"].kind == "tensor" and args["x"].group == args["y"].group == "T"
    assert "float32" in args["x"].dtypes and "string" not in args["x"].dtypes
    assert args["adj_x"].kind == "bool" and args["adj_x"].has_default
    conv = {a.name: a for a in api_spec("Conv2D", "tensorflow").args}
    assert conv["padding"].choices == ("SAME", "VALID", "EXPLICIT")
    assert conv["data_format"].choices == ("NHWC", "NCHW")


SNIPPET = """
import torch
import torch.nn.functional as F
x = torch.randn(4, 3, 5)
y = torch.ones((4, 5, 2), dtype=torch.float64)
with torch.no_grad():
    z = torch.bmm(x, y.to(torch.float32))
p = F.max_pool2d(torch.rand(1, 2, 8, 8), kernel_size=3, stride=(2, 2))
e = torch.einsum("ij,jk->ik", torch.zeros(2, 3), torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
"""


def test_seed_read_from_a_snippet() -> None:
    seed = find_seed(SNIPPET, api_spec("bmm"))
    assert seed is not None and seed.line == 7
    assert seed.call["self"] == {"t": "tensor", "shape": [4, 3, 5], "dtype": "float32"}
    assert seed.call["mat2"] == {"t": "tensor", "shape": [4, 5, 2], "dtype": "float32"}
    pool = find_seed(SNIPPET, api_spec("max_pool2d"))
    assert pool is not None
    assert pool.call["kernel_size"] == {"t": "ints", "v": [3]} and pool.call["stride"] == {"t": "ints", "v": [2, 2]}
    ein = find_seed(SNIPPET, api_spec("einsum"))
    assert ein is not None and ein.call["equation"]["v"] == "ij,jk->ik"
    assert [i["shape"] for i in ein.call["tensors"]["items"]] == [[2, 3], [3, 2]]


def test_seed_from_a_method_call_and_unreadable_arguments() -> None:
    seed = find_seed("import torch\na = torch.randn(2, 3, 4)\nb = load()\nc = a.bmm(b)\n", api_spec("bmm"))
    assert seed is not None
    assert seed.call["self"]["shape"] == [2, 3, 4]
    assert seed.unresolved == ("mat2",)
    assert find_seed("print('no call here')", api_spec("bmm")) is None
    assert find_seed("def broken(:", api_spec("bmm")) is None
