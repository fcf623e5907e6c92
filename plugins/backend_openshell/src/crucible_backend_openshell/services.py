"""Reaching run services from a sandbox: a bearer-checking forward per service, exposed by the gateway.

A run service binds only a loopback port on the engine's side. For each service a turn
needs, the backend starts a forward on 127.0.0.1 that refuses (401) every request without
the per-run, per-service bearer and relays the rest to the service; the gateway's
ExposeService publishes that forward, and the sandbox's egress gains the forward's address
for that turn only. The bearer reaches the agent only in the MCP server entry of the turn
that needs the service.

The engine hands each turn its run services as `Turn.services` (core's `ServiceForward`);
`OpenShellBackend.services_for` turns each into the `ServiceNeed` this module serves.
"""

from __future__ import annotations

import hmac
import http.client
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs

SERVICE_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}")
MAX_BODY_BYTES = 16 * 1024 * 1024
RELAY_TIMEOUT_SECONDS = 60.0
# Hop-by-hop headers a relay must not pass on (RFC 9110 section 7.6.1), and the bearer itself.
_NOT_RELAYED = {"connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection", "te", "host"}


@attrs.frozen
class ServiceNeed:
    """A run service one turn needs: its name, the loopback port it serves, the bearer issued for it."""

    name: str
    port: int
    bearer: str = attrs.field(repr=False)
    mcp_path: str = "/mcp"  # where an MCP streamable-HTTP service answers

    def __attrs_post_init__(self) -> None:
        if not SERVICE_NAME.fullmatch(self.name):
            raise ValueError(f"service name {self.name!r} must match [a-z][a-z0-9_]*")
        if not 1 <= self.port <= 65535:
            raise ValueError(f"service {self.name}: port {self.port} out of range")
        if len(self.bearer) < 16:
            raise ValueError(f"service {self.name}: the bearer must be at least 16 characters")


class _Forward(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, need: ServiceNeed) -> None:
        self.need = need
        super().__init__(("127.0.0.1", 0), _ForwardHandler)


class _ForwardHandler(BaseHTTPRequestHandler):
    server: _Forward
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # no stderr noise from the relay
        return

    def _refuse(self, status: int, text: str) -> None:
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        if status == 401:
            self.send_header("WWW-Authenticate", "Bearer")
        self.end_headers()
        self.wfile.write(body)

    def _authorized(self) -> bool:
        given = self.headers.get("Authorization", "")
        expected = f"Bearer {self.server.need.bearer}"
        return hmac.compare_digest(given.encode(), expected.encode())

    def _relay(self) -> None:
        if not self._authorized():
            self._refuse(401, "this forward needs its service bearer")
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self._refuse(413, "request body too large")
            return
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _NOT_RELAYED}
        upstream = http.client.HTTPConnection(
            "127.0.0.1", self.server.need.port, timeout=RELAY_TIMEOUT_SECONDS
        )
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            reply = upstream.getresponse()
            data = reply.read(MAX_BODY_BYTES + 1)[:MAX_BODY_BYTES]
        except OSError as exc:
            self._refuse(502, f"service {self.server.need.name} did not answer: {type(exc).__name__}")
            return
        finally:
            upstream.close()
        self.send_response(reply.status)
        for key, value in reply.getheaders():
            if key.lower() not in _NOT_RELAYED and key.lower() != "content-length":
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _relay


@contextmanager
def bearer_forward(need: ServiceNeed) -> Iterator[int]:
    """A running forward for one service on 127.0.0.1; yields its port, stops it on exit."""
    server = _Forward(need)
    thread = threading.Thread(target=server.serve_forever, name=f"forward-{need.name}", daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def mcp_entry(need: ServiceNeed, url: str) -> dict[str, Any]:
    """The turn's MCP server entry for a service, named `service.NAME`, carrying its bearer."""
    return {
        "type": "http",
        "url": url.rstrip("/") + need.mcp_path,
        "headers": {"Authorization": f"Bearer {need.bearer}"},
    }
