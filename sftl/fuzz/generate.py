"""Input generation for one API: random, pairwise (IPOG covering arrays) and seeded neighbourhoods, with shared dimensions."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sftl.fuzz.hints import Hints, mine_hints
from sftl.fuzz.pairwise import pairwise_rows
from sftl.fuzz.specs import MAX_DIM, MAX_RANK, ApiSpec, ArgSpec

INT_RANGE = (-100, 100)
MAX_NUMEL = 4096  # per tensor: products of inputs (kron, outer, cartesian_prod) stay small enough to run quickly
ABSENT = "absent"  # level: leave the argument at its default
DEFAULT_WEIGHT = 3.0  # random strategy: how much likelier "left at its default" is than one other level
NONE = "none"  # level: pass None

# Dimension values, weighted: shapes of size 1..5 are where most constraints bite; 0 and 10 are edges.
_DIM_VALUES = list(range(MAX_DIM + 1))
_DIM_WEIGHTS = [2, 10, 10, 9, 8, 6, 3, 2, 2, 1, 2]

Call = dict[str, Any]  # argument name -> value descriptor (JSON); a missing name is left at its default

# List attributes that describe a window over the input's dims (TensorFlow: one entry per input dim)
_WINDOW_LISTS = ("strides", "dilations", "ksize", "window_strides", "rates", "window_dimensions")
_PADDING_LISTS = ("explicit_paddings", "paddings")
IN_RANGE = 0.85  # share of index/axis values drawn in range; the rest keeps the out-of-range side explored


@dataclass(frozen=True)
class FuzzInput:
    """One generated input: the call's argument values and the seed its tensors' contents are drawn from."""

    call: Call
    seed: int
    levels: dict[str, Any] | None = field(default=None, compare=False)  # the parameter levels drawn

    def key(self) -> str:
        return json.dumps(self.call, sort_keys=True)


@dataclass(frozen=True)
class Param:
    """A discrete dimension of the input space (pairwise covers every pair of these levels)."""

    name: str
    levels: tuple[Any, ...]
    weights: tuple[float, ...] | None = None  # random strategy only


# -------------------------------------------------------------------------------- the input space


def _absent_levels(arg: ArgSpec) -> tuple[Any, ...]:
    out: tuple[Any, ...] = ()
    if arg.has_default:
        out += (ABSENT,)
    if arg.optional:
        out += (NONE,)
    return out


def params_for(spec: ApiSpec) -> list[Param]:
    """The discrete parameters of an API's input space, in spec order."""
    params: list[Param] = []
    torch_like = spec.framework != "tensorflow"
    groups: set[str] = set()
    if len(spec.tensor_args) > 1:  # one rank for every tensor: the common case of relational constraints
        params.append(Param("_same_rank", (False, True)))
    if torch_like and spec.tensor_args:
        dts = spec.tensor_args[0].dtypes
        params.append(Param("_dtype", dts, tuple(4.0 if d == "float32" else 1.0 for d in dts)))
    for a in spec.args:
        extra = _absent_levels(a)
        # a default is a valid value by design: leaving arguments out often lets the first round find
        # valid inputs of many-argument APIs (conv2d) at all, and adaptation rebalances from there
        ew = tuple(DEFAULT_WEIGHT if lv == ABSENT else 1.0 for lv in extra)
        n = a.name
        if a.kind in ("tensor", "tensors"):
            if a.kind == "tensor":
                ranks: tuple[Any, ...] = tuple(range(MAX_RANK + 1))
                rw = (2.0, 3.0, 3.0, 3.0, 2.0, 1.0, 1.0)
                if a.role == "axis":  # an axis given as a tensor is a scalar (or a short list of axes)
                    rw = (12.0, 4.0, 1.0, 1.0, 0.5, 0.5, 0.5)
                params.append(Param(f"{n}.rank", extra + ranks, ew + rw))
            else:
                lo = max(a.min_count, 0)
                counts = tuple(range(lo, lo + 5))
                params.append(Param(f"{n}.len", extra + counts, ew + tuple(1.0 for _ in counts)))
                params.append(Param(f"{n}.rank", tuple(range(5)), (1.0, 3.0, 3.0, 2.0, 1.0)))
            if torch_like:
                dl = ("shared",) + a.dtypes
                dw = (len(a.dtypes) * 2.5,) + tuple(1.0 for _ in a.dtypes)
                if a.role == "index":  # indices are integers: int64 first, int32 second, the rest stay reachable
                    dw = (1.0,) + tuple(8.0 if d == "int64" else 3.0 if d == "int32" else 0.5 for d in a.dtypes)
                params.append(Param(f"{n}.dtype", dl, dw))
            elif a.group is not None:
                if a.group not in groups:
                    groups.add(a.group)
                    params.append(Param(f"{a.group}.dtype", a.dtypes, tuple(
                        3.0 if d in ("float32", "int32") else 1.0 for d in a.dtypes)))
            else:
                params.append(Param(f"{n}.dtype", a.dtypes))
        elif a.kind == "int":
            lv = (-1, 0, 1, 2, 3, "pool", "rand")
            params.append(Param(n, extra + lv, ew + (1.5, 1.5, 1.5, 1.5, 1.0, 2.0, 1.0)))
        elif a.kind in ("ints", "floats", "bools"):
            lw: tuple[float, ...]
            lens: tuple[Any, ...]
            if a.length and a.length > 1:
                lens, lw = (1, a.length), (1.0, 1.0)
            elif a.length == 1:
                lens, lw = (1,), (1.0,)
            else:
                if a.min_count:
                    lens = (a.min_count, a.min_count + 1)
                else:
                    lens = tuple(range(0, 5))
                # "rank": one entry per dim of the first tensor (strides, ksize); "rank2": two (paddings)
                window = a.name in _WINDOW_LISTS
                lens += ("rank", "rank2")
                lw = tuple(1.0 for _ in lens[:-2]) + (
                    8.0 if window else 1.0, 4.0 if a.name in _PADDING_LISTS else 0.5)
            params.append(Param(f"{n}.len", extra + lens, ew + lw))
            if a.kind == "ints":
                ones = 6.0 if a.name in _WINDOW_LISTS else 1.5
                params.append(Param(f"{n}.vals", ("pool", "small", "ones", "rand"), (3.0, 3.0, ones, 1.0)))
        elif a.kind == "float":
            params.append(Param(n, extra + (0.0, 1.0, -1.0, 0.5, 2.0, "rand")))
        elif a.kind == "bool":
            params.append(Param(n, extra + (False, True)))
        elif a.kind == "str":
            if a.choices:
                params.append(Param(n, extra + a.choices))
            elif a.name == "equation":
                params.append(Param(n, ("einsum",)))
            else:
                params.append(Param(n, extra or ("", "x")))
        elif a.kind == "scalar":
            params.append(Param(n, extra + (0, 1, -1, 2, 0.5, True, "rand")))
        elif a.kind == "dtype":
            params.append(Param(n, extra + a.dtypes))
    return params


