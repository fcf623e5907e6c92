"""Whole `crucible run`s with backend "local" and the real Claude Code CLI against the scripted model server."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from crucible_core.session_log import read_events
from tests.cli_support import CRUCIBLE, crucible_env, run_crucible
from tests.fakes.anthropic_api import FakeAnthropic, Reply, Script, Text, Thinking, call
from tests.harness_claude.support import agent_env, live_processes_with, wait_for, write_domain

pytestmark = pytest.mark.claude_cli

# Sonnet 4.6 list prices, USD per million tokens; the fake reports 1200 in / 80 out per call.
PER_CALL = (1200 * 3.0 + 80 * 15.0) / 1_000_000


def run(manifest: Path, claude_cli: Path, iterations: int) -> subprocess.CompletedProcess[str]:
    env = crucible_env(CRUCIBLE_CLAUDE_BIN=str(claude_cli))
    return run_crucible("--manifest", manifest, "--iterations", str(iterations), "--ui", "headless", env=env)


def bracketed(events: list[dict[str, Any]]) -> list[tuple[int | None, dict[str, Any]]]:
    """Agent events with the iteration of the agent_start bracket they sit in (nested ones unwrapped)."""
    out: list[tuple[int | None, dict[str, Any]]] = []
    iteration = None
    for e in events:
        if e["kind"] == "agent_start":
            iteration = e["iter"]
        elif e["kind"] == "agent_session":
            out.append((iteration, e))
        elif e["kind"] == "agent":
            out.append((iteration, e["event"]))
    return out


def test_the_loop_measures_and_keeps_the_clis_edit_and_resumes_its_session(
    fake: FakeAnthropic, claude_cli: Path, tmp_path: Path
) -> None:
    domain = tmp_path / "domain"
    value = domain / "workspace" / "value.txt"
    # Every turn reads value.txt and replaces a "1" with a "2": the first turn raises the score,
    # the second finds no "1" left (its edit fails), so its candidate is unchanged: discarded unmeasured.
    fake.script = Script(
        [
            call("Read", file_path=str(value)),
            call("Edit", file_path=str(value), old_string="1", new_string="2"),
            Reply([Thinking("Edited."), Text("Raised the value.")]),
        ]
    )
    env = agent_env(fake, tmp_path / "home", ANTHROPIC_API_KEY="sk-ant-api03-e2e-test-key-0000")
    manifest = write_domain(domain, env, session="solver")

    done = run(manifest, claude_cli, iterations=2)
    assert done.returncode == 0, done.stderr

    events = list(read_events(domain / "state" / "session.jsonl"))
    [start] = [e for e in events if e["kind"] == "start"]
    assert start["harness"] == "claude" and start["model"]  # what the local backend really ran
    rows = [e["row"] for e in events if e["kind"] == "row"]
    assert [r["decision"] for r in rows] == ["baseline", "keep", "discard"]
    assert [r["score"] for r in rows] == [1, 2, None]
    assert rows[2]["note"] == "no change"
    assert value.read_text() == "2\n"
    log = subprocess.run(
        ["git", "-C", str(value.parent), "log", "--format=%s"], capture_output=True, text=True
    )
    assert any(s.startswith("crucible: iteration 1") for s in log.stdout.splitlines()), log.stdout

    agent = bracketed(events)
    sessions = [(it, e["action"], e["turn"]) for it, e in agent if e["kind"] == "agent_session"]
    assert sessions == [(1, "started", 1), (2, "resumed", 2)]
    calls = [(it, e["name"]) for it, e in agent if e["kind"] == "tool" and "input" in e]
    assert calls == [(1, "Read"), (1, "Edit"), (2, "Read"), (2, "Edit")]
    second_edit = [e for it, e in agent if e["kind"] == "tool" and "result" in e and it == 2][-1]
    assert second_edit["is_error"]
    turns = [e for e in events if e["kind"] == "turn"]
    assert [t["ok"] for t in turns] == [True, True]
    assert [t["cost"] for t in turns] == pytest.approx([3 * PER_CALL, 3 * PER_CALL])

    cursor_file = domain / "state" / "private" / "sessions" / "claude" / "solver.json"
    cursor = json.loads(cursor_file.read_text())["cursor"]
    assert cursor not in (domain / "state" / "session.jsonl").read_text()
    assert cursor not in (value.parent / "RESULTS.md").read_text()


def test_secrets_in_the_agent_env_and_in_model_replies_reach_no_file_the_run_writes(
    fake: FakeAnthropic, claude_cli: Path, tmp_path: Path
) -> None:
    api_key = "sk-ant-api03-canary-key-7f3a9c1e5b"
    env_secret = "canary-env-value-Q9xZ7w2L"  # no secret shape: only its exact value can give it away
    shaped = "sk-ant-api03-canary-reply-4d8e2b6a0c"  # never handed out: caught by its shape
    domain = tmp_path / "domain"
    value = domain / "workspace" / "value.txt"
    fake.script = Script(
        [
            call("Bash", command='echo "token is $CANARY_TOKEN"', description="show the token"),
            call("Read", file_path=str(value)),
            call("Edit", file_path=str(value), old_string="1", new_string="2"),
            Reply(
                [
                    Thinking(f"I saw {env_secret} and also {shaped}."),
                    Text(f"Done. The token was {env_secret}; a key: {shaped}; the api key {api_key}."),
                ]
            ),
        ]
    )
    env = agent_env(fake, tmp_path / "home", ANTHROPIC_API_KEY=api_key, CANARY_TOKEN=env_secret)
    manifest = write_domain(domain, env, session="solver")

    done = run(manifest, claude_cli, iterations=1)
    assert done.returncode == 0, done.stderr
    canaries = [api_key, env_secret, shaped]

    written = [p for p in (domain / "state").rglob("*") if p.is_file()]
    written += [p for p in (domain / "workspace").iterdir() if p.is_file() and p.name != "value.txt"]
    assert domain / "state" / "session.jsonl" in written and domain / "workspace" / "RESULTS.md" in written
    for path in written:
        content = path.read_bytes().decode("utf-8", errors="replace")
        for canary in canaries:
            assert canary not in content, f"{canary} leaked into {path}"
    for stream in (done.stdout, done.stderr):
        assert not any(canary in stream for canary in canaries)

    # The evidence itself was kept, masked: the tool output and the reply are in the log.
    events = list(read_events(domain / "state" / "session.jsonl"))
    agent = [e for _, e in bracketed(events)]
    tool_output = next(e for e in agent if e["kind"] == "tool" and "result" in e)
    assert "token is [REDACTED]" in tool_output["result"]
    reply = next(e for e in agent if e["kind"] == "text")
    assert reply["delta"].count("[REDACTED]") == 3
    # The model really received the secrets (so the test is not vacuous).
    assert env_secret in json.dumps(fake.message_requests()[-1].body["messages"])
    assert [e["row"]["decision"] for e in events if e["kind"] == "row"] == ["baseline", "keep"]


def tool_processes(marker: str) -> list[int]:
    """Agent processes still running that the CLI's Bash tool started (they carry the marker)."""
    found = []
    for pid in live_processes_with(marker):
        try:
            if b"tail" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:  # it ended between the listing and this read
            continue
    return found


