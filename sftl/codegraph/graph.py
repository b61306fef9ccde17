"""A release's code graph put together from its files' facts: op -> the files defining, implementing and registering
it (per layer and device), public name -> the ops its definition creates, file -> the headers it includes.

What is read of each file is kept per source layer (a registered tree, a wheel) on disk under
`<cache_dir>/codegraph/`, so the C++ tree under twenty TensorFlow wheels is read once; the graph of a layered
source is put together from its layers' facts (the first layer holding a path wins, as the source reads it) and
kept on disk too, so a stored report's `locate` only loads it.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sftl.codegraph.facts import FACTS_FORMAT, FileFacts, PyFunction, device_of, op_key, read_facts

if TYPE_CHECKING:
    from sftl.sources import SourceProvider

GRAPH_FORMAT = 3  # bump when what a composed graph keeps changes
CALL_DEPTH = 2  # calls followed from a public name's definition to the ops it creates
MAX_OPS_PER_NAME = 16  # a function creating more ops than this (a dispatcher) is cut to its nearest ones
MAX_SITES_PER_OP = 40
SOURCE_SUFFIXES = (".py", ".cc", ".h", ".cpp", ".cu", ".cuh", ".c", ".hpp", ".mm", ".inl")
# the folders whose files the graph reads (the rest of a tree holds no op's code)
ROOTS = {"tensorflow": ("tensorflow/",), "pytorch": ("torch/", "aten/", "c10/", "functorch/", "torchgen/")}
SKIP_PARTS = frozenset({"test", "tests", "testing", "testdata", "third_party", "benchmarks", "examples", "docs",
                        "g3doc", "kernel_tests", "include", "__pycache__"})
NATIVE_YAML = "aten/src/ATen/native/native_functions.yaml"
# dispatch keys of native_functions.yaml and the device they run on
DISPATCH_DEVICE = {"CPU": "cpu", "CUDA": "gpu", "QuantizedCPU": "cpu", "QuantizedCUDA": "gpu", "SparseCPU": "cpu",
                   "SparseCUDA": "gpu", "SparseCsrCPU": "cpu", "SparseCsrCUDA": "gpu", "MPS": "mps", "NestedTensorCPU": "cpu",
                   "NestedTensorCUDA": "gpu", "MkldnnCPU": "cpu"}
# aliases Python code calls modules by
MODULE_ALIASES = {"F": "functional", "nn": "nn", "_VF": "functional"}


@dataclass(frozen=True)
class Site:
    """Where an op's code is: the file, the layer it plays, the device it runs on ('' when any)."""

    path: str
    layer: str
    device: str


@dataclass
class CodeGraph:
    """One release's graph (the parts a report's walk needs)."""

    framework: str
    sites: dict[str, list[Site]] = field(default_factory=dict)  # op key -> sites
    names: dict[str, tuple[tuple[str, int], ...]] = field(default_factory=dict)  # name -> ((op key, hops), ...)
    definitions: dict[str, tuple[str, ...]] = field(default_factory=dict)  # name -> files defining it
    includes: dict[str, tuple[str, ...]] = field(default_factory=dict)  # file -> files it includes (resolved)
    dtypes: dict[str, frozenset[str]] = field(default_factory=dict)  # file -> dtypes its registrations name
    op_calls: dict[str, list[str]] = field(default_factory=dict)  # PyTorch: a composite op -> the ops its kernel calls
    op_names: dict[str, str] = field(default_factory=dict)  # op key -> the op's name as its sources write it
    files: int = 0  # files read

    def ops_of(self, name: str) -> tuple[tuple[str, int], ...]:
        return self.names.get(name, ())


def is_graph_path(path: str, framework: str) -> bool:
    if not path.startswith(ROOTS.get(framework, ("torch/", "tensorflow/"))) or not path.endswith(SOURCE_SUFFIXES):
        return path == NATIVE_YAML
    parts = path.split("/")
    if any(p in SKIP_PARTS for p in parts[:-1]):
        return False
    stem = parts[-1].split(".", 1)[0]
    return not (stem.startswith("test_") or stem.endswith(("_test", "_tests", "_benchmark")))


