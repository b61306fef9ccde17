"""A report's walk through its release's code graph: from the names, ops and dtypes it carries to the files that
define, implement and register those ops, each with how it was reached (hops, layers, devices).

The walk only gathers; the learned ranker weighs what it gathered (`sftl.localize.candidates`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sftl.codegraph.facts import DYNAMO_PREFIX, op_key
from sftl.codegraph.graph import CodeGraph

MAX_FILES = 60  # files a walk hands over, nearest and most specific first
MAX_SITES_FOLLOWED = 24  # an op with more files than this (Add, Cast) is followed to its nearest ones only
HELPER_LAYERS = ("kernel", "dispatch", "stub", "tflite", "xla", "dataset")  # files whose own headers are followed


@dataclass(frozen=True)
class Reach:
    """A file the walk reached, and how."""

    path: str
    hops: int  # from the report's evidence: a named op's files are 1, a public name's ops' files 2 or more
    layers: frozenset[str]
    devices: frozenset[str]
    ops: tuple[str, ...]  # op keys through which it was reached
    named_op: bool  # through an op the report names itself (raw_ops.X, [Op:X], a CamelCase op name)
    op_files: int  # the fewest files of an op that reached it (1: the op's only file)
    dtype_registered: float  # 1: its registrations name a dtype the report uses; 0: they name others; -1: unknown
    reason: str


@dataclass
class _Found:
    hops: int
    layers: set[str]
    devices: set[str]
    ops: list[str]
    named: bool
    op_files: int
    reason: str


def report_ops(graph: CodeGraph, names: Iterable[str], leaf_names: Iterable[str], named_ops: Iterable[str]
               ) -> dict[str, tuple[int, bool, str]]:
    """The ops a report reaches: op key -> (hops, named by the report itself, the evidence in words)."""
    found: dict[str, tuple[int, bool, str]] = {}

    def take(op: str, hops: int, named: bool, why: str) -> None:
        if op in graph.sites and (op not in found or hops < found[op][0]):
            found[op] = (hops, named, why)

    for name in named_ops:
        take(op_key(name), 0, True, f"the report names the op {name}")
    for name in names:
        parts = name.split(".")
        if parts[0] == "raw_ops" and len(parts) > 1:
            take(op_key(parts[1]), 0, True, f"the report calls {name}")
            continue
        for k in range(len(parts)):  # 'torch.nn.functional.interpolate', then 'nn.functional.interpolate', ...
            ops = graph.ops_of(".".join(parts[k:]))
            if ops and (k == 0 or len(graph.definitions.get(".".join(parts[k:]), ())) <= 3):
                for op, hops in ops:
                    take(op, hops, False, f"{name} creates it")
                break
        leaf = parts[-1]
        take(op_key(leaf), 0 if parts[0] == "torch" and len(parts) == 2 else 1, False, f"{name} is the op")
    for name in names:  # a Python type the report traces (functools.partial) to dynamo's model of it
        take(op_key(f"{DYNAMO_PREFIX}{name.replace('.', '')}"), 1, False, f"the report uses {name}")
    for leaf in leaf_names:
        if len(leaf) >= 5:
            take(op_key(leaf), 1, False, f"the report names {leaf}")
        take(op_key(f"{DYNAMO_PREFIX}{leaf}"), 1, False, f"the report uses {leaf}")
        if len(graph.definitions.get(leaf, ())) in (1, 2, 3):
            for op, hops in graph.ops_of(leaf)[:6]:
                take(op, hops + 1, False, f"{leaf} creates it")
    for op, (hops, named, why) in list(found.items()):  # a composite op is computed by the ops its kernel calls
        for called in graph.op_calls.get(op, ())[:6]:
            take(called, hops + 1, named, f"{why}; its kernel calls {called}")
    return found


def walk(graph: CodeGraph, names: Iterable[str], leaf_names: Iterable[str], named_ops: Iterable[str] = (),
         dtypes: Iterable[str] = (), limit: int = MAX_FILES) -> list[Reach]:
    """The files a report's evidence reaches through the graph, nearest and most specific first."""
    wanted_dtypes = {d for d in dtypes}
    ops = report_ops(graph, names, leaf_names, named_ops)
    files: dict[str, _Found] = {}
    for op, (hops, named, why) in sorted(ops.items(), key=lambda kv: kv[1][0]):
        sites = graph.sites.get(op, [])
        for site in sites[:MAX_SITES_FOLLOWED]:
            reached = files.get(site.path)
            if reached is None:
                files[site.path] = _Found(hops + 1, {site.layer}, {site.device} - {""}, [op], named, len(sites),
                                          f"{_layer_words(site.layer, site.device)} "
                                          f"{graph.op_names.get(op, op).removeprefix(DYNAMO_PREFIX)} ({why})")
                continue
            reached.layers.add(site.layer)
            if site.device:
                reached.devices.add(site.device)
            if op not in reached.ops:
                reached.ops.append(op)
            reached.hops = min(reached.hops, hops + 1)
            reached.named = reached.named or named
            reached.op_files = min(reached.op_files, len(sites))
    for path, reached in list(files.items()):  # the headers a kernel file includes from its own folder
        if reached.hops > 2 or not reached.layers & set(HELPER_LAYERS):
            continue
        folder = path.rsplit("/", 1)[0]
        for header in graph.includes.get(path, ()):
            if header.rsplit("/", 1)[0] == folder and header not in files:
                files[header] = _Found(reached.hops + 1, {"helper"}, set(reached.devices), list(reached.ops),
                                       reached.named, reached.op_files, f"included by {path.rsplit('/', 1)[-1]}, "
                                                                          f"which {reached.reason}")
    ranked = sorted(files.items(), key=lambda kv: (kv[1].hops, kv[1].op_files, kv[0]))[:limit]
    out = []
    for path, r in ranked:
        registered = graph.dtypes.get(path)
        dtype = -1.0 if not wanted_dtypes or registered is None else float(bool(wanted_dtypes & registered))
        out.append(Reach(path, r.hops, frozenset(r.layers), frozenset(r.devices), tuple(r.ops), r.named, r.op_files,
                         dtype, r.reason[:300]))
    return out


def _layer_words(layer: str, device: str) -> str:
    where = f"{device.upper()} " if device in ("cpu", "gpu") else ""
    return {
        "op_def": "defines the op", "kernel": f"registers the {where}kernel of", "xla": "registers the XLA kernel of",
        "tflite": "registers the TFLite kernel of", "gradient": "registers the gradient of",
        "dataset": "implements the dataset op", "meta": "registers the meta function of",
        "decomposition": "registers the decomposition of", "lowering": "registers the inductor lowering of",
        "ref": "defines the reference of", "dispatch": f"defines the {where}dispatch kernel of",
        "stub": f"registers the {where}stub kernel of", "dynamo": "defines dynamo's handler for",
    }.get(layer, "reaches")
