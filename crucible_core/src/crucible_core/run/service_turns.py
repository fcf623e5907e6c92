"""Run services for the loop's agent turns: what `[agent].services` names, handed to each turn.

Core's own `crucible_before_turn` implementation (builtin_plugin.py) calls `turn_additions`:
each named service is started at the first turn that needs it (never before), waited on until
ready, and handed to the turn as the MCP server `service.<name>` (an MCP transport) plus the
forward's URL, bearer and handoff in its environment. A service that cannot be reached now fails
that turn as a transport failure; the run's end stops every service (the session, session/shell.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.manifest.service_declaration import CAPABILITY_PREFIX
from crucible_core.run.lifecycle import TurnAdditions, TurnUnavailable

# The runtime's module (with the catalog and the resolution under it) loads at the first turn
# of a run that names a service; every other turn returns before it is needed.
if TYPE_CHECKING:
    from crucible_core.run.lifecycle import TurnContext
    from crucible_core.services.runtime import ServiceForward


def turn_label(iteration: int) -> str:
    """How the session log names an agent turn as the dispatch that started a service."""
    return f"agent turn {iteration}"


def turn_additions(context: TurnContext) -> TurnAdditions | None:
    runtime = context.run.services
    manifest = context.run.manifest
    if runtime is None or manifest is None:
        return None
    names = manifest.manifest.agent.services
    if not names:
        return None
    from crucible_core.services.runtime import ServiceUnavailable

    servers: dict[str, object] = {}
    forwards: list[ServiceForward] = []
    for name in names:
        try:
            forward = runtime.prepare(CAPABILITY_PREFIX + name, turn_label(context.iteration))
        except ServiceUnavailable as exc:
            raise TurnUnavailable(f"service {name}: {exc}") from None
        forwards.append(forward)
        if forward.mcp_server is not None:
            servers[forward.mcp_server] = forward.mcp_config()
    return TurnAdditions(mcp_servers=servers, services=tuple(forwards))
