"""The `claude` harness driving the real Claude Code CLI against the scripted model server on 127.0.0.1."""

from __future__ import annotations

import json
import stat
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from crucible_core.protocols import FailureClass
from crucible_harness_claude.cli_harness import ClaudeCodeHarness
from tests.fakes import mcp_stdio
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
    Recorder,
    argv_recording_shim,
    harness_context,
    live_processes_with,
    make_turn,
    recorded_invocations,
)

pytestmark = pytest.mark.claude_cli

# Sonnet 4.6 list prices, USD per million tokens; the fake reports 1200 in / 80 out per call.
PER_CALL = (1200 * 3.0 + 80 * 15.0) / 1_000_000


def edit_script(workspace: Path) -> Script:
    value = str(workspace / "value.txt")
    return Script(
        [
            call("Read", file_path=value),
            call("Edit", file_path=value, old_string="1", new_string="2"),
            Reply([Thinking("The value is now 2."), Text("Raised value.txt from 1 to 2.")]),
        ]
    )


def harness(workspace: Path, private_dir: Path, **agent) -> ClaudeCodeHarness:
    return ClaudeCodeHarness.from_context(harness_context(workspace.parent, private_dir, **agent))


def mcp_temp_dirs() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).iterdir() if p.name.startswith("crucible-mcp-")}


def test_an_edit_turn_changes_the_file_and_streams_its_events(
    fake: FakeAnthropic, workspace: Path, private_dir: Path, cli_env: dict[str, str]
) -> None:
    fake.script = edit_script(workspace)
    events = Recorder()
    result = harness(workspace, private_dir).run(
        make_turn(workspace, cli_env, events, prompt="Bump it, zebra-42.")
    )

    assert result.ok, result.note
    assert (workspace / "value.txt").read_text() == "2\n"
    assert result.cost_usd == pytest.approx(3 * PER_CALL)  # the CLI's own total_cost_usd

    kinds = events.kinds()
    assert kinds[0] == "agent_start" and kinds[-2:] == ["agent_usage", "agent_result"]
    assert [c["name"] for c in events.of("agent_tool_call")] == ["Read", "Edit"]
    assert events.of("agent_tool_call")[1]["input"]["new_string"] == "2"
    results = events.of("agent_tool_result")
    assert len(results) == 2 and not any(r["is_error"] for r in results)
    assert "1" in results[0]["content"]  # what Read returned
    assert events.of("agent_thinking") == [{"text": "The value is now 2."}]
    assert events.of("agent_text") == [{"text": "Raised value.txt from 1 to 2."}]
    assert events.of("agent_start")[0]["model"] == "claude-sonnet-4-6"
    assert events.of("agent_start")[0]["permission_mode"] == "acceptEdits"
    final = events.of("agent_result")[0]
    assert final["ok"] and final["turns"] == 3 and final["cost_usd"] == pytest.approx(3 * PER_CALL)

    steps = fake.message_requests()
    assert len(steps) == 3 and {s.body["model"] for s in steps} == {"claude-sonnet-4-6"}
    # The prompt travels on stdin and reaches the model.
    assert "zebra-42" in json.dumps(steps[0].body["messages"])
    # No logical session: no cursor is kept.
    assert not any(private_dir.rglob("*.json"))


