"""Decoding a session's `session/update` notifications into agent events, in wire (JSON) form.

An agent streams its message a few characters at a time; the decoder joins the chunks of one
message into one `agent_text` (or `agent_thinking`) event. A tool call is announced once, when
its input is known (it leaves `pending`, or a permission request names it), and its result once,
when it completes or fails. Usage reports are kept for the end of the turn: the running cost
(ACP's `usage_update.cost` counts the whole session, and a session lives one turn) and the
context window's fill.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from crucible_harness_acp import events
from crucible_harness_acp.policy import ToolCallView

Emit = Callable[[str, Mapping[str, Any]], None]

_STARTED = ("in_progress", "completed", "failed")
_FINISHED = ("completed", "failed")


@attrs.define
class _Call:
    view: ToolCallView
    raw_input: Any = None
    announced: bool = False
    finished: bool = False


@attrs.define
class UpdateDecoder:
    emit: Emit
    on_cost: Callable[[float], None] = lambda _cost: None
    cost_usd: float | None = None  # the session's running cost, when the agent reports it in USD
    last_text: str = ""  # the last message the agent wrote: the turn's result text
    _text: list[str] = attrs.field(factory=list)
    _thought: list[str] = attrs.field(factory=list)
    _calls: dict[str, _Call] = attrs.field(factory=dict)

    def feed(self, update: Mapping[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            self._flush_thought()
            self._text.append(events.content_text(update.get("content")))
        elif kind == "agent_thought_chunk":
            self._flush_text()
            self._thought.append(events.content_text(update.get("content")))
        elif kind in ("tool_call", "tool_call_update"):
            self.flush()
            self._tool_call(update)
        elif kind == "plan":
            self.flush()
            entries = update.get("entries") or []
            self.emit(
                events.AGENT_PLAN,
                {
                    "entries": [
                        {"content": events.clip(str(e.get("content", "")), 500), "status": e.get("status")}
                        for e in entries[:50]
                        if isinstance(e, Mapping)
                    ]
                },
            )
        elif kind == "usage_update":
            cost = update.get("cost")
            if isinstance(cost, Mapping) and cost.get("currency") == "USD":
                amount = cost.get("amount")
                if isinstance(amount, int | float) and not isinstance(amount, bool) and amount >= 0:
                    self.cost_usd = float(amount)
                    self.on_cost(self.cost_usd)
        # Everything else (available commands, modes, config options, session info, echoed user
        # chunks) describes the agent's interface, not what it did.

    def call(self, tool_call: Mapping[str, Any]) -> ToolCallView:
        """The client's view of a tool call a permission request names; announces it."""
        self.flush()
        entry = self._track(tool_call)
        self._announce(entry)
        return entry.view

    def flush(self) -> None:
        self._flush_thought()
        self._flush_text()

    def finish(self) -> None:
        """The turn is over: say what is still buffered, and announce calls never seen to start."""
        self.flush()
        for entry in self._calls.values():
            self._announce(entry)

    # -- internals ------------------------------------------------------------------------------

    def _flush_text(self) -> None:
        text = "".join(self._text)
        self._text.clear()
        if text.strip():
            self.last_text = text
            self.emit(events.AGENT_TEXT, {"text": events.clip(text)})

    def _flush_thought(self) -> None:
        text = "".join(self._thought)
        self._thought.clear()
        if text.strip():
            self.emit(events.AGENT_THINKING, {"text": events.clip(text)})

    def _track(self, update: Mapping[str, Any]) -> _Call:
        call_id = str(update.get("toolCallId") or "")
        entry = self._calls.get(call_id)
        if entry is None:
            entry = self._calls[call_id] = _Call(ToolCallView(call_id))
        entry.view = entry.view.merged(update)
        raw = update.get("rawInput")
        if raw not in (None, {}, ""):
            entry.raw_input = raw
        return entry

    def _tool_call(self, update: Mapping[str, Any]) -> None:
        entry = self._track(update)
        status = update.get("status")
        if status in _STARTED:
            self._announce(entry)
        if status in _FINISHED and not entry.finished:
            entry.finished = True
            output = update.get("content") or update.get("rawOutput")
            self.emit(
                events.AGENT_TOOL_RESULT,
                {
                    "id": entry.view.id,
                    "is_error": status == "failed",
                    "content": events.clip(events.content_text(output)),
                },
            )

    def _announce(self, entry: _Call) -> None:
        if entry.announced:
            return
        entry.announced = True
        view = entry.view
        self.emit(
            events.AGENT_TOOL_CALL,
            {
                "id": view.id,
                "name": view.names[0] if view.names else view.title,
                "title": events.clip(view.title, 300),
                "kind": view.kind,
                "input": events.clip_value(entry.raw_input if entry.raw_input is not None else {}),
                "locations": [events.clip(path, 500) for path in view.locations[:20]],
            },
        )
