"""A file's functions with their qualified names and lines: Python by `ast`, C++/CUDA by tree-sitter, macros too."""

from __future__ import annotations

from sftl.localize.functions.spans import spans_of

PY = '''\
import os


def top(x):
    def inner(y):
        return y
    return inner(x)


class Linear:
    @staticmethod
    def make():
        pass

    async def forward(self, x):
        raise ValueError("index out of range for the weight")


if os.name:
    def only_here():
        pass
'''

CXX = '''\
namespace at { namespace native {
TORCH_IMPL_FUNC(histc_out)(const Tensor& self, int64_t bins, const Tensor& out) {
  TORCH_CHECK(bins > 0, "bins must be > 0");
}
}}  // namespace at::native
namespace tensorflow {
class HistcOp : public OpKernel {
 public:
  explicit HistcOp(OpKernelConstruction* c) : OpKernel(c) {}
  void Compute(OpKernelContext* ctx) override {
    OP_REQUIRES(ctx, false, errors::InvalidArgument("index out of range"));
  }
};
namespace functor {
template <typename T>
struct Fill<CPUDevice, T> {
  C10_HOST_DEVICE void operator()(const CPUDevice& d, T x) const { }
};
extern template struct Fill<CPUDevice, float>;
}  // namespace functor
Tensor& Session::Run(int x) const { return OkStatus(); }
REGISTER_OP("Histc")
    .Input("x: T")
    .SetShapeFn([](InferenceContext* c) { return OkStatus(); });
REGISTER_KERNEL_BUILDER(Name("Histc").Device(DEVICE_CPU), HistcOp);
TORCH_LIBRARY_IMPL(aten, CPU, m) {
  m.impl("histc", histc);
}
}  // namespace tensorflow
'''


def by_name(path: str, text: str) -> dict[str, tuple[int, int, str]]:
    return {s.name: (s.start, s.end, s.kind) for s in spans_of(path, text)}


def test_python_functions_methods_and_nested_ones_with_their_lines() -> None:
    got = by_name("torch/nn/x.py", PY)
    assert got["top"] == (4, 7, "function")
    assert got["top.inner"] == (5, 6, "function")
    assert got["Linear.make"] == (11, 13, "method")  # from its decorator
    assert got["Linear.forward"] == (15, 16, "method")
    assert got["only_here"] == (20, 21, "function")  # under an if
    forward = next(s for s in spans_of("x.py", PY) if s.leaf == "forward")
    assert forward.literals() == ["index out of range for the weight"]


def test_cxx_kernels_methods_macro_bodies_and_registrations() -> None:
    got = by_name("tensorflow/core/kernels/histc_op.cc", CXX)
    assert got["TORCH_IMPL_FUNC(histc_out)"][:2] == (2, 4)
    assert got["tensorflow::HistcOp::HistcOp"][2] == "method"
    assert got["tensorflow::HistcOp::Compute"] == (10, 12, "kernel")
    assert got["tensorflow::functor::Fill::operator()"] == (17, 17, "kernel")  # the attribute macro read past
    # defined out of its class, returning a reference, after an explicit instantiation the parser trips on
    assert got["tensorflow::Session::Run"] == (21, 21, "method")
    assert got["REGISTER_OP(Histc)"] == (22, 24, "registration")
    assert got["REGISTER_KERNEL_BUILDER(Histc)"][2] == "registration"
    assert got["TORCH_LIBRARY_IMPL(aten, CPU, m)"] == (26, 28, "registration")
    spans = {s.name: s for s in spans_of("x.cu", CXX)}
    assert spans["REGISTER_OP(Histc)"].leaf == "Histc" and spans["TORCH_IMPL_FUNC(histc_out)"].leaf == "histc_out"


def test_a_file_that_does_not_parse_or_another_language_has_no_functions() -> None:
    assert spans_of("torch/broken.py", "def f(:\n  pass\n") == ()
    assert spans_of("README.md", "def f(): pass\n") == ()
    # C++ the parser half understands still yields what it can, never an exception
    assert isinstance(spans_of("a.cc", "int f( { ]]] \n void g() { return; }\n"), tuple)


TRICKY = """\
import sys

if sys.platform:
    class Guarded(Base):
        @staticmethod
        # a comment between decorators
        @cache(
            size=2)
        def make():
            return 1  # trailing
            # a comment after the last statement is not the def's

        # nor one at the class's indentation
    # nor one at the if's


async def fetch(url):
    async with session() as s:
        async def once():
            return await s.get(url)
    return await once()


def outer():
    class Local:
        def method(self):
            def innermost():
                pass
    return Local


try:
    import fast
except ImportError:
    def fallback():
        pass
else:
    def fast_path():
        pass
finally:
    def cleanup():
        pass

match sys.argv:
    case [_, "x"]:
        def on_x():
            return (1,
                    2)
"""


