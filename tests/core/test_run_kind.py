"""Which kind of run wrote a log, and a task run's verdict (contract/run_kind.py): pure, every case."""

from __future__ import annotations

from pathlib import Path

import pytest

from crucible_core.contract.run_kind import RunKind, TaskStanding, run_kind, task_verdict, verdict_word
from crucible_core.flow.decode import read_kind, read_session
from crucible_core.flow.fold import fold_flow

FIXTURES = Path(__file__).resolve().parents[1] / "flow" / "fixtures"


@pytest.mark.parametrize(
    ("started", "gate", "admitted", "kind"),
    [
        (False, None, True, RunKind.PLAN),  # a plan file's log opens with plan_admitted
        (False, None, False, RunKind.LOOP),  # nothing to tell: the loop's view, as before
        (True, "task", True, RunKind.PLAYBOOK),
        (True, "task", False, RunKind.LOOP),  # the task lane's loop admits no plan
        (True, "bench", True, RunKind.LOOP),  # a scored run that admitted a graph stays a loop
        (True, "", False, RunKind.LOOP),
    ],
)
def test_run_kind(started: bool, gate: str | None, admitted: bool, kind: RunKind) -> None:
    assert run_kind(started=started, gate=gate, plan_admitted=admitted) is kind


@pytest.mark.parametrize("name", ["crucible_run.jsonl", "our_run.jsonl"])
def test_loops_that_admit_graphs_read_as_loops(name: str) -> None:
    """crucible's run re-plans at the run level; ours runs a scored workflow's graph per iteration."""
    assert read_kind(FIXTURES / name) is RunKind.LOOP
    model = fold_flow(read_session(FIXTURES / name))
    assert (model.header.kind, model.header.verdict, model.is_task_run) == ("loop", None, False)


def standing(status: str | None, *, required: bool = True, stage: str = "iteration") -> TaskStanding:
    return TaskStanding(required=required, stage=stage, status=status)


@pytest.mark.parametrize(
    ("tasks", "outcome", "verdict"),
    [
        ([standing("pass"), standing("skipped")], "finished", "pass"),
        ([standing("pass"), standing("fail")], "finished", "fail"),
        ([standing("pass"), standing("blocked")], "stopped", "fail"),
        ([standing("truncated")], "finished", "fail"),
        ([standing("transport")], "finished", "fail"),
        ([standing("pass"), standing("fail", required=False)], "finished", "pass"),  # advisory
        ([standing("pass"), standing("fail", stage="epilogue")], "finished", "pass"),  # epilogue
        ([standing("pass"), standing(None)], "complete", "pass"),  # left undispatched by completion
        ([standing("fail"), standing(None)], "complete", "fail"),  # completion launders no failure
        ([standing("pass"), standing(None)], "stopped", "fail"),  # a stop left a required task
        ([standing("pass")], "budget", "fail"),  # an exhausted ceiling, whatever the tasks say
        ([standing("pass")], "error", "fail"),
        ([standing("pass")], None, None),  # no shutdown yet: live, or died
    ],
)
def test_task_verdict(tasks: list[TaskStanding], outcome: str | None, verdict: str | None) -> None:
    assert task_verdict(tasks, outcome) == verdict


def test_each_lane_says_its_verdict_in_its_own_words() -> None:
    assert [verdict_word("playbook", v) for v in ("pass", "fail", None)] == ["valid", "invalid", "none yet"]
    assert [verdict_word("plan", v) for v in ("pass", "fail")] == ["pass", "fail"]
