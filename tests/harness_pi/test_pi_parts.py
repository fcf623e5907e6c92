"""The pi harness's parts on their own: its models.json and settings.json, its stream reader, its verdict,
and the refusals it makes when it is built. The stream lines are recorded from the pinned CLI (recorded/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crucible_core.errors import ManifestError
from crucible_core.manifest.models import AgentSection, BrokerSection
from crucible_core.process import Completed
from crucible_core.protocols import FailureClass, HarnessContext
from crucible_harness_endpoint.endpoint import BASE_URL_SLOT, Wire
from crucible_harness_pi import config
from crucible_harness_pi.harness import PiHarness
from crucible_harness_pi.settings import PiSettings, PiTable
from crucible_harness_pi.stream import PiStream
from crucible_harness_pi.verdict import classify
from tests.harness_claude.support import Recorder

RECORDED = Path(__file__).parent / "recorded"
TURN = (RECORDED / "turn.jsonl").read_text().splitlines()
PROVIDER_ERROR = (RECORDED / "provider-error.jsonl").read_text().splitlines()
# Three model calls of 1200 input and 80 output tokens; gpt-4.1 costs $2/$8 per million.
TURN_COST = (3 * 1200 * 2.0 + 3 * 80 * 8.0) / 1_000_000


def fed(*lines: str) -> tuple[PiStream, Recorder]:
    recorder = Recorder()
    stream = PiStream(recorder, "gpt-4.1")
    for line in lines:
        stream.feed(line)
    return stream, recorder


def done(code: int = 0, stderr: str = "", *, timed_out: bool = False) -> Completed:
    return Completed(code, "", stderr, timed_out, 1.0)


# -- models.json and settings.json -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("wire", "api", "key"),
    [
        (Wire.CHAT, "openai-completions", "OPENAI_API_KEY"),
        (Wire.RESPONSES, "openai-responses", "OPENAI_API_KEY"),
        (Wire.ANTHROPIC, "anthropic-messages", "ANTHROPIC_API_KEY"),
    ],
)
def test_models_json_registers_the_endpoint_as_provider_crucible(wire: Wire, api: str, key: str) -> None:
    rendered = json.loads(config.render_models(wire, "qwen-3-8-27b", reasoning=False))
    provider = rendered["providers"]["crucible"]
    assert (provider["baseUrl"], provider["api"], provider["apiKey"]) == (BASE_URL_SLOT, api, key)
    [model] = provider["models"]
    assert model["id"] == "qwen-3-8-27b" and model["reasoning"] is False
    assert ("compat" in provider) is (wire is Wire.CHAT)  # chat servers often refuse the developer role


def test_settings_trust_the_workspaces_own_files_and_keep_pi_quiet() -> None:
    settings = json.loads(config.render_settings())
    assert settings["defaultProjectTrust"] == "always" and settings["enableInstallTelemetry"] is False


# -- the stream ------------------------------------------------------------------------------------


def test_the_stream_carries_the_turn_and_closes_it() -> None:
    stream, recorder = fed(*TURN)
    assert stream.started and stream.ended and stream.turns == 3 and stream.stop_reason == "stop"
    assert recorder.kinds() == [
        "agent_start",
        "agent_tool_call",
        "agent_tool_result",
        "agent_tool_call",
        "agent_tool_result",
        "agent_text",
        "agent_usage",
        "agent_result",
    ]
    assert [e["name"] for e in recorder.of("agent_tool_call")] == ["read", "edit"]
    assert recorder.of("agent_tool_result")[0]["content"] == "1\n"
    [usage] = recorder.of("agent_usage")
    assert (usage["input_tokens"], usage["output_tokens"], usage["cost_usd"]) == (
        3600,
        240,
        pytest.approx(TURN_COST),
    )
    [result] = recorder.of("agent_result")
    assert result["ok"] and result["text"] == "Raised it."
    assert stream.undecodable == 0  # the partial message_update lines were skipped unread


def test_pis_own_cost_wins_when_it_priced_the_model() -> None:
    priced = [line.replace('"total":0}', '"total":0.5}') for line in TURN]
    stream, _ = fed(*priced)
    assert stream.cost_usd == pytest.approx(1.5)


# -- the verdict -----------------------------------------------------------------------------------


def test_the_verdict_of_each_way_a_turn_ends() -> None:
    ok = classify(done(), fed(*TURN)[0])
    assert (
        ok.ok and ok.cost_usd == pytest.approx(TURN_COST) and ok.note == "pi finished in 3 steps; Raised it."
    )

    provider = classify(done(0), fed(*PROVIDER_ERROR)[0])  # pi exits 0 after a provider error
    assert provider.failure is FailureClass.PROVIDER and "401 scripted invalid_api_key" in provider.note

    never = classify(done(1, "Error: Unknown option: --approve\n"), fed()[0])
    assert never.failure is FailureClass.SPAWN and "Unknown option: --approve" in never.note

    cut = TURN[: next(i for i, line in enumerate(TURN) if '"type":"agent_end"' in line)]
    broken = classify(done(0), fed(*cut, "not json")[0])
    assert broken.failure is FailureClass.STREAM and "without agent_end" in broken.note
    assert "1 undecodable stream line(s)" in broken.note and broken.cost_usd == pytest.approx(TURN_COST)

    aborted = [line.replace('"stopReason":"stop"', '"stopReason":"aborted"') for line in TURN]
    assert classify(done(0), fed(*aborted)[0]).failure is FailureClass.AGENT
    assert classify(done(2), fed(*TURN)[0]).failure is FailureClass.AGENT


# -- building the harness --------------------------------------------------------------------------


def context(tmp_path: Path, broker: BrokerSection, **agent: object) -> HarnessContext:
    section = AgentSection(harness="pi", model="gpt-4.1", broker=broker, **agent)  # type: ignore[arg-type]
    return HarnessContext(section, tmp_path, tmp_path, PiSettings())


@pytest.mark.parametrize("broker", [BrokerSection(), BrokerSection(tools=("distress",))])
def test_a_run_granting_broker_tools_is_refused_by_name(tmp_path: Path, broker: BrokerSection) -> None:
    with pytest.raises(ManifestError, match="harness pi has no MCP client") as refused:
        PiHarness.from_context(context(tmp_path, broker))
    assert "[agent.broker] enabled = false" in (refused.value.hint or "")


@pytest.mark.parametrize("broker", [BrokerSection(enabled=False), BrokerSection(tools=())])
def test_a_run_granting_no_broker_tool_builds(tmp_path: Path, broker: BrokerSection) -> None:
    assert PiHarness.from_context(context(tmp_path, broker)).model == "gpt-4.1"


@pytest.mark.parametrize(
    ("effort", "thinking"),
    [(None, None), ("low", "low"), ("high", "high"), ("xhigh", "xhigh"), ("max", "xhigh")],
)
def test_the_shared_effort_is_pis_thinking_level(
    tmp_path: Path, effort: str | None, thinking: str | None
) -> None:
    built = PiHarness.from_context(context(tmp_path, BrokerSection(enabled=False), effort=effort))
    assert built.thinking == thinking


def test_an_effort_pi_has_no_level_for_a_session_or_no_model_is_refused(tmp_path: Path) -> None:
    off = BrokerSection(enabled=False)
    with pytest.raises(ManifestError, match="effort"):
        PiHarness.from_context(context(tmp_path, off, effort="extreme"))
    with pytest.raises(ManifestError, match="cannot continue"):
        PiHarness.from_context(context(tmp_path, off, session="solver"))
    own = HarnessContext(AgentSection(broker=off), tmp_path, tmp_path, PiSettings(pi=PiTable(model="qwen")))
    assert PiHarness.from_context(own).model == "qwen"
    with pytest.raises(ManifestError, match="needs a model"):
        PiHarness.from_context(HarnessContext(AgentSection(broker=off), tmp_path, tmp_path, PiSettings()))
