"""The broker's MCP server, driven by the mcp SDK's own client over a real socket on 127.0.0.1.

Auth (no token, wrong token, non-loopback peer), the body-size and concurrency bounds, a tool
that raises, a tool the turn is not granted, and calls between turns.
"""

from __future__ import annotations

import asyncio
import json
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from crucible_broker_mcp.broker import Broker
from crucible_broker_mcp.mediation import Mediator
from crucible_broker_mcp.server import BrokerServer
from crucible_broker_mcp.tools import BUILTIN_TOOLS
from crucible_core.broker.declaration import Declaration, Disclosure
from crucible_core.broker.tools import BrokerRuntime, BrokerTool, ToolCall
from crucible_distress.tools import TOOLS as DISTRESS_TOOLS

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


class Gate:
    """A tool that blocks until released, to hold requests in flight."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)

    def __call__(self, _call: ToolCall) -> dict[str, Any]:
        self.entered.release()
        self.release.wait(30)
        return {"status": "released"}


def _boom(_call: ToolCall) -> dict[str, Any]:
    raise RuntimeError("the tool's own bug")


@pytest.fixture
def gate() -> Iterator[Gate]:
    g = Gate()
    yield g
    g.release.set()


@pytest.fixture
def server(tmp_path: Path, gate: Gate) -> Iterator[BrokerServer]:
    extra = (BrokerTool("hold", "Blocks until released.", gate), BrokerTool("boom", "Raises.", _boom))
    tools = {t.name: t for t in (*BUILTIN_TOOLS, *DISTRESS_TOOLS, *extra)}
    granted = ("boom", "distress", "hold", "steer_inbox")  # escalate and request_approval are not granted
    declaration = Declaration((), Disclosure((), (), None, (), granted))
    events: list[Any] = []
    emit = events.append
    broker = Broker(
        declaration,
        tools,
        BrokerRuntime(tmp_path, tmp_path / "distress", pending_steers=lambda: ["look at the cache"]),
        Mediator((), emit),
        emit,
    )
    srv = BrokerServer(broker, tmp_path / "private" / "broker", max_body=8192, max_concurrent=2)
    srv.start()
    broker.open_turn(1)
    srv.events = events  # type: ignore[attr-defined]
    yield srv
    srv.stop()


def client(srv: BrokerServer, token: str | None = None) -> Client:
    headers = {"Authorization": f"Bearer {token if token is not None else srv.token}"}
    return Client(streamable_http_client(srv.url, http_client=create_mcp_http_client(headers=headers)))


def leaves(error: BaseException) -> list[BaseException]:
    """The errors inside (nested) exception groups: the SDK client raises from a task group."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for sub in error.exceptions for leaf in leaves(sub)]
    return [error]


def post(srv: BrokerServer, body: bytes, headers: dict[str, str]) -> httpx2.Response:
    return httpx2.post(srv.url, content=body, headers={**ACCEPT, **headers}, timeout=30)


def test_the_token_is_private_and_every_request_needs_it(server: BrokerServer) -> None:
    token_file = server.directory / "token"
    assert token_file.read_text().strip() == server.token
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(server.directory.stat().st_mode) == 0o700
    body = json.dumps(INITIALIZE).encode()
    assert post(server, body, {}).status_code == 401
    assert post(server, body, {"authorization": "Bearer not-the-token"}).status_code == 401
    assert post(server, body, {"authorization": server.token}).status_code == 401  # no scheme
    assert post(server, body, {"authorization": f"Bearer {server.token}"}).status_code == 200

    async def refused_client() -> None:
        async with client(server, token="wrong") as c:
            await c.list_tools()

    with pytest.raises(ExceptionGroup) as refused:  # the SDK client cannot even initialize
        asyncio.run(refused_client())
    assert [type(e).__name__ for e in leaves(refused.value)] == ["MCPError"]
    assert server.events == []  # nothing unauthenticated reached a tool


