"""Reading the driver's stdout as it arrives: agent events to the session log, the running cost, the end.

The driver is our own program, but what its lines carry came from the agent: each event is
checked against the vocabulary, clipped, and has the turn's credentials masked before it is
emitted (the session log masks again where it writes).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

import attrs

from crucible_core.api import AgentEventSink
from crucible_harness_acp import events

_KEPT_BAD_LINES = 3


@attrs.define
class DriverStream:
    emit: AgentEventSink
    secrets: Collection[str] = ()
    started: bool = False  # the agent answered and its session began (agent_start arrived)
    cost_usd: float | None = None  # the agent's running figure for this turn's session
    end: dict[str, Any] | None = None
    bad_lines: list[str] = attrs.field(factory=list)
    undecodable: int = 0

    def feed(self, line: str) -> None:
        """Decode one stdout line. Never raises: it runs on the supervisor's stdout pump."""
        line = line.strip()
        if not line:
            return
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            message = None
        if not isinstance(message, dict):
            self._bad(line)
            return
        try:
            self._handle(message)
        except Exception as exc:
            self._bad(f"{line} ({exc!r})")

    def _bad(self, text: str) -> None:
        self.undecodable += 1
        if len(self.bad_lines) < _KEPT_BAD_LINES:
            self.bad_lines.append(events.clip(self.hide(text), 200))

    def hide(self, value: Any) -> Any:
        return events.mask(value, self.secrets)

    def _handle(self, message: Mapping[str, Any]) -> None:
        if events.LINE_EVENT in message:
            kind = message[events.LINE_EVENT]
            fields = message.get("fields")
            if kind in events.KINDS and isinstance(fields, Mapping):
                self.started = self.started or kind == events.AGENT_START
                self.emit(kind, self.hide(events.clip_value(dict(fields))))
            else:
                self._bad(json.dumps(message)[:200])
        elif events.LINE_COST in message:
            cost = message[events.LINE_COST]
            if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0:
                self.cost_usd = float(cost)
        elif isinstance(message.get(events.LINE_END), Mapping):
            self.end = dict(message[events.LINE_END])
        else:
            self._bad(json.dumps(message)[:200])
