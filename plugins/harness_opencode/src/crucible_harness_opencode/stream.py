"""Reading an opencode turn's stdout: the `run --format json` events for display, then the session export.

`opencode run --format json` mirrors its server's events and exits on the session's idle
signal, which can overtake the last events it would have mirrored, so the live stream is for
the reader of the log only: text, reasoning and tool calls as they happen. The turn's command
then prints `opencode export` of the session between two marker lines, and that export is the
transcript: the result, the token usage and the error, if any, come from it alone. A turn
without one is a transcript error, never a free success (verdict.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from crucible_core.api import AgentEventSink
from crucible_harness_endpoint import events
from crucible_harness_endpoint.json_stream import JsonStream
from crucible_harness_endpoint.pricing import Usage, cost_usd

HARNESS = "opencode"
MAX_EXPORT_BYTES = 32 * 1024 * 1024  # a session export beyond this is refused, not held in memory


def begin_marker(nonce: str) -> str:
    return f"crucible-opencode-export {nonce} begin"


def end_marker(nonce: str) -> str:
    return f"crucible-opencode-export {nonce} end"


@attrs.frozen
class Transcript:
    """What the session export says the turn did."""

    turns: int  # assistant messages (model calls of the agent)
    usage: Usage
    reported_cost: float  # opencode's own figure: 0 for a model it cannot price (the crucible provider)
    error: str | None  # the first assistant error, as opencode reports it
    error_status: int | None  # its HTTP status, when the provider answered with one
    text: str  # the last thing the agent said


def _usage(tokens: Any) -> Usage:
    if not isinstance(tokens, Mapping):
        return Usage()
    cache = events.table(tokens.get("cache"))
    return Usage(
        events.count(tokens.get("input")),
        # reasoning is billed as output
        events.count(tokens.get("output")) + events.count(tokens.get("reasoning")),
        events.count(cache.get("read")),
        events.count(cache.get("write")),
    )


def _error_text(error: Mapping[str, Any]) -> tuple[str, int | None]:
    data = events.table(error.get("data"))
    message = events.text(data.get("message")) or events.text(error.get("name")) or json.dumps(error)[:300]
    status = data.get("statusCode")
    return message, status if isinstance(status, int) and not isinstance(status, bool) else None


def read_export(document: Any) -> Transcript | str:
    """The transcript in an `opencode export` document, or why there is none."""
    if not isinstance(document, Mapping) or not isinstance(document.get("messages"), list):
        return "the session export has no messages"
    turns, usage, cost = 0, Usage(), 0.0
    error: tuple[str, int | None] | None = None
    text = ""
    for message in document["messages"]:
        info = message.get("info") if isinstance(message, Mapping) else None
        if not isinstance(info, Mapping) or info.get("role") != "assistant":
            continue
        turns += 1
        usage += _usage(info.get("tokens"))
        reported = info.get("cost")
        cost += float(reported) if isinstance(reported, int | float) and reported > 0 else 0.0
        if error is None and isinstance(info.get("error"), Mapping):
            error = _error_text(info["error"])
        for part in message.get("parts") or ():
            if isinstance(part, Mapping) and part.get("type") == "text" and events.text(part.get("text")):
                text = part["text"]
    if turns == 0:
        return "the session export holds no assistant message"
    message, status = error if error is not None else (None, None)
    return Transcript(turns, usage, cost, message, status, text)


@attrs.define
class OpenCodeStream(JsonStream):
    emit: AgentEventSink
    model: str
    nonce: str  # the export's marker lines carry it
    session_id: str | None = None  # the run's session, once its first event named it
    stream_usage: Usage = Usage()  # the step_finish tokens: only a cost estimate when there is no export
    stream_error: str | None = None
    transcript: Transcript | None = None
    export_problem: str | None = None  # why the export that arrived could not be read
    _export: list[str] | None = None  # the export's lines while they arrive
    _export_bytes: int = 0

    @property
    def started(self) -> bool:
        return self.session_id is not None

    def feed(self, line: str) -> None:
        if self._export is not None:
            self._collect(line)
        elif line.strip() == begin_marker(self.nonce):
            self._export, self._export_bytes = [], 0
        else:
            super().feed(line)

    def event(self, message: Mapping[str, Any]) -> None:
        if self.session_id is None and events.text(message.get("sessionID")):
            self.session_id = message["sessionID"]
            self.emit(events.AGENT_START, {"harness": HARNESS, "model": self.model})
        kind = message.get("type")
        part = events.table(message.get("part"))
        if kind == "text" and events.text(part.get("text")):
            self.emit(events.AGENT_TEXT, {"text": events.clip(part["text"])})
        elif kind == "reasoning" and events.text(part.get("text")):
            self.emit(events.AGENT_THINKING, {"text": events.clip(part["text"])})
        elif kind == "tool_use":
            self._tool(part)
        elif kind == "step_finish":
            self.stream_usage += _usage(part.get("tokens"))
        elif kind == "error" and isinstance(message.get("error"), Mapping):
            self.stream_error = _error_text(message["error"])[0]

    def _tool(self, part: Mapping[str, Any]) -> None:
        state = events.table(part.get("state"))
        call_id = events.text(part.get("callID"))
        self.emit(
            events.AGENT_TOOL_CALL,
            {
                "id": call_id,
                "name": events.text(part.get("tool")),
                "input": events.clip_value(state.get("input") or {}),
            },
        )
        failed = state.get("status") == "error"
        output = state.get("error") if failed else state.get("output")
        self.emit(
            events.AGENT_TOOL_RESULT,
            {"id": call_id, "is_error": failed, "content": events.clip(events.text(output) or "")},
        )

    def _collect(self, line: str) -> None:
        assert self._export is not None
        if line.strip() == end_marker(self.nonce):
            self._finish_export("\n".join(self._export))
            self._export = None
            return
        self._export_bytes += len(line) + 1
        if self._export_bytes > MAX_EXPORT_BYTES:
            self.export_problem = f"the session export is larger than {MAX_EXPORT_BYTES} bytes"
            self._export = []  # keep reading to the end marker, holding nothing
            return
        if self.export_problem is None:
            self._export.append(line)

    def _finish_export(self, text: str) -> None:
        if self.export_problem is not None:
            return
        try:
            document = json.loads(text)
        except (ValueError, RecursionError) as exc:
            self.export_problem = f"the session export is not JSON ({exc})"
            return
        transcript = read_export(document)
        if isinstance(transcript, str):
            self.export_problem = transcript
            return
        self.transcript = transcript
        cost = self.cost_usd
        self.emit(
            events.AGENT_USAGE, {**transcript.usage.as_fields(), "cost_usd": cost, "models": [self.model]}
        )
        self.emit(
            events.AGENT_RESULT,
            {
                "ok": transcript.error is None,
                "subtype": "error" if transcript.error else "success",
                "turns": transcript.turns,
                "cost_usd": cost,
                "text": events.clip(transcript.error or transcript.text),
            },
        )

    @property
    def cost_usd(self) -> float:
        """The export's own cost when opencode priced the model, else the pricing table over its usage;
        without an export, the table over the tokens the live stream showed."""
        if self.transcript is None:
            return cost_usd(self.model, self.stream_usage)
        if self.transcript.reported_cost > 0:
            return self.transcript.reported_cost
        return cost_usd(self.model, self.transcript.usage)
