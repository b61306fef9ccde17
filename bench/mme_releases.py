"""MME localization across framework releases: inject faults into older source trees, build the tracebacks
those releases would print, and measure both methods per release, with the traceback and with the error
line only.

Trees are unpacked from wheels under /work/cache/releases (never in the repository), or given by
SFTL_RELEASE_TREES=name=framework:version:root:site-prefix[,...]. For each class in a fixed list of
long-lived framework files, every plain method `m` that another method `g` of the class (or of a
subclass in the same file) calls as `self.m(` is removed; the traceback is the one Python prints for
`obj.g()` in a user script: the user frame, the frame of `g` at its `self.m(` line in the mutated file
(release paths, e.g. `site-packages/tensorflow_core/python/...` for TF 2.1), and
`AttributeError: '<class of g>' object has no attribute 'm'`. The error-line-only variant drops the
frames (as many real reports do). Truth: the file the method was removed from.

Usage: python bench/mme_releases.py [-v] [--limit N]
"""

from __future__ import annotations

import ast
import os
import random
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_locate import extraction_for, rank_of, remove_member, site_packages, summarize  # noqa: E402

from sftl.localize.dispatch import localize_paper, localize_sftl  # noqa: E402
from sftl.model import Category, Issue, Outcome  # noqa: E402

API = "--api" in sys.argv  # also public methods only users call (harder: no self.<name> evidence)
CACHE = Path(os.environ.get("SFTL_RELEASES_DIR", "/work/cache/releases"))

TORCH_FILES = [
    "torch/nn/modules/module.py", "torch/optim/optimizer.py", "torch/optim/lr_scheduler.py",
    "torch/nn/modules/batchnorm.py", "torch/nn/modules/rnn.py", "torch/nn/modules/conv.py",
    "torch/distributions/distribution.py", "torch/utils/data/dataloader.py", "torch/utils/data/sampler.py",
    "torch/nn/parallel/distributed.py", "torch/utils/checkpoint.py", "torch/nn/utils/prune.py",
    "torch/quantization/observer.py", "torch/ao/quantization/observer.py", "torch/fx/graph.py",
    "torch/utils/tensorboard/writer.py", "torch/jit/_script.py", "torch/autograd/profiler.py",
]  # fmt: skip
TF_FILES = [
    "tensorflow/python/ops/resource_variable_ops.py", "tensorflow/python/data/ops/dataset_ops.py",
    "tensorflow/python/ops/ragged/ragged_tensor.py", "tensorflow/python/framework/sparse_tensor.py",
    "tensorflow/python/module/module.py", "tensorflow/python/eager/backprop.py",
    "tensorflow/python/keras/engine/training.py", "tensorflow/python/keras/engine/base_layer.py",
    "tensorflow/python/keras/optimizer_v2/optimizer_v2.py", "tensorflow/python/keras/callbacks.py",
    "tensorflow/python/framework/ops.py", "tensorflow/python/training/checkpoint_management.py",
    "tensorflow/python/eager/def_function.py", "tensorflow/python/ops/variables.py",
    "tensorflow/python/distribute/distribute_lib.py", "tensorflow/python/framework/func_graph.py",
]  # fmt: skip


@dataclass(frozen=True)
class Release:
    name: str
    framework: str
    version: str
    root: Path  # repository layout (torch/..., tensorflow/...)
    prefix: str  # how the release's tracebacks print the package directory


