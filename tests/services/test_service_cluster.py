"""End to end through `crucible plan run`: a task that needs service.cluster gets a kubeconfig, others do not.

The Oubliette behind the catalog tool is the scripted MCP server (real mcp SDK, real sockets on
127.0.0.1); its inventory and call log show what the tool did.
"""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import socket
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from crucible_core.session_log import read_events
from tests.cli_support import run_crucible
from tests.services.support import (
    TOKEN,
    TOOL,
    ScriptedOubliette,
    env_for,
    scripted,
    service_table,
    tool_processes,
    write_catalog,
)
from tests.services.test_service_kill_resume import wait_for

PROBE = """
import asyncio, json, os, sys
import httpx2
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

url = os.environ["CRUCIBLE_SERVICE_CLUSTER_URL"]

async def status(token):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        return (await client.call_tool("cluster_status", {})).structured_content

without = httpx2.post(url, json={}).status_code
found = asyncio.run(status(os.environ["CRUCIBLE_SERVICE_CLUSTER_TOKEN"]))
print(json.dumps({"phase": found["phase"], "name": found["name"], "without_bearer": without}))
"""


@pytest.fixture
def oubliette(tmp_path: Path) -> Iterator[ScriptedOubliette]:
    yield from scripted(tmp_path)


def write_plan(root: Path, endpoint: str, *tasks: str, extra_args: tuple[str, ...] = ()) -> Path:
    (root / "ws").mkdir(exist_ok=True)
    (root / "probe.py").write_text(PROBE)
    plan = root / "plan.toml"
    plan.write_text(
        "version = 1\n[budget]\nusd = 1.0\n" + service_table(endpoint, *extra_args) + "".join(tasks)
    )
    return plan


USES_CLUSTER = """
[[task]]
name = "uses_cluster"
kind = "command"
needs = "service.cluster"
emits = ["phase"]
command = '''test -f "$KUBECONFIG" && grep -q "server: https://" "$KUBECONFIG" && test -z "$OUBLIETTE_MCP_TOKEN" && stat -c %a "$KUBECONFIG" > mode && "$PYTHON" ../probe.py'''
"""

AGENT = """
[[task]]
name = "agent_turn"
kind = "agent"
prompt = "look at the cluster"
needs = "service.cluster"
depends_on = ["uses_cluster"]
"""
AGENT_CMD = (
    '$PYTHON -c \'import json,os; c=json.loads(os.environ["CRUCIBLE_MCP_CONFIG"])["mcpServers"]; '
    'print(json.dumps({"servers": sorted(c), "url": c["service.cluster"]["url"]}))\''
)

PLAIN = """
[[task]]
name = "plain"
kind = "command"
command = '''env | grep -E "^(KUBECONFIG|CRUCIBLE_SERVICE_CLUSTER|OUBLIETTE_MCP_TOKEN)" > plain-env; echo '{}' '''
"""


def events(state: Path, kind: str) -> list[dict[str, object]]:
    return [e for e in read_events(state / "session.jsonl") if e["kind"] == kind]


