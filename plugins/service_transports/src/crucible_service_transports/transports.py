"""The catalog's three transports: each puts the engine's bearer-checking forward in front of a
started tool and probes it the way its transport says it becomes ready.

- `mcp-http`: the tool serves MCP streamable HTTP on its port; ready on an MCP initialize.
- `http`: the tool serves HTTP on its port; ready on any HTTP answer.
- `mcp-stdio`: the tool is an MCP server on its standard streams; a relay serves it as MCP
  streamable HTTP on a loopback port of its own, the forward sits in front of the relay, and
  readiness is an MCP initialize through the relay.

The HTTP servers and the probes are imported when a service starts, not when the transports are
registered (every `crucible plugins` registers them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from crucible_core.api import ServedTool
    from crucible_service_transports.forward import AuthenticatingForward
    from crucible_service_transports.stdio_relay import StdioRelay


@attrs.define
class Endpoint:
    """One served instance: its forward, the relay for a stdio tool, and how to probe it."""

    port: int  # the tool's own port, or the relay's
    mcp_path: str
    forward: AuthenticatingForward
    probe: Callable[[int, str, float], bool]
    relay: StdioRelay | None = None

    def url(self, path: str = "") -> str:
        return self.forward.url(path)

    def ready(self, timeout: float) -> bool:
        return self.probe(self.port, self.mcp_path, timeout)

    def close(self) -> None:
        self.forward.close()
        if self.relay is not None:
            self.relay.close()


def _forward(port: int, tool: ServedTool) -> AuthenticatingForward:
    from crucible_service_transports.forward import AuthenticatingForward

    return AuthenticatingForward(port, tool.bearer).start()


class McpHttp:
    """`mcp-http`: MCP streamable HTTP on the tool's own port."""

    def serve(self, tool: ServedTool) -> Endpoint:
        from crucible_service_transports.readiness import mcp_initializes

        return Endpoint(tool.port, tool.mcp_path, _forward(tool.port, tool), mcp_initializes)


class PlainHttp:
    """`http`: any HTTP on the tool's own port."""

    def serve(self, tool: ServedTool) -> Endpoint:
        from crucible_service_transports.readiness import http_answers

        def any_answer(port: int, _mcp_path: str, timeout: float) -> bool:
            return http_answers(port, timeout)

        return Endpoint(tool.port, tool.mcp_path, _forward(tool.port, tool), any_answer)


class McpStdio:
    """`mcp-stdio`: the engine is the tool's one client and relays it onto loopback HTTP."""

    def serve(self, tool: ServedTool) -> Endpoint:
        from crucible_service_transports.readiness import mcp_initializes
        from crucible_service_transports.stdio_relay import StdioRelay

        if tool.stdin is None or tool.stdout is None:
            raise OSError(f"service {tool.service}: an mcp-stdio tool needs its standard streams")
        relay = StdioRelay(tool.stdin, tool.stdout, tool.mcp_path).start()
        try:
            forward = _forward(relay.port, tool)
        except OSError:
            relay.close()
            raise
        return Endpoint(relay.port, tool.mcp_path, forward, mcp_initializes, relay)
