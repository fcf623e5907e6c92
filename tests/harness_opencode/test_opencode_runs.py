"""Whole `crucible run`s with harness = "opencode": the real OpenCode CLI against the scripted endpoint."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from crucible_core.plugins import load_plugins
from crucible_core.run.budget import Budget
from crucible_core.run.runner import RunRequest, execute
from crucible_core.session_log import read_events
from tests.cli_support import crucible_env, run_crucible
from tests.fakes.anthropic_api import Script, call, say
from tests.fakes.openai_chat import FakeOpenAIChat
from tests.harness_endpoint.support import (
    PER_CALL,
    agent_events,
    assert_no_secret_written,
    edit_script,
    endpoint_env,
    write_domain,
)

pytestmark = pytest.mark.opencode_cli

API_KEY = "sk-proj-canary-opencode-key-7f3a9c1e5b"
ENV_SECRET = "canary-env-value-Q9xZ7w2L"  # no secret shape: only its exact value gives it away
SHAPED = "sk-proj-canary-reply-4d8e2b6a0c99"  # never handed out: caught by its shape


def run(manifest: Path, cli: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # TMPDIR: the turn's home lives there while the turn runs; nothing may be left behind.
    env = crucible_env(CRUCIBLE_OPENCODE_BIN=str(cli), TMPDIR=str(tmp))
    return run_crucible("--manifest", manifest, "--ui", "headless", *args, env=env, timeout=600)


def test_the_counter_keeps_an_opencode_edit_with_its_events_and_cost_and_leaks_no_secret(
    fake: FakeOpenAIChat, opencode_cli: Path, tmp_path: Path
) -> None:
    domain = tmp_path / "domain"
    value = domain / "workspace" / "value.txt"
    edits = edit_script("opencode", value)
    fake.script = Script(
        [
            call("bash", command='echo "token is $CANARY_TOKEN"', description="show the token"),
            *edits.replies[:2],
            say(f"Done. The token was {ENV_SECRET}; a key: {SHAPED}; the api key {API_KEY}."),
        ]
    )
    env = endpoint_env(fake, OPENAI_API_KEY=API_KEY, CANARY_TOKEN=ENV_SECRET)
    manifest = write_domain(domain, "opencode", env)
    tmp = tmp_path / "tmp"
    tmp.mkdir()

    done = run(manifest, opencode_cli, tmp, "--iterations", "1")
    assert done.returncode == 0, done.stderr

    events = list(read_events(domain / "state" / "session.jsonl"))
    [start] = [e for e in events if e["kind"] == "start"]
    assert start["harness"] == "opencode"
    rows = [(e["row"]["decision"], e["row"]["score"]) for e in events if e["kind"] == "row"]
    assert rows == [("baseline", 1), ("keep", 2)]
    assert value.read_text() == "2\n"
    agent = agent_events(events)
    assert agent[0]["kind"] == "init" and agent[0]["harness"] == "opencode" and agent[0]["model"] == "gpt-4.1"
    assert [e["name"] for e in agent if e["kind"] == "tool" and "input" in e] == ["bash", "read", "edit"]
    [tokens] = [e for e in agent if e["kind"] == "tokens"]
    assert (tokens["input"], tokens["output"]) == (4 * 1200, 4 * 80)
    [result] = [e for e in agent if e["kind"] == "result"]
    assert not result["is_error"] and result["turns"] == 4
    [turn] = [e for e in events if e["kind"] == "turn"]
    assert turn["ok"] and turn["cost"] == pytest.approx(4 * PER_CALL) == tokens["cost_usd"]

    # The model really got the key and the secret (so the scan below is not vacuous) ...
    steps = fake.chat_requests()
    assert steps and all(r.headers["authorization"] == f"Bearer {API_KEY}" for r in steps)
    assert ENV_SECRET in json.dumps(steps[-1].body["messages"])
    # ... and no file the run wrote, nor its output, holds any of them: the evidence is masked.
    assert_no_secret_written(domain, (API_KEY, ENV_SECRET, SHAPED), done.stdout, done.stderr)
    bash_result = next(e for e in agent if e["kind"] == "tool" and "result" in e)
    assert "token is [REDACTED]" in bash_result["result"]
    # The turn's home (opencode's config, database and the export) did not outlive the turn.
    assert list(tmp.iterdir()) == []


def test_a_turn_without_a_key_is_refused_before_anything_is_spent(
    fake: FakeOpenAIChat, opencode_cli: Path, tmp_path: Path
) -> None:
    manifest = write_domain(tmp_path / "domain", "opencode", {"OPENAI_BASE_URL": fake.base_url})
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    done = run(manifest, opencode_cli, tmp, "--iterations", "1")
    assert done.returncode == 4, done.stderr
    assert (
        "OPENAI_BASE_URL names an endpoint but OPENAI_API_KEY is not set: set it in [agent].env"
        in done.stderr
    )
    assert not (tmp_path / "domain" / "state" / "session.jsonl").exists()
    assert fake.requests == []
    check = run_crucible(
        "check", "--manifest", manifest, env=crucible_env(CRUCIBLE_OPENCODE_BIN=str(opencode_cli))
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
            ]
        ),
        RunRequest(manifest=manifest, budget=Budget(iterations=1), ui="headless", max_park=1.0),
    )

    events = list(read_events(domain / "state" / "session.jsonl"))
    calls = [(e["tool"], e["ok"]) for e in events if e["kind"] == "broker_result"]
    assert calls == [("distress", True)]
    assert [e["name"] for e in agent_events(events) if e["kind"] == "tool" and "input" in e] == [
        "crucible_distress"
    ]
    waits = [e for e in events if e["kind"] == "approval_wait"]
    assert waits and waits[0]["handle"] == "distress"
    assert result.exit.value == "escalated", result.reason
    # the agent was offered the broker's tools over MCP, from the server crucible started
    tools = {t["function"]["name"] for t in fake.chat_requests()[0].body["tools"]}
    assert {"crucible_distress", "crucible_escalate"} <= tools
