"""How every CLI turn's verdict begins: it never started, the seed step refused it, or its deadline passed."""

from __future__ import annotations

from crucible_core.api import Completed, FailureClass, TurnResult
from crucible_harness_endpoint import events
from crucible_harness_endpoint.endpoint import refusal


def ended_early(done: Completed, cli: str, cost: float) -> TurnResult | None:
    """The verdict of a turn that ended before its CLI could say anything about it, else None.

    A CLI that could not start, or a turn the seed step refused for want of a key, is a `spawn`
    failure (nothing was spent); one killed at its deadline is a `timeout`, charged `cost`.
    """
    if done.spawn_error:
        return TurnResult(
            False, FailureClass.SPAWN, note=events.note(f"could not start {cli}: {done.spawn_error}")
        )
    refused = refusal(done)
    if refused is not None:
        return TurnResult(False, FailureClass.SPAWN, note=events.note(refused))
    if done.timed_out:
        return TurnResult(
            False, FailureClass.TIMEOUT, cost_usd=cost, note=events.note(f"{cli} {done.describe_failure()}")
        )
    return None
