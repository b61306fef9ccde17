"""GCRDE candidate roles on a modeled tree: the diverging device's math above the .cpp wrapper, helper headers, the op under test."""

from __future__ import annotations

from pathlib import Path

import pytest

from sftl.localize.gcrde import localize_gcrde
from sftl.localize.gcrde.roles import CHECK, HELPER, KERNEL, LAUNCHER, VEC, WRAPPER, role
from sftl.model import Environment, Extraction, Issue, Snippet
from sftl.sources import LocalTree

NATIVE = "aten/src/ATen/native/"


@pytest.fixture
def tree(fixtures_dir: Path) -> LocalTree:
    return LocalTree(fixtures_dir / "gcrde_roles", "pytorch", "2.6.0")


def ranked(tree: LocalTree, title: str, apis: tuple[str, ...], body: str = "", code: str = "") -> list[str]:
    issue = Issue(repo="pytorch/pytorch", number=1, title=title, body=body)
    ex = Extraction(Snippet(code, "test") if code else None, None, Environment(framework="pytorch"), apis=apis)
    return [s.path.removeprefix(NATIVE) for s in localize_gcrde(issue, ex, tree).suspects]


def test_the_cu_a_cuda_wrapper_calls_ranks_above_the_wrapper(tree: LocalTree) -> None:
    got = ranked(tree, "topk returns wrong values on CUDA", ("torch.topk",))
    assert got[0] == "cuda/TensorTopK.cu"
    assert got.index("cuda/TensorTopK.cu") < got.index("cuda/TensorTopK.cpp")


def test_the_helper_header_a_thin_kernel_instantiates_ranks_first(tree: LocalTree) -> None:
    got = ranked(tree, "cumsum gives incorrect output for large tensors on CUDA", ("torch.cumsum",))
    assert got[:3] == ["cuda/ScanUtils.cuh", "cuda/CumsumKernel.cu", "cuda/ScanKernels.cpp"]


def test_the_reason_names_the_wrapper(tree: LocalTree) -> None:
    issue = Issue(repo="pytorch/pytorch", number=1, title="topk wrong on CUDA", body="")
    ex = Extraction(None, None, Environment(framework="pytorch"), apis=("torch.topk",))
    top = localize_gcrde(issue, ex, tree).suspects[0]
    assert "TensorTopK.cpp" in top.reason and "wrapper" in top.reason


def test_calls_beside_the_op_the_title_names_barely_count(tree: LocalTree) -> None:
    code = "x = torch.randn(8, device='cuda')\nprint(torch.topk(x, 3).values.sum())\n"
    got = ranked(tree, "topk is wrong on CUDA", ("torch.randn", "torch.topk", "torch.Tensor.sum"), code=code)
    assert got.index("cuda/TensorTopK.cu") < got.index("cuda/ReduceSumProdKernel.cu")
    # without a title naming it, sum is as much a candidate as topk
    plain = ranked(tree, "wrong values on CUDA", ("torch.randn", "torch.Tensor.sum", "torch.topk"), code=code)
    assert plain.index("cuda/ReduceSumProdKernel.cu") < plain.index("cuda/TensorTopK.cpp")


@pytest.mark.parametrize(
    ("path", "text", "expected"),
    [
        ("aten/src/ATen/native/cuda/Sort.cpp", "void f() { launch_sort_kernel(x); }", WRAPPER),
        ("aten/src/ATen/native/cuda/Foo.cpp", "__global__ void k() {}", KERNEL),
        ("aten/src/ATen/native/cuda/Foo.cu", "", KERNEL),
        ("aten/src/ATen/native/cpu/FooKernel.cpp", "", KERNEL),
        ("aten/src/ATen/native/cuda/ScanUtils.cuh", "template <class T> void scan_dim(T x) {}", HELPER),
        ("aten/src/ATen/native/cuda/Loops.cuh", "template <class F> void gpu_kernel(TensorIterator& it, F f) {}",
         LAUNCHER),
        ("aten/src/ATen/cpu/vec/vec256/vec256_complex_float.h", "", VEC),
        ("aten/src/ATen/native/TensorAdvancedIndexing.cpp", "", CHECK),
    ],
)
def test_roles(path: str, text: str, expected: str) -> None:
    assert role(path, text) == expected


