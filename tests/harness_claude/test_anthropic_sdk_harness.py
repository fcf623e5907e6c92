"""The `anthropic` harness: the real anthropic SDK streaming from the scripted model server via its base URL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crucible_core.errors import ManifestError
from crucible_core.protocols import FailureClass
from crucible_core.session_log import read_events
from crucible_harness_claude.pricing import Usage, cost_usd
from crucible_harness_claude.sdk_harness import AnthropicHarness
from tests.cli_support import crucible_env, run_crucible
from tests.fakes.anthropic_api import (
    STALL,
    FakeAnthropic,
    Reply,
    Script,
    Text,
    Thinking,
    api_error,
    call,
    say,
)
from tests.harness_claude.support import (
    TEST_KEY,
    Recorder,
    agent_env,
    harness_context,
    make_turn,
    model_env,
    write_domain,
)


@pytest.fixture
def sdk_env(fake: FakeAnthropic, tmp_path: Path) -> dict[str, str]:
    return model_env(fake, tmp_path / "home")


def test_an_edit_turn_through_the_sdk(
    fake: FakeAnthropic, workspace: Path, private_dir: Path, sdk_env: dict[str, str]
) -> None:
    fake.script = Script(
        [
            call("list_dir"),
            call("read_file", path="value.txt"),
            call("edit_file", path="value.txt", old_string="1", new_string="2"),
            call("run_command", command="cat value.txt; echo to-stderr >&2"),
            Reply([Thinking("Checked."), Text("value.txt now holds 2.")]),
        ]
    )
    events = Recorder()
    harness = AnthropicHarness.from_context(harness_context(workspace.parent, private_dir))
    result = harness.run(make_turn(workspace, sdk_env, events, prompt="Bump it, okapi-7.", effort="high"))

    assert result.ok, result.note
    assert (workspace / "value.txt").read_text() == "2\n"
    assert result.cost_usd == pytest.approx(cost_usd("claude-sonnet-4-6", Usage(5 * 1200, 5 * 80)))
    assert [c["name"] for c in events.of("agent_tool_call")] == [
        "list_dir",
        "read_file",
        "edit_file",
        "run_command",
    ]
    outputs = [r["content"] for r in events.of("agent_tool_result")]
    assert "value.txt" in outputs[0] and outputs[1] == "1\n"
    assert "exit code 0" in outputs[3] and "2" in outputs[3] and "to-stderr" in outputs[3]
    assert events.of("agent_thinking") == [{"text": "Checked."}]
    assert events.of("agent_text") == [{"text": "value.txt now holds 2."}]
    assert len(events.of("agent_usage")) == 5
    assert events.kinds()[0] == "agent_start" and events.kinds()[-1] == "agent_result"

    steps = fake.message_requests()
    assert len(steps) == 5
    # The key from the turn's environment (this SDK sends it as a bearer token).
    assert TEST_KEY in steps[0].headers.get("x-api-key", steps[0].headers.get("authorization", ""))
    assert steps[0].body["stream"] is True and steps[0].body["output_config"] == {"effort": "high"}
    assert "okapi-7" in json.dumps(steps[0].body["messages"])
    # Each tool result went back to the model in the next request.
    last = steps[-1].body["messages"]
    assert (
        last[-1]["content"][0]["type"] == "tool_result" and "to-stderr" in last[-1]["content"][0]["content"]
    )


def test_file_tools_cannot_leave_the_workspace(
    fake: FakeAnthropic, workspace: Path, private_dir: Path, sdk_env: dict[str, str], tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep out\n")
    (workspace / "escape").symlink_to(tmp_path)
    fake.script = Script(
        [
            call("read_file", path="../outside.txt"),
            call("write_file", path=str(outside), content="pwned"),
            call("edit_file", path="escape/outside.txt", old_string="keep", new_string="gone"),
            say("gave up"),
        ]
    )
    events = Recorder()
    harness = AnthropicHarness.from_context(harness_context(workspace.parent, private_dir))
    result = harness.run(make_turn(workspace, sdk_env, events))

    assert result.ok, result.note
    assert outside.read_text() == "keep out\n"
    refusals = events.of("agent_tool_result")
    assert len(refusals) == 3 and all(
        r["is_error"] and "outside the workspace" in r["content"] for r in refusals
    )


def test_a_stalled_model_is_a_timeout_at_the_deadline(
    fake: FakeAnthropic, workspace: Path, private_dir: Path, sdk_env: dict[str, str]
) -> None:
    fake.script = Script([STALL])
    harness = AnthropicHarness.from_context(harness_context(workspace.parent, private_dir))
    result = harness.run(make_turn(workspace, sdk_env, Recorder(), deadline=2))
    assert not result.ok and result.failure is FailureClass.TIMEOUT, result


def test_a_command_is_cut_at_the_turn_deadline(
    fake: FakeAnthropic, workspace: Path, private_dir: Path, sdk_env: dict[str, str]
) -> None:
    fake.script = Script([call("run_command", command="sleep 600", timeout_seconds=900), say("unreachable")])
    events = Recorder()
    harness = AnthropicHarness.from_context(harness_context(workspace.parent, private_dir))
    result = harness.run(make_turn(workspace, sdk_env, events, deadline=3))
    assert not result.ok and result.failure is FailureClass.TIMEOUT, result
    (killed,) = events.of("agent_tool_result")
    assert "timed out and was killed" in killed["content"]


def test_api_errors_are_provider_failures(
    fake: FakeAnthropic, workspace: Path, private_dir: Path, sdk_env: dict[str, str]
) -> None:
    fake.script = Script([api_error(401, "authentication_error")])
    harness = AnthropicHarness.from_context(harness_context(workspace.parent, private_dir))
    result = harness.run(make_turn(workspace, sdk_env, Recorder()))
    assert not result.ok and result.failure is FailureClass.PROVIDER and "401" in result.note


def test_missing_credentials_are_named(workspace: Path, private_dir: Path, sdk_env: dict[str, str]) -> None:
    env = {k: v for k, v in sdk_env.items() if k != "ANTHROPIC_API_KEY"}
    harness = AnthropicHarness.from_context(harness_context(workspace.parent, private_dir))
    result = harness.run(make_turn(workspace, env, Recorder()))
    assert result.failure is FailureClass.PROVIDER and "ANTHROPIC_API_KEY" in result.note


def test_a_logical_session_is_refused_not_silently_dropped(workspace: Path, private_dir: Path) -> None:
    with pytest.raises(ManifestError, match="session"):
        AnthropicHarness.from_context(harness_context(workspace.parent, private_dir, session="solver"))


def test_a_whole_run_keeps_the_sdk_harness_edit_and_masks_its_secrets(
    fake: FakeAnthropic, tmp_path: Path
) -> None:
    secret = "canary-sdk-value-M4rT8q"
    fake.script = Script(
        [
            call("read_file", path="value.txt"),
            call("edit_file", path="value.txt", old_string="1", new_string="2"),
            say(f"Raised it; by the way the token is {secret}."),
        ]
    )
    env = agent_env(fake, tmp_path / "home", ANTHROPIC_API_KEY=TEST_KEY, CANARY_TOKEN=secret)
    manifest = write_domain(tmp_path / "domain", env, harness="anthropic")
    done = run_crucible("--manifest", manifest, "--iterations", "1", "--ui", "headless", env=crucible_env())
    assert done.returncode == 0, done.stderr

    state = tmp_path / "domain" / "state"
    events = list(read_events(state / "session.jsonl"))
    assert [e["row"]["decision"] for e in events if e["kind"] == "row"] == ["baseline", "keep"]
    (turn,) = [e for e in events if e["kind"] == "turn"]
    assert turn["ok"] and turn["cost"] == pytest.approx(
        cost_usd("claude-sonnet-4-6", Usage(3 * 1200, 3 * 80))
    )
    texts = [e["event"]["delta"] for e in events if e["kind"] == "agent" and e["event"]["kind"] == "text"]
    assert any("token is [REDACTED]" in text for text in texts)
    written = [p for p in state.rglob("*") if p.is_file()] + [
        tmp_path / "domain" / "workspace" / "RESULTS.md"
    ]
    for path in written:
        text = path.read_text(errors="replace")
        assert secret not in text and TEST_KEY not in text, path


def test_mcp_servers_it_cannot_use_are_reported_and_the_turn_goes_on(
    fake: FakeAnthropic, workspace: Path, private_dir: Path, sdk_env: dict[str, str]
) -> None:
    import socket

    # a loopback port bound and held but not listening: refused, and no test in parallel can take it
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        fake.script = Script([say("Nothing to call.")])
        events = Recorder()
        harness = AnthropicHarness.from_context(harness_context(workspace.parent, private_dir))
        servers = {
            "gone": {"type": "http", "url": f"http://127.0.0.1:{port}/mcp", "headers": {}},
            "local": {"command": "some-stdio-server"},
        }
        result = harness.run(make_turn(workspace, sdk_env, events, mcp_servers=servers))
    assert result.ok, result.note
    notes = [n["text"] for n in events.of("note")]
    assert len(notes) == 2
    assert any("'gone' left out: could not list its tools" in n for n in notes)
    assert any("'local' left out: only streamable HTTP servers" in n for n in notes)
    offered = [t["name"] for t in fake.message_requests()[0].body["tools"]]
    assert not any(name.startswith("mcp__") for name in offered) and "read_file" in offered
