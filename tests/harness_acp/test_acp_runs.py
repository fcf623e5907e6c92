"""Whole `crucible run`s with harness = "acp": the real pinned ACP agent against the scripted model server.

The domain is the counter (value.txt is the score). The manifest carries both the [agent.acp]
table and the Claude harness's keys, so flipping `harness` is one line of configuration.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from crucible_core.plugins import load_plugins
from crucible_core.run.budget import Budget
from crucible_core.session.entry import execute
from crucible_core.session.request import SessionRequest
from crucible_core.session_log import read_events
from tests.cli_support import crucible_env, run_crucible
from tests.fakes.anthropic_api import FakeAnthropic, Script, call, say
from tests.harness_acp.support import TEST_KEY, write_domain
from tests.hostile.test_canary import forms, git_objects

pytestmark = pytest.mark.acp_agent

# A credential the agent needs whose name and shape look like nothing secret: only the harness,
# which knows it from [agent.acp].credentials, can keep it out of the evidence.
LICENSE = "plain-agent-license-value-2b7d"


def agent_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["event"] for e in events if e["kind"] == "agent"]


def logged(events: list[dict[str, Any]], label: str) -> list[dict[str, Any]]:
    """The harness's own evidence lines (mediation decisions), decoded."""
    return [
        json.loads(e["value"]) for e in agent_events(events) if e["kind"] == "log" and e.get("label") == label
    ]


def test_the_counter_keeps_an_acp_turn_and_no_key_reaches_any_artifact(
    sdk_agent: Path, fake: FakeAnthropic, tmp_path: Path
) -> None:
    domain = tmp_path / "domain"
    value = domain / "workspace" / "value.txt"
    fake.script = Script(
        [
            call("Read", file_path=str(value)),
            call("Edit", file_path=str(value), old_string="1", new_string="2"),
            # a leaking agent: it quotes both of its credentials back
            say(f"Raised it. My key is {TEST_KEY} and my license {LICENSE}."),
        ]
    )
    manifest = write_domain(domain, {"ANTHROPIC_BASE_URL": fake.base_url}, [str(sdk_agent)])
    text = manifest.read_text().replace(
        'credentials = ["ANTHROPIC_API_KEY"]', 'credentials = ["ANTHROPIC_API_KEY", "AGENT_LICENSE"]'
    )
    manifest.write_text(text)
    env = crucible_env(ANTHROPIC_API_KEY=TEST_KEY, AGENT_LICENSE=LICENSE, CLAUDE_CODE_MAX_RETRIES="0")

    done = run_crucible("--manifest", manifest, "--iterations", "1", "--ui", "headless", env=env, timeout=240)

    assert done.returncode == 0, done.stderr
    events = list(read_events(domain / "state" / "session.jsonl"))
    rows = [(e["row"]["decision"], e["row"]["score"]) for e in events if e["kind"] == "row"]
    assert rows == [("baseline", 1), ("keep", 2)]
    assert value.read_text() == "2\n"
    [start] = [e for e in events if e["kind"] == "start"]
    assert start["harness"] == "acp"
    agent = agent_events(events)
    [init] = [e for e in agent if e["kind"] == "init"]
    assert init["harness"] == "acp" and init["permission_mode"].startswith("default-deny")
    assert [e["name"] for e in agent if e["kind"] == "tool" and "input" in e] == ["Read", "Edit"]
    assert [(p["tool"], p["decision"]) for p in logged(events, "agent_permission")] == [("Edit", "allowed")]
    [tokens] = [e for e in agent if e["kind"] == "tokens"]
    per_call = (1200 * 3.0 + 80 * 15.0) / 1_000_000
    assert tokens["cost_usd"] == pytest.approx(3 * per_call)
    [result] = [e for e in agent if e["kind"] == "result"]
    assert result["cost_usd"] == pytest.approx(3 * per_call) and not result["is_error"]
    [turn] = [e for e in events if e["kind"] == "turn"]
    assert turn["ok"] is True
    texts = " ".join(e.get("delta", "") for e in agent if e["kind"] == "text")
    assert "My key is [REDACTED] and my license [REDACTED]" in texts

    # The canary scan: no form of either credential in anything the run wrote.
    workspace = domain / "workspace"
    written: dict[str, bytes] = {"stdout": done.stdout.encode(), "stderr": done.stderr.encode()}
    for path in [*(domain / "state").rglob("*"), workspace / "RESULTS.md", *(workspace / ".git").rglob("*")]:
        if path.is_file() and "objects" not in path.parts:
            written[str(path)] = path.read_bytes()
    for index, (kind, body) in enumerate(git_objects(workspace)):
        written[f"{kind} object {index}"] = body
    for name, data in written.items():
        content = data.decode("utf-8", "replace")
        for secret in (TEST_KEY, LICENSE):
            for form in forms(secret):
                assert form not in content, f"{form!r} (a form of {secret!r}) in {name}"

    # Flipping the harness is configuration: the [agent.acp] table is set aside, not refused.
    manifest.write_text(manifest.read_text().replace('harness = "acp"', 'harness = "claude"'))
    flipped = run_crucible("check", "--manifest", manifest, env=env)
    assert "backend=local harness=claude" in flipped.stdout, flipped.stdout + flipped.stderr
    assert "harness acp (crucible-plugin-harness-acp, not used by this run)" in flipped.stdout
    manifest.write_text(manifest.read_text().replace('harness = "claude"', 'harness = "acp"'))
    back = run_crucible("check", "--manifest", manifest, env=env)
    assert "harness acp: permission grant (default-deny): read, edit, search, think, mcp" in back.stdout, (
        back.stdout + back.stderr
    )


