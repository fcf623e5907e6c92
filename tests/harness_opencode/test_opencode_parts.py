"""The opencode harness's parts on their own: its opencode.json, its stream and export reader, its verdict,
its settings. The stream lines and the export are recorded from the pinned CLI (recorded/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crucible_core.errors import ManifestError
from crucible_core.manifest.loader import load_manifest
from crucible_core.manifest.models import AgentSection
from crucible_core.process import Completed
from crucible_core.protocols import FailureClass, HarnessContext
from crucible_harness_endpoint.endpoint import BASE_URL_SLOT, REFUSED_EXIT, REFUSED_PREFIX, Wire
from crucible_harness_opencode import config
from crucible_harness_opencode.harness import OpenCodeHarness
from crucible_harness_opencode.settings import OpenCodeSettings, OpenCodeTable
from crucible_harness_opencode.stream import MAX_EXPORT_BYTES, OpenCodeStream, begin_marker, end_marker
from crucible_harness_opencode.verdict import classify
from tests.harness_claude.support import Recorder
from tests.harness_endpoint.support import write_domain

RECORDED = Path(__file__).parent / "recorded"
RUN = (RECORDED / "run.jsonl").read_text().splitlines()
EXPORT = (RECORDED / "export.json").read_text()
NONCE = "0123456789abcdef"
# The export holds three model calls of 1200 input and 80 output tokens; gpt-4.1 costs $2/$8 per million.
EXPORT_COST = (3 * 1200 * 2.0 + 3 * 80 * 8.0) / 1_000_000


def fed(*lines: str) -> tuple[OpenCodeStream, Recorder]:
    recorder = Recorder()
    stream = OpenCodeStream(recorder, "gpt-4.1", NONCE)
    for line in lines:
        stream.feed(line)
    return stream, recorder


def exported(document: str = EXPORT) -> list[str]:
    return [begin_marker(NONCE), *document.splitlines(), end_marker(NONCE)]


def done(code: int = 0, stderr: str = "", *, timed_out: bool = False) -> Completed:
    return Completed(code, "", stderr, timed_out, 1.0)


# -- opencode.json ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wire", "package", "base_url", "key"),
    [
        (Wire.CHAT, "@ai-sdk/openai-compatible", BASE_URL_SLOT, "{env:OPENAI_API_KEY}"),
        (Wire.RESPONSES, "@ai-sdk/openai", BASE_URL_SLOT, "{env:OPENAI_API_KEY}"),
        (Wire.ANTHROPIC, "@ai-sdk/anthropic", f"{BASE_URL_SLOT}/v1", "{env:ANTHROPIC_API_KEY}"),
    ],
)
def test_the_config_registers_the_endpoint_as_provider_crucible(
    wire: Wire, package: str, base_url: str, key: str
) -> None:
    rendered = json.loads(config.render(wire, "qwen-3-8-27b", {}, confined=True))
    assert rendered["model"] == rendered["small_model"] == "crucible/qwen-3-8-27b"
    provider = rendered["provider"]["crucible"]
    assert provider["npm"] == package and provider["options"] == {"baseURL": base_url, "apiKey": key}
    assert provider["models"] == {"qwen-3-8-27b": {"name": "qwen-3-8-27b"}}
    assert rendered["enabled_providers"] == ["crucible"]  # no other provider, no catalogue
    assert rendered["autoupdate"] is False and rendered["share"] == "disabled"
    assert rendered["permission"] == {"*": "allow"} and "mcp" not in rendered


def test_the_turns_mcp_servers_are_remote_servers_and_the_host_denies_what_leaves_the_workspace() -> None:
    servers = {
        "crucible": {
            "type": "http",
            "url": "http://127.0.0.1:5/mcp",
            "headers": {"Authorization": "Bearer b-7"},
        },
        "local": {"type": "stdio", "command": "server"},  # not one opencode can reach as a remote: left out
    }
    rendered = json.loads(config.render(Wire.CHAT, "m", servers, confined=False))
    assert rendered["mcp"] == {
        "crucible": {
            "type": "remote",
            "url": "http://127.0.0.1:5/mcp",
            "enabled": True,
            "oauth": False,
            "headers": {"Authorization": "Bearer b-7"},
        }
    }
    assert rendered["permission"] == config.HOST_PERMISSIONS
    assert {"external_directory", "webfetch", "websearch"} <= {
        k for k, v in config.HOST_PERMISSIONS.items() if v == "deny"
    }


# -- the stream and the export ---------------------------------------------------------------------


def test_the_live_stream_is_for_display_and_the_export_closes_the_turn() -> None:
    stream, recorder = fed(*RUN)
    assert stream.started and stream.session_id and stream.transcript is None
    assert recorder.kinds() == [
        "agent_start",
        "agent_tool_call",
        "agent_tool_result",
        "agent_tool_call",
        "agent_tool_result",
        "agent_text",
    ]
    assert [e["name"] for e in recorder.of("agent_tool_call")] == ["read", "edit"]
    assert recorder.of("agent_start") == [{"harness": "opencode", "model": "gpt-4.1"}]

    for line in exported():
        stream.feed(line)
    assert stream.transcript is not None and stream.transcript.turns == 3
    [usage] = recorder.of("agent_usage")
    assert (usage["input_tokens"], usage["output_tokens"], usage["cost_usd"]) == (
        3600,
        240,
        pytest.approx(EXPORT_COST),
    )
    [result] = recorder.of("agent_result")
    assert result["ok"] and result["turns"] == 3 and result["text"] == "Raised it."


def test_a_marker_with_another_nonce_is_not_the_export() -> None:
    stream, _ = fed(*RUN, *[line.replace(NONCE, "f" * 16) for line in exported()])
    assert stream.transcript is None and stream.undecodable > 0


def test_an_export_that_is_not_a_transcript_is_a_problem_not_a_result() -> None:
    no_assistant = json.dumps({"info": {}, "messages": [{"info": {"role": "user"}, "parts": []}]})
    stream, recorder = fed(*RUN, *exported(no_assistant))
    assert (
        stream.transcript is None and stream.export_problem == "the session export holds no assistant message"
    )
    stream, _ = fed(*RUN, *exported("{not json"))
    assert stream.export_problem is not None and stream.export_problem.startswith(
        "the session export is not JSON"
    )
    assert "agent_result" not in recorder.kinds()


def test_an_oversized_export_is_refused_without_being_held() -> None:
    stream, _ = fed(*RUN, begin_marker(NONCE))
    chunk = "x" * (1024 * 1024)
    for _ in range(MAX_EXPORT_BYTES // len(chunk) + 2):
        stream.feed(chunk)
    stream.feed(end_marker(NONCE))
    assert stream.transcript is None and "larger than" in (stream.export_problem or "")


def test_opencodes_own_cost_wins_when_it_priced_the_model() -> None:
    document = json.loads(EXPORT)
    for message in document["messages"]:
        if message["info"]["role"] == "assistant":
            message["info"]["cost"] = 0.25
    stream, _ = fed(*RUN, *exported(json.dumps(document)))
    assert stream.cost_usd == pytest.approx(0.75)


# -- the verdict -----------------------------------------------------------------------------------


def with_error(status: int | None) -> str:
    document = json.loads(EXPORT)
    data = {"message": "rate limited", **({"statusCode": status} if status else {})}
    document["messages"][-1]["info"]["error"] = {"name": "APIError", "data": data}
    return json.dumps(document)


def test_the_verdict_of_each_way_a_turn_ends() -> None:
    ok, _ = fed(*RUN, *exported())
    result = classify(done(), ok)
    assert (
        result.ok
        and result.cost_usd == pytest.approx(EXPORT_COST)
        and result.note.startswith("opencode finished")
    )

    refused = classify(done(REFUSED_EXIT, f"{REFUSED_PREFIX}no key for the endpoint\n"), fed()[0])
    assert (refused.failure, refused.note) == (FailureClass.SPAWN, "no key for the endpoint")

    never = classify(done(1, "Error: unknown option\n"), fed()[0])
    assert never.failure is FailureClass.SPAWN and "before its stream began" in never.note

    live_only, _ = fed(*RUN)  # the run happened, its export never came
    missing = classify(done(), live_only)
    assert missing.failure is FailureClass.STREAM and missing.cost_usd > 0
    assert "transcript error: opencode left no session export" in missing.note

    timed_out = classify(done(-9, timed_out=True), live_only)
    assert timed_out.failure is FailureClass.TIMEOUT and timed_out.cost_usd == missing.cost_usd

    provider = classify(done(1), fed(*RUN, *exported(with_error(429)))[0])
    assert (
        provider.failure is FailureClass.PROVIDER
        and "HTTP 429" in provider.note
        and "rate limited" in provider.note
    )
    agent = classify(done(1), fed(*RUN, *exported(with_error(None)))[0])
    assert agent.failure is FailureClass.AGENT and "rate limited" in agent.note
    crashed = classify(done(3, "boom\n"), fed(*RUN, *exported())[0])
    assert crashed.failure is FailureClass.AGENT and "exited 3" in crashed.note


# -- settings --------------------------------------------------------------------------------------


def context(tmp_path: Path, settings: OpenCodeSettings | None = None, **agent: object) -> HarnessContext:
    return HarnessContext(AgentSection(**agent), tmp_path, tmp_path, settings or OpenCodeSettings())  # type: ignore[arg-type]


def test_the_model_comes_from_its_own_table_first_and_a_session_is_refused(tmp_path: Path) -> None:
    own = OpenCodeSettings(opencode=OpenCodeTable(model="qwen"))
    assert OpenCodeHarness.from_context(context(tmp_path, own, model="claude-sonnet-4-6")).model == "qwen"
    assert OpenCodeHarness.from_context(context(tmp_path, model="gpt-4.1")).model == "gpt-4.1"
    with pytest.raises(ManifestError, match="needs a model"):
        OpenCodeHarness.from_context(context(tmp_path))
    with pytest.raises(ManifestError, match="cannot continue") as refused:
        OpenCodeHarness.from_context(context(tmp_path, model="m", session="solver"))
    assert "remove [agent].session" in (refused.value.hint or "")


def test_the_manifest_table_is_the_plugins_and_checked_strictly(tmp_path: Path) -> None:
    manifest = write_domain(tmp_path, "opencode", {})
    settings = load_manifest(manifest).settings.of("harness")
    assert isinstance(settings, OpenCodeSettings) and settings.opencode.model == "gpt-4.1"
    manifest.write_text(
        manifest.read_text().replace('[agent.opencode]\nmodel = "gpt-4.1"', '[agent.opencode]\nmodle = "x"')
    )
    with pytest.raises(ManifestError) as refused:
        load_manifest(manifest)
    assert "agent.opencode" in str(refused.value) and "crucible-plugin-harness-opencode" in str(refused.value)
    manifest.write_text(manifest.read_text().replace('modle = "x"', 'model = "two words"'))
    with pytest.raises(ManifestError, match="must be a model name"):
        load_manifest(manifest)
