"""The real Claude Code CLI calls the broker's tools over MCP during a real run.

The scripted model asks for a plugin-registered output tool three times (one write admitted,
one outside the declared scope, one over the count) and then for mcp__crucible__distress: the
refused writes fail only their calls, each leaving an output_refused event, and the run goes
on to park on the distress.
"""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import pytest

from crucible_core.broker.tools import BrokerTool, ToolCall
from crucible_core.hookspecs import hookimpl
from crucible_core.plugins import Plugins, load_plugins
from crucible_core.run.budget import Budget
from crucible_core.session.entry import execute
from crucible_core.session.request import SessionRequest
from crucible_core.session_log import read_events
from tests.fakes.anthropic_api import FakeAnthropic, Script, call, say
from tests.harness_claude.support import agent_env, write_domain

pytestmark = pytest.mark.claude_cli

STANDARD = ["core", "world_git", "judge_command", "backend_local", "harness_claude", "broker_mcp", "distress"]


def comment_plugin(posted: list[tuple[str | None, str]]) -> types.ModuleType:
    """A plugin with one mediated tool: it 'posts' a tracker comment after the mediation point admits it."""

    def post(call: ToolCall) -> dict[str, Any]:
        target = call.admit(call.text("item", required=False) or None)
        posted.append((target, call.text("body")))
        return {"status": "posted", "item": target}

    module = types.ModuleType("comment_plugin")

    def crucible_register_broker_tools(register: Any) -> None:
        register(
            "post_comment",
            BrokerTool(
                "post_comment",
                "Comment on a tracker item.",
                post,
                {"type": "object", "properties": {"item": {"type": "string"}, "body": {"type": "string"}}},
                output_kind="tracker-comment",
            ),
        )

    module.crucible_register_broker_tools = hookimpl(crucible_register_broker_tools)  # type: ignore[attr-defined]
    return module


def plugins_with(module: types.ModuleType) -> Plugins:
    plugins = load_plugins(names=STANDARD)
    plugins.register_module(module, name="comment", distribution="crucible-plugin-comment", version="0")
    return plugins


def test_the_cli_reaches_the_broker_and_mediated_writes_are_bounded(
    fake: FakeAnthropic, claude_cli: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRUCIBLE_CLAUDE_BIN", str(claude_cli))
    fake.script = Script(
        [
            call("mcp__crucible__post_comment", item="PROJ-7", body="first finding"),
            call("mcp__crucible__post_comment", item="OTHER-1", body="outside the scope"),
            call("mcp__crucible__post_comment", item="PROJ-8", body="over the count"),
            call("mcp__crucible__distress", severity="error", reason="the rig is down", evidence=["503"]),
            say("Paged a human."),
        ]
    )
    domain = tmp_path / "domain"
    manifest = write_domain(
        domain, agent_env(fake, tmp_path / "home", ANTHROPIC_API_KEY="sk-ant-api03-broker-e2e-0")
    )
    with manifest.open("a") as handle:
        handle.write('\n[outputs.tracker-comment]\ncount = 1\ntarget = { open = { scope = "PROJ-*" } }\n')
    posted: list[tuple[str | None, str]] = []

    result = execute(
        plugins_with(comment_plugin(posted)),
        SessionRequest(manifest=manifest, budget=Budget(iterations=1), ui="headless", max_park=1.0),
    )

    events = list(read_events(domain / "state" / "session.jsonl"))
    assert posted == [("PROJ-7", "first finding")]  # only the admitted write happened
    admitted = [e for e in events if e["kind"] == "output_admitted"]
    assert [(e["output_kind"], e["target"], e["used"]) for e in admitted] == [
        ("tracker-comment", "PROJ-7", 1)
    ]
    refused = [e for e in events if e["kind"] == "output_refused"]
    assert [(e["requested"], e["bound"]) for e in refused] == [
        ("OTHER-1", "[outputs.tracker-comment].target = PROJ-*"),
        ("PROJ-8", "[outputs.tracker-comment].count = 1"),
    ]
    # the agent read each refusal as its tool's error, naming the bound
    results = [e for e in events if e["kind"] == "broker_result"]
    assert [(e["tool"], e["ok"]) for e in results] == [
        ("post_comment", True),
        ("post_comment", False),
        ("post_comment", False),
        ("distress", True),
    ]
    assert "[outputs.tracker-comment].count" in results[2]["error"]
    tool_results = [
        json.dumps(block.get("content"))
        for request in fake.message_requests()
        for message in request.body["messages"]
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    assert any("outside [outputs.tracker-comment].target" in text for text in tool_results)
    # the refusals did not end the run: the turn finished, was judged, and the distress parked it
    assert [e["ok"] for e in events if e["kind"] == "turn"] == [True]
    waits = [e for e in events if e["kind"] == "approval_wait"]
    assert waits and waits[0]["handle"] == "distress"
    # the park outlived --max-park, which answers the distress as denied: the run stops for a human
    assert result.outcome == "escalated", result.reason
    # the agent was told what it has, from the same declaration check prints
    prompt = next(r.body for r in fake.message_requests() if r.body.get("tools"))
    assert "tracker-comment: at most 1, open within PROJ-* (declared)" in json.dumps(prompt)
    assert "mcp__crucible__post_comment" in json.dumps(prompt)
