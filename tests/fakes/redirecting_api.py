"""A loopback HTTP server that answers every GET with a redirect elsewhere (or an empty list) and
records the Authorization header each request carried: for tests that a client keeps a forge's
token on the forge's own origin."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Recorder(BaseHTTPRequestHandler):
    """Redirects every GET to `target` when set, else answers `[]`; appends each request's
    Authorization header (None when absent) to `seen`."""

    target: str | None = None
    seen: list[str | None] = []

    def do_GET(self) -> None:
        type(self).seen.append(self.headers.get("authorization"))
        if type(self).target is not None:
            self.send_response(302)
            self.send_header("location", f"{type(self).target}{self.path}")
            self.send_header("content-length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"[]")

    def log_message(self, *_args: object) -> None:
        pass


def recorder(target: str | None) -> type[Recorder]:
    """A fresh handler class with its own record (class attributes are shared by its requests)."""

    class Fresh(Recorder):
        pass

    Fresh.target, Fresh.seen = target, []
    return Fresh


@contextmanager
def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve `handler` on 127.0.0.1 for the block; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