# ------------------------------------------------------------------------------- instantiation


class _Dims:
    """A per-sample pool of dimension sizes reused across arguments, so relational constraints hold often."""

    def __init__(self, rng: random.Random, sizes: Sequence[int] = ()) -> None:
        self.rng = rng
        k = rng.choice((1, 1, 2, 2, 3))
        self.pool = rng.choices(_DIM_VALUES, _DIM_WEIGHTS, k=k)
        if sizes and rng.random() < 0.6:  # a size the API's messages asked for joins the pool
            self.pool.append(rng.choice(sizes))

    def draw(self) -> int:
        if self.rng.random() < 0.9:
            return self.rng.choice(self.pool)
        return self.rng.randint(0, MAX_DIM)


def _shape(rank: int, dims: _Dims, prev: list[int] | None, rng: random.Random) -> list[int]:
    shape = [dims.draw() for _ in range(rank)]
    u = rng.random()
    if prev and rank and u < 0.3:  # trailing dims copied: the broadcasting neighbourhood
        k = rng.randint(1, min(rank, len(prev)))
        shape[rank - k:] = prev[len(prev) - k:]
    elif prev and rank and u < 0.5:  # a matmul chain: this tensor's rows are the previous one's columns
        shape[-2 if rank >= 2 else 0] = prev[-1]
    while _numel(shape) > MAX_NUMEL:
        shape[shape.index(max(shape))] = 1
    return shape


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _int(level: Any, dims: _Dims, rng: random.Random) -> int:
    if level == "pool":
        return dims.draw()
    if level == "rand":
        return rng.randint(*INT_RANGE)
    if level == "small":
        return rng.randint(-1, 3)
    if level == "ones":  # strides, dilations, repeats: all-ones lists are the common valid value
        return 1
    return int(level)


