"""The broker: one MCP tool call through the run's broker against a bare HTTP round trip on loopback,
and what a one-iteration run pays for the broker when its agent cannot call MCP tools.

Tool call: both sides are the same client (urllib, one POST per call, a fresh connection each
time) talking to a server on 127.0.0.1 in this process; the crucible side goes through the
bearer check, the mcp SDK's streamable HTTP app, the grant check, the tool and two session events.

Skipped start: the same one-iteration run of a tiny domain in a fresh interpreter, once with a
backend registered without the `takes_mcp` trait (no server is started: today's behaviour for an
agent that cannot call MCP tools) and once with the same backend registered with it (the server
is started, as every run did before). Both sides are timed the same way; the ratio is wall time.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
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
QUICK_RUN_REPS = 1  # `--quick`: timed pairs of one-iteration runs (each run takes seconds)
# For the up-front estimate: a batch of CALLS calls through both sides, the server's start,
# and one one-iteration run in a fresh interpreter. Measured on the shared 2-core machine
# (load about 12).
SECONDS_PER_BATCH = 0.5
SECONDS_SERVER = 2.0
SECONDS_PER_RUN = 7.0


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


RUN_MANIFEST = """
[repo]
path = "."

[workspace]
dir = "workspace"
setup_cmd = "mkdir -p workspace && cp value.txt workspace/"

[agent]
backend = "{backend}"
agent_cmd = "true"
goal = "nothing"

[judge]
measure_cmd = "../measure.sh"
direction = "higher"
"""

# One run in a fresh interpreter, with the command backend registered again under a second name
# with or without the takes_mcp trait (the only difference between the two sides).
RUN_DRIVER = """
import sys, types
from pathlib import Path
from crucible_backend_local.backends import CommandBackend
from crucible_backend_local.settings import CommandBackendSettings
from crucible_core.hookspecs import hookimpl
from crucible_core.plugins import load_plugins
from crucible_core.run.budget import Budget
from crucible_core.session.entry import execute
from crucible_core.session.request import SessionRequest

takes_mcp = sys.argv[2] == "mcp"
module = types.ModuleType("bench_backend")
module.crucible_register_backends = hookimpl(
    lambda register: register(
        "bench-command", CommandBackend.from_context, settings=CommandBackendSettings, takes_mcp=takes_mcp
    )
)
plugins = load_plugins(names=["core", "world_git", "judge_command", "backend_local", "broker_mcp"])
plugins.register_module(module, name="bench", distribution="bench", version="0")
result = execute(plugins, SessionRequest(manifest=Path(sys.argv[1]), budget=Budget(iterations=1), ui="headless"))
broker_dir = Path(sys.argv[1]).parent / "state" / "private" / "broker"
print(result.outcome, "served" if (broker_dir / "endpoint.json").exists() else "none")
"""


def _one_run(workdir: Path, takes_mcp: bool) -> tuple[float, str]:
    """Wall seconds of one run, and what it printed (outcome, whether a server was ever started)."""
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    (workdir / "value.txt").write_text("1\n")
    measure = workdir / "measure.sh"
    measure.write_text('#!/bin/sh\nprintf \'{"valid": true, "score": 1}\\n\'\n')
    measure.chmod(0o755)
    manifest = workdir / "crucible.toml"
    manifest.write_text(RUN_MANIFEST.format(backend="bench-command"))
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", RUN_DRIVER, str(manifest), "mcp" if takes_mcp else "plain"],
        capture_output=True,
        text=True,
        check=True,
    )
    return time.perf_counter() - started, done.stdout.strip()


def _run_reps(options: Options) -> int:
    return min(options.reps, QUICK_RUN_REPS) if options.quick else options.reps


def estimate(options: Options) -> float:
    calls = (options.reps + 1) * SECONDS_PER_BATCH + SECONDS_SERVER
    return calls + 2 * (_run_reps(options) + 1) * SECONDS_PER_RUN


def skipped_start(options: Options) -> Row:
    workdir = options.workdir / "broker_start"
    without, with_server = [], []
    seen: set[str] = set()
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_without = cpu_with = 0.0
    reps = _run_reps(options)
    for _ in range(reps + 1):  # the first pair warms both sides up
        for takes_mcp in (False, True):  # interleaved, so drift hits both sides alike
            seconds, printed = _one_run(workdir / ("mcp" if takes_mcp else "plain"), takes_mcp)
            cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime)
            cpu_before = cpu_after
            (with_server if takes_mcp else without).append(seconds)
            if takes_mcp:
                cpu_with += cpu
            else:
                cpu_without += cpu
            seen.add(f"{'mcp' if takes_mcp else 'plain'} {printed}")
    if not options.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    runs = reps + 1
    note = f"child CPU per run {cpu_without / runs:.2f} s vs {cpu_with / runs:.2f} s"
    if seen != {"plain finished none", "mcp finished served"}:
        note = f"MISMATCH: the runs reported {sorted(seen)}"
    return Row(
        "broker: 1-iteration run, no MCP agent: server skipped vs started",
        median(without[1:]),
        median(with_server[1:]),
        note=note,
    )


def run(options: Options) -> list[Row]:
    return [tool_call(options), skipped_start(options)]


def tool_call(options: Options) -> Row:
    from crucible_broker_mcp.broker import Broker
    from crucible_broker_mcp.mediation import Mediator
    from crucible_broker_mcp.server import BrokerServer
    from crucible_broker_mcp.tools import BUILTIN_TOOLS
    from crucible_core.broker.declaration import Declaration, Disclosure
    from crucible_core.broker.tools import BrokerRuntime

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
    return Row("broker: one tool call vs bare HTTP POST", crucible, bare, target=TARGET, note=note)
