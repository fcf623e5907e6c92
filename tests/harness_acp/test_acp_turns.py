"""One acp turn at a time, with the real pinned ACP agents against the scripted Messages API.

What the turn reports (agent events, mediation evidence, cost), what the agent was allowed and
refused (the denied-action canaries), and how a turn that cannot go on is classified.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crucible_core.protocols import FailureClass
from tests.fakes.anthropic_api import STALL, FakeAnthropic, Script, api_error, call, say
from tests.harness_acp.support import TEST_KEY, make_harness, model_env
from tests.harness_claude.support import Recorder, live_processes_with, make_turn, wait_for

pytestmark = pytest.mark.acp_agent


def decisions(recorder: Recorder, kind: str = "agent_permission") -> list[tuple[str, str]]:
    return [
        (e.get("tool") or e.get("operation") or e.get("command"), e["decision"]) for e in recorder.of(kind)
    ]


def test_a_turn_edits_the_workspace_and_reports_events_permissions_and_cost(
    sdk_agent: Path, fake: FakeAnthropic, workspace: Path, tmp_path: Path
) -> None:
    value = workspace / "value.txt"
    fake.script = Script(
        [
            call("Read", file_path=str(value)),
            call("Write", file_path=str(value), content="2\n"),
            say("Raised the value to 2."),
        ]
    )
    user_home = tmp_path / "user-home"
    user_home.mkdir()
    harness = make_harness(tmp_path, [str(sdk_agent)])
    recorder = Recorder()

    result = harness.run(make_turn(workspace, model_env(fake, HOME=str(user_home)), recorder))

    assert result.ok, result.note
    assert value.read_text() == "2\n"
    kinds = recorder.kinds()
    assert kinds[0] == "agent_start" and kinds[-1] == "agent_result"
    [start] = recorder.of("agent_start")
    assert start["harness"] == "acp" and start["agent"] == "@zed-industries/claude-agent-acp"
    assert start["permission_mode"] == "default-deny; granted: edit, mcp, read, search, think"
    calls = recorder.of("agent_tool_call")
    assert [(c["name"], c["kind"], c["input"].get("file_path")) for c in calls] == [
        ("Read", "read", str(value)),
        ("Write", "edit", str(value)),
    ]
    assert [r["is_error"] for r in recorder.of("agent_tool_result")] == [False, False]
    # Claude Code reads without asking; the write was asked for and mediated
    assert decisions(recorder) == [("Write", "allowed")]
    assert recorder.of("agent_text")[-1]["text"] == "Raised the value to 2."
    # cost: the agent's own figure (Sonnet list prices over the fake's 1200 in / 80 out per call)
    [usage] = recorder.of("agent_usage")
    per_call = (1200 * 3.0 + 80 * 15.0) / 1_000_000
    assert usage["input_tokens"] == 3 * 1200 and usage["cost_usd"] == pytest.approx(3 * per_call)
    assert result.cost_usd == pytest.approx(3 * per_call)
    [final] = recorder.of("agent_result")
    assert final["ok"] and final["subtype"] == "end_turn"
    # the agent kept its state in a home of the turn's own, never the user's
    assert list(user_home.iterdir()) == []
    # the model saw the key; no event did
    assert all(r.headers.get("x-api-key") == TEST_KEY for r in fake.message_requests())
    assert TEST_KEY not in json.dumps(recorder.events)


def test_a_denied_command_never_runs(
    sdk_agent: Path, fake: FakeAnthropic, workspace: Path, tmp_path: Path
) -> None:
    """The denied-action canary: running commands is not granted, so the agent's Bash call is
    refused at its permission request and the file it would create never appears."""
    canary = workspace / "canary"
    fake.script = Script([call("Bash", command=f"touch {canary}", description="touch"), say("Tried.")])
    harness = make_harness(tmp_path, [str(sdk_agent)])  # the default grant: no "execute"
    recorder = Recorder()

    result = harness.run(make_turn(workspace, model_env(fake), recorder))

    assert result.ok, result.note  # a refusal fails the tool call, not the turn
    assert not canary.exists()
    [permission] = recorder.of("agent_permission")
    assert permission["tool"] == "Bash" and permission["family"] == "execute"
    assert permission["decision"] == "denied"
    assert permission["reason"] == "tool family 'execute' is not granted by [agent.acp].allow"
    assert [r["is_error"] for r in recorder.of("agent_tool_result")] == [True]


def test_a_granted_command_runs(
    sdk_agent: Path, fake: FakeAnthropic, workspace: Path, tmp_path: Path
) -> None:
    """The canary's control: the same call with "execute" granted does create the file."""
    canary = workspace / "canary"
    fake.script = Script([call("Bash", command=f"touch {canary}", description="touch"), say("Done.")])
    harness = make_harness(tmp_path, [str(sdk_agent)], allow=["read", "edit", "execute"])
    recorder = Recorder()

    result = harness.run(make_turn(workspace, model_env(fake), recorder))

    assert result.ok, result.note
    assert canary.exists()
    assert decisions(recorder) == [("Bash", "allowed")]