def layers_of(source: SourceProvider) -> list[SourceProvider]:
    providers = getattr(source, "providers", None)
    return list(providers) if providers else [source]


def layer_facts(layer: SourceProvider, framework: str, cache: Path | None) -> dict[str, FileFacts]:
    """Every graph file's facts of one source layer (kept on disk, keyed by the layer and its file list)."""
    paths = sorted(p for p in layer.list_files() if is_graph_path(p, framework))
    digest = hashlib.sha1(f"{FACTS_FORMAT}\0{framework}\0{layer.description}\0{len(paths)}".encode())
    for p in paths:
        digest.update(p.encode())
    where = cache / f"layer-{digest.hexdigest()[:20]}.pkl" if cache is not None else None
    loaded = load_kept(where)
    if isinstance(loaded, dict):
        return loaded
    facts: dict[str, FileFacts] = {}
    for path in paths:
        if path == NATIVE_YAML:
            continue
        text = layer.read_text(path)
        if text is None:
            continue
        found = read_facts(path, text, framework)
        if found is not None:
            facts[path] = found
    save_kept(where, facts)
    return facts


def build_graph(source: SourceProvider, cache_dir: Path | None) -> CodeGraph:
    """The code graph of a source: loaded when kept, else composed from its layers' facts and kept."""
    framework = source.framework
    listed = source.list_files()
    key = hashlib.sha1(f"{GRAPH_FORMAT}\0{FACTS_FORMAT}\0{source.description}\0{len(listed)}".encode()).hexdigest()[:20]
    cache = cache_dir / "codegraph" if cache_dir is not None else None
    kept = cache / f"graph-{key}.pkl" if cache is not None else None
    loaded = load_kept(kept)
    if isinstance(loaded, CodeGraph):
        return loaded
    layers = layers_of(source)
    layer_of = getattr(source, "layer_of", None)
    per_layer: dict[int, dict[str, FileFacts]] = {}
    merged: dict[str, FileFacts] = {}
    known = {p for p in listed if is_graph_path(p, framework)}  # what an include may name, facts or none
    for path in listed:
        if not is_graph_path(path, framework) or path == NATIVE_YAML:
            continue
        layer = layer_of(path) if callable(layer_of) else source
        if layer is None:
            continue
        at = next((i for i, lay in enumerate(layers) if lay is layer), 0)
        if at not in per_layer:
            per_layer[at] = layer_facts(layers[at], framework, cache)
        found = per_layer[at].get(path)
        if found is not None:
            merged[path] = found
    graph = compose(framework, merged, source.read_text(NATIVE_YAML) if framework == "pytorch" else None, known)
    save_kept(kept, graph)
    return graph


def compose(framework: str, facts: dict[str, FileFacts], native_yaml: str | None = None,
            paths: set[str] | None = None) -> CodeGraph:
    """The graph of a set of files' facts (and, for PyTorch, the release's native_functions.yaml); `paths`: every
    file an include may name (those without facts too)."""
    graph = CodeGraph(framework, files=len(facts))
    sites: dict[str, dict[tuple[str, str], Site]] = {}

    def add(key: str, site: Site) -> None:
        sites.setdefault(key, {}).setdefault((site.path, site.layer), site)

    for path, f in facts.items():
        for layer, name, device in f.sites:
            key = op_key(name)
            add(key, Site(path, layer, device))
            if key not in graph.op_names or name[:1].isupper() and not graph.op_names[key][:1].isupper():
                graph.op_names[key] = name  # TensorFlow's CamelCase over a TFLite CAPS or a Python snake_case
        if f.dtypes:
            graph.dtypes[path] = f.dtypes
    if framework == "pytorch" and native_yaml:
        _native_sites(graph, facts, native_yaml, add)
        graph.op_calls = {k: list(dict.fromkeys(v))[:12] for k, v in graph.op_calls.items() if v}
    graph.sites = {k: list(v.values())[:MAX_SITES_PER_OP] for k, v in sites.items()}
    graph.includes = _resolve_includes(facts, paths if paths is not None else set(facts))
    graph.names, graph.definitions = _name_ops(facts, framework, set(graph.sites))
    return graph