def test_tools_are_listed_called_and_recorded(server: BrokerServer) -> None:
    async def session() -> tuple[list[str], Any, Any, Any, Any]:
        async with client(server) as c:
            names = [t.name for t in (await c.list_tools()).tools]
            steers = await c.call_tool("steer_inbox", {})
            boom = await c.call_tool("boom", {})
            refused = await c.call_tool("escalate", {"category": "infeasible", "reason": "x"})
            after = await c.call_tool("steer_inbox", {})  # the broker survived the raising tool
            return names, steers, boom, refused, after

    names, steers, boom, refused, after = asyncio.run(session())
    assert names == ["boom", "distress", "hold", "steer_inbox"]
    assert not steers.is_error and json.loads(steers.content[0].text)["pending"] == ["look at the cache"]
    assert boom.is_error and "RuntimeError: the tool's own bug" in boom.content[0].text
    assert refused.is_error and "not granted to this turn" in refused.content[0].text
    assert not after.is_error
    recorded = [(e.KIND, e.tool, getattr(e, "ok", None)) for e in server.events]
    assert recorded[:2] == [("broker_call", "steer_inbox", None), ("broker_result", "steer_inbox", True)]
    assert ("broker_result", "boom", False) in recorded and ("broker_result", "escalate", False) in recorded
    assert not (server.directory.parent.parent / "ESCALATION.json").exists()


def test_between_turns_nothing_is_granted(server: BrokerServer) -> None:
    server.broker.close_turn()

    async def session() -> tuple[list[str], Any]:
        async with client(server) as c:
            return [t.name for t in (await c.list_tools()).tools], await c.call_tool("steer_inbox", {})

    names, result = asyncio.run(session())
    assert names == [] and result.is_error and "no agent turn is running" in result.content[0].text


def test_request_size_is_bounded(server: BrokerServer) -> None:
    big = json.dumps({**INITIALIZE, "padding": "x" * 20000}).encode()
    auth = {"authorization": f"Bearer {server.token}"}
    assert post(server, big, auth).status_code == 413

    async def big_call() -> Any:
        async with client(server) as c:
            return await c.call_tool("distress", {"severity": "info", "reason": "y" * 20000})

    with pytest.raises(ExceptionGroup) as too_big:
        asyncio.run(big_call())
    assert [type(e).__name__ for e in leaves(too_big.value)] == ["MCPError"]
    assert not (server.broker.runtime.distress_dir / "distress-notes.jsonl").exists()
    assert post(server, json.dumps(INITIALIZE).encode(), auth).status_code == 200  # still serving


def test_concurrency_is_bounded(server: BrokerServer, gate: Gate) -> None:
    """Two calls held in flight fill the bound; a third request is turned away, not queued."""
    auth = {"authorization": f"Bearer {server.token}"}
    call_body = json.dumps(
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "hold", "arguments": {}}}
    ).encode()
    holders = [threading.Thread(target=post, args=(server, call_body, auth)) for _ in range(2)]
    for thread in holders:
        thread.start()
    for _ in holders:
        assert gate.entered.acquire(timeout=30)
    busy = post(server, json.dumps(INITIALIZE).encode(), auth)
    assert busy.status_code == 503 and busy.headers.get("retry-after") == "1"
    gate.release.set()
    for thread in holders:
        thread.join(30)
    assert post(server, json.dumps(INITIALIZE).encode(), auth).status_code == 200


def test_a_peer_outside_loopback_is_refused(server: BrokerServer) -> None:
    """The listener binds 127.0.0.1, so no outside peer can connect; the guard refuses one anyway."""
    from crucible_broker_mcp.server import _Guard

    reached: list[str] = []

    async def app(_scope: Any, _receive: Any, _send: Any) -> None:
        reached.append("app")

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    scope = {
        "type": "http",
        "client": ("10.1.2.3", 40000),
        "headers": [(b"authorization", f"Bearer {server.token}".encode())],
    }
    asyncio.run(_Guard(app, server.token, 1024, 1)(scope, receive, send))
    assert sent[0]["status"] == 403 and reached == []
    assert server.url.startswith("http://127.0.0.1:")
