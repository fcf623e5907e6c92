"""An MCP-over-stdio catalog tool: the engine relays it onto loopback HTTP behind the same forward.

The tool is a real MCP stdio server (the mcp SDK's MCPServer); tasks reach it with the SDK's
streamable-HTTP client through the authenticating forward, several at once, exactly as they
reach an HTTP service.
"""

from __future__ import annotations

import sys
from pathlib import Path

from crucible_core.services.catalog import file_sha256
from crucible_core.session_log import read_events
from tests.cli_support import crucible_env, run_crucible
from tests.services.support import tool_processes

TOOL = """#!{python}
import os
from typing import Any
from mcp.server.mcpserver import MCPServer

server = MCPServer("stdio-ledger")
calls = []

@server.tool(name="record")
def record(text: str) -> dict[str, Any]:
    calls.append(text)
    return {{"run_id": os.environ["CRUCIBLE_RUN_ID"], "calls": len(calls), "secret": bool(os.environ.get("LEDGER_TOKEN"))}}

server.run("stdio")
"""

PROBE = """
import asyncio, json, os, sys
import httpx2
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

url = os.environ["CRUCIBLE_SERVICE_LEDGER_URL"]

async def record(text):
    http = create_mcp_http_client(headers={"Authorization": "Bearer " + os.environ["CRUCIBLE_SERVICE_LEDGER_TOKEN"]})
    async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        return (await client.call_tool("record", {"text": text})).structured_content

async def both():
    return await asyncio.gather(record("a"), record("b"))

without = httpx2.post(url, json={}).status_code
found = asyncio.run(both())
print(json.dumps({"without_bearer": without, "secret": found[0]["secret"], "run_id": found[0]["run_id"],
                  "calls": sorted(f["calls"] for f in found), "token_here": "LEDGER_TOKEN" in os.environ}))
"""


def test_a_stdio_service_is_reached_over_the_forward_by_needing_tasks(tmp_path: Path) -> None:
    tool = tmp_path / "ledger-tool"
    tool.write_text(TOOL.format(python=sys.executable))
    tool.chmod(0o755)
    catalog = tmp_path / "catalog.toml"
    catalog.write_text(
        f'[[tool]]\nname = "ledger"\nexecutable = "{tool}"\nsha256 = "{file_sha256(tool)}"\n'
        'version = "1.2.0"\ntransport = "mcp-stdio"\n'
        "creates_external_resources = false\nconcurrent_clients = true\n"
    )
    (tmp_path / "probe.py").write_text(PROBE)
    (tmp_path / "ws").mkdir()
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'version = 1\n[budget]\nusd = 1.0\n\n[[service]]\nname = "ledger"\ntool = "ledger"\nversion = "^1"\n'
        'secrets = [{ name = "LEDGER_TOKEN", system = "ledger", scope = "append" }]\n\n'
        '[[task]]\nname = "writes"\nkind = "command"\nneeds = "service.ledger"\n'
        "command = '\"$PYTHON\" ../probe.py'\n\n"
        '[[task]]\nname = "plain"\nkind = "command"\ncommand = \'\'\'printf \'{"url": "%s"}\' "${CRUCIBLE_SERVICE_LEDGER_URL:-}"\'\'\'\n'
    )
    env = crucible_env(
        PYTHON=sys.executable,
        LEDGER_TOKEN="ledger-secret-value",
        CRUCIBLE_SERVICE_SECRETS="LEDGER_TOKEN",
        CRUCIBLE_SERVICE_CATALOG=str(catalog),
    )
    checked = run_crucible("check", "--plan", plan, cwd=tmp_path, env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "transport mcp-stdio" in checked.stdout
    done = run_crucible("plan", "run", plan, "--state-dir", tmp_path / "state", cwd=tmp_path / "ws", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    events = list(read_events(tmp_path / "state" / "session.jsonl"))
    results = {e["task"]: e["output"] for e in events if e["kind"] == "task_result"}
    writes = results["writes"]
    assert writes["without_bearer"] == 401 and writes["secret"] is True and writes["token_here"] is False
    assert writes["calls"] == [1, 2]  # two clients at once, one child, answers kept apart
    (start,) = [e for e in events if e["kind"] == "service_start"]
    assert writes["run_id"] and start["task"] == "writes"
    assert [e["kind"] for e in events if e["kind"].startswith("service_")] == [
        "service_start",
        "service_ready",
        "service_exit",
    ]
    assert results["plain"] == {"url": ""}
    assert tool_processes(str(tmp_path), "ledger-tool") == []
