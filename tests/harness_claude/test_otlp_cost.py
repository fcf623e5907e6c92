"""The Claude harness's second cost source: the CLI's own OTLP metrics, caught by a loopback receiver per turn."""

from __future__ import annotations

import http.client
import json
import shlex
import sys
import time
from pathlib import Path

import attrs
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AggregationTemporality,
    Metric,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)

from crucible_core.api import Completed, TurnResult
from crucible_harness_claude.cli_harness import ClaudeCodeHarness
from crucible_harness_claude.cli_verdict import classify
from crucible_harness_claude.otlp_cost import (
    COST_METRIC,
    TOKEN_METRIC,
    MetricsReceiver,
    OtlpUnavailable,
    telemetry_env,
)
from crucible_harness_claude.settings import ClaudeSettings
from crucible_harness_claude.stream_json import StreamDecoder
from tests.fakes.anthropic_api import FakeAnthropic, Script, say
from tests.harness_claude.support import Recorder, harness_context, make_turn

# Sonnet 4.6 list prices, USD per million tokens; the fake reports 1200 in / 80 out per call.
PER_CALL = (1200 * 3.0 + 80 * 15.0) / 1_000_000


def _point(value: float, t: int, **attributes: str) -> NumberDataPoint:
    return NumberDataPoint(
        as_double=value,
        time_unix_nano=t,
        attributes=[KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in attributes.items()],
    )


def metrics_request(
    cost: list[NumberDataPoint],
    tokens: list[NumberDataPoint] = (),  # type: ignore[assignment]
    temporality: int = AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA,
) -> ExportMetricsServiceRequest:
    metrics = [
        Metric(name=COST_METRIC, unit="USD", sum=Sum(data_points=cost, aggregation_temporality=temporality)),
        Metric(
            name=TOKEN_METRIC, unit="tokens", sum=Sum(data_points=tokens, aggregation_temporality=temporality)
        ),
        # Another of the CLI's metrics: not a cost, never counted as one.
        Metric(name="claude_code.lines_of_code.count", sum=Sum(data_points=[_point(500.0, 1)])),
    ]
    return ExportMetricsServiceRequest(
        resource_metrics=[ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=metrics)])]
    )


def post(
    endpoint: str, body: bytes, *, path: str = "/v1/metrics", content_type: str = "application/x-protobuf"
) -> int:
    host, port = endpoint.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": content_type})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def test_delta_points_add_up_by_metric_and_token_type() -> None:
    with MetricsReceiver(max_life_seconds=30) as receiver:
        first = metrics_request(
            [_point(0.010, 1, model="claude-sonnet-4-6")],
            [_point(1200, 1, type="input"), _point(80, 1, type="output")],
        )
        second = metrics_request(
            [_point(0.005, 2, model="claude-sonnet-4-6")], [_point(600, 2, type="input")]
        )
        assert post(receiver.endpoint, first.SerializeToString()) == 200
        assert post(receiver.endpoint, second.SerializeToString()) == 200
        usage = receiver.usage()
    assert usage.cost_usd == pytest.approx(0.015)
    assert usage.tokens == {"input": 1800, "output": 80}
    assert (usage.requests, usage.rejected) == (2, 0)


def test_cumulative_points_keep_each_series_latest_value_and_json_bodies_decode() -> None:
    cumulative = AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
    with MetricsReceiver(max_life_seconds=30) as receiver:
        early = metrics_request([_point(0.01, 1, model="a")], temporality=cumulative)
        late = metrics_request(
            [_point(0.03, 2, model="a"), _point(0.5, 2, model="b")], temporality=cumulative
        )
        assert post(receiver.endpoint, late.SerializeToString()) == 200
        # The JSON form of OTLP/HTTP, arriving out of order: an older cumulative value never wins.
        body = json_format.MessageToJson(early).encode()
        assert post(receiver.endpoint, body, content_type="application/json") == 200
        usage = receiver.usage()
    assert usage.cost_usd == pytest.approx(0.53)


def test_hostile_requests_are_refused_and_counted() -> None:
    with MetricsReceiver(max_life_seconds=30, max_body_bytes=64 * 1024) as receiver:
        assert post(receiver.endpoint, b"\xff" * (128 * 1024)) == 413  # over the body bound, not read
        assert post(receiver.endpoint, b"\x0a\xff\xff\xff") == 400  # not an OTLP request
        assert post(receiver.endpoint, b"{not json", content_type="application/json") == 400
        valid = metrics_request([_point(1.0, 1)]).SerializeToString()
        assert post(receiver.endpoint, valid, path="/v1/traces") == 404
        negative = metrics_request([_point(-5.0, 1), _point(float("nan"), 1, model="x")])
        assert post(receiver.endpoint, negative.SerializeToString()) == 200
        flood = metrics_request([], [_point(float(i + 1), 1, type=f"t{i}" * 50) for i in range(100)])
        assert post(receiver.endpoint, flood.SerializeToString()) == 200
        usage = receiver.usage()
    assert usage.rejected == 4 and usage.requests == 2
    assert usage.cost_usd is None  # a negative or NaN counter point is not a cost
    # A flood of made-up token types reaches the log as a few clipped names, the largest first.
    assert len(usage.tokens) == 8 and all(len(kind) <= 40 for kind in usage.tokens)
    assert max(usage.tokens.values()) == 100


