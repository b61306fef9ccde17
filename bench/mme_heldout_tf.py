"""Held-out MME cases on TensorFlow for bench_locate: like mme_heldout.py (fork, delete one method, run workloads,
keep real AttributeError tracebacks). Usage: python bench/mme_heldout_tf.py OUT.jsonl"""

# ruff: noqa: E701, E702, B018, F401, E401
import ast
import importlib
import inspect
import json
import os
import sys
import traceback

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
from tensorflow.python.data.ops import dataset_ops
from tensorflow.python.eager import backprop
from tensorflow.python.framework import sparse_tensor, type_spec
from tensorflow.python.module import module
from tensorflow.python.ops import ragged, resource_variable_ops  # noqa
from tensorflow.python.ops.ragged import ragged_tensor


def w_var():
    v = tf.Variable([1.0, 2.0]); v.assign_add([1.0, 1.0]); v.assign([0.0, 1.0]); v.read_value(); (v * 2).numpy(); v.numpy(); tf.identity(v)
    with tf.GradientTape() as t:
        y = tf.reduce_sum(v * v)
    t.gradient(y, v)
def w_data():
    ds = tf.data.Dataset.from_tensor_slices(tf.range(6)).map(lambda x: x * 2).batch(2).shuffle(3).prefetch(1)
    for _ in ds: pass
    list(ds.take(1).as_numpy_iterator()); ds.element_spec
def w_ragged():
    r = tf.ragged.constant([[1, 2], [3]]); r.to_tensor(); r.row_lengths(); r + 1; r.flat_values; tf.concat([r, r], axis=0)
    s = tf.sparse.from_dense(tf.constant([[0, 1], [2, 0]])); tf.sparse.to_dense(s); s.shape; tf.sparse.reduce_sum(s)
def w_module():
    class M(tf.Module):
        def __init__(self):
            super().__init__(); self.w = tf.Variable(1.0)
    m = M(); m.trainable_variables; m.variables; m.submodules
WORK = {"var": w_var, "data": w_data, "ragged": w_ragged, "module": w_module}
CLASSES = [
    (resource_variable_ops, "BaseResourceVariable", ["var"]),
    (resource_variable_ops, "ResourceVariable", ["var"]),
    (dataset_ops, "DatasetV2", ["data"]),
    (ragged_tensor, "RaggedTensor", ["ragged"]),
    (sparse_tensor, "SparseTensor", ["ragged"]),
    (module, "Module", ["module"]),
    (backprop, "GradientTape", ["var"]),
]
out = open(sys.argv[1], "w")
site = os.path.dirname(os.path.dirname(tf.__file__))
for mod, cname, works in CLASSES:
    cls = getattr(mod, cname)
    path = inspect.getsourcefile(cls); rel = os.path.relpath(path, site)
    tree = ast.parse(open(path).read())
    node = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cname), None)
    if node is None: continue
    methods = [i.name for i in node.body if isinstance(i, ast.FunctionDef) and not (i.name.startswith("__") and i.name.endswith("__")) and not i.decorator_list]
    for meth in methods:
        if meth not in cls.__dict__: continue
        r, w = os.pipe(); pid = os.fork()
        if pid == 0:
            os.close(r); res = None
            try:
                delattr(cls, meth)
                for wk in works: WORK[wk]()
            except AttributeError as exc:
                res = {"tb": "".join(traceback.format_exception(exc)), "msg": str(exc)}
            except BaseException:
                res = None
            os.write(w, json.dumps(res).encode()); os.close(w); os._exit(0)
        os.close(w); data = b""
        while True:
            chunk = os.read(r, 65536)
            if not chunk: break
            data += chunk
        os.waitpid(pid, 0)
        res = json.loads(data or b"null")
        if res and f"'{meth}'" in res["msg"]:
            out.write(json.dumps({"module": mod.__name__, "class": cname, "name": meth, "file": rel, "traceback": res["tb"], "error": "AttributeError: " + res["msg"].strip().splitlines()[-1].strip()}) + "\n"); out.flush()
