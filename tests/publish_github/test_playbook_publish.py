"""A real playbook run with [publish]: commits beyond its base become one draft PR at its end.

The playbook lane builds the publisher and opens a broker that only mediates (it grants no tool),
so the draft-pr write is admitted like a loop's while the agent task's turn gains no MCP server.
The forge is tests/fakes/github_api.py and a bare repository reached through the real git CLI.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from crucible_core.plugins import load_plugins
from crucible_core.run.budget import Budget
from crucible_core.session.entry import execute
from crucible_core.session.request import SessionRequest
from crucible_core.session_log import read_events
from tests.fakes.github_api import serve_github
from tests.publish_github.test_one_pr_per_run import TOKEN, Remote, forge_env

PLUGINS = [
    "core",
    "world_git",
    "judge_command",
    "backend_local",
    "lane_playbook",
    "task_agent",
    "broker_mcp",
    "publish_github",
]


def playbook(root: Path, change: str, dump: Path) -> Path:
    """A playbook whose agent task dumps its environment and whose command task runs `change`."""
    root.mkdir(parents=True)
    path = root / "crucible.toml"
    path.write_text(
        '[workflow]\ntype = "playbook"\n\n'
        '[workspace]\ndir = "workspace"\nsetup_cmd = "mkdir -p workspace && echo 1 > workspace/value.txt"\n\n'
        '[publish]\npr_repo = "team/counter"\n\n'
        f'[agent]\ngoal = "raise the value"\nbackend = "command"\nagent_cmd = "sh -c \'env > {dump}; echo {{}} > PLAN_TASK_RESULT.json\'"\n\n'
        # a loop with this grant would hand the turn the broker's tools; a playbook's task gets none
        "[agent.broker]\nenabled = true\n\n"
        '[[workflow.task]]\nname = "look"\nkind = "agent"\nprompt = "look at value.txt"\n'
        'isolation = "worktree"\n\n'
        f'[[workflow.task]]\nname = "change"\nkind = "command"\ncommand = "{change}; env > {dump}.task"\n'
    )
    return path


def events_of(manifest: Path) -> list[dict[str, Any]]:
    return list(read_events(manifest.parent / "state" / "session.jsonl"))


def play(manifest: Path) -> None:
    result = execute(
        load_plugins(names=PLUGINS),
        SessionRequest(manifest=manifest, budget=Budget(max_cost=1.0, max_time=300.0), ui="headless"),
    )
    assert result.outcome == "finished", result.reason


def test_a_playbook_with_commits_beyond_its_base_opens_one_draft_pr_at_its_last_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = Remote(tmp_path)
    dump = tmp_path / "agent-env.txt"
    manifest = playbook(tmp_path / "pack", "echo 2 > value.txt", dump)
    with serve_github() as forge:
        forge_env(monkeypatch, forge, remote)
        play(manifest)
    events = events_of(manifest)
    run_id = next(e["run_id"] for e in events if e["kind"] == "start")
    base = next(e["base_commit"] for e in events if e["kind"] == "identity")
    workspace = manifest.parent / "workspace"
    last = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=workspace, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert last != base  # the command task's change is a commit beyond the base
    (pull,) = forge.pulls.values()
    assert pull["draft"] is True and pull["head"]["ref"] == f"crucible/{run_id}"
    assert remote.branches()[f"crucible/{run_id}"] == last
    assert len(forge.calls("POST", "/repos/team/counter/pulls")) == 1
    # admitted through the mediation point, as a loop's draft-pr write is
    admitted = [e for e in events if e["kind"] == "output_admitted"]
    assert [(e["output_kind"], e["target"]) for e in admitted] == [("draft-pr", "team/counter")]
    # the token: the forge saw it; no task, no turn, no log line did
    assert forge.requests and all(r.auth == f"Bearer {TOKEN}" for r in forge.requests)
    assert TOKEN not in dump.read_text() and TOKEN not in Path(f"{dump}.task").read_text()
    assert TOKEN not in (manifest.parent / "state" / "session.jsonl").read_text()
    # the agent task was handed no MCP server: the mediation-only broker grants no tool
    assert "CRUCIBLE_MCP_CONFIG" not in dump.read_text()
    assert not (manifest.parent / "state" / "private" / "broker").exists()


def test_a_playbook_without_commits_beyond_its_base_publishes_nothing_and_pushes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = Remote(tmp_path)
    manifest = playbook(tmp_path / "pack", "true", tmp_path / "agent-env.txt")
    with serve_github() as forge:
        forge_env(monkeypatch, forge, remote)
        play(manifest)
    assert forge.pulls == {}
    assert remote.branches() == {} and remote.updates() == []
    assert not [e for e in events_of(manifest) if e["kind"] == "output_admitted"]


def test_publish_without_the_forge_plugin_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crucible_core.errors import CrucibleError

    manifest = playbook(tmp_path / "pack", "true", tmp_path / "agent-env.txt")
    names = [name for name in PLUGINS if name != "publish_github"]
    with pytest.raises(CrucibleError) as refused:
        execute(
            load_plugins(names=names),
            SessionRequest(manifest=manifest, budget=Budget(max_cost=1.0, max_time=300.0), ui="headless"),
        )
    assert "pip install crucible-plugin-publish-github" in refused.value.render()
    assert not (manifest.parent / "state").exists() and not (manifest.parent / "workspace").exists()
