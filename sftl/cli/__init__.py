"""The command line: argparse, `main(argv) -> int`; the only place that prints or exits.

Each sub-command lives in its own module of this package (`intake`, `screening`, `locate`, ...)
exposing `register(subparsers)`; a handler has the signature `handler(args, ctx) -> int`.
Heavy libraries (torch, sklearn, tensorflow) are imported inside handlers, never at start-up,
so `sftl --help` and `sftl show` stay fast.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from sftl import __version__
from sftl.config import Settings, load_settings
from sftl.errors import SftlError

_PIPE_WIDTH = 100_000  # the "terminal width" off a terminal: tables keep their natural width, nothing wraps

# The table of exit codes is sftl.errors' docstring (and the README's "Exit codes", and `sftl --help`).
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NO_RESULT = 8  # the command ran but had nothing to give (e.g. locate: skipped)
EXIT_INTERRUPTED = 130

COMMAND_MODULES = (
    "intake",
    "model",
    "screening",
    "sources_cmd",
    "locate",
    "replay_cmd",
    "evaluation",
    "fuzz",
    "nansearch",
    "triage",
    "comment",
    "history",
    "doctor",
)


@dataclass
class Context:
    """What a handler gets: settings and the two output streams (stdout for data, stderr for people)."""

    settings: Settings
    out: IO[str] = field(default_factory=lambda: sys.stdout)
    err: IO[str] = field(default_factory=lambda: sys.stderr)

    def print_json(self, obj: Any) -> None:
        """One write of the whole object (never half of one), ASCII-escaped where stdout cannot encode the text."""
        encoding = (getattr(self.out, "encoding", None) or "utf-8").lower().replace("_", "-")
        text = json.dumps(obj, indent=2, ensure_ascii=not encoding.startswith("utf"), sort_keys=False)
        self.out.write(text + "\n")

    def console(self, stderr: bool = False) -> Any:
        """A rich console on stdout or stderr; off a terminal (a pipe, a file) lines are never wrapped or cut."""
        from rich.console import Console

        stream = self.err if stderr else self.out
        if self.is_terminal(stream):
            return Console(file=stream, highlight=False, soft_wrap=False)
        return Console(file=stream, highlight=False, soft_wrap=True, width=_PIPE_WIDTH)

    def progress_bar(self, *columns: Any) -> Any:
        """A rich progress bar on stderr with these columns, drawn only on a terminal and gone when done."""
        from rich.progress import Progress

        console = self.console(stderr=True)
        return Progress(*columns, console=console, transient=True, disable=not console.is_terminal)

    @staticmethod
    def is_terminal(stream: IO[str]) -> bool:
        isatty = getattr(stream, "isatty", None)
        try:
            return bool(isatty and isatty())
        except ValueError:  # a closed stream
            return False


def positive_int(text: str) -> int:
    """argparse type for counts that must be at least 1 (--top, --jobs, ...)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


_FRAMEWORK_DISTRIBUTIONS = (
    ("torch", ("torch",)),
    ("tensorflow", ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly")),
)


def version_text() -> str:
    """sftl's version, Python's, and each installed framework's, read from package metadata (nothing imported)."""
    import platform
    from importlib import metadata

    parts = [f"sftl {__version__}", f"Python {platform.python_version()}"]
    for name, dists in _FRAMEWORK_DISTRIBUTIONS:
        for dist in dists:
            try:
                parts.append(f"{name} {metadata.version(dist)}" + (f" ({dist})" if dist != name else ""))
                break
            except metadata.PackageNotFoundError:
                continue
        else:
            parts.append(f"{name} not installed")
    return ", ".join(parts)


class _Version(argparse.Action):
    """--version on one line, never wrapped (argparse's own action wraps at the terminal width)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        sys.stdout.write(version_text() + "\n")
        parser.exit(0)


_FRAMEWORK_TREE_NAMES = frozenset({"torch", "aten", "c10", "caffe2", "torchgen", "tensorflow", "tensorflow_core", "tsl", "xla"})


def check_source_root(text: str, flag: str = "--source-root") -> str:
    """`text` when it is a directory holding a PyTorch or TensorFlow tree (a checkout, an unpacked source
    package, site-packages, or the package folder itself); else InputError with the reason. Every localizer
    ranked files of an empty or unrelated folder as if they were the framework's."""
    import os
    from pathlib import Path

    from sftl.errors import InputError

    root = Path(text).expanduser()
    if not root.is_dir():
        raise InputError(f"{flag} {text} is not a directory")
    if root.resolve().name in _FRAMEWORK_TREE_NAMES:
        return text
    try:
        next(root.iterdir())
    except StopIteration:
        raise InputError(f"{flag} {text} is empty; give a PyTorch or TensorFlow source tree") from None
    except OSError as exc:
        raise InputError(f"{flag} {text} cannot be read: {exc.strerror or exc}") from None
    base = len(root.parts)
    for seen, (here, dirs, _files) in enumerate(os.walk(root)):
        if _FRAMEWORK_TREE_NAMES.intersection(dirs) or seen > 5000:  # a vast tree: let the localizer judge
            return text
        if len(Path(here).parts) - base >= 3:
            dirs.clear()  # the framework's folders sit near the top of any tree that holds it
        else:
            dirs[:] = [d for d in dirs if not d.startswith(".")]
    raise InputError(f"{flag} {text} holds no PyTorch or TensorFlow tree (no torch/, aten/, c10/ or tensorflow/ "
                     "folder in its first levels); give the framework's checkout, source package or site-packages")


def import_quietly(module: str) -> None:
    """Import a framework with its native start-up lines (absl's 'All log messages before absl::InitializeLog()',
    oneDNN's and the CPU-feature notes, written by C++ to fd 2) kept off stderr; `--debug` skips this. A failed
    import is left for the caller to meet with its own message."""
    import importlib
    import os
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                importlib.import_module(module)
            except Exception:  # noqa: BLE001 - reported later, where the framework is used
                pass
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)