def releases() -> list[Release]:
    sp = site_packages()
    out = [
        Release("torch-2.13.0", "pytorch", "2.13.0", sp, "/usr/local/lib/python3.11/site-packages/torch"),
        Release("torch-1.13.1", "pytorch", "1.13.1", Path("/work/cache/pytorch-src/pytorch-1.13.1"), "/opt/conda/lib/python3.9/site-packages/torch"),
        Release("torch-1.8.1", "pytorch", "1.8.1", CACHE / "torch-1.8.1", "/home/u/anaconda3/lib/python3.8/site-packages/torch"),
        Release("tf-2.21.0", "tensorflow", "2.21.0", sp, "/usr/local/lib/python3.11/dist-packages/tensorflow"),
        Release("tf-2.6.0", "tensorflow", "2.6.0", CACHE / "tf-2.6.0", "/usr/local/lib/python3.8/dist-packages/tensorflow"),
        Release("tf-2.1.0", "tensorflow", "2.1.0", CACHE / "tf-2.1.0", "/usr/local/lib/python3.7/site-packages/tensorflow_core"),
    ]
    for spec in filter(None, os.environ.get("SFTL_RELEASE_TREES", "").split(",")):
        name, rest = spec.split("=", 1)
        fw, ver, root, prefix = rest.split(":", 3)
        out.append(Release(name, fw, ver, Path(root), prefix))
    return [r for r in out if r.root.is_dir()]


class Tree:
    """A source provider over a repository-layout tree, with one file replaced."""

    def __init__(self, rel: Release, overrides: dict[str, str]) -> None:
        self.root, self.framework, self.version = rel.root, rel.framework, rel.version
        self.description = f"{rel.name} with an injected fault"
        self.overrides = overrides

    def list_files(self) -> list[str]:
        return _listing(self.root, "torch" if self.framework == "pytorch" else "tensorflow")

    def read_text(self, path: str) -> str | None:
        if path in self.overrides:
            return self.overrides[path]
        try:
            return (self.root / path).read_text(encoding="utf-8", errors="replace")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None


_LISTINGS: dict[tuple[Path, str], list[str]] = {}


def _listing(root: Path, pkg: str) -> list[str]:
    key = (root, pkg)
    if key not in _LISTINGS:
        out = []
        for dirpath, dirnames, filenames in os.walk(root / pkg):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            rel = os.path.relpath(dirpath, root).replace(os.sep, "/")
            out.extend(f"{rel}/{f}" for f in sorted(filenames) if f.endswith((".py", ".pyi")))
        _LISTINGS[key] = out
    return _LISTINGS[key]


@dataclass(frozen=True)
class Case:
    file: str
    cls: str  # class the method is removed from
    name: str
    owner: str  # class named in the error (the object's class)
    caller: str  # the method that called self.name
    holder: str  # the class defining that method


def cases(rel: Release, rng: random.Random, limit: int) -> list[Case]:
    files = TORCH_FILES if rel.framework == "pytorch" else TF_FILES
    out: list[Case] = []
    for f in files:
        try:
            text = (rel.root / f).read_text(encoding="utf-8")
            tree = ast.parse(text)
        except (OSError, SyntaxError):
            continue
        classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        for cname, node in classes.items():
            methods = {
                i.name for i in node.body
                if isinstance(i, ast.FunctionDef) and not i.decorator_list and not (i.name.startswith("__") and i.name.endswith("__"))
            }  # fmt: skip
            # subclasses in the same file that do not override the method may call it too
            users = [node] + [
                c for c in classes.values() if any(isinstance(b, ast.Name) and b.id == cname for b in c.bases)
            ]
            for meth in sorted(methods):
                for user in users:
                    if user is not node and meth in {i.name for i in user.body if isinstance(i, ast.FunctionDef)}:
                        continue
                    caller = _self_caller(user, meth)
                    if caller is None:
                        if user is node and not meth.startswith("_") and API:
                            # a public method the class never calls itself: only users (or other files) do
                            out.append(Case(f, cname, meth, cname, "", cname))
                            break
                        continue
                    owner = user.name
                    # the object is often an instance of a subclass defined elsewhere (`'Adam' object has
                    # no attribute ...` for a method of Optimizer): the error then names that subclass
                    subs = [s for s in _subclasses(rel, user.name) if s[0] != f and not ({meth, caller} & s[2])]
                    if subs and rng.random() < 0.5:
                        owner = rng.choice(subs)[1]
                    out.append(Case(f, cname, meth, owner, caller, user.name))
                    break
    rng.shuffle(out)
    return out[:limit]


