"""A scripted OpenAI Chat Completions API on 127.0.0.1: streamed `chat.completion.chunk` SSE with tool calls and usage.

It stands in for the one thing a test cannot reach, an inference endpoint that speaks only
Chat Completions, and speaks the real wire so the real opencode and pi CLIs talk to it
unchanged. The script is the Anthropic fake's (`tests.fakes.anthropic_api.Script`): for each
request it picks the reply by how many assistant messages follow the latest prompt, so one
script drives one agent turn, and a request without tools (a title, a summary) gets the
script's side reply. Requests are recorded for assertions.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping
from typing import Any

from tests.fakes.anthropic_api import Reply, Script, Text, Thinking, say
from tests.fakes.scripted_server import JsonHandler, Recorded, ScriptedServer

_ids = itertools.count(1)


def _new_id(prefix: str) -> str:
    return f"{prefix}-{next(_ids):020d}"


def _usage(reply: Reply) -> dict[str, Any]:
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
        "prompt_tokens_details": {"cached_tokens": 0},
    }


def _chunks(reply: Reply, model: str, include_usage: bool) -> Iterator[dict[str, Any]]:
    """The chunks one assistant message streams as: role, content and reasoning deltas, tool calls, finish, usage."""
    base = {"id": _new_id("chatcmpl"), "object": "chat.completion.chunk", "created": 1, "model": model}

    def chunk(delta: Mapping[str, Any], finish: str | None = None) -> dict[str, Any]:
        return dict(base, choices=[{"index": 0, "delta": dict(delta), "finish_reason": finish}])

    yield chunk({"role": "assistant", "content": ""})
    calls = 0
    for block in reply.blocks:
        if isinstance(block, Text):
            yield chunk({"content": block.text})
        elif isinstance(block, Thinking):
            yield chunk({"reasoning_content": block.text})
        else:
            call_id = _new_id("call")
            head = {
                "index": calls,
                "id": call_id,
                "type": "function",
                "function": {"name": block.name, "arguments": ""},
            }
            yield chunk({"tool_calls": [head]})
            yield chunk(
                {"tool_calls": [{"index": calls, "function": {"arguments": json.dumps(dict(block.input))}}]}
            )
            calls += 1
    yield chunk({}, "tool_calls" if calls else "stop")
    if include_usage:
        yield dict(base, choices=[], usage=_usage(reply))


def _completion(reply: Reply, model: str) -> dict[str, Any]:
    """The same message as one non-streamed `chat.completion`."""
    text = "".join(b.text for b in reply.blocks if isinstance(b, Text))
    calls = [
        {
            "id": _new_id("call"),
            "type": "function",
            "function": {"name": b.name, "arguments": json.dumps(dict(b.input))},
        }
        for b in reply.blocks
        if not isinstance(b, Text | Thinking)
    ]
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": _new_id("chatcmpl"),
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": _usage(reply),
    }


def _is_agent_step(recorded: Recorded) -> bool:
    path = recorded.path.split("?", 1)[0]
    return (
        path.endswith("/chat/completions")
        and isinstance(recorded.body, dict)
        and bool(recorded.body.get("tools"))
    )


class _ChatHandler(JsonHandler):
    def _error(self, status: int, kind: str, message: str) -> None:
        self.send_json(status, {"error": {"message": message, "type": kind, "param": None, "code": kind}})

    def do_GET(self) -> None:
        self.record()
        if self.path.split("?", 1)[0].endswith("/models"):
            self.send_json(200, {"object": "list", "data": []})
            return
        self._error(404, "not_found", "not here")

    def do_POST(self) -> None:
        body = self.read_body()
        self.record(body)
        if not self.path.split("?", 1)[0].endswith("/chat/completions") or not isinstance(body, dict):
            self._error(404, "not_found", self.path)
            return
        reply = self.fake.script.pick(body)
        model = str(body.get("model") or "scripted-model")
        if reply.stall:
            self.stall()
            return
        if reply.error is not None:
            status, kind = reply.error
            self._error(status, kind, f"scripted {kind}")
            return
        if not body.get("stream"):
            self.send_json(200, _completion(reply, model))
            return
        options = body.get("stream_options")
        include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        self.start_events()
        for chunk in _chunks(reply, model, include_usage):
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


class FakeOpenAIChat(ScriptedServer):
    """Chat Completions. Use as a context manager; `base_url` (ending in /v1) is what OPENAI_BASE_URL should say."""

    handler = _ChatHandler
    base_path = "/v1"
    script: Script

    def __init__(self, script: Script | None = None) -> None:
        super().__init__(script or Script([say("done")]))

    def chat_requests(self) -> list[Recorded]:
        """The recorded completions that carried tools: the agent's own steps, not side errands."""
        return self.recorded(_is_agent_step)