@pytest.mark.parametrize(
    ("title", "body", "side"),
    [
        ("cumsum gives incorrect output for large tensors on CUDA", "", "cuda"),  # 'incorrect' is not 'correct'
        ("topk wrong", "It doesn't work on cuda; the CPU gives 3 values.", "cuda"),
        ("topk wrong", "It works fine on the GPU but the CPU result is wrong.", "cpu"),
    ],
)
def test_negated_ok_words_do_not_clear_a_device(title: str, body: str, side: str) -> None:
    from sftl.localize.gcrde import divergent_side

    issue = Issue(repo="pytorch/pytorch", number=1, title=title, body=body)
    assert divergent_side(issue, Extraction(None, None, Environment(framework="pytorch"))).side.value == side


def test_complex_inputs_on_the_cpu_reach_the_vectorized_complex_headers(tree: LocalTree) -> None:
    code = "a = torch.tensor([float('inf') + 0j, -1 - 8.7e-08j])\nprint(torch.exp(a))\n"
    got = ranked(tree, "torch.exp for complex inputs returns nan on CPU", ("torch.tensor", "torch.exp"), code=code)
    vec = [p for p in got if "/cpu/vec/" in p]
    assert got[0].startswith("aten/src/ATen/cpu/vec/") and got[0].endswith(("_complex_double.h", "_complex_float.h"))
    assert len(vec) == 3  # vec256 float/double, vec512 float
    assert not any("vsx" in p for p in vec)  # another architecture's lanes: not what an x86 build runs
    assert "aten/src/ATen/cpu/vec/vec256/vec256_float.h" not in got  # not the report's dtype
    # real inputs: the vec headers are not candidates
    real = ranked(tree, "torch.exp returns nan on CPU", ("torch.tensor", "torch.exp"),
                  code="a = torch.tensor([1.0])\nprint(torch.exp(a))\n")
    assert not any("/cpu/vec/" in p for p in real)


def test_a_rare_dtype_through_a_jiterator_kernel_ranks_its_code_generation(tree: LocalTree) -> None:
    code = "x = torch.tensor([1, 2], dtype=torch.uint16, device='cuda')\nprint(torch.special.zeta(x, x))\n"
    got = ranked(tree, "torch.special.zeta returns incorrect output with uint16 on CUDA", ("torch.special.zeta",),
                 code=code)
    assert got[:2] == ["cuda/jit_utils.cpp", "cuda/ZetaKernel.cu"]
    plain = ranked(tree, "torch.special.zeta returns incorrect output on CUDA", ("torch.special.zeta",),
                   code=code.replace("torch.uint16", "torch.float32"))
    assert plain[0] == "cuda/ZetaKernel.cu" and "cuda/jit_utils.cpp" not in plain


@pytest.mark.parametrize(
    ("title", "side"),
    [("`tensor(1) >> 64` will return 1 on CPU", "cpu"), ("topk returns zeros on CUDA", "cuda"),
     ("topk works on CPU", "cuda")],
)
def test_a_title_naming_one_device_names_the_diverging_side(title: str, side: str) -> None:
    from sftl.localize.gcrde import divergent_side

    issue = Issue(repo="pytorch/pytorch", number=1, title=title, body="")
    assert divergent_side(issue, Extraction(None, None, Environment(framework="pytorch"))).side.value == side


def test_advanced_indexing_in_a_snippet_names_the_index_ops() -> None:
    from sftl.extract import extract_apis

    code = ("import torch\nx = torch.randint(0, 20, (4, 8), device='cuda')\nm = torch.tensor([True, False, True, False])\n"
            "print(x[m])\ny = x[:, 1]\nx[m] = 0\n")
    assert extract_apis(code, "pytorch") == ("torch.randint", "torch.tensor", "torch.Tensor.__getitem__",
                                             "torch.Tensor.__setitem__")
    assert extract_apis("import torch\nx = torch.rand(4)\nprint(x[1:3])\n", "pytorch") == ("torch.rand",)  # a view


