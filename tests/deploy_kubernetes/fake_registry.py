"""A loopback OCI distribution registry that knows a few tags: HEAD/GET /v2/<name>/manifests/<ref>.

Optionally demands an anonymous bearer token first (the 401 + WWW-Authenticate dance public
registries do), so the pinning client's token fetch is exercised too.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"


class FakeRegistry:
    def __init__(self, *, require_token: bool = False) -> None:
        self.manifests: dict[tuple[str, str], bytes] = {}
        self.requests: list[tuple[str, str, str | None]] = []
        self.require_token = require_token
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_HEAD(self) -> None:
                fake._serve(self, body=False)

            def do_GET(self) -> None:
                fake._serve(self, body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> FakeRegistry:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def push(self, name: str, tag: str) -> str:
        """Store a manifest under name:tag; its digest."""
        manifest = json.dumps(
            {"schemaVersion": 2, "mediaType": MANIFEST_TYPE, "tag": tag, "name": name}
        ).encode()
        self.manifests[(name, tag)] = manifest
        return "sha256:" + hashlib.sha256(manifest).hexdigest()

    def _serve(self, h: BaseHTTPRequestHandler, *, body: bool) -> None:
        self.requests.append((h.command, h.path, h.headers.get("Authorization")))
        if h.path.startswith("/token"):
            return self._reply(h, 200, json.dumps({"token": "anon"}).encode(), "application/json", body)
        if self.require_token and h.headers.get("Authorization") != "Bearer anon":
            h.send_response(401)
            h.send_header(
                "WWW-Authenticate", f'Bearer realm="http://{self.host}/token",service="fake",scope="pull"'
            )
            h.send_header("Content-Length", "0")
            h.end_headers()
            return None
        m = re.fullmatch(r"/v2/(?P<name>.+)/manifests/(?P<ref>[^/]+)", h.path)
        manifest = self.manifests.get((m["name"], m["ref"])) if m else None
        if manifest is None:
            data = json.dumps({"errors": [{"code": "MANIFEST_UNKNOWN"}]}).encode()
            return self._reply(h, 404, data, "application/json", body)
        digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
        return self._reply(h, 200, manifest, MANIFEST_TYPE, body, digest)

    @staticmethod
    def _reply(
        h: BaseHTTPRequestHandler, code: int, data: bytes, ctype: str, body: bool, digest: str | None = None
    ) -> None:
        h.send_response(code)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(data)))
        if digest:
            h.send_header("Docker-Content-Digest", digest)
        h.end_headers()
        if body:
            h.wfile.write(data)