def _einsum_equation(ranks: list[int], rng: random.Random) -> str:
    letters = "ijkl"[: rng.randint(1, 4)]
    terms = ["".join(rng.choice(letters) for _ in range(r)) for r in ranks]
    used = sorted(set("".join(terms)))
    if rng.random() < 0.3 or not used:
        return ",".join(terms)
    out = "".join(c for c in used if rng.random() < 0.5)
    return ",".join(terms) + "->" + out


def _presence(levels: dict[str, Any], a: ArgSpec) -> Any:
    """The level that says whether an argument is given (and its main value)."""
    for key in (a.name, f"{a.name}.len", f"{a.name}.rank"):
        if key in levels:
            return levels[key]
    return None


def _list_shapes(base: int, count: int, dims: _Dims, prev: list[int] | None, rng: random.Random) -> list[list[int]]:
    """Shapes of a tensor list: mostly one shape for all (stack) or all dims shared but one (concat)."""
    first = _shape(base, dims, prev, rng)
    mode = rng.random()
    out = [first]
    for _ in range(count - 1):
        if mode < 0.4:
            out.append(list(first))
        elif mode < 0.75 and first:
            axis = rng.randrange(len(first)) if not out[1:] else _diff_axis(out[0], out[1])
            s = list(first)
            s[axis if axis >= 0 else 0] = dims.draw()
            out.append(s)
        else:
            r = base if rng.random() < 0.8 else rng.randint(0, 4)
            out.append(_shape(r, dims, out[-1], rng))
    return out


def _diff_axis(a: Sequence[int], b: Sequence[int]) -> int:
    diff = [i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y]
    return diff[0] if diff else -1


def _first_tensor(call: Call, skip: set[str]) -> dict[str, Any] | None:
    for n, v in call.items():
        if n in skip:
            continue
        if v.get("t") == "tensor":
            return v
        if v.get("t") == "tensors" and v["items"]:
            return v["items"][0]
    return None


