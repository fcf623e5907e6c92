"""The publisher's REST calls keep the forge token on the forge's own origin, across redirects."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from crucible_core.api import PublishRequest
from crucible_publish_github.github import API_ENV, PublishFailed, _Api

TOKEN = "ghp_redirectcanary0000000000000000000000"


class _Recorder(BaseHTTPRequestHandler):
    """Redirects every GET to `target` when set, else answers an empty list; records each
    request's Authorization header."""

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


def _recorder(target: str | None) -> type[_Recorder]:
    """A fresh handler class with its own record (class attributes are shared by its requests)."""

    class Recorder(_Recorder):
        pass

    Recorder.target, Recorder.seen = target, []
    return Recorder


@contextmanager
def _serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _request(api: str, tmp_path: Path) -> PublishRequest:
    return PublishRequest(
        repo="acme/widgets",
        base="main",
        branch="crucible/run-1",
        sha="0" * 40,
        workspace=tmp_path,
        title="t",
        body="b",
        env={API_ENV: api},
        timeout=10.0,
    )


def test_a_redirect_to_another_origin_does_not_carry_the_token(tmp_path: Path) -> None:
    elsewhere = _recorder(None)
    with _serve(elsewhere) as other:
        forge = _recorder(other)
        with _serve(forge) as url:
            api = _Api(_request(url, tmp_path), TOKEN, time.monotonic() + 10)
            with contextlib.suppress(PublishFailed):  # refusing the redirect would do as well
                api.open_pull()
    assert forge.seen == [f"Bearer {TOKEN}"]
    assert all(seen is None for seen in elsewhere.seen)


def test_the_forge_itself_gets_the_token(tmp_path: Path) -> None:
    forge = _recorder(None)
    with _serve(forge) as url:
        assert _Api(_request(url, tmp_path), TOKEN, time.monotonic() + 10).open_pull() is None
    assert forge.seen == [f"Bearer {TOKEN}"]
