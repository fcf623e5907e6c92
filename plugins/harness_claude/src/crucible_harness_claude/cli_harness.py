"""The `claude` harness: one turn of the Claude Code CLI in print mode, supervised, its stream decoded live."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import attrs

from crucible_core.api import (
    Completed,
    FailureClass,
    HarnessContext,
    SandboxCommand,
    SandboxLayout,
    Turn,
    TurnResult,
    mcp_config_file,
    run_process,
)
from crucible_harness_claude import events, launch
from crucible_harness_claude.cli_verdict import classify
from crucible_harness_claude.otlp_cost import (
    MetricsReceiver,
    OtlpUnavailable,
    choose_cost,
    otlp_unavailable,
    telemetry_env,
)
from crucible_harness_claude.sessions import Cursor, SessionStateError, SessionStore, hide_cursors
from crucible_harness_claude.settings import DEFAULT_MODEL, ClaudeSettings
from crucible_harness_claude.stream_json import StreamDecoder
from crucible_harness_claude.toolbox import ToolboxError, install_toolbox, resolve_toolbox

HARNESS_NAME = "claude"
# The OTLP receiver outlives the turn's deadline by this much at most, and lives this long when
# a turn has no deadline: it can never outlast the engine's interest in it.
_RECEIVER_GRACE_SECONDS = 30.0
_RECEIVER_LIFE_SECONDS = 6 * 3600.0


@attrs.frozen
class ClaudeCodeHarness:
    toolbox: Path | None
    sessions: SessionStore
    # A host turn runs unattended as in a sandbox only when the manifest's [agent].env says so:
    # an IS_SANDBOX=1 the engine merely inherited (the container crucible runs in) is not the turn's.
    sandbox_claimed: bool = False
    # Take the CLI's own OTLP cost metrics as a second source ([agent].otlp_cost; host turns only:
    # a sandbox cannot reach the engine's loopback).
    otlp_cost: bool = False

    @classmethod
    def from_context(cls, ctx: HarnessContext) -> ClaudeCodeHarness:
        settings = ctx.settings if ctx.settings is not None else ClaudeSettings()
        toolbox = resolve_toolbox(settings.toolbox_dir, ctx.manifest_dir)
        claimed = launch.unattended_mode(ctx.agent.env) is launch.Unattended.SANDBOX
        return cls(toolbox, SessionStore.under(ctx.private_dir, HARNESS_NAME), claimed, settings.otlp_cost)

    def preflight(self, env: Mapping[str, str]) -> list[str]:
        problems = launch.preflight_problems(env)
        if self.otlp_cost and (missing := otlp_unavailable()):
            problems.append(missing)
        return problems

    def run(self, turn: Turn) -> TurnResult:
        cli = launch.find_cli(turn.env)
        if cli.path is None:
            return TurnResult(False, FailureClass.SPAWN, note=cli.missing_note())
        if self.toolbox is not None:
            try:
                install_toolbox(self.toolbox, turn.workspace)
            except ToolboxError as exc:
                return TurnResult(False, FailureClass.SPAWN, note=str(exc))

        try:
            stored = self._open_session(turn)
        except SessionStateError as exc:
            # Starting afresh under the same name would pass a new conversation off as the old one.
            return TurnResult(False, FailureClass.AGENT, note=str(exc))

        cursors = {stored.cursor} if stored else set()

        def emit(kind: str, fields: Mapping[str, Any]) -> None:
            if decoder.session_id:
                cursors.add(decoder.session_id)
            turn.emit(kind, hide_cursors(fields, cursors))

        decoder = StreamDecoder(emit, prior_cost=stored.cost_usd if stored else 0.0)
        env = launch.child_env(turn.env, keep_sandbox_claim=self.sandbox_claimed)
        try:
            receiver = self._start_receiver(turn, env)
        except (OtlpUnavailable, OSError) as exc:
            return TurnResult(
                False, FailureClass.SPAWN, note=f"the OTLP cost receiver could not start: {exc}"
            )
        try:
            with mcp_config_file(turn.mcp_servers) as mcp_config:
                argv = launch.build_argv(
                    cli.path,
                    model=turn.model or DEFAULT_MODEL,
                    effort=turn.effort,
                    mode=launch.Unattended.SANDBOX if self.sandbox_claimed else launch.Unattended.HOST,
                    mcp_config=mcp_config,
                    mcp_server_names=sorted(turn.mcp_servers),
                    resume=stored.cursor if stored else None,
                )
                done = run_process(
                    argv,
                    cwd=turn.workspace,
                    env=env,
                    timeout=turn.deadline_seconds,
                    stdin_data=turn.prompt.encode("utf-8"),
                    on_stdout_line=decoder.feed,
                )
        finally:
            if receiver is not None:
                receiver.stop()  # the CLI flushed its metrics on exit; nothing later is this turn's
        otlp = receiver.usage() if receiver is not None else None
        verdict = classify(done, decoder, otlp.cost_usd if otlp else None)
        if otlp is not None:
            _, source = choose_cost(decoder.reported_cost, otlp.cost_usd, decoder.estimated_cost())
            emit(
                events.AGENT_COST,
                {
                    "cost_usd": verdict.cost_usd,
                    "cost_source": source,
                    "otlp_cost_usd": otlp.cost_usd,
                    "otlp_tokens": dict(otlp.tokens),
                    "otlp_requests": otlp.requests,
                    "otlp_rejected": otlp.rejected,
                },
            )
        result = self._close_session(turn, stored, decoder, verdict)
        if decoder.session_id:
            cursors.add(decoder.session_id)
        return attrs.evolve(result, note=hide_cursors(result.note, cursors))

    def _start_receiver(self, turn: Turn, env: dict[str, str]) -> MetricsReceiver | None:
        """The turn's loopback OTLP receiver, its endpoint put in the CLI's `env` (None: not asked for)."""
        if not self.otlp_cost:
            return None
        life = (turn.deadline_seconds or _RECEIVER_LIFE_SECONDS) + _RECEIVER_GRACE_SECONDS
        receiver = MetricsReceiver(max_life_seconds=life).__enter__()
        env.update(telemetry_env(receiver.endpoint))
        return receiver

    def sandbox_command(self, turn: Turn, layout: SandboxLayout) -> SandboxCommand | TurnResult:
        """The turn as a command for a sandboxing backend: bypassPermissions, because the box is the boundary.

        The CLI is looked up on the sandbox's PATH (or [agent].env's CRUCIBLE_CLAUDE_BIN), its
        config and transcripts live under the sandbox's home, and the MCP config travels as a
        0600 file in the layout's private directory.
        """
        if self.toolbox is not None:
            try:
                install_toolbox(self.toolbox, turn.workspace)  # uploaded with the workspace
            except ToolboxError as exc:
                return TurnResult(False, FailureClass.SPAWN, note=str(exc))
        try:
            stored = self._open_session(turn)
        except SessionStateError as exc:
            return TurnResult(False, FailureClass.AGENT, note=str(exc))
        cursors = {stored.cursor} if stored else set()

        def emit(kind: str, fields: Mapping[str, Any]) -> None:
            if decoder.session_id:
                cursors.add(decoder.session_id)
            turn.emit(kind, hide_cursors(fields, cursors))

        decoder = StreamDecoder(emit, prior_cost=stored.cost_usd if stored else 0.0)
        env = launch.child_env(turn.env)
        config_dir = f"{layout.home}/.claude"
        env.update({"IS_SANDBOX": "1", "HOME": layout.home, "CLAUDE_CONFIG_DIR": config_dir})
        files: dict[str, bytes] = {}
        mcp_config = None
        if turn.mcp_servers:
            mcp_config = PurePosixPath(layout.private) / "mcp.json"
            files[str(mcp_config)] = json.dumps({"mcpServers": dict(turn.mcp_servers)}).encode()
        argv = launch.build_argv(
            PurePosixPath(env.get(launch.CLI_BIN_ENV) or launch.CLI_NAME),
            model=turn.model or DEFAULT_MODEL,
            effort=turn.effort,
            mode=launch.Unattended.SANDBOX,
            mcp_config=mcp_config,
            mcp_server_names=sorted(turn.mcp_servers),
            resume=stored.cursor if stored else None,
        )

        def finish(done: Completed) -> TurnResult:
            result = self._close_session(turn, stored, decoder, classify(done, decoder))
            if decoder.session_id:
                cursors.add(decoder.session_id)
            return attrs.evolve(result, note=hide_cursors(result.note, cursors))

        return SandboxCommand(
            argv=tuple(argv),
            env=env,
            stdin=turn.prompt.encode("utf-8"),
            on_stdout_line=decoder.feed,
            finish=finish,
            files=files,
            session_dirs=(f"{config_dir}/projects",) if turn.session else (),
        )

    def _open_session(self, turn: Turn) -> Cursor | None:
        """The stored cursor of the turn's logical session (None: a fresh one), announced in the log."""
        if not turn.session:
            return None
        stored = self.sessions.load(turn.session)
        ordinal = (stored.turns if stored else 0) + 1
        turn.emit(
            events.AGENT_SESSION,
            {"session": turn.session, "action": "resumed" if stored else "started", "turn": ordinal},
        )
        return stored

    def _close_session(
        self, turn: Turn, stored: Cursor | None, decoder: StreamDecoder, result: TurnResult
    ) -> TurnResult:
        if not turn.session:
            return result
        if decoder.started and decoder.session_id:
            # Kept even after a failed turn: the conversation happened, and the session goes on
            # from it (the checkout may roll back, the solver's memory does not).
            before = stored.cost_usd if stored else 0.0
            total = decoder.conversation_cost
            spent = total if total is not None else before + result.cost_usd
            turns = (stored.turns if stored else 0) + 1
            self.sessions.save(turn.session, Cursor(decoder.session_id, turns, spent))
        elif stored is not None and decoder.result is not None:
            # The CLI answered, but never opened the conversation: it cannot resume that cursor.
            path = self.sessions.path_of(turn.session)
            note = f"{result.note}; session {turn.session!r} could not be resumed: delete {path} to start it afresh"
            result = attrs.evolve(result, note=note)
        return result
