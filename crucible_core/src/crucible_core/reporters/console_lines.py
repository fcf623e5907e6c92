"""The console's plain-line reporter: the log's events folded into one view and printed as lines.

The console reporters (console.py) build on it, and so does a plugin's live console
(crucible-plugin-console-rich draws the same lines above its table).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from crucible_core.contract import wire
from crucible_core.contract.plain_text import plain
from crucible_core.reporters.console_text import PRINTED_KINDS, end_lines, event_lines, unicode_ok
from crucible_core.reporters.console_view import FOLDED_KINDS, ConsoleView
from crucible_core.reporters.output import QuietOnClose

# What the plain lines need decoded: the view's kinds, and the kinds a line is printed for. A step
# (four an iteration) only tells a live table which operation runs; no plain line shows it.
_SHOWN_KINDS = (FOLDED_KINDS | PRINTED_KINDS) - {wire.Step.KIND}


class LineReporter:
    """Plain lines: one per decision and per operator action, then the end summary."""

    def __init__(
        self, stream: TextIO, iterations: int | None, clock: Callable[[], float] = time.time
    ) -> None:
        self.stream = stream
        self.output = QuietOnClose(stream)
        self.view = ConsoleView(total=iterations)
        self.clock = clock
        self.unicode = unicode_ok(stream)

    def fold(self, event: Mapping[str, Any]) -> tuple[wire.Line, float] | None:
        """Decode one log object through the wire and fold it; the line and its time, or None."""
        # the log's own object is decoded once for all its observers (wire.from_written)
        line = wire.from_written(event) if type(event) is dict else wire.from_object(dict(event))
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
        if event.get("kind") not in _SHOWN_KINDS:
            # Neither folded nor printed (an agent's text, a turn's start and end): only the
            # view's clock moves, without decoding the event through the wire.
            ts = wire.line_time(event)
            self.view.passed(ts if ts is not None else self.clock())
            return
        folded = self.fold(event)
        if folded is None:
            return
        for text in self.lines_for(*folded):
            self.output.line(plain(text))  # notes carry agent and measure text: plain text only

    def close(self) -> None:
        self.output.flush()
