"""The turn's MCP config file: 0600, gone after the turn, and no leftovers from killed engines."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from crucible_core import mcp_config


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-S", "-c", "pass"])
    child.wait()
    return child.pid


def test_the_config_is_private_and_removed_after_the_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    with mcp_config.mcp_config_file({"crucible": {"url": "http://127.0.0.1:1/mcp"}}) as path:
        assert path is not None and path.is_file()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert path.parent.name.startswith(f"crucible-mcp-{os.getpid()}-")
    assert not path.parent.exists()


def test_directories_of_engines_that_are_gone_are_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    orphan = tmp_path / f"crucible-mcp-{dead_pid()}-abcd"
    live = tmp_path / f"crucible-mcp-{os.getppid()}-efgh"
    unnamed = tmp_path / "crucible-mcp-k3j2l1"  # an older engine's: no pid to judge by
    other = tmp_path / "unrelated"
    for folder in (orphan, live, unnamed, other):
        folder.mkdir()
        (folder / "mcp.json").write_text("{}")
    link = tmp_path / f"crucible-mcp-{dead_pid()}-link"
    link.symlink_to(other)
    with mcp_config.mcp_config_file({"crucible": {"url": "http://127.0.0.1:1/mcp"}}):
        pass
    assert not orphan.exists()
    assert live.exists() and unnamed.exists() and (other / "mcp.json").exists()
    assert link.is_symlink()  # never followed, never removed
