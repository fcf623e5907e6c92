"""One turn of the real Codex CLI through the `codex` harness, against the scripted Responses API on 127.0.0.1."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from crucible_core.protocols import FailureClass
from crucible_harness_codex.cli_harness import CodexHarness
from tests.fakes.openai_responses import FakeResponses, Reasoning, Reply, Script, Text, api_error, say, shell
from tests.harness_claude.support import Recorder, make_turn
from tests.harness_codex.support import (
    TEST_KEY,
    TEST_MODEL,
    ReachRecorder,
    fallback_cost,
    harness_context,
    turn_env,
)

pytestmark = pytest.mark.codex_cli


def harness(private_dir: Path, **table: object) -> CodexHarness:
    return CodexHarness.from_context(harness_context(private_dir, **{"model": TEST_MODEL, **table}))


def test_a_turn_edits_the_workspace_and_its_stream_becomes_agent_events(
    fake: FakeResponses,
    codex_cli: Path,
    workspace: Path,
    private_dir: Path,
    reach: ReachRecorder,
    tmp_path: Path,
) -> None:
    fake.script = Script(
        [shell("echo 2 > value.txt"), Reply([Reasoning("Checked it."), Text("Raised the value.")])]
    )
    home = tmp_path / "user-home"
    recorder = Recorder()
    env = turn_env(fake, home, codex_cli, **reach.env())
    result = harness(private_dir).run(make_turn(workspace, env, recorder, model=TEST_MODEL))

    assert result.ok, result.note
    assert (workspace / "value.txt").read_text() == "2\n"
    assert result.cost_usd == pytest.approx(fallback_cost((2000, 500, 100), (2000, 500, 100)))
    kinds = recorder.kinds()
    assert kinds[0] == "agent_start" and kinds[-2:] == ["agent_usage", "agent_result"]
    # An unknown model's missing metadata is a notice, not a failure.
    [notice] = recorder.of("agent_notice")
    assert "Model metadata" in notice["message"] and TEST_MODEL in notice["message"]
    [call] = recorder.of("agent_tool_call")
    assert call["name"] == "shell" and "echo 2 > value.txt" in call["input"]["command"]
    [done] = recorder.of("agent_tool_result")
    assert done["id"] == call["id"] and not done["is_error"]
    assert recorder.of("agent_thinking") == [{"text": "Checked it."}]
    assert recorder.of("agent_text") == [{"text": "Raised the value."}]
    [usage] = recorder.of("agent_usage")
    assert (usage["input_tokens"], usage["cache_read_input_tokens"], usage["output_tokens"]) == (
        3000,
        1000,
        200,
    )
    assert usage["cost_usd"] == pytest.approx(result.cost_usd) and usage["models"] == [TEST_MODEL]
    [final] = recorder.of("agent_result")
    assert final["ok"] and final["text"] == "Raised the value."

    # The CLI signed in with the key from its auth file, reached nothing but the model, and
    # left nothing behind: not in the user's home, not in the run's private state.
    requests = fake.model_requests()
    assert [r.headers["authorization"] for r in requests] == [f"Bearer {TEST_KEY}"] * 2
    assert requests[0].body["model"] == TEST_MODEL
    assert reach.targets == []
    assert list(home.iterdir()) == []
    assert not any((private_dir / "codex-homes").iterdir())


def test_the_commands_the_agent_runs_see_no_openai_key(
    fake: FakeResponses, codex_cli: Path, workspace: Path, private_dir: Path, tmp_path: Path
) -> None:
    fake.script = Script([shell('env > seen-env.txt; echo "$HOME" > seen-home.txt'), say("Looked.")])
    env = turn_env(
        fake, tmp_path / "home", codex_cli, OPENAI_API_KEY_OTHER="sk-proj-another-key-00000000000000"
    )
    assert harness(private_dir).run(make_turn(workspace, env, Recorder())).ok
    seen = (workspace / "seen-env.txt").read_text()
    assert "OPENAI_API_KEY" not in seen and TEST_KEY not in seen and "sk-proj-another" not in seen
    # Each turn has a home of its own, under the run's private state, gone once the turn ended.
    turn_home = Path((workspace / "seen-home.txt").read_text().strip())
    assert turn_home.parent == private_dir / "codex-homes" and not turn_home.exists()


def test_a_refused_key_is_a_provider_failure_whose_note_names_no_secret(
    fake: FakeResponses, codex_cli: Path, workspace: Path, private_dir: Path, tmp_path: Path
) -> None:
    fake.script = Script([api_error(401, "invalid_api_key", f"Incorrect API key provided: {TEST_KEY}")])
    recorder = Recorder()
    env = turn_env(fake, tmp_path / "home", codex_cli)
    result = harness(private_dir).run(make_turn(workspace, env, recorder))
    assert not result.ok and result.failure is FailureClass.PROVIDER
    assert "401" in result.note and "Incorrect API key" in result.note
    assert TEST_KEY not in result.note and TEST_KEY not in json.dumps(recorder.events)
    [final] = recorder.of("agent_result")
    assert final["ok"] is False


def test_a_turn_killed_at_its_deadline_is_charged_what_codex_recorded(
    fake: FakeResponses, codex_cli: Path, workspace: Path, private_dir: Path, tmp_path: Path
) -> None:
    fake.script = Script([shell("sleep 600"), say("never")])
    env = turn_env(fake, tmp_path / "home", codex_cli)
    result = harness(private_dir).run(make_turn(workspace, env, Recorder(), deadline=8))
    assert not result.ok and result.failure is FailureClass.TIMEOUT
    # The stream never reported usage; the CLI's rollout did, for the one request it made.
    assert result.cost_usd == pytest.approx(fallback_cost((2000, 500, 100)))
    assert "cost estimated from recorded usage" in result.note


def test_a_missing_cli_is_a_spawn_failure_saying_how_to_install_it(
    workspace: Path, private_dir: Path, tmp_path: Path
) -> None:
    env = {"PATH": str(tmp_path), "OPENAI_API_KEY": TEST_KEY}
    result = harness(private_dir).run(make_turn(workspace, env, Recorder()))
    assert not result.ok and result.failure is FailureClass.SPAWN
    assert "npm install -g @openai/codex" in result.note and "CRUCIBLE_CODEX_BIN" in result.note


def test_the_second_turn_of_a_logical_session_is_refused_not_started_afresh(
    fake: FakeResponses, codex_cli: Path, workspace: Path, private_dir: Path, tmp_path: Path
) -> None:
    fake.script = Script([say("First turn.")])
    env = turn_env(fake, tmp_path / "home", codex_cli)
    codex = harness(private_dir)
    first = Recorder()
    assert codex.run(make_turn(workspace, env, first, session="solver")).ok
    assert first.of("agent_session") == [{"session": "solver", "action": "started", "turn": 1}]
    asked = len(fake.model_requests())

    second = Recorder()
    result = harness(private_dir).run(make_turn(workspace, env, second, session="solver"))
    assert not result.ok and result.failure is FailureClass.AGENT
    assert "cannot resume" in result.note and "remove [agent].session" in result.note
    assert second.events == [] and len(fake.model_requests()) == asked  # nothing ran

    # Another logical session, or none, is a fresh turn as before.
    assert codex.run(make_turn(workspace, env, Recorder(), session="critic")).ok
    assert codex.run(make_turn(workspace, env, Recorder())).ok


def test_a_turn_that_never_started_leaves_its_session_open(
    workspace: Path, private_dir: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "codex"
    broken.write_text("#!/bin/sh\necho 'config error' >&2\nexit 2\n")
    broken.chmod(broken.stat().st_mode | stat.S_IXUSR)
    env = {"PATH": "/usr/bin:/bin", "OPENAI_API_KEY": TEST_KEY, "CRUCIBLE_CODEX_BIN": str(broken)}
    codex = harness(private_dir)
    result = codex.run(make_turn(workspace, env, Recorder(), session="solver"))
    assert result.failure is FailureClass.SPAWN and "config error" in result.note
    assert not codex.marks.used("solver")  # the retry of this transport failure may run


def test_homes_a_killed_engine_left_go_at_the_first_turn_not_when_a_check_builds_the_harness(
    fake: FakeResponses, codex_cli: Path, workspace: Path, private_dir: Path, tmp_path: Path
) -> None:
    left = private_dir / "codex-homes" / "turn-3-deadbeef" / ".codex"
    left.mkdir(parents=True)
    (left / "auth.json").write_text('{"OPENAI_API_KEY": "sk-left-behind"}')
    codex = harness(private_dir)  # what `crucible check` does while a run may be mid-turn
    assert (left / "auth.json").exists()
    fake.script = Script([say("Done.")])
    assert codex.run(make_turn(workspace, turn_env(fake, tmp_path / "home", codex_cli), Recorder())).ok
    assert list((private_dir / "codex-homes").iterdir()) == []


def test_a_turn_the_provider_fails_midway_is_charged_the_requests_it_made(
    fake: FakeResponses, codex_cli: Path, workspace: Path, private_dir: Path, tmp_path: Path
) -> None:
    fake.script = Script([shell("true"), api_error(400, "context_length_exceeded", "too long")])
    env = turn_env(fake, tmp_path / "home", codex_cli)
    result = harness(private_dir).run(make_turn(workspace, env, Recorder()))
    assert not result.ok and result.failure is FailureClass.PROVIDER
    assert result.cost_usd == pytest.approx(fallback_cost((2000, 500, 100)))  # the first request's
