"""Console reporters: live progress lines for a person, or a single summary line when headless."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, TextIO

from crucible_core.protocols import ReporterContext
from crucible_core.reporters.output import QuietOnClose, plain


def _num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return f"{value:.6g}" if isinstance(value, float) else str(value)


class ConsoleReporter:
    """One line per decision: iteration, verdict, score against best, elapsed; notes and the end."""

    def __init__(self, stream: TextIO, iterations: int | None) -> None:
        self.stream = stream
        self.output = QuietOnClose(stream)
        self.iterations = iterations
        self.started = time.monotonic()

    @classmethod
    def from_context(cls, ctx: ReporterContext) -> ConsoleReporter:
        return cls(ctx.stream, ctx.iterations)

    def _out(self, text: str) -> None:
        # Notes, reasons and verdict notes carry agent and measure text: plain text only.
        self.output.line(plain(text))

    def on_event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("kind")
        elapsed = f"{time.monotonic() - self.started:6.1f}s"
        if kind == "start":
            self._out(
                f"crucible {event.get('version')}: {event.get('gate')} "
                f"({event.get('direction') or 'task lane'}), backend {event.get('backend')}, "
                f"world {event.get('world')}"
            )
        elif kind == "row":
            it = event.get("iter")
            total = f"/{self.iterations}" if self.iterations else ""
            note = plain(event.get("note") or "")[:80]
            self._out(
                f"[{elapsed}] iter {it}{total} {event.get('verdict'):<16} "
                f"score {_num(event.get('score'))}  best {_num(event.get('best'))}"
                + (f"  {note}" if note else "")
            )
        elif kind == "note" and event.get("level") in ("warn", "error"):
            self._out(f"[{elapsed}] {event.get('level')}: {event.get('text')}")
        elif kind == "steer":
            self._out(f"[{elapsed}] steer delivered to iteration {event.get('iter')}")
        elif kind == "summary":
            self._out(
                f"best {_num(event.get('best_score'))} (baseline {_num(event.get('baseline_score'))}); "
                f"{event.get('kept')} kept, {event.get('discarded')} discarded, ${event.get('spent')}"
            )
        elif kind == "shutdown":
            self._out(f"run ended: {event.get('outcome')} ({event.get('reason')})")

    def close(self) -> None:
        self.output.flush()


class HeadlessReporter(ConsoleReporter):
    """For unattended runs: only warnings, errors and the final outcome."""

    def on_event(self, event: Mapping[str, Any]) -> None:
        if event.get("kind") in ("note", "summary", "shutdown"):
            super().on_event(event)
