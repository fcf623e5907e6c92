"""The broker never outlives its engine: started at run start, gone at run end and after a SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from crucible_core.session_log import read_events
from tests.cli_support import CRUCIBLE, crucible_env, run_crucible
from tests.harness_claude.support import live_processes_with, wait_for

MANIFEST = """
[repo]
path = "."

[workspace]
dir = "workspace"
setup_cmd = "mkdir -p workspace && cp value.txt workspace/"

[agent]
backend = "command"
agent_cmd = "{agent}"
goal = "hold the turn open"
{broker}
[judge]
measure_cmd = "../measure.sh"
direction = "higher"
"""


# The command backend takes the broker only when the manifest asks for it in so many words.
ASK = "\n[agent.broker]\nenabled = true\n"


def domain(tmp_path: Path, agent: str, broker: str = ASK) -> Path:
    root = tmp_path / "domain"
    root.mkdir()
    (root / "value.txt").write_text("1\n")
    measure = root / "measure.sh"
    measure.write_text('#!/bin/sh\nprintf \'{"valid": true, "score": 1}\\n\'\n')
    measure.chmod(0o755)
    manifest = root / "crucible.toml"
    manifest.write_text(MANIFEST.format(agent=agent, broker=broker))
    return manifest


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_a_finished_run_stops_its_broker(tmp_path: Path) -> None:
    manifest = domain(tmp_path, "cat ../state/private/broker/endpoint.json > ../seen.json")
    done = run_crucible("--manifest", manifest, "--iterations", "1", "--ui", "headless")
    assert done.returncode == 0, done.stderr
    seen = json.loads((manifest.parent / "seen.json").read_text())
    assert not accepts(seen["port"])  # the turn saw it; the run's end closed it
    assert not (manifest.parent / "state" / "private" / "broker" / "token").exists()
    exposure = [
        e for e in read_events(manifest.parent / "state" / "session.jsonl") if e["kind"] == "exposure"
    ]
    assert exposure and exposure[0]["capabilities"]["broker_tools"] == [
        "distress",
        "escalate",
        "request_approval",
        "steer_inbox",
    ]


@pytest.mark.leaves_open_log("it SIGKILLs the engine and does not resume")
def test_sigkill_of_the_engine_leaves_no_broker_behind(tmp_path: Path) -> None:
    marker = f"broker-kill-{uuid.uuid4().hex}"
    manifest = domain(tmp_path, "sleep 60")
    endpoint = manifest.parent / "state" / "private" / "broker" / "endpoint.json"
    engine = subprocess.Popen(
        [str(CRUCIBLE), "--manifest", str(manifest), "--iterations", "1", "--ui", "headless"],
        env=crucible_env(BROKER_TEST_MARKER=marker),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_for(endpoint.exists, seconds=60)
        port = json.loads(endpoint.read_text())["port"]
        assert accepts(port)
        assert wait_for(lambda: len(live_processes_with(marker)) >= 2, seconds=30)  # engine + agent
        os.kill(engine.pid, signal.SIGKILL)
        engine.wait(30)
        assert wait_for(lambda: not accepts(port), seconds=10)
        assert wait_for(lambda: live_processes_with(marker) == [], seconds=10), live_processes_with(marker)
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait(10)


AGENT = """
import json, os, urllib.request
from pathlib import Path

import pytest
server = json.loads(Path(os.environ["CRUCIBLE_MCP_CONFIG"]).read_text())["mcpServers"]["crucible"]
call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "request_approval", "arguments": {"trace_id": "trace-7", "mode": "block"}}}
request = urllib.request.Request(server["url"], json.dumps(call).encode(), {
    **server["headers"], "content-type": "application/json", "accept": "application/json, text/event-stream"})
with urllib.request.urlopen(request, timeout=30) as reply:
    Path("../reply.json").write_bytes(reply.read())
