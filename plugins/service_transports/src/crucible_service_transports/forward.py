"""The engine-owned forward to one service: loopback only, refusing any request without the run's bearer.

Tasks never learn the service's own port; they get this forward's URL and the bearer the engine
minted for this run and this service. The bearer is stripped before the request reaches the service, and
responses (streamed MCP answers included) are copied through as they arrive.
"""

from __future__ import annotations

import hmac
import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BODY_BYTES = 16 << 20
_HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "proxy-authorization", "te", "trailers", "transfer-encoding", "upgrade"}
)


class AuthenticatingForward:
    """A threaded HTTP forward on 127.0.0.1 to `upstream_port`; started with start(), ended with close()."""

    def __init__(self, upstream_port: int, bearer: str) -> None:
        self.bearer = bearer
        self.upstream_port = upstream_port
        self.refused = 0
        forward = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # quiet: the log is the engine's
                return

            def _relay(self) -> None:
                forward._relay(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _relay

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="service-forward", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> AuthenticatingForward:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _authorized(self, header: str | None) -> bool:
        expected = f"Bearer {self.bearer}"
        return header is not None and hmac.compare_digest(header.encode(), expected.encode())

    def _relay(self, handler: BaseHTTPRequestHandler) -> None:
        if not self._authorized(handler.headers.get("Authorization")):
            self.refused += 1
            refusal = b"unauthorized: this forward needs the run's bearer for this service\n"
            handler.send_response(401)
            handler.send_header("WWW-Authenticate", "Bearer")
            handler.send_header("Content-Length", str(len(refusal)))
            handler.end_headers()
            handler.wfile.write(refusal)
            return
        length = int(handler.headers.get("Content-Length") or 0)
        if length < 0 or length > MAX_BODY_BYTES:
            handler.send_error(413)
            return
        body = handler.rfile.read(length) if length else None
        headers = {
            k: v
            for k, v in handler.headers.items()
            if k.lower() not in _HOP_HEADERS and k.lower() not in ("authorization", "host")
        }
        upstream = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=600)
        try:
            upstream.request(handler.command, handler.path, body=body, headers=headers)
            response = upstream.getresponse()
        except OSError:
            handler.send_error(502, "the service is not answering")
            upstream.close()
            return
        try:
            handler.send_response(response.status, response.reason)
            for key, value in response.getheaders():
                if key.lower() not in _HOP_HEADERS and key.lower() != "content-length":
                    handler.send_header(key, value)
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            while True:
                chunk = response.read1(1 << 16) if handler.command != "HEAD" else b""
                if not chunk:
                    break
                handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                handler.wfile.flush()
            handler.wfile.write(b"0\r\n\r\n")
        except OSError:
            handler.close_connection = True
        finally:
            upstream.close()
