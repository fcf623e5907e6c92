"""Decoding `codex exec --json` lines into agent events as they arrive.

The CLI prints one `type`-tagged object per line: `thread.started`, `turn.started`,
`item.started` / `item.updated` / `item.completed` per work item (a message, reasoning, a
command, a patch, an MCP tool call, ...), and a terminal `turn.completed` carrying the token
usage or `turn.failed` carrying the error. A top-level `error` line is either a retry notice
("Reconnecting... 1/5") or the error the turn is about to fail with. An `error` *item* is a
non-fatal notice (an unknown model's missing metadata, say), never a failed turn.

The decoder keeps what the harness needs once the process has ended (did the stream begin,
the terminal outcome, the usage) and emits what a reader of the session log wants to see while
the turn runs: the same kinds a Claude turn emits (text, thinking, tool calls and results,
usage, result).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from crucible_core.api import AgentEventSink
from crucible_harness_codex import events
from crucible_harness_codex.pricing import Usage, cost_usd

_KEPT_BAD_LINES = 3
_RETRY_PREFIX = "Reconnecting"


@attrs.define
class ExecDecoder:
    emit: AgentEventSink
    model: str  # what the harness asked for; the stream does not name it
    started: bool = False  # thread.started arrived: the program is up and talking
    completed: bool = False  # turn.completed arrived
    failure: str | None = None  # turn.failed's message
    last_error: str | None = None  # the last top-level error line that was not a retry notice
    usage: Usage = Usage()
    final_text: str = ""  # the last agent message
    notices: list[str] = attrs.field(factory=list)  # non-fatal error items
    lines: int = 0
    undecodable: int = 0
    bad_lines: list[str] = attrs.field(factory=list)
    _announced: set[str] = attrs.field(factory=set)  # item ids whose tool call is already emitted

    def feed(self, line: str) -> None:
        """Decode one stdout line. Never raises: a bad line is counted, not fatal."""
        line = line.strip()
        if not line:
            return
        self.lines += 1
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            message = None
        if not isinstance(message, dict):
            self._bad(line)
            return
        handler = _HANDLERS.get(str(message.get("type")))
        if handler is None:
            return
        try:
            handler(self, message)
        except Exception as exc:
            # This runs on the supervisor's stdout pump: raising would stop the pipe being
            # drained and stall the CLI until its deadline. A line we fail on is a bad line.
            self._bad(f"{line} ({exc!r})")

    def _bad(self, text: str) -> None:
        self.undecodable += 1
        if len(self.bad_lines) < _KEPT_BAD_LINES:
            self.bad_lines.append(events.clip(text, 200))

    @property
    def cost_usd(self) -> float:
        return cost_usd(self.model, self.usage)

    # -- one method per line type -------------------------------------------------------------

    def _thread_started(self, message: Mapping[str, Any]) -> None:
        self.started = True
        self.emit(events.AGENT_START, {"harness": "codex", "model": self.model, "tools": 0})

    def _item_started(self, message: Mapping[str, Any]) -> None:
        item = message.get("item")
        if isinstance(item, Mapping) and _tool_name(item) is not None:
            self._announce(item)

    def _item_completed(self, message: Mapping[str, Any]) -> None:
        item = message.get("item")
        if not isinstance(item, Mapping):
            return
        kind = item.get("type")
        if kind == "agent_message":
            text = _str(item.get("text"))
            if text:
                self.final_text = text
                self.emit(events.AGENT_TEXT, {"text": events.clip(text)})
        elif kind == "reasoning":
            text = _str(item.get("text"))
            if text:
                self.emit(events.AGENT_THINKING, {"text": events.clip(text)})
        elif kind == "error":
            notice = _str(item.get("message"))
            self.notices.append(events.clip(notice, 300))
            self.emit(events.AGENT_NOTICE, {"message": events.clip(notice)})
        elif _tool_name(item) is not None:
            self._announce(item)
            result = _tool_result(item)
            if result is not None:
                is_error, content = result
                self.emit(
                    events.AGENT_TOOL_RESULT,
                    {"id": _str(item.get("id")), "is_error": is_error, "content": events.clip(content)},
                )

    def _announce(self, item: Mapping[str, Any]) -> None:
        """The tool call, once per item: at item.started when the CLI sends one, else at completion."""
        item_id = _str(item.get("id"))
        if item_id in self._announced:
            return
        self._announced.add(item_id)
        self.emit(
            events.AGENT_TOOL_CALL,
            {"id": item_id, "name": _tool_name(item), "input": events.clip_value(_tool_input(item))},
        )

    def _turn_completed(self, message: Mapping[str, Any]) -> None:
        self.completed = True
        self.usage = Usage.of(message.get("usage"))
        cost = self.cost_usd
        self.emit(events.AGENT_USAGE, {**self.usage.as_fields(), "cost_usd": cost, "models": [self.model]})
        self.emit(
            events.AGENT_RESULT,
            {
                "ok": True,
                "subtype": "success",
                "turns": 1,
                "cost_usd": cost,
                "text": events.clip(self.final_text),
            },
        )

    def _turn_failed(self, message: Mapping[str, Any]) -> None:
        error = message.get("error")
        self.failure = _error_text(error) or self.last_error or "the turn failed"
        self.emit(
            events.AGENT_RESULT,
            {"ok": False, "subtype": "error", "turns": 1, "text": events.clip(self.failure)},
        )

    def _error(self, message: Mapping[str, Any]) -> None:
        text = _str(message.get("message"))
        if text.startswith(_RETRY_PREFIX):
            # "Reconnecting... 2/5 (why)": the CLI retries the provider on its own.
            self.emit(events.AGENT_RETRY, {"attempt": _attempt(text), "error_status": events.clip(text, 300)})
        else:
            self.last_error = events.clip(text, 500)


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _error_text(error: Any) -> str:
    if isinstance(error, str):
        return error
    if isinstance(error, Mapping):
        return _str(error.get("message"))
    return ""


def _attempt(text: str) -> int | None:
    head = text[len(_RETRY_PREFIX) :].lstrip(". ").split("/", 1)[0]
    return int(head) if head.isdigit() else None


def _tool_name(item: Mapping[str, Any]) -> str | None:
    kind = item.get("type")
    if kind == "command_execution":
        return "shell"
    if kind == "file_change":
        return "apply_patch"
    if kind == "mcp_tool_call":
        # Named as Claude names an MCP tool, so a viewer reads both harnesses' calls alike.
        return f"mcp__{_str(item.get('server'))}__{_str(item.get('tool'))}"
    if kind == "web_search":
        return "web_search"
    if kind == "todo_list":
        return "update_plan"
    if kind == "collab_tool_call":
        return f"collab:{_str(item.get('tool'))}"
    return None


def _tool_input(item: Mapping[str, Any]) -> Any:
    kind = item.get("type")
    if kind == "command_execution":
        return {"command": _str(item.get("command"))}
    if kind == "file_change":
        changes = _list(item.get("changes"))
        return {
            "changes": [
                {"path": _str(c.get("path")), "kind": _str(c.get("kind"))}
                for c in changes
                if isinstance(c, Mapping)
            ]
        }
    if kind == "mcp_tool_call":
        return item.get("arguments") if item.get("arguments") is not None else {}
    if kind == "web_search":
        return {"query": _str(item.get("query"))}
    if kind == "todo_list":
        return {"items": [step for step in _list(item.get("items")) if isinstance(step, Mapping)]}
    return {"prompt": _str(item.get("prompt"))}


def _tool_result(item: Mapping[str, Any]) -> tuple[bool, str] | None:
    """(is_error, text) of a finished tool item; None for an item that has no result (a plan)."""
    kind = item.get("type")
    status = _str(item.get("status"))
    failed = status in ("failed", "declined")
    if kind == "command_execution":
        code = item.get("exit_code")
        text = _str(item.get("aggregated_output"))
        if isinstance(code, int) and code != 0:
            text = f"{text}\n[exit {code}]" if text else f"[exit {code}]"
        return failed or (isinstance(code, int) and code != 0), text
    if kind == "file_change":
        changes = _tool_input(item)["changes"]
        return failed, ", ".join(f"{c['kind']} {c['path']}" for c in changes) + (
            f" [{status}]" if failed else ""
        )
    if kind == "mcp_tool_call":
        error = item.get("error")
        if isinstance(error, Mapping):
            return True, _str(error.get("message"))
        result = item.get("result")
        blocks = result.get("content") if isinstance(result, Mapping) else None
        texts = [
            _str(block.get("text")) if block.get("type") == "text" else f"[{block.get('type')}]"
            for block in blocks or ()
            if isinstance(block, Mapping)
        ]
        return failed, "\n".join(texts)
    if kind == "todo_list":
        return None
    return failed, status


_HANDLERS = {
    "thread.started": ExecDecoder._thread_started,
    "item.started": ExecDecoder._item_started,
    "item.completed": ExecDecoder._item_completed,
    "turn.completed": ExecDecoder._turn_completed,
    "turn.failed": ExecDecoder._turn_failed,
    "error": ExecDecoder._error,
}