_SUBCLASSES: dict[Path, dict[str, list[tuple[str, str, set[str]]]]] = {}


def _subclasses(rel: Release, base: str) -> list[tuple[str, str, set[str]]]:
    """(file, class, its own method names) of classes anywhere in the tree written as `class X(...base...)`."""
    if rel.root not in _SUBCLASSES:
        index: dict[str, list[tuple[str, str, set[str]]]] = {}
        pkg = "torch" if rel.framework == "pytorch" else "tensorflow"
        rx = re.compile(r"^class\s+\w+\(", re.M)
        for f in _listing(rel.root, pkg):
            if not f.endswith(".py") or "/test" in f or f.endswith("_test.py"):
                continue
            text = (rel.root / f).read_text(encoding="utf-8", errors="replace")
            if not rx.search(text):
                continue
            try:
                tree = ast.parse(text)
            except SyntaxError:
                continue
            for n in tree.body:
                if isinstance(n, ast.ClassDef):
                    own = {i.name for i in n.body if isinstance(i, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Assign))
                           and hasattr(i, "name")}
                    for b in n.bases:
                        bname = b.attr if isinstance(b, ast.Attribute) else b.id if isinstance(b, ast.Name) else None
                        if bname:
                            index.setdefault(bname, []).append((f, n.name, own))
        _SUBCLASSES[rel.root] = index
    # one level only: a subclass of a subclass may override what we need
    return sorted(_SUBCLASSES[rel.root].get(base, []))


def _self_caller(cls: ast.ClassDef, meth: str) -> str | None:
    for item in cls.body:
        if isinstance(item, ast.FunctionDef) and item.name != meth:
            for sub in ast.walk(item):
                if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == meth:
                    v = sub.func.value
                    if isinstance(v, ast.Name) and v.id == "self":
                        return item.name
    return None


def _typo(name: str) -> str:
    """A plausible misspelling: two neighbouring letters swapped (or a letter doubled)."""
    core = [i for i in range(1, len(name) - 2) if name[i].isalpha() and name[i + 1].isalpha() and name[i] != name[i + 1]]
    if not core:
        return name + name[-1]
    i = core[len(core) // 2]
    return name[:i] + name[i + 1] + name[i] + name[i + 2 :]


def _still_defined(source: Tree, case: Case) -> bool:
    """Does a base class (with source) still define the name after the removal? Then nothing fails.
    Read with sftl's own static resolver (imports, re-exports, aliases)."""
    from sftl.localize.pycode import Code

    code = Code(source)
    ref = code.class_at(case.file, case.cls)
    if ref is None:
        return True
    mro, _ = code.mro(ref)
    return any(case.name in code.members(k) for k in mro)


def traceback_for(rel: Release, case: Case, mutated: str) -> str | None:
    """The traceback `obj.<caller>()` prints in the mutated release (None when the call line is gone)."""
    tree = ast.parse(mutated)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == case.holder), None)
    func = next((i for i in cls.body if isinstance(i, ast.FunctionDef) and i.name == case.caller), None) if cls else None
    if func is None:
        return None
    line = next(
        (s.lineno for s in ast.walk(func) if isinstance(s, ast.Call) and isinstance(s.func, ast.Attribute) and s.func.attr == case.name),
        None,
    )
    if line is None:
        return None
    src = mutated.splitlines()[line - 1].strip()
    pkg = "torch" if rel.framework == "pytorch" else "tensorflow"
    fpath = rel.prefix + case.file[len(pkg) :]
    return (
        "Traceback (most recent call last):\n"
        '  File "repro.py", line 9, in <module>\n'
        f"    out = obj.{case.caller}()\n"
        f'  File "{fpath}", line {line}, in {case.caller}\n'
        f"    {src}\n"
        f"AttributeError: '{case.owner}' object has no attribute '{case.name}'"
    )


