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
from tests.harness_claude.support import MEASURE, toml_table

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


def write_domain(
    root: Path,
    agent_env: dict[str, str],
    command: Sequence[str],
    *,
    allow: Sequence[str] = DEFAULT_ALLOW,
    harness: str = "acp",
    session: str | None = None,
) -> Path:
    """The counter-like domain: value.txt is the score, the local backend runs the given harness,
    and the manifest carries the [agent.acp] table whichever harness it selects."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "value.txt").write_text("1\n")
    measure = root / "measure.sh"
    measure.write_text(MEASURE)
    measure.chmod(0o755)
    session_line = f'session = "{session}"\n' if session else ""
    manifest = root / "crucible.toml"
    manifest.write_text(
        f"""
[repo]
path = "."

[workspace]
dir = "workspace"
setup_cmd = "mkdir -p workspace && cp value.txt workspace/"
inject = ["measure.sh"]

[agent]
backend = "local"
harness = "{harness}"
model = "claude-sonnet-4-6"
goal = "Raise the integer in value.txt."
turn_timeout = 90
{session_line}env = {toml_table(agent_env)}

[agent.acp]
command = {json.dumps(list(command))}
allow = {json.dumps(list(allow))}
credentials = ["ANTHROPIC_API_KEY"]

[judge]
measure_cmd = "./measure.sh"
direction = "higher"
objective = "value"
"""
    )
    return manifest