def test_a_logical_session_resumes_the_same_conversation(
    fake: FakeAnthropic,
    workspace: Path,
    private_dir: Path,
    cli_env: dict[str, str],
    claude_cli: Path,
    tmp_path: Path,
) -> None:
    shim, argv_log = argv_recording_shim(tmp_path, claude_cli)
    env = dict(cli_env, CRUCIBLE_CLAUDE_BIN=str(shim))
    solver = harness(workspace, private_dir, session="solver")

    fake.script = Script([say("First turn: I looked around.")])
    first_events = Recorder()
    first = solver.run(make_turn(workspace, env, first_events, prompt="first prompt", session="solver"))
    assert first.ok, first.note
    assert first_events.events[0] == ("agent_session", {"session": "solver", "action": "started", "turn": 1})

    cursor_file = private_dir / "sessions" / "claude" / "solver.json"
    assert stat.S_IMODE(cursor_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(cursor_file.parent.stat().st_mode) == 0o700
    cursor = json.loads(cursor_file.read_text())["cursor"]
    uuid.UUID(cursor)  # the CLI's own conversation id

    fake.script = Script([say("Second turn: continuing.")])
    second_events = Recorder()
    second = solver.run(make_turn(workspace, env, second_events, prompt="second prompt", session="solver"))
    assert second.ok, second.note
    assert second_events.events[0] == ("agent_session", {"session": "solver", "action": "resumed", "turn": 2})

    first_argv, second_argv = recorded_invocations(argv_log)
    assert "--resume" not in first_argv
    assert second_argv[second_argv.index("--resume") + 1] == cursor
    # The model saw the first turn's exchange again: the conversation really continued.
    history = json.dumps(fake.message_requests()[-1].body["messages"])
    assert (
        "first prompt" in history and "First turn: I looked around." in history and "second prompt" in history
    )
    # The CLI reports a resumed conversation's cost cumulatively; a turn is charged its own share.
    assert first.cost_usd == pytest.approx(PER_CALL) and second.cost_usd == pytest.approx(PER_CALL)
    # The cursor never reaches an event (they go to the session log).
    assert cursor not in json.dumps(first_events.events + second_events.events)
    assert json.loads(cursor_file.read_text())["turns"] == 2


@pytest.mark.parametrize("hang", ["model stalls", "tool never returns"])
def test_a_hung_turn_is_killed_at_its_deadline_with_nothing_left_running(
    hang: str, fake: FakeAnthropic, workspace: Path, private_dir: Path, cli_env: dict[str, str]
) -> None:
    marker = f"crucible-hang-{uuid.uuid4().hex}"
    if hang == "model stalls":
        fake.script = Script([STALL])
    else:
        # A grandchild (the Bash tool's shell and its tail) must go down with the CLI.
        fake.script = Script(
            [call("Bash", command="tail -f /dev/null", description="wait"), say("never reached")]
        )
    env = dict(cli_env, CRUCIBLE_TEST_MARKER=marker)
    events = Recorder()
    result = harness(workspace, private_dir).run(make_turn(workspace, env, events, deadline=6))

    assert not result.ok and result.failure is FailureClass.TIMEOUT, result
    assert "deadline" in result.note
    assert live_processes_with(marker) == []
    assert "agent_start" in events.kinds()  # it did start: the deadline, not a spawn error, ended it


def test_an_api_error_is_a_provider_failure(
    fake: FakeAnthropic, workspace: Path, private_dir: Path, cli_env: dict[str, str]
) -> None:
    fake.script = Script([api_error(401, "authentication_error")])
    result = harness(workspace, private_dir).run(make_turn(workspace, cli_env, Recorder()))
    assert not result.ok and result.failure is FailureClass.PROVIDER, result
    assert "401" in result.note


def test_effort_and_model_reach_the_cli(
    fake: FakeAnthropic,
    workspace: Path,
    private_dir: Path,
    cli_env: dict[str, str],
    claude_cli: Path,
    tmp_path: Path,
) -> None:
    shim, argv_log = argv_recording_shim(tmp_path, claude_cli)
    env = dict(cli_env, CRUCIBLE_CLAUDE_BIN=str(shim))
    result = harness(workspace, private_dir).run(
        make_turn(workspace, env, Recorder(), model="claude-haiku-4-5", effort="high")
    )
    assert result.ok, result.note
    (argv,) = recorded_invocations(argv_log)
    assert argv[argv.index("--model") + 1] == "claude-haiku-4-5"
    assert argv[argv.index("--effort") + 1] == "high"
    assert argv[argv.index("--permission-mode") + 1] == "acceptEdits"
    assert not any("Raise the number" in a for a in argv)  # the prompt is not on the command line
    assert {s.body["model"] for s in fake.message_requests()} == {"claude-haiku-4-5"}


def test_toolbox_lands_in_claude_skills_and_mcp_servers_reach_the_cli(
    fake: FakeAnthropic,
    workspace: Path,
    private_dir: Path,
    cli_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A temp folder of this test's own, so other runs' MCP configs cannot change the count.
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    toolbox = tmp_path / "toolbox"
    (toolbox / "bumper").mkdir(parents=True)
    (toolbox / "bumper" / "SKILL.md").write_text(
        "---\nname: bumper\ndescription: Raises the quokka counter\n---\nAdd one to value.txt.\n"
    )
    fake.script = Script([call("mcp__probe__echo", text="hello"), say("done")])
    servers = {"probe": {"type": "stdio", "command": sys.executable, "args": [mcp_stdio.__file__]}}
    events = Recorder()
    temp_before = mcp_temp_dirs()
    result = harness(workspace, private_dir, toolbox_dir="toolbox").run(
        make_turn(workspace, cli_env, events, mcp_servers=servers)
    )
    assert result.ok, result.note

    assert (workspace / ".claude" / "skills" / "bumper" / "SKILL.md").is_file()
    first = fake.message_requests()[0].body
    assert "quokka" in json.dumps(first)  # the skill is offered to the model
    assert events.of("agent_start")[0]["mcp_servers"] == [{"name": "probe", "status": "connected"}]
    (tool_result,) = events.of("agent_tool_result")
    assert not tool_result["is_error"] and f"{mcp_stdio.MARKER}: hello" in tool_result["content"]
    # The MCP config (it may hold tokens) lived in a temporary file for the turn only.
    assert mcp_temp_dirs() == temp_before


def test_a_resume_the_cli_cannot_honour_fails_without_starting_afresh(
    fake: FakeAnthropic, workspace: Path, private_dir: Path, cli_env: dict[str, str]
) -> None:
    gone = "0b9f5d1e-0000-4000-8000-000000000000"
    cursor_file = private_dir / "sessions" / "claude" / "solver.json"
    cursor_file.parent.mkdir(parents=True)
    cursor_file.write_text(json.dumps({"session": "solver", "cursor": gone, "turns": 3}))
    events = Recorder()
    result = harness(workspace, private_dir, session="solver").run(
        make_turn(workspace, cli_env, events, session="solver")
    )
    assert not result.ok and result.failure is FailureClass.AGENT
    assert "could not be resumed" in result.note and str(cursor_file) in result.note
    assert fake.message_requests() == []  # no fresh conversation was started in its place
    assert json.loads(cursor_file.read_text())["cursor"] == gone
    assert gone not in result.note and gone not in json.dumps(events.events)
