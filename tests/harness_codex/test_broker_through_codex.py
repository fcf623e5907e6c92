"""The real Codex CLI calls the broker's tools over MCP during a real run: a distress goes through.

The broker plugin serves streamable HTTP on loopback with a per-run bearer; the codex harness
hands it to the CLI as an [mcp_servers] entry of the turn's config.toml.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from crucible_core.plugins import load_plugins
from crucible_core.run.budget import Budget
from crucible_core.session.entry import execute
from crucible_core.session.request import SessionRequest
from crucible_core.session_log import read_events
from tests.fakes.openai_responses import FakeResponses, Script, call, say, tool_names
from tests.harness_codex.support import ReachRecorder
from tests.harness_codex.test_codex_runs import KEY, codex_domain

pytestmark = pytest.mark.codex_cli

STANDARD = ["core", "world_git", "judge_command", "backend_local", "harness_codex", "broker_mcp", "distress"]


def test_a_distress_from_a_codex_turn_reaches_the_broker_and_parks_the_run(
    fake: FakeResponses,
    codex_cli: Path,
    reach: ReachRecorder,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CRUCIBLE_CODEX_BIN", str(codex_cli))
    monkeypatch.setenv("OPENAI_API_KEY_WORK", KEY)
    fake.script = Script(
        [
            call("mcp__crucible__distress", severity="error", reason="the rig is down", evidence=["503"]),
            say("Paged a human."),
        ]
    )
    domain = tmp_path / "domain"
    manifest = codex_domain(domain, fake, reach)

    result = execute(
        load_plugins(names=STANDARD),
        SessionRequest(manifest=manifest, budget=Budget(iterations=1), ui="headless", max_park=1.0),
    )

    offered = tool_names(fake.model_requests()[0].body)
    assert "mcp__crucible__distress" in offered, offered
    events = list(read_events(domain / "state" / "session.jsonl"))
    results = [e for e in events if e["kind"] == "broker_result"]
    assert [(e["tool"], e["ok"]) for e in results] == [("distress", True)]
    agent = [e["event"] for e in events if e["kind"] == "agent"]
    [mcp_call] = [e for e in agent if e["kind"] == "tool" and e.get("name") == "mcp__crucible__distress"]
    assert mcp_call["input"]["reason"] == "the rig is down"
    assert [e["ok"] for e in events if e["kind"] == "turn"] == [True]
    waits = [e for e in events if e["kind"] == "approval_wait"]
    assert waits and waits[0]["handle"] == "distress"
    assert result.outcome == "escalated", result.reason
    # The broker's bearer travelled only in the turn's config file: not to the model, not into the log.
    assert not re.search(r"Bearer (?!\[REDACTED\])", (domain / "state" / "session.jsonl").read_text())
    assert "Bearer" not in json.dumps([r.body for r in fake.model_requests()])
