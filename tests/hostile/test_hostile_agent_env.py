"""The engine's own credentials never reach an agent turn: a forge token or a record store's keys
exported for the engine are left out of every turn's environment (crucible_engine_credentials)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crucible_core.plugins import load_plugins
from crucible_core.run.budget import Budget
from crucible_core.session.entry import execute
from crucible_core.session.request import SessionRequest
from tests.live_support import domain

# The agent dumps the environment it was given, then makes an ordinary change.
DUMPING_PROPOSER = """#!/bin/sh
env > "$ENV_DUMP"
echo $(( $(cat value.txt) + 1 )) > value.txt
"""

FORGE_TOKEN = "ghp_engineOnlyForgeToken0123456789abcdef"
STORE_KEY = "engineOnlyStoreSecret0123456789abcdefXYZ"
BASE = ["core", "world_git", "judge_command", "backend_local"]


def _agent_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plugins: list[str]) -> str:
    dump = tmp_path / "agent-env.txt"
    manifest = domain(tmp_path, DUMPING_PROPOSER)
    monkeypatch.setenv("GITHUB_TOKEN", FORGE_TOKEN)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", STORE_KEY)
    monkeypatch.setenv("ENV_DUMP", str(dump))
    monkeypatch.setenv("PLAIN_SETTING", "visible")
    execute(
        load_plugins(names=plugins),
        SessionRequest(manifest=manifest, budget=Budget(iterations=1), ui="headless"),
    )
    return dump.read_text()


def test_the_forge_token_and_the_record_keys_never_reach_an_agent_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _agent_env(tmp_path, monkeypatch, [*BASE, "publish_github", "run_records"])
    assert "PLAIN_SETTING=visible" in seen  # the rest of the engine's environment still arrives
    assert FORGE_TOKEN not in seen and "GITHUB_TOKEN" not in seen
    assert STORE_KEY not in seen and "AWS_SECRET_ACCESS_KEY" not in seen


def test_which_names_are_held_back_is_the_installed_plugins_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # without the forge and record plugins nothing claims those names, so nothing holds them back
    seen = _agent_env(tmp_path, monkeypatch, BASE)
    assert f"GITHUB_TOKEN={FORGE_TOKEN}" in seen
