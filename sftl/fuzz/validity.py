"""Input-validity fuzzing: learn an API's input constraints from executions and filter candidates before running them."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sftl.config import Settings
from sftl.fuzz.execute import Crash, ExecResult, WorkerPool
from sftl.fuzz.features import Featurizer, ValidityClassifier, load_model, save_model
from sftl.fuzz.generate import Call, FuzzInput, InputGenerator
from sftl.fuzz.seed import SeedCall, find_seed
from sftl.fuzz.specs import ApiSpec, api_spec
from sftl.model import to_jsonable

__all__ = [
    "ApiSpec", "FuzzReport", "Variant", "api_spec", "find_seed", "fuzz", "describe_call", "train",
    "replay_variants", "WorkerPool",
]

JSON_KEYS = ("api", "framework", "version", "generated", "executed", "valid", "pass_rate_unfiltered",
             "pass_rate_filtered", "precision", "recall", "valid_per_second_unfiltered",
             "valid_per_second_filtered", "classifier", "crashes")


@dataclass(frozen=True)
class Variant:
    """One valid neighbour of the reported call, run on CPU and (when there is one) on a CUDA device."""

    call: str
    cpu: str  # "ok" or the exception line
    gpu: str | None  # None: no CUDA device
    max_abs_diff: float | None = None
    nonfinite_mismatch: bool = False
    discrepant: bool = False


@dataclass(frozen=True)
class FuzzReport:
    """What one fuzzing session measured; `as_json()` is the `sftl fuzz --json` object."""

    api: str
    framework: str
    version: str
    target: str
    schema: str
    strategy: str
    generated: int
    executed: int
    valid: int  # valid inputs found (training run + unfiltered run + filtered run)
    pass_rate_unfiltered: float
    pass_rate_filtered: float
    precision: float
    recall: float
    valid_per_second_unfiltered: float
    valid_per_second_filtered: float
    classifier: dict[str, Any]
    crashes: tuple[dict[str, Any], ...]
    seed: dict[str, Any] | None = None
    examples: tuple[str, ...] = ()  # a few valid inputs found by the filtered run
    errors: tuple[tuple[str, int], ...] = ()  # most common rejection messages
    variants: tuple[Variant, ...] | None = None
    device_note: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        from sftl.model import to_jsonable

        out = {k: to_jsonable(getattr(self, k)) for k in JSON_KEYS}
        if self.variants is not None:  # only with --replay: the CPU/GPU runs of valid variants
            out["variants"] = to_jsonable(self.variants)
            out["device_note"] = self.device_note
        return out


def describe_call(spec: ApiSpec, call: Call) -> str:
    """A compact human reading of a call: `torch.bmm(self=f32[2,3,4], mat2=f32[2,4,5])`."""
    short = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int64": "i64",
             "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "b8", "complex64": "c64",
             "complex128": "c128"}

    def val(v: dict[str, Any]) -> str:
        t = v["t"]
        if t == "tensor":
            return f"{short.get(v['dtype'], v['dtype'])}[{','.join(map(str, v['shape']))}]"
        if t == "tensors":
            return "[" + ", ".join(val(i) for i in v["items"]) + "]"
        if t == "none":
            return "None"
        if t == "dtype":
            return v["v"]
        return repr(v["v"])

    args = ", ".join(f"{a.name}={val(call[a.name])}" for a in spec.args if a.name in call)
    return f"{spec.target}({args})"


def _crash_json(spec: ApiSpec, c: Crash) -> dict[str, Any]:
    return {"kind": c.kind, "signal": c.signal, "input": describe_call(spec, c.input), "message": c.message,
            "call": c.input, "seed": c.seed, "stderr_tail": c.stderr_tail[-1500:]}


def _unique_crashes(spec: ApiSpec, crashes: Sequence[Crash]) -> tuple[dict[str, Any], ...]:
    """One finding per crashing input (the unfiltered and the filtered run may both hit it)."""
    seen: set[str] = set()
    out = []
    for c in crashes:
        key = describe_call(spec, c.input)
        if c.api == spec.api and key not in seen:
            seen.add(key)
            out.append(_crash_json(spec, c))
    return tuple(out)


_INTERNAL = ("INTERNAL ASSERT FAILED", "please report a bug to PyTorch")


def _internal_errors(spec: ApiSpec, inputs: Sequence[FuzzInput], results: Sequence[ExecResult]) -> list[Crash]:
    """Rejections that are framework bugs, not input checks: PyTorch's internal asserts, TF's InternalError."""
    out = []
    for inp, r in zip(inputs, results, strict=True):
        if r.status == "error" and (any(m in r.message for m in _INTERNAL) or r.exception == "InternalError"):
            out.append(Crash("internal-error", None, spec.api, inp.call, inp.seed, f"{r.exception}: {r.message}"))
    return out


def train(spec: ApiSpec, pool: WorkerPool, inputs: Sequence[FuzzInput],
          results: Sequence[ExecResult] | None = None) -> tuple[ValidityClassifier, list[ExecResult]]:
    """Label `inputs` by execution (unless given) and fit a classifier on them."""
    feats = Featurizer(spec)
    res = list(results) if results is not None else pool.run(spec, inputs)
    # a crash or hang counts as invalid (the filtered run should not spend a worker restart on it);
    # inputs skipped after a run's crash limit carry no label
    keep = [i for i, r in enumerate(res) if r.status != "skipped"]
    X = feats.transform([inputs[i].call for i in keep])
    y = [int(res[i].valid) for i in keep]
    return ValidityClassifier().fit(X, y), res


def _seed_generator(spec: ApiSpec, strategy: str, seed: SeedCall | None, rng_seed: int) -> InputGenerator:
    return InputGenerator(spec, strategy, seed_call=seed.call if seed else None, rng_seed=rng_seed)


def fuzz(spec: ApiSpec, settings: Settings, pool: WorkerPool, budget: int = 500, strategy: str = "random",
         seed: SeedCall | None = None, retrain: bool = False, save: bool = True, rng_seed: int = 0,
         train_budget: int | None = None) -> FuzzReport:
    """Train (or load) the API's validity classifier, then compare unfiltered and filtered generation on fresh inputs.

    Fresh inputs come from another random stream than the training inputs and exclude any input seen
    in training, so precision and recall are measured on inputs the classifier never saw.
    """
    feats = Featurizer(spec)
    gen = _seed_generator(spec, strategy, seed, rng_seed)
    generated = executed = valid_total = 0
    clf = None if retrain else load_model(settings.home, spec, feats.names)
    cached = clf is not None
    # two rounds: the second draws levels reweighted (random) or pruned (pairwise) by what the first
    # found valid; a cached classifier still needs the first round's weights for the generator
    n_train = train_budget or budget
    first = gen.generate(n_train // 3 if clf is None else min(n_train // 3, 200), offset=0)
    res_first = pool.run(spec, first)
    pass_rate_first = sum(r.valid for r in res_first) / max(len(first), 1)
    # level weights follow what was valid; the rejection messages say which relations the API checks
    gen.adapt(first, [r.valid for r in res_first], messages=[r.message for r in res_first if r.status == "error"])
    train_inputs, train_res = list(first), list(res_first)
    if clf is None:
        # a second adaptation on everything labelled so far: APIs whose first round found (almost) nothing
        # valid get their relations from the messages first, then their level weights from the valid inputs
        second = gen.generate(n_train // 3, offset=1)
        train_inputs += second
        train_res += pool.run(spec, second)
        gen.adapt(train_inputs, [r.valid for r in train_res],
                  messages=[r.message for r in train_res if r.status == "error"])
        third = gen.generate(n_train - len(train_inputs), offset=2)
        train_inputs += third
        train_res += pool.run(spec, third)
        clf, _ = train(spec, pool, train_inputs, train_res)
        if save:
            save_model(settings.home, spec, clf, feats.names)
    generated += len(train_inputs)
    executed += sum(r.status != "skipped" for r in train_res)
    valid_total += sum(r.valid for r in train_res)
    seen = {i.key() for i in train_inputs}

    # fresh inputs, never seen in training
    t0 = time.perf_counter()
    fresh: list[FuzzInput] = []
    for round_ in range(8):  # a seed's neighbourhood repeats itself: draw until `budget` unseen inputs
        for inp in gen.generate(budget, offset=1_000_000 * (round_ + 1)):
            if inp.key() not in seen and len(fresh) < budget:
                seen.add(inp.key())
                fresh.append(inp)
        if len(fresh) >= budget:
            break
    t_gen = time.perf_counter() - t0
    generated += len(fresh)

    # unfiltered: run everything
    t0 = time.perf_counter()
    res_all = pool.run(spec, fresh)
    t_all = time.perf_counter() - t0
    labels = [r.valid for r in res_all]
    valid_u = sum(labels)

    # filtered: batch inference, then run only what the classifier keeps
    t0 = time.perf_counter()
    if clf.model_ is None:  # nothing learned (one class only): everything is kept, no features needed
        keep_mask = [True] * len(fresh)
    else:
        keep_mask = [bool(k) for k in clf.predict(feats.transform([i.call for i in fresh]))] if fresh else []
    t_pred = time.perf_counter() - t0
    kept = [inp for inp, k in zip(fresh, keep_mask, strict=True) if k]
    t0 = time.perf_counter()
    res_kept = pool.run(spec, kept) if kept else []
    t_kept = time.perf_counter() - t0
    valid_f = sum(r.valid for r in res_kept)
    ran_all = [r.status != "skipped" for r in res_all]
    ran_kept = sum(r.status != "skipped" for r in res_kept)
    executed += sum(ran_all) + ran_kept
    valid_total += valid_u + valid_f

    # precision and recall over the fresh inputs that were actually run (and so have a label)
    tp = sum(1 for k, v, ran in zip(keep_mask, labels, ran_all, strict=True) if k and v and ran)
    n_keep = sum(1 for k, ran in zip(keep_mask, ran_all, strict=True) if k and ran)
    precision = tp / n_keep if n_keep else 0.0
    recall = tp / valid_u if valid_u else 1.0
    errors: dict[str, int] = {}
    for r in res_all:
        if r.status == "error":
            line = f"{r.exception}: {r.message[:90]}"
            errors[line] = errors.get(line, 0) + 1
    summary = clf.summary() | {"cached": cached}
    examples = tuple(describe_call(spec, i.call) for i, r in zip(kept, res_kept, strict=True) if r.valid)[:5]
    return FuzzReport(
        api=spec.api, framework=spec.framework, version=spec.version, target=spec.target, schema=spec.schema,
        strategy=strategy, generated=generated, executed=executed, valid=valid_total,
        pass_rate_unfiltered=valid_u / max(sum(ran_all), 1),
        pass_rate_filtered=valid_f / ran_kept if ran_kept else 0.0,
        precision=precision, recall=recall,
        valid_per_second_unfiltered=valid_u / max(t_gen + t_all, 1e-9),
        valid_per_second_filtered=valid_f / max(t_gen + t_pred + t_kept, 1e-9),
        classifier=summary,
        crashes=_unique_crashes(spec, list(pool.crashes) + _internal_errors(
            spec, [*train_inputs, *fresh, *kept], [*train_res, *res_all, *res_kept])),
        seed={"call": describe_call(spec, seed.call), "line": seed.line, "source": seed.source,
              "unresolved": list(seed.unresolved)} if seed else None,
        examples=examples,
        errors=tuple(sorted(errors.items(), key=lambda kv: -kv[1])[:5]),
        details={"fresh": len(fresh), "kept": len(kept), "seconds_generate": t_gen, "seconds_predict": t_pred,
                 "seconds_run_all": t_all, "seconds_run_kept": t_kept, "valid_unfiltered": valid_u,
                 "valid_filtered": valid_f, "pass_rate_first_round": pass_rate_first,
                 "hints": to_jsonable(gen.hints)},
    )


def replay_variants(spec: ApiSpec, settings: Settings, seed: SeedCall, clf: ValidityClassifier | None,
                    count: int = 10, rng_seed: int = 0, tolerance: float = 1e-3,
                    pool: WorkerPool | None = None) -> tuple[tuple[Variant, ...], str]:
    """Valid neighbours of the reported call, each run on CPU and, when a CUDA device is visible, on it too.

    Returns the variants and a note: "no CUDA device" when there is none (the GPU side is then not run).
    """
    feats = Featurizer(spec)
    gen = InputGenerator(spec, "random", seed_call=seed.call, rng_seed=rng_seed, seed_share=1.0)
    cands = [FuzzInput(seed.call, 0)] + gen.generate(count * 20, offset=7)
    if clf is not None:
        mask = clf.predict(feats.transform([c.call for c in cands]))
        cands = [c for c, m in zip(cands, mask, strict=True) if m] or cands
    own = pool is None
    pool = pool or WorkerPool(spec.framework, settings, workers=1, cuda=True)
    try:
        hello = pool.info()
        has_cuda = bool(hello.get("cuda"))
        # CPU first: only inputs valid on CPU are variants worth comparing
        tried = cands[: count * 4]
        res = pool.run(spec, tried)
        valid = [c for c, r in zip(tried, res, strict=True) if r.valid][:count]
        if not has_cuda:
            return tuple(Variant(describe_call(spec, c.call), "ok", None) for c in valid), "no CUDA device"
        cmp = pool.run(spec, valid, compare=True)
    finally:
        if own:
            pool.close()
    out = []
    for c, r in zip(valid, cmp, strict=True):
        runs = r.details.get("runs", {})
        gpu = runs.get("cuda", {})
        cpu = runs.get("cpu", {})
        diff = r.details.get("max_abs_diff")
        bad = bool(r.details.get("nonfinite_mismatch"))
        cpu_s = "ok" if cpu.get("ok") else f"{cpu.get('exc')}: {cpu.get('msg')}"
        gpu_s = "ok" if gpu.get("ok") else f"{gpu.get('exc')}: {gpu.get('msg')}"
        discrepant = bad or (diff is not None and diff > tolerance) or (cpu_s == "ok") != (gpu_s == "ok")
        out.append(Variant(describe_call(spec, c.call), cpu_s, gpu_s, diff, bad, discrepant))
    return tuple(out), f"compared on CPU and CUDA ({sum(v.discrepant for v in out)} of {len(out)} differ)"
