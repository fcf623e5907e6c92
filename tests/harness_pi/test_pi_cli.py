"""The pi harness driving the real CLI: one turn on the host, in a pod's command, in an OpenShell sandbox."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from crucible_backend_local.backends import SendableLocalBackend
from crucible_core import process
from crucible_core.manifest.models import AgentSection, BrokerSection
from crucible_core.protocols import FailureClass, HarnessContext
from crucible_harness_pi.harness import PiHarness
from crucible_harness_pi.settings import PiSettings
from tests.fakes.anthropic_api import Script, api_error
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

pytestmark = pytest.mark.pi_cli

SKILL = "---\nname: raise-value\ndescription: Use this skill to raise the integer kept in value.txt.\n---\nAdd one.\n"


def harness(tmp_path: Path, *, toolbox: str | None = None, effort: str | None = None) -> PiHarness:
    agent = AgentSection(harness="pi", model=MODEL, effort=effort, broker=BrokerSection(enabled=False))
    return PiHarness.from_context(HarnessContext(agent, tmp_path, tmp_path / "private", PiSettings(toolbox)))


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    (ws / "value.txt").write_text("1\n")
    return ws


def test_a_turn_edits_the_workspace_in_a_home_of_its_own_offline_with_its_skills_and_thinking(
    fake: FakeOpenAIChat, pi_cli: Path, tmp_path: Path
) -> None:
    ws = workspace(tmp_path)
    toolbox = tmp_path / "toolbox" / "raise-value"
    toolbox.mkdir(parents=True)
    (toolbox / "SKILL.md").write_text(SKILL)
    fake.script = edit_script("pi", ws / "value.txt")
    log = tmp_path / "shim.log"
    shim = tmp_path / "pi-shim"
    shim.write_text(
        "#!/bin/sh\n"
        f'{{ printf \'%s\\n\' "$@"; echo --env--; env; echo --models--; stat -c %a "$PI_CODING_AGENT_DIR/models.json"; '
        f'cat "$PI_CODING_AGENT_DIR/models.json"; }} > {shlex.quote(str(log))}\n'
        f'exec {shlex.quote(str(pi_cli))} "$@"\n'
    )
    shim.chmod(0o755)
    recorder = Recorder()

    result = harness(tmp_path, toolbox="toolbox", effort="max").run(
        make_turn(ws, turn_env(fake, "pi", shim), recorder, model=MODEL)
    )

    assert result.ok, result.note
    assert (ws / "value.txt").read_text() == "2\n"
    assert result.cost_usd == pytest.approx(3 * PER_CALL)
    assert recorder.kinds()[0] == "agent_start" and recorder.kinds()[-2:] == ["agent_usage", "agent_result"]
    assert [e["name"] for e in recorder.of("agent_tool_call")] == ["read", "edit"]
    assert (ws / ".agents" / "skills" / "raise-value" / "SKILL.md").read_text() == SKILL
    first = fake.chat_requests()[0].body
    assert "raise-value" in json.dumps(first)  # pi found the skill where it looks, and offered it
    # [agent].effort = "max" went to pi as its ceiling, --thinking xhigh (argv below), which pi sends
    # to a Chat Completions endpoint as that API's highest effort
    assert first.get("reasoning_effort") == "high"

    argv_text, rest = log.read_text().split("--env--\n")
    env_text, models_text = rest.split("--models--\n")
    argv = argv_text.splitlines()
    assert argv[:3] == ["--mode", "json", "--print"] and "--offline" in argv
    assert argv[argv.index("--thinking") + 1] == "xhigh" and argv[argv.index("--provider") + 1] == "crucible"
    env = dict(line.split("=", 1) for line in env_text.splitlines() if "=" in line)
    home = Path(env["HOME"])
    assert home.parent.name.startswith("crucible-pi-") and not home.parent.exists()
    assert env["PI_CODING_AGENT_DIR"] == str(home / ".pi" / "agent") and env["PI_OFFLINE"] == "1"
    mode, models = models_text.split("\n", 1)
    assert mode == "600"
    provider = json.loads(models)["providers"]["crucible"]
    assert (provider["baseUrl"], provider["api"], provider["apiKey"]) == (
        fake.base_url,
        "openai-completions",
        "OPENAI_API_KEY",
    )
    assert TEST_KEY not in models
    assert {r.path for r in fake.requests} == {"/v1/chat/completions"}


def test_a_provider_error_fails_the_turn_as_the_providers_though_pi_exits_0(
    fake: FakeOpenAIChat, pi_cli: Path, tmp_path: Path
) -> None:
    fake.script = Script([api_error(401, "invalid_api_key")])
    ws = workspace(tmp_path)
    recorder = Recorder()
    result = harness(tmp_path).run(make_turn(ws, turn_env(fake, "pi", pi_cli), recorder, model=MODEL))
    assert not result.ok and result.failure is FailureClass.PROVIDER
    assert "401 scripted invalid_api_key" in result.note
    [closing] = recorder.of("agent_result")
    assert closing["ok"] is False and closing["subtype"] == "error"


def test_the_turn_written_out_for_a_pod_runs_with_the_pods_key_and_none_of_this_machines(
    fake: FakeOpenAIChat, pi_cli: Path, tmp_path: Path
) -> None:
    ws = workspace(tmp_path)
    fake.script = edit_script("pi", ws / "value.txt")
    local_key = "sk-proj-local-only-key-8b2f6d"
    turn = make_turn(ws, turn_env(fake, "pi", pi_cli, OPENAI_API_KEY=local_key), Recorder(), model=MODEL)
    shell_turn = SendableLocalBackend(harness(tmp_path)).shell_turn(turn)
    assert local_key not in shell_turn.command and fake.base_url not in shell_turn.command

    pod_tmp = tmp_path / "pod-tmp"
    pod_tmp.mkdir()
    pod_env = {"PATH": f"{pi_cli.parent}:/usr/bin:/bin", "TMPDIR": str(pod_tmp), **endpoint_env(fake)}
    done = process.run(
        ["sh", "-c", shell_turn.command], cwd=ws, env=pod_env, timeout=240, stdin_data=shell_turn.stdin
    )
    result = shell_turn.finish(done)
    assert result.ok, (result.note, done.stderr[-2000:])
    assert (ws / "value.txt").read_text() == "2\n"
    assert all(r.headers["authorization"] == f"Bearer {TEST_KEY}" for r in fake.chat_requests())
    assert list(pod_tmp.iterdir()) == []

    # A pod whose profile gives it no key: refused by the turn's own first lines, before pi starts.
    refused = process.run(
        ["sh", "-c", shell_turn.command],
        cwd=ws,
        env={"PATH": pod_env["PATH"], "TMPDIR": str(pod_tmp)},
        timeout=60,
        stdin_data=shell_turn.stdin,
    )
    result = shell_turn.finish(refused)
    assert not result.ok and result.failure is FailureClass.SPAWN
    assert result.note.startswith("no key for the inference endpoint: set OPENAI_API_KEY")


def test_the_counter_runs_a_pi_turn_in_a_sandbox_with_a_key_only_the_gateway_holds(
    fake: FakeOpenAIChat, pi_cli: Path, tmp_path: Path
) -> None:
    kept_in_a_sandbox(
        "pi", pi_cli, fake, tmp_path, ("/usr/local/bin/pi", "/usr/bin/node", "/usr/local/bin/node")
    )
