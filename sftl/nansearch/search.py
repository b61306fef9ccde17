"""NaN/INF search helper: run a program's gradient-guided search (and a random baseline) in a child process.

The search itself (sftl.nansearch.core with the torch_backend / tf_backend backends) executes user code, so it
never runs in sftl's own process: `search_script` runs `runner.py` through `sftl.sandbox.Sandbox`
(no network, read-only system, scrubbed environment, time/memory/process limits) with one JSON request
file in the scratch folder, and reads back the one JSON result it writes.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sftl.config import Settings
from sftl.errors import EnvError, InputError, SandboxError
from sftl.sandbox import GiB, Limits, Sandbox, environment_paths, output_tail, too_wide

RUNNER = Path(__file__).resolve().parent / "runner.py"
RESULT_MARK = "SFTL_NAN_RESULT "
STARTUP_ALLOWANCE = 120.0  # seconds for the child to import torch/tensorflow and load the script
MEMORY_LIMIT = 8 * GiB  # address space: TensorFlow reserves a lot of it at import


@dataclass(frozen=True)
class BaselineResult:
    """The random-search baseline under the same budget."""

    found: bool
    seconds: float
    steps: int
    op: str | None = None
    line: int | None = None
    cpu_seconds: float = 0.0


@dataclass(frozen=True)
class NanSearchResult:
    """What the search found: the operation, the user line that called it, the inputs, and the cost."""

    found: bool
    op: str | None
    line: int | None
    steps: int
    seconds: float
    inputs: dict[str, Any] = field(default_factory=dict)  # {"op": [argument summaries], "program": [variables]}
    code: str = ""  # the source text of `line`
    kind: str = ""  # "forward" (an op's output), "backward" (a gradient), "python" (ZeroDivisionError, ...)
    baseline: BaselineResult | None = None
    framework: str = "torch"
    script: str = ""
    variables: tuple[str, ...] = ()
    sites: tuple[str, ...] = ()  # the unsafe operation sites the search reached, "torch.log@12"
    reason: str = ""  # why nothing was found
    cpu_seconds: float = 0.0  # the search's CPU time (steadier than `seconds` on a loaded machine)
    phase: str = ""  # what found it: "start", "domain" (a cheap probe), "gradient", "soft", "restart"
    start_seconds: float = 0.0  # the shared, untimed run at the program's own inputs (both searches start after it)
    reference: BaselineResult | None = None  # `reference=True`: random search with log-uniform scales

    @property
    def speedup(self) -> float | None:
        """Baseline time over search time; a lower bound when the baseline found nothing."""
        if not self.found or self.baseline is None or self.seconds <= 0:
            return None
        return self.baseline.seconds / self.seconds

    def to_json(self) -> dict[str, Any]:
        """The `sftl nan-search --json` object, exactly these keys."""
        base = self.baseline
        return {
            "found": self.found,
            "op": self.op,
            "line": self.line,
            "inputs": self.inputs,
            "steps": self.steps,
            "seconds": round(self.seconds, 4),
            "baseline": None if base is None else {
                "found": base.found, "seconds": round(base.seconds, 4), "steps": base.steps,
            },
        }


def search_script(
    path: str | Path,
    settings: Settings,
    *,
    entry: str | None = None,
    budget: float = 20.0,
    seed: int = 0,
    baseline: bool = True,
    bound: float = 1e4,
    params: bool = False,
    python: str | None = None,
    allow_network: bool = False,
    repeats: int = 1,
    probes: bool = True,
    reference: bool = False,
    soft: bool = False,
    unconfined: bool = False,
) -> NanSearchResult:
    """Search SCRIPT for inputs that make an unsafe operation produce NaN/INF (raises InputError on a bad script).

    `repeats` > 1 (the benchmark) times short searches that many times, each kind alternately, and reports
    the median times; `probes=False` skips the cheap domain probes (the gradient phase alone); `reference`
    also runs a random search with log-uniform scales (same budget) as a stronger reference; `soft` adds the
    soft-assertion guide (sftl.nansearch.soft_assertions) beside the gradient (PyTorch)."""
    script = Path(path).expanduser().resolve()
    if not script.is_file():
        raise InputError(f"no such script: {path}")
    try:
        script.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})") from None
    if params and entry is None:
        raise InputError("--params needs --entry FUNC (the parameters of the script's nn.Module globals)")
    if budget <= 0:
        raise InputError(f"--budget must be positive, not {budget:g}")
    timeout = budget * (1 + baseline + reference) + STARTUP_ALLOWANCE + (repeats - 1) * 0.75
    sandbox = Sandbox(settings, Limits(timeout=timeout, memory=MEMORY_LIMIT), allow_network=allow_network,
                      unconfined=unconfined)
    scratch = Path(tempfile.mkdtemp(prefix="sftl-nan-"))
    try:
        (scratch / "home").mkdir()
        (scratch / "tmp").mkdir()
        # a copy inside the scratch folder: the sandbox hides the host's /tmp, where snippets are written
        copy = scratch / script.name
        shutil.copyfile(script, copy)
        request = {"script": str(copy), "cwd": str(script.parent), "entry": entry, "budget": budget, "seed": seed,
                   "baseline": baseline, "bound": bound, "params": params, "repeats": repeats,
                   "probes": probes, "reference": reference,
                   "soft": soft}
        (scratch / "request.json").write_text(json.dumps(request), encoding="utf-8")
        interpreter = python or sys.executable
        argv = [interpreter, "-B", str(RUNNER), "--request", str(scratch / "request.json"),
                "--result", str(scratch / "result.json")]
        # read-only: the script's folder (its data and modules; not where that is the home or a top folder: the
        # copy alone then), sftl's own package (the runner imports it, by path) and the interpreter's environment
        home = settings.base_env.get("HOME")
        shown = (*(() if too_wide(script.parent, home) else (script.parent,)), RUNNER.parents[1],
                 *environment_paths(Path(interpreter), home))
        run = sandbox.run(argv, scratch, ro_paths=shown)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if run.limit is not None:
        raise SandboxError(f"the search of {script.name} hit the sandbox's {run.limit} limit"
                           + (f" ({timeout:.0f} s)" if run.limit == "timeout" else ""))
    payload = run.result or _parse(run.stdout)
    if payload is None:
        tail = output_tail(run.stderr.strip(), lines=1) or "no output"
        raise SandboxError(f"the search process of {script.name} died (exit {run.returncode}): {tail}")
    return _to_result(payload, script)


def search_snippet(code: str, settings: Settings, budget: float = 20.0, *, seed: int = 0,
                   baseline: bool = True, allow_network: bool = False, unconfined: bool = False) -> NanSearchResult:
    """Whole-script search of an issue's snippet (for `sftl replay TARGET --nan-search`)."""
    with tempfile.TemporaryDirectory(prefix="sftl-nan-") as tmp:
        path = Path(tmp) / "snippet.py"
        path.write_text(code, encoding="utf-8")
        return search_script(path, settings, budget=budget, seed=seed, baseline=baseline,
                             allow_network=allow_network, unconfined=unconfined)


