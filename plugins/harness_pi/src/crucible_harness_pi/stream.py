"""Decoding pi's `--mode json` stream into agent events as it arrives; the stream closes the turn.

Pi writes its events from its own process and ends them with `agent_end`, so the live stream is
complete: it carries the result and the token usage, and the session file pi keeps is not
needed. `message_update` lines (each repeats the whole message so far) are skipped unread; the
finished message comes again in `message_end`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from crucible_core.api import AgentEventSink
from crucible_harness_endpoint import events
from crucible_harness_endpoint.json_stream import JsonStream
from crucible_harness_endpoint.pricing import Usage, cost_usd

HARNESS = "pi"
_PARTIAL_PREFIX = '{"type":"message_update"'


def _usage(raw: Any) -> tuple[Usage, float]:
    """A message's token usage, and pi's own price for it (0 when it could not price the model)."""
    if not isinstance(raw, Mapping):
        return Usage(), 0.0
    cost = events.table(raw.get("cost"))
    total = cost.get("total")
    usage = Usage(
        events.count(raw.get("input")),
        events.count(raw.get("output")),
        events.count(raw.get("cacheRead")),
        events.count(raw.get("cacheWrite")),
    )
    return usage, float(total) if isinstance(total, int | float) and total > 0 else 0.0


@attrs.define
class PiStream(JsonStream):
    emit: AgentEventSink
    model: str
    started: bool = False  # the session header arrived: pi is up and talking
    ended: bool = False  # agent_end arrived: the turn is over, by pi's own account
    turns: int = 0  # assistant messages
    usage: Usage = Usage()
    reported_cost: float = 0.0
    stop_reason: str | None = None  # the last assistant message's
    error: str | None = None  # its error message, when it stopped on one
    text: str = ""  # the last thing the agent said

    def skip(self, line: str) -> bool:
        return line.startswith(_PARTIAL_PREFIX)

    def event(self, message: Mapping[str, Any]) -> None:
        kind = message.get("type")
        if kind == "session" and not self.started:
            self.started = True
            self.emit(events.AGENT_START, {"harness": HARNESS, "model": self.model})
        elif kind == "message_end" and isinstance(message.get("message"), Mapping):
            if message["message"].get("role") == "assistant":
                self._assistant(message["message"])
        elif kind == "tool_execution_end":
            self.emit(
                events.AGENT_TOOL_RESULT,
                {
                    "id": events.text(message.get("toolCallId")),
                    "is_error": bool(message.get("isError")),
                    "content": events.clip(_result_text(message.get("result"))),
                },
            )
        elif kind == "auto_retry_start":
            self.emit(
                events.AGENT_RETRY,
                {
                    "attempt": message.get("attempt"),
                    "error_status": events.clip(events.text(message.get("errorMessage")) or "", 300),
                    "delay_ms": message.get("delayMs"),
                },
            )
        elif kind == "agent_end":
            self.ended = True
            self._close()

    def _assistant(self, body: Mapping[str, Any]) -> None:
        self.turns += 1
        usage, cost = _usage(body.get("usage"))
        self.usage += usage
        self.reported_cost += cost
        self.stop_reason = events.text(body.get("stopReason"))
        self.error = (
            events.text(body.get("errorMessage")) if self.stop_reason in ("error", "aborted") else None
        )
        for block in body.get("content") or ():
            if not isinstance(block, Mapping):
                continue
            kind = block.get("type")
            if kind == "text" and events.text(block.get("text")):
                self.text = block["text"]
                self.emit(events.AGENT_TEXT, {"text": events.clip(block["text"])})
            elif kind == "thinking" and events.text(block.get("thinking")):
                self.emit(events.AGENT_THINKING, {"text": events.clip(block["thinking"])})
            elif kind == "toolCall":
                self.emit(
                    events.AGENT_TOOL_CALL,
                    {
                        "id": events.text(block.get("id")),
                        "name": events.text(block.get("name")),
                        "input": events.clip_value(block.get("arguments") or {}),
                    },
                )

    def _close(self) -> None:
        cost = self.cost_usd
        self.emit(events.AGENT_USAGE, {**self.usage.as_fields(), "cost_usd": cost, "models": [self.model]})
        self.emit(
            events.AGENT_RESULT,
            {
                "ok": self.error is None,
                "subtype": self.stop_reason or "success",
                "turns": self.turns,
                "cost_usd": cost,
                "text": events.clip(self.error or self.text),
            },
        )

    @property
    def cost_usd(self) -> float:
        """pi's own figure when it priced the model, else the pricing table over the usage seen."""
        return self.reported_cost if self.reported_cost > 0 else cost_usd(self.model, self.usage)


def _result_text(result: Any) -> str:
    """A tool result's text blocks, joined; other blocks as a placeholder."""
    if not isinstance(result, Mapping):
        return "" if result is None else str(result)
    parts = []
    for block in result.get("content") or ():
        if isinstance(block, Mapping) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, Mapping):
            parts.append(f"[{block.get('type', 'block')}]")
    return "\n".join(parts)
