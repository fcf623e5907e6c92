"""`crucible plan states` through the real CLI: the executor's state machines, drawn from its tables."""

from __future__ import annotations

from crucible_core.plan.states import PLAN_MACHINE, TASK_MACHINE, BlockReason
from tests.cli_support import run_crucible


def test_states_dot_is_rendered_from_the_executor_tables() -> None:
    dot = run_crucible("plan", "states", "--format", "dot").stdout
    assert dot.count("digraph") == 2
    for machine in (TASK_MACHINE, PLAN_MACHINE):
        for edge in machine.edges:
            assert f'"{edge.source}" -> "{edge.target}" [label="{edge.label}"]' in dot
    for reason in BlockReason:
        assert reason.value in dot
