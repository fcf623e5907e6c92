"""Decoding the Claude Code CLI's `--output-format stream-json` lines into agent events as they arrive.

The decoder holds what the harness needs after the process ends (the final result, the
conversation id to resume, whether the stream ever started) and emits everything a reader of
the session log wants to see while the turn runs. The conversation id is kept on the decoder
and never copied into an event.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from crucible_core.api import AgentEventSink
from crucible_harness_claude import events
from crucible_harness_claude.pricing import Usage, cost_usd

# How many undecodable lines are kept (clipped) to explain a broken stream.
_KEPT_BAD_LINES = 3


@attrs.define
class StreamDecoder:
    emit: AgentEventSink
    # What a resumed conversation had cost before this turn: the CLI reports cost cumulatively
    # over a conversation, and this turn costs the difference.
    prior_cost: float = 0.0
    session_id: str | None = None  # the resume cursor, as the CLI last reported it
    model: str | None = None
    started: bool = False  # the CLI's init line arrived: the program is up and talking
    result: dict[str, Any] | None = None  # the final `result` line
    lines: int = 0
    bad_lines: list[str] = attrs.field(factory=list)
    undecodable: int = 0
    api_error: str | None = None  # the last API error the CLI reported in the stream
    _usage_by_message: dict[str, Usage] = attrs.field(factory=dict)

    def feed(self, line: str) -> None:
        """Decode one stdout line. Never raises: a bad line is counted, not fatal."""
        line = line.strip()
        if not line:
            return
        self.lines += 1
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):  # a deeply nested line is a bad line too
            message = None
        if not isinstance(message, dict):
            self.undecodable += 1
            if len(self.bad_lines) < _KEPT_BAD_LINES:
                self.bad_lines.append(events.clip(line, 200))
            return
        sid = message.get("session_id")
        if isinstance(sid, str) and sid:
            self.session_id = sid
        handler = _HANDLERS.get(str(message.get("type")))
        if handler is None:
            return
        try:
            handler(self, message)
        except Exception as exc:
            # This runs on the supervisor's stdout pump: raising would stop the pipe being
            # drained and stall the CLI until its deadline. A line we fail on is a bad line.
            self.undecodable += 1
            if len(self.bad_lines) < _KEPT_BAD_LINES:
                self.bad_lines.append(events.clip(f"{line} ({exc!r})", 200))

    # -- one method per stream-json message type ------------------------------------------

    def _system(self, message: Mapping[str, Any]) -> None:
        if message.get("subtype") == "init":
            self.started = True
            self.model = _str(message.get("model")) or self.model
            servers = message.get("mcp_servers") or []
            self.emit(
                events.AGENT_START,
                {
                    "harness": "claude",
                    "model": self.model,
                    "version": _str(message.get("claude_code_version")),
                    "permission_mode": _str(message.get("permissionMode")),
                    "tools": len(message.get("tools") or []),
                    "mcp_servers": [
                        {"name": _str(s.get("name")), "status": _str(s.get("status"))}
                        for s in servers
                        if isinstance(s, Mapping)
                    ],
                },
            )
        elif message.get("subtype") == "api_retry":
            self.emit(
                events.AGENT_RETRY,
                {
                    "attempt": message.get("attempt"),
                    "error_status": message.get("error_status"),
                    "delay_ms": message.get("retry_delay_ms"),
                },
            )

    def _assistant(self, message: Mapping[str, Any]) -> None:
        body = message.get("message")
        if not isinstance(body, Mapping):
            return
        if message.get("is_api_error_message") or message.get("api_error_status"):
            status = message.get("api_error_status")
            self.api_error = f"API error {status}: {_first_text(body)}" if status else _first_text(body)
        msg_id = _str(body.get("id"))
        if msg_id and isinstance(body.get("usage"), Mapping):
            # The CLI repeats a message's usage on each of its blocks; the last one counts.
            self._usage_by_message[msg_id] = Usage.of(dict(body["usage"]))
        subagent = message.get("parent_tool_use_id") is not None
        for block in body.get("content") or ():
            if not isinstance(block, Mapping):
                continue
            kind = block.get("type")
            extra = {"subagent": True} if subagent else {}
            if kind == "text" and block.get("text"):
                self.emit(events.AGENT_TEXT, {"text": events.clip(str(block["text"])), **extra})
            elif kind == "thinking" and block.get("thinking"):
                self.emit(events.AGENT_THINKING, {"text": events.clip(str(block["thinking"])), **extra})
            elif kind == "tool_use":
                self.emit(
                    events.AGENT_TOOL_CALL,
                    {
                        "id": _str(block.get("id")),
                        "name": _str(block.get("name")),
                        "input": events.clip_value(block.get("input") or {}),
                        **extra,
                    },
                )

    def _user(self, message: Mapping[str, Any]) -> None:
        body = message.get("message")
        if not isinstance(body, Mapping) or not isinstance(body.get("content"), list):
            return
        for block in body["content"]:
            if isinstance(block, Mapping) and block.get("type") == "tool_result":
                self.emit(
                    events.AGENT_TOOL_RESULT,
                    {
                        "id": _str(block.get("tool_use_id")),
                        "is_error": bool(block.get("is_error")),
                        "content": events.clip(events.tool_result_text(block.get("content"))),
                    },
                )

    def _result(self, message: Mapping[str, Any]) -> None:
        self.result = dict(message)
        usage = Usage.of(dict(message.get("usage") or {}))
        # modelUsage counts over the whole (resumed) conversation; only its model names are this turn's.
        models = sorted(str(name) for name in message.get("modelUsage") or {})
        self.emit(events.AGENT_USAGE, {**usage.as_fields(), "cost_usd": self.reported_cost, "models": models})
        self.emit(
            events.AGENT_RESULT,
            {
                "ok": not message.get("is_error"),
                "subtype": _str(message.get("subtype")),
                "terminal_reason": _str(message.get("terminal_reason")),
                "turns": message.get("num_turns"),
                "cost_usd": self.reported_cost,
                "duration_ms": message.get("duration_ms"),
                "permission_denials": len(message.get("permission_denials") or []),
                "text": events.clip(_str(message.get("result")) or "; ".join(self.result_errors)),
            },
        )

    # -- what the harness reads once the process has ended --------------------------------

    @property
    def conversation_cost(self) -> float | None:
        """The CLI's own figure: what the conversation has cost so far, this turn included."""
        cost = (self.result or {}).get("total_cost_usd")
        return float(cost) if isinstance(cost, int | float) else None

    @property
    def reported_cost(self) -> float | None:
        """This turn's cost by the CLI's own figure."""
        total = self.conversation_cost
        if total is None:
            return None
        # A figure below the prior one means the CLI started counting afresh: it is all this turn's.
        return total - self.prior_cost if total >= self.prior_cost else total

    @property
    def result_errors(self) -> list[str]:
        errors = (self.result or {}).get("errors") or []
        return [str(e) for e in errors] if isinstance(errors, list) else [str(errors)]

    def estimated_cost(self) -> float:
        """The priced token usage seen so far: the cost of a turn that ended without a result."""
        usage = sum(self._usage_by_message.values(), Usage())
        return cost_usd(self.model or "", usage)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _first_text(body: Mapping[str, Any]) -> str:
    for block in body.get("content") or ():
        if isinstance(block, Mapping) and block.get("type") == "text":
            return events.clip(str(block.get("text", "")), 500)
    return ""


_HANDLERS = {
    "system": StreamDecoder._system,
    "assistant": StreamDecoder._assistant,
    "user": StreamDecoder._user,
    "result": StreamDecoder._result,
}
