"""action.yml and the README's workflow: a composite action that installs sftl, caches its release sources and posts one comment, never replaying unconfined."""

from __future__ import annotations

import re
from pathlib import Path

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
    assert action["inputs"]["issue"]["default"] == "${{ github.event.issue.html_url }}"


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