"""


def test_request_approval_through_the_broker_parks_the_run(tmp_path: Path) -> None:
    """A command agent finds the broker in $CRUCIBLE_MCP_CONFIG and calls it with a plain HTTP client:
    the tool's marker opens the run's approval wait."""
    manifest = domain(tmp_path, f"{sys.executable} ../agent.py")
    (manifest.parent / "agent.py").write_text(AGENT)
    done = run_crucible("--manifest", manifest, "--iterations", "1", "--ui", "headless", "--max-park", "1s")
    assert done.returncode == 2, done.stderr  # the block-mode wait timed out: a deny
    reply = json.loads((manifest.parent / "reply.json").read_text())
    assert reply["result"]["isError"] is False
    assert json.loads(reply["result"]["content"][0]["text"])["status"] == "pending"
    events = list(read_events(manifest.parent / "state" / "session.jsonl"))
    waits = [e for e in events if e["kind"] == "approval_wait"]
    assert [(w["trace_id"], w["mode"]) for w in waits] == [("trace-7", "block")]
    assert [(e["kind"], e["tool"]) for e in events if e["kind"].startswith("broker_")] == [
        ("broker_call", "request_approval"),
        ("broker_result", "request_approval"),
    ]


def test_no_server_starts_for_an_agent_that_cannot_call_mcp(tmp_path: Path) -> None:
    """The broker's server starts only when the turn's agent can use MCP servers: a backend
    registered without the takes_mcp trait gets no server (no token, no endpoint, no port) and
    its prompt says why there are no tools, while the grants are still disclosed."""
    import types

    from crucible_backend_local.backends import CommandBackend
    from crucible_backend_local.settings import CommandBackendSettings
    from crucible_core.hookspecs import hookimpl
    from crucible_core.plugins import load_plugins
    from crucible_core.run.budget import Budget
    from crucible_core.session.entry import execute
    from crucible_core.session.request import SessionRequest

    agent = (
        'cat \\"$CRUCIBLE_PROMPT_FILE\\" > ../prompt.txt; '
        "ls ../state/private/broker > ../broker-dir.txt 2>&1; "
        'echo \\"${CRUCIBLE_MCP_CONFIG:-none}\\" > ../mcp.txt'
    )
    manifest = domain(tmp_path, agent)
    manifest.write_text(manifest.read_text().replace('backend = "command"', 'backend = "plain-command"'))
    module = types.ModuleType("plain_backend")

    @hookimpl
    def crucible_register_backends(register) -> None:  # type: ignore[no-untyped-def]
        register("plain-command", CommandBackend.from_context, settings=CommandBackendSettings)

    module.crucible_register_backends = crucible_register_backends  # type: ignore[attr-defined]
    plugins = load_plugins(
        names=["core", "world_git", "judge_command", "backend_local", "broker_mcp", "distress"]
    )
    plugins.register_module(module, name="plain", distribution="crucible-plugin-plain", version="0")
    result = execute(plugins, SessionRequest(manifest=manifest, budget=Budget(iterations=1), ui="headless"))
    root = manifest.parent
    assert result.outcome == "finished", result.reason
    assert (root / "mcp.txt").read_text().strip() == "none"  # no MCP server handed to the turn
    assert "token" not in (root / "broker-dir.txt").read_text()  # and none was started
    prompt = (root / "prompt.txt").read_text()
    assert "broker tools: none (backend plain-command cannot call MCP tools)" in prompt
    exposure = [e for e in read_events(root / "state" / "session.jsonl") if e["kind"] == "exposure"]
    assert "distress" in exposure[0]["capabilities"]["broker_tools"]  # the grant is still disclosed


@pytest.mark.parametrize(
    ("broker", "served"),
    [("", False), ('\n[agent.broker]\ntools = ["distress"]\n', True), (ASK, True)],
    ids=["not-asked", "tools-named", "enabled"],
)
def test_a_command_agent_gets_the_broker_only_when_the_manifest_asks(
    tmp_path: Path, broker: str, served: bool
) -> None:
    """A shell proposer never calls MCP tools, so a command-backend run whose manifest has no
    [agent.broker] starts no server (no token, no endpoint, no $CRUCIBLE_MCP_CONFIG) and its
    prompt says how to get one; writing [agent.broker] (enabled, or tools named) brings it back."""
    from crucible_core.plugins import load_plugins
    from crucible_core.run.budget import Budget
    from crucible_core.session.entry import execute
    from crucible_core.session.request import SessionRequest

    agent = (
        'cat \\"$CRUCIBLE_PROMPT_FILE\\" > ../prompt.txt; '
        "ls ../state/private/broker > ../broker-dir.txt 2>&1; "
        'echo \\"${CRUCIBLE_MCP_CONFIG:-none}\\" > ../mcp.txt'
    )
    manifest = domain(tmp_path, agent, broker)
    plugins = load_plugins(
        names=["core", "world_git", "judge_command", "backend_local", "broker_mcp", "distress"]
    )
    result = execute(plugins, SessionRequest(manifest=manifest, budget=Budget(iterations=1), ui="headless"))
    root = manifest.parent
    assert result.outcome == "finished", result.reason
    prompt = (root / "prompt.txt").read_text()
    if served:
        assert (root / "mcp.txt").read_text().strip() != "none"
        assert "token" in (root / "broker-dir.txt").read_text()
        assert "mcp__crucible__distress" in prompt
    else:
        assert (root / "mcp.txt").read_text().strip() == "none"
        assert not (root / "state" / "private" / "broker").exists()
        assert "broker tools: none (backend command gets the broker only when [agent.broker] asks" in prompt