def test_a_write_outside_the_workspace_is_denied_even_when_editing_is_granted(
    sdk_agent: Path, fake: FakeAnthropic, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "escape").symlink_to(outside)
    fake.script = Script(
        [
            call("Write", file_path=str(outside / "direct.txt"), content="x"),
            call("Write", file_path=str(workspace / "escape" / "linked.txt"), content="x"),
            say("Tried."),
        ]
    )
    harness = make_harness(tmp_path, [str(sdk_agent)])
    recorder = Recorder()

    result = harness.run(make_turn(workspace, model_env(fake), recorder))

    assert list(outside.iterdir()) == []
    reasons = [(e["decision"], e["reason"]) for e in recorder.of("agent_permission")]
    assert reasons[0] == ("denied", f"{outside / 'direct.txt'} is outside the workspace")
    # Claude Code stops its turn at the first refusal; a later link escape is tested on its own below
    assert result.ok, result.note


def test_file_requests_are_answered_inside_the_workspace_only(
    fs_agent: Path, fake: FakeAnthropic, workspace: Path, tmp_path: Path
) -> None:
    """claude-code-acp reads through the client (fs/read_text_file) without asking: the client
    itself refuses a path outside the workspace and a link out of it, and serves the rest."""
    secret = tmp_path / "outside-secret.txt"
    secret.write_text("the engine's private notes\n")
    (workspace / "link.txt").symlink_to(secret)
    value = workspace / "value.txt"
    fake.script = Script(
        [
            call("mcp__acp__Read", file_path=str(secret)),
            call("mcp__acp__Read", file_path=str(workspace / "link.txt")),
            call("mcp__acp__Read", file_path=str(value)),
            call("mcp__acp__Write", file_path=str(value), content="2\n"),
            say("Raised it."),
        ]
    )
    harness = make_harness(tmp_path, [str(fs_agent)])
    recorder = Recorder()

    result = harness.run(make_turn(workspace, model_env(fake), recorder))

    assert result.ok, result.note
    files = [(e["operation"], e["path"], e["decision"]) for e in recorder.of("agent_file")]
    assert files == [
        ("read", str(secret), "denied"),
        ("read", str(workspace / "link.txt"), "denied"),
        ("read", str(value), "allowed"),
        ("write", str(value), "allowed"),
    ]
    reasons = [e["reason"] for e in recorder.of("agent_file")]
    assert reasons[0] == f"{secret} is outside the workspace"
    assert "link" in reasons[1]
    assert value.read_text() == "2\n"
    # what the model was told: the refusals, never the file's text
    sent = json.dumps([r.body for r in fake.message_requests()])
    assert "private notes" not in sent and "refused by crucible" in sent