def test_the_receiver_stops_on_its_own_after_its_life() -> None:
    receiver = MetricsReceiver(max_life_seconds=0.3).__enter__()
    endpoint = receiver.endpoint
    assert post(endpoint, metrics_request([_point(0.1, 1)]).SerializeToString()) == 200
    time.sleep(1.0)
    with pytest.raises(OSError):
        post(endpoint, metrics_request([_point(0.1, 2)]).SerializeToString())
    assert receiver.usage().cost_usd == pytest.approx(0.1)
    receiver.stop()  # a second stop is harmless


def test_the_cli_environment_points_only_metrics_at_the_receiver() -> None:
    env = telemetry_env("http://127.0.0.1:4999")
    assert env["CLAUDE_CODE_ENABLE_TELEMETRY"] == "1" and env["OTEL_METRICS_EXPORTER"] == "otlp"
    assert env["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"] == "http://127.0.0.1:4999/v1/metrics"
    assert env["OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"] == "http/protobuf"
    assert env["OTEL_LOGS_EXPORTER"] == env["OTEL_TRACES_EXPORTER"] == "none"


def _decoder_with_result(cost: float | None) -> StreamDecoder:
    decoder = StreamDecoder(lambda kind, fields: None)
    decoder.feed(json.dumps({"type": "system", "subtype": "init", "model": "claude-sonnet-4-6"}))
    result: dict[str, object] = {"type": "result", "subtype": "success", "num_turns": 1, "result": "done"}
    if cost is not None:
        result["total_cost_usd"] = cost
    decoder.feed(json.dumps(result))
    return decoder


def test_the_stream_cost_is_preferred_and_otlp_stands_in_when_the_stream_has_none() -> None:
    done = Completed(exit_code=0, stdout="", stderr="", timed_out=False, duration=1.0)
    assert classify(done, _decoder_with_result(0.25), otlp_cost=0.40).cost_usd == pytest.approx(0.25)
    fallback = classify(done, _decoder_with_result(None), otlp_cost=0.40)
    assert fallback.ok and fallback.cost_usd == pytest.approx(0.40)
    assert "OTLP" in fallback.note
    assert classify(done, _decoder_with_result(None)).cost_usd == 0.0  # neither: priced usage (none here)


def test_a_cli_turn_that_exports_only_otlp_metrics_is_charged_by_them(
    tmp_path: Path, workspace: Path, private_dir: Path
) -> None:
    # A stand-in CLI: it ends its stream without a cost but posts its cost, as real OTLP protobuf,
    # to the endpoint the harness put in its environment, as Claude Code does when asked.
    request = metrics_request([_point(0.0375, 1)], [_point(900, 1, type="input")])
    payload = tmp_path / "metrics.pb"
    payload.write_bytes(request.SerializeToString())
    script = tmp_path / "claude"
    script.write_text(
        "#!/usr/bin/env python3\n"
        "import json, os, sys, urllib.request\n"
        "sys.stdin.read()\n"
        "assert os.environ['CLAUDE_CODE_ENABLE_TELEMETRY'] == '1'\n"
        f"body = open({str(payload)!r}, 'rb').read()\n"
        "req = urllib.request.Request(os.environ['OTEL_EXPORTER_OTLP_METRICS_ENDPOINT'], data=body,\n"
        "    headers={'Content-Type': 'application/x-protobuf'})\n"
        "urllib.request.urlopen(req, timeout=5).read()\n"
        "print(json.dumps({'type': 'system', 'subtype': 'init', 'session_id': 'stand-in-session-0001', 'model': 'claude-sonnet-4-6'}))\n"
        "print(json.dumps({'type': 'result', 'subtype': 'success', 'num_turns': 1, 'result': 'ok'}))\n"
    )
    script.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CRUCIBLE_CLAUDE_BIN": str(script)}

    def run(otlp_cost: bool) -> tuple[float, Recorder]:
        ctx = harness_context(workspace.parent, private_dir)
        ctx = attrs.evolve(ctx, settings=ClaudeSettings(otlp_cost=otlp_cost))
        events = Recorder()
        result = ClaudeCodeHarness.from_context(ctx).run(make_turn(workspace, env, events))
        return result.cost_usd, events

    cost, events = run(otlp_cost=True)
    assert cost == pytest.approx(0.0375)
    (record,) = events.of("agent_cost")
    assert record["cost_source"] == "otlp" and record["otlp_tokens"] == {"input": 900}
    # Off (the default): the CLI is not told where to export, so the stand-in fails to start.
    cost, events = run(otlp_cost=False)
    assert cost == 0.0 and not events.of("agent_cost")


