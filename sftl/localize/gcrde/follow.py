"""Following an aten op through the kernel index: dispatch kernels, stubs, helpers, math headers, includes."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import TYPE_CHECKING

from sftl.codegraph import native as nat
from sftl.localize.gcrde.board import (
    Board,
)
from sftl.localize.gcrde.ops import (
    TORCH_INCIDENTAL,
    dunder_free,
)
from sftl.model import Side

if TYPE_CHECKING:
    pass

_FOLLOW_SKIP = TORCH_INCIDENTAL | {"resize_", "resize_output", "empty_strided", "new_empty", "is_same_size",
                                    "copy", "select", "narrow", "as_strided", "alias", "result_type", "sizes",
                                    "scalar_type", "options", "is_contiguous", "sum", "mul", "add", "sub", "div",
                                    "_unsafe_view", "expect_contiguous", "defined", "numel", "dim"}


_GUESS = "guessed"
_OWN_DEVICE = 0.95  # a device-generic file's evidence when it defines one device's dispatch kernel


def _entries(natives: dict[str, list[nat.NativeFunction]] | None, name: str) -> list[nat.NativeFunction]:
    if natives is None:
        return []
    out = list(natives.get(name, ()))
    for extra in (name + "_out", name + "_"):
        if extra in natives and not name.endswith("_"):
            out.extend(natives[extra])
    return out


def follow_op(
    name: str, weight: float, origin: str, natives: dict[str, list[nat.NativeFunction]] | None,
    index: nat.KernelIndex, board: Board, followed: set[str], depth: int,
) -> None:
    """Add evidence for every file that defines or registers a kernel of this op."""
    key = name
    if key in followed or depth > 3 or weight < 0.05:
        return
    followed.add(key)
    kernels: dict[str, set[str]] = defaultdict(set)  # kernel function -> dispatch keys
    for entry in _entries(natives, name):
        dispatch = dict(entry.dispatch)
        if entry.structured_delegate and natives:
            dname, _, dover = entry.structured_delegate.partition(".")
            for target in natives.get(dname, ()):
                if target.overload == dover:
                    dispatch.update({k: v for k, v in target.dispatch.items() if k not in dispatch})
        if not dispatch:  # no dispatch section: CompositeImplicitAutograd, implemented as at::native::<name>
            kernels[entry.name].add("CompositeImplicitAutograd")
        for dkey, kernel in dispatch.items():
            if nat.dispatch_side(dkey) is not None:
                kernels[kernel].add(dkey)
    if not kernels:  # no yaml, or an op it does not list: the op name itself and its usual kernel spellings
        for guess in (name, f"{name}_cpu", f"{name}_cuda", f"{name}_out", f"{name}_kernel", f"{name}_kernel_cuda"):
            kernels[guess].add(_GUESS)
    for kernel, dkeys in kernels.items():
        dense = any(nat.is_dense_key(k) for k in dkeys) or _GUESS in dkeys
        kw = weight * (1.0 if dense else 0.35) * (0.8 if _GUESS in dkeys else 1.0)
        keys = "no dispatch entry; name guessed" if _GUESS in dkeys else "dispatch " + ", ".join(sorted(dkeys))
        composite = all(nat.dispatch_side(k) == Side.SHARED for k in dkeys)
        defs = index.definitions(kernel)
        for d in defs:
            fside = nat.path_side(d.path)
            role = (0.55 if composite else 0.8) if fside == Side.SHARED else 1.0
            # a device-generic file defining one device's dispatch kernel (SummaryOps.cpp's _bincount_cpu,
            # dispatch CPU only) holds that device's code: it is that device's kernel, wherever it lies
            own = {nat.dispatch_side(k) for k in dkeys} - {None}
            device = next(iter(own)) if fside == Side.SHARED and len(own) == 1 and own <= {Side.CPU, Side.CUDA} else None
            if device is not None:
                role = _OWN_DEVICE
            board.add(d.path, kw * role, f"defines {kernel} ({keys}) for {name} [{origin}]", side=device)
            board.body(d.path, kernel, d.body)
            bodies = [(kernel, d.body)]
            for helper in nat.local_calls(d.body)[:40]:  # same-file helpers: std -> std_var_out -> std_var_stub
                if helper in index.registrations or helper == kernel or len(helper) < 4:
                    continue
                hd = index.definition_in(helper, d.path)
                if hd is not None:
                    bodies.append((helper, hd.body))
                if len(bodies) > 6:
                    break
            for caller, body in bodies:
                for stub in nat.stub_calls(body, index.registrations):
                    for reg_path, fn in index.registrations.get(stub, ()):
                        board.add(reg_path, kw * 0.97, f"REGISTER_DISPATCH({stub}, {fn}) called from {caller} for {name}")
                        board.edge(d.path, reg_path, "stub")
                        _follow_helpers(fn, reg_path, kw * 0.9, index, board)
            if composite or fside == Side.SHARED:
                for called in nat.op_calls(d.body)[:16]:
                    called = _op_name(called, natives)
                    if called in _FOLLOW_SKIP or called == name or (natives and called not in natives):
                        continue
                    follow_op(called, weight * 0.85, f"{name} calls {called}", natives, index, board, followed,
                               depth + 1)
            if fside in (Side.CPU, Side.CUDA):  # cuda/Activation.cpp gelu_out_cuda -> GeluCUDAKernelImpl
                _follow_cross_file(kernel, d, fside, kw * 0.92, index, board)
                _follow_math(kernel, d, kw * 0.85, index, board)
        if not defs:
            for path in index.mentions(kernel, limit=6):
                board.add(path, kw * 0.5, f"names {kernel} ({keys}) for {name}, maybe macro-generated")
    # stubs named after the op (e.g. histc -> histogramdd_stub is found above; add_stub, rshift_stub directly)
    base = dunder_free(name).rstrip("_")
    for stub in dict.fromkeys((f"{base}_stub", f"{name.rstrip('_')}_stub")):
        for reg_path, fn in index.registrations.get(stub, ()):
            board.add(reg_path, weight * 0.85, f"REGISTER_DISPATCH({stub}, {fn}) for {name}")
            _follow_helpers(fn, reg_path, weight * 0.8, index, board)
    if len(base) >= 4:  # bernoulli -> bernoulli_tensor_stub, bernoulli_scalar_stub
        for stub in index.registrations:
            if stub.startswith(base + "_") and stub.endswith("_stub") and stub != f"{base}_stub":
                for reg_path, fn in index.registrations[stub]:
                    board.add(reg_path, weight * 0.75, f"REGISTER_DISPATCH({stub}, {fn}) named after {name}")


_HELPER = re.compile(r"\b(\w*(?:kernel|launch|template)\w*)\s*(?:<[^;(){}]*>)?\s*\(")


def _follow_helpers(fn: str, reg_path: str, score: float, index: nat.KernelIndex, board: Board) -> None:
    """A registered stub function often forwards to a launcher in another file (max_all_launch_kernel)."""
    if not fn:
        return
    reg_side = nat.path_side(reg_path)
    opposite = {Side.CPU: Side.CUDA, Side.CUDA: Side.CPU}.get(reg_side) if reg_side is not None else None
    # defined beside its registration, else elsewhere, but never on the other device (a CPU kernel
    # is not cuda/Math.cuh's same-named jiterator function)
    defs = [d for d in index.definitions(fn, limit=4, tensorish=False) if d.path == reg_path] or [
        d for d in index.definitions(fn, limit=2, tensorish=False) if nat.path_side(d.path) != opposite
    ]
    for d in defs[:1]:
        board.body(d.path, fn, d.body)
        if d.path != reg_path:
            board.add(d.path, score, f"defines {fn}, registered in {reg_path.rsplit('/', 1)[-1]}")
            board.edge(reg_path, d.path, "registers")
        _follow_math(fn, d, score * 0.95, index, board)
        body = _without_jiterator_fallback(d.body[:20000]) if reg_side == Side.CUDA else d.body[:20000]
        helpers = list(dict.fromkeys(m.group(1) for m in _HELPER.finditer(body)))
        for helper in helpers[:6]:
            if helper == fn or helper.startswith(("C10_", "AT_", "TORCH_", "TORCH")):
                continue
            for hd in index.definitions(helper, limit=3, tensorish=False):
                if hd.path != d.path and nat.path_side(hd.path) == nat.path_side(reg_path):
                    board.add(hd.path, score * 0.95, f"defines {helper}, called by {fn}")
                    board.edge(d.path, hd.path, "calls")
                    # a device source's helper (norm_launch_kernel -> NormOps), not a launcher header's internals
                    if nat.path_side(hd.path) in (Side.CPU, Side.CUDA) and not hd.path.endswith(HEADERS):
                        _follow_math(helper, hd, score * 0.9, index, board)


HEADERS = (".h", ".cuh", ".hpp")
CALL_T = re.compile(r"\b([A-Za-z_]\w*)\s*(?:<[^;(){}]*>)?\s*\(")
# symbols named like launchers/plumbing are followed elsewhere (or not at all): not "the math"
_NOT_MATH = re.compile(r"kernel|launch|loop|dispatch|stub|impl|template|^(?:TORCH|AT|C10|CUDA|HIP)_|_t$|^std$", re.I)
_MATH_RARE = 8  # a symbol in more kernel files than this is shared plumbing, not one op's math


def _follow_math(caller: str, d: nat.Definition, score: float, index: nat.KernelIndex, board: Board) -> None:
    """The headers defining the math a device kernel runs: its functor/lambda's calc_*/jiterator strings/ops structs.

    A fix to a numerical divergence often lands where the math is written (cuda/Math.cuh's
    calc_digamma, SharedReduceOps.h's WelfordOps), not in the file that registers the kernel. Reads
    the kernel's body and its same-file helpers, keeps the rare identifiers (few kernel files name
    them), and credits the headers the kernel file includes (directly or one level down) that define
    them. A header on the kernel's own device counts more than a device-generic one (Math.h), whose
    math the other device runs too.
    """
    bodies = [d.body[:20000]]
    text = index.texts.get(d.path, "")
    for helper in dict.fromkeys(m.group(1) for m in CALL_T.finditer(d.body[:20000])):  # -> norm_kernel_cuda_impl<T>(
        if helper != caller and len(helper) >= 4 and not helper.isupper() and text.count(helper) > 1:
            hd = index.definition_in(helper, d.path)
            if hd is not None and hd.start != d.start:
                bodies.append(hd.body[:20000])
        if len(bodies) > 6:
            break
    headers = [h for h in index.includes.get(d.path, ()) if h.endswith(HEADERS)]
    for h in list(headers):
        headers += [g for g in index.includes.get(h, ()) if g.endswith(HEADERS) and g not in headers]
    kside = nat.path_side(d.path)
    other = {Side.CPU: Side.CUDA, Side.CUDA: Side.CPU}.get(kside) if kside is not None else None
    if kside == Side.CUDA:  # what default CUDA builds run: not the `#else` of `#if AT_USE_JITERATOR()`
        bodies = [_without_jiterator_fallback(b) for b in bodies]
    symbols = list(dict.fromkeys(tok for body in bodies for tok in nat.identifiers(body)))
    found: dict[str, list[str]] = defaultdict(list)
    for sym in symbols:
        if len(sym) < 4 or _NOT_MATH.search(sym) or sym.isupper() or sym == caller or sym in index.registrations:
            continue
        holders = index.files_with(sym)
        if not holders or len(holders) > _MATH_RARE:
            continue
        definers = [h for h in holders if h.endswith(HEADERS) and h != d.path and nat.path_side(h) != other
                    and index.defines(h, sym)]
        included = [h for h in definers if h in headers]
        # the kernel file's own includes first; else (reached through a header outside ATen/native, e.g.
        # ATen/cpu/vec/vec.h -> Math.h) the one or two headers that define it
        for header in included or (definers if len(definers) <= 2 else []):
            found[header].append(sym)
    device = kside if kside in (Side.CPU, Side.CUDA) else None
    for header, syms in found.items():
        hside = nat.path_side(header)
        if device is not None and hside == Side.SHARED:
            # a device-generic header's version is shadowed where the kernel's own device defines the name
            # (cuda/Math.cuh's calc_digamma for a CUDA kernel), and is host-only math when only the CUDA
            # side has its own (Math.h's calc_digamma for a CPU kernel)
            syms = [s for s in syms if not any(h != header and nat.path_side(h) == device for h in _definers(found, s))]
            if not syms:
                continue
            host_only = device == Side.CPU and all(
                _defined_on(index, s, Side.CUDA) or _cuda_fallback_only(index, s) for s in syms)
        else:
            host_only = False
        same = device is not None and (hside == device or host_only)
        where = f"{device.value.upper()}-only math" if same and device is not None else "math"
        board.edge(d.path, header, "math")
        board.add(header, score * (1.0 if same else 0.85) + 0.01 * min(len(syms) - 1, 3),
                  f"defines {', '.join(syms[:3])} ({where}) used by {caller} in {d.path.rsplit('/', 1)[-1]}",
                  side=device if host_only else None)


_PP = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif)\b(.*)$", re.M)


def jiterator_fallbacks(text: str) -> list[tuple[int, int]]:
    """Spans of the `#else` branches of `#if AT_USE_JITERATOR()` blocks: code CUDA builds run only
    without the jiterator (ROCm, old toolkits), so not the math a default CUDA build runs."""
    spans: list[tuple[int, int]] = []
    stack: list[list[object]] = []  # [is the jiterator test, start of its #else]
    for m in _PP.finditer(text):
        kw = m.group(1)
        if kw.startswith("if"):
            stack.append([kw == "if" and "AT_USE_JITERATOR" in m.group(2), None])
        elif kw in ("else", "elif") and stack:
            if stack[-1][0] and stack[-1][1] is None:
                stack[-1][1] = m.end()
        elif kw == "endif" and stack:
            is_jit, start = stack.pop()
            if is_jit and isinstance(start, int):
                spans.append((start, m.start()))
    return spans


def _without_jiterator_fallback(body: str) -> str:
    if "AT_USE_JITERATOR" not in body:
        return body
    for start, end in sorted(jiterator_fallbacks(body), reverse=True):
        body = body[:start] + body[end:]
    return body


def _cuda_fallback_only(index: nat.KernelIndex, sym: str) -> bool:
    """Whether every CUDA kernel file naming `sym` names it only in a jiterator fallback branch
    (calc_i0e in UnarySpecialOpsKernel.cu, whose default path runs i0e_string)."""
    users = [p for p in index.files_with(sym) if nat.path_side(p) == Side.CUDA and not p.endswith(HEADERS)]
    if not users:
        return False
    pattern = re.compile(r"\b" + re.escape(sym) + r"\b")
    for path in users:
        text = index.texts.get(path, "")
        spans = jiterator_fallbacks(text) if "AT_USE_JITERATOR" in text else []
        for m in pattern.finditer(text):
            line = text[text.rfind("\n", 0, m.start()) + 1 : m.start()]
            if line.count('"') % 2 or line.lstrip().startswith("//"):
                continue  # a string (the jiterator's kernel name "calc_i0e") or a comment: not a call
            if not any(a <= m.start() < b for a, b in spans):
                return False
    return True


def _definers(found: dict[str, list[str]], sym: str) -> list[str]:
    return [h for h, syms in found.items() if sym in syms]


def _defined_on(index: nat.KernelIndex, sym: str, side: Side) -> bool:
    """Whether some file of that device defines the symbol too (its own version of the math)."""
    return any(nat.path_side(p) == side and index.defines(p, sym) for p in index.files_with(sym))


def _op_name(called: str, natives: dict[str, list[nat.NativeFunction]] | None) -> str:
    """at::nll_loss_forward_symint / at::foo_out -> the op they belong to."""
    if not natives or called in natives:
        return called
    for suffix in ("_symint", "_outf", "_out"):
        if called.endswith(suffix) and called[: -len(suffix)] in natives:
            return called[: -len(suffix)]
    return called


def _follow_cross_file(
    kernel: str, d: nat.Definition, side: Side, score: float, index: nat.KernelIndex, board: Board
) -> None:
    """A device kernel calling a same-device function defined in another file."""
    for helper in nat.local_calls(d.body)[:30]:
        if len(helper) < 6 or helper in index.registrations or helper.startswith(("TORCH_", "AT_", "C10_")):
            continue
        if len(index.files_with(helper)) > 40:
            continue  # a name used all over (empty_like, launch_kernel) is not this kernel's helper
        defs = index.definitions(helper, limit=4, tensorish=False)
        if not defs or len(defs) > 3:
            continue  # undefined here, or a common name defined all over
        for hd in defs:
            if hd.path != d.path and nat.path_side(hd.path) == side:
                board.add(hd.path, score, f"defines {helper}, called by {kernel}")
                board.edge(d.path, hd.path, "calls")


def add_headers(index: nat.KernelIndex, board: Board) -> None:
    """Shared headers (Loops.cuh, Reduce.cuh, THCNumerics.cuh) included by the suspect kernel files."""
    parents = sorted(board.files.items(), key=lambda kv: -kv[1].score)[:12]
    header_hits: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for path, ev in parents:
        for inc in index.includes.get(path, ()):
            if inc.endswith((".cuh", ".h", ".hpp")) and inc.startswith(nat.KERNEL_DIRS):
                header_hits[inc].append((ev.score, path))
    for header, hits in header_hits.items():
        best = max(s for s, _ in hits)
        score = min(0.7, 0.42 * best + 0.06 * (len(hits) - 1))
        names = ", ".join(p.rsplit("/", 1)[-1] for _, p in hits[:3])
        board.add(header, score, f"header included by {names}")