def test_a_terminal_is_refused_without_the_grant_and_runs_in_the_workspace_with_it(
    fs_agent: Path, fake: FakeAnthropic, workspace: Path, tmp_path: Path
) -> None:
    canary = workspace / "canary"
    fake.script = Script(
        [call("mcp__acp__Bash", command=f"touch {canary}", description="touch", timeout=30000), say("Tried.")]
    )
    denied = Recorder()
    assert make_harness(tmp_path, [str(fs_agent)]).run(make_turn(workspace, model_env(fake), denied)).ok
    assert not canary.exists()
    assert [(e["family"], e["decision"]) for e in denied.of("agent_permission")] == [("execute", "denied")]
    assert denied.of("agent_terminal") == []  # never asked the client for a terminal

    allowed = Recorder()
    harness = make_harness(tmp_path, [str(fs_agent)], allow=["read", "edit", "execute"])
    assert harness.run(make_turn(workspace, model_env(fake), allowed)).ok
    assert canary.exists()
    terminals = allowed.of("agent_terminal")
    assert terminals[0]["decision"] == "allowed" and f"touch {canary}" in terminals[0]["command"]
    assert terminals[-1]["exit_code"] == 0


def test_a_provider_error_is_the_providers_failure(
    sdk_agent: Path, fake: FakeAnthropic, workspace: Path, tmp_path: Path
) -> None:
    fake.script = Script([api_error(529, "overloaded_error")])
    recorder = Recorder()
    result = make_harness(tmp_path, [str(sdk_agent)]).run(make_turn(workspace, model_env(fake), recorder))
    assert not result.ok and result.failure is FailureClass.PROVIDER, result.note
    assert recorder.of("agent_result")[-1]["ok"] is False


def test_a_turn_that_cannot_start_is_a_spawn_failure_with_its_fix(
    fake: FakeAnthropic, workspace: Path, tmp_path: Path
) -> None:
    missing = make_harness(tmp_path, ["no-such-acp-agent"]).run(
        make_turn(workspace, model_env(fake), Recorder())
    )
    assert missing.failure is FailureClass.SPAWN
    assert missing.note == (
        "the ACP agent was not found (`no-such-acp-agent` on the agent's PATH): install it, "
        "or set [agent.acp].command to its path"
    )
    env: dict[str, Any] = model_env(fake)
    del env["ANTHROPIC_API_KEY"]
    keyless = make_harness(tmp_path, ["sh"]).run(make_turn(workspace, env, Recorder()))
    assert keyless.failure is FailureClass.SPAWN
    assert keyless.note == (
        "[agent.acp].credentials names ANTHROPIC_API_KEY, which is not set for the agent: "
        "set it in [agent].env or crucible's environment"
    )
    # a program that is not an ACP agent: it exits without a session, a start failure
    silent = make_harness(tmp_path, ["true"]).run(make_turn(workspace, model_env(fake), Recorder()))
    assert silent.failure is FailureClass.SPAWN, silent.note
    assert fake.requests == []


def test_a_turn_past_its_deadline_is_killed_with_everything_it_started(
    sdk_agent: Path, fake: FakeAnthropic, workspace: Path, tmp_path: Path
) -> None:
    fake.script = Script([STALL])
    marker = "crucible-acp-deadline-test-7c1e"
    recorder = Recorder()
    harness = make_harness(tmp_path, [str(sdk_agent)])
    result = harness.run(make_turn(workspace, model_env(fake, ACP_TEST_MARK=marker), recorder, deadline=8))
    assert result.failure is FailureClass.TIMEOUT, result.note
    assert wait_for(lambda: not live_processes_with(marker), seconds=10)


def test_a_logical_sessions_second_turn_is_refused(
    sdk_agent: Path, fake: FakeAnthropic, workspace: Path, tmp_path: Path
) -> None:
    fake.script = Script([say("Looked.")])
    harness = make_harness(tmp_path, [str(sdk_agent)])
    first = Recorder()
    assert harness.run(make_turn(workspace, model_env(fake), first, session="solver")).ok
    assert first.of("agent_session") == [{"session": "solver", "action": "started", "turn": 1}]
    second = harness.run(make_turn(workspace, model_env(fake), Recorder(), session="solver"))
    assert second.failure is FailureClass.AGENT
    assert "cannot resume logical session 'solver'" in second.note
