"""Replays a snippet on CPU and GPU in a matched environment, compares what happened, and caches it."""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sftl.config import Settings
from sftl.envs import (
    DIST_OF_MODULE,
    EnvHandle,
    load_catalog,
    next_minor,
    normalize_framework,
    parse_version,
    resolve,
)
from sftl.envs_build import EnvManager
from sftl.errors import EnvError, InputError
from sftl.extract.repair import imported_modules, repair_snippet
from sftl.model import (
    Device,
    Extraction,
    Frame,
    Issue,
    Outcome,
    Repair,
    Replay,
    ReplayEnvironment,
    ReplayRun,
    Traceback,
    to_jsonable,
)
from sftl.sandbox import FILE_LIMIT, HARNESS, Limits, Sandbox, SandboxResult, escape_control, output_tail
from sftl.store import Store

DEFAULT_REPEATS = 2  # runs per device in a comparison: tells nondeterminism from a discrepancy
NO_DEVICE_MESSAGE = "skipped: no CUDA device"
_HARNESS_HASH = hashlib.sha256(HARNESS.read_bytes()).hexdigest()[:16]


def has_cuda_device() -> bool:
    """Whether this machine has an NVIDIA device (checked without importing any framework)."""
    gpus = Path("/proc/driver/nvidia/gpus")
    return Path("/dev/nvidia0").exists() or (gpus.is_dir() and any(gpus.iterdir()))


# -- matching a reported error -----------------------------------------------------------------------

_ADDR = re.compile(r"0x[0-9a-fA-F]+")
_PATH = re.compile(r"""(?:[A-Za-z]:)?(?:[\\/][\w.+\-@~]+){2,}[\\/]?""")
_QUOTES = re.compile(r"[`'\"]")
_NUM_ID = re.compile(r"\bat \d+\b|\bid=\d+")


_SCRIPT = re.compile(r"(?:[A-Za-z]:)?[\w./\\~@+-]*?[\w-]+\.py(?::\d+)?\b")


def normalize_message(message: str | None) -> str:
    """Addresses, paths, script names, quote styles and spacing removed, so two machines' messages compare
    (the reporter's test_fp8.py:38 is the replay's snippet.py:37)."""
    text = message or ""
    text = _SCRIPT.sub("FILE.py", text)
    text = _ADDR.sub("0xADDR", text)
    text = _PATH.sub("PATH", text)
    text = _NUM_ID.sub("ID", text)
    text = _QUOTES.sub("'", text)
    return " ".join(text.split()).strip().lower()


def _short(name: str | None) -> str:
    return (name or "").rsplit(".", 1)[-1]


_MISSING = (
    re.compile(r"No module named ['\"]?([\w.]+)"),
    re.compile(r"cannot import name ['\"]?(\w+)"),
    re.compile(r"has no attribute ['\"]?(\w+)"),
)
_IMPORT_ERRORS = ("ImportError", "ModuleNotFoundError")


def missing_name(exception: str | None, message: str | None) -> str | None:
    """The name a missing-module error says is missing ('tensorboard', 'contrib', 'ravel_'), else None."""
    if _short(exception) not in (*_IMPORT_ERRORS, "AttributeError") or not message:
        return None
    for pattern in _MISSING:
        m = pattern.search(message)
        if m:
            return m.group(1)
    return None


def same_class(expected: str | None, got: str | None) -> bool:
    """The same exception class; ImportError and ModuleNotFoundError (raised for it since Python 3.6) count as one."""
    a, b = _short(expected), _short(got)
    return bool(a) and (a == b or {a, b} == set(_IMPORT_ERRORS))


def same_error(expected: Traceback, exception: str | None, message: str | None) -> bool:
    """The report's exception type and message, allowing for addresses, paths and truncation.

    A missing-module error (ImportError, ModuleNotFoundError, AttributeError) matches only when the same
    name is missing: "No module named 'tensorboard'" is not a reproduction of "No module named 'torch._six'".
    """
    if not exception or not same_class(expected.exception, exception):
        return False
    want_name = missing_name(expected.exception, expected.message)
    if want_name is not None:
        return missing_name(exception, message) == want_name
    want, got = normalize_message(expected.message), normalize_message(message)
    if not want or want == got:
        return True
    # reports are often cut or wrapped: the first line of either holding the other's counts
    w1, g1 = want.splitlines()[0] if want else "", got.splitlines()[0] if got else ""
    if w1 and (w1 in got or (g1 and g1 in want)):
        return True
    return difflib.SequenceMatcher(None, want, got).ratio() >= 0.9


# -- comparing results ---------------------------------------------------------------------------

_TOLERANCES = {  # (rtol, atol) as torch.testing.assert_close uses them
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
}


CROSS_DEVICE = (100.0, 10.0)  # rtol and atol factors when comparing two devices' kernels
SAME_DEVICE = (1.0, 1.0)


