"""A scripted Anthropic Messages API on 127.0.0.1: streaming (SSE) and plain replies, tool use, stalls.

It stands in for the one thing a test cannot reach, the model provider, and speaks its real
wire protocol so the real Claude Code CLI and the real `anthropic` SDK can talk to it. A test
hands it a `Script`: for each request the script picks the reply from how many assistant
messages follow the latest prompt, so one script drives one agent turn (read, edit, stop) and a
fresh prompt (a resumed turn) starts the script over. Requests are recorded for assertions.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs

from tests.fakes.scripted_server import JsonHandler, Recorded, ScriptedServer

_ids = itertools.count(1)


def _new_id(prefix: str) -> str:
    return f"{prefix}_{next(_ids):024d}"


@attrs.frozen
class Text:
    text: str


@attrs.frozen
class Thinking:
    text: str


@attrs.frozen
class ToolUse:
    name: str
    input: Mapping[str, Any]


Block = Text | Thinking | ToolUse


@attrs.frozen
class Reply:
    """One assistant message. `stall` makes the server hold the stream open instead of answering."""

    blocks: Sequence[Block] = ()
    input_tokens: int = 1200
    output_tokens: int = 80
    stall: bool = False
    error: tuple[int, str] | None = None  # (HTTP status, API error type): answer with an API error

    @property
    def stop_reason(self) -> str:
        return "tool_use" if any(isinstance(b, ToolUse) for b in self.blocks) else "end_turn"


def say(text: str) -> Reply:
    return Reply([Text(text)])


def call(name: str, **tool_input: Any) -> Reply:
    return Reply([ToolUse(name, tool_input)])


STALL = Reply(stall=True)


def api_error(status: int, kind: str) -> Reply:
    return Reply(error=(status, kind))


@attrs.define
class Script:
    """The replies of one agent turn, in order; past the end, the last reply repeats."""

    replies: Sequence[Reply]
    # Requests without tools are the client's side errands (titles, summaries): a short text.
    side_reply: Reply = attrs.field(factory=lambda: say("ok"))

    def pick(self, request: Mapping[str, Any]) -> Reply:
        if not request.get("tools"):
            return self.side_reply
        step = _steps_since_prompt(request.get("messages") or [])
        return self.replies[min(step, len(self.replies) - 1)]


def _is_prompt(message: Mapping[str, Any]) -> bool:
    """A user message that carries no tool result is a prompt (a new turn starts there)."""
    if message.get("role") != "user":
        return False
    content = message.get("content")
    if isinstance(content, str):
        return True
    return not any(isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content or ())


def _steps_since_prompt(messages: Sequence[Mapping[str, Any]]) -> int:
    steps = 0
    for message in reversed(messages):
        if _is_prompt(message):
            break
        if message.get("role") == "assistant":
            steps += 1
    return steps


def _message_json(reply: Reply, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for block in reply.blocks:
        if isinstance(block, Text):
            content.append({"type": "text", "text": block.text})
        elif isinstance(block, Thinking):
            content.append({"type": "thinking", "thinking": block.text, "signature": "sig-fake"})
        else:
            content.append(
                {"type": "tool_use", "id": _new_id("toolu"), "name": block.name, "input": dict(block.input)}
            )
    return {
        "id": _new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": reply.input_tokens,
            "output_tokens": reply.output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def _block_events(index: int, block: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """A content block as the stream carries it: start (empty), deltas, stop."""

    def start(content_block: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        return "content_block_start", {
            "type": "content_block_start",
            "index": index,
            "content_block": content_block,
        }

    def delta(payload: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": payload}

    if block["type"] == "text":
        yield start({"type": "text", "text": ""})
        yield "ping", {"type": "ping"}
        yield delta({"type": "text_delta", "text": block["text"]})
    elif block["type"] == "thinking":
        yield start({"type": "thinking", "thinking": "", "signature": ""})
        yield delta({"type": "thinking_delta", "thinking": block["thinking"]})
        yield delta({"type": "signature_delta", "signature": block["signature"]})
    else:
        yield start(dict(block, input={}))
        yield delta({"type": "input_json_delta", "partial_json": json.dumps(block["input"])})
    yield "content_block_stop", {"type": "content_block_stop", "index": index}


def _sse_events(reply: Reply, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The event sequence the Messages API streams for one message."""
    whole = _message_json(reply, model)
    opening = dict(whole, content=[], stop_reason=None, usage=dict(whole["usage"], output_tokens=1))
    yield "message_start", {"type": "message_start", "message": opening}
    for index, block in enumerate(whole["content"]):
        yield from _block_events(index, block)
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": reply.output_tokens},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _is_agent_step(recorded: Recorded) -> bool:
    path = recorded.path.split("?", 1)[0]
    return path == "/v1/messages" and isinstance(recorded.body, dict) and bool(recorded.body.get("tools"))


class _MessagesHandler(JsonHandler):
    def reply_headers(self) -> dict[str, str]:
        return {"request-id": _new_id("req")}

    def do_GET(self) -> None:
        self.record()
        self.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": "not here"}})

    def do_HEAD(self) -> None:
        self.record()
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        body = self.read_body()
        self.record(body)
        path = self.path.split("?", 1)[0]
        if path == "/v1/messages/count_tokens":
            self.send_json(200, {"input_tokens": len(json.dumps(body)) // 4})
            return
        if path != "/v1/messages" or not isinstance(body, dict):
            self.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": path}})
            return
        reply = self.fake.script.pick(body)
        model = str(body.get("model") or "claude-sonnet-4-6")
        if reply.stall:
            self.stall()
            return
        if reply.error is not None:
            status, kind = reply.error
            self.send_json(status, {"type": "error", "error": {"type": kind, "message": f"scripted {kind}"}})
            return
        if not body.get("stream"):
            self.send_json(200, _message_json(reply, model))
            return
        self.start_events()
        for name, data in _sse_events(reply, model):
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()
        self.close_connection = True


class FakeAnthropic(ScriptedServer):
    """The Messages API. Use as a context manager; `base_url` is what ANTHROPIC_BASE_URL should say."""

    handler = _MessagesHandler
    script: Script

    def __init__(self, script: Script | None = None) -> None:
        super().__init__(script or Script([say("done")]))

    def message_requests(self) -> list[Recorded]:
        """The recorded model calls that carried tools: the agent's own steps, not side errands."""
        return self.recorded(_is_agent_step)
