"""Whole `crucible run`s with harness = "opencode": the real OpenCode CLI against the scripted endpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from crucible_core.plugins import load_plugins
from crucible_core.run.budget import Budget
from crucible_core.session.entry import execute
from crucible_core.session.request import SessionRequest
from crucible_core.session_log import read_events
from tests.cli_support import run_crucible
from tests.fakes.anthropic_api import Script, call, say
from tests.fakes.openai_chat import FakeOpenAIChat
from tests.harness_endpoint.scenarios import counter_kept_without_a_leak, crucible_run, engine_env
from tests.harness_endpoint.support import (
    agent_events,
    endpoint_env,
    write_domain,
)

pytestmark = pytest.mark.opencode_cli


def test_the_counter_keeps_an_opencode_edit_with_its_events_and_cost_and_leaks_no_secret(
    fake: FakeOpenAIChat, opencode_cli: Path, tmp_path: Path
) -> None:
    bash = call("bash", command='echo "token is $CANARY_TOKEN"', description="show the token")
    counter_kept_without_a_leak("opencode", opencode_cli, fake, tmp_path, bash)


def test_a_turn_without_a_key_is_refused_before_anything_is_spent(
    fake: FakeOpenAIChat, opencode_cli: Path, tmp_path: Path
) -> None:
    manifest = write_domain(tmp_path / "domain", "opencode", {"OPENAI_BASE_URL": fake.base_url})
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    done = crucible_run(manifest, "opencode", opencode_cli, tmp, "--iterations", "1")
    assert done.returncode == 4, done.stderr
    assert (
        "OPENAI_BASE_URL names an endpoint but OPENAI_API_KEY is not set: set it in [agent].env"
        in done.stderr
    )
    assert not (tmp_path / "domain" / "state" / "session.jsonl").exists()
    assert fake.requests == []
    check = run_crucible(
        "check", "--manifest", manifest, env=engine_env(CRUCIBLE_OPENCODE_BIN=str(opencode_cli))
    )
    assert check.returncode != 0 and "OPENAI_API_KEY is not set" in check.stdout + check.stderr


def test_opencode_calls_the_brokers_distress_tool_and_the_run_parks_on_it(
    fake: FakeOpenAIChat, opencode_cli: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRUCIBLE_OPENCODE_BIN", str(opencode_cli))
    fake.script = Script(
        [
            call("crucible_distress", severity="error", reason="the rig is down", evidence=["503"]),
            say("Paged a human."),
        ]
    )
    domain = tmp_path / "domain"
    manifest = write_domain(domain, "opencode", endpoint_env(fake))
    manifest.write_text(
        manifest.read_text().replace("[agent.broker]\nenabled = false", "[agent.broker]\nenabled = true")
    )

    result = execute(
        load_plugins(
            names=[
                "core",
                "world_git",
                "judge_command",
                "backend_local",
                "harness_opencode",
                "harness_pi",
                "broker_mcp",
                "distress",
            ]
        ),
        SessionRequest(manifest=manifest, budget=Budget(iterations=1), ui="headless", max_park=1.0),
    )

    events = list(read_events(domain / "state" / "session.jsonl"))
    calls = [(e["tool"], e["ok"]) for e in events if e["kind"] == "broker_result"]
    assert calls == [("distress", True)]
    assert [e["name"] for e in agent_events(events) if e["kind"] == "tool" and "input" in e] == [
        "crucible_distress"
    ]
    waits = [e for e in events if e["kind"] == "approval_wait"]
    assert waits and waits[0]["handle"] == "distress"
    assert result.outcome == "escalated", result.reason
    # the agent was offered the broker's tools over MCP, from the server crucible started
    tools = {t["function"]["name"] for t in fake.chat_requests()[0].body["tools"]}
    assert {"crucible_distress", "crucible_escalate"} <= tools
