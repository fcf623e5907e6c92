"""The broker's MCP server: the mcp SDK's streamable HTTP app behind a guard, on its own thread.

The guard refuses, before the SDK sees a byte: a peer that is not loopback (403), a request
without the run's bearer token or with a wrong one (401), a body over the size bound (413), and
a request over the concurrency bound (503). A request the SDK rejects as malformed (a batch, a
non-object, a missing field) gets a short JSON-RPC error of ours: the SDK's own message is a
pydantic report that echoes the input and names library internals. Tool calls run on worker
threads, so a slow tool never stalls the listener; a tool that raises comes back as an MCP tool
error.

The server lives inside the engine process (a daemon thread with its own event loop), so it
cannot outlive the engine: a SIGKILL takes the socket with the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import secrets
import socket
import threading
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server.lowlevel import Server

from crucible_broker_mcp.broker import Broker
from crucible_core.api import SERVER_NAME, RunFailed, write_atomic

MAX_BODY_BYTES = 256 * 1024  # one tool call's arguments; far above any honest call
MAX_CONCURRENT = 4  # requests served at once; more get 503 and the client retries
START_SECONDS = 10.0
STOP_SECONDS = 5.0
LOOPBACK = frozenset({"127.0.0.1", "::1"})


class BrokerServer:
    def __init__(
        self,
        broker: Broker,
        directory: Path,
        *,
        max_body: int = MAX_BODY_BYTES,
        max_concurrent: int = MAX_CONCURRENT,
    ) -> None:
        self.broker = broker
        self.directory = directory
        self.name = SERVER_NAME
        self.token = secrets.token_urlsafe(32)
        self.max_body = max_body
        self.max_concurrent = max_concurrent
        self.url = ""
        self._socket: socket.socket | None = None
        self._uvicorn: _EventServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> str:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        sock.set_inheritable(False)  # agent children must not hold the listening socket
        self._socket = sock
        port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.broker.runtime.add_secret(self.token)  # never in the session log, whatever echoes it
        self._write_private_files(port)
        config = uvicorn.Config(
            _Guard(self._mcp_app(), self.token, self.max_body, self.max_concurrent),
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=2,
            date_header=False,  # uvicorn refreshes it on the tick _EventServer does not run
        )
        server = _EventServer(config)
        self._uvicorn = server
        self._thread = threading.Thread(
            target=server.run_on, args=(sock,), name="crucible-broker", daemon=True
        )
        self._thread.start()
        server.ready.wait(START_SECONDS)  # set when the start-up ends, whether or not it succeeded
        if not server.started:
            self.stop()
            raise RunFailed("the broker's MCP server did not start", hint="see the engine's stderr for why")
        self.broker.attach(f"mcp {self.url}")
        return self.url

    def stop(self) -> None:
        self.broker.detach()
        if self._uvicorn is not None:
            self._uvicorn.request_exit()
        if self._thread is not None:
            self._thread.join(STOP_SECONDS)
            if self._thread.is_alive() and self._uvicorn is not None:
                self._uvicorn.force_exit = True
                self._thread.join(STOP_SECONDS)
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        (self.directory / "token").unlink(missing_ok=True)

    def client_config(self) -> dict[str, Any]:
        """The entry a turn's MCP config carries (the Claude CLI reads this shape)."""
        return {"type": "http", "url": self.url, "headers": {"Authorization": f"Bearer {self.token}"}}

    def _write_private_files(self, port: int) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        write_atomic(self.directory / "token", (self.token + "\n").encode(), mode=0o600)
        endpoint = {"url": self.url, "port": port, "pid": os.getpid()}
        write_atomic(self.directory / "endpoint.json", json.dumps(endpoint).encode(), mode=0o600)

    # -- the MCP surface ----------------------------------------------------------------------
    def _mcp_app(self) -> Any:
        broker = self.broker

        async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(
                tools=[
                    types.Tool(name=t.name, description=t.description, input_schema=dict(t.input_schema))
                    for t in broker.list_tools()
                ]
            )

        async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            outcome = await anyio.to_thread.run_sync(broker.call, params.name, params.arguments)
            body = outcome.result if outcome.ok else {"error": outcome.error}
            return types.CallToolResult(
                content=[types.TextContent(text=json.dumps(body, default=str))], is_error=not outcome.ok
            )

        server: Server[Any] = Server(self.name, on_list_tools=list_tools, on_call_tool=call_tool)
        return server.streamable_http_app(
            streamable_http_path="/mcp",
            json_response=True,
            stateless_http=True,
            max_request_body_size=self.max_body,
            host="127.0.0.1",
        )


