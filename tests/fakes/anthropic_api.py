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
import threading
from collections.abc import Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs

# How long a stalled reply may hold its connection open at most: a test that forgets to stop
# the server must not leave a thread behind forever.
MAX_STALL_SECONDS = 60.0

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


@attrs.frozen
class Recorded:
    method: str
    path: str
    headers: Mapping[str, str]  # names in lower case
    body: Any


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


class FakeAnthropic:
    """The server. Use as a context manager; `base_url` is what ANTHROPIC_BASE_URL should say."""

    def __init__(self, script: Script | None = None) -> None:
        self.script = script or Script([say("done")])
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeAnthropic:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def message_requests(self) -> list[Recorded]:
        """The recorded model calls that carried tools: the agent's own steps, not side errands."""
        with self._lock:
            return [r for r in self.requests if _is_agent_step(r)]

    def _record(self, recorded: Recorded) -> None:
        with self._lock:
            self.requests.append(recorded)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _headers(self) -> dict[str, str]:
                return {k.lower(): v for k, v in self.headers.items()}

            def _body(self) -> Any:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    return json.loads(raw) if raw else None
                except ValueError:
                    return raw.decode("utf-8", errors="replace")

            def _json(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("request-id", _new_id("req"))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                fake._record(Recorded("GET", self.path, self._headers(), None))
                self._json(
                    404, {"type": "error", "error": {"type": "not_found_error", "message": "not here"}}
                )

            def do_HEAD(self) -> None:
                fake._record(Recorded("HEAD", self.path, self._headers(), None))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                body = self._body()
                fake._record(Recorded("POST", self.path, self._headers(), body))
                path = self.path.split("?", 1)[0]
                if path == "/v1/messages/count_tokens":
                    self._json(200, {"input_tokens": len(json.dumps(body)) // 4})
                    return
                if path != "/v1/messages" or not isinstance(body, dict):
                    self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": path}})
                    return
                reply = fake.script.pick(body)
                model = str(body.get("model") or "claude-sonnet-4-6")
                if reply.stall:
                    self._stall()
                    return
                if reply.error is not None:
                    status, kind = reply.error
                    self._json(
                        status, {"type": "error", "error": {"type": kind, "message": f"scripted {kind}"}}
                    )
                    return
                if body.get("stream"):
                    self._stream(reply, model)
                else:
                    self._json(200, _message_json(reply, model))

            def _stall(self) -> None:
                # Headers go out so the client believes a stream is coming, then nothing does.
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.end_headers()
                self.wfile.flush()
                fake._closing.wait(MAX_STALL_SECONDS)
                self.close_connection = True

            def _stream(self, reply: Reply, model: str) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("request-id", _new_id("req"))
                self.send_header("connection", "close")
                self.end_headers()
                for name, data in _sse_events(reply, model):
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()
                self.close_connection = True

        return Handler
