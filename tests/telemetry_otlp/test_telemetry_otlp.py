"""crucible-plugin-telemetry-otlp against a real OTLP/HTTP collector on loopback.

Real runs of the counter domain (the git world, real measure scripts); the receiver decodes the
exported protobuf with opentelemetry-proto, so a span the SDK never sent cannot pass.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import signal
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToJson

from crucible_core import api
from crucible_core.session_log import read_events
from crucible_telemetry_otlp import config
from tests.cli_support import CRUCIBLE, crucible_env
from tests.live_support import domain
from tests.telemetry_otlp.receiver import ReceivedSpan, Receiver, otlp_receiver

CANARY = "telemetry-canary-value-8c41e"

SLOW_PROPOSER = """#!/bin/sh
sleep 0.4
echo $(( $(cat value.txt) + 1 )) > value.txt
"""


def _wait(receiver: Receiver, predicate: Any, seconds: float = 10) -> list[ReceivedSpan]:
    deadline = time.monotonic() + seconds
    while not predicate(spans := receiver.spans()):
        assert time.monotonic() < deadline, [s.name for s in spans]
        time.sleep(0.05)
    return spans


def _log(manifest: Path) -> list[dict[str, Any]]:
    return list(read_events(manifest.parent / "state" / "session.jsonl"))


def test_without_a_configured_collector_the_plugin_sends_nothing(
    example: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in config.ENDPOINT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with otlp_receiver() as receiver:
        api.run(example("counter"), iterations=1)
    assert receiver.bodies == []


def test_a_counter_run_is_one_trace_with_its_span_tree(example: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = example("counter")
    with otlp_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        api.run(manifest, iterations=2)
        spans = _wait(receiver, lambda got: any(s.name == "crucible run" for s in got))
    run_id = next(e["run_id"] for e in _log(manifest) if e["kind"] == "start")
    assert {s.trace_id for s in spans} == {
        hashlib.sha256(f"crucible-run:{run_id}".encode()).digest()[:16].hex()
    }
    by_id = {s.span_id: s for s in spans}
    (root,) = [s for s in spans if s.parent_id == ""]
    assert root.name == "crucible run"
    assert root.attributes["crucible.run_id"] == run_id and root.attributes["crucible.resumed"] is False
    assert root.attributes["crucible.outcome"] == "finished" and root.attributes["crucible.iterations"] == 2
    assert root.attributes["crucible.total.keeps"] == 2 and root.attributes["crucible.total.iterations"] == 2

    def parent(span: ReceivedSpan) -> str:
        return by_id[span.parent_id].name

    iterations = sorted((s for s in spans if s.name == "iteration"), key=lambda s: s.start)
    assert [(s.attributes["crucible.iter"], s.attributes["crucible.decision"]) for s in iterations] == [
        (1, "keep"),
        (2, "keep"),
    ]
    assert [s.attributes["crucible.score"] for s in iterations] == [1.0, 2.0]
    assert all(parent(s) == "crucible run" for s in iterations)
    (baseline,) = [s for s in spans if s.name == "baseline"]
    assert baseline.attributes["crucible.score"] == 0.0
    steps = Counter((s.name, parent(s)) for s in spans if "crucible.step" in s.attributes)
    assert steps == {
        ("measure", "baseline"): 1,
        ("propose", "iteration"): 2,
        ("apply", "iteration"): 2,
        ("measure", "iteration"): 2,
        ("decide", "iteration"): 2,
    }
    turns = [s for s in spans if s.name == "agent turn"]
    assert len(turns) == 2 and all(parent(t) == "propose" for t in turns)
    assert all(
        t.attributes["crucible.ok"] is True and t.attributes["crucible.cost_usd"] == 0.0 for t in turns
    )
    assert all(s.start <= s.end and by_id[s.parent_id].start <= s.start for s in spans if s.parent_id)
    metrics = receiver.metrics()
    assert metrics["crucible.iterations"] == 2 and metrics["crucible.keeps"] == 2
    assert metrics["crucible.cost"] == 0.0
    assert metrics["crucible.measure.duration"] == 3  # the baseline's measure and one per iteration
    assert root.attributes["crucible.total.measure_secs"] > 0


def test_kill_and_resume_gives_two_linked_segments_of_one_trace(tmp_path: Path) -> None:
    manifest = domain(tmp_path, SLOW_PROPOSER)
    with otlp_receiver() as receiver:
        env = crucible_env(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url)
        first = subprocess.Popen(
            [str(CRUCIBLE), "run", "--manifest", str(manifest), "--ui", "headless", "--iterations", "6"],
            env=env,
        )
        # killed once the collector has the first iteration: its segment never ends
        _wait(receiver, lambda got: any(s.name == "iteration" for s in got), seconds=60)
        first.send_signal(signal.SIGKILL)
        first.wait()
        resumed = subprocess.run(
            [
                str(CRUCIBLE),
                "run",
                "--manifest",
                str(manifest),
                "--resume",
                "--ui",
                "headless",
                "--iterations",
                "6",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert resumed.returncode == 0, resumed.stderr
        spans = _wait(receiver, lambda got: any(s.name == "crucible run" for s in got))
    assert len({s.trace_id for s in spans}) == 1
    (second,) = [s for s in spans if s.name == "crucible run"]  # the killed segment's root never ended
    assert second.attributes["crucible.resumed"] is True
    (earlier,) = second.links
    killed = [s for s in spans if s.parent_id == earlier]
    assert killed and all(s.name in ("baseline", "iteration") for s in killed)
    later = [s for s in spans if s.parent_id == second.span_id and s.name == "iteration"]
    assert later and min(s.start for s in later) > max(s.start for s in killed)


@contextlib.contextmanager
def _closed_port() -> Iterator[int]:
    """A loopback port bound and held but never listened on: refused, and no test running beside
    this one can take it and answer in the collector's place."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield int(held.getsockname()[1])


