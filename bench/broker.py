"""The broker: one MCP tool call through the run's broker against a bare HTTP round trip on loopback.

Both sides are the same client (urllib, one POST per call, a fresh connection each time) talking
to a server on 127.0.0.1 in this process; the crucible side goes through the bearer check, the
mcp SDK's streamable HTTP app, the grant check, the tool and two session events.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from harness import Options, Row, median, timed

CALLS = 50
TARGET = 5.0  # SDK framing and two session events on top of the round trip


class _Echo(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = b'{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":false}}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        pass


def _calls(url: str, headers: dict[str, str]) -> None:
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "steer_inbox", "arguments": {}},
    }
    data = json.dumps(call).encode()
    for _ in range(CALLS):
        request = urllib.request.Request(url, data, {"content-type": "application/json", **headers})
        with urllib.request.urlopen(request, timeout=30) as reply:
            reply.read()


def run(options: Options) -> list[Row]:
    from crucible_broker_mcp.server import BrokerServer
    from crucible_core.broker.declaration import Declaration, Disclosure
    from crucible_core.broker.mediation import Mediator
    from crucible_core.broker.service import Broker
    from crucible_core.broker.tools import BrokerRuntime
    from crucible_core.run.broker_tools import BUILTIN_TOOLS

    events: list[str] = []
    emit = lambda event: events.append(event.KIND)  # noqa: E731
    scratch = Path(tempfile.mkdtemp(prefix="bench-broker-"))
    declaration = Declaration((), Disclosure((), (), None, (), ("steer_inbox",)))
    broker = Broker(
        declaration,
        {t.name: t for t in BUILTIN_TOOLS},
        BrokerRuntime(scratch, scratch),
        Mediator((), emit),
        emit,
    )
    started = time.perf_counter()
    server = BrokerServer(broker, scratch / "broker")
    server.start()
    start_s = time.perf_counter() - started
    broker.open_turn(1)
    echo = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=echo.serve_forever, daemon=True).start()
    echo_url = f"http://127.0.0.1:{echo.server_address[1]}/mcp"
    auth = {"authorization": f"Bearer {server.token}", "accept": "application/json, text/event-stream"}
    try:
        _calls(server.url, auth)  # warm both sides up
        _calls(echo_url, {})
        crucible = median([timed(lambda: _calls(server.url, auth)) for _ in range(options.reps)]) / CALLS
        bare = median([timed(lambda: _calls(echo_url, {})) for _ in range(options.reps)]) / CALLS
    finally:
        stopping = time.perf_counter()
        server.stop()
        stop_s = time.perf_counter() - stopping
        echo.shutdown()
    recorded = events.count("broker_result")
    expected = CALLS * (options.reps + 1)  # the warm-up batch and the timed ones
    note = f"server start {start_s * 1000:.0f} ms, stop {stop_s * 1000:.0f} ms"
    if recorded != expected:
        note = f"MISMATCH: {recorded} calls recorded, {expected} made"
    return [Row("broker: one tool call vs bare HTTP POST", crucible, bare, target=TARGET, note=note)]
