"""How a finished Claude Code CLI turn is classified: ok, or which failure class, with what cost and note.

Pure: it reads what the supervisor saw (exit, deadline, stderr) and what the stream decoder
collected, and decides. A spawn or stream failure says nothing about the candidate (the engine
does not spend the iteration on it); a provider failure is the model service's; an agent
failure is the agent's own (it ran and reported an error).
"""

from __future__ import annotations

from crucible_core.api import Completed, FailureClass, TurnResult
from crucible_harness_claude import events
from crucible_harness_claude.otlp_cost import choose_cost
from crucible_harness_claude.stream_json import StreamDecoder

NOTE_CHARS = 600


def stderr_tail(stderr: str, lines: int = 4) -> str:
    tail = [line.strip() for line in stderr.strip().splitlines() if line.strip()][-lines:]
    return events.clip(" | ".join(tail), 400)


def _note(*parts: str) -> str:
    return events.clip("; ".join(p for p in parts if p), NOTE_CHARS)


def classify(done: Completed, decoder: StreamDecoder, otlp_cost: float | None = None) -> TurnResult:
    """The turn's verdict; `otlp_cost` is the CLI's own OTLP cost figure, used when the stream gave none."""
    cost, source = choose_cost(decoder.reported_cost, otlp_cost, decoder.estimated_cost())
    estimate = {"stream": "", "otlp": f"cost from the CLI's OTLP metrics: ${cost:.4f}"}.get(
        source, "" if cost == 0 else f"cost estimated from usage: ${cost:.4f}"
    )
    if done.spawn_error:
        return TurnResult(
            False, FailureClass.SPAWN, note=_note(f"could not start the Claude Code CLI: {done.spawn_error}")
        )
    if done.timed_out:
        return TurnResult(
            False,
            FailureClass.TIMEOUT,
            cost_usd=cost,
            note=_note(f"claude {done.describe_failure()}", estimate),
        )
    result = decoder.result
    if result is None:
        detail = stderr_tail(done.stderr)
        if decoder.undecodable:
            detail = _note(
                f"{decoder.undecodable} undecodable stream line(s), e.g. {decoder.bad_lines[0]!r}", detail
            )
        if not decoder.started:
            # It never said hello: rejected flags, refused to run, crashed on start-up.
            return TurnResult(
                False,
                FailureClass.SPAWN,
                note=_note(f"the Claude Code CLI {done.describe_failure()} before its stream began", detail),
            )
        return TurnResult(
            False,
            FailureClass.STREAM,
            cost_usd=cost,
            note=_note(
                f"the stream ended without a result (claude {done.describe_failure()})", detail, estimate
            ),
        )
    text = events.clip(str(result.get("result") or "; ".join(decoder.result_errors)), 300)
    if result.get("is_error") or result.get("subtype") != "success":
        if (
            result.get("api_error_status")
            or result.get("terminal_reason") == "api_error"
            or decoder.api_error
        ):
            status = result.get("api_error_status")
            return TurnResult(
                False,
                FailureClass.PROVIDER,
                cost_usd=cost,
                note=_note(f"the model provider failed{f' (HTTP {status})' if status else ''}", text),
            )
        return TurnResult(
            False,
            FailureClass.AGENT,
            cost_usd=cost,
            note=_note(f"claude ended with {result.get('subtype') or 'an error'}", text),
        )
    steps = result.get("num_turns")
    summary = events.clip(str(result.get("result") or ""), 160)
    return TurnResult(
        True,
        cost_usd=cost,
        note=_note(f"claude finished{f' in {steps} steps' if steps else ''}", summary, estimate),
    )
