"""The broker of one run: tool dispatch, per-turn grants, recording, over core's mediation point.

The MCP server (server.py) calls `list_tools` and `call`; it never decides anything. Its
mediator (mediation.py) is the run's one mediation point, for tools and the engine's own writes. Every call
and its result become session events (redacted by the session log); a tool the current turn is
not granted, or a call while no turn runs, is refused; a tool that raises returns an error and
the broker stays up. Core resolves which tools are granted and what may be written; the engine
only opens and closes turns here (crucible_core.api.TurnBroker).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from crucible_broker_mcp.mediation import Mediator, used_counts
from crucible_core.api import (
    BrokerRequest,
    BrokerRuntime,
    BrokerTool,
    Declaration,
    OutputRefused,
    ToolCall,
    ToolError,
    read_events,
    wire,
)

# What a session event keeps of a call's arguments and result: evidence, not a transcript.
RECORDED_CHARS = 2000

Emit = Callable[[wire.Event], Any]  # SessionLog.emit


@attrs.frozen
class ToolOutcome:
    ok: bool
    result: Mapping[str, Any] | None = None
    error: str | None = None


def _bounded(value: Any) -> Any:
    text = json.dumps(value, default=str, ensure_ascii=False)
    if len(text) <= RECORDED_CHARS:
        return value
    return text[:RECORDED_CHARS] + f"... ({len(text)} chars)"


class Broker:
    """One run's broker. Thread-safe: the transport calls from its own thread(s)."""

    def __init__(
        self,
        declaration: Declaration,
        tools: Mapping[str, BrokerTool],
        runtime: BrokerRuntime,
        mediator: Mediator,
        emit: Emit,
    ) -> None:
        self.declaration = declaration
        self.tools = {name: tools[name] for name in declaration.capabilities.broker_tools}
        self.runtime = runtime
        self.mediator = mediator
        self._emit = emit
        self._lock = threading.Lock()
        self._turn: int | None = None
        self.served_by: str | None = None  # the transport serving the tools, once one attached
        # Why this run's agent cannot call MCP tools at all (its harness takes no MCP servers),
        # or None. A transport starts no server then: nobody would call it.
        self.unreachable: str | None = None

    @classmethod
    def open(cls, request: BrokerRequest) -> Broker:
        """The run's broker over the engine's session log; a resume keeps the spent counts."""
        used = used_counts(read_events(request.session_log)) if request.resumed else {}
        mediator = Mediator(request.declaration.outputs, request.emit, params=request.params, used=used)
        broker = cls(request.declaration, request.tools, request.runtime, mediator, request.emit)
        broker.unreachable = request.unreachable
        return broker

    def admit(
        self, kind: str, target: str | None = None, *, by: str, iteration: int | None = None
    ) -> str | None:
        """A write of the engine's own (publish-on-keep) asks the same mediation point a tool does."""
        return self.mediator.admit(kind, target, by=by, iteration=iteration)

    # -- the engine's side ------------------------------------------------------------------
    def attach(self, transport: str) -> None:
        """A transport (the MCP server) serves these tools from now on."""
        self.served_by = transport

    def detach(self) -> None:
        self.served_by = None

    def prompt_text(self) -> str:
        """What the agent is told it has: the same declaration check and exposure print."""
        missing = None
        if self.tools and self.unreachable is not None:
            missing = self.unreachable
        elif self.tools and self.served_by is None:
            missing = "no broker transport is serving them"
        return self.declaration.prompt_text(missing)

    def open_turn(self, iteration: int) -> None:
        with self._lock:
            self._turn = iteration

    def close_turn(self) -> None:
        with self._lock:
            self._turn = None

    # -- the transport's side ---------------------------------------------------------------
    def list_tools(self) -> list[BrokerTool]:
        """The tools granted to the running turn (none between turns)."""
        with self._lock:
            return list(self.tools.values()) if self._turn is not None else []

    def call(self, name: str, arguments: Mapping[str, Any] | None) -> ToolOutcome:
        with self._lock:
            iteration = self._turn
        arguments = dict(arguments or {})
        self._emit(wire.BrokerCall(tool=name, iter=iteration, arguments=_bounded(arguments)))
        outcome = self._dispatch(name, arguments, iteration)
        self._emit(
            wire.BrokerResult(
                tool=name,
                iter=iteration,
                ok=outcome.ok,
                result=_bounded(outcome.result) if outcome.result is not None else None,
                error=outcome.error,
            )
        )
        return outcome

    def _dispatch(self, name: str, arguments: Mapping[str, Any], iteration: int | None) -> ToolOutcome:
        tool = self.tools.get(name)
        if iteration is None:
            return ToolOutcome(False, error=f"refused: no agent turn is running, so {name} is not granted")
        if tool is None:
            granted = ", ".join(sorted(self.tools)) or "none"
            return ToolOutcome(
                False, error=f"refused: tool {name!r} is not granted to this turn (granted: {granted})"
            )
        call = ToolCall(tool, arguments, iteration, self.runtime, self.mediator.admit)
        try:
            result: object = tool.handler(call)  # a plugin may break its declared return type
        except OutputRefused as exc:
            return ToolOutcome(False, error=exc.render())
        except ToolError as exc:
            return ToolOutcome(False, error=exc.render())
        except Exception as exc:  # a tool bug costs its call, never the broker or the run
            return ToolOutcome(False, error=f"tool {name} failed: {type(exc).__name__}: {exc}")
        if not isinstance(result, Mapping):
            return ToolOutcome(
                False, error=f"tool {name} returned {type(result).__name__}, not a JSON object"
            )
        return ToolOutcome(True, result=dict(result))
