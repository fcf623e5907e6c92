"""How a finished codex turn is classified: ok, or which failure class, with what cost and note.

Pure: it reads what the supervisor saw (exit, deadline, stderr) and what the stream decoder
collected. A spawn or stream failure says nothing about the candidate (the engine does not
spend the iteration on it); `turn.failed` is the model service's failure (the CLI fails a turn
only when the provider does: refused credentials, overload past its retries, a dropped
stream); a turn that completed is ok whatever the agent's commands did along the way.
"""

from __future__ import annotations

from crucible_core.api import Completed, FailureClass, TurnResult
from crucible_harness_codex import events
from crucible_harness_codex.exec_json import ExecDecoder

NOTE_CHARS = 600


def stderr_tail(stderr: str, lines: int = 4) -> str:
    tail = [line.strip() for line in stderr.strip().splitlines() if line.strip()][-lines:]
    return events.clip(" | ".join(tail), 400)


def _note(*parts: str) -> str:
    return events.clip("; ".join(p for p in parts if p), NOTE_CHARS)


def classify(done: Completed, decoder: ExecDecoder, *, fallback_cost: float = 0.0) -> TurnResult:
    """`fallback_cost`: what the usage recorded outside the stream says a turn without a result cost."""
    if done.spawn_error:
        return TurnResult(
            False, FailureClass.SPAWN, note=_note(f"could not start the Codex CLI: {done.spawn_error}")
        )
    # Only turn.completed reports usage; any other end is charged what was recorded elsewhere.
    cost = decoder.cost_usd if decoder.completed else fallback_cost
    estimate = f"cost estimated from recorded usage: ${cost:.4f}" if cost and not decoder.completed else ""
    if done.timed_out:
        return TurnResult(
            False,
            FailureClass.TIMEOUT,
            cost_usd=cost,
            note=_note(f"codex {done.describe_failure()}", estimate),
        )
    if decoder.completed:
        summary = events.clip(decoder.final_text, 160)
        return TurnResult(True, cost_usd=cost, note=_note("codex finished", summary))
    if decoder.failure is not None:
        return TurnResult(
            False,
            FailureClass.PROVIDER,
            cost_usd=cost,
            note=_note("the model provider failed", decoder.failure),
        )
    detail = stderr_tail(done.stderr)
    if decoder.undecodable:
        detail = _note(
            f"{decoder.undecodable} undecodable stream line(s), e.g. {decoder.bad_lines[0]!r}", detail
        )
    if not decoder.started:
        # It never said hello: rejected flags or config, refused to start, crashed on start-up.
        return TurnResult(
            False,
            FailureClass.SPAWN,
            note=_note(
                f"the Codex CLI {done.describe_failure()} before its stream began",
                decoder.last_error or "",
                detail,
            ),
        )
    return TurnResult(
        False,
        FailureClass.STREAM,
        cost_usd=cost,
        note=_note(
            f"the stream ended without a result (codex {done.describe_failure()})",
            decoder.last_error or "",
            detail,
            estimate,
        ),
    )
