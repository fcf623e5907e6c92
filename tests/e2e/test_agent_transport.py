"""Agent turns as the loop sees them: transport failures do not spend iterations; [agent].env reaches only the agent."""

from __future__ import annotations

import types

from crucible_core.hookspecs import hookimpl
from crucible_core.plugins import load_plugins
from crucible_core.protocols import FailureClass, Turn, TurnResult
from crucible_core.run.budget import Budget
from crucible_core.session.entry import execute
from crucible_core.session.request import SessionRequest
from tests.cli_support import run_crucible
from tests.e2e.session import events, rows


class FlakyTransport:
    """Stands in for a remote agent whose connection fails every other attempt."""

    def __init__(self) -> None:
        self.attempts = 0

    def run_turn(self, turn: Turn) -> TurnResult:
        self.attempts += 1
        if self.attempts % 2 == 1:
            return TurnResult(False, FailureClass.STREAM, note="connection reset")
        value = turn.workspace / "value.txt"
        value.write_text(str(int(value.read_text()) + 1) + "\n")
        return TurnResult(True)


def test_a_transport_failure_is_retried_without_spending_the_iteration(example) -> None:
    manifest = example("counter")
    manifest.write_text(manifest.read_text().replace('backend = "command"', 'backend = "flaky"'))
    backend = FlakyTransport()
    module = types.ModuleType("flaky")
    module.crucible_register_backends = hookimpl(lambda register: register("flaky", lambda ctx: backend))
    plugins = load_plugins()
    plugins.register_module(module, name="flaky", distribution="test-flaky", version="0")
    result = execute(plugins, SessionRequest(manifest=manifest, budget=Budget(iterations=3), ui="headless"))
    assert result.outcome == "finished"
    assert backend.attempts == 6
    assert [(r["iter"], r["decision"]) for r in rows(manifest)] == [
        (0, "baseline"),
        (1, "keep"),
        (2, "keep"),
        (3, "keep"),
    ]
    notes = [e["msg"] for e in events(manifest) if e["kind"] == "note"]
    assert sum("transport failed" in n and "not counted" in n for n in notes) == 3


class NeverStarts:
    """Stands in for an agent whose transport fails on every attempt, though its preflight passed."""

    def __init__(self) -> None:
        self.attempts = 0

    def run_turn(self, turn: Turn) -> TurnResult:
        self.attempts += 1
        return TurnResult(False, FailureClass.SPAWN, note="connection refused")


def test_an_agent_that_keeps_failing_to_start_stalls_the_run(example) -> None:
    manifest = example("counter")
    manifest.write_text(manifest.read_text().replace('backend = "command"', 'backend = "never"'))
    backend = NeverStarts()
    module = types.ModuleType("never")
    module.crucible_register_backends = hookimpl(lambda register: register("never", lambda ctx: backend))
    plugins = load_plugins()
    plugins.register_module(module, name="never", distribution="test-never", version="0")
    result = execute(plugins, SessionRequest(manifest=manifest, budget=Budget(iterations=3), ui="headless"))
    assert result.outcome == "stalled" and int(result.exit_code) == 4
    assert backend.attempts == 3
    assert [r["iter"] for r in rows(manifest)] == [0]


def test_a_missing_agent_cli_refuses_the_run_before_anything_is_made(example) -> None:
    manifest = example("counter")
    text = manifest.read_text().replace('backend = "command"', 'backend = "local"\nharness = "claude"')
    manifest.write_text(text + '\n[agent.env]\nCRUCIBLE_CLAUDE_BIN = "/nonexistent/claude"\n')
    done = run_crucible("--manifest", manifest, "--iterations", "3")
    assert done.returncode == 4, done.stderr
    assert "the agent cannot start" in done.stderr and "npm install" in done.stderr
    # nothing was set up or logged, so the same command works once the CLI is installed
    assert not (manifest.parent / "workspace").exists()
    assert not (manifest.parent / "state" / "session.jsonl").exists()


SPY = 'env | grep -c "^AGENT_ONLY=" > ../{who}-sees.txt || true\n'


def test_agent_env_reaches_the_agent_and_not_the_contract_commands(example) -> None:
    manifest = example("counter")
    directory = manifest.parent
    (directory / "bump.sh").write_text((directory / "bump.sh").read_text() + SPY.format(who="agent"))
    measure = (directory / "measure.sh").read_text()
    (directory / "measure.sh").write_text(
        measure.replace("solved=false", SPY.format(who="measure") + "solved=false")
    )
    manifest.write_text(manifest.read_text() + '\n[agent.env]\nAGENT_ONLY = "for-the-agent-1234"\n')
    done = run_crucible("--manifest", manifest, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    assert (directory / "agent-sees.txt").read_text().strip() == "1"
    assert (directory / "measure-sees.txt").read_text().strip() == "0"
    assert "for-the-agent-1234" not in (directory / "state" / "session.jsonl").read_text()
