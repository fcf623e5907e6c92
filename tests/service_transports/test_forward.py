"""The forward every transport puts in front of a service: loopback only, the run's bearer or nothing."""

from __future__ import annotations

import http.client
import http.server
import threading

from crucible_service_transports.forward import AuthenticatingForward


def test_the_forward_requires_the_bearer_and_hides_it_from_the_service() -> None:
    seen: list[str | None] = []

    class Upstream(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            return

    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    forward = AuthenticatingForward(upstream.server_address[1], "the-bearer").start()
    try:
        for header, status in ((None, 401), ("Bearer wrong", 401), ("Bearer the-bearer", 200)):
            connection = http.client.HTTPConnection("127.0.0.1", forward.port, timeout=10)
            connection.request("GET", "/x", headers={"Authorization": header} if header else {})
            response = connection.getresponse()
            assert (response.status, response.read() if status == 200 else b"ok") == (status, b"ok")
            connection.close()
        assert seen == [None] and forward.refused == 2
    finally:
        forward.close()
        upstream.shutdown()
