"""Console reporters: progress for a person as plain lines, or a single closing line when headless.

On a terminal `--ui console` shows a live table instead when a plugin registers one
(`console_choice`); crucible-plugin-console-rich does.
"""

from __future__ import annotations

import os
from typing import Any

from crucible_core.contract import wire
from crucible_core.protocols import Reporter, ReporterContext
from crucible_core.registry import Registry
from crucible_core.reporters.console_lines import LineReporter
from crucible_core.reporters.console_text import headless_line

CONSOLE = "console"  # the `--ui` default: lines for a person, or a plugin's live table on a terminal


def is_terminal(stream: Any) -> bool:
    """A person is watching `stream` on a terminal that can redraw a live table."""
    try:
        tty = bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False
    return tty and os.environ.get("TERM", "") != "dumb"


def console_choice(reporters: Registry[Any], name: str, *, on_terminal: bool) -> str:
    """The reporter `--ui NAME` shows: for `console` on a terminal, a reporter a plugin registered
    with `terminal=True` (the first by name), else NAME itself. With no such plugin installed a
    terminal gets the plain lines: `--ui console` never fails for want of a live table."""
    if name != CONSOLE or not on_terminal:
        return name
    live = sorted(entry.name for entry in reporters if entry.trait("terminal"))
    return live[0] if live else name


class ConsoleReporter(LineReporter):
    """Plain lines: one per decision and per operator action, then the end summary.

    For pipes, files and CI logs, and for a terminal when no live console is installed.
    """

    @classmethod
    def from_context(cls, ctx: ReporterContext) -> Reporter:
        return cls(ctx.stream, ctx.iterations)


class HeadlessReporter(ConsoleReporter):
    """For unattended runs: warnings, errors, and one closing line with the outcome and summary."""

    def lines_for(self, line: wire.Line, at: float) -> list[str]:
        ev = line.event
        if isinstance(ev, wire.Shutdown):
            return [headless_line(self.view)]
        if isinstance(ev, wire.Note) and ev.level in ("warn", "error"):
            return super().lines_for(line, at)
        return []