def tolerance(dtype: str, scale: tuple[float, float] = SAME_DEVICE) -> tuple[float, float]:
    """(rtol, atol) of torch.testing.assert_close for `dtype`, scaled: two devices (or two
    accumulation orders) legitimately differ by more than one device run twice."""
    rtol, atol = _TOLERANCES.get(dtype.replace("torch.", ""), (0.0, 0.0))
    return rtol * scale[0], atol * scale[1]


def _num(x: Any) -> float:
    if isinstance(x, str):
        return float(x)  # 'nan', 'inf', '-inf'
    return float(x)


def _close(a: float, b: float, rtol: float, atol: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= atol + rtol * abs(b)


@dataclass(frozen=True)
class Difference:
    name: str
    detail: str
    max_abs: float = 0.0


def compare_values(a: dict[str, Any], b: dict[str, Any], scale: tuple[float, float] = SAME_DEVICE) -> list[Difference]:
    """Two runs' top-level values, name by name, with dtype-aware tolerances."""
    diffs = []
    for name in sorted(set(a) & set(b)):
        x, y = a[name], b[name]
        if x["shape"] != y["shape"]:
            diffs.append(Difference(name, f"shape {x['shape']} vs {y['shape']}", math.inf))
            continue
        rtol, atol = tolerance(x.get("dtype", ""), scale)
        worst, bad = 0.0, 0
        for p, q in zip(x["values"], y["values"], strict=False):
            fp, fq = _num(p), _num(q)
            if not _close(fp, fq, rtol, atol):
                bad += 1
                worst = max(worst, abs(fp - fq) if not (math.isnan(fp) or math.isnan(fq)) else math.inf)
        if bad:
            diffs.append(Difference(name, f"{bad} of {len(x['values'])} elements differ ({x['dtype']}, max |diff| {worst:.3g})", worst))
    return diffs


_NOISE = re.compile(r"\b(?:device|dtype|grad_fn|requires_grad|size|layout)=[^,)\]]*")
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])|\b(?:nan|inf)\b", re.I)


def printed_numbers(text: str) -> list[tuple[float, float]]:
    """Numbers as printed, each with the tolerance its printed precision allows (one unit in the last place)."""
    out = []
    for m in _NUMBER.finditer(_NOISE.sub("", text)):
        tok = m.group(0)
        value = float(tok)
        mant = tok.lower().split("e")[0]
        decimals = len(mant.split(".")[1]) if "." in mant else 0
        exp = int(tok.lower().split("e")[1]) if "e" in tok.lower() else 0
        # '0.1235' may be one unit of the last printed place off; '11.' and '3' are printed exactly
        out.append((value, 10.0 ** (exp - decimals) if decimals else 0.0))
    return out


def compare_printed(a: str, b: str, rtol: float = 1.3e-6) -> list[Difference]:
    """Printed numbers pairwise: within one unit of the last printed place, or `rtol`."""
    na, nb = printed_numbers(a), printed_numbers(b)
    if len(na) != len(nb):
        return [Difference("stdout", f"printed {len(na)} numbers vs {len(nb)}", math.inf)] if (na or nb) else []
    bad, worst = 0, 0.0
    for (x, ux), (y, uy) in zip(na, nb, strict=True):
        if not _close(x, y, rtol, max(ux, uy) * 1.01):
            bad += 1
            worst = max(worst, abs(x - y) if not (math.isnan(x) or math.isnan(y)) else math.inf)
    return [Difference("stdout", f"{bad} of {len(na)} printed numbers differ (max |diff| {worst:.3g})", worst)] if bad else []


_LABEL = re.compile(r"^\W*(cpu|gpu|cuda)\b(?!\s*[(.])", re.I)


def printed_pair(text: str) -> tuple[str, str] | None:
    """When a snippet prints a CPU result and a GPU result on labelled lines, the two texts."""
    groups: dict[str, list[str]] = {"cpu": [], "gpu": []}
    current: str | None = None
    for line in text.splitlines():
        m = _LABEL.match(line)
        if m:
            current = "cpu" if m.group(1).lower() == "cpu" else "gpu"
            groups[current].append(line[m.end():])
        elif current and line.strip():
            groups[current][-1] += "\n" + line
        else:
            current = None
    if len(groups["cpu"]) == len(groups["gpu"]) >= 1:
        return "\n".join(groups["cpu"]), "\n".join(groups["gpu"])
    return None


# -- runs ------------------------------------------------------------------------------------------


