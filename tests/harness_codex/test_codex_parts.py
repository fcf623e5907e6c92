"""The codex harness's pure parts: its settings, the credential it selects, the config it writes, the
stream decoder and the verdict, the prices. No CLI needed."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crucible_core.errors import ManifestError
from crucible_core.manifest.loader import load_manifest
from crucible_core.process import Completed
from crucible_core.protocols import FailureClass
from crucible_harness_codex import auth, launch
from crucible_harness_codex.events import mask
from crucible_harness_codex.exec_json import ExecDecoder
from crucible_harness_codex.pricing import Usage, cost_usd, price_of
from crucible_harness_codex.settings import DEFAULT_MODEL, CodexSettings, CodexTable
from crucible_harness_codex.verdict import classify
from tests.harness_claude.support import Recorder

MANIFEST = """
[repo]
path = "."
[agent]
harness = "codex"
{extra}
[judge]
measure_cmd = "true"
direction = "higher"
"""


def load(tmp_path: Path, extra: str) -> CodexSettings:
    manifest = tmp_path / "crucible.toml"
    manifest.write_text(MANIFEST.format(extra=extra))
    settings = load_manifest(manifest).settings.of("harness")
    assert isinstance(settings, CodexSettings)
    return settings


def test_the_codex_table_belongs_to_the_plugin_and_is_checked_strictly(tmp_path: Path) -> None:
    settings = load(tmp_path, '[agent.codex]\nmodel = "gpt-5.6-terra"\nauth = "api"\napi_key = "WORK"\n')
    assert settings.codex == CodexTable("gpt-5.6-terra", "api", "WORK")
    assert settings.codex.key_variable == "OPENAI_API_KEY_WORK"
    assert load(tmp_path, "").codex.key_variable == "OPENAI_API_KEY"
    for extra, expected in [
        ('[agent.codex]\nauth = "sometimes"', "auth 'sometimes' is not one of auto, api, chatgpt"),
        ('[agent.codex]\napi_key = "work"', "must name a key in uppercase"),
        ('[agent.codex]\napi_key = "OPENAI_API_KEY_X; rm"', "must name a key in uppercase"),
        ('[agent.codex]\nmodle = "x"', "unknown key 'modle' in [agent.codex]"),
    ]:
        with pytest.raises(ManifestError) as caught:
            load(tmp_path, extra)
        assert expected in str(caught.value) and "crucible-plugin-harness-codex" in str(caught.value)


def test_the_model_is_codexs_own_unless_the_shared_one_is_not_claudes() -> None:
    assert CodexSettings(CodexTable(model="gpt-5.6-luna")).choose_model("claude-opus-4-6") == "gpt-5.6-luna"
    assert CodexSettings().choose_model("claude-opus-4-6") == DEFAULT_MODEL
    assert CodexSettings().choose_model("sonnet") == DEFAULT_MODEL
    assert CodexSettings().choose_model(None) == DEFAULT_MODEL
    assert CodexSettings().choose_model("gpt-5.6-terra") == "gpt-5.6-terra"


def test_auth_selects_only_the_named_key_and_never_falls_back_in_api_mode() -> None:
    env = {"OPENAI_API_KEY": "sk-default", "OPENAI_API_KEY_WORK": "sk-work", "OPENAI_API_KEY_HOME": " "}
    assert auth.select(CodexTable(), env, chatgpt_material=False) == auth.ApiKey(
        "OPENAI_API_KEY", "sk-default"
    )
    assert auth.select(CodexTable(api_key="WORK"), env, chatgpt_material=True) == auth.ApiKey(
        "OPENAI_API_KEY_WORK", "sk-work"
    )
    # An empty selected key: api refuses (naming the variable), auto falls back to the ChatGPT sign-in.
    refused = auth.select(CodexTable(auth="api", api_key="HOME"), env, chatgpt_material=True)
    assert isinstance(refused, auth.Refused) and "export OPENAI_API_KEY_HOME=<key>" in refused.reason
    assert auth.select(CodexTable(api_key="HOME"), env, chatgpt_material=True) == auth.ChatGpt()
    assert auth.select(CodexTable(auth="chatgpt"), env, chatgpt_material=True) == auth.ChatGpt()
    missing = auth.select(CodexTable(api_key="GONE"), env, chatgpt_material=False)
    assert isinstance(missing, auth.Refused)
    assert "OPENAI_API_KEY_GONE" in missing.reason and "CODEX_CREDENTIALS" in missing.reason
    assert "sk-" not in missing.reason and "\n" not in missing.reason


@given(st.dictionaries(st.text(min_size=1), st.text(), max_size=4), st.text())
def test_the_config_file_holds_hostile_names_and_tokens_as_data(headers: dict[str, str], name: str) -> None:
    servers = {name or "x": {"type": "http", "url": 'http://127.0.0.1:1/mcp"\n[evil]', "headers": headers}}
    data = launch.config(
        model='m"\nmodel = "other', endpoint=launch.Endpoint("http://h/v1"), mcp_servers=servers
    )
    text = launch.toml_text(data)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate cannot be written to a file at all
        return
    assert tomllib.loads(text) == data


def test_the_config_turns_off_the_clis_own_reach_and_names_the_endpoint() -> None:
    own = tomllib.loads(
        launch.toml_text(launch.config(model="m", endpoint=launch.Endpoint(), mcp_servers={}))
    )
    assert own["analytics"] == {"enabled": False} and own["check_for_update_on_startup"] is False
    assert own["features"]["plugins"] is False and own["features"]["remote_plugin"] is False
    assert own["features"]["apps"] is False and "model_provider" not in own
    custom = launch.config(model="m", endpoint=launch.Endpoint("http://10.0.0.5:8000/v1"), mcp_servers={})
    assert custom["model_providers"]["crucible"]["requires_openai_auth"] is True
    pod = launch.config(model="m", endpoint=launch.Endpoint(env_key="OPENAI_API_KEY_WORK"), mcp_servers={})
    provider = pod["model_providers"]["crucible"]
    assert provider["env_key"] == "OPENAI_API_KEY_WORK" and "requires_openai_auth" not in provider
    servers = {
        "b": {"type": "http", "url": "http://127.0.0.1:5/mcp", "headers": {"Authorization": "Bearer t"}}
    }
    servers["stdio"] = {"command": "x"}
    assert launch.mcp_table(servers) == {
        "b": {"url": "http://127.0.0.1:5/mcp", "http_headers": {"Authorization": "Bearer t"}}
    }
    assert launch.endpoint_host("https://models.example.com/v1") == ("models.example.com", 443)
    assert launch.endpoint_host("http://127.0.0.1:8080/v1") == ("127.0.0.1", 8080)
    assert launch.endpoint_host("file:///x") is None and launch.endpoint_host("") is None


def test_the_cli_gets_its_own_home_and_no_key_or_codex_variable() -> None:
    env = launch.child_env(
        {"PATH": "/bin", "OPENAI_API_KEY": "k", "OPENAI_API_KEY_WORK": "k", "CODEX_CREDENTIALS": "c",
         "CODEX_HOME": "/elsewhere", "CODEX_THREAD_ID": "t", "OPENAI_BASE_URL": "u", "KEEP": "1"},
        "/h",
    )  # fmt: skip
    assert env == {
        "PATH": "/bin",
        "OPENAI_BASE_URL": "u",
        "KEEP": "1",
        **launch.home_env("/h"),
    }
    assert launch.build_argv("codex", model="m", effort="max")[-3:] == [
        "-c",
        'model_reasoning_effort="xhigh"',
        "-",
    ]


def feed(*messages: object, model: str = "gpt-5.6-terra") -> tuple[ExecDecoder, Recorder]:
    recorder = Recorder()
    decoder = ExecDecoder(recorder, model)
    for message in messages:
        decoder.feed(message if isinstance(message, str) else json.dumps(message))
    return decoder, recorder


def test_the_decoder_reads_every_item_kind_and_survives_bad_lines() -> None:
    decoder, recorder = feed(
        {"type": "thread.started", "thread_id": "t-1"},
        "not json at all",
        {"type": "error", "message": "Reconnecting... 2/5 (stream disconnected)"},
        {
            "type": "item.completed",
            "item": {"id": "i1", "type": "file_change", "changes": [{"path": "a.py", "kind": "update"}], "status": "completed"},
        },
        {"type": "item.started", "item": {"id": "i2", "type": "mcp_tool_call", "server": "crucible", "tool": "distress", "arguments": {"reason": "x"}, "status": "in_progress"}},
        {"type": "item.completed", "item": {"id": "i2", "type": "mcp_tool_call", "server": "crucible", "tool": "distress", "arguments": {"reason": "x"}, "error": {"message": "refused"}, "status": "failed"}},
        {"type": "item.completed", "item": {"id": "i3", "type": "todo_list", "items": [{"text": "a", "completed": False}]}},
        {"type": "item.completed", "item": {"id": "i4", "type": "command_execution", "command": "false", "aggregated_output": "", "exit_code": 1, "status": "failed"}},
        {"type": "turn.completed", "usage": {"input_tokens": 1_000_000, "cached_input_tokens": 400_000, "output_tokens": 10_000}},
    )  # fmt: skip
    assert decoder.started and decoder.completed and decoder.undecodable == 1
    assert recorder.of("agent_retry") == [
        {"attempt": 2, "error_status": "Reconnecting... 2/5 (stream disconnected)"}
    ]
    calls = recorder.of("agent_tool_call")
    assert [c["name"] for c in calls] == ["apply_patch", "mcp__crucible__distress", "update_plan", "shell"]
    results = {r["id"]: r for r in recorder.of("agent_tool_result")}
    assert results["i1"] == {"id": "i1", "is_error": False, "content": "update a.py"}
    assert results["i2"]["is_error"] and results["i2"]["content"] == "refused"
    assert results["i4"]["is_error"] and results["i4"]["content"] == "[exit 1]"
    assert "i3" not in results  # a plan has no result
    # Terra: $2 in, $0.20 cached, $12 out per million.
    assert decoder.cost_usd == pytest.approx(600_000 * 2e-6 + 400_000 * 0.2e-6 + 10_000 * 12e-6)
    result = classify(Completed(0, "", "", False, 1.0), decoder)
    assert result.ok and result.cost_usd == pytest.approx(decoder.cost_usd)


def test_the_verdict_tells_transport_from_provider_from_a_finished_turn() -> None:
    done = Completed(1, "", "line one\nboom: bad config\n", False, 1.0)
    never, _ = feed()
    assert classify(done, never).failure is FailureClass.SPAWN
    assert "boom: bad config" in classify(done, never).note
    cut, _ = feed({"type": "thread.started", "thread_id": "t"}, {"type": "turn.started"})
    assert classify(done, cut).failure is FailureClass.STREAM
    assert classify(done, cut, fallback_cost=0.5).cost_usd == 0.5
    failed, recorder = feed(
        {"type": "thread.started", "thread_id": "t"},
        {"type": "error", "message": "unexpected status 429 Too Many Requests"},
        {"type": "turn.failed", "error": {"message": "unexpected status 429 Too Many Requests"}},
    )
    verdict = classify(done, failed)
    assert verdict.failure is FailureClass.PROVIDER and "429" in verdict.note
    assert recorder.of("agent_result")[0]["ok"] is False
    timed_out = classify(Completed(-9, "", "", True, 30.0), cut, fallback_cost=0.25)
    assert timed_out.failure is FailureClass.TIMEOUT and timed_out.cost_usd == 0.25


def test_prices_come_from_the_table_and_an_unknown_model_pays_the_dearest() -> None:
    assert price_of("gpt-5.3-codex")[0].output == 14.0 and price_of("gpt-5.6-luna")[0].input == 0.20
    price, known = price_of("some-self-hosted-model")
    assert not known and price == price_of("gpt-5.6-sol")[0]  # Sol, the dearest
    usage = Usage.of({"input_tokens": 100, "cached_input_tokens": 300, "output_tokens": -5})
    assert usage.uncached_input_tokens == 0 and usage.output_tokens == 0
    assert cost_usd("gpt-5.6-sol", usage) == pytest.approx(100 * 0.5e-6)


def test_masking_reaches_keys_strings_and_nested_values() -> None:
    value = {"tok-123456": ["a tok-123456 b", {"x": "tok-123456"}], "n": 3}
    assert mask(value, ["tok-123456", ""]) == {"[REDACTED]": ["a [REDACTED] b", {"x": "[REDACTED]"}], "n": 3}