def measure(rel: Release, limit: int, verbose: bool) -> dict[tuple[str, str], list[int | None]]:
    rng = random.Random(13)
    res: dict[tuple[str, str], list[int | None]] = {}
    misses: list[str] = []
    for case in cases(rel, rng, limit):
        text = (rel.root / case.file).read_text(encoding="utf-8")
        try:
            mutated = remove_member(text, case.cls, case.name)
        except ValueError:
            continue
        tb = traceback_for(rel, case, mutated) if case.caller else (
            f"Traceback (most recent call last):\n  File \"repro.py\", line 9, in <module>\n    out = obj.{case.name}()\n"
            f"AttributeError: '{case.owner}' object has no attribute '{case.name}'"
        )
        if tb is None:
            continue
        source = Tree(rel, {case.file: mutated})
        if _still_defined(source, case):
            continue  # an override: the base's method runs, Python raises nothing
        err = tb.splitlines()[-1]
        user_tb = (
            "Traceback (most recent call last):\n"
            '  File "repro.py", line 9, in <module>\n'
            f"    out = obj.{case.name}()\n{err}"
        )
        typo = _typo(case.name)
        typo_err = f"AttributeError: '{case.owner}' object has no attribute '{typo}'"
        typo_tb = user_tb.replace(f"obj.{case.name}()", f"obj.{typo}()").replace(err, typo_err)
        variants = [] if not case.caller else [
            ("traceback", tb, err, source, True),
            ("error-line", "", err, source, True),
            ("user-call", user_tb, err, source, True),
            # a misspelled name on the unmodified tree: the right answer is to abstain
            ("typo(neg)", typo_tb, typo_err, Tree(rel, {}), False),
        ]
        if not case.caller:
            variants = [("api-user", tb, err, source, True), ("api-line", "", err, source, True), ("typo(neg)", typo_tb, typo_err, Tree(rel, {}), False)]
        fw = "PyTorch" if rel.framework == "pytorch" else "TensorFlow"
        for variant, tb_text, err_line, src, positive in variants:
            body = f"```\n{tb_text}\n```" if tb_text else f"I get this error:\n\n{err_line}"
            body += f"\n\nEnvironment:\n- {fw} version: {rel.version}\n"
            issue = Issue(f"{rel.framework}/{rel.framework}", 1, err_line.split(": ", 1)[1], body, html_url="https://github.com/x/y/issues/1")
            row = {"traceback": tb_text, "error": err_line, "framework": rel.framework, "version": rel.version}
            ex = extraction_for(issue, row)
            for method, fn in (("paper", localize_paper), ("sftl", localize_sftl)):
                loc = fn(issue, ex, Category.MME, src, 10)
                if positive:
                    r = rank_of(loc.suspects, {case.file}) if loc.outcome == Outcome.LOCATED else None
                else:  # a hit is an abstention; a located answer is a false alarm
                    r = 1 if loc.outcome != Outcome.LOCATED else None
                res.setdefault((variant, method), []).append(r)
                if verbose and method == "sftl" and r != 1:
                    top = loc.suspects[0] if loc.suspects else None
                    misses.append(
                        f"    miss [{variant}] {case.cls}.{case.name} (owner {case.owner}, {case.file}): rank {r} "
                        f"{loc.outcome.value}: {(top.path + ': ' + top.reason) if top else loc.reason}"[:300]
                    )
    for m in misses:
        print(m)
    return res


def main() -> None:
    verbose = "-v" in sys.argv
    limit = int(sys.argv[sys.argv.index("--limit") + 1]) if "--limit" in sys.argv else 30
    only = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else None
    print("MME faults injected into release trees (method removed; located-only counts as a hit)")
    for rel in releases():
        if only and rel.name not in only:
            continue
        t0 = time.perf_counter()
        res = measure(rel, limit, verbose)
        for (variant, method), ranks in sorted(res.items()):
            print(f"  {rel.name:<13} {variant:<10} {method:<6} {summarize(ranks)}")
        print(f"  ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
