"""A scripted OpenAI Responses API on 127.0.0.1: `POST /v1/responses` streamed as server-sent events.

It stands in for the one thing a test cannot reach, the model provider, and speaks the wire the
real Codex CLI speaks (`wire_api = "responses"`): each reply is a stream of `response.created`,
`response.output_item.added` / `.done` per output item (an assistant message, a reasoning
summary, a function call), the text deltas, and `response.completed` carrying the token usage.
A test hands it a `Script`: the reply to each request is picked by how many tool calls follow
the latest user prompt, so one script drives one agent turn (call a tool, read its output,
answer) and a fresh prompt starts the script over. Requests are recorded for assertions.

It also serves the ChatGPT OAuth token endpoint (`POST /oauth/token`, the refresh_token grant)
the way OpenAI's does: each grant rotates the refresh token, and a spent one is refused.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs

_ids = itertools.count(1)


def _new_id(prefix: str) -> str:
    return f"{prefix}_{next(_ids):024d}"


@attrs.frozen
class Text:
    text: str


@attrs.frozen
class Reasoning:
    text: str


@attrs.frozen
class Call:
    """A function call; `arguments` is sent as the JSON string the API carries."""

    name: str
    arguments: Mapping[str, Any]


Item = Text | Reasoning | Call


@attrs.frozen
class Reply:
    """One model response. `error` answers with an HTTP error instead (status, code, message)."""

    items: Sequence[Item] = ()
    input_tokens: int = 2000
    cached_tokens: int = 500
    output_tokens: int = 100
    error: tuple[int, str, str] | None = None


def say(text: str) -> Reply:
    return Reply([Text(text)])


def call(name: str, **arguments: Any) -> Reply:
    return Reply([Call(name, arguments)])


def shell(script: str) -> Reply:
    """A call of Codex's shell tool, whichever of its spellings the request offered (see FakeResponses)."""
    return Reply([Call("@shell", {"script": script})])


def api_error(status: int, code: str, message: str = "scripted error") -> Reply:
    return Reply(error=(status, code, message))


_CALL_ITEMS = frozenset({"function_call", "custom_tool_call", "local_shell_call"})


def steps_since_prompt(items: Sequence[Any]) -> int:
    """Tool calls the model made after the latest user message: where in the script this request is."""
    steps = 0
    for item in reversed(items):
        if not isinstance(item, Mapping):
            continue
        if item.get("type", "message") == "message" and item.get("role") == "user":
            break
        if item.get("type") in _CALL_ITEMS:
            steps += 1
    return steps


@attrs.define
class Script:
    """The replies of one agent turn, in order; past the end, the last reply repeats."""

    replies: Sequence[Reply]

    def pick(self, request: Mapping[str, Any]) -> Reply:
        items = request.get("input")
        step = steps_since_prompt(items if isinstance(items, list) else [])
        return self.replies[min(step, len(self.replies) - 1)]


@attrs.frozen
class Recorded:
    method: str
    path: str
    headers: Mapping[str, str]  # names in lower case
    body: Any


def offered_tools(request: Mapping[str, Any]) -> dict[str, tuple[str | None, str]]:
    """The tools a request offers, each by the name a script calls it: a namespace's tools as
    `<namespace>__<tool>` (MCP: mcp__server__tool), mapped to (namespace, the tool's own name)."""
    offered: dict[str, tuple[str | None, str]] = {}
    for tool in request.get("tools") or ():
        if not isinstance(tool, Mapping):
            continue
        if tool.get("type") == "namespace":
            for inner in tool.get("tools") or ():
                offered[f"{tool.get('name')}__{inner.get('name')}"] = (
                    str(tool.get("name")),
                    str(inner.get("name")),
                )
        else:
            name = str(tool.get("name") or tool.get("type"))
            offered[name] = (None, name)
    return offered


def tool_names(request: Mapping[str, Any]) -> list[str]:
    return list(offered_tools(request))


def _shell_call(offered: Mapping[str, Any], script: str) -> Call:
    """The shell call in the form the request's tool list asks for (Codex picks it by model family)."""
    if "exec_command" in offered:
        return Call("exec_command", {"cmd": script})
    if "shell_command" in offered:
        return Call("shell_command", {"command": script})
    return Call("shell", {"command": ["bash", "-lc", script]})


