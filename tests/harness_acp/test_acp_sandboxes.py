"""The acp harness where the turn does not run on the host: an OpenShell sandbox (the test gateway,
whose sandboxes are local directories) and a task runner's pod (the `local` backend's turn written
out as one shell command). The driver runs where the agent runs, so mediation goes with it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from crucible_backend_local.backends import SendableLocalBackend
from crucible_core import process
from crucible_core.session_log import read_events
from tests.backend_openshell.fake_gateway import FakeGateway
from tests.backend_openshell.support import sandbox_path
from tests.backend_openshell.test_openshell_runs import openshell_domain
from tests.cli_support import crucible_env, run_crucible
from tests.fakes.anthropic_api import FakeAnthropic, Script, call, say
from tests.harness_acp.support import AGENT_SDK, TEST_KEY, make_harness, model_env, with_acp
from tests.harness_claude.support import Recorder, make_turn

pytestmark = pytest.mark.acp_agent


@pytest.fixture
def gateway(tmp_path: Path, sdk_agent: Path) -> Iterator[FakeGateway]:
    root = tmp_path / "gateway"
    root.mkdir()
    # The image has Python with this plugin (the test's interpreter) and the agent on its PATH;
    # the model key is the gateway's, delivered to the sandbox as a provider credential.
    path = sandbox_path(Path(sys.executable).parent, sdk_agent.parent)
    providers = {"anthropic": {"ANTHROPIC_API_KEY": TEST_KEY}}
    with FakeGateway(root, path=path, providers=providers) as server:
        yield server


def test_the_counter_keeps_an_acp_turn_run_in_an_openshell_sandbox(
    fake: FakeAnthropic, gateway: FakeGateway, tmp_path: Path
) -> None:
    value = gateway.root / "sandbox" / "workspace" / "value.txt"  # where /sandbox/workspace lands
    fake.script = Script(
        [
            call("Read", file_path=str(value)),
            call("Edit", file_path=str(value), old_string="1", new_string="2"),
            call("Bash", command="touch canary", description="not granted"),
            say("Raised it."),
        ]
    )
    domain = tmp_path / "domain"
    # The openshell tests' counter domain, with the harness flipped to acp: configuration only.
    manifest = with_acp(openshell_domain(domain, fake, gateway), [AGENT_SDK])

    done = run_crucible(
        "--manifest", manifest, "-n", "1", "--ui", "headless", env=crucible_env(), timeout=240
    )

    assert done.returncode == 0, done.stderr
    events = list(read_events(domain / "state" / "session.jsonl"))
    rows = [(e["row"]["decision"], e["row"]["score"]) for e in events if e["kind"] == "row"]
    assert rows == [("baseline", 1), ("keep", 2)]
    assert (domain / "workspace" / "value.txt").read_text() == "2\n"
    assert not (domain / "workspace" / "canary").exists()
    agent = [e["event"] for e in events if e["kind"] == "agent"]
    labels = [e.get("label") for e in agent if e["kind"] == "log"]
    assert labels.count("agent_permission") == 2  # the edit allowed, the command denied, in the sandbox
    [tokens] = [e for e in agent if e["kind"] == "tokens"]
    assert tokens["cost_usd"] > 0
    [driver] = [
        r
        for r in gateway.requests("ExecSandbox")
        if r.command[:3] == ["python3", "-m", "crucible_harness_acp.driver"]
    ]
    assert driver.workdir == "/sandbox/workspace"
    assert driver.environment["HOME"] == "/sandbox" and "ANTHROPIC_API_KEY" not in driver.environment
    wire = b"".join(request.SerializeToString() for _, request in gateway.calls)
    assert TEST_KEY.encode() not in wire


def test_a_pod_turn_runs_the_driver_as_one_shell_command(
    sdk_agent: Path, fake: FakeAnthropic, workspace: Path, tmp_path: Path
) -> None:
    value = workspace / "value.txt"
    fake.script = Script(
        [call("Read", file_path=str(value)), call("Write", file_path=str(value), content="2\n"), say("Done.")]
    )
    harness = make_harness(tmp_path, [AGENT_SDK])
    recorder = Recorder()
    turn = make_turn(workspace, model_env(fake), recorder)

    shell_turn = SendableLocalBackend(harness).shell_turn(turn)
    assert TEST_KEY not in shell_turn.command and fake.base_url not in shell_turn.command
    # The pod: its own PATH (Python with the plugin, the agent) and the deploy profile's variables.
    pod_env = model_env(fake, PATH=f"{Path(sys.executable).parent}:{sdk_agent.parent}:/usr/bin:/bin")
    done = process.run(
        ["sh", "-c", shell_turn.command], cwd=workspace, env=pod_env, timeout=120, stdin_data=shell_turn.stdin
    )
    result = shell_turn.finish(done)

    assert result.ok, result.note
    assert value.read_text() == "2\n"
    assert [e["decision"] for e in recorder.of("agent_permission")] == ["allowed"]
    assert recorder.of("agent_usage")[0]["cost_usd"] > 0


def test_a_sandbox_without_the_driver_says_what_to_install(workspace: Path, tmp_path: Path) -> None:
    harness = make_harness(tmp_path, [AGENT_SDK])
    recorder = Recorder()
    shell_turn = SendableLocalBackend(harness).shell_turn(make_turn(workspace, {}, recorder))
    # a pod whose python3 is a plain interpreter without the plugin
    bare = tmp_path / "bare-bin"
    bare.mkdir()
    (bare / "python3").symlink_to("/usr/bin/python3")
    done = process.run(
        ["sh", "-c", shell_turn.command],
        cwd=workspace,
        env={"PATH": f"{bare}:/usr/bin:/bin"},
        timeout=60,
        stdin_data=b"",
    )
    result = shell_turn.finish(done)
    assert not result.ok and result.failure is not None and result.failure.value == "spawn"
    assert "install crucible-plugin-harness-acp there" in result.note