def instantiate(spec: ApiSpec, levels: dict[str, Any], rng: random.Random, hints: Hints | None = None) -> Call:
    """Concrete argument values for one assignment of parameter levels (and value hints, when known)."""
    hints = hints or Hints()
    dims = _Dims(rng, hints.sizes)
    call: Call = {}
    if levels.get("_same_rank"):
        levels = dict(levels)
        first: Any = None
        for a in spec.tensor_args:
            key = f"{a.name}.rank"
            if _presence(levels, a) in (ABSENT, NONE) or a.name in hints.ranks or a.role == "axis":
                continue  # a rank the messages asked for outranks "same rank as the others"
            if first is None:
                first = levels[key]
            elif isinstance(levels[key], int) and a.kind == "tensor":
                levels[key] = first
            elif a.kind == "tensors" and isinstance(first, int) and first <= 4:
                levels[key] = first
    shared = levels.get("_dtype", "float32")
    prev: list[int] | None = None
    tensor_ranks: list[int] = []
    for a in spec.args:
        n = a.name
        lv = _presence(levels, a)
        if lv == ABSENT:
            continue
        if lv == NONE:
            call[n] = {"t": "none"}
            continue
        if a.kind in ("tensor", "tensors"):
            if spec.framework == "tensorflow":
                dt = levels.get(f"{a.group}.dtype") if a.group else levels.get(f"{n}.dtype")
            else:
                dt = levels.get(f"{n}.dtype", "shared")
                dt = shared if dt == "shared" else dt
            if a.kind == "tensor":
                shape = _shape(int(levels[f"{n}.rank"]), dims, prev, rng)
                prev = shape
                tensor_ranks.append(len(shape))
                call[n] = {"t": "tensor", "shape": shape, "dtype": dt}
            else:
                count = int(levels[f"{n}.len"])
                shapes = _list_shapes(int(levels[f"{n}.rank"]), count, dims, prev, rng) if count else []
                items = []
                for shape in shapes:
                    prev = shape
                    tensor_ranks.append(len(shape))
                    items.append({"t": "tensor", "shape": shape, "dtype": dt})
                call[n] = {"t": "tensors", "items": items}
        elif a.kind == "int":
            call[n] = {"t": "int", "v": _int(lv, dims, rng)}
        elif a.kind in ("ints", "floats", "bools"):
            if lv in ("rank", "rank2"):  # as many entries as the first tensor has dims (twice, for paddings)
                r = tensor_ranks[0] if tensor_ranks else 4
                lv = r * (2 if lv == "rank2" else 1)
            if a.kind == "ints":
                mode = levels.get(f"{n}.vals", "small")
                call[n] = {"t": "ints", "v": [_int(mode, dims, rng) for _ in range(int(lv))]}
            elif a.kind == "floats":
                call[n] = {"t": "floats", "v": [round(rng.uniform(-2, 4), 3) for _ in range(int(lv))]}
            else:
                call[n] = {"t": "bools", "v": [rng.random() < 0.5 for _ in range(int(lv))]}
        elif a.kind == "float":
            call[n] = {"t": "float", "v": round(rng.gauss(0, 10), 4) if lv == "rand" else float(lv)}
        elif a.kind == "bool":
            call[n] = {"t": "bool", "v": bool(lv)}
        elif a.kind == "str":
            call[n] = {"t": "str", "v": lv}  # einsum equations are filled in below, once ranks are known
        elif a.kind == "scalar":
            if lv == "rand":
                call[n] = {"t": "float", "v": round(rng.gauss(0, 10), 4)}
            elif isinstance(lv, bool):
                call[n] = {"t": "bool", "v": lv}
            elif isinstance(lv, int):
                call[n] = {"t": "int", "v": lv}
            else:
                call[n] = {"t": "float", "v": float(lv)}
        elif a.kind == "dtype":
            call[n] = {"t": "dtype", "v": lv}
    for v in call.values():
        if v.get("t") == "str" and v["v"] == "einsum":
            v["v"] = _einsum_equation(tensor_ranks, rng)
    _values(spec, call, hints, rng)
    return call


def _values(spec: ApiSpec, call: Call, hints: Hints, rng: random.Random) -> None:
    """Contents that depend on other arguments: in-range indices and axes, positive-definite matrices."""
    roles = {a.name for a in spec.args if a.role}
    data = _first_tensor(call, roles)
    for a in spec.args:
        v = call.get(a.name)
        if v is None or v.get("t") not in ("tensor", "tensors"):
            continue
        items = v["items"] if v["t"] == "tensors" else [v]
        if a.role == "axis" and data is not None:
            r = max(len(data["shape"]), 1)
            for t in items:
                n = _numel(t["shape"])
                if n <= 8 and rng.random() < IN_RANGE:  # an axis of the data tensor, Python-style negatives allowed
                    t["vals"] = [rng.randint(-r, r - 1) for _ in range(n)]
        elif a.role == "per_dim" and data is not None and v["t"] == "tensor" and rng.random() < IN_RANGE:
            r = len(data["shape"])
            v["shape"] = [r, 2] if a.name == "paddings" else [r]
            if a.name == "perm":  # a permutation of the data's dims
                v["vals"] = rng.sample(range(r), r)
        elif (a.role == "index" or hints.bounded) and data is not None and data is not v:
            if rng.random() < IN_RANGE:  # every value indexes every dim of the data: in range whatever `dim` is
                for t in items:
                    t["hi"] = min(data["shape"], default=1)
    if (spec.spd or hints.spd) and data is not None and rng.random() < IN_RANGE:
        s = data["shape"]
        if len(s) >= 2 and data["dtype"].startswith(("float", "complex")):
            s[-1] = s[-2]  # square, then symmetric positive-definite contents (the worker builds X X^H + n I)
            data["fill"] = "spd"