def replay_key(code: str, env: ReplayEnvironment, device: str, options: dict[str, Any]) -> str:
    """sha256 of (snippet, environment, device, run options): the store's replay key."""
    payload = {
        "snippet": code,
        "environment": {k: getattr(env, k) for k in ("framework", "version", "python", "backend", "name")},
        "device": device,
        "options": options,
        "harness": _HARNESS_HASH,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


MESSAGE_CHARS = 4000  # of an exception's message, kept and shown (the harness keeps 20000 for nothing else)


def _shown_error(error: Any, depth: int = 0) -> Any:
    """The harness's exception (and its chain) with each message bounded and escaped: a message is output too."""
    if not isinstance(error, dict):
        return error
    kept = dict(error)
    if isinstance(kept.get("message"), str):
        kept["message"] = escape_control(kept["message"][:MESSAGE_CHARS])
    if depth < 6 and kept.get("cause") is not None:
        kept["cause"] = _shown_error(kept["cause"], depth + 1)
    return kept


def _sandbox_payload(res: SandboxResult) -> dict[str, Any]:
    """What a run keeps (the store's record): its verdict's evidence and bounded, escaped tails of its output; the
    harness's values and printout stay, for the CPU/GPU comparison of a cached run."""
    result = _shown_error(res.result)
    if isinstance(result, dict):
        for key in ("stdout_tail", "stderr_tail"):
            if isinstance(result.get(key), str):
                result[key] = output_tail(result[key])
    return {
        "returncode": res.returncode, "stdout": output_tail(res.stdout), "stderr": output_tail(res.stderr),
        "seconds": res.seconds, "limit": res.limit, "result": result, "containment": to_jsonable(res.containment),
        "left_running": res.left_running, "output_bytes": res.output_bytes, "notes": list(res.notes),
    }


_MEMORY_WORDS = re.compile(r"can't allocate memory|cannot allocate memory|out of memory|std::bad_alloc", re.I)
_SPACE_WORDS = re.compile(r"\[Errno (27|28)\]|File too large|No space left on device")


def classify(device: Device, raw: dict[str, Any], expected: Traceback | None, limits: Limits) -> ReplayRun:
    """One device's sandbox result as a ReplayRun with an Outcome."""
    result = _shown_error(raw.get("result") or {})  # a record stored before tails were bounded is shown bounded too
    limit = raw.get("limit")
    details = {
        "containment": raw.get("containment"), "limit": limit, "returncode": raw.get("returncode"),
        "device_info": result.get("device"), "redirect": result.get("redirect"), "opdiff": result.get("opdiff"),
        "frames": result.get("frames"), "import_seconds": result.get("import_seconds"),
        "wall_seconds": raw.get("seconds"), "notes": raw.get("notes"), "left_running": raw.get("left_running"),
    }
    common: dict[str, Any] = {"device": device, "stdout_tail": output_tail(raw.get("stdout") or ""),
                              "stderr_tail": output_tail(raw.get("stderr") or ""),
                              "seconds": round(float(result.get("seconds") or raw.get("seconds") or 0.0), 3), "details": details}
    if limit == "timeout":
        return ReplayRun(outcome=Outcome.TIMEOUT, message=f"killed after {limits.timeout:g} s of wall time", **common)
    if limit == "output":
        return ReplayRun(outcome=Outcome.RESOURCE_LIMIT, message=f"killed: printed more than {limits.output} bytes", **common)
    if limit == "processes":
        return ReplayRun(outcome=Outcome.RESOURCE_LIMIT, message=f"killed: hit the process cap ({limits.max_procs})", **common)
    if limit in ("memory", "cpu"):
        return ReplayRun(outcome=Outcome.RESOURCE_LIMIT, message=f"killed: {limit} limit", **common)
    status = result.get("status")
    if status == "no-device":
        return ReplayRun(outcome=Outcome.NO_DEVICE, message=f"{NO_DEVICE_MESSAGE} ({result.get('message')})", **common)
    if not result:
        rc = raw.get("returncode")
        signal_text = f"signal {-rc}" if isinstance(rc, int) and rc < 0 else f"exit status {rc}"
        exc = "Crash"
        last = output_tail(raw.get("stderr") or "").strip().splitlines()[-1:] or [""]
        msg: str | None = f"the process died ({signal_text}) before the harness reported" + (
            f": {last[0][:300]}" if last[0] else "")
        if expected is not None and "segmentation" in (expected.message + expected.exception).lower() and rc == -11:
            return ReplayRun(outcome=Outcome.REPRODUCED, exception=exc, message=msg, **common)
        return ReplayRun(outcome=Outcome.DIFFERENT_ERROR, exception=exc, message=msg, **common)
    if status == "error":
        exc_name: str | None = result.get("exception")
        msg = result.get("message")
        exc = exc_name or "Exception"
        if expected is not None and same_error(expected, exc, msg):
            return ReplayRun(outcome=Outcome.REPRODUCED, exception=exc, message=msg, **common)
        inner = _in_chain(expected, result.get("cause")) if expected is not None else None
        if inner is not None:  # the reported error, raised and then wrapped (dynamo's BackendCompilerFailed)
            details["wrapped_by"] = f"{exc}: {(msg or '').splitlines()[0][:200] if msg else ''}"
            return ReplayRun(outcome=Outcome.REPRODUCED, exception=inner.get("exception"), message=inner.get("message"),
                             **common)
        if msg and _SPACE_WORDS.search(msg):
            return ReplayRun(outcome=Outcome.RESOURCE_LIMIT, exception=exc,
                             message=f"{msg} (files are capped at {FILE_LIMIT} bytes in the sandbox)", **common)
        if exc == "MemoryError" or (msg and _MEMORY_WORDS.search(msg) and device is Device.CPU):
            return ReplayRun(outcome=Outcome.RESOURCE_LIMIT, exception=exc,
                             message=f"{msg or exc} (memory capped at {limits.memory} bytes)", **common)
        return ReplayRun(outcome=Outcome.DIFFERENT_ERROR, exception=exc, message=msg, **common)
    return ReplayRun(outcome=Outcome.NO_ERROR, **common)


def _in_chain(expected: Traceback, cause: dict[str, Any] | None) -> dict[str, Any] | None:
    """The exception of a chain (cause or context, innermost last) that is the reported one, if any."""
    depth = 0
    while isinstance(cause, dict) and depth < 6:
        if same_error(expected, cause.get("exception"), cause.get("message")):
            return cause
        cause, depth = cause.get("cause"), depth + 1
    return None


def _unavailable(framework: str | None, version: str | None, reason: str) -> Replay:
    env = ReplayEnvironment(framework, version, None, None, None, reason)
    return Replay(env, (), Outcome.ENV_UNAVAILABLE, reason)


def _run_line(run: ReplayRun) -> str:
    if run.exception:
        return f"{run.device.value} run raised {run.exception}: {(run.message or '').splitlines()[0][:200] if run.message else ''}"
    if run.outcome is Outcome.NO_ERROR:
        return f"{run.device.value} run finished without error"
    return f"{run.device.value} run: {run.outcome.value} ({run.message or ''})"


def _nondeterministic(run: ReplayRun, values: list[dict[str, Any]], printed: list[str]) -> set[str]:
    names: set[str] = set()
    for later in values[1:]:
        names |= {d.name for d in compare_values(values[0], later)}
    for text in printed[1:]:
        if compare_printed(printed[0], text):
            names.add("stdout")
    return names


def _compare_runs(cpu: ReplayRun, gpu: ReplayRun, raws: dict[Device, dict[str, Any]]) -> tuple[Outcome, str, dict[str, Any]]:
    """The GCRDE verdict from a CPU run and a GPU run that both finished."""
    rc, rg = raws[Device.CPU].get("result") or {}, raws[Device.GPU].get("result") or {}
    info: dict[str, Any] = {}
    pair = printed_pair((rg.get("printed") or [""])[0])
    if pair is not None:
        diffs = compare_printed(*pair, rtol=1.3e-6 * CROSS_DEVICE[0])
        info["method"] = "the snippet's own CPU/GPU printout"
        if diffs:
            return Outcome.DISCREPANCY, f"the snippet's CPU and GPU results differ: {diffs[0].detail}", info
        return Outcome.NO_DISCREPANCY, "the snippet's CPU and GPU printouts agree within tolerance", info
    info["method"] = "values and printout of the CPU run vs the GPU run (placement redirected)"
    vc, vg = rc.get("values") or [{}], rg.get("values") or [{}]
    pc, pg = rc.get("printed") or [""], rg.get("printed") or [""]
    noisy = _nondeterministic(cpu, vc, pc) | _nondeterministic(gpu, vg, pg)
    diffs = [d for d in compare_values(vc[0], vg[0], CROSS_DEVICE) + compare_printed(pc[0], pg[0], 1.3e-6 * CROSS_DEVICE[0])
             if d.name not in noisy]
    info["nondeterministic"] = sorted(noisy)
    info["differences"] = [to_jsonable(d) for d in diffs]
    if diffs:
        listed = "; ".join(f"{d.name}: {d.detail}" for d in diffs[:3])
        return Outcome.DISCREPANCY, f"CPU and GPU results differ: {listed}", info
    note = f" ({', '.join(sorted(noisy))} changed between repeated runs: nondeterministic, not compared)" if noisy else ""
    return Outcome.NO_DISCREPANCY, "CPU and GPU results agree within dtype tolerances" + note, info


def replay_snippet(
    code: str,
    framework: str | None,
    version: str | None,
    settings: Settings,
    device: str = "both",
    env: str = "auto",
    expected: Traceback | None = None,
    *,
    limits: Limits | None = None,
    allow_network: bool = False,
    store: Store | None = None,
    use_cache: bool = True,
    build: bool = False,
    repeats: int = DEFAULT_REPEATS,
    opdiff: bool = True,
    cuda: bool | None = None,
    sandbox: Sandbox | None = None,
    repo: str | None = None,
    number: int | None = None,
    unconfined: bool = False,
    repair: bool = True,
    others: tuple[str, ...] = (),
    when: str | None = None,
    follow_dated: bool = True,
    python: str | None = None,
) -> Replay:
    """Replay `code` in an environment matching (framework, version) and say what happened.

    With `expected` (the report's traceback) the question is "does it raise that?"; without it
    and with device="both", "do CPU and GPU agree?". Failures are values: a missing environment is
    ENV_UNAVAILABLE, a missing GPU NO_DEVICE. Only a sandbox that cannot be set up at all raises
    SandboxError (ConfinementError where this machine cannot confine it and `unconfined` is not
    given). Each device's run is stored under replay_key() and reused.

    With `repair` (the default) the snippet is first made runnable as reporters paste it (prompts,
    notebook lines, Python 2 prints, missing imports, definitions in `others`, the report's other
    blocks); every repair is listed in the result, and repair=False replays it verbatim. `when` (the
    day the report was filed) picks the release of a report that names a date or no version. Packages
    the snippet imports beside the framework are installed at versions of the release's day (with
    `build`), or the result names the missing ones. A report dated rather than versioned that does not
    reproduce on the release current that day is replayed on the next minor release too (what the
    development branch of that day became), and the verdict says which ran.
    """
    if device not in ("cpu", "gpu", "both"):
        raise InputError(f"unknown device {device!r}: use cpu, gpu or both")
    if not code or not code.strip():
        return Replay(ReplayEnvironment(framework, version, None, None, None), (), Outcome.NO_SNIPPET,
                      "the report has no runnable snippet")
    try:
        fw = normalize_framework(framework)
    except InputError as exc:
        return _unavailable(framework, version, str(exc))
    repairs: tuple[Repair, ...] = ()
    if repair:
        fixed = repair_snippet(code, fw, others)
        code, repairs = fixed.code, fixed.repairs
    try:
        catalog = load_catalog()
        resolution = resolve(catalog, fw, version, when)
    except (EnvError, InputError) as exc:
        return replace(_unavailable(fw, version, f"{exc}"), repairs=repairs, code=code)
    manager = EnvManager(settings, catalog)
    try:
        handle: EnvHandle = manager.find(resolution, env=env, build=build, python=_minor_python(python))
    except EnvError as exc:
        return replace(_unavailable(fw, version, f"{resolution.why}; {exc}"), repairs=repairs, code=code)
    if handle.version != resolution.version and env in ("auto", ""):
        return replace(_unavailable(fw, version, f"environment {handle.name} has {fw} {handle.version}, "
                                                 f"not {resolution.version}"), repairs=repairs, code=code)
    renv = ReplayEnvironment(fw, handle.version, handle.python_version, handle.backend, handle.name,
                             f"{resolution.why}; {handle.reason}")
    modules = imported_modules(code)
    _, lacking = manager.add_packages(handle, resolution, modules, install=build)
    packages = _packages_for(manager.added(handle), modules)
    limits = limits or Limits()
    gpu_present = has_cuda_device() if cuda is None else cuda
    compare = expected is None and device == "both"
    devices = [Device.CPU, Device.GPU] if device == "both" else [Device(device)]
    runs: list[ReplayRun] = []
    raws: dict[Device, dict[str, Any]] = {}
    for dev in devices:
        if dev is Device.GPU and not gpu_present:
            runs.append(ReplayRun(Device.GPU, Outcome.NO_DEVICE, message=NO_DEVICE_MESSAGE,
                                  details={"reason": "no NVIDIA device on this machine (/dev/nvidia0 absent)"}))
            continue
        mode = "none"
        if compare and opdiff and fw == "pytorch":
            # GPU run: each op against CPU; without a GPU the CPU run checks each op against float64
            mode = "cpu" if dev is Device.GPU else ("none" if gpu_present else "float64")
        args = ["--device", dev.value, "--framework", fw, "--repeat", str(repeats if compare else 1), "--opdiff", mode]
        if not compare and "cuda" not in code.lower():
            # nothing to redirect: a placement mode would only sit between the snippet and torch.compile
            args.append("--no-redirect")
        run_limits = limits
        options = {"args": args, "limits": limits.as_dict(), "allow_network": allow_network,
                   "packages": list(manager.added(handle))}
        if unconfined:  # never served a confined run's record, nor the other way round
            options["unconfined"] = True
        key = replay_key(code, renv, dev.value, options)
        raw = store.get_replay(key) if (store is not None and use_cache) else None
        cached = raw is not None
        if raw is None:
            box = sandbox or Sandbox(settings, limits, allow_network, unconfined=unconfined)
            sandbox = box
            if dev is not Device.GPU and not box.caps.memory_cgroup:
                # RLIMIT_AS caps this CPU run: it counts what importing the framework maps (gigabytes for a
                # CUDA build) on top of the memory the snippet may use
                run_limits = replace(limits, memory=limits.memory + manager.import_footprint(handle))
                box = Sandbox(settings, run_limits, box.allow_network, caps=box.caps, unconfined=box.unconfined)
            raw = _sandbox_payload(box.run_harness(handle.python, code, args, gpu=dev is Device.GPU))
            raw["replay"] = {"environment": to_jsonable(renv), "repairs": to_jsonable(repairs),
                             "packages": list(packages), "lacking": list(lacking)}
            if store is not None:
                store.save_replay(key, raw, repo, number)
        raws[dev] = raw
        run = classify(dev, raw, expected, run_limits)
        run.details["cache_key"] = key
        run.details["cached"] = cached
        runs.append(run)
    verdict, reason, extra = _verdict(runs, raws, expected, compare)
    first_op, op_note = _first_divergent(runs)
    if op_note:
        reason += f"; {op_note}"
    if resolution.match != "exact" or (version or "").strip() != resolution.version:
        reason += f"; version: {resolution.why}"  # the report asked for something else: say what ran
    reason += _package_note(runs, packages, lacking)
    if repairs:
        reason += "; snippet repaired: " + "; ".join(r.detail for r in repairs)
    if extra:
        runs = [replace(r, details={**r.details, "comparison": extra}) if r.device is Device.GPU else r for r in runs]
    if any((r.details.get("containment") or {}).get("unconfined") for r in runs):
        reason = f"ran UNCONFINED (--unconfined): {reason}"  # in the stored replay and every report of it
    result = Replay(renv, tuple(runs), verdict, reason, first_op, repairs, packages, code)
    later = next_minor(catalog, fw, resolution.version) if resolution.match == "dated" else None
    if (follow_dated and later and expected is not None
            and verdict in (Outcome.DIFFERENT_ERROR, Outcome.NO_ERROR)):
        then = replay_snippet(code, fw, later, settings, device, env, expected, limits=limits,
                              allow_network=allow_network, store=store, use_cache=use_cache, build=build,
                              repeats=repeats, opdiff=opdiff, cuda=cuda, sandbox=sandbox, repo=repo, number=number,
                              repair=False, follow_dated=False, unconfined=unconfined, python=python)
        first = f"{resolution.version}, the release current then, gave {verdict.value} ({_run_lines(runs)})"
        if then.verdict is Outcome.REPRODUCED:
            return replace(then, repairs=repairs, reason=f"{then.reason}; {first}; {later} is the release "
                           "the development branch of that day became")
        return replace(result, reason=f"{reason}; the next release {later}: {then.verdict.value}")
    return result


def _minor_python(text: str | None) -> str | None:
    """'3.9.7', 'Python 3.10' -> '3.9', '3.10' (the report's Python, as environments are keyed)."""
    m = re.search(r"\b(3\.\d{1,2})\b", text or "")
    return m.group(1) if m else None


def _run_lines(runs: list[ReplayRun]) -> str:
    return "; ".join(_run_line(r) for r in runs)


def _packages_for(added: tuple[str, ...], modules: list[str]) -> tuple[str, ...]:
    """The packages added to the environment that this snippet imports."""
    wanted = {DIST_OF_MODULE.get(m, m).lower().replace("_", "-") for m in modules}
    return tuple(a for a in added if a.split("==")[0].lower() in wanted)


def _package_note(runs: list[ReplayRun], packages: tuple[str, ...], lacking: tuple[str, ...]) -> str:
    """What was installed beside the framework, and which import the environment could not satisfy."""
    note = f"; installed beside the framework: {', '.join(packages)}" if packages else ""
    if lacking:
        raised = {missing_name(r.exception, r.message) for r in runs if r.exception}
        named = [w for w in lacking if w.split(":")[0] in raised]
        note += "; missing package: " + "; ".join(named or lacking)
    return note


def _first_divergent(runs: list[ReplayRun]) -> tuple[str | None, str]:
    for run in sorted(runs, key=lambda r: r.device is not Device.GPU):  # the GPU's answer first
        rep = run.details.get("opdiff") if run.details else None
        if not rep or not rep.get("divergent"):
            continue
        first = rep["divergent"][0]
        ref = "CPU" if rep.get("reference") == "cpu" else "a float64 CPU reference"
        where = "GPU" if run.device is Device.GPU else "CPU float32"
        return first["op"], (f"first operator whose {where} output differs from {ref}: {first['op']} "
                             f"({first['detail']}, max |diff| {first['max_abs_diff']:.3g}; {rep['checked']} ops checked)")
    return None, ""


def _verdict(runs: list[ReplayRun], raws: dict[Device, dict[str, Any]], expected: Traceback | None,
             compare: bool) -> tuple[Outcome, str, dict[str, Any]]:
    by = {r.device: r for r in runs}
    lines = "; ".join(_run_line(r) for r in runs)
    limited = [r for r in runs if r.outcome in (Outcome.TIMEOUT, Outcome.RESOURCE_LIMIT)]
    if expected is not None:
        hit = [r for r in runs if r.outcome is Outcome.REPRODUCED]
        if hit:
            wrapped = hit[0].details.get("wrapped_by")
            how = f", wrapped in {wrapped}" if wrapped else ""
            return Outcome.REPRODUCED, f"{hit[0].device.value} run raised the reported {hit[0].exception}{how}; {lines}", {}
        if limited:
            return limited[0].outcome, lines, {}
        if any(r.outcome is Outcome.DIFFERENT_ERROR for r in runs):
            return Outcome.DIFFERENT_ERROR, f"expected {expected.exception}: {expected.message[:200]}; {lines}", {}
        if all(r.outcome is Outcome.NO_DEVICE for r in runs):
            return Outcome.NO_DEVICE, lines, {}
        return Outcome.NO_ERROR, f"expected {expected.exception}, but {lines}", {}
    if limited:
        return limited[0].outcome, lines, {}
    if not compare:
        note = "; the report shows no error to compare with" if runs[0].outcome is Outcome.DIFFERENT_ERROR else ""
        return runs[0].outcome, lines + note, {}
    cpu, gpu = by[Device.CPU], by[Device.GPU]
    if gpu.outcome is Outcome.NO_DEVICE:
        if cpu.outcome is Outcome.DIFFERENT_ERROR:
            return Outcome.DIFFERENT_ERROR, lines, {}
        return Outcome.NO_DEVICE, f"GPU run {NO_DEVICE_MESSAGE}; {lines}", {}
    errs = {r.device: r for r in (cpu, gpu) if r.exception}
    if len(errs) == 1:
        only = next(iter(errs.values()))
        return Outcome.DISCREPANCY, f"only the {only.device.value} run raised {only.exception}; {lines}", {}
    if len(errs) == 2:
        return Outcome.DIFFERENT_ERROR, f"both runs raised an error; {lines}", {}
    outcome, reason, info = _compare_runs(cpu, gpu, raws)
    return outcome, reason, info


# -- issues, JSON, bisect --------------------------------------------------------------------------


_REPO_FRAMEWORK = {"pytorch/pytorch": "pytorch", "tensorflow/tensorflow": "tensorflow", "keras-team/keras": "tensorflow"}


def framework_of(issue: Issue | None, extraction: Extraction) -> str | None:
    if extraction.environment.framework:
        return extraction.environment.framework
    if issue is not None and issue.repo.lower() in _REPO_FRAMEWORK:
        return _REPO_FRAMEWORK[issue.repo.lower()]
    code = extraction.snippet.code if extraction.snippet else ""
    if re.search(r"^\s*(import|from)\s+torch\b", code, re.M):
        return "pytorch"
    if re.search(r"^\s*(import|from)\s+tensorflow\b", code, re.M):
        return "tensorflow"
    return None


def expected_error(extraction: Extraction) -> Traceback | None:
    """The report's traceback, or one made from its final error line."""
    if extraction.traceback is not None:
        return extraction.traceback
    line = extraction.error_line or ""
    code = extraction.snippet.code if extraction.snippet else ""
    if line.strip() and " ".join(line.split()) in " ".join(code.split()):
        return None  # `except tf.errors.OutOfRangeError: pass` is the snippet's own code, not what it raised
    m = re.match(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit|Interrupt))\s*:\s*(.*)$", line)
    if m:
        return Traceback(frames=(), exception=m.group(1), message=m.group(2))
    return None