def _output_items(reply: Reply, offered: Mapping[str, tuple[str | None, str]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in reply.items:
        if isinstance(item, Text):
            out.append(
                {
                    "type": "message",
                    "id": _new_id("msg"),
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": item.text, "annotations": []}],
                }
            )
        elif isinstance(item, Reasoning):
            out.append(
                {
                    "type": "reasoning",
                    "id": _new_id("rs"),
                    "summary": [{"type": "summary_text", "text": item.text}],
                }
            )
        else:
            called = _shell_call(offered, str(item.arguments["script"])) if item.name == "@shell" else item
            entry = {
                "type": "function_call",
                "id": _new_id("fc"),
                "call_id": _new_id("call"),
                "name": called.name,
                "arguments": json.dumps(dict(called.arguments)),
                "status": "completed",
            }
            namespace, own_name = offered.get(called.name, (None, called.name))
            if namespace is not None:  # a namespaced tool is called by its own name within it
                entry.update(name=own_name, namespace=namespace)
            out.append(entry)
    return out


def _usage(reply: Reply) -> dict[str, Any]:
    return {
        "input_tokens": reply.input_tokens,
        "input_tokens_details": {"cached_tokens": reply.cached_tokens},
        "output_tokens": reply.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


def sse_events(
    reply: Reply, model: str, offered: Mapping[str, tuple[str | None, str]]
) -> Iterator[dict[str, Any]]:
    """The event sequence the Responses API streams for one response."""
    response_id = _new_id("resp")
    shell_of = {
        "id": response_id,
        "object": "response",
        "model": model,
        "status": "in_progress",
        "output": [],
    }
    yield {"type": "response.created", "response": shell_of}
    items = _output_items(reply, offered)
    for index, item in enumerate(items):
        opening = dict(item, status="in_progress")
        if item["type"] == "message":
            opening["content"] = []
        yield {"type": "response.output_item.added", "output_index": index, "item": opening}
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield {
                "type": "response.output_text.delta",
                "item_id": item["id"],
                "output_index": index,
                "content_index": 0,
                "delta": text,
            }
        yield {"type": "response.output_item.done", "output_index": index, "item": item}
    yield {
        "type": "response.completed",
        "response": dict(shell_of, status="completed", output=items, usage=_usage(reply)),
    }


@attrs.define
class TokenEndpoint:
    """The OAuth token endpoint's state: which refresh token is live, and every grant it saw."""

    live: str
    access_token: str = "fake-access-token"
    id_token: str = "fake-id-token"
    grants: list[Mapping[str, Any]] = attrs.field(factory=list)
    issued: int = 0

    def grant(self, body: Any) -> tuple[int, dict[str, Any]]:
        self.grants.append(body if isinstance(body, Mapping) else {"raw": body})
        if not isinstance(body, Mapping) or body.get("grant_type") != "refresh_token":
            return 400, {"error": "unsupported_grant_type"}
        if body.get("refresh_token") != self.live:
            # OpenAI rotates the refresh token on every grant; a spent one is dead.
            return 401, {"error": {"code": "refresh_token_reused", "message": "refresh token already used"}}
        self.issued += 1
        self.live = f"{self.live.split('~')[0]}~{self.issued}"
        return 200, {
            "access_token": f"{self.access_token}-{self.issued}",
            "id_token": self.id_token,
            "refresh_token": self.live,
            "expires_in": 3600,
        }


class FakeResponses:
    """The server. Use as a context manager; `base_url` is the provider's base URL (ends in /v1)."""

    def __init__(self, script: Script | None = None) -> None:
        self.script = script or Script([say("done")])
        self.tokens: TokenEndpoint | None = None
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def origin(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        return f"{self.origin}/v1"

    @property
    def token_url(self) -> str:
        return f"{self.origin}/oauth/token"

    def __enter__(self) -> FakeResponses:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def model_requests(self) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.path.split("?", 1)[0] == "/v1/responses"]

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
                if self.headers.get("content-encoding") == "zstd":
                    return {"undecoded": "zstd"}
                try:
                    return json.loads(raw) if raw else None
                except ValueError:
                    return raw.decode("utf-8", errors="replace")

            def _json(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                fake._record(Recorded("GET", self.path, self._headers(), None))
                self._json(404, {"error": {"message": "not here", "type": "invalid_request_error"}})

            def do_POST(self) -> None:
                body = self._body()
                fake._record(Recorded("POST", self.path, self._headers(), body))
                path = self.path.split("?", 1)[0]
                if path == "/oauth/token" and fake.tokens is not None:
                    with fake._lock:
                        status, payload = fake.tokens.grant(body)
                    self._json(status, payload)
                    return
                if path != "/v1/responses" or not isinstance(body, dict):
                    self._json(
                        404, {"error": {"message": f"no route {path}", "type": "invalid_request_error"}}
                    )
                    return
                reply = fake.script.pick(body)
                if reply.error is not None:
                    status, code, message = reply.error
                    self._json(status, {"error": {"message": message, "type": code, "code": code}})
                    return
                model = str(body.get("model") or "gpt-test")
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                for event in sse_events(reply, model, offered_tools(body)):
                    self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
                    self.wfile.flush()
                self.close_connection = True

        return Handler
