"""Shared pieces for the service tests: a scripted Oubliette on 127.0.0.1, a catalog, a plan."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import attrs

from crucible_core.services.catalog import file_sha256
from tests.cli_support import crucible_env

TOOL = Path(sys.executable).parent / "crucible-service-oubliette"
TOKEN = "scripted-oubliette-token"
SCRIPTED = [sys.executable, "-m", "crucible_service_oubliette.scripted"]


# The start of an agent stand-in: find service.cluster in the turn's MCP config and call its
# cluster_status tool with the entry's own headers; `servers` and `found` are left bound.
CALL_CLUSTER_STATUS = """
import asyncio, json, os
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

with open(os.environ["CRUCIBLE_MCP_CONFIG"]) as handle:
    servers = json.load(handle)["mcpServers"]
entry = servers["service.cluster"]

async def status():
    http = create_mcp_http_client(headers=entry["headers"])
    async with http, Client(streamable_http_client(entry["url"], http_client=http), mode="legacy") as client:
        return (await client.call_tool("cluster_status", {})).structured_content

found = asyncio.run(status())
"""


@attrs.frozen
class ScriptedOubliette:
    endpoint: str
    state: Path
    proc: subprocess.Popen[bytes]

    def inventory(self) -> dict[str, object]:
        path = self.state / "inventory.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def calls(self) -> list[dict[str, object]]:
        path = self.state / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def tools_called(self) -> list[str]:
        return [str(call["tool"]) for call in self.calls()]


def serve_scripted(state: Path, token: str = TOKEN) -> tuple[int, subprocess.Popen[bytes]]:
    """Start the scripted Oubliette on a listening socket bound here on port 0 and handed over, so
    no test running in parallel can take the port first; returns the port once the server answers."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        proc = subprocess.Popen(
            [*SCRIPTED, "--fd", str(listener.fileno()), "--token", token, "--state", str(state)],
            pass_fds=(listener.fileno(),),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port = int(listener.getsockname()[1])
    # The socket accepts connections before the server reads them: wait for an HTTP answer (to a
    # request with the token, outside /mcp, so the server records no call).
    ask = f"GET /ready HTTP/1.0\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as probe:
                probe.sendall(ask)
                if probe.recv(1):
                    return port, proc
        except OSError:
            pass
        time.sleep(0.05)
    stop(proc)
    raise RuntimeError("the scripted Oubliette did not start")


def start_scripted(root: Path) -> ScriptedOubliette:
    state = root / "oubliette"
    port, proc = serve_scripted(state)
    return ScriptedOubliette(f"http://127.0.0.1:{port}/mcp", state, proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def scripted(root: Path) -> Iterator[ScriptedOubliette]:
    server = start_scripted(root)
    try:
        yield server
    finally:
        stop(server.proc)


def write_catalog(root: Path, executable: Path = TOOL, *, name: str = "oubliette-cluster") -> Path:
    handoff = '{ file = "kubeconfig", env = "KUBECONFIG", target = "the run\'s virtual cluster", scope = "cluster-admin inside it" }'
    path = root / "catalog.toml"
    path.write_text(
        "[[tool]]\n"
        f'name = "{name}"\n'
        f'executable = "{executable}"\n'
        f'sha256 = "{file_sha256(executable)}"\n'
        'version = "0.1.0"\n'
        'transport = "mcp-http"\n'
        'mcp_path = "/mcp"\n'
        "creates_external_resources = true\n"
        "concurrent_clients = true\n"
        f"handoff = {handoff}\n"
    )
    return path


def service_table(endpoint: str, *extra_args: str) -> str:
    args = ["--endpoint", endpoint, "--ttl-seconds", "600", *extra_args]
    return (
        '[[service]]\nname = "cluster"\ntool = "oubliette-cluster"\nversion = "^0.1"\n'
        f"args = {json.dumps(args)}\n"
        'secrets = [{ name = "OUBLIETTE_MCP_TOKEN", system = "oubliette", scope = "create and delete clusters" }]\n'
    )


def env_for(root: Path, catalog: Path | None, token: str = TOKEN, **extra: str) -> dict[str, str]:
    env = crucible_env(
        OUBLIETTE_MCP_TOKEN=token,
        CRUCIBLE_SERVICE_SECRETS="OUBLIETTE_MCP_TOKEN",
        PYTHON=sys.executable,
        **extra,
    )
    if catalog is not None:
        env["CRUCIBLE_SERVICE_CATALOG"] = str(catalog)
    return env


def tool_processes(marker: str, tool: str = "crucible-service-oubliette") -> list[int]:
    """Live processes running a catalog tool whose handoff dir lies under `marker` (a test's tmp dir)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            environ = Path(f"/proc/{name}/environ").read_bytes()
            status = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        if tool.encode() in cmdline and marker.encode() in environ and ") Z" not in status:
            found.append(int(name))
    return found
