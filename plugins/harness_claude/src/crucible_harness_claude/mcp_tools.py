"""The turn's MCP servers as tools of the `anthropic` harness, through the mcp SDK's client.

At the start of a turn every server in `Turn.mcp_servers` is asked for its tools, and each one
becomes an Anthropic tool definition named as the Claude CLI names it, `mcp__<server>__<tool>`
(characters the Messages API does not allow in a name become `_`). A call opens a fresh client
session to its server (the broker's streamable HTTP transport is cheap to initialize and this
keeps every async context inside one `asyncio.run`), bounded by the turn's deadline.

Only streamable HTTP servers (`{"type": "http", "url": ..., "headers": ...}`, what the broker
and run services hand a turn) are supported; any other entry, or a server that cannot be
listed, is left out and reported, and the turn goes on with the rest.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from crucible_harness_claude.events import clip

_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
MAX_NAME = 64  # the Messages API's bound on a tool name
MAX_TOOLS_PER_SERVER = 64
LIST_SECONDS = 20.0  # listing one server's tools at turn start
CALL_SECONDS = 300.0  # one call, when the turn has no deadline
MAX_RESULT_CHARS = 30_000


@attrs.frozen
class McpTool:
    name: str  # as the model sees it: mcp__<server>__<tool>
    server: str
    tool: str
    description: str
    input_schema: Mapping[str, Any]

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": dict(self.input_schema)}


def tool_name(server: str, tool: str) -> str:
    return _NAME_UNSAFE.sub("_", f"mcp__{server}__{tool}")[:MAX_NAME]


def _client(config: Mapping[str, Any]) -> Any:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {str(k): str(v) for k, v in dict(config.get("headers") or {}).items()}
    return Client(
        streamable_http_client(str(config["url"]), http_client=create_mcp_http_client(headers=headers))
    )


def _unsupported(config: object) -> str | None:
    if not isinstance(config, Mapping):
        return "its entry is not a table"
    kind = config.get("type", "http")
    if kind not in ("http", "streamable-http") or not isinstance(config.get("url"), str):
        return f"only streamable HTTP servers are supported here (type {kind!r})"
    return None


def _error_text(exc: BaseException) -> str:
    """The innermost errors of what the SDK raised (it raises from task groups)."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_error_text(sub) for sub in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


def _result_text(result: Any) -> str:
    parts = []
    for block in getattr(result, "content", None) or []:
        text = getattr(block, "text", None)
        parts.append(text if isinstance(text, str) else f"[{getattr(block, 'type', 'content')}]")
    if not parts and getattr(result, "structured_content", None) is not None:
        parts.append(json.dumps(result.structured_content, default=str))
    return "\n".join(parts)


@attrs.define
class McpTools:
    """The tools of one turn's MCP servers, and a way to call them."""

    servers: Mapping[str, Mapping[str, Any]]
    remaining: Callable[[], float | None]  # seconds left in the turn, None without a deadline
    tools: dict[str, McpTool] = attrs.field(factory=dict)
    problems: list[str] = attrs.field(factory=list)  # servers left out, and why

    @classmethod
    def discover(cls, servers: Mapping[str, Any], deadline: float | None) -> McpTools:
        def remaining() -> float | None:
            return None if deadline is None else deadline - time.monotonic()

        found = cls(dict(servers), remaining)
        for server, config in sorted(servers.items()):
            problem = _unsupported(config)
            if problem is not None:
                found.problems.append(f"MCP server {server!r} left out: {problem}")
                continue
            try:
                listed = asyncio.run(found._bounded(found._list(config), LIST_SECONDS))
            except Exception as exc:  # a server that cannot be listed costs its tools, not the turn
                found.problems.append(
                    f"MCP server {server!r} left out: could not list its tools ({_error_text(exc)})"
                )
                continue
            for tool in listed[:MAX_TOOLS_PER_SERVER]:
                name = tool_name(server, tool.name)
                if name in found.tools:
                    found.problems.append(f"MCP tool {tool.name!r} of {server!r} left out: {name} is taken")
                    continue
                schema = tool.input_schema if isinstance(tool.input_schema, Mapping) else {}
                found.tools[name] = McpTool(
                    name,
                    server,
                    tool.name,
                    clip(tool.description or f"{tool.name} (MCP server {server})", 2000),
                    {"type": "object", **schema},
                )
        return found

    def definitions(self) -> list[dict[str, Any]]:
        return [tool.definition() for tool in self.tools.values()]

    def __contains__(self, name: object) -> bool:
        return name in self.tools

    def call(self, name: str, arguments: Mapping[str, Any]) -> tuple[str, bool]:
        """Call one tool; returns (text for the model, is_error). Never raises for the server's faults."""
        tool = self.tools[name]
        try:
            result = asyncio.run(
                self._bounded(self._call(self.servers[tool.server], tool.tool, arguments), CALL_SECONDS)
            )
        except TimeoutError:
            return f"{name}: no answer from MCP server {tool.server!r} in time", True
        except Exception as exc:
            return f"{name} failed: {_error_text(exc)}", True
        return clip(_result_text(result), MAX_RESULT_CHARS), bool(getattr(result, "is_error", False))

    async def _bounded(self, work: Any, cap: float) -> Any:
        left = self.remaining()
        budget = cap if left is None else max(min(cap, left), 0.1)
        return await asyncio.wait_for(work, budget)

    @staticmethod
    async def _list(config: Mapping[str, Any]) -> list[Any]:
        async with _client(config) as client:
            return list((await client.list_tools()).tools)

    @staticmethod
    async def _call(config: Mapping[str, Any], tool: str, arguments: Mapping[str, Any]) -> Any:
        async with _client(config) as client:
            return await client.call_tool(tool, dict(arguments))
