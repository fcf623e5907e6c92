"""Budgets end runs with the right outcome; the prompt carries goal, status and steering."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from crucible_core.durations import parse_duration
from crucible_core.errors import UsageError
from crucible_core.hookspecs import hookimpl
from crucible_core.plugins import load_plugins
from crucible_core.protocols import Turn, TurnResult
from crucible_core.run.budget import Budget
from crucible_core.session.entry import execute
from crucible_core.session.request import SessionRequest
from tests.cli_support import run_crucible
from tests.e2e.session import assert_one_trailing_shutdown, events, rows


def test_parse_duration() -> None:
    assert parse_duration("90") == 90 and parse_duration("15m") == 900 and parse_duration("2h") == 7200
    with pytest.raises(UsageError):
        parse_duration("soon")


def test_budget_reasons() -> None:
    budget = Budget(iterations=3, max_cost=1.0, max_time=10)
    assert budget.exhausted(iterations_done=2, spent=0.5, active_seconds=1) is None
    assert "iterations" in budget.exhausted(iterations_done=3, spent=0, active_seconds=0)
    assert "cost" in budget.exhausted(iterations_done=0, spent=1.0, active_seconds=0)
    assert "time" in budget.exhausted(iterations_done=0, spent=0, active_seconds=10)


def test_max_time_ends_the_run_as_budget(example) -> None:
    manifest = example("counter")
    manifest.write_text(
        manifest.read_text().replace('agent_cmd = "./bump.sh"', 'agent_cmd = "sleep 1; ./bump.sh"')
    )
    # 50 one-second turns cannot fit in 5 s, and 5 s leaves a loaded machine (the suite runs on
    # parallel workers) room for the baseline, so at least one iteration starts
    done = run_crucible("--manifest", manifest, "--iterations", "50", "--max-time", "5s", "--no-early-stop")
    assert done.returncode == 0, done.stderr
    assert assert_one_trailing_shutdown(manifest)["outcome"] == "budget"
    assert 1 <= len(rows(manifest)) - 1 < 50


class PricedBackend:
    """Stands in for a paid model turn (which cannot run here): bumps the counter at $0.40."""

    def run_turn(self, turn: Turn) -> TurnResult:
        value = turn.workspace / "value.txt"
        value.write_text(str(int(value.read_text()) + 1) + "\n")
        return TurnResult(True, cost_usd=0.4)


def test_max_cost_ends_the_run_as_budget(example) -> None:
    manifest = example("counter")
    manifest.write_text(manifest.read_text().replace('backend = "command"', 'backend = "priced"'))
    plugins = load_plugins()
    module = types.ModuleType("priced")
    module.crucible_register_backends = hookimpl(
        lambda register: register("priced", lambda ctx: PricedBackend())
    )
    plugins.register_module(module, name="priced", distribution="test-priced", version="0")
    result = execute(
        plugins, SessionRequest(manifest=manifest, budget=Budget(iterations=10, max_cost=1.0), ui="headless")
    )
    assert result.outcome == "budget"
    assert [r["cost"] for r in rows(manifest)] == [0.0, 0.4, 0.4, 0.4]
    summary = next(e for e in events(manifest) if e["kind"] == "summary")
    assert summary["spent"] == pytest.approx(1.2)


RECORDER = """#!/bin/sh
cp "$CRUCIBLE_PROMPT_FILE" "../prompt-$CRUCIBLE_ITERATION.md"
stat -c %a "$CRUCIBLE_PROMPT_FILE" > ../prompt-mode.txt
./bump.sh
"""


def _recording_counter(example, method: str, script: str) -> tuple[Path, Path]:
    """The counter with `method` as its method prompt and `script` (which records what the turn
    was given, then bumps) as its agent: (manifest, its directory)."""
    manifest = example("counter")
    directory = manifest.parent
    (directory / "method.md").write_text(method)
    (directory / "record.sh").write_text(script)
    (directory / "record.sh").chmod(0o755)
    text = manifest.read_text().replace("cp value.txt bump.sh", "cp value.txt bump.sh record.sh")
    text = text.replace('agent_cmd = "./bump.sh"', 'agent_cmd = "./record.sh"\nmethod_prompt = "method.md"')
    manifest.write_text(text)
    return manifest, directory


def test_prompt_renders_goal_status_and_file_steering(example) -> None:
    manifest, directory = _recording_counter(
        example, "GOAL<{{GOAL}}>\nSTATUS<{{STATUS}}>\nSTEER<{{STEER}}>\n", RECORDER
    )
    (directory / "STEER.md").write_text("try odd numbers first\n")
    done = run_crucible("--manifest", manifest, "--iterations", "2")
    assert done.returncode == 0, done.stderr
    first = (directory / "prompt-1.md").read_text()
    assert "GOAL<Raise the integer in value.txt" in first
    assert "iteration 1 of 2" in first and "best so far: 0.0" in first
    assert "STEER<try odd numbers first>" in first
    second = (directory / "prompt-2.md").read_text()
    assert "STEER<(none)>" in second  # delivered once, then drained
    assert "iteration 1: keep" in second
    steers = [e for e in events(manifest) if e["kind"] == "steer"]
    assert len(steers) == 1 and steers[0]["iter"] == 1 and steers[0]["status"] == "applied"
    assert (directory / "STEER.md").read_text() == ""
    assert (directory / "prompt-mode.txt").read_text().strip() == "600"  # private while the turn runs
    assert not list(Path(directory / "state" / "private").glob("prompt*"))  # and gone after it


STDIN_AND_FILE = """#!/bin/sh
cat > "../stdin-$CRUCIBLE_ITERATION.md"
cp "$CRUCIBLE_PROMPT_FILE" "../file-$CRUCIBLE_ITERATION.md"
./bump.sh
"""


def test_the_prompt_copy_is_each_turns_prompt_whole_and_empty_between_turns(example) -> None:
    from crucible_core import api

    manifest, directory = _recording_counter(example, "{{STATUS}}\n{{STEER}}\n", STDIN_AND_FILE)
    (directory / "STEER.md").write_text("a long steer the first prompt alone carries " * 20 + "\n")
    copy = directory / "state" / "private" / "prompt.md"
    between: list[bytes] = []

    def after_each_turn(event: dict) -> None:
        if event["kind"] == "step" and event["step"] == "apply":
            between.append(copy.read_bytes())

    result = api.run(manifest, iterations=3, on_event=after_each_turn)

    assert result.outcome == "finished" and between == [b"", b"", b""]
    for i in (1, 2, 3):  # the later prompts are shorter: no tail of an earlier one is left in the copy
        assert (directory / f"file-{i}.md").read_bytes() == (directory / f"stdin-{i}.md").read_bytes()
    assert len((directory / "file-2.md").read_bytes()) < len((directory / "file-1.md").read_bytes())
    assert not copy.exists()


def test_every_prompt_states_the_declaration_which_is_worded_once(example, monkeypatch) -> None:
    from crucible_core import api
    from crucible_core.broker.declaration import Declaration

    manifest = example("counter")
    directory = manifest.parent
    (directory / "record.sh").write_text(STDIN_AND_FILE)
    (directory / "record.sh").chmod(0o755)
    text = manifest.read_text().replace("cp value.txt bump.sh", "cp value.txt bump.sh record.sh")
    manifest.write_text(text.replace('agent_cmd = "./bump.sh"', 'agent_cmd = "./record.sh"'))
    worded: list[list[str]] = []
    real = Declaration.describe

    def wording(self: Declaration) -> list[str]:
        worded.append(real(self))
        return worded[-1]

    monkeypatch.setattr(Declaration, "describe", wording)
    result = api.run(manifest, iterations=3)
    assert result.outcome == "finished"
    assert len(worded) == 1  # one declaration, worded for the first prompt only
    for i in (1, 2, 3):
        prompt = (directory / f"stdin-{i}.md").read_text()
        assert all(line in prompt for line in worded[0] if "broker tools" not in line)
