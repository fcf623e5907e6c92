"""How a finished pi turn is classified: ok, or which failure class, with what cost and note.

Pure: it reads what the supervisor saw and what the stream decoder collected. Pi exits 0 after
a provider error too, so the last assistant message's stop reason decides, not the exit status.
"""

from __future__ import annotations

from crucible_core.api import Completed, FailureClass, TurnResult
from crucible_harness_endpoint import events
from crucible_harness_endpoint.verdict import ended_early
from crucible_harness_pi.stream import PiStream


def classify(done: Completed, stream: PiStream) -> TurnResult:
    cost = stream.cost_usd
    early = ended_early(done, "pi", cost)
    if early is not None:
        return early
    if not stream.started:
        return TurnResult(
            False,
            FailureClass.SPAWN,
            note=events.note(
                f"pi {done.describe_failure()} before its stream began", events.stderr_tail(done.stderr)
            ),
        )
    if not stream.ended:
        detail = events.note(stream.bad_note(), events.stderr_tail(done.stderr))
        return TurnResult(
            False,
            FailureClass.STREAM,
            cost_usd=cost,
            note=events.note(f"the stream ended without agent_end (pi {done.describe_failure()})", detail),
        )
    if stream.stop_reason == "error":
        return TurnResult(
            False,
            FailureClass.PROVIDER,
            cost_usd=cost,
            note=events.note("the model provider failed", stream.error or ""),
        )
    if stream.stop_reason == "aborted" or done.exit_code != 0:
        return TurnResult(
            False,
            FailureClass.AGENT,
            cost_usd=cost,
            note=events.note(
                f"pi ended with {stream.stop_reason or done.describe_failure()}", stream.error or ""
            ),
        )
    summary = events.clip(stream.text, 160)
    return TurnResult(True, cost_usd=cost, note=events.note(f"pi finished in {stream.turns} steps", summary))
