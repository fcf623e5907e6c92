"""The `acp` harness: one turn of any agent that speaks the Agent Client Protocol, through the driver process.

On the host (the `local` backend) the harness starts the driver under crucible's supervisor
with a fresh home for the agent; in a sandbox (openshell, or a task runner's pod) it describes
the same driver as a command (`SandboxHarness`), so the sandbox needs Python with this plugin
and the agent installed. Either way the driver's lines are decoded as they arrive.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import attrs

from crucible_core.api import (
    FailureClass,
    HarnessContext,
    ManifestError,
    SandboxCommand,
    SandboxLayout,
    Turn,
    TurnResult,
    run_process,
)
from crucible_harness_acp import events, launch
from crucible_harness_acp.config import DRIVER_MODULE, TurnConfig
from crucible_harness_acp.settings import AcpSettings, AcpTable
from crucible_harness_acp.stream import DriverStream
from crucible_harness_acp.verdict import classify, turn_cost

HARNESS_NAME = "acp"
# The interpreter a sandbox runs the driver with (looked up on the sandbox's PATH).
SANDBOX_PYTHON = "python3"


def _secrets(turn: Turn, table: AcpTable) -> set[str]:
    """Values this turn handles that must never reach an event: the credentials and MCP headers."""
    found = {turn.env[name] for name in table.credentials if turn.env.get(name)}
    for server in turn.mcp_servers.values():
        if isinstance(server, Mapping):
            found |= {str(v) for v in dict(server.get("headers") or {}).values()}
            found |= {str(v) for v in dict(server.get("env") or {}).values()}
    return {value for value in found if len(value) >= 6}


@attrs.frozen
class AcpHarness:
    table: AcpTable
    manifest_dir: Path
    private_dir: Path
    # The variables the manifest's [agent].env sets itself (a home of its own, ...): left as written.
    manifest_env: frozenset[str] = frozenset()

    @classmethod
    def from_context(cls, ctx: HarnessContext) -> AcpHarness:
        settings = ctx.settings
        if not isinstance(settings, AcpSettings):
            raise ManifestError(
                'harness = "acp" needs an [agent.acp] table naming the agent command',
                hint='add [agent.acp] with command = ["<your ACP agent>"] (docs/agents.md)',
            )
        return cls(settings.acp, ctx.manifest_dir, ctx.private_dir, frozenset(ctx.agent.env))

    def preflight(self, env: Mapping[str, str]) -> list[str]:
        return launch.preflight_problems(self.table, env, self.manifest_dir)

    # -- one turn on this host --------------------------------------------------------------------

    def run(self, turn: Turn) -> TurnResult:
        missing = launch.missing_credentials(self.table, turn.env)
        if missing:
            return TurnResult(False, FailureClass.SPAWN, note="; ".join(missing))
        refused = self._open_session(turn)
        if refused is not None:
            return refused
        lookup = launch.find_command(self.table.command, turn.env, self.manifest_dir)
        if lookup.argv is None:
            return TurnResult(False, FailureClass.SPAWN, note=lookup.missing_note())
        folder = Path(tempfile.mkdtemp(prefix="crucible-acp-"))
        try:
            home = folder / "home"
            home.mkdir(mode=0o700)
            config = folder / "turn.json"
            self._config(turn, lookup.argv).write(config)
            stream = DriverStream(turn.emit, _secrets(turn, self.table))
            env = launch.child_env(turn.env, launch.home_env(str(home), self.manifest_env), self.manifest_env)
            done = run_process(
                [sys.executable, "-m", DRIVER_MODULE, str(config)],
                cwd=turn.workspace,
                env=env,
                timeout=turn.deadline_seconds,
                stdin_data=turn.prompt.encode("utf-8"),
                on_stdout_line=stream.feed,
            )
            return self._finish(turn, stream, done)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    # -- one turn as a command for a sandbox ------------------------------------------------------

    def sandbox_command(self, turn: Turn, layout: SandboxLayout) -> SandboxCommand | TurnResult:
        """The driver as the sandbox's command: the agent's command is looked up on the sandbox's
        PATH, its home is the layout's, and the turn's configuration travels as a 0600 file in the
        layout's private directory. The credentials are not checked here: a sandbox gets them from
        its gateway's providers or the deploy profile, which this side cannot see."""
        refused = self._open_session(turn)
        if refused is not None:
            return refused
        if os.sep in self.table.command[0] and not os.path.isabs(self.table.command[0]):
            note = "in a sandbox [agent.acp].command must be a bare name or an absolute path in the image"
            return TurnResult(False, FailureClass.SPAWN, note=note)
        config = PurePosixPath(layout.private) / "acp-turn.json"
        stream = DriverStream(turn.emit, _secrets(turn, self.table))
        env = launch.child_env(turn.env, launch.home_env(layout.home, self.manifest_env), self.manifest_env)
        return SandboxCommand(
            argv=(SANDBOX_PYTHON, "-m", DRIVER_MODULE, str(config)),
            env=env,
            stdin=turn.prompt.encode("utf-8"),
            on_stdout_line=stream.feed,
            finish=lambda done: self._finish(turn, stream, done),
            files={str(config): self._config(turn, self.table.command).to_json()},
        )

    # -- shared --------------------------------------------------------------------------------------

    def _config(self, turn: Turn, argv: tuple[str, ...]) -> TurnConfig:
        return TurnConfig(
            command=argv,
            allow=self.table.allow,
            mcp_servers=dict(turn.mcp_servers),
            model=self.table.model or turn.model,
            effort=turn.effort,
        )

    def _open_session(self, turn: Turn) -> TurnResult | None:
        """Announce a logical session's first turn; refuse its second (None: the turn may run).

        ACP sessions here live one turn, and starting afresh under the old name would pass a
        new conversation off as the old one."""
        if not turn.session:
            return None
        if self._session_marker(turn.session).exists():
            note = f"the acp harness cannot resume logical session {turn.session!r}: its first turn has run"
            return TurnResult(False, FailureClass.AGENT, note=note)
        turn.emit(events.AGENT_SESSION, {"session": turn.session, "action": "started", "turn": 1})
        return None

    def _session_marker(self, session: str) -> Path:
        digest = hashlib.sha256(session.encode("utf-8")).hexdigest()[:32]
        return self.private_dir / "sessions" / HARNESS_NAME / f"{digest}.started"

    def _finish(self, turn: Turn, stream: DriverStream, done: Any) -> TurnResult:
        result = classify(done, stream)
        if turn.session and stream.started:  # the conversation happened, whatever came of it
            marker = self._session_marker(turn.session)
            marker.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            marker.write_text(turn.session, encoding="utf-8")
        end = stream.end or {}
        usage = end.get("usage") if isinstance(end.get("usage"), Mapping) else None
        cost = turn_cost(stream) if (stream.cost_usd is not None or end.get("cost_usd") is not None) else None
        if usage is not None or cost is not None:
            counts = dict(usage or {})
            turn.emit(
                events.AGENT_USAGE,
                {
                    "input_tokens": counts.get("inputTokens", 0),
                    "output_tokens": counts.get("outputTokens", 0),
                    "cache_read_input_tokens": counts.get("cachedReadTokens") or 0,
                    "cache_creation_input_tokens": counts.get("cachedWriteTokens") or 0,
                    "cost_usd": cost,
                },
            )
        turn.emit(
            events.AGENT_RESULT,
            stream.hide(
                {
                    "ok": result.ok,
                    "subtype": end.get("stop_reason") or (result.failure.value if result.failure else ""),
                    "cost_usd": cost,
                    "duration_ms": end.get("duration_ms"),
                    "text": events.clip(result.note, 600),
                }
            ),
        )
        return attrs.evolve(result, note=stream.hide(result.note))
