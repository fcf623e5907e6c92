"""What the scripted model APIs share: a server on 127.0.0.1, its lifetime, the record of requests, JSON plumbing.

Each fake (the Anthropic Messages API, OpenAI Chat Completions) subclasses `ScriptedServer` with
a `JsonHandler` that speaks its own wire.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import attrs

# How long a stalled reply may hold its connection open at most: a test that forgets to stop
# the server must not leave a thread behind forever.
MAX_STALL_SECONDS = 60.0


@attrs.frozen
class Recorded:
    method: str
    path: str
    headers: Mapping[str, str]  # names in lower case
    body: Any


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler with the JSON helpers; `fake` is the server it records into."""

    protocol_version = "HTTP/1.1"
    fake: ClassVar[ScriptedServer]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def reply_headers(self) -> Mapping[str, str]:
        """Headers every reply of this API carries (a request id, say)."""
        return {}

    def record(self, body: Any = None) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.fake.record(Recorded(self.command, self.path, headers, body))

    def read_body(self) -> Any:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw.decode("utf-8", errors="replace")

    def send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in self.reply_headers().items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def start_events(self) -> None:
        """The headers of a server-sent event stream that closes with its last event."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        for name, value in self.reply_headers().items():
            self.send_header(name, value)
        self.send_header("connection", "close")
        self.end_headers()

    def stall(self) -> None:
        # Headers go out so the client believes a stream is coming, then nothing does.
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        self.wfile.flush()
        self.fake.closing.wait(MAX_STALL_SECONDS)
        self.close_connection = True


class ScriptedServer:
    """The server. Use as a context manager; `base_url` is where a client should send its requests."""

    handler: ClassVar[type[JsonHandler]]
    base_path: ClassVar[str] = ""  # the API's prefix, part of base_url as its clients expect it

    def __init__(self, script: Any) -> None:
        self.script = script
        self.requests: list[Recorded] = []
        self.closing = threading.Event()
        self._lock = threading.Lock()
        bound = type(self.handler.__name__, (self.handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), bound)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{self.base_path}"

    def __enter__(self) -> Any:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def record(self, recorded: Recorded) -> None:
        with self._lock:
            self.requests.append(recorded)

    def recorded(self, keep: Callable[[Recorded], bool]) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if keep(r)]