def replay_issue(
    issue: Issue, extraction: Extraction, settings: Settings, store: Store | None = None, **kwargs: Any
) -> Replay:
    """Replay an issue's extracted snippet; its traceback (if any) is what a reproduction must raise."""
    if extraction.snippet is None or not extraction.snippet.code.strip():
        env = extraction.environment
        return Replay(ReplayEnvironment(env.framework, env.version, None, None, None), (), Outcome.NO_SNIPPET,
                      "the report has no runnable snippet" + (f" ({extraction.problems[0]})" if extraction.problems else ""))
    kwargs.setdefault("expected", expected_error(extraction))
    kwargs.setdefault("others", tuple(b.code for b in extraction.snippet.candidates if b.kind == "python"))
    kwargs.setdefault("when", issue.created_at or None)
    kwargs.setdefault("python", extraction.environment.python)
    return replay_snippet(extraction.snippet.code, framework_of(issue, extraction), extraction.environment.version,
                          settings, store=store, repo=issue.repo, number=issue.number, **kwargs)


def confirm_extraction(extraction: Extraction, replay: Replay) -> Extraction:
    """What a replay adds to the evidence the localizers read.

    A reproduced error whose report lacked framework frames, or whose traceback was cut, gets the
    replay's own traceback (frames mapped to repository paths). A GPU run's first divergent operator (checked against
    CPU, not the float64 stand-in) is put first among the APIs, as `torch.<op>`.
    """
    from sftl.extract import (  # an earlier stage; imported here to keep start-up light
        map_frame_path,
        stops_at_import,
    )

    changes: dict[str, Any] = {}
    report_tb = extraction.traceback
    if replay.verdict is Outcome.REPRODUCED:
        run = next((r for r in replay.runs if r.outcome is Outcome.REPRODUCED), None)
        frames = tuple(
            Frame(f["path"], f.get("line"), f.get("function", ""), f.get("source", ""), map_frame_path(f["path"]))
            for f in ((run.details.get("frames") or []) if run else [])
        )
        ours = sum(1 for f in frames if f.repo_path)
        theirs = len(report_tb.framework_frames) if report_tb is not None else 0
        # the replay's traceback replaces the report's when that one lacks framework frames or was cut
        # (it stops at an import, or shows fewer framework frames than the same error raised here)
        cut = report_tb is not None and (stops_at_import(report_tb.frames) or ours > theirs)
        if run is not None and ours and (report_tb is None or not theirs or cut):
            changes["traceback"] = Traceback(frames, run.exception or "", run.message or "")
    gpu = next((r for r in replay.runs if r.device is Device.GPU), None)
    opdiff = gpu.details.get("opdiff") if gpu is not None and gpu.details else None
    if replay.first_divergent_op and opdiff and opdiff.get("reference") == "cpu":
        api = "torch." + replay.first_divergent_op.split("::", 1)[-1].split(".")[0].rstrip("_")
        changes["apis"] = (api,) + tuple(a for a in extraction.apis if a != api)
    return replace(extraction, **changes) if changes else extraction