def _native_sites(graph: CodeGraph, facts: dict[str, FileFacts], native_yaml: str, add: object) -> None:
    """PyTorch: an op's dispatch kernels (native_functions.yaml) to the files defining them, and the stubs those
    files call to the files registering each device's kernel."""
    from sftl.codegraph.native import NativeYamlError, parse_native_functions

    try:
        natives = parse_native_functions(native_yaml)
    except NativeYamlError:
        return
    defining: dict[str, list[str]] = {}
    registering: dict[str, list[str]] = {}
    for path, f in facts.items():
        for name in f.kernel_functions:
            defining.setdefault(name, []).append(path)
        for stub in f.stub_registrations:
            registering.setdefault(stub, []).append(path)
    assert callable(add)
    op_calls = graph.op_calls
    for base, entries in natives.items():
        key = op_key(base.rstrip("_"))
        for entry in entries:
            # no dispatch: one composite kernel named as the op (CompositeImplicitAutograd)
            for dispatch_key, function in (entry.dispatch or {"CompositeImplicitAutograd": base}).items():
                for k in (k.strip() for k in dispatch_key.split(",")):
                    device = DISPATCH_DEVICE.get(k, "")
                    if k.startswith("Composite"):
                        device = ""
                    for path in defining.get(function, [])[:4]:
                        add(key, Site(path, "dispatch", device or device_of(path)))
                        graph.op_names.setdefault(key, base)
                        for caller, stub in facts[path].stub_calls:
                            if caller == function:
                                for reg in registering.get(stub, [])[:6]:
                                    add(key, Site(reg, "stub", device_of(reg)))
                        if not device:  # a composite kernel: the ops it calls compute it
                            calls = op_calls.setdefault(key, [])
                            calls.extend(op for caller, op in facts[path].op_calls if caller == function and op != key)


def _resolve_includes(facts: dict[str, FileFacts], known: set[str]) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for path, f in facts.items():
        if not f.includes:
            continue
        folder = path.rsplit("/", 1)[0]
        resolved = []
        for inc in f.includes:
            for cand in (inc, f"aten/src/{inc}", f"{folder}/{inc}", f"torch/csrc/{inc}"):
                if cand in known:
                    resolved.append(cand)
                    break
        if resolved:
            out[path] = tuple(resolved)
    return out


def module_name(path: str) -> str:
    """tensorflow/python/ops/image_ops_impl.py -> tensorflow.python.ops.image_ops_impl; a package's __init__ is
    the package."""
    stem = path[:-3] if path.endswith(".py") else path
    stem = re.sub(r"/__init__$", "", stem)
    return stem.replace("/", ".")


