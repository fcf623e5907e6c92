"""The opencode harness driving the real CLI: one turn on the host, in a pod's command, in an OpenShell sandbox."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from crucible_backend_local.backends import SendableLocalBackend
from crucible_core import process
from crucible_core.manifest.models import AgentSection, BrokerSection
from crucible_core.protocols import FailureClass, HarnessContext
from crucible_harness_opencode.harness import OpenCodeHarness
from crucible_harness_opencode.settings import OpenCodeSettings
from tests.fakes.anthropic_api import Script, api_error, call, say
from tests.fakes.openai_chat import FakeOpenAIChat
from tests.harness_claude.support import Recorder, make_turn
from tests.harness_endpoint.scenarios import kept_in_a_sandbox
from tests.harness_endpoint.support import (
    MODEL,
    PER_CALL,
    TEST_KEY,
    edit_script,
    endpoint_env,
    turn_env,
)

pytestmark = pytest.mark.opencode_cli

SKILL = "---\nname: raise-value\ndescription: Use this skill to raise the integer kept in value.txt.\n---\nAdd one.\n"


def harness(tmp_path: Path, *, toolbox: str | None = None) -> OpenCodeHarness:
    agent = AgentSection(harness="opencode", model=MODEL, broker=BrokerSection(enabled=False))
    return OpenCodeHarness.from_context(
        HarnessContext(agent, tmp_path, tmp_path / "private", OpenCodeSettings(toolbox))
    )


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    (ws / "value.txt").write_text("1\n")
    return ws


def recording_shim(tmp_path: Path, real: Path, *, failing_export: bool = False) -> tuple[Path, Path]:
    """A stand-in `opencode` that records what its `run` saw (env, config, its mode) and execs the real one."""
    log = tmp_path / "shim.log"
    export = (
        'if [ "$1" = export ]; then echo "export broke (shim)" >&2; exit 1; fi\n' if failing_export else ""
    )
    shim = tmp_path / "opencode-shim"
    shim.write_text(
        "#!/bin/sh\n"
        f"{export}"
        'if [ "$1" = run ]; then\n'
        f'  {{ env; echo \'--config--\'; stat -c %a "$OPENCODE_CONFIG"; cat "$OPENCODE_CONFIG"; }} > {shlex.quote(str(log))}\n'
        "fi\n"
        f'exec {shlex.quote(str(real))} "$@"\n'
    )
    shim.chmod(0o755)
    return shim, log


def test_a_turn_edits_the_workspace_in_a_home_of_its_own_with_every_outside_reach_off(
    fake: FakeOpenAIChat, opencode_cli: Path, tmp_path: Path
) -> None:
    ws = workspace(tmp_path)
    toolbox = tmp_path / "toolbox" / "raise-value"
    toolbox.mkdir(parents=True)
    (toolbox / "SKILL.md").write_text(SKILL)
    fake.script = edit_script("opencode", ws / "value.txt")
    shim, log = recording_shim(tmp_path, opencode_cli)
    recorder = Recorder()

    result = harness(tmp_path, toolbox="toolbox").run(
        make_turn(ws, turn_env(fake, "opencode", shim), recorder, model=MODEL)
    )

    assert result.ok, result.note
    assert (ws / "value.txt").read_text() == "2\n"
    assert result.cost_usd == pytest.approx(3 * PER_CALL)
    assert recorder.kinds()[0] == "agent_start" and recorder.kinds()[-2:] == ["agent_usage", "agent_result"]
    assert [e["name"] for e in recorder.of("agent_tool_call")] == ["read", "edit"]
    # the toolbox's skill was copied where opencode looks, and opencode offered it to the model
    assert (ws / ".claude" / "skills" / "raise-value" / "SKILL.md").read_text() == SKILL
    assert "raise-value" in json.dumps(fake.chat_requests()[0].body)

    env_text, config_text = log.read_text().split("--config--\n")
    env = dict(line.split("=", 1) for line in env_text.splitlines() if "=" in line)
    home = Path(env["HOME"])
    assert home.name == "home" and home.parent.name.startswith("crucible-opencode-")
    assert not home.parent.exists()  # gone with the turn
    for name, under in [("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share"), ("TMPDIR", "tmp")]:
        assert env[name] == str(home / under)
    for quiet in ("OPENCODE_DISABLE_MODELS_FETCH", "OPENCODE_DISABLE_AUTOUPDATE", "OPENCODE_DISABLE_SHARE"):
        assert env[quiet] == "1"
    assert env["npm_config_offline"] == "true"
    mode, config = config_text.split("\n", 1)
    assert mode == "600"
    provider = json.loads(config)["provider"]["crucible"]
    assert provider["npm"] == "@ai-sdk/openai-compatible"
    assert provider["options"] == {"baseURL": fake.base_url, "apiKey": "{env:OPENAI_API_KEY}"}
    assert TEST_KEY not in config
    # Only the endpoint was asked for anything (no catalogue, no registry, no update check), and
    # only for the agent's steps: the session's title is ours, not one more model call.
    assert {r.path for r in fake.requests} == {"/v1/chat/completions"}
    assert all(r.body.get("tools") for r in fake.requests) and len(fake.requests) == 3


def test_a_provider_error_fails_the_turn_as_the_providers(
    fake: FakeOpenAIChat, opencode_cli: Path, tmp_path: Path
) -> None:
    fake.script = Script([api_error(401, "invalid_api_key")], side_reply=api_error(401, "invalid_api_key"))
    ws = workspace(tmp_path)
    result = harness(tmp_path).run(
        make_turn(ws, turn_env(fake, "opencode", opencode_cli), Recorder(), model=MODEL)
    )
    assert not result.ok and result.failure is FailureClass.PROVIDER
    assert "HTTP 401" in result.note and "scripted invalid_api_key" in result.note


def test_a_turn_without_its_export_is_a_transcript_error_and_still_charged(
    fake: FakeOpenAIChat, opencode_cli: Path, tmp_path: Path
) -> None:
    ws = workspace(tmp_path)
    fake.script = edit_script("opencode", ws / "value.txt")
    shim, _ = recording_shim(tmp_path, opencode_cli, failing_export=True)
    recorder = Recorder()
    result = harness(tmp_path).run(make_turn(ws, turn_env(fake, "opencode", shim), recorder, model=MODEL))
    assert not result.ok and result.failure is FailureClass.STREAM  # never a free success
    assert "transcript error: opencode left no session export" in result.note
    assert "export broke (shim)" in result.note
    assert result.cost_usd == pytest.approx(3 * PER_CALL)  # the tokens the live stream showed
    assert "agent_result" not in recorder.kinds()


def test_the_turn_written_out_for_a_pod_runs_with_the_pods_key_and_none_of_this_machines(
    fake: FakeOpenAIChat, opencode_cli: Path, tmp_path: Path
) -> None:
    ws = workspace(tmp_path)
    fake.script = edit_script("opencode", ws / "value.txt")
    local_key = "sk-proj-local-only-key-3c9e1a"
    turn = make_turn(
        ws, turn_env(fake, "opencode", opencode_cli, OPENAI_API_KEY=local_key), Recorder(), model=MODEL
    )
    shell_turn = SendableLocalBackend(harness(tmp_path)).shell_turn(turn)
    assert local_key not in shell_turn.command and fake.base_url not in shell_turn.command

    pod_tmp = tmp_path / "pod-tmp"
    pod_tmp.mkdir()
    pod_env = {
        "PATH": f"{opencode_cli.parent}:/usr/bin:/bin",
        "TMPDIR": str(pod_tmp),
        **endpoint_env(fake),  # the pod's own key and endpoint, from its deploy profile
    }
    done = process.run(
        ["sh", "-c", shell_turn.command], cwd=ws, env=pod_env, timeout=240, stdin_data=shell_turn.stdin
    )
    result = shell_turn.finish(done)
    assert result.ok, (result.note, done.stderr[-2000:])
    assert (ws / "value.txt").read_text() == "2\n"
    assert result.cost_usd == pytest.approx(3 * PER_CALL)
    assert all(r.headers["authorization"] == f"Bearer {TEST_KEY}" for r in fake.chat_requests())
    assert list(pod_tmp.iterdir()) == []


def test_the_counter_runs_an_opencode_turn_in_a_sandbox_with_a_key_only_the_gateway_holds(
    fake: FakeOpenAIChat, opencode_cli: Path, tmp_path: Path
) -> None:
    kept_in_a_sandbox("opencode", opencode_cli, fake, tmp_path, ("/usr/local/bin/opencode",))


def test_on_the_host_a_read_outside_the_workspace_is_refused_not_asked(
    fake: FakeOpenAIChat, opencode_cli: Path, tmp_path: Path
) -> None:
    ws = workspace(tmp_path)
    outside = tmp_path / "elsewhere" / "notes.txt"
    outside.parent.mkdir()
    outside.write_text("outside-the-workspace-3f9a\n")
    fake.script = Script([call("read", filePath=str(outside)), say("Could not read it.")])
    recorder = Recorder()
    result = harness(tmp_path).run(
        make_turn(ws, turn_env(fake, "opencode", opencode_cli), recorder, model=MODEL)
    )
    assert result.ok, result.note  # the turn went on: the refusal was the tool's answer
    [read] = recorder.of("agent_tool_result")
    assert read["is_error"] and "outside-the-workspace-3f9a" not in read["content"]
    assert "outside-the-workspace-3f9a" not in json.dumps(fake.chat_requests()[-1].body)