@pytest.mark.leaves_open_log("it SIGKILLs the engine and does not resume")
def test_no_agent_process_outlives_a_killed_engine(
    fake: FakeAnthropic, claude_cli: Path, tmp_path: Path
) -> None:
    marker = f"crucible-orphan-{uuid.uuid4().hex}"
    # The model runs a command that never ends: the turn is then a CLI with grandchildren (the
    # Bash tool's shell and its command, which the CLI starts in a session of their own).
    fake.script = Script([call("Bash", command="tail -f /dev/null", description="wait")])
    env = agent_env(
        fake, tmp_path / "home", ANTHROPIC_API_KEY="sk-ant-api03-kill-test-0000", CRUCIBLE_TEST_MARKER=marker
    )
    manifest = write_domain(tmp_path / "domain", env)
    engine = subprocess.Popen(
        [str(CRUCIBLE), "--manifest", str(manifest), "--iterations", "1", "--ui", "headless"],
        env=crucible_env(CRUCIBLE_CLAUDE_BIN=str(claude_cli)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_for(lambda: bool(tool_processes(marker)), seconds=60), "the turn never reached its tool"
        engine.kill()
        engine.wait()
        assert wait_for(lambda: not live_processes_with(marker), seconds=15), live_processes_with(marker)
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait()
        # Whatever this test's turn left behind is ended here, by pid, so no run leaks processes.
        for pid in live_processes_with(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
