"""action.yml and the README's workflow: a composite action that installs sftl, caches its release sources and posts one comment, never replaying unconfined."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def _action() -> dict:
    return yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))


def test_the_action_installs_caches_and_posts_on_the_events_issue() -> None:
    action = _action()
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    uses = [s.get("uses", "") for s in steps]
    assert any(u.startswith("actions/cache@") for u in uses)
    cache = next(s for s in steps if s.get("uses", "").startswith("actions/cache@"))
    assert cache["with"]["path"].endswith("sftl-home/cache/sources")  # what `sftl sources` keeps: the big downloads
    install = next(s for s in steps if "pip install" in s.get("run", ""))
    post = next(s for s in steps if "sftl \"${args[@]}\"" in s.get("run", ""))
    assert steps.index(install) < steps.index(post) and steps.index(cache) < steps.index(post)
    assert "args=(comment \"$ISSUE\" --post" in post["run"]
    assert post["env"]["SFTL_HOME"].endswith("sftl-home") and "github.api_url" in post["env"]["SFTL_GITHUB_API_URL"]
    # the event's issue as OWNER/REPO#N (an Enterprise URL names another host than github.com)
    assert post["env"]["EVENT_ISSUE"] == "${{ github.event.issue.number }}"
    assert 'ISSUE="$GITHUB_REPOSITORY#$EVENT_ISSUE"' in post["run"]


def test_the_token_reaches_only_the_posting_step_and_replay_waits_for_confinement() -> None:
    steps = _action()["runs"]["steps"]
    with_token = [s for s in steps if "GITHUB_TOKEN" in str(s.get("env", {}))]
    assert len(with_token) == 1 and "pip install" not in with_token[0]["run"]
    script = with_token[0]["run"]
    # --replay is added only behind `sftl doctor` (exit 0 only where report code runs confined, environment hidden)
    assert re.search(r'if sftl doctor >/dev/null 2>&1; then args\+=\(--replay\)', script)
    assert "--unconfined" not in script and script.count("--replay") == 1


def test_the_readme_workflow_is_ready_to_copy() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(# \.github/workflows/sftl\.yml\n.*?)```", readme, re.S)
    assert block, "README.md shows no workflow"
    flow = yaml.safe_load(block.group(1))
    on = flow.get("on", flow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert on == {"issues": {"types": ["opened", "edited"]}}
    assert flow["permissions"] == {"issues": "write"}
    assert "github.event.issue.number" in flow["concurrency"]["group"]  # one run per issue: no two comments racing
    [step] = flow["jobs"]["comment"]["steps"]
    assert step["uses"].split("@")[0].endswith("/sftl")
    assert set(step.get("with", {})) <= set(_action()["inputs"])


def _post_script() -> str:
    return next(s for s in _action()["runs"]["steps"] if "sftl \"${args[@]}\"" in s.get("run", ""))["run"]


@pytest.mark.parametrize(
    ("comment_exit", "doctor_exit", "replay", "job_exit", "ran"),
    [
        (0, 0, "false", 0, "comment o/r#7 --post --top 3"),
        (0, 0, "true", 0, "comment o/r#7 --post --top 3 --replay"),  # confinement here: replayed
        (0, 7, "true", 0, "comment o/r#7 --post --top 3"),  # none: commented without a replay
        (8, 0, "false", 0, "comment o/r#7 --post --top 3"),  # not ranked, locked, gone: nothing to do, not a failure
        (10, 0, "false", 0, "comment o/r#7 --post --top 3"),
        (11, 0, "false", 0, "comment o/r#7 --post --top 3"),
        (9, 0, "false", 9, "comment o/r#7 --post --top 3"),  # a token that cannot write fails the job: fix the workflow
        (3, 0, "false", 3, "comment o/r#7 --post --top 3"),
    ],
)
def test_the_posting_step_runs_as_written(tmp_path: Path, comment_exit: int, doctor_exit: int, replay: str,
                                          job_exit: int, ran: str) -> None:
    """The step's own bash, with a stand-in `sftl` on PATH that records its arguments and exits as told."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "sftl"
    fake.write_text('#!/bin/bash\nif [ "$1" = doctor ]; then exit "$DOCTOR_EXIT"; fi\n'
                    'echo "$*" >> "$LOG"\nexit "$COMMENT_EXIT"\n')
    fake.chmod(0o755)
    log = tmp_path / "log"
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(log), "DOCTOR_EXIT": str(doctor_exit),
           "COMMENT_EXIT": str(comment_exit), "GITHUB_REPOSITORY": "o/r", "EVENT_ISSUE": "7", "ISSUE": "",
           "TOP": "3", "APPLY_LABELS": "false", "REPLAY": replay, "GITHUB_TOKEN": "t"}
    done = subprocess.run(["bash", "-e", "-c", _post_script()], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == job_exit, done.stderr
    assert log.read_text().splitlines() == [ran]