def replay_json(replay: Replay) -> dict[str, Any]:
    """The `sftl replay --json` object, exactly as documented."""
    env = replay.environment
    return {
        "environment": {"framework": env.framework, "version": env.version, "python": env.python,
                        "backend": env.backend, "name": env.name, "reason": env.reason},
        "runs": [
            {"device": r.device.value, "outcome": r.outcome.value, "exception": r.exception, "message": r.message,
             "stdout_tail": r.stdout_tail, "stderr_tail": r.stderr_tail, "seconds": r.seconds}
            for r in replay.runs
        ],
        "verdict": replay.verdict.value,
        "reason": replay.reason,
        "repairs": [{"kind": r.kind, "detail": r.detail} for r in replay.repairs],
        "packages": list(replay.packages),
    }


def expand_versions(framework: str, spec: str) -> list[str]:
    """'2.0..2.13' -> the latest patch of every minor release in range; '1.12.1,2.0' -> as listed."""
    releases = load_catalog().of(framework)
    if ".." in spec:
        lo_s, hi_s = (s.strip() for s in spec.split("..", 1))
        lo = parse_version(lo_s).minor if lo_s else releases[0].key
        hi = parse_version(hi_s).minor if hi_s else releases[-1].key
        if lo > hi:
            raise InputError(f"version range {spec!r} runs backwards")
        return [r.patches[-1] for r in releases if lo <= r.key <= hi]
    versions = [v.strip() for v in spec.split(",") if v.strip()]
    if not versions:
        raise InputError(f"no versions in {spec!r}")
    for v in versions:
        parse_version(v)  # a typo is bad input (exit 2), not a release with no environment
    return versions