def test_an_inflected_title_word_names_the_op(tree: LocalTree) -> None:
    from sftl.localize.gcrde import torch_ops

    issue = Issue(repo="pytorch/pytorch", number=1, title="topk sorting breaks for large inputs", body="")
    ex = Extraction(None, None, Environment(framework="pytorch"), apis=("torch.randn", "torch.Tensor.sum", "torch.sort"))
    ops, _ = torch_ops(issue, ex, {"randn", "sum", "sort", "topk"}, None)
    assert ops[0].name == "sort" and "named in the title" in ops[0].origin
    assert next(o for o in ops if o.name == "sum").weight < 0.6


def test_a_generic_file_defining_the_cpu_kernel_is_the_cpu_side(tree: LocalTree) -> None:
    issue = Issue(repo="pytorch/pytorch", number=1, title="bincount operates incorrectly on non-contiguous tensor on CPU",
                  body="")
    loc = localize_gcrde(issue, Extraction(None, None, Environment(framework="pytorch"), apis=("torch.bincount",)), tree)
    top = loc.suspects[0]
    assert top.path == NATIVE + "SummaryOps.cpp" and top.side is not None and top.side.value == "cpu"
    cuda = ranked(tree, "bincount is wrong on CUDA", ("torch.bincount",))
    assert cuda[0] == "cuda/SummaryOps.cu"


def test_a_tree_of_another_release_says_so(tmp_path: Path, fixtures_dir: Path) -> None:
    import shutil

    shutil.copytree(fixtures_dir / "gcrde_roles", tmp_path / "tree")
    (tmp_path / "tree" / "version.txt").write_text("2.6.0a0\n")
    issue = Issue(repo="pytorch/pytorch", number=1, title="topk wrong on CUDA", body="")

    def reason(version: str) -> str:
        ex = Extraction(None, None, Environment(framework="pytorch", version=version), apis=("torch.topk",))
        return localize_gcrde(issue, ex, LocalTree(tmp_path / "tree", "pytorch", version)).reason

    assert "the tree is release 2.6.0a0 (its version.txt), the report's is 1.9.0" in reason("1.9.0")
    assert "version.txt" not in reason("2.6.1")


@pytest.mark.parametrize(
    ("api", "mode", "expected"),
    [
        ("torch.nn.functional.ripple", "wave", ("ripple_wave",)),
        ("torch.nn.functional.ripple", "tide", ("ripple_tide",)),
        ("torch.nn.functional.ripple", "plain", ("ripple_plain",)),  # the fall-through, through a private helper
        ("torch.nn.functional.ripple", None, ("ripple_wave", "ripple_tide", "ripple_plain")),
        ("torch.nn.Ripple2d", "tide", ("ripple_tide",)),  # forward inherited from a base in the same file
        ("torch.nn.Eddy", None, ("eddy_with_indices", "eddy")),  # self._eddy_forward -> boolean_dispatch
        ("torch.nn.functional.nowhere", None, ()),
    ],
)
def test_modules_and_functionals_resolve_through_the_releases_python(
        tree: LocalTree, api: str, mode: str | None, expected: tuple[str, ...]) -> None:
    from sftl.localize.gcrde.pyresolve import python_ops

    assert python_ops(api, tree, mode) == expected  # the docstring's torch.randn example is no call


def test_the_snippets_mode_picks_the_resolved_op(tree: LocalTree) -> None:
    from sftl.localize.gcrde import torch_ops

    code = "import torch.nn.functional as F\ny = F.ripple(x, 3, mode='tide')\n"
    issue = Issue(repo="pytorch/pytorch", number=1, title="ripple is wrong on CUDA", body="")
    ex = Extraction(Snippet(code, "test"), None, Environment(framework="pytorch"), apis=("torch.nn.functional.ripple",))
    ops, _ = torch_ops(issue, ex, {"ripple_wave", "ripple_tide", "ripple_plain"}, None, tree)
    assert [o.name for o in ops] == ["ripple_tide"]