@pytest.mark.parametrize("mode", ["refuse", "hang", "down"])
def test_a_collector_that_refuses_or_hangs_does_not_hold_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    def timed(manifest: Path) -> float:
        began = time.monotonic()
        api.run(manifest, iterations=3)
        return time.monotonic() - began

    for name in config.ENDPOINT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "plain").mkdir()
    (tmp_path / "watched").mkdir()
    proposer = "#!/bin/sh\necho $(( $(cat value.txt) + 1 )) > value.txt\n"
    alone = timed(domain(tmp_path / "plain", proposer))
    watched = domain(tmp_path / "watched", proposer)
    with otlp_receiver("refuse" if mode == "down" else mode) as receiver, _closed_port() as closed:
        url = f"http://127.0.0.1:{closed}" if mode == "down" else receiver.url
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
        took = timed(watched)
        assert bool(receiver.bodies) is (mode != "down")  # the exporter did try the one that listens
    assert took - alone < config.SHUTDOWN_SECONDS + 1.0, (took, alone)
    notes = [e["msg"] for e in _log(watched) if e["kind"] == "note" and e["msg"].startswith("telemetry:")]
    assert len(notes) == 1 and "did not reach the collector" in notes[0]
    assert _log(watched)[-1]["outcome"] == "finished"


def test_the_canary_never_reaches_the_exported_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = domain(tmp_path, "#!/bin/sh\necho $(( $(cat value.txt) + 1 )) > value.txt\n")
    # the measure (which the engine's environment reaches) quotes the secret in its note
    (tmp_path / "measure.sh").write_text(
        "#!/bin/sh\nv=$(cat value.txt)\n"
        'printf \'{"valid": true, "score": %s, "note": "v=%s key=%s"}\\n\' "$v" "$v" "$TELEMETRY_TEST_TOKEN"\n'
    )
    monkeypatch.setenv("TELEMETRY_TEST_TOKEN", CANARY)
    with otlp_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        api.run(manifest, iterations=2)
        spans = _wait(receiver, lambda got: any(s.name == "crucible run" for s in got))
    exported = b"".join(receiver.bodies)
    assert CANARY.encode() not in exported
    notes = [s.attributes.get("crucible.note", "") for s in spans if s.name == "iteration"]
    assert notes and all("key=[REDACTED]" in n for n in notes)  # the attribute is there, masked


