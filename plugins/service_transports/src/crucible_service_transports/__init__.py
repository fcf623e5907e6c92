"""crucible-plugin-service-transports: how run services are served to the tasks that need them.

Core keeps the services' declaration, the attested catalog and the lifecycle; this plugin serves
the catalog's transports (`mcp-http`, `mcp-stdio`, `http`): the loopback forward that requires
the run's per-service bearer, the relay that turns an MCP stdio tool into MCP over HTTP, and the
readiness probes (an MCP initialize through the mcp SDK, or any HTTP answer). Without it a run
that declares a service is refused before its log opens, naming this distribution.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from crucible_core.api import Deferred, hookimpl

if TYPE_CHECKING:
    from crucible_core.api import Register, ServiceTransport


@hookimpl
def crucible_register_service_transports(register: Register[ServiceTransport]) -> None:
    # Deferred: the transports' module builds attrs classes, which listing plugins need not pay for.
    register("mcp-http", Deferred(functools.partial(_transport, "McpHttp")))
    register("mcp-stdio", Deferred(functools.partial(_transport, "McpStdio")))
    register("http", Deferred(functools.partial(_transport, "PlainHttp")))


def _transport(name: str) -> ServiceTransport:
    from crucible_service_transports import transports

    transport: ServiceTransport = getattr(transports, name)()
    return transport
