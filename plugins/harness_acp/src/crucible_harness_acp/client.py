"""The client side of one turn's ACP connection: what the agent asks of its client, answered and recorded.

- session updates, decoded into agent events (updates.py);
- permission requests, default-deny against the grant (policy.py);
- file reads and writes, inside the workspace only (confine.py);
- terminals, in the workspace, when running commands is granted (terminals.py);
- questions for a person (elicitations), declined.

Every answer that grants or refuses something is an event on the driver's stdout (events.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from acp import RequestError
from acp.interfaces import Agent
from acp.schema import (
    AllowedOutcome,
    CreateElicitationResponse,
    CreateTerminalResponse,
    DeclineElicitationResponse,
    DeniedOutcome,
    ElicitationMode,
    EnvVariable,
    KillTerminalResponse,
    PermissionOption,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    ToolCallUpdate,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

from crucible_harness_acp import confine, events
from crucible_harness_acp.policy import Grant, Option, decide, path_problem
from crucible_harness_acp.terminals import TerminalRefused, Terminals, exit_status
from crucible_harness_acp.updates import UpdateDecoder

# JSON-RPC's "invalid params": the request asked for something the client refuses to do.
REFUSED = -32602


class Out:
    """The driver's stdout: one JSON object per line, flushed at once."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def write(self, obj: Mapping[str, Any]) -> None:
        self.stream.write(json.dumps(obj, default=str) + "\n")
        self.stream.flush()

    def event(self, kind: str, fields: Mapping[str, Any]) -> None:
        self.write({events.LINE_EVENT: kind, "fields": fields})


def wire(model: Any) -> dict[str, Any]:
    dumped = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped if isinstance(dumped, dict) else {}


def _refuse(reason: str) -> RequestError:
    return RequestError(REFUSED, f"refused by crucible: {reason}")


class TurnClient:
    """The client side of the ACP connection for one turn."""

    def __init__(self, workspace: Path, grant: Grant, out: Out) -> None:
        self.workspace = workspace
        self.grant = grant
        self.out = out
        self.decoder = UpdateDecoder(out.event, on_cost=lambda cost: out.write({events.LINE_COST: cost}))
        self.terminals = Terminals(dict(os.environ))

    def on_connect(self, conn: Agent) -> None:
        pass

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.decoder.feed(wire(update))

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        view = self.decoder.call(wire(tool_call))
        problems = [p for p in (path_problem(self.workspace, path) for path in view.locations) if p]
        decision = decide(self.grant, view, problems, [Option(o.option_id, o.kind) for o in options])
        self.out.event(
            events.AGENT_PERMISSION,
            {
                "id": view.id,
                "tool": events.clip(view.names[0] if view.names else view.title, 300),
                "title": events.clip(view.title, 300),
                "family": decision.family,
                "decision": "allowed" if decision.allowed else "denied",
                "reason": events.clip(decision.reason, 500),
            },
        )
        if decision.option_id is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=decision.option_id)
        )

    def _file_decision(self, operation: str, path: str, family: str) -> None:
        if family not in self.grant.allow:
            self._record_file(operation, path, f"tool family {family!r} is not granted by [agent.acp].allow")
            raise _refuse(f"{operation} is not granted")

    def _record_file(self, operation: str, path: str, refusal: str | None) -> None:
        self.out.event(
            events.AGENT_FILE,
            {
                "operation": operation,
                "path": events.clip(path, 500),
                "decision": "denied" if refusal else "allowed",
                "reason": events.clip(refusal or "inside the workspace", 500),
            },
        )

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> ReadTextFileResponse:
        self._file_decision("read", path, "read")
        try:
            content = confine.read_text(self.workspace, path, line, limit)
        except confine.Refused as exc:
            self._record_file("read", path, str(exc))
            raise _refuse(str(exc)) from None
        self._record_file("read", path, None)
        return ReadTextFileResponse(content=content)

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        self._file_decision("write", path, "edit")
        try:
            confine.write_text(self.workspace, path, content)
        except confine.Refused as exc:
            self._record_file("write", path, str(exc))
            raise _refuse(str(exc)) from None
        self._record_file("write", path, None)
        return WriteTextFileResponse()

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        shown = events.clip(" ".join([command, *(args or [])]), 500)
        refusal = None
        if "execute" not in self.grant.allow:
            refusal = "tool family 'execute' is not granted by [agent.acp].allow"
        elif cwd is not None:
            refusal = path_problem(self.workspace, cwd)
        terminal_id = ""
        if refusal is None:
            try:
                terminal_id = await self.terminals.create(
                    command,
                    list(args or []),
                    {v.name: v.value for v in env or []},
                    self.workspace / cwd if cwd else self.workspace,
                    output_byte_limit,
                )
            except TerminalRefused as exc:
                refusal = str(exc)
        self.out.event(
            events.AGENT_TERMINAL,
            {
                "id": terminal_id or None,
                "command": shown,
                "cwd": events.clip(cwd or str(self.workspace), 500),
                "decision": "denied" if refusal else "allowed",
                "reason": refusal or "running commands is granted",
            },
        )
        if refusal:
            raise _refuse(refusal)
        return CreateTerminalResponse(terminal_id=terminal_id)

    def _terminal(self, terminal_id: str) -> Any:
        try:
            return self.terminals.get(terminal_id)
        except TerminalRefused as exc:
            raise _refuse(str(exc)) from None

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> TerminalOutputResponse:
        terminal = self._terminal(terminal_id)
        code = terminal.exit_code()  # read without reaping: the group stays safe to kill
        status = None
        if code is not None:
            exit_code, signal = exit_status(code)
            status = TerminalExitStatus(exit_code=exit_code, signal=signal)
        return TerminalOutputResponse(
            output=terminal.text(), truncated=terminal.truncated, exit_status=status
        )

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        self._terminal(terminal_id)
        exit_code, signal = exit_status(await self.terminals.wait(terminal_id))
        self.out.event(events.AGENT_TERMINAL, {"id": terminal_id, "exit_code": exit_code, "signal": signal})
        return WaitForTerminalExitResponse(exit_code=exit_code, signal=signal)

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> KillTerminalResponse:
        self._terminal(terminal_id).kill()
        return KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> ReleaseTerminalResponse:
        self._terminal(terminal_id)
        self.terminals.release(terminal_id)
        return ReleaseTerminalResponse()

    async def create_elicitation(
        self, message: str, mode: ElicitationMode, **kwargs: Any
    ) -> CreateElicitationResponse:
        # Nobody is there to answer a question mid-turn: the agent is told no, and the log says so.
        self.out.event(
            events.AGENT_NOTE, {"text": events.clip(f"declined the agent's question: {message}", 500)}
        )
        return DeclineElicitationResponse(action="decline")

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None