def test_flow_spans_reads_the_otlp_json_export(
    example: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    manifest = example("counter")
    with otlp_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        api.run(manifest, iterations=2)
        _wait(receiver, lambda got: any(s.name == "crucible run" for s in got))
    merged = {
        "resourceSpans": [r for q in receiver.requests for r in json.loads(MessageToJson(q))["resourceSpans"]]
    }
    export = tmp_path / "trace.json"
    export.write_text(json.dumps(merged))
    page = tmp_path / "flow.json"
    from tests.cli_support import run_crucible

    done = run_crucible("flow", "--manifest", manifest, "--spans", export, "--out", page)
    assert done.returncode == 0, done.stderr
    walls = {it["iter"]: it.get("wall_secs") for it in json.loads(page.read_text())["iterations"]}
    assert walls[1] is not None and walls[2] is not None and walls[1] > 0


def test_tool_calls_plan_tasks_services_and_tokens_become_spans_and_metrics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The events a counter run does not write, told to the plugin's hooks as the session log tells them."""
    import crucible_telemetry_otlp as plugin

    context = api.RunContext(None, tmp_path, tmp_path, tmp_path / "private", "run-tools", False)
    now = time.time()
    events = [
        {"kind": "service_start", "service": "db", "port": 5432},
        {"kind": "phase", "phase": "iteration", "iter": 1},
        {"kind": "step", "step": "propose", "iter": 1},
        {"kind": "agent_start", "iter": 1},
        {"kind": "broker_call", "tool": "search_docs", "iter": 1, "arguments": {"q": "x"}},
        {"kind": "broker_result", "tool": "search_docs", "iter": 1, "ok": False, "error": "no index"},
        {"kind": "tokens", "input": 100, "output": 20, "cache_read": 5, "total": 125},
        {"kind": "turn", "iter": 1, "ok": False, "failure": "timeout", "cost": 0.25, "note": "cut"},
        {"kind": "task_result", "task": "lint", "status": "pass", "task_kind": "command", "attempts": 2},
        {"kind": "row", "row": {"iter": 1, "decision": "discard", "score": 3.0, "samples": [3.0, 2.9, 3.1]}},
        {"kind": "service_exit", "service": "db", "status": 0, "how": "stopped"},
    ]
    with otlp_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        plugin.crucible_run_start(context)
        for offset, event in enumerate(events):
            plugin.crucible_session_event({**event, "ts": now + offset * 0.01})
        plugin.crucible_run_end(api.RunEnd(context, "finished", "done", 1))
        spans = _wait(receiver, lambda got: any(s.name == "crucible run" for s in got))
        metrics = receiver.metrics()
    by_name = {s.name: s for s in spans}
    by_id = {s.span_id: s for s in spans}
    tool = by_name["tool search_docs"]
    assert by_id[tool.parent_id].name == "agent turn" and tool.attributes["crucible.ok"] is False
    assert tool.attributes["crucible.error"] == "no index" and tool.end > tool.start
    turn = by_name["agent turn"]
    assert turn.attributes["crucible.failure"] == "timeout" and turn.attributes["crucible.cost_usd"] == 0.25
    task = by_name["task lint"]
    assert task.attributes["crucible.status"] == "pass" and task.attributes["crucible.attempts"] == 2
    service = by_name["service db"]
    assert by_id[service.parent_id].name == "crucible run" and service.attributes["crucible.how"] == "stopped"
    iteration = by_name["iteration"]
    assert (
        iteration.attributes["crucible.repeats"] == 3
        and iteration.attributes["crucible.decision"] == "discard"
    )
    assert metrics["crucible.tokens"] == 125 and metrics["crucible.cost"] == 0.25
    assert metrics["crucible.iterations"] == 1 and "crucible.keeps" not in metrics
