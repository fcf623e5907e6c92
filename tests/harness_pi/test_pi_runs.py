"""Whole `crucible run`s with harness = "pi": the real Pi CLI against the scripted endpoint."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from crucible_core.session_log import read_events
from tests.cli_support import crucible_env, run_crucible
from tests.fakes.anthropic_api import Script, call, say
from tests.fakes.openai_chat import FakeOpenAIChat
from tests.harness_endpoint.support import (
    PER_CALL,
    agent_events,
    assert_no_secret_written,
    edit_script,
    endpoint_env,
    write_domain,
)

pytestmark = pytest.mark.pi_cli

API_KEY = "sk-proj-canary-pi-key-5e1d7b3a9f"
ENV_SECRET = "canary-env-value-P7yW3k9M"
SHAPED = "sk-proj-canary-reply-8a2c4e6f1b33"


def run(manifest: Path, cli: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = crucible_env(CRUCIBLE_PI_BIN=str(cli), TMPDIR=str(tmp))
    return run_crucible("--manifest", manifest, "--ui", "headless", *args, env=env, timeout=600)


def test_the_counter_keeps_a_pi_edit_with_its_events_and_cost_and_leaks_no_secret(
    fake: FakeOpenAIChat, pi_cli: Path, tmp_path: Path
) -> None:
    domain = tmp_path / "domain"
    value = domain / "workspace" / "value.txt"
    edits = edit_script("pi", value)
    fake.script = Script(
        [
            call("bash", command='echo "token is $CANARY_TOKEN"'),
            *edits.replies[:2],
            say(f"Done. The token was {ENV_SECRET}; a key: {SHAPED}; the api key {API_KEY}."),
        ]
    )
    env = endpoint_env(fake, OPENAI_API_KEY=API_KEY, CANARY_TOKEN=ENV_SECRET)
    manifest = write_domain(domain, "pi", env)
    tmp = tmp_path / "tmp"
    tmp.mkdir()

    done = run(manifest, pi_cli, tmp, "--iterations", "1")
    assert done.returncode == 0, done.stderr

    events = list(read_events(domain / "state" / "session.jsonl"))
    [start] = [e for e in events if e["kind"] == "start"]
    assert start["harness"] == "pi"
    rows = [(e["row"]["decision"], e["row"]["score"]) for e in events if e["kind"] == "row"]
    assert rows == [("baseline", 1), ("keep", 2)]
    assert value.read_text() == "2\n"
    agent = agent_events(events)
    assert agent[0]["kind"] == "init" and agent[0]["harness"] == "pi" and agent[0]["model"] == "gpt-4.1"
    assert [e["name"] for e in agent if e["kind"] == "tool" and "input" in e] == ["bash", "read", "edit"]
    [tokens] = [e for e in agent if e["kind"] == "tokens"]
    assert (tokens["input"], tokens["output"]) == (4 * 1200, 4 * 80)
    [result] = [e for e in agent if e["kind"] == "result"]
    assert not result["is_error"] and result["turns"] == 4
    [turn] = [e for e in events if e["kind"] == "turn"]
    assert turn["ok"] and turn["cost"] == pytest.approx(4 * PER_CALL) == tokens["cost_usd"]

    steps = fake.chat_requests()
    assert steps and all(r.headers["authorization"] == f"Bearer {API_KEY}" for r in steps)
    assert ENV_SECRET in json.dumps(steps[-1].body["messages"])
    assert_no_secret_written(domain, (API_KEY, ENV_SECRET, SHAPED), done.stdout, done.stderr)
    bash_result = next(e for e in agent if e["kind"] == "tool" and "result" in e)
    assert "token is [REDACTED]" in bash_result["result"]
    # pi's agent directory (models.json, its session file) did not outlive the turn.
    assert list(tmp.iterdir()) == []


def test_flipping_the_harness_is_configuration_only(
    fake: FakeOpenAIChat, pi_cli: Path, tmp_path: Path
) -> None:
    from tests.harness_endpoint.support import cli_path

    opencode_cli = cli_path("opencode")
    manifest = write_domain(tmp_path / "domain", "opencode", endpoint_env(fake))
    env = crucible_env(CRUCIBLE_PI_BIN=str(pi_cli), CRUCIBLE_OPENCODE_BIN=str(opencode_cli or "/missing"))
    for harness in ("opencode", "pi"):
        text = manifest.read_text()
        manifest.write_text(text.replace('harness = "opencode"', f'harness = "{harness}"'))
        check = run_crucible("check", "--manifest", manifest, env=env)
        if harness == "opencode" and opencode_cli is None:
            continue  # its CLI is not installed here: check says so, and pi is what this test is about
        assert check.returncode == 0, check.stdout + check.stderr
        assert f"harness={harness}" in check.stdout
        other = "pi" if harness == "opencode" else "opencode"
        assert f"harness {other} (crucible-plugin-harness-{other}, not used by this run)" in check.stdout
    assert fake.requests == []  # a check spends nothing


def test_a_run_granting_broker_tools_is_refused_by_name_before_anything_starts(
    fake: FakeOpenAIChat, pi_cli: Path, tmp_path: Path
) -> None:
    domain = tmp_path / "domain"
    manifest = write_domain(domain, "pi", endpoint_env(fake))
    # the default: every installed broker tool is granted
    manifest.write_text(manifest.read_text().replace("[agent.broker]\nenabled = false\n", ""))
    done = run(manifest, pi_cli, tmp_path, "--iterations", "1")
    assert done.returncode == 10, done.stderr
    assert "harness pi has no MCP client, so it cannot call the broker tools this run grants" in done.stderr
    assert "set [agent.broker] enabled = false (or tools = []), or use harness opencode" in done.stderr
    assert not (domain / "state" / "session.jsonl").exists() and fake.requests == []


def test_a_turn_without_a_key_is_refused_before_anything_is_spent(
    fake: FakeOpenAIChat, pi_cli: Path, tmp_path: Path
) -> None:
    manifest = write_domain(tmp_path / "domain", "pi", {})
    done = run(manifest, pi_cli, tmp_path, "--iterations", "1")
    assert done.returncode == 4, done.stderr
    assert "no key for the inference endpoint: set OPENAI_API_KEY" in done.stderr
    assert not (tmp_path / "domain" / "state" / "session.jsonl").exists() and fake.requests == []