def _otlp_turn(workspace: Path, private_dir: Path, env: dict[str, str]) -> tuple[TurnResult, Recorder]:
    ctx = attrs.evolve(
        harness_context(workspace.parent, private_dir), settings=ClaudeSettings(otlp_cost=True)
    )
    events = Recorder()
    return ClaudeCodeHarness.from_context(ctx).run(make_turn(workspace, env, events)), events


@pytest.mark.claude_cli
def test_the_real_cli_exports_its_cost_and_tokens_and_the_stream_stays_first(
    fake: FakeAnthropic, workspace: Path, private_dir: Path, cli_env: dict[str, str]
) -> None:
    fake.script = Script([say("Nothing to change.")])
    result, events = _otlp_turn(workspace, private_dir, cli_env)
    assert result.ok, result.note
    assert result.cost_usd == pytest.approx(PER_CALL)
    (record,) = events.of("agent_cost")
    assert record["cost_source"] == "stream" and record["otlp_rejected"] == 0
    # The pinned CLI, against the scripted model, exports on exit what its stream reported.
    assert record["otlp_cost_usd"] == pytest.approx(PER_CALL)
    assert record["otlp_tokens"]["input"] == 1200 and record["otlp_tokens"]["output"] == 80


@pytest.mark.claude_cli
def test_the_real_cli_is_charged_its_otlp_cost_when_its_stream_has_none(
    fake: FakeAnthropic,
    workspace: Path,
    private_dir: Path,
    cli_env: dict[str, str],
    claude_cli: Path,
    tmp_path: Path,
) -> None:
    # The real CLI behind a filter that strips the cost from its result line: the stream gives none.
    shim = tmp_path / "claude-costless"
    strip = "import json,sys\nfor l in sys.stdin:\n m=json.loads(l)\n m.pop('total_cost_usd',None)\n print(json.dumps(m),flush=True)"
    shim.write_text(
        f'#!/bin/sh\n{shlex.quote(str(claude_cli))} "$@" | {shlex.quote(sys.executable)} -c {shlex.quote(strip)}\n'
    )
    shim.chmod(0o755)
    fake.script = Script([say("Nothing to change.")])
    result, events = _otlp_turn(workspace, private_dir, {**cli_env, "CRUCIBLE_CLAUDE_BIN": str(shim)})
    assert result.ok, result.note
    (record,) = events.of("agent_cost")
    assert record["cost_source"] == "otlp"
    assert result.cost_usd == pytest.approx(PER_CALL) and "OTLP" in result.note


def test_the_manifest_key_reaches_the_harness_and_is_off_by_default(tmp_path: Path) -> None:
    from crucible_core.manifest.loader import load_manifest
    from crucible_core.plugins import load_plugins

    base = '[repo]\npath = "."\n\n[agent]\nbackend = "local"\ngoal = "g"\n{extra}\n[judge]\nmeasure_cmd = "true"\ndirection = "higher"\n'
    for extra, expected in (("", False), ("otlp_cost = true\n", True)):
        path = tmp_path / "crucible.toml"
        path.write_text(base.format(extra=extra))
        loaded = load_manifest(path, plugins=load_plugins())
        settings = {(d.role, d.driver): d.value for d in loaded.settings}[("harness", "claude")]
        assert settings.otlp_cost is expected


def test_preflight_names_the_missing_decoder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import sys as system

    # An unimportable opentelemetry-proto, as on an install without the plugin's `otlp` extra.
    monkeypatch.setitem(system.modules, "opentelemetry.proto.collector.metrics.v1.metrics_service_pb2", None)
    ctx = attrs.evolve(
        harness_context(tmp_path, tmp_path / "private"), settings=ClaudeSettings(otlp_cost=True)
    )
    problems = ClaudeCodeHarness.from_context(ctx).preflight(
        {"PATH": "/usr/bin:/bin", "ANTHROPIC_API_KEY": "k"}
    )
    assert any("opentelemetry-proto" in p and "[otlp]" in p for p in problems)
    with pytest.raises(OtlpUnavailable):
        MetricsReceiver(max_life_seconds=1)