def test_a_missing_credential_is_refused_before_any_spend(
    sdk_agent: Path, fake: FakeAnthropic, tmp_path: Path
) -> None:
    domain = tmp_path / "domain"
    manifest = write_domain(domain, {"ANTHROPIC_BASE_URL": fake.base_url}, [str(sdk_agent)])
    env = crucible_env()
    env.pop("ANTHROPIC_API_KEY", None)

    done = run_crucible("--manifest", manifest, "--iterations", "1", "--ui", "headless", env=env)

    assert done.returncode != 0
    assert (
        "[agent.acp].credentials names ANTHROPIC_API_KEY, which is not set for the agent: "
        "set it in [agent].env or crucible's environment"
    ) in done.stderr
    assert fake.requests == []  # nothing was spent
    assert not (domain / "workspace").exists()  # refused before the workspace was even set up
    check = run_crucible("check", "--manifest", manifest, env=env)
    assert check.returncode != 0 and "ANTHROPIC_API_KEY, which is not set" in check.stdout


def test_the_agent_calls_the_brokers_distress_over_mcp(
    sdk_agent: Path, fake: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.script = Script(
        [
            call("mcp__crucible__distress", severity="error", reason="the rig is down", evidence=["503"]),
            say("Paged a human."),
        ]
    )
    domain = tmp_path / "domain"
    manifest = write_domain(
        domain, {"ANTHROPIC_BASE_URL": fake.base_url, "ANTHROPIC_API_KEY": TEST_KEY}, [str(sdk_agent)]
    )
    plugins = load_plugins(
        names=["core", "world_git", "judge_command", "backend_local", "harness_acp", "broker_mcp", "distress"]
    )

    result = execute(
        plugins, SessionRequest(manifest=manifest, budget=Budget(iterations=1), ui="headless", max_park=1.0)
    )

    events = list(read_events(domain / "state" / "session.jsonl"))
    assert [(e["tool"], e["ok"]) for e in events if e["kind"] == "broker_result"] == [("distress", True)]
    [permission] = logged(events, "agent_permission")
    assert permission["tool"] == "mcp__crucible__distress"
    assert (permission["family"], permission["decision"]) == ("mcp", "allowed")
    waits = [e for e in events if e["kind"] == "approval_wait"]
    assert waits and waits[0]["handle"] == "distress"
    assert result.outcome == "escalated", result.reason  # the park outlived --max-park
    # the agent was handed the broker at session creation, with its bearer; the log shows neither
    [init] = [e["event"] for e in events if e["kind"] == "agent" and e["event"]["kind"] == "init"]
    assert init["harness"] == "acp"
    assert "Bearer" not in (domain / "state" / "session.jsonl").read_text()


def test_crucible_help_imports_no_acp_module(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "from crucible_core.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('crucible_harness_acp', 'acp')))\n"
    )
    env = crucible_env(CRUCIBLE_CACHE_DIR=str(tmp_path / "cache"))
    # a cold cache lists plugin commands by loading each plugin module once, never the harness or the SDK
    cold = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    assert cold.returncode == 0, cold.stderr
    assert cold.stdout.strip().splitlines()[-1] == "['crucible_harness_acp']"
    # once the command list is cached, --help imports nothing of the plugin at all
    warm = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    assert warm.returncode == 0, warm.stderr
    assert warm.stdout.strip().splitlines()[-1] == "[]"