def _name_ops(facts: dict[str, FileFacts], framework: str, known_ops: set[str]
              ) -> tuple[dict[str, tuple[tuple[str, int], ...]], dict[str, tuple[str, ...]]]:
    """Each Python definition's ops, its own and those of the functions it calls (same file, or `module.fn` with the
    module known by its file's stem), by hops; keyed by the definition's qualified module path, its public export
    names and its leaf name."""
    by_stem: dict[str, list[str]] = {}
    for path in facts:
        if path.endswith(".py"):
            stem = path.rsplit("/", 1)[-1][:-3]
            by_stem.setdefault("/".join(path.split("/")[-2:])[:-3] if stem == "__init__" else stem, []).append(path)

    def function(path: str, name: str) -> PyFunction | None:
        return facts[path].functions.get(name) if path in facts else None

    resolved: dict[tuple[str, str], list[tuple[str, str]]] = {}

    def callee(path: str, call: str) -> list[tuple[str, str]]:
        key = (path, call)
        if key in resolved:
            return resolved[key]
        if "." not in call:
            found = [(path, call)] if function(path, call) is not None else []
        else:
            alias, fn = call.rsplit(".", 1)
            alias = MODULE_ALIASES.get(alias.rsplit(".", 1)[-1], alias.rsplit(".", 1)[-1])
            found = [(p, fn) for p in by_stem.get(alias, [])[:3] if function(p, fn) is not None]
        resolved[key] = found
        return found

    memo: dict[tuple[str, str, int], dict[str, int]] = {}

    def ops_within(path: str, name: str, depth: int) -> dict[str, int]:
        """The ops a definition creates, its own at hop 1, those of what it calls `depth` deep one hop further
        each (memoized per depth: every definition is read once per depth, not once per caller)."""
        key = (path, name, depth)
        if key in memo:
            return memo[key]
        memo[key] = {}  # a call cycle ends here
        fn = function(path, name)
        found: dict[str, int] = {}
        if fn is not None:
            for op in fn.ops:
                if op in known_ops:
                    found[op] = 1
            if depth > 0:
                for call in fn.calls:
                    for nxt in callee(path, call):
                        for op, hop in ops_within(nxt[0], nxt[1], depth - 1).items():
                            if hop + 1 < found.get(op, hop + 2):
                                found[op] = hop + 1
        found = dict(sorted(found.items(), key=lambda kv: kv[1])[:MAX_OPS_PER_NAME])
        memo[key] = found
        return found

    def ops_of(path: str, name: str) -> dict[str, int]:
        return ops_within(path, name, CALL_DEPTH)

    names: dict[str, dict[str, int]] = {}
    definitions: dict[str, list[str]] = {}

    def record(name: str, path: str, ops: dict[str, int]) -> None:
        definitions.setdefault(name, []).append(path)
        if ops:
            into = names.setdefault(name, {})
            for op, hop in ops.items():
                into[op] = min(hop, into.get(op, hop))

    for path, f in facts.items():
        if not path.endswith(".py"):
            continue
        module = module_name(path)
        for qualified in f.functions:
            ops = ops_of(path, qualified)
            record(f"{module}.{qualified}", path, ops)
            record(qualified, path, ops)  # 'resize_images', and a method as 'Dataset.map'

        for public, qualified in f.exports:
            record(public, path, ops_of(path, qualified))
            for member in f.functions:  # an exported class's methods under its public name: 'data.Dataset.map'
                if member.startswith(f"{qualified}.") and member.count(".") == qualified.count(".") + 1:
                    record(f"{public}.{member.rsplit('.', 1)[1]}", path, ops_of(path, member))
    kept_names = {k: tuple(sorted(v.items(), key=lambda kv: (kv[1], kv[0]))) for k, v in names.items()}
    kept_defs = {k: tuple(dict.fromkeys(v))[:6] for k, v in definitions.items()}
    return kept_names, kept_defs


def load_kept(where: Path | None) -> object:
    """What a kept pickle holds; None where there is none, or it is damaged or of an older sftl."""
    if where is None or not where.is_file():
        return None
    try:
        with where.open("rb") as fh:
            return pickle.load(fh)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, TypeError, ImportError):
        return None  # a damaged or older file is built again and overwritten


def save_kept(where: Path | None, value: object) -> None:
    """Keep a value on disk whole or not at all (a temporary file, then renamed); a read-only cache is no error."""
    if where is None:
        return
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        tmp = where.with_name(f"{where.name}.tmp{os.getpid()}")
        with tmp.open("wb") as fh:
            pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, where)
    except OSError:
        pass  # a read-only cache costs time, not results


def sizes_on_disk(cache_dir: Path) -> dict[str, int]:
    """Bytes of each kept layer's facts and composed graph (for `sftl sources graph` and the benchmarks)."""
    folder = cache_dir / "codegraph"
    return {p.name: p.stat().st_size for p in sorted(folder.glob("*.pkl"))} if folder.is_dir() else {}

