"""crucible-plugin-service-transports: how run services are served to the tasks that need them.

Core keeps the services' declaration, the attested catalog and the lifecycle; this plugin serves
the catalog's transports (`mcp-http`, `mcp-stdio`, `http`): the loopback forward that requires
the run's per-service bearer, the relay that turns an MCP stdio tool into MCP over HTTP, and the
readiness probes (an MCP initialize through the mcp SDK, or any HTTP answer). Without it a run
that declares a service is refused before its log opens, naming this distribution.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:
    from crucible_core.api import Register, ServiceTransport


@hookimpl
def crucible_register_service_transports(register: Register[ServiceTransport]) -> None:
    from crucible_service_transports.transports import McpHttp, McpStdio, PlainHttp

    register("mcp-http", McpHttp())
    register("mcp-stdio", McpStdio())
    register("http", PlainHttp())