# ------------------------------------------------------------------------------ neighbourhoods


def _tensors_in(call: Call) -> list[dict[str, Any]]:
    out = []
    for v in call.values():
        if v.get("t") == "tensor":
            out.append(v)
        elif v.get("t") == "tensors":
            out.extend(v["items"])
    return out


def mutate(spec: ApiSpec, seed_call: Call, rng: random.Random, random_call: Call) -> Call:
    """A neighbour of the reported call: one to three small edits (a dimension, a rank, a dtype, a value)."""
    call = copy.deepcopy(seed_call)
    for a in spec.args:  # a required argument the report's call did not give (or we could not read)
        if a.name not in call and not a.has_default and a.name in random_call:
            call[a.name] = copy.deepcopy(random_call[a.name])
    names = [a.name for a in spec.args]
    by_name = {a.name: a for a in spec.args}
    all_dims = [d for t in _tensors_in(call) for d in t["shape"]] or [1]
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3))):
        tensors = _tensors_in(call)
        if tensors and rng.random() < 0.45:
            _coordinated(call, tensors, rng)
            continue
        n = rng.choice(names)
        a = by_name[n]
        v = call.get(n)
        if v is None or v.get("t") == "none" or rng.random() < 0.1:
            if n in random_call:  # take the value from a fresh random sample
                call[n] = copy.deepcopy(random_call[n])
            elif a.has_default:
                call.pop(n, None)
            continue
        t = v["t"]
        if t in ("tensor", "tensors"):
            target = v if t == "tensor" else (rng.choice(v["items"]) if v["items"] else None)
            if target is None:
                continue
            _mutate_tensor(target, a, rng, all_dims)
            if t == "tensors" and rng.random() < 0.2:
                if v["items"] and rng.random() < 0.5:
                    v["items"].pop(rng.randrange(len(v["items"])))
                else:
                    v["items"].append(copy.deepcopy(target))
        elif t == "int":
            v["v"] = max(INT_RANGE[0], min(INT_RANGE[1], rng.choice(
                (v["v"] + 1, v["v"] - 1, -v["v"], rng.choice(all_dims), rng.randint(-2, 4)))))
        elif t == "ints":
            vals = v["v"]
            if vals and rng.random() < 0.7:
                i = rng.randrange(len(vals))
                vals[i] = rng.choice((vals[i] + 1, vals[i] - 1, rng.choice(all_dims)))
            elif vals and rng.random() < 0.5 and not a.length:
                vals.pop()
            elif not a.length or len(vals) < a.length:
                vals.append(rng.choice(all_dims))
        elif t == "float":
            v["v"] = rng.choice((v["v"] * 2, v["v"] / 2, -v["v"], 0.0, 1.0))
        elif t == "bool":
            v["v"] = not v["v"]
        elif t == "str" and a.choices:
            v["v"] = rng.choice(a.choices)
        elif t == "dtype" and a.dtypes:
            v["v"] = rng.choice(a.dtypes)
    return call


def _coordinated(call: Call, tensors: list[dict[str, Any]], rng: random.Random) -> None:
    """An edit that keeps the call's relations: one dimension size renamed everywhere, or one dtype for all."""
    sizes = sorted({d for t in tensors for d in t["shape"]})
    if sizes and rng.random() < 0.75:
        old = rng.choice(sizes)
        new = max(0, min(MAX_DIM, rng.choice((old + 1, old - 1, rng.randint(1, MAX_DIM)))))
        for t in tensors:
            t["shape"] = [new if d == old else d for d in t["shape"]]
            while _numel(t["shape"]) > MAX_NUMEL:
                t["shape"][t["shape"].index(max(t["shape"]))] = 1
        for v in call.values():  # ints naming that size (split sizes, k, broadcast targets) follow it
            if v.get("t") == "int" and v["v"] == old:
                v["v"] = new
            elif v.get("t") == "ints":
                v["v"] = [new if x == old else x for x in v["v"]]
    else:
        dt = rng.choice([t["dtype"] for t in tensors])
        for t in tensors:
            t["dtype"] = dt


