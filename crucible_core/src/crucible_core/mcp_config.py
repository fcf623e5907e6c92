"""A turn's MCP servers as a client config file (`{"mcpServers": {...}}`) that exists only while the turn runs.

A server entry may carry a token (a header, an env value), so the file is 0600 in a private
temporary directory outside the run's state and workspace, and removed after the turn.
Backends and harnesses that hand MCP servers to an agent program share it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

# What a `command` agent reads to find the turn's MCP servers (the broker among them).
ENV_MCP_CONFIG = "CRUCIBLE_MCP_CONFIG"


@contextlib.contextmanager
def mcp_config_file(servers: Mapping[str, Any]) -> Iterator[Path | None]:
    if not servers:
        yield None
        return
    folder = Path(tempfile.mkdtemp(prefix="crucible-mcp-"))
    try:
        path = folder / "mcp.json"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"mcpServers": dict(servers)}, handle)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)
