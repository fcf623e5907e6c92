"""A turn's MCP servers as a client config file (`{"mcpServers": {...}}`) that exists only while the turn runs.

A server entry may carry a token (a header, an env value), so the file is 0600 in a private
temporary directory outside the run's state and workspace, and removed after the turn.
Backends and harnesses that hand MCP servers to an agent program share it. The directory's
name carries the engine's pid: an engine killed mid-turn cannot remove its own, so the next
one to write a config removes every such directory whose engine is gone.
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
PREFIX = "crucible-mcp-"


@contextlib.contextmanager
def mcp_config_file(servers: Mapping[str, Any]) -> Iterator[Path | None]:
    if not servers:
        yield None
        return
    remove_orphans(Path(tempfile.gettempdir()))
    folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
    try:
        path = folder / "mcp.json"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"mcpServers": dict(servers)}, handle)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def remove_orphans(tmp: Path) -> list[Path]:
    """Remove this user's config directories whose engine process no longer exists."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(tmp))
    except OSError:
        return removed
    for entry in entries:
        pid_text = entry.name[len(PREFIX) :].split("-", 1)[0]
        if not entry.name.startswith(PREFIX) or not pid_text.isdigit():
            continue  # not ours, or made before the name carried a pid
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not entry.is_dir(follow_symlinks=False) or st.st_uid != os.getuid() or _alive(int(pid_text)):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process: alive, and not ours to judge
    return True
