"""The `anthropic` SDK harness calls the broker's tools over MCP during a real run.

The same scripted model as the Claude CLI test: a plugin-registered output tool three times
(admitted, outside the declared scope, over the count), then mcp__crucible__distress. The
harness lists the broker's tools through the mcp SDK client, offers them to the Messages API as
tool definitions, and calls them; the refused writes fail only their calls and the run parks on
the distress.
"""

from __future__ import annotations

import json
from pathlib import Path

from crucible_core.run.budget import Budget
from crucible_core.session.entry import execute
from crucible_core.session.request import SessionRequest
from crucible_core.session_log import read_events
from tests.fakes.anthropic_api import FakeAnthropic, Script, call, say
from tests.harness_claude.support import agent_env, write_domain
from tests.harness_claude.test_broker_through_cli import comment_plugin, plugins_with


def tool_results(fake: FakeAnthropic) -> list[dict[str, object]]:
    last = fake.message_requests()[-1].body["messages"]
    return [
        block
        for message in last
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


def test_the_sdk_harness_reaches_the_broker_and_mediated_writes_are_bounded(
    fake: FakeAnthropic, tmp_path: Path
) -> None:
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
        domain,
        agent_env(fake, tmp_path / "home", ANTHROPIC_API_KEY="sk-ant-api03-broker-sdk-0"),
        harness="anthropic",
    )
    with manifest.open("a") as handle:
        handle.write('\n[outputs.tracker-comment]\ncount = 1\ntarget = { open = { scope = "PROJ-*" } }\n')
    posted: list[tuple[str | None, str]] = []

    result = execute(
        plugins_with(comment_plugin(posted)),
        SessionRequest(manifest=manifest, budget=Budget(iterations=1), ui="headless", max_park=1.0),
    )

    events = list(read_events(domain / "state" / "session.jsonl"))
    # the broker's tools were offered as tool definitions, with their schemas
    offered = {t["name"]: t for t in fake.message_requests()[0].body["tools"]}
    assert {"read_file", "mcp__crucible__post_comment", "mcp__crucible__distress"} <= set(offered)
    assert offered["mcp__crucible__distress"]["input_schema"]["required"] == ["severity", "reason"]
    assert posted == [("PROJ-7", "first finding")]
    assert [(e["requested"], e["bound"]) for e in events if e["kind"] == "output_refused"] == [
        ("OTHER-1", "[outputs.tracker-comment].target = PROJ-*"),
        ("PROJ-8", "[outputs.tracker-comment].count = 1"),
    ]
    assert [(e["tool"], e["ok"]) for e in events if e["kind"] == "broker_result"] == [
        ("post_comment", True),
        ("post_comment", False),
        ("post_comment", False),
        ("distress", True),
    ]
    # the model read each answer as the tool's result; the refusals as errors naming the bound
    answers = tool_results(fake)
    assert [a["is_error"] for a in answers] == [False, True, True, False]
    assert "PROJ-7" in json.dumps(answers[0]["content"])
    assert "[outputs.tracker-comment].count = 1" in json.dumps(answers[2]["content"])
    assert "suspending" in json.dumps(answers[3]["content"])
    # the refusals did not end the run: the turn finished, and the distress parked it
    assert [e["ok"] for e in events if e["kind"] == "turn"] == [True]
    waits = [e for e in events if e["kind"] == "approval_wait"]
    assert waits and waits[0]["handle"] == "distress"
    assert result.outcome == "escalated", result.reason
    assert "broker tools: mcp__crucible__distress" in json.dumps(fake.message_requests()[0].body)
