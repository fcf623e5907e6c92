"""How a finished opencode turn is classified: ok, or which failure class, with what cost and note.

Pure. The session export decides: without one the turn's outcome is unknown, which is a
transcript error (a `stream` failure: the candidate is not judged and the world is restored),
never a success at no cost; what the tokens shown live were worth is still charged.
"""

from __future__ import annotations

from crucible_core.api import Completed, FailureClass, TurnResult
from crucible_harness_endpoint import events
from crucible_harness_endpoint.verdict import ended_early
from crucible_harness_opencode.stream import OpenCodeStream


def classify(done: Completed, stream: OpenCodeStream) -> TurnResult:
    cost = stream.cost_usd
    early = ended_early(done, "opencode", cost)
    if early is not None:
        return early
    transcript = stream.transcript
    if transcript is None:
        if not stream.started:
            detail = stream.stream_error or events.stderr_tail(done.stderr)
            return TurnResult(
                False,
                FailureClass.SPAWN,
                note=events.note(f"opencode {done.describe_failure()} before its stream began", detail),
            )
        why = events.note(stream.export_problem or "opencode left no session export", stream.bad_note())
        return TurnResult(
            False,
            FailureClass.STREAM,
            cost_usd=cost,
            note=events.note(
                f"transcript error: {why} (opencode {done.describe_failure()})",
                events.stderr_tail(done.stderr),
            ),
        )
    if transcript.error is not None:
        status = transcript.error_status
        if status is not None:
            return TurnResult(
                False,
                FailureClass.PROVIDER,
                cost_usd=cost,
                note=events.note(f"the model provider failed (HTTP {status})", transcript.error),
            )
        return TurnResult(
            False,
            FailureClass.AGENT,
            cost_usd=cost,
            note=events.note("opencode ended with an error", transcript.error),
        )
    if done.exit_code != 0:
        return TurnResult(
            False,
            FailureClass.AGENT,
            cost_usd=cost,
            note=events.note(
                f"opencode {done.describe_failure()}", stream.stream_error or events.stderr_tail(done.stderr)
            ),
        )
    summary = events.clip(transcript.text, 160)
    return TurnResult(
        True, cost_usd=cost, note=events.note(f"opencode finished in {transcript.turns} steps", summary)
    )
