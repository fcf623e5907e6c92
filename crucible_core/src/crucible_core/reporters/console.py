"""Console reporters: progress for a person (a live table on a terminal, plain lines otherwise),
or a single closing line when headless."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from crucible_core.contract import wire
from crucible_core.contract.plain_text import plain
from crucible_core.protocols import Reporter, ReporterContext
from crucible_core.reporters.console_text import end_lines, event_lines, headless_line, unicode_ok
from crucible_core.reporters.console_view import ConsoleView
from crucible_core.reporters.output import QuietOnClose


def is_terminal(stream: Any) -> bool:
    """A person is watching `stream` on a terminal that can redraw a live table."""
    try:
        tty = bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False
    return tty and os.environ.get("TERM", "") != "dumb"


class ConsoleReporter:
    """Plain lines: one per decision and per operator action, then the end summary.

    For pipes, files and CI logs; `from_context` picks the live table on a terminal.
    """

    def __init__(
        self, stream: TextIO, iterations: int | None, clock: Callable[[], float] = time.time
    ) -> None:
        self.stream = stream
        self.output = QuietOnClose(stream)
        self.view = ConsoleView(total=iterations)
        self.clock = clock
        self.unicode = unicode_ok(stream)

    @classmethod
    def from_context(cls, ctx: ReporterContext) -> Reporter:
        if is_terminal(ctx.stream):
            from crucible_core.reporters.console_live import LiveConsoleReporter  # rich loads only here

            return LiveConsoleReporter(ctx.stream, ctx.iterations)
        return cls(ctx.stream, ctx.iterations)

    def fold(self, event: Mapping[str, Any]) -> tuple[wire.Line, float] | None:
        """Decode one log object through the wire and fold it; the line and its time, or None."""
        line = wire.from_object(dict(event))
        if line is None:
            return None
        now = self.clock()
        self.view.apply(line, now)
        return line, line.ts if line.ts is not None else now

    def lines_for(self, line: wire.Line, at: float) -> list[str]:
        if isinstance(line.event, wire.Shutdown):
            return end_lines(self.view, ascii_only=not self.unicode)
        return event_lines(self.view, line, at, ellipsis="…" if self.unicode else "...")

    def on_event(self, event: Mapping[str, Any]) -> None:
        folded = self.fold(event)
        if folded is None:
            return
        for text in self.lines_for(*folded):
            self.output.line(plain(text))  # notes carry agent and measure text: plain text only

    def close(self) -> None:
        self.output.flush()


class HeadlessReporter(ConsoleReporter):
    """For unattended runs: warnings, errors, and one closing line with the outcome and summary."""

    @classmethod
    def from_context(cls, ctx: ReporterContext) -> Reporter:
        return cls(ctx.stream, ctx.iterations)

    def lines_for(self, line: wire.Line, at: float) -> list[str]:
        ev = line.event
        if isinstance(ev, wire.Shutdown):
            return [headless_line(self.view)]
        if isinstance(ev, wire.Note) and ev.level in ("warn", "error"):
            return super().lines_for(line, at)
        return []