def _mutate_tensor(t: dict[str, Any], a: ArgSpec, rng: random.Random, all_dims: list[int]) -> None:
    shape = t["shape"]
    op = rng.choice(("dim", "dim", "dim", "dim", "rank+", "rank-", "dtype", "dtype", "swap"))
    if op == "dim" and shape:
        i = rng.randrange(len(shape))
        shape[i] = max(0, min(MAX_DIM, rng.choice((shape[i] + 1, shape[i] - 1, rng.choice(all_dims),
                                                   rng.randint(0, MAX_DIM)))))
    elif op == "rank+" and len(shape) < MAX_RANK:
        shape.insert(rng.randint(0, len(shape)), rng.choice(all_dims + [1]))
    elif op == "rank-" and shape:
        shape.pop(rng.randrange(len(shape)))
    elif op == "dtype" and a.dtypes:
        t["dtype"] = rng.choice(a.dtypes)
    elif op == "swap" and len(shape) > 1:
        i, j = rng.sample(range(len(shape)), 2)
        shape[i], shape[j] = shape[j], shape[i]
    while _numel(shape) > MAX_NUMEL:
        shape[shape.index(max(shape))] = 1


# ------------------------------------------------------------------------------------ generator


class InputGenerator:
    """Draws inputs for one API: `random`, `pairwise`, or the neighbourhood of a seed call."""

    def __init__(self, spec: ApiSpec, strategy: str = "random", seed_call: Call | None = None,
                 rng_seed: int = 0, seed_share: float = 0.8) -> None:
        if strategy not in ("random", "pairwise"):
            raise ValueError(f"unknown strategy {strategy!r}")
        self.spec = spec
        self.strategy = strategy
        self.seed_call = seed_call
        self.rng_seed = rng_seed
        self.seed_share = seed_share
        self.params = params_for(spec)
        self.hints = Hints()

    def adapt(self, inputs: Sequence[FuzzInput], valid: Sequence[bool], clip: float = 5.0,
              messages: Iterable[str] = ()) -> None:
        """Reweight each parameter's levels by how often they led to valid inputs; lean towards what rejections ask.

        Levels are never dropped by the random strategy (a weight stays >= 1/clip of its old value), so rare
        valid regions remain reachable. `messages` (the rejections' texts) are mined for relations (`mine_hints`).
        """
        self.hints = mine_hints(self.spec, messages)
        self._adapt_levels(inputs, valid, clip)
        if not self.hints.empty():
            self.params = [self._lean(p) for p in self.params]

    def _lean(self, p: Param, share: float = 0.7) -> Param:
        """Give the levels a hint asks for `share` of the draws (pairwise: keep only them and absent/None)."""
        name, _, what = p.name.rpartition(".")
        h = self.hints
        want: tuple[Any, ...] = ()
        if what == "rank" and name in h.ranks:
            want = h.ranks[name]
        elif what == "len" and name in h.lengths:
            want = h.lengths[name]
        elif what == "dtype" and name in h.dtypes:
            want = (h.dtypes[name],)
        elif what == "vals" and name in h.ones:
            want = ("ones",)
        elif what == "vals" and name in h.positive:
            want = ("pool", "ones")
        elif p.name in h.positive:  # a plain int argument
            want = tuple(x for x in p.levels if x in ("pool",) or (isinstance(x, int) and x > 0))
        if what == "dtype" or p.name == "_dtype":
            p = self._avoid(p)
        levels = p.levels + tuple(x for x in want if x not in p.levels)
        hit = [lv in want and not isinstance(lv, bool) for lv in levels]
        if not any(hit):
            return p
        if self.strategy == "pairwise":
            keep = tuple(lv for lv, k in zip(levels, hit, strict=True) if k or lv in (ABSENT, NONE))
            return replace(p, levels=keep)
        w = list(p.weights or tuple(1.0 for _ in p.levels)) + [1.0] * (len(levels) - len(p.levels))
        on = sum(x for x, k in zip(w, hit, strict=True) if k)
        off = sum(x for x, k in zip(w, hit, strict=True) if not k)
        if off > 0 and on / (on + off) < share:
            scale = share * off / ((1 - share) * on)
            w = [x * scale if k else x for x, k in zip(w, hit, strict=True)]
        return replace(p, levels=levels, weights=tuple(w))

    def _avoid(self, p: Param, factor: float = 0.15) -> Param:
        """Dtypes without a kernel are drawn `factor` as often (pairwise: dropped while others remain)."""
        bad = [lv in self.hints.avoid for lv in p.levels]
        if not any(bad) or all(bad):
            return p
        if self.strategy == "pairwise":
            return replace(p, levels=tuple(lv for lv, b in zip(p.levels, bad, strict=True) if not b))
        w = p.weights or tuple(1.0 for _ in p.levels)
        return replace(p, weights=tuple(x * factor if b else x for x, b in zip(w, bad, strict=True)))

    def _adapt_levels(self, inputs: Sequence[FuzzInput], valid: Sequence[bool], clip: float) -> None:
        total = len(valid)
        base = (sum(valid) + 1) / (total + 2)
        if self.strategy == "pairwise":
            self._prune(inputs, valid)
            return
        new = []
        for p in self.params:
            counts = {repr(lv): [0, 0] for lv in p.levels}
            for inp, ok in zip(inputs, valid, strict=True):
                if inp.levels is None or p.name not in inp.levels:
                    continue
                c = counts.get(repr(inp.levels[p.name]))
                if c is not None:
                    c[0] += 1
                    c[1] += int(ok)
            weights = p.weights or tuple(1.0 for _ in p.levels)
            adj = []
            for lv, w in zip(p.levels, weights, strict=True):
                n, v = counts[repr(lv)]
                rate = (v + base) / (n + 1)  # shrunk towards the overall rate when a level was rarely drawn
                adj.append(w * min(clip, max(1 / clip, rate / base)))
            new.append(replace(p, weights=tuple(adj)))
        self.params = new

    def _prune(self, inputs: Sequence[FuzzInput], valid: Sequence[bool], min_draws: int = 5) -> None:
        """Pairwise: drop levels drawn often and never valid, so the covering array spends rows where inputs pass."""
        new = []
        for p in self.params:
            seen: dict[str, list[int]] = {repr(lv): [0, 0] for lv in p.levels}
            for inp, ok in zip(inputs, valid, strict=True):
                if inp.levels is not None and p.name in inp.levels and repr(inp.levels[p.name]) in seen:
                    c = seen[repr(inp.levels[p.name])]
                    c[0] += 1
                    c[1] += int(ok)
            keep = tuple(lv for lv in p.levels if seen[repr(lv)][1] > 0 or seen[repr(lv)][0] < min_draws)
            new.append(replace(p, levels=keep or p.levels, weights=None))
        self.params = new

    def _random_levels(self, rng: random.Random) -> dict[str, Any]:
        return {p.name: rng.choices(p.levels, p.weights)[0] if p.weights else rng.choice(p.levels)
                for p in self.params}

    def level_rows(self, n: int, rng: random.Random) -> list[dict[str, Any]]:
        if self.strategy == "random":
            return [self._random_levels(rng) for _ in range(n)]
        rows: list[dict[str, Any]] = []
        while len(rows) < n:  # one covering array after another: each repeats full pair coverage
            block = pairwise_rows([p.levels for p in self.params], rng)
            rng.shuffle(block)
            rows.extend({p.name: r[i] for i, p in enumerate(self.params)} for r in block)
        return rows[:n]

    def generate(self, n: int, offset: int = 0) -> list[FuzzInput]:
        rng = random.Random(f"{self.rng_seed}:{offset}")
        out = []
        for i, lv in enumerate(self.level_rows(n, rng)):
            call = instantiate(self.spec, lv, rng, self.hints)
            if self.seed_call is not None and rng.random() < self.seed_share:
                call = self.seed_call if rng.random() < 0.05 else mutate(self.spec, self.seed_call, rng, call)
            out.append(FuzzInput(call, seed=(self.rng_seed * 1_000_003 + offset + i) % (2**31), levels=lv))
        return out
