"""What sftl's issue comment says: suspects, functions, replay verdict, low confidence, who to ask; and that nothing a report carries renders or pings."""

from __future__ import annotations

from pathlib import Path

from sftl.comment import MARKER, code_span, escape_markdown, find_marked, labels_to_apply, render_comment
from sftl.model import (
    Category,
    Comment,
    Device,
    Environment,
    Extraction,
    Issue,
    Localization,
    Outcome,
    Replay,
    ReplayEnvironment,
    ReplayRun,
    Report,
    Screening,
    Side,
    Suspect,
    SuspectFunction,
)
from sftl.sources.owners import Route, parse_codeowners, parse_labeler, routes_for
from sftl.sources.providers import LocalTree

HOSTILE = "<img src=x onerror=alert(1)> @everyone see #1 [click](http://evil) **now** `x` | col"


def _report(outcome: Outcome = Outcome.LOCATED, reason: str = "3 candidate files ranked", replay: Replay | None = None,
            suspects: tuple[Suspect, ...] | None = None) -> Report:
    issue = Issue("o/r", 7, "t", "b")
    extraction = Extraction(None, None, Environment("pytorch", "2.13.0"))
    screening = Screening(Category.MME, {"mme": 1.0, "gcrde": 0.0, "other": 0.0})
    if suspects is None:
        suspects = (
            Suspect("torch/fx/graph_module.py", 0.57, Side.PYTHON, "traceback frame 3 (_copy_attr); defines GraphModule",
                    functions=(SuspectFunction("_copy_attr", 290, 310, 1.2, "the frame that asked"),
                               SuspectFunction("GraphModule.__init__", 560, 600, 0.4, "calls _copy_attr"),
                               SuspectFunction("GraphModule.recompile", 700, 760, 0.1, "x"),
                               SuspectFunction("GraphModule.code", 800, 810, 0.0, "never shown: fourth"))),
            Suspect("torch/nn/modules/module.py", -0.7, Side.PYTHON, "defines Module"),
        )
    return Report(issue, extraction, screening, Localization("sftl", suspects, outcome, reason), replay)


def test_the_comment_names_category_release_suspects_and_their_first_functions() -> None:
    body = render_comment(_report(), release="pytorch 2.13.0", top=3, functions=3)
    assert body.startswith(MARKER + "\n")
    assert "missing-module error (`mme`, score 1.00)" in body and "**Read against:** pytorch 2.13.0" in body
    assert "1. `torch/fx/graph_module.py` [python] (score 0.57): traceback frame 3 (\\_copy_attr)" in body
    assert "   - `_copy_attr` (lines 290–310): the frame that asked" in body
    assert "`GraphModule.recompile`" in body and "GraphModule.code" not in body  # the first three only
    assert "2. `torch/nn/modules/module.py`" in body
    assert "Low confidence" not in body and "Replay" not in body  # no replay ran: no replay line


def test_low_confidence_abstention_and_skipped_are_said_plainly() -> None:
    low = render_comment(_report(reason="low confidence: 0.12 that the first file is right (below 0.40, ...); 9 files"))
    assert "> **Low confidence:** sftl is not sure of these files" in low and "0.12 that the first file is right" in low
    assert "**Suspects**" in low  # still shown, as leads
    none = render_comment(_report(Outcome.ABSTAINED, "no confident suspect: nothing names the op", suspects=()))
    assert "**No confident suspect.** no confident suspect: nothing names the op" in none and "**Suspects**" not in none
    skipped = render_comment(_report(Outcome.SKIPPED, "no sources of pytorch 1.2 offline", suspects=()))
    assert "**Not ranked:** no sources of pytorch 1.2 offline" in skipped


def test_a_hostile_snippet_cannot_print_into_the_comment() -> None:
    """The replay's verdict and exception line are shown, quoted; its stdout and stderr never."""
    run = ReplayRun(Device.CPU, Outcome.REPRODUCED, exception="AttributeError", message=HOSTILE + "\n## fake heading",
                    stdout_tail="PWNED-STDOUT @maintainer", stderr_tail="PWNED-STDERR")
    replay = Replay(ReplayEnvironment("pytorch", "2.13.0", "3.11", "venv", "pt213"), (run,), Outcome.REPRODUCED,
                    "reproduced: " + HOSTILE)
    body = render_comment(_report(replay=replay))
    assert "PWNED" not in body and "reproduced: <img" not in body
    line = next(x for x in body.splitlines() if x.startswith("- **Replay:**"))
    assert line.startswith("- **Replay:** `reproduced` in pytorch 2.13.0 (cpu): ``AttributeError: <img")
    assert line.endswith("``") and "\n## fake" not in body  # one line, inside one code span
    assert line.count("``") == 2  # the span's own fence is longer than any backtick run inside it


def test_escaping_leaves_no_markup_mention_or_reference() -> None:
    text = escape_markdown(HOSTILE)
    assert "<img" not in text and "&lt;img" in text
    assert "@everyone" not in text and "@\u2060everyone" in text  # seen as '@everyone', links no one
    assert "#1" not in text and "\\[click\\]" in text and "\\*\\*now\\*\\*" in text and "\\|" in text
    assert escape_markdown("a\nb\r\nc\x1b[31m") == "a b c \\[31m"  # the escape character is gone
    assert code_span("a `b` c") == "``a `b` c``" and code_span("`x") == "`` `x ``"
    assert code_span("x" * 500, limit=10) == "`" + "x" * 9 + "…`"


