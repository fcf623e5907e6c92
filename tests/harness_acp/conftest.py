"""Fixtures for the acp harness tests: the pinned ACP agents (or a skip), the scripted model server, a workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness_acp.support import AGENT_SDK, CLIENT_FS, agent_path
from tests.harness_claude.conftest import fake  # noqa: F401  (the scripted model server)

SKIP = (
    "the pinned ACP agents are not installed: `python3 tasks.py test` installs them into "
    ".cache/acp-agents (needs npm), or set CRUCIBLE_TEST_ACP_AGENTS to their bin directory"
)


def _agent(name: str) -> Path:
    path = agent_path(name)
    if path is None:
        pytest.skip(SKIP)
    return path


@pytest.fixture
def sdk_agent() -> Path:
    """claude-agent-acp: does its own file work, asks permission, reports usage and cost."""
    return _agent(AGENT_SDK)


@pytest.fixture
def fs_agent() -> Path:
    """claude-code-acp: routes file and terminal work through the client."""
    return _agent(CLIENT_FS)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    (ws / "value.txt").write_text("1\n")
    return ws.resolve()
