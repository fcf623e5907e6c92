"""Console reporters: live progress lines for a person, or a single summary line when headless."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, TextIO

from crucible_core.contract import wire
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
        line = wire.from_object(dict(event))  # reporters read the log's objects through the wire
        if line is None:
            return
        ev = line.event
        elapsed = f"{time.monotonic() - self.started:6.1f}s"
        if isinstance(ev, wire.Start):
            self._out(
                f"crucible {ev.version or ''}: {ev.gate} "
                f"({ev.direction or 'task lane'}), backend {ev.backend}, world {ev.world}"
            )
        elif isinstance(ev, wire.Row):
            row = ev.row
            total = f"/{self.iterations}" if self.iterations else ""
            note = plain(row.note)[:80]
            self._out(
                f"[{elapsed}] iter {row.iter}{total} {row.decision:<16} "
                f"score {_num(row.score)}  best {_num(row.best)}" + (f"  {note}" if note else "")
            )
        elif isinstance(ev, wire.Note) and ev.level in ("warn", "error"):
            self._out(f"[{elapsed}] {ev.level}: {ev.msg}")
        elif isinstance(ev, wire.Steer):
            self._out(f"[{elapsed}] steer delivered to iteration {ev.iter}")
        elif isinstance(ev, wire.Summary):
            self._out(
                f"best {_num(ev.best_score)} (baseline {_num(ev.baseline_score)}); "
                f"{ev.kept} kept, {ev.discarded} discarded, ${ev.spent}"
            )
        elif isinstance(ev, wire.Shutdown):
            self._out(f"run ended: {ev.outcome} ({ev.reason})")

    def close(self) -> None:
        self.output.flush()


class HeadlessReporter(ConsoleReporter):
    """For unattended runs: only warnings, errors and the final outcome."""

    def on_event(self, event: Mapping[str, Any]) -> None:
        if event.get("kind") in ("note", "summary", "shutdown"):
            super().on_event(event)
