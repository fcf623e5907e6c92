"""What the harness hands the driver for one turn: written as a mode-0600 JSON file, read once.

The file may carry tokens (an MCP server's bearer header), so it lives in a private directory
outside the run's state and workspace (the layout's private directory in a sandbox) and is
removed with the turn. The agent's environment is not in it: the driver inherits that. Nor is
the workspace: it is the directory the driver starts in, which is the one path every place a
turn runs agrees on (the host's workspace, a sandbox's workdir, a pod's task directory).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

# How the driver is started, wherever it runs: `<python> -m crucible_harness_acp.driver CONFIG`.
DRIVER_MODULE = "crucible_harness_acp.driver"


@attrs.frozen
class TurnConfig:
    command: tuple[str, ...]  # the agent's argv
    allow: tuple[str, ...]  # the granted tool families
    mcp_servers: Mapping[str, Any] = attrs.field(factory=dict)  # name -> {"type": "http", "url", "headers"}
    model: str | None = None
    effort: str | None = None

    def to_json(self) -> bytes:
        data = attrs.asdict(self)
        data["mcp_servers"] = dict(self.mcp_servers)
        return json.dumps(data).encode("utf-8")

    @classmethod
    def from_json(cls, raw: bytes) -> TurnConfig:
        data = json.loads(raw)
        return cls(
            command=tuple(str(word) for word in data["command"]),
            allow=tuple(str(family) for family in data["allow"]),
            mcp_servers=dict(data.get("mcp_servers") or {}),
            model=data.get("model"),
            effort=data.get("effort"),
        )

    def write(self, path: Path) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(self.to_json())
