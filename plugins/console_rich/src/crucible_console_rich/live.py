"""The live console on a terminal: a redrawn table of progress, best, elapsed and ETA under the
run's lines (rich). Imported only when a run shows it, so `crucible --help` never loads rich."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from rich.console import Console, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from crucible_core.api import (
    ConsoleReporter,
    ConsoleView,
    counted,
    improvement_pct,
    plain,
    row_label,
    short_duration,
    show_number,
    wire,
)

# how a printed line is coloured, by what it says
_ROW_STYLES = {"keep": "green", "baseline": "cyan", "invalid": "yellow", "discard": "dim"}
_TASK_STYLES = {
    "pass": "green",
    "fail": "red",
    "transport": "red",
    "blocked": "yellow",
    "truncated": "yellow",
}
_PHASE_WORDS = {"paused": "paused", "parked": "waiting for approval", "distressed": "suspended (distress)"}


def task_table(view: ConsoleView, at: float) -> Table:
    """A playbook's or a plan's live table: how many tasks settled and how, elapsed and spent."""
    table = Table(box=None, pad_edge=False, padding=(0, 2), header_style="bold")
    for name in ("tasks", "progress", "settled", "elapsed", "spent"):
        table.add_column(name, no_wrap=True)
    statuses = view.statuses()
    settled = [status for status in statuses if status != "pending"]
    spent = f"${view.spent:.2f}" + (f" of ${view.max_cost:.2f}" if view.max_cost is not None else "")
    table.add_row(
        Text(f"{len(settled)}/{len(statuses)} {_PHASE_WORDS.get(view.phase, '')}".strip()),
        ProgressBar(total=max(1, len(statuses)), completed=len(settled), width=24),
        Text(plain(counted(settled)) or "-"),
        Text(short_duration(view.elapsed(at))),
        Text(spent),
    )
    return table


def status_table(view: ConsoleView, at: float) -> Table:
    """The live table: one row of where the run stands at wall-clock time `at`."""
    if view.is_task_run:
        return task_table(view, at)
    table = Table(box=None, pad_edge=False, padding=(0, 2), header_style="bold")
    for name in ("iteration", "progress", "best", "kept", "elapsed", "ETA", "spent"):
        table.add_column(name, no_wrap=True)
    total = view.total
    current = view.current if view.current is not None else view.iteration
    where = f"{current}/{total}" if total else str(current)
    doing = _PHASE_WORDS.get(view.phase) or view.step or view.phase
    progress: RenderableType = (
        ProgressBar(total=total, completed=min(view.iteration, total), width=24) if total else Text("-")
    )
    gain = improvement_pct(view.baseline, view.best, view.direction or "higher")
    best = f"{show_number(view.best)} (baseline {show_number(view.baseline)}" + (
        f", {gain:+.1f}%)" if gain is not None else ")"
    )
    kept = f"{view.kept} of {view.kept + view.discarded}" + (
        f", {view.invalid} invalid" if view.invalid else ""
    )
    eta = view.eta(at)
    spent = f"${view.spent:.2f}" + (f" of ${view.max_cost:.2f}" if view.max_cost is not None else "")
    table.add_row(
        Text(f"{where} {plain(doing)}".strip()),
        progress,
        Text(best),
        Text(kept),
        Text(short_duration(view.elapsed(at))),
        Text(short_duration(eta) if eta is not None else "-"),
        Text(spent),
    )
    return table


def line_style(line: wire.Line) -> str:
    ev = line.event
    if isinstance(ev, wire.Row):
        return _ROW_STYLES.get(row_label(ev.row), "")
    if isinstance(ev, wire.TaskResult):
        return _TASK_STYLES.get(ev.status, "dim")
    if isinstance(ev, wire.Note):
        return {"warn": "yellow", "error": "bold red"}.get(ev.level or "", "")
    if isinstance(ev, wire.Phase | wire.ApprovalWait | wire.Escalation):
        return "magenta"
    return ""


class LiveConsoleReporter(ConsoleReporter):
    """The plain console's lines, printed above a live table that redraws twice a second."""

    def __init__(
        self,
        stream: TextIO,
        iterations: int | None,
        clock: Callable[[], float] = time.time,
        *,
        console: Console | None = None,
        auto_refresh: bool = True,
    ) -> None:
        super().__init__(stream, iterations, clock)
        self.console = console or Console(file=stream, highlight=False, markup=False, emoji=False)
        self.unicode = self.console.encoding.lower().startswith("utf")
        self.live = Live(
            console=self.console,
            get_renderable=lambda: status_table(self.view, self.clock()),
            auto_refresh=auto_refresh,
            refresh_per_second=2,
            transient=True,  # the table goes at the end; the lines and the summary stay
            redirect_stdout=False,
            redirect_stderr=True,  # a line the run writes to stderr lands above the table
        )
        self.live_started = False
        self.closed = False

    def on_event(self, event: Mapping[str, Any]) -> None:
        if self.closed:
            return
        folded = self.fold(event)
        if folded is None:
            return
        line, at = folded
        if isinstance(line.event, wire.Shutdown):
            self._stop()
        elif not self.live_started:
            self.live.start()
            self.live_started = True
        style = line_style(line)
        try:
            for text in self.lines_for(line, at):
                self.console.print(Text(plain(text), style=style), soft_wrap=True)
            if self.live_started:
                self.live.refresh()
        except (OSError, ValueError):  # the terminal went away: the run goes on unwatched
            self._stop()
            self.closed = True

    def _stop(self) -> None:
        if self.live_started:
            self.live_started = False
            try:
                self.live.stop()
            except (OSError, ValueError):
                self.closed = True

    def close(self) -> None:
        self._stop()