def test_a_task_that_needs_the_cluster_gets_its_kubeconfig_and_nothing_else_does(
    tmp_path: Path, oubliette: ScriptedOubliette
) -> None:
    plan = write_plan(tmp_path, oubliette.endpoint, PLAIN, USES_CLUSTER, AGENT)
    env = env_for(tmp_path, write_catalog(tmp_path))
    state = tmp_path / "state"
    done = run_crucible(
        "plan", "run", plan, "--state-dir", state, "--agent-cmd", AGENT_CMD, cwd=tmp_path / "ws", env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    turn = next(e for e in events(state, "task_result") if e["task"] == "agent_turn")
    assert turn["output"]["servers"] == ["service.cluster"]  # handed to the turn as an MCP server
    assert turn["output"]["url"].startswith("http://127.0.0.1:")

    result = next(e for e in events(tmp_path / "state", "task_result") if e["task"] == "uses_cluster")
    assert result["status"] == "pass"
    assert result["output"]["phase"] == "Ready"
    assert result["output"]["name"].startswith("crucible-")
    assert result["output"]["without_bearer"] == 401  # the forward refuses a request without the bearer
    assert (tmp_path / "ws" / "mode").read_text().strip() == "600"
    assert (tmp_path / "ws" / "plain-env").read_text() == ""  # no kubeconfig, no forward, no secret

    # create -> (task) -> delete, and nothing left behind.
    called = oubliette.tools_called()
    assert called[:2] == ["oubliette_list", "oubliette_create"]
    assert called[-1] == "oubliette_delete"
    assert oubliette.inventory() == {}
    assert tool_processes(str(tmp_path)) == []

    started = events(tmp_path / "state", "service_start")
    assert [(e["service"], e["task"]) for e in started] == [("cluster", "uses_cluster")]
    assert isinstance(started[0]["port"], int)
    assert [e["service"] for e in events(tmp_path / "state", "service_ready")] == ["cluster"]
    assert [(e["service"], e["how"]) for e in events(tmp_path / "state", "service_exit")] == [
        ("cluster", "stopped")
    ]
    log_text = (tmp_path / "state" / "session.jsonl").read_text()
    assert "scripted-oubliette-token" not in log_text  # a secret's value never enters the log
    handoff = tmp_path / "state" / "services" / "cluster" / "handoff"
    assert stat.S_IMODE(os.stat(handoff).st_mode) == 0o700


def test_a_declared_service_no_task_needs_never_starts(tmp_path: Path, oubliette: ScriptedOubliette) -> None:
    plan = write_plan(tmp_path, oubliette.endpoint, PLAIN)
    env = env_for(tmp_path, write_catalog(tmp_path))
    done = run_crucible("plan", "run", plan, "--state-dir", tmp_path / "state", cwd=tmp_path / "ws", env=env)
    assert done.returncode == 0, done.stderr
    assert events(tmp_path / "state", "service_start") == []
    assert oubliette.calls() == []


def test_renewal_is_observed_while_a_long_task_runs(tmp_path: Path, oubliette: ScriptedOubliette) -> None:
    # The task waits (bounded) until the scripted server has logged a renewal of the lease.
    waits = f"""
[[task]]
name = "long"
kind = "command"
needs = "service.cluster"
timeout = 60
command = '''for i in $(seq 300); do grep -q oubliette_renew {oubliette.state}/calls.jsonl && echo '{{}}' && exit 0; sleep 0.1; done; exit 1'''
"""
    plan = write_plan(tmp_path, oubliette.endpoint, waits, extra_args=("--renew-seconds", "0.5"))
    env = env_for(tmp_path, write_catalog(tmp_path))
    done = run_crucible("plan", "run", plan, "--state-dir", tmp_path / "state", cwd=tmp_path / "ws", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    called = oubliette.tools_called()
    assert "oubliette_renew" in called
    assert called.index("oubliette_renew") < called.index("oubliette_delete")
    assert oubliette.inventory() == {}


def test_a_wrong_token_is_refused_and_the_task_fails_as_transport(
    tmp_path: Path, oubliette: ScriptedOubliette
) -> None:
    plan = write_plan(
        tmp_path, oubliette.endpoint, USES_CLUSTER.replace('emits = ["phase"]\n', "retries = 0\n")
    )
    env = env_for(tmp_path, write_catalog(tmp_path), token="not-the-token")
    done = run_crucible("plan", "run", plan, "--state-dir", tmp_path / "state", cwd=tmp_path / "ws", env=env)
    assert done.returncode == 4, done.stdout + done.stderr
    result = next(e for e in events(tmp_path / "state", "task_result") if e["task"] == "uses_cluster")
    assert result["status"] == "transport"
    assert result["transport"] == "gateway"
    assert "cluster" in result["note"]
    assert [c["outcome"] for c in oubliette.calls()] == ["refused: bad bearer"] * len(oubliette.calls())
    assert oubliette.calls() and oubliette.inventory() == {}
    exits = events(tmp_path / "state", "service_exit")
    assert exits and all(e["how"] == "exited" and e["status"] != 0 for e in exits)


def test_a_changed_executable_is_refused_by_name(tmp_path: Path, oubliette: ScriptedOubliette) -> None:
    tool = tmp_path / "tool.sh"
    tool.write_text("#!/bin/sh\nexec sleep 60\n")
    tool.chmod(0o755)
    catalog = write_catalog(tmp_path, tool)
    tool.write_text("#!/bin/sh\nexec sleep 61\n")  # changed after the catalog attested it
    plan = write_plan(tmp_path, oubliette.endpoint, PLAIN, USES_CLUSTER)
    done = run_crucible(
        "plan",
        "run",
        plan,
        "--state-dir",
        tmp_path / "state",
        cwd=tmp_path / "ws",
        env=env_for(tmp_path, catalog),
    )
    assert done.returncode == 4
    assert "truncated" in done.stdout
    assert "does not match its catalog sha256" in done.stdout and "oubliette-cluster" in done.stdout
    assert events(tmp_path / "state", "service_start") == []


@pytest.mark.parametrize("required", [True, False])
def test_an_unattested_service_truncates_a_required_task_and_skips_an_advisory_one(
    tmp_path: Path, required: bool
) -> None:
    task = USES_CLUSTER if required else USES_CLUSTER + "required = false\n"
    plan = write_plan(tmp_path, "http://127.0.0.1:9/mcp", PLAIN, task)
    done = run_crucible(
        "plan",
        "run",
        plan,
        "--state-dir",
        tmp_path / "state",
        cwd=tmp_path / "ws",
        env=env_for(tmp_path, None),
    )
    results = {e["task"]: e for e in events(tmp_path / "state", "task_result")}
    if required:
        assert done.returncode == 4
        assert {r["status"] for r in results.values()} == {"truncated"}
    else:
        assert done.returncode == 0, done.stdout
        assert results["uses_cluster"]["status"] == "skipped"
        assert results["plain"]["status"] == "pass"
    assert "'oubliette-cluster' is not attested" in results["uses_cluster"]["note"]


def test_a_declaration_breaking_the_rules_is_refused_naming_service_and_field(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    plan = tmp_path / "plan.toml"
    plan.write_text(
        "version = 1\n[budget]\nusd = 1.0\n"
        f'[[service]]\nname = "cluster"\ntool = "x"\nargs = ["--config", "{tmp_path}/ws/conf"]\n' + PLAIN
    )
    done = run_crucible("plan", "run", plan, "--state-dir", tmp_path / "state", cwd=tmp_path / "ws")
    assert done.returncode == 10, done.stderr
    assert "service 'cluster': field args" in done.stderr
    assert not (tmp_path / "state" / "session.jsonl").exists()
    assert json.dumps  # keep the import honest when trimming


def test_check_prints_the_catalog_the_bounds_and_who_needs_each_service(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, "http://127.0.0.1:9/mcp", PLAIN, USES_CLUSTER)
    catalog = write_catalog(tmp_path)
    done = run_crucible("check", "--plan", plan, env=env_for(tmp_path, catalog))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"service catalog: {catalog}" in done.stdout
    assert "service bounds: readiness 30s, restarts 2, grace 5s" in done.stdout
    line = next(line for line in done.stdout.splitlines() if "service cluster:" in line)
    assert "tool oubliette-cluster 0.1.0" in line and "transport mcp-http" in line
    assert "OUBLIETTE_MCP_TOKEN (oubliette: create and delete clusters)" in line
    assert "needed by uses_cluster" in line and "available" in line

    unattested = run_crucible("check", "--plan", plan, env=env_for(tmp_path, None))
    assert unattested.returncode == 13
    assert "CRUCIBLE_SERVICE_CATALOG is not set" in unattested.stdout
    assert "task uses_cluster needs service.cluster" in unattested.stdout and "truncates" in unattested.stdout


def test_the_tool_holds_its_port_while_it_provisions_and_listens_once_the_cluster_is_ready(
    tmp_path: Path, oubliette: ScriptedOubliette
) -> None:
    """Bound from its start, the port cannot be taken by another process in the minutes a real
    cluster takes; not listened on until the cluster is Ready, the engine's probe is refused meanwhile."""
    port = unassignable_port()
    handoff = tmp_path / "handoff"
    handoff.mkdir(mode=0o700)
    env = {
        "PATH": os.environ["PATH"],
        "CRUCIBLE_RUN_ID": "holds-port",
        "CRUCIBLE_SERVICE_PORT": str(port),
        "CRUCIBLE_SERVICE_HANDOFF_DIR": str(handoff),
        "OUBLIETTE_MCP_TOKEN": TOKEN,
    }
    tool = subprocess.Popen(
        [str(TOOL), "--endpoint", oubliette.endpoint], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        assert wait_for(lambda: "oubliette_create" in oubliette.tools_called() or tool.poll() is not None)
        assert "kubeconfig" not in os.listdir(handoff)  # still provisioning (Ready after two more gets)
        with socket.socket() as other, pytest.raises(OSError) as taken:
            other.bind(("127.0.0.1", port))
        assert taken.value.errno == errno.EADDRINUSE  # the tool holds it
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        assert wait_for(lambda: listening(port) or tool.poll() is not None)
        assert "kubeconfig" in os.listdir(handoff)  # listening means the cluster is usable
        tool.send_signal(signal.SIGTERM)
        assert tool.wait(timeout=30) == 0, tool.stderr.read() if tool.stderr else ""
    finally:
        if tool.poll() is None:
            tool.kill()
            tool.wait()
    assert oubliette.inventory() == {}


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except OSError:
        return False
    return True


def unassignable_port() -> int:
    """A free port below the kernel's ephemeral range: no bind to port 0 and no outgoing connection
    is given it, so only the tool can hold it while this test looks (and a refused bind proves it)."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    if low < 2048:
        pytest.skip("the ephemeral range leaves no ports below it")
    for port in random.sample(range(max(1024, low - 8192), low), 64):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    pytest.fail("no free port below the ephemeral range")