def hidden_alias(parser: argparse.ArgumentParser, old: str, dest: str, **kwargs: Any) -> None:
    """Keep an old spelling of an option working without listing it (`fuzz --workers` is now `--jobs`)."""
    parser.add_argument(old, dest=dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kwargs)


def add_common(parser: argparse.ArgumentParser) -> None:
    """Options every command accepts, before or after the command name."""
    parser.add_argument("--home", default=argparse.SUPPRESS, help="state directory (env SFTL_HOME)")
    parser.add_argument(
        "--api-url", default=argparse.SUPPRESS, help="GitHub API root (env SFTL_GITHUB_API_URL)"
    )
    parser.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show Python tracebacks of internal errors"
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        default=argparse.SUPPRESS,
        help="use only the store and the on-disk cache; never touch the network",
    )


UNCONFINED_HELP = ("run report code even where this machine cannot confine it (DANGEROUS: a hostile snippet may "
                   "then write your files, read your tokens, reach the network); said on stderr and recorded in "
                   "the stored replay")


def add_unconfined(parser: argparse.ArgumentParser) -> None:
    """The explicit, loud opt-in to run report code where `sftl doctor` says a guard is missing."""
    parser.add_argument("--unconfined", action="store_true", help=UNCONFINED_HELP)


def require_confinement(ctx: Context, unconfined: bool, gpu: bool = False, limits: Any = None) -> None:
    """Before any work: refuse (ConfinementError, exit 7) where report code cannot run confined; with
    --unconfined, say loudly on stderr what is missing instead."""
    from sftl.sandbox import Limits, check_confinement, guards

    limits = limits or Limits()
    caps = check_confinement(ctx.settings, limits, gpu=gpu, unconfined=unconfined)
    missing = [g.name for g in guards(caps, limits, gpu) if not g.held]
    if missing:
        ctx.err.write(f"sftl: WARNING: --unconfined: running report code WITHOUT {', '.join(missing)}\n")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2, no usage dump
        self.exit(EXIT_USAGE, f"sftl: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    from sftl.errors import EXIT_CODES

    parser = _Parser(
        prog="sftl",
        description="Bug-report triage and fault localization for PyTorch and TensorFlow.",
        epilog="exit codes (every command):\n" + "\n".join(f"  {code:<4} {what}" for code, what in EXIT_CODES.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="print sftl's, Python's and the frameworks' versions")
    add_common(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"sftl.cli.{name}")
        module.register(sub)
    return parser


def make_settings(args: argparse.Namespace) -> Settings:
    return load_settings(
        home=getattr(args, "home", None),
        api_url=getattr(args, "api_url", None),
        offline=getattr(args, "offline", None),
    )


def main(argv: Sequence[str] | None = None, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    parser = build_parser()
    try:
        # argparse writes help to stdout and usage errors to stderr: send both where the caller asked
        with contextlib.redirect_stdout(out or sys.stdout), contextlib.redirect_stderr(err or sys.stderr):
            args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits for --help/--version/usage errors
        return int(exc.code or 0)
    handler: Callable[[argparse.Namespace, Context], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(out or sys.stdout)
        return EXIT_USAGE
    ctx_err = err or sys.stderr
    notes = _notes_to(ctx_err)
    github = sys.modules.get("sftl.github")  # loaded by an earlier command in this process (tests, scripts)
    if github is not None:
        github.forget_unreachable_hosts()
    try:
        ctx = Context(settings=make_settings(args), out=out or sys.stdout, err=ctx_err)
        from sftl.cli.sources_cmd import show_downloads

        show_downloads(ctx_err)  # source downloads: a size notice, and a progress bar on a terminal
        return handler(args, ctx)
    except SftlError as exc:
        ctx_err.write(f"sftl: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        ctx_err.write("sftl: interrupted; everything stored so far is kept\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # a bug in sftl: still one line for the user; the traceback only on request
        if getattr(args, "debug", False):
            raise
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        ctx_err.write(f"sftl: internal error: {type(exc).__name__}: {first} (rerun with --debug for the traceback)\n")
        return EXIT_ERROR
    finally:
        logging.getLogger("sftl").removeHandler(notes)


def _notes_to(stream: IO[str]) -> logging.Handler:
    """Library notes (a wait for the network, a fallback to the stored copy) as `sftl: ...` lines on stderr."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("sftl: %(message)s"))
    logger = logging.getLogger("sftl")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return handler


def entry() -> None:
    """Console-script entry point."""
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    for stream in (sys.stdout, sys.stderr):  # PYTHONIOENCODING=ascii: a title in Greek prints as ?, never crashes
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="replace")
    sys.exit(main())