class _EventServer(uvicorn.Server):
    """uvicorn's server, told to stop by an event rather than noticing on its 0.1 s polling tick,
    and saying when its start-up ended rather than being polled for it."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._exit: asyncio.Event | None = None

    def run_on(self, sock: socket.socket) -> None:
        try:
            asyncio.run(self.serve(sockets=[sock]))
        finally:
            self.ready.set()  # a start-up that raised must not leave start() waiting its bound

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self._exit = asyncio.Event()
        try:
            await super().startup(sockets=sockets)
        finally:
            self.ready.set()

    async def main_loop(self) -> None:
        if self._exit is not None and not self.should_exit:
            await self._exit.wait()

    def request_exit(self) -> None:
        """From any thread: stop serving now (the graceful shutdown follows on the server's loop)."""
        self.should_exit = True
        loop, event = self._loop, self._exit
        if loop is not None and event is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: the server is gone
                loop.call_soon_threadsafe(event.set)


class _Guard:
    """ASGI middleware: loopback peers, the bearer token, the body size and concurrency bounds."""

    def __init__(self, app: Any, token: str, max_body: int, max_concurrent: int) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()
        self.max_body = max_body
        self.max_concurrent = max_concurrent
        self.active = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client") or ("", 0)
        if client[0] not in LOOPBACK:
            await _reply(send, 403, "the broker serves loopback peers only")
            return
        headers = dict(scope.get("headers") or [])
        if not hmac.compare_digest(headers.get(b"authorization", b""), self.expected):
            await _reply(send, 401, "missing or wrong bearer token", {b"www-authenticate": b"Bearer"})
            return
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            await _reply(send, 413, f"request body over {self.max_body} bytes")
            return
        if self.active >= self.max_concurrent:
            await _reply(send, 503, "too many concurrent broker requests; retry", {b"retry-after": b"1"})
            return
        self.active += 1
        try:
            # the SDK bounds a body without Content-Length
            await self.app(scope, receive, _PlainRejections(send))
        finally:
            self.active -= 1


# The SDK's replies to a body it cannot parse or validate, by the start of their message, and
# what we say instead. Its other 400s (an unsupported protocol version, ...) carry what a client
# needs and pass unchanged.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
_REJECTIONS = {
    "Parse error": (PARSE_ERROR, "Parse error: the body is not JSON"),
    "Validation error": (
        INVALID_REQUEST,
        "Invalid Request: send one JSON-RPC 2.0 request object (batches are not accepted)",
    ),
}


class _PlainRejections:
    """An ASGI send that rewrites the SDK's parse and validation rejections (400) to a fixed JSON-RPC error."""

    def __init__(self, send: Any) -> None:
        self.send = send
        self.held: dict[str, Any] | None = None
        self.body = b""

    async def __call__(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start" and message.get("status") == 400:
            self.held = message  # sent with the rewritten body, whose length differs
            return
        if self.held is None or message["type"] != "http.response.body":
            await self.send(message)
            return
        self.body += message.get("body", b"")
        if message.get("more_body"):
            return
        body = _rejection(self.body) or self.body
        headers = [(k, v) for k, v in self.held.get("headers", []) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await self.send({**self.held, "headers": headers})
        await self.send({"type": "http.response.body", "body": body})


def _rejection(sdk_body: bytes) -> bytes | None:
    """Our reply in place of the SDK's, or None to pass the SDK's on."""
    try:
        message = str(json.loads(sdk_body)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return None
    for start, (code, text) in _REJECTIONS.items():
        if message.startswith(start):
            return json.dumps(
                {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": text}}
            ).encode()
    return None


async def _reply(send: Any, status: int, text: str, extra: dict[bytes, bytes] | None = None) -> None:
    body = json.dumps({"error": text}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += list((extra or {}).items())
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
