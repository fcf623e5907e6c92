"""Helpers for the Claude harness tests: turn environments, an event recorder, turns, an argv-recording shim."""

from __future__ import annotations

import json
import os
import shlex
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from crucible_core.manifest.models import AgentSection
from crucible_core.protocols import HarnessContext, Turn
from tests.fakes.anthropic_api import FakeAnthropic

ROOT = Path(__file__).resolve().parents[2]
# Where `python3 tasks.py test` installs the pinned CLI; the env var is what it passes on.
DEFAULT_CLI = ROOT / ".cache" / "claude-cli" / "node_modules" / ".bin" / "claude"
TEST_KEY = "sk-ant-api03-crucible-test-key-not-a-real-one"


def claude_cli_path() -> Path | None:
    configured = os.environ.get("CRUCIBLE_TEST_CLAUDE_CLI")
    candidate = Path(configured) if configured else DEFAULT_CLI
    return candidate if candidate.exists() else None


def model_env(fake: FakeAnthropic, home: Path, **extra: str) -> dict[str, str]:
    """A turn environment pointing every Anthropic client at the fake, with its own home."""
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        # The CLI keeps its settings and transcripts here, never in the developer's ~/.claude.
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "ANTHROPIC_BASE_URL": fake.base_url,
        "ANTHROPIC_API_KEY": TEST_KEY,
        # A scripted API error should fail the turn now, not after the CLI's backoff retries.
        "CLAUDE_CODE_MAX_RETRIES": "0",
    }
    env.update(extra)
    return env


@attrs.define
class Recorder:
    """A Turn's emit: keeps every agent event in order."""

    events: list[tuple[str, dict[str, Any]]] = attrs.field(factory=list)

    def __call__(self, kind: str, fields: Mapping[str, Any]) -> None:
        self.events.append((kind, dict(fields)))

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.events]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [fields for k, fields in self.events if k == kind]


def make_turn(
    workspace: Path,
    env: Mapping[str, str],
    recorder: Recorder,
    *,
    prompt: str = "Raise the number in value.txt by one.",
    deadline: float | None = 60,
    session: str | None = None,
    model: str = "claude-sonnet-4-6",
    effort: str | None = None,
    mcp_servers: Mapping[str, Any] | None = None,
) -> Turn:
    return Turn(
        iteration=1,
        prompt=prompt,
        workspace=workspace,
        env=dict(env),
        deadline_seconds=deadline,
        emit=recorder,
        model=model,
        effort=effort,
        session=session,
        mcp_servers=dict(mcp_servers or {}),
    )


def harness_context(
    manifest_dir: Path, private_dir: Path, *, toolbox_dir: str | None = None, **agent: Any
) -> HarnessContext:
    from crucible_harness_claude.settings import ClaudeSettings

    return HarnessContext(AgentSection(**agent), manifest_dir, private_dir, ClaudeSettings(toolbox_dir))


def argv_recording_shim(tmp_path: Path, real_cli: Path) -> tuple[Path, Path]:
    """A stand-in `claude` that writes its argv (one per line) to a file, then execs the real CLI."""
    log = tmp_path / "claude-argv.log"
    shim = tmp_path / "claude-shim"
    shim.write_text(
        "#!/bin/sh\n"
        f"printf '%s\\n' \"$@\" >> {shlex.quote(str(log))}\n"
        f"printf -- '--end--\\n' >> {shlex.quote(str(log))}\n"
        f'exec {shlex.quote(str(real_cli))} "$@"\n'
    )
    shim.chmod(0o755)
    return shim, log


def recorded_invocations(log: Path) -> list[list[str]]:
    runs: list[list[str]] = [[]]
    for line in log.read_text().splitlines():
        if line == "--end--":
            runs.append([])
        else:
            runs[-1].append(line)
    return [run for run in runs if run]


def live_processes_with(marker: str) -> list[int]:
    """Pids whose environment carries the marker: the CLI and everything it started."""
    needle = marker.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes():
                status = (entry / "status").read_text()
                if "\nState:\tZ" not in status:
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def wait_for(condition: Callable[[], bool], *, seconds: float) -> bool:
    """Poll a condition (bounded); True once it holds, False if it never did in time."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


MEASURE = """#!/bin/sh
v=$(cat value.txt 2>/dev/null || true)
case "$v" in ''|*[!0-9]*) printf '{"valid": false, "note": "not a number"}\\n'; exit 0 ;; esac
printf '{"valid": true, "score": %s, "note": "value=%s"}\\n' "$v" "$v"
"""


def toml_table(values: dict[str, str]) -> str:
    return "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in values.items()) + " }"


def write_domain(
    root: Path, agent_env: dict[str, str], *, session: str | None = None, harness: str = "claude"
) -> Path:
    """A counter-like domain: value.txt is the score, the local backend runs the given harness."""
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
turn_timeout = 60
{session_line}env = {toml_table(agent_env)}

[judge]
measure_cmd = "./measure.sh"
direction = "higher"
objective = "value"
"""
    )
    return manifest


def agent_env(fake: FakeAnthropic, home: Path, **extra: str) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    return {
        "ANTHROPIC_BASE_URL": fake.base_url,
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "CLAUDE_CODE_MAX_RETRIES": "0",
        **extra,
    }