def test_python_defs_under_blocks_decorated_async_nested_and_their_last_lines() -> None:
    got = by_name("torch/x.py", TRICKY)
    assert got["Guarded.make"] == (5, 10, "method")  # from the first decorator to the last statement
    assert got["fetch"] == (17, 21, "function") and got["fetch.once"] == (19, 20, "function")
    assert got["outer"] == (24, 29, "function")
    assert got["outer.Local.method"] == (26, 28, "method")  # a class in a function: its defs are methods
    assert got["outer.Local.method.innermost"] == (27, 28, "function")
    assert got["fallback"] == (35, 36, "function") and got["cleanup"] == (41, 42, "function")
    assert got["on_x"] == (46, 48, "function")
    # the order `ast` gave: a try's body, else and finally before its handlers
    assert [s.name for s in spans_of("torch/x.py", TRICKY)][-5:] == [
        "outer.Local.method.innermost", "fast_path", "cleanup", "fallback", "on_x"]
    make = next(s for s in spans_of("torch/x.py", TRICKY) if s.name == "Guarded.make")
    assert make.text.splitlines()[0] == "        @staticmethod" and make.text.endswith("return 1  # trailing")


def test_python_lines_ended_by_a_carriage_return_count_as_the_interpreter_counts_them() -> None:
    assert by_name("x.py", "def f():\r    pass\r\rdef g():\r\n    pass\r\n") == {
        "f": (1, 2, "function"), "g": (4, 5, "function")}
    # a comment ended by a lone \r: the def after it is on the next line, not in the comment
    assert by_name("x.py", "# old mac\rdef f():  # c\r    pass\n") == {"f": (2, 3, "function")}


def test_python_syntax_errors_and_python2_files_have_no_functions() -> None:
    assert spans_of("torch/a.py", "def f():\n    return 1\n\nclass\n") == ()  # the error after the defs
    assert spans_of("torch/a.py", "def f():\n    x = (1,\n\ndef g():\n    pass\n") == ()
    assert spans_of("torch/a.py", "def f():\n    pass\n\0\n") == ()
    for py2 in ('def f():\n    print "x"\n', 'def f():\n    raise ValueError, "x"\n',
                "try:\n    pass\nexcept ValueError, e:\n    def f():\n        pass\n", 'def f():\n    exec "x"\n'):
        assert spans_of("torch/old.py", py2) == (), py2


def test_python_the_parser_grammar_lacks_is_still_read_as_the_interpreter_reads_it() -> None:
    # tree-sitter-python has no starred items in an unparenthesised return or assigned tuple (torch has both),
    # nor reads `print >>f, x` as Python 3 does (a shift and a tuple)
    text = "def f(a, b):\n    return *a, *b\n\ndef g(a):\n    x, *y = a, *[]\n    print >>a, x\n"
    assert by_name("torch/a.py", text) == {"f": (1, 2, "function"), "g": (4, 6, "function")}


EXTERN = '''\
namespace tensorflow {
extern template struct Conv2DOp<CPUDevice, Eigen::bfloat16>;
extern template struct Conv2DOp<CPUDevice, Eigen::half>;
extern template struct Conv2DOp<CPUDevice, int32>;

#if GOOGLE_CUDA || TENSORFLOW_USE_ROCM
template <typename T>
void LaunchConvOpImpl(OpKernelContext* context, bool cudnn_use_autotune,
                      const Tensor& input_param, const Tensor& filter,
                      const std::vector<int64>& dilations,
                      const std::vector<int64>& strides, const Padding& padding,
                      const std::vector<int64_t>& explicit_paddings,
                      TensorFormat data_format, Tensor* output) {
  auto* stream = context->op_device_context()->stream();
  OP_REQUIRES(context, stream, absl::InternalError("No GPU stream available."));

  Tensor input = input_param;
}
#endif
}  // namespace tensorflow
'''


def test_explicit_instantiations_do_not_hide_the_definitions_after_them() -> None:
    # tree-sitter reads `extern template struct X<...>;` as a broken declaration that swallows what follows
    assert by_name("tensorflow/core/kernels/conv_ops_impl.h", EXTERN) == {
        "tensorflow::LaunchConvOpImpl": (8, 18, "function")}
