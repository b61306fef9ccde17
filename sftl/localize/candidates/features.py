"""Candidate files for any report, each with the evidence that brought it, as named features of (report, file).

Candidates come from what a maintainer would follow: the framework frames of the report's tracebacks, the
public names it uses (resolved through the release's own `tf_export` decorators, module paths and
definitions), the messages it quotes (found as string literals), the category localizers' suspects (a
missing-module error's owner or referrer, a discrepancy's kernels), and BM25 over contents and paths for
the title, the prose, the code and the errors apart. Every signal is a feature; the ranker learns their
weights (`sftl.localize.candidates.ranker`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sftl.codegraph.walk import walk
from sftl.localize.candidates.corpus import CorpusIndex
from sftl.localize.candidates.report import ReportEvidence
from sftl.localize.candidates.tokens import path_words

if TYPE_CHECKING:
    import numpy as np

    from sftl.codegraph.graph import CodeGraph
    from sftl.history import HistoryPrior
    from sftl.model import Localization

BM25_FIELDS = ("all", "title", "text", "code", "error")
# a file a frame or a fix names is a candidate, outside the corpus too, when it is code of these kinds
NAMED_SUFFIXES = (".py", ".cc", ".h", ".cu", ".cpp")
HISTORY_DEPTH = 30  # files of the history prior that become candidates, most supported first
BM25_DEPTH = {"all": 100, "title": 25, "text": 25, "code": 25, "error": 25}
PATH_KINDS: dict[str, tuple[str, ...]] = {
    "in_kernels": ("/kernels/", "/native/"),
    "in_python_ops": ("tensorflow/python/ops/", "torch/nn/", "torch/_refs/", "torch/_decomp/"),
    "in_keras": ("/keras/",),
    "in_contrib": ("/contrib/",),
    "in_compiler": ("tensorflow/compiler/", "torch/_inductor/", "torch/_dynamo/", "torch/fx/", "torch/export/"),
    "in_lite": ("tensorflow/lite/",),
    "in_runtime": ("tensorflow/core/common_runtime/", "tensorflow/core/framework/", "tensorflow/python/framework/",
                   "tensorflow/python/eager/", "torch/csrc/", "c10/"),
    "in_data": ("/data/",),
    "in_distributed": ("distribute", "/parallel/"),
}
# what the discrepancy localizer read about each of its PyTorch suspects (sftl/localize/gcrde/features.py): the
# file's role on the op's path, its device side, how it is reached from the dispatch kernels, the op and dtype
# in its name. Its own hand score is left out: the order it gives is `gcrde_rank`.
KERNEL_EVIDENCE = (
    "role_kernel", "role_wrapper", "role_helper_header", "role_launcher_header", "role_vec_header",
    "role_check_meta", "role_other", "side_diverging", "side_shared", "side_other", "side_confident",
    "defines_dispatch", "registers_stub", "math", "lifted", "included_only", "call_distance", "name_sim",
    "op_in_name", "dtype_match", "hits", "special_layout",
)
# how the report's walk through the release's code graph reached a file (sftl/codegraph/walk.py)
GRAPH_LAYERS = ("op_def", "kernel", "xla", "tflite", "gradient", "dataset", "meta", "decomposition", "lowering", "ref",
                "dispatch", "stub", "dynamo", "helper")
GRAPH_FEATURES = ("graph_rank", "graph_hops", "graph_named_op", "graph_specificity", "graph_ops", "graph_gpu", "graph_cpu",
                  "graph_dtype_registered", "graph_dtype_unregistered", *(f"graph_{layer}" for layer in GRAPH_LAYERS))
REPORT_CUES = ("cue_crash", "cue_check_failed", "cue_memory", "cue_hang", "cue_wrong_result", "cue_gpu", "cue_tflite",
               "cue_compile", "cue_gradient", "cue_dataset", "cue_security", "cue_shape", "cue_dtype")
FEATURES: tuple[str, ...] = (
    *(f"bm25_{f}" for f in BM25_FIELDS), *(f"bm25_{f}_rank" for f in BM25_FIELDS),
    "path_in_title", "path_in_report", "stem_named", "stem_is_name",
    "tb_frame", "tb_position", "tb_innermost",
    "exports_name", "exports_prefix", "defines_name", "module_of_name",
    "message_shingles", "message_fraction",
    "category_rank", "category_score", "mme_rank", "gcrde_rank", *(f"gcrde_{name}" for name in KERNEL_EVIDENCE),
    "is_python", "is_cxx_source", "is_header", "is_cuda", "is_init", "is_generated", *PATH_KINDS, "depth", "size", "release_dir",
    "report_mme", "report_gcrde", "report_has_frames", "report_names", "history_support", "history_score",
    *GRAPH_FEATURES, *REPORT_CUES, "report_python_exception", "report_named_ops", "report_graph_files",
)


@dataclass
class Candidate:
    """One file and its features; `evidence` lists, per feature name, the words a reason quotes."""

    path: str
    doc: int | None  # index in the corpus (None: known only from a frame or a category localizer)
    features: dict[str, float] = field(default_factory=dict)
    evidence: dict[str, str] = field(default_factory=dict)

    def vector(self) -> list[float]:
        return [float(self.features.get(name, 0.0)) for name in FEATURES]


def gather(
    index: CorpusIndex,
    report: ReportEvidence,
    category_loc: Localization | None = None,
    screening: dict[str, float] | None = None,
    prior: HistoryPrior | None = None,
    graph: CodeGraph | None = None,
) -> list[Candidate]:
    """Every candidate file of one report with its features; `prior`: the files similar earlier fixes changed (the
    stored history's, `sftl.history`), each with its support; `graph`: the release's code graph, which the report's
    names, ops and dtypes walk to the files defining, implementing and registering its ops."""
    import numpy as np

    paths = index.paths
    position = {p: i for i, p in enumerate(paths)}
    found: dict[str, Candidate] = {}

    def add(path: str) -> Candidate:
        cand = found.get(path)
        if cand is None:
            cand = found[path] = Candidate(path, position.get(path))
        return cand

    queries = {
        "all": (*report.title_words, *report.title_words, *report.text_words, *report.code_words, *report.error_words),
        "title": report.title_words, "text": report.text_words, "code": report.code_words, "error": report.error_words,
    }
    field_scores: dict[str, np.ndarray] = {}
    ascending: dict[str, np.ndarray] = {}  # each field's scores sorted, for a candidate's rank by bisection
    for name, query in queries.items():
        scores = index.scores(query)
        field_scores[name] = scores
        ascending[name] = np.sort(scores)
        if not len(scores) or float(scores.max()) <= 0:
            continue
        for d in np.argsort(-scores)[: BM25_DEPTH[name]]:
            if scores[d] > 0:
                add(paths[d])
    for i, path in enumerate(report.frames):
        if path in position or path.endswith(NAMED_SUFFIXES):
            cand = add(path)
            if "tb_frame" not in cand.features:
                cand.features.update(tb_frame=1.0, tb_position=1.0 / (1 + i), tb_innermost=float(i == 0))
                cand.evidence["tb_frame"] = f"traceback frame {i + 1} from the error"
    _names(index, report, add)
    _messages(index, report, add)
    if category_loc is not None:
        own_rank = "mme_rank" if screening and screening.get("mme") else "gcrde_rank"
        for rank, s in enumerate(category_loc.suspects, start=1):
            cand = add(s.path)
            cand.features.update(category_rank=1.0 / rank, category_score=float(s.score))
            cand.features[own_rank] = 1.0 / rank
            for name in KERNEL_EVIDENCE:
                if s.features.get(name):
                    cand.features[f"gcrde_{name}"] = float(s.features[name])
            cand.evidence["category_rank"] = s.reason
    for fp in (prior.files if prior is not None else ())[:HISTORY_DEPTH]:
        if fp.support > 0 and (fp.path in position or fp.path.endswith(NAMED_SUFFIXES)):
            cand = add(fp.path)
            cand.features.update(history_support=float(fp.support), history_score=float(fp.score))
            cand.evidence["history_support"] = fp.reason
    reached = _graph(graph, report, add) if graph is not None else 0
    for cand in found.values():
        _file_features(cand, index, report, field_scores, ascending, screening or {})
        cand.features["report_graph_files"] = float(reached)
    return list(found.values())


def _graph(graph: CodeGraph, report: ReportEvidence, add: Callable[[str], Candidate]) -> int:
    """The files the report's walk reaches, with how; the number reached."""
    reaches = walk(graph, report.names, report.leaf_names, report.named_ops, report.dtypes)
    for rank, r in enumerate(reaches, start=1):
        if not r.path.endswith(NAMED_SUFFIXES + (".cu", ".cuh", ".hpp", ".mm", ".yaml")):
            continue
        cand = add(r.path)
        f = cand.features
        f.update(graph_rank=1.0 / rank, graph_hops=1.0 / r.hops, graph_named_op=float(r.named_op),
                 graph_specificity=1.0 / r.op_files, graph_ops=float(len(r.ops)), graph_gpu=float("gpu" in r.devices),
                 graph_cpu=float("cpu" in r.devices), graph_dtype_registered=float(r.dtype_registered == 1.0),
                 graph_dtype_unregistered=float(r.dtype_registered == 0.0))
        for layer in r.layers:
            f[f"graph_{layer}"] = 1.0
        cand.evidence["graph_rank"] = r.reason
    return len(reaches)


def _names(index: CorpusIndex, report: ReportEvidence, add: Callable[[str], Candidate]) -> None:
    files = set(index.paths)  # a dotted name's module file must be one of the corpus's
    for name in report.names:
        parts = name.split(".")
        for k in range(len(parts), 0, -1):  # 'data.Dataset.map' is exported as 'data.Dataset'
            prefix = ".".join(parts[:k])
            docs = index.exports.get(prefix) or []
            for d in docs[:8]:
                cand = add(index.paths[d])
                key = "exports_name" if k == len(parts) else "exports_prefix"
                cand.features[key] = cand.features.get(key, 0.0) + 1.0
                cand.evidence.setdefault(key, f"exports {prefix}")
            if docs:
                break
        module = _module_file(parts, files, index.framework)
        if module is not None:
            cand = add(module)
            cand.features["module_of_name"] = 1.0
            cand.evidence.setdefault("module_of_name", f"the module of {name}")
    for leaf in report.leaf_names:
        docs = index.defines.get(leaf.lower().replace("_", ""), [])
        if 0 < len(docs) <= 6:  # a name defined in many places points at none of them
            for d in docs:
                cand = add(index.paths[d])
                cand.features["defines_name"] = cand.features.get("defines_name", 0.0) + 1.0 / len(docs)
                cand.evidence.setdefault("defines_name", f"defines {leaf}")


def _module_file(parts: list[str], files: set[str], framework: str = "") -> str | None:
    """`torch.distributions.gamma.Gamma` -> torch/distributions/gamma.py (the longest prefix that is a module);
    TensorFlow's `contrib.seq2seq.x` is looked for under tensorflow/ and tensorflow/python/."""
    roots = ("tensorflow/", "tensorflow/python/") if framework == "tensorflow" else ("",)
    for k in range(len(parts), 1 if framework != "tensorflow" else 0, -1):
        for root in roots:
            base = root + "/".join(parts[:k])
            for cand in (f"{base}.py", f"{base}/__init__.py"):
                if cand in files:
                    return cand
    return None


def _messages(index: CorpusIndex, report: ReportEvidence, add: Callable[[str], Candidate]) -> None:
    if not report.message_shingles:
        return
    hits: dict[int, int] = {}
    for s in report.message_shingles:
        for d in index.with_shingle(s):
            hits[d] = hits.get(d, 0) + 1
    for d, n in sorted(hits.items(), key=lambda kv: -kv[1])[:30]:
        cand = add(index.paths[d])
        cand.features["message_shingles"] = float(n)
        cand.features["message_fraction"] = n / len(report.message_shingles)
        cand.evidence["message_shingles"] = "holds the message the report quotes"


def _file_features(cand: Candidate, index: CorpusIndex, report: ReportEvidence, field_scores: dict[str, np.ndarray],
                   ascending: dict[str, np.ndarray], screening: dict[str, float]) -> None:
    import numpy as np

    f = cand.features
    d = cand.doc
    for name, scores in field_scores.items():
        if d is None or not len(scores):
            continue
        top = float(scores.max())
        value = float(scores[d])
        f[f"bm25_{name}"] = value / top if top > 0 else 0.0
        above = len(scores) - int(np.searchsorted(ascending[name], value, side="right"))  # documents scoring higher
        f[f"bm25_{name}_rank"] = 1.0 / (1 + above) if value > 0 else 0.0
    stem_words = set(path_words(cand.path.rsplit("/", 1)[-1]))
    title = set(report.title_words)
    every = title | set(report.text_words) | set(report.code_words) | set(report.error_words)
    if stem_words:
        f["path_in_title"] = len(stem_words & title) / len(stem_words)
        f["path_in_report"] = len(stem_words & every) / len(stem_words)
    stem = cand.path.rsplit("/", 1)[-1].split(".", 1)[0].lower()
    f["stem_named"] = float(stem in every)
    # a class or function named after its file (BeamSearchDecoder in beam_search_decoder.py, conv2d in conv2d.py)
    core = re.sub(r"_(ops?|impl|kernels?|lib|utils?)$", "", stem)
    f["stem_is_name"] = float(bool(core) and core in report.snake_names)
    path = cand.path
    f["is_python"] = float(path.endswith(".py"))
    f["is_cxx_source"] = float(path.endswith((".cc", ".cpp", ".c", ".cu")))
    f["is_header"] = float(path.endswith((".h", ".hpp", ".cuh")))
    f["is_cuda"] = float(path.endswith((".cu", ".cuh", ".cu.cc", ".cu.h")) or "/cuda/" in path or "_gpu" in path)
    f["is_init"] = float(path.endswith("__init__.py"))
    f["is_generated"] = float(path.rsplit("/", 1)[-1].startswith("gen_"))
    for kind, needles in PATH_KINDS.items():
        f[kind] = float(any(n in path for n in needles))
    f["depth"] = float(path.count("/"))
    if d is not None:
        f["size"] = math.log1p(index.sizes[d])
    dirs = index.release_dirs
    f["release_dir"] = float(dirs is None or path.rsplit("/", 1)[0] in dirs)
    f["report_mme"] = float(screening.get("mme", 0.0))
    f["report_gcrde"] = float(screening.get("gcrde", 0.0))
    f["report_has_frames"] = float(bool(report.frames))
    f["report_names"] = float(len(report.names))
    for name, value in report.cues:
        f[name] = value
    f["report_python_exception"] = float(report.python_exception)
    f["report_named_ops"] = float(len(report.named_ops))
