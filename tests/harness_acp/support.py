"""Helpers for the acp harness tests: the pinned ACP agents, turn environments, harnesses, a counter domain."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from crucible_core.manifest.models import AgentSection
from crucible_core.protocols import HarnessContext
from crucible_harness_acp.harness import AcpHarness
from crucible_harness_acp.settings import DEFAULT_ALLOW, AcpSettings, AcpTable
from tests.fakes.anthropic_api import FakeAnthropic
from tests.harness_claude.support import write_domain as claude_domain

ROOT = Path(__file__).resolve().parents[2]
# Where `python3 tasks.py test` installs the pinned agents; the env var is what it passes on.
DEFAULT_AGENTS = ROOT / ".cache" / "acp-agents" / "node_modules" / ".bin"
# Reports usage and cost; does its own file work and asks permission for edits and commands.
AGENT_SDK = "claude-agent-acp"
# Routes file reads and writes (mcp__acp__Read/Write/Edit) and commands (mcp__acp__Bash) through the client.
CLIENT_FS = "claude-code-acp"
TEST_KEY = "sk-ant-api03-crucible-acp-test-key-not-real"


def agent_path(name: str) -> Path | None:
    configured = os.environ.get("CRUCIBLE_TEST_ACP_AGENTS")
    candidate = (Path(configured) if configured else DEFAULT_AGENTS) / name
    return candidate if candidate.exists() else None


def model_env(fake: FakeAnthropic, **extra: str) -> dict[str, str]:
    """A turn environment pointing the agent's model client at the fake (the harness gives it a home)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "ANTHROPIC_BASE_URL": fake.base_url,
        "ANTHROPIC_API_KEY": TEST_KEY,
        # A scripted API error should fail the turn now, not after the SDK's backoff retries.
        "CLAUDE_CODE_MAX_RETRIES": "0",
    }
    env.update(extra)
    return env


def make_harness(
    tmp_path: Path,
    command: Sequence[str],
    *,
    allow: Sequence[str] = DEFAULT_ALLOW,
    credentials: Sequence[str] = ("ANTHROPIC_API_KEY",),
    agent_env: dict[str, str] | None = None,
) -> AcpHarness:
    private = tmp_path / "state" / "private"
    private.mkdir(parents=True, exist_ok=True, mode=0o700)
    table = AcpTable(command=tuple(command), allow=tuple(allow), credentials=tuple(credentials))
    context = HarnessContext(AgentSection(env=dict(agent_env or {})), tmp_path, private, AcpSettings(table))
    return AcpHarness.from_context(context)


def acp_table(command: Sequence[str], allow: Sequence[str] = DEFAULT_ALLOW) -> str:
    return (
        f"\n[agent.acp]\ncommand = {json.dumps(list(command))}\nallow = {json.dumps(list(allow))}\n"
        'credentials = ["ANTHROPIC_API_KEY"]\n'
    )


def with_acp(manifest: Path, command: Sequence[str], *, harness: str = "acp") -> Path:
    """A counter manifest of the Claude harness tests, given the [agent.acp] table and `harness`."""
    text = manifest.read_text().replace('harness = "claude"', f'harness = "{harness}"')
    manifest.write_text(text + acp_table(command))
    return manifest


def write_domain(root: Path, agent_env: dict[str, str], command: Sequence[str]) -> Path:
    """The counter-like domain (value.txt is the score) on the local backend with harness = "acp";
    the manifest is the Claude harness tests' one plus the [agent.acp] table."""
    return with_acp(claude_domain(root, agent_env), command)
