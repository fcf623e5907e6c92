"""Which kept states `crucible diff` asks the world for, read from a session log."""

from __future__ import annotations

from pathlib import Path

import pytest

from crucible_core.api import UsageError, read_session
from crucible_world_git.kept_states import best_change, iteration_change

FIXTURE = Path(__file__).parents[1] / "flow" / "fixtures" / "crucible_run.jsonl"  # the flow model's log


def test_kept_states_for_diff_come_from_the_contract_rows() -> None:
    events = read_session(FIXTURE)
    best = best_change(events)
    assert (best.base, best.head) == ("9f1c2ab", "c0ffee5")  # the component's base_sha, the last keep
    assert iteration_change(events, 4).head == "c0ffee4"  # the wide round's kept candidate
    with pytest.raises(UsageError, match="iteration 2 was not kept"):
        iteration_change(events, 2)
