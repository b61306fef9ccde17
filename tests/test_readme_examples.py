"""The README's offline examples (```console blocks, `$ ` commands) run as shown, in order, in one fresh SFTL_HOME.

The rule the README states: every `$ ` line of a ```console block is run with bash in the repository
root; the first non-empty line shown below it must be the first non-empty line the command prints
(stdout, then stderr; `...` in a shown line matches anything); a shown `(exit N)` line is the
expected exit code, else 0. ```sh blocks are not run (they need the network or minutes).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


@dataclass(frozen=True)
class Example:
    line: int  # where the command stands in README.md
    command: str
    shown: tuple[str, ...]  # the output lines shown under it

    @property
    def exit_code(self) -> int:
        for text in self.shown:
            m = re.fullmatch(r"\(exit (\d+)\)", text.strip())
            if m:
                return int(m.group(1))
        return 0

    @property
    def first_line(self) -> str | None:
        return next((t for t in self.shown if t.strip() and not re.fullmatch(r"\(exit \d+\)", t.strip())), None)


def examples(text: str) -> list[Example]:
    """The `$ ` commands of the ```console blocks, with the lines shown under each."""
    out: list[Example] = []
    in_console = False
    current: tuple[int, str, list[str]] | None = None
    for n, line in enumerate(text.split("\n"), 1):
        if line.startswith("```"):
            if in_console and current:
                out.append(Example(current[0], current[1], tuple(current[2])))
                current = None
            in_console = not in_console and line.strip() == "```console"
            continue
        if not in_console:
            continue
        if line.startswith("$ "):
            if current:
                out.append(Example(current[0], current[1], tuple(current[2])))
            current = (n, line[2:], [])
        elif current:
            current[2].append(line)
    return out


def matches(shown: str, printed: str) -> bool:
    pattern = ".*".join(re.escape(part) for part in shown.rstrip().split("..."))
    return re.fullmatch(pattern, printed.rstrip()) is not None


def test_the_readme_shows_offline_examples_of_the_main_commands() -> None:
    commands = [e.command.split()[1] for e in examples(README.read_text(encoding="utf-8"))]
    for name in ("locate", "import", "fetch", "show", "screen", "similar", "replay", "nan-search", "fuzz", "eval",
                 "triage"):
        assert name in commands, f"README.md shows no offline `sftl {name}` example"


def test_the_example_parser_reads_commands_output_and_exit_codes() -> None:
    text = "```sh\n$ not run\n```\n```console\n$ sftl a\nfirst\n(exit 8)\n$ sftl b\n```\n"
    got = examples(text)
    assert [(e.command, e.first_line, e.exit_code) for e in got] == [("sftl a", "first", 8), ("sftl b", None, 0)]
    assert matches("x ...cache: 0", "x /tmp/abc/cache: 0") and not matches("x ...cache: 0", "x cache: 1")


@pytest.mark.slow
def test_every_offline_readme_example_runs_as_shown(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SFTL_", "GITHUB_TOKEN"))}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", SFTL_HOME=str(tmp_path / "home"),
               SFTL_GITHUB_API_URL="http://127.0.0.1:9", SFTL_MAX_RETRIES="0", SFTL_NET_WAIT="0")
    problems = []
    for ex in examples(README.read_text(encoding="utf-8")):
        run = subprocess.run(["bash", "-c", ex.command], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=300)
        printed = [ln for ln in (run.stdout + run.stderr).split("\n") if ln.strip()]
        where = f"README.md:{ex.line}: {ex.command}"
        if run.returncode != ex.exit_code:
            problems.append(f"{where}: exit {run.returncode}, README says {ex.exit_code}\n{run.stderr[-2000:]}")
        elif ex.first_line is not None and not (printed and matches(ex.first_line, printed[0])):
            problems.append(f"{where}: first line {printed[0] if printed else '(nothing)'!r}, README shows "
                            f"{ex.first_line!r}")
    assert not problems, "\n\n".join(problems)