def _parse(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            try:
                payload = json.loads(line[len(RESULT_MARK):])
            except json.JSONDecodeError:
                return None
            return payload if isinstance(payload, dict) else None
    return None


def _to_result(payload: dict[str, Any], script: Path) -> NanSearchResult:
    if not payload.get("ok"):
        message = output_tail(str(payload.get("error") or "the search failed"), lines=5)  # the script's words: data
        kind = payload.get("kind")
        if kind == "input":
            raise InputError(message)
        if kind == "env":
            raise EnvError(message)
        raise SandboxError(f"the search of {script.name} failed: {message}")
    s = payload["search"]
    b = payload.get("baseline")
    ref = payload.get("reference")
    names = payload.get("variables") or []
    program = [dict(v, name=n) for n, v in zip(names, s.get("values") or [], strict=False)]
    return NanSearchResult(
        found=bool(s["found"]),
        op=s.get("op"),
        line=s.get("line"),
        steps=int(s.get("steps", 0)),
        seconds=float(s.get("seconds", 0.0)),
        inputs={"op": s.get("op_inputs") or [], "program": program} if s["found"] else {},
        code=s.get("code") or "",
        kind=s.get("kind") or "",
        baseline=None if not b else BaselineResult(bool(b["found"]), float(b["seconds"]), int(b["steps"]),
                                                    b.get("op"), b.get("line"), float(b.get("cpu_seconds", 0.0))),
        framework=payload.get("framework", "torch"),
        script=str(script),
        variables=tuple(names),
        sites=tuple(s.get("sites") or ()),
        reason=s.get("reason") or "",
        cpu_seconds=float(s.get("cpu_seconds", 0.0)),
        phase=s.get("phase") or "",
        start_seconds=float(payload.get("start_seconds", 0.0)),
        reference=None if not ref else BaselineResult(bool(ref["found"]), float(ref["seconds"]), int(ref["steps"]),
                                                      ref.get("op"), ref.get("line"), float(ref.get("cpu_seconds", 0.0))),
    )