_BAD = (Outcome.REPRODUCED, Outcome.DISCREPANCY)
_GOOD = (Outcome.NO_ERROR, Outcome.NO_DISCREPANCY, Outcome.DIFFERENT_ERROR)


@dataclass(frozen=True)
class BisectResult:
    framework: str
    steps: tuple[tuple[str, Replay], ...]  # (requested version, its replay), oldest first
    first_bad: str | None
    last_good: str | None
    fixed_in: str | None
    unavailable: tuple[str, ...]
    reason: str


def bisect(code: str, framework: str, versions: list[str], settings: Settings, **kwargs: Any) -> BisectResult:
    """Replay across releases (every one: builds are cached, so later bisects are cheap)."""
    fw = normalize_framework(framework)
    steps = tuple((v, replay_snippet(code, fw, v, settings, **kwargs)) for v in versions)
    unavailable = tuple(v for v, r in steps if r.verdict is Outcome.ENV_UNAVAILABLE)
    bad = [i for i, (_, r) in enumerate(steps) if r.verdict in _BAD]
    good = [i for i, (_, r) in enumerate(steps) if r.verdict in _GOOD]
    first_bad = steps[bad[0]][0] if bad else None
    last_good = steps[max(g for g in good if g < bad[0])][0] if bad and any(g < bad[0] for g in good) else None
    fixed_in = steps[min(g for g in good if g > bad[-1])][0] if bad and any(g > bad[-1] for g in good) else None
    ran = len(steps) - len(unavailable)
    if not ran:
        reason = "no version could be replayed: no environment for any of them"
    elif not bad:
        reason = f"the bug did not show in any of the {ran} versions replayed"
    else:
        reason = f"bad from {first_bad}" + (f", good in {last_good}" if last_good else ", no good version before it")
        reason += f", fixed in {fixed_in}" if fixed_in else ", not fixed in the versions replayed"
    if unavailable:
        reason += f"; no environment for {', '.join(unavailable)}"
    return BisectResult(fw, steps, first_bad, last_good, fixed_in, unavailable, reason)


def bisect_json(result: BisectResult) -> dict[str, Any]:
    return {
        "framework": result.framework,
        "first_bad": result.first_bad,
        "last_good": result.last_good,
        "fixed_in": result.fixed_in,
        "unavailable": list(result.unavailable),
        "reason": result.reason,
        "versions": [{"requested": v, **replay_json(r)} for v, r in result.steps],
    }
