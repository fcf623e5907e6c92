"""The `command` backend's manifest key, [agent].agent_cmd, validated by crucible core's strict converter."""

from __future__ import annotations

import attrs


@attrs.frozen
class CommandBackendSettings:
    agent_cmd: str  # run via `sh -c` in the workspace as the turn's proposal

    def __attrs_post_init__(self) -> None:
        if not self.agent_cmd.strip():
            raise ValueError('agent_cmd must not be empty when backend = "command"')
