"""A small client for Oubliette's MCP lifecycle tools (streamable HTTP, bearer token), through the mcp SDK."""

from __future__ import annotations

import json
from typing import Any

ENDPOINT_ENV = "OUBLIETTE_MCP_ENDPOINT"
TOKEN_ENV = "OUBLIETTE_MCP_TOKEN"


class OublietteError(Exception):
    """A lifecycle call failed: refused, unreachable, or answered with a tool error."""


class Oubliette:
    def __init__(self, endpoint: str, token: str, timeout: float = 30.0) -> None:
        self.endpoint = endpoint
        self.token = token
        self.timeout = timeout

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """One tool call on a fresh connection (Oubliette serves stateless streamable HTTP)."""
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client  # where the SDK defines it

        http = create_mcp_http_client(headers={"Authorization": f"Bearer {self.token}"})
        try:
            async with (
                http,
                Client(
                    streamable_http_client(self.endpoint, http_client=http),
                    mode="legacy",
                    read_timeout_seconds=self.timeout,
                ) as client,
            ):
                result = await client.call_tool(tool, arguments)
        except OublietteError:
            raise
        except Exception as exc:
            raise OublietteError(f"{tool}: {type(exc).__name__}: {exc}") from None
        if result.is_error:
            text = " ".join(getattr(block, "text", "") for block in result.content)
            raise OublietteError(f"{tool}: {text.strip() or 'tool error'}")
        if isinstance(result.structured_content, dict):
            return result.structured_content
        for block in result.content:  # an older server answers with JSON text only
            try:
                found = json.loads(getattr(block, "text", ""))
            except ValueError:
                continue
            if isinstance(found, dict):
                return found
        return {}

    async def create(self, name: str, ttl_seconds: int, tier: str = "") -> dict[str, Any]:
        arguments: dict[str, Any] = {"name": name, "ttlSeconds": ttl_seconds}
        if tier:
            arguments["tier"] = tier
        return await self.call("oubliette_create", arguments)

    async def get(self, name: str) -> dict[str, Any]:
        return await self.call("oubliette_get", {"name": name})

    async def list(self) -> list[dict[str, Any]]:
        items = (await self.call("oubliette_list", {})).get("items") or []
        return [item for item in items if isinstance(item, dict)]

    async def renew(self, name: str, ttl_seconds: int) -> dict[str, Any]:
        return await self.call("oubliette_renew", {"name": name, "ttlSeconds": ttl_seconds})

    async def delete(self, name: str) -> dict[str, Any]:
        return await self.call("oubliette_delete", {"name": name})
