"""Console reporters: progress for a person (a live table on a terminal, plain lines otherwise),
or a single closing line when headless."""

from __future__ import annotations

import os
from typing import Any

from crucible_core.contract import wire
from crucible_core.protocols import Reporter, ReporterContext
from crucible_core.reporters.console_lines import LineReporter
from crucible_core.reporters.console_text import headless_line


def is_terminal(stream: Any) -> bool:
    """A person is watching `stream` on a terminal that can redraw a live table."""
    try:
        tty = bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False
    return tty and os.environ.get("TERM", "") != "dumb"


class ConsoleReporter(LineReporter):
    """Plain lines: one per decision and per operator action, then the end summary.

    For pipes, files and CI logs; `from_context` picks the live table on a terminal.
    """

    @classmethod
    def from_context(cls, ctx: ReporterContext) -> Reporter:
        if is_terminal(ctx.stream):
            from crucible_core.reporters.console_live import LiveConsoleReporter  # rich loads only here

            return LiveConsoleReporter(ctx.stream, ctx.iterations)
        return cls(ctx.stream, ctx.iterations)


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
