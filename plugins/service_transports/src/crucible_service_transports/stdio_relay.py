"""Serving an MCP-over-stdio service to tasks: an MCP streamable-HTTP endpoint on loopback for one stdio child.

A stdio MCP server talks to exactly one client, over its standard streams. Tasks reach services
over HTTP (through the engine's authenticating forward), several at a time, so the engine
stands in as that one client and relays:

- each JSON-RPC request posted to `mcp_path` is written to the child with an id of the relay's
  own (so two tasks' ids never collide) and answered, with the task's id put back, as
  `application/json` once the child's response line arrives (bounded by a timeout);
- `initialize` reaches the child once: the first one's result is kept and every later client
  is answered from it, and the relay itself sends `notifications/initialized`;
- other notifications are passed on (except the clients' `initialized` and cancellations,
  whose ids would not match); a client's answer to a server request, `GET` (no server-sent
  stream) and `DELETE` (no session) are acknowledged or refused without reaching the child.

The relay is stateless HTTP (no `Mcp-Session-Id`), which the MCP transport allows.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import IO, Any

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
RESPONSE_TIMEOUT_SECONDS = 300.0


class _Pending:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.message: dict[str, Any] | None = None


class StdioRelay:
    """One stdio child's MCP endpoint at http://127.0.0.1:<port><mcp_path>, on a port of its own."""

    def __init__(self, stdin: IO[bytes], stdout: IO[bytes], mcp_path: str) -> None:
        self._stdin = stdin
        self._stdout = stdout
        self.mcp_path = mcp_path
        self._write_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._initialized: dict[str, Any] | None = None  # the child's initialize result
        self._init_lock = threading.Lock()  # one initialize reaches the child
        self._closed = threading.Event()
        self._server = _RelayServer(("127.0.0.1", 0), self)
        self._threads = [
            threading.Thread(target=self._read_child, name="stdio-relay-read", daemon=True),
            threading.Thread(target=self._server.serve_forever, name="stdio-relay-http", daemon=True),
        ]

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> StdioRelay:
        for thread in self._threads:
            thread.start()
        return self

    def close(self) -> None:
        self._closed.set()
        self._server.shutdown()
        self._server.server_close()
        for stream in (self._stdin, self._stdout):
            with contextlib.suppress(OSError):
                stream.close()
        with self._state_lock:
            for pending in self._pending.values():
                pending.done.set()

    # -- the child's side ------------------------------------------------------------------

    def _read_child(self) -> None:
        """Deliver each response line to the request waiting for it; the rest is not for us."""
        while not self._closed.is_set():
            try:
                line = self._stdout.readline(MAX_MESSAGE_BYTES + 1)
            except (OSError, ValueError):
                break
            if not line:
                break  # the child exited (or closed its stdout)
            try:
                message = json.loads(line)
            except ValueError:
                continue  # a stray line the child should have written to stderr
            if not isinstance(message, dict) or "method" in message:
                continue  # a server request or notification: tasks are not subscribed to any
            key = message.get("id")
            with self._state_lock:
                pending = self._pending.pop(key, None) if isinstance(key, int) else None
            if pending is not None:
                pending.message = message
                pending.done.set()
        with self._state_lock:  # nobody answers any more: wake every waiter
            for pending in self._pending.values():
                pending.done.set()

    def _send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        with self._write_lock:
            self._stdin.write(data)
            self._stdin.flush()

    def request(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Send one request under an id of ours; the child's response (its id as the caller's), or None."""
        own = next(self._ids)
        pending = _Pending()
        with self._state_lock:
            self._pending[own] = pending
        try:
            self._send({**message, "id": own})
        except (OSError, ValueError):
            with self._state_lock:
                self._pending.pop(own, None)
            return None
        if not pending.done.wait(RESPONSE_TIMEOUT_SECONDS) or pending.message is None:
            with self._state_lock:
                self._pending.pop(own, None)
            return None
        return {**pending.message, "id": message["id"]}

    def initialize(self, message: dict[str, Any]) -> dict[str, Any] | None:
        with self._init_lock:
            if self._initialized is None:
                answer = self.request(message)
                if answer is None or "result" not in answer:
                    return answer  # an error (or no answer) is not kept: the next client tries again
                self._initialized = answer["result"]
                try:
                    self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
                except (OSError, ValueError):
                    return None
        return {"jsonrpc": "2.0", "id": message["id"], "result": self._initialized}

    def notify(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method in ("notifications/initialized", "notifications/cancelled"):
            return  # the relay sent the one the child needs; a cancellation names a client's id
        with contextlib.suppress(OSError, ValueError):
            self._send(message)


class _RelayServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], relay: StdioRelay) -> None:
        self.relay = relay
        super().__init__(address, _RelayHandler)


class _RelayHandler(BaseHTTPRequestHandler):
    server: _RelayServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def handle(self) -> None:
        with contextlib.suppress(OSError):  # a client that hung up early: nothing to answer
            super().handle()

    def _reply(self, status: int, body: dict[str, Any] | None = None) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, code: int, text: str, ident: Any = None) -> None:
        self._reply(status, {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": text}})

    def do_GET(self) -> None:
        self._reply(405)  # no server-sent stream: nothing reaches a task unasked

    def do_DELETE(self) -> None:
        self._reply(405)  # stateless: there is no session to end

    def do_POST(self) -> None:
        relay = self.server.relay
        if self.path.split("?", 1)[0] != relay.mcp_path:
            self._reply(404)
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length <= 0 or length > MAX_MESSAGE_BYTES:
            self._error(413 if length > 0 else 400, -32600, "a request needs one JSON-RPC message")
            return
        try:
            message = json.loads(self.rfile.read(length))
        except ValueError:
            self._error(400, -32700, "not JSON")
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self._error(400, -32600, "one JSON-RPC 2.0 message per request (no batches)")
            return
        if "method" not in message:
            self._reply(202)  # a client's answer to a server request: none are made here
            return
        if "id" not in message:
            relay.notify(message)
            self._reply(202)
            return
        answer = relay.initialize(message) if message["method"] == "initialize" else relay.request(message)
        if answer is None:
            self._error(502, -32603, "the stdio service did not answer", message["id"])
            return
        self._reply(200, answer)
