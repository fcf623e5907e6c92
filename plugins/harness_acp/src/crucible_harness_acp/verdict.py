"""How a finished acp turn is classified: ok, or which failure class, with what cost and note.

Pure: it reads what the supervisor saw (exit, deadline, stderr) and what the driver's stream
said. A failure to start (no agent, no session, no sandbox module) or a broken stream says
nothing about the candidate, so the engine does not spend the iteration on it; a provider
failure is the model service's; an agent failure is the agent's own.
"""

from __future__ import annotations

from crucible_core.api import Completed, FailureClass, TurnResult
from crucible_harness_acp import events
from crucible_harness_acp.config import DRIVER_MODULE
from crucible_harness_acp.stream import DriverStream

NOTE_CHARS = 600
# The end record's failure names, as the driver writes them.
FAILURES = {
    "spawn": FailureClass.SPAWN,
    "provider": FailureClass.PROVIDER,
    "agent": FailureClass.AGENT,
    "stream": FailureClass.STREAM,
}


def stderr_tail(stderr: str, lines: int = 4) -> str:
    tail = [line.strip() for line in stderr.strip().splitlines() if line.strip()][-lines:]
    return events.clip(" | ".join(tail), 400)


def _note(*parts: str) -> str:
    return events.clip("; ".join(p for p in parts if p), NOTE_CHARS)


def turn_cost(stream: DriverStream) -> float:
    """What the turn cost by the agent's own report (a session lives one turn); 0 when it reports none."""
    end_cost = (stream.end or {}).get("cost_usd")
    if isinstance(end_cost, int | float) and not isinstance(end_cost, bool) and end_cost >= 0:
        return float(end_cost)
    return stream.cost_usd or 0.0


def classify(done: Completed, stream: DriverStream) -> TurnResult:
    cost = turn_cost(stream)
    if done.spawn_error:
        return TurnResult(
            False, FailureClass.SPAWN, note=_note(f"could not start the acp driver: {done.spawn_error}")
        )
    if done.timed_out:
        return TurnResult(
            False,
            FailureClass.TIMEOUT,
            cost_usd=cost,
            note=_note(f"the acp turn was {done.describe_failure()}"),
        )
    end = stream.end
    detail = stderr_tail(done.stderr)
    if end is None:
        if stream.undecodable:
            detail = _note(f"{stream.undecodable} undecodable line(s), e.g. {stream.bad_lines[0]!r}", detail)
        if DRIVER_MODULE in done.stderr and "No module named" in done.stderr:
            return TurnResult(
                False,
                FailureClass.SPAWN,
                note=_note(
                    "the acp driver is not installed where the turn runs: install crucible-plugin-harness-acp there",
                    detail,
                ),
            )
        failure = FailureClass.STREAM if stream.started else FailureClass.SPAWN
        return TurnResult(
            False,
            failure,
            cost_usd=cost,
            note=_note(f"the acp driver {done.describe_failure()} without an end", detail),
        )
    failure_name = end.get("failure")
    if failure_name is not None:
        failure = FAILURES.get(str(failure_name), FailureClass.STREAM)
        return TurnResult(
            False, failure, cost_usd=cost, note=_note(str(end.get("note") or failure_name), detail)
        )
    stop = str(end.get("stop_reason") or "")
    text = events.clip(str(end.get("text") or ""), 160)
    if stop != "end_turn":
        return TurnResult(
            False,
            FailureClass.AGENT,
            cost_usd=cost,
            note=_note(f"the agent stopped: {stop or 'no reason'}", text),
        )
    priced = (
        "" if stream.cost_usd is not None or end.get("cost_usd") is not None else "the agent reported no cost"
    )
    return TurnResult(True, cost_usd=cost, note=_note("the acp agent finished", text, priced))