def test_the_marker_is_found_whatever_a_maintainer_edited_around_it() -> None:
    ours = Comment(5, "github-actions[bot]", "Edited by a maintainer: see #12.\n\n" + MARKER + "\nold text")
    later = Comment(9, "github-actions[bot]", MARKER + " a copy someone pasted later")
    assert find_marked([Comment(1, "a", "me too"), ours, later]) == ours
    assert find_marked([Comment(1, "a", "<!-- sftl is great -->")]) is None


def _tree(root: Path, files: dict[str, str]) -> LocalTree:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    return LocalTree(root, "pytorch", "2.13.0")


CODEOWNERS = """\
# the last matching line wins, as on GitHub
*                       @org/core
/torch/fx/              @alice @bob   # fx
torch/nn/modules/*.py   @carol
**/linear.py            @dan
/torch/fx/passes/       @erin
docs/*                  @writer
"""

LABELER_V5 = """\
"module: fx":
- changed-files:
  - any-glob-to-any-file: ['torch/fx/**', '!torch/fx/passes/**']
"module: nn":
- changed-files:
  - any-glob-to-any-file: 'torch/nn/**'
- head-branch: ['^nn-']
"""


def test_codeowners_rules_follow_githubs_precedence_and_globs() -> None:
    rules = parse_codeowners(CODEOWNERS)
    assert [r.pattern for r in rules] == ["*", "/torch/fx/", "torch/nn/modules/*.py", "**/linear.py", "/torch/fx/passes/",
                                          "docs/*"]
    tree_paths = {
        "torch/fx/graph_module.py": ("/torch/fx/", ("@alice", "@bob")),
        "torch/fx/passes/split.py": ("/torch/fx/passes/", ("@erin",)),
        "torch/nn/modules/module.py": ("torch/nn/modules/*.py", ("@carol",)),
        "torch/nn/modules/linear.py": ("**/linear.py", ("@dan",)),
        "aten/src/ATen/native/Foo.cpp": ("*", ("@org/core",)),
        "docs/a/b.md": ("*", ("@org/core",)),  # docs/* owns docs' own files, not deeper ones
        "docs/b.md": ("docs/*", ("@writer",)),
    }
    from sftl.sources.owners import owners_of

    for path, (pattern, owners) in tree_paths.items():
        rule = owners_of(rules, path)
        assert rule is not None and (rule.pattern, rule.owners) == (pattern, owners), path


def test_labeler_maps_of_both_versions() -> None:
    v5 = parse_labeler(LABELER_V5)
    assert sorted(v5) == ["module: fx", "module: nn"]
    assert any(g.match("torch/fx/graph_module.py") for g in v5["module: fx"])
    assert not any(g.match("torch/fx/graph_module.py") for g in v5["module: nn"])
    v4 = parse_labeler("docs:\n- docs/**\n- '*.md'\nci:\n- any: ['.github/**']\n")
    assert any(g.match("docs/x/y.rst") for g in v4["docs"]) and any(g.match(".github/workflows/a.yml") for g in v4["ci"])
    assert parse_labeler("[not: a map") == {} and parse_labeler("- a list") == {}


def test_routes_come_from_the_trees_files_and_nothing_is_guessed_without_them(tmp_path: Path) -> None:
    paths = ["torch/fx/graph_module.py", "torch/nn/modules/module.py", "third/x.py"]
    both = _tree(tmp_path / "a", {".github/CODEOWNERS": CODEOWNERS.replace("*                       @org/core\n", ""),
                                  ".github/labeler.yml": LABELER_V5, "torch/fx/graph_module.py": ""})
    routes = routes_for(both, paths)
    assert routes == (
        Route("torch/fx/graph_module.py", "/torch/fx/", ("@alice", "@bob"), ("module: fx",)),
        Route("torch/nn/modules/module.py", "torch/nn/modules/*.py", ("@carol",), ("module: nn",)),
    )  # third/x.py: no owner, no label -> left out
    only_owners = _tree(tmp_path / "b", {"CODEOWNERS": "/torch/ @t\n"})
    assert routes_for(only_owners, paths[:1]) == (Route("torch/fx/graph_module.py", "/torch/", ("@t",), ()),)
    neither = _tree(tmp_path / "c", {"torch/fx/graph_module.py": "", "README.md": "owners: @someone"})
    assert routes_for(neither, paths) == ()


def test_who_to_ask_is_rendered_without_pinging_and_labels_only_when_confident() -> None:
    routes = (Route("torch/fx/graph_module.py", "/torch/fx/", ("@alice", "@org/fx"), ("module: fx",)),
              Route("torch/nn/modules/module.py", "", (), ("module: nn", "triage")))
    body = render_comment(_report(), routes)
    assert "- owners of `/torch/fx/`: `@alice`, `@org/fx`; label: `module: fx` (suspect 1)" in body
    assert "- labels: `module: nn`, `triage` (suspect 2)" in body
    same = (routes[0], Route("torch/nn/modules/module.py", "/torch/fx/", ("@alice", "@org/fx"), ("module: fx",)))
    assert "- owners of `/torch/fx/`: `@alice`, `@org/fx`; label: `module: fx` (suspects 1, 2)" in render_comment(
        _report(), same)
    assert labels_to_apply(_report(), routes) == ("module: fx", "module: nn", "triage")
    assert labels_to_apply(_report(reason="low confidence: 0.1 ..."), routes) == ()
    assert labels_to_apply(_report(Outcome.ABSTAINED, suspects=()), routes) == ()
