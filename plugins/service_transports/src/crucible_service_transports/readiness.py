"""Readiness probes: when a started service counts as serving (C-SERVICE-LIFECYCLE).

An MCP transport is ready once an MCP initialize handshake succeeds (made with the mcp SDK's
client, over streamable HTTP: a stdio tool is probed through its relay); plain HTTP is ready on
any HTTP answer at all. Every probe is bounded and answers False rather than raising.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import socket


def listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def http_answers(port: int, timeout: float) -> bool:
    if not listening(port):
        return False
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", "/")
        connection.getresponse().read(0)
        return True  # any HTTP answer at all means it is serving
    except OSError:
        return False
    finally:
        connection.close()


def mcp_initializes(port: int, mcp_path: str, timeout: float) -> bool:
    if not listening(port):  # cheap: an MCP client waits out its timeout on a refused connection
        return False
    return _mcp_initialize(f"http://127.0.0.1:{port}{mcp_path}", timeout)


def _mcp_initialize(url: str, timeout: float) -> bool:
    """An MCP initialize handshake through the mcp SDK's client (streamable HTTP)."""
    from mcp import Client

    async def handshake() -> None:
        async with Client(url, mode="legacy", read_timeout_seconds=timeout):
            pass  # entering performed the initialize request and its acknowledgement

    async def bounded() -> bool:
        try:
            await asyncio.wait_for(handshake(), timeout)
            return True
        except Exception:  # refused, not yet listening, a bad answer: not ready (yet)
            return False

    with contextlib.suppress(Exception):
        return asyncio.run(bounded())
    return False