def test_cuda_raising_names_cuda_the_diverging_side() -> None:
    from sftl.localize.gcrde import divergent_side

    issue = Issue(repo="pytorch/pytorch", number=1, title="avg_pool2d backward on big batches",
                  body="The CPU returns a result.\nRuntimeError: CUDA error: an illegal memory access was encountered")
    div = divergent_side(issue, Extraction(None, None, Environment(framework="pytorch")))
    assert div.side.value == "cuda" and div.confident


def test_the_published_method_reads_the_ops_as_before() -> None:
    from sftl.localize.gcrde import torch_ops

    issue = Issue(repo="pytorch/pytorch", number=1, title="topk sorting is wrong", body="")
    ex = Extraction(Snippet("y = F.interpolate(x, mode='bicubic')\n", "t"), None, Environment(framework="pytorch"),
                    apis=("torch.topk", "torch.Tensor.sum", "torch.sort"))
    names = {"topk", "sum", "sort"}
    focused = {o.name: o.weight for o in torch_ops(issue, ex, names, None)[0]}
    paper = {o.name: o.weight for o in torch_ops(issue, ex, names, None, focus=False)[0]}
    assert focused["sum"] < 0.6 < paper["sum"]  # sftl: the title's op dominates; the paper: every call as written
    assert paper["sort"] < 1.0 == focused["sort"]  # 'sorting' names sort for sftl only


def test_an_expected_small_value_is_no_value_dependence() -> None:
    from sftl.localize.gcrde import report_cues

    def cue(body: str) -> str:
        issue = Issue(repo="pytorch/pytorch", number=1, title="GroupNorm differs on CPU and GPU", body=body)
        return report_cues(issue, Extraction(None, None, Environment(framework="pytorch"))).value_dependent

    assert cue("max |cpu - gpu| is 0.0121 (expected a very small value)") == ""
    assert cue("the CUDA result is off for small values of x")


def test_calls_reading_the_difference_of_the_two_results_are_no_subject() -> None:
    from sftl.localize.gcrde import torch_ops

    code = ("import torch\nm = torch.nn.GroupNorm(4, 32)\ncpu = m(x)\ngpu = m.cuda()(x.cuda())\n"
            "print(torch.abs(cpu - gpu.cpu()).max())\n")
    issue = Issue(repo="pytorch/pytorch", number=1, title="Different results on CPU and GPU", body="")
    ex = Extraction(Snippet(code, "t"), None, Environment(framework="pytorch"),
                    apis=("torch.nn.GroupNorm", "torch.abs", "torch.Tensor.max"))
    ops = {o.name: o.weight for o in torch_ops(issue, ex, {"group_norm", "native_group_norm", "abs", "max"}, None)[0]}
    assert ops["group_norm"] > 0.8 and ops["abs"] < 0.3 and ops["max"] < 0.3
    # the same call as the subject of a line of its own is the op under test
    code2 = "import torch\ny = torch.abs(x.cuda())\nprint(y)\n"
    ex2 = Extraction(Snippet(code2, "t"), None, Environment(framework="pytorch"), apis=("torch.abs",))
    assert torch_ops(issue, ex2, {"abs"}, None)[0][0].weight > 0.8


def test_ops_read_from_python_are_ordered_by_the_api_not_by_the_body(tree: LocalTree) -> None:
    from sftl.localize.gcrde import torch_ops

    # Eddy's forward reaches eddy_with_indices before eddy; the API's own name leads, helper tensors never count
    issue = Issue(repo="pytorch/pytorch", number=1, title="Different results between CPU and CUDA", body="")
    ex = Extraction(None, None, Environment(framework="pytorch"), apis=("torch.nn.Eddy",))
    ops = torch_ops(issue, ex, {"eddy", "eddy_with_indices", "arange"}, None, tree)[0]
    assert [o.name for o in ops] == ["eddy", "eddy_with_indices"]
