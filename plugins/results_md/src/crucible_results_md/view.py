"""One loop run's RESULTS.md: the start line's goal and gate, every row so far, rewritten after each row.

Everything on the page comes from the session log as written, so it is already redacted and
plain: the goal and the gate from the run's start line, the rows from the row lines. A resumed
run first folds its log for the rows earlier processes wrote, and rewrites the page at run
start when its segment is already measured (otherwise the owed baseline's row rewrites it).

The chart beside the page is redrawn with the page, but at most once every CHART_EVERY seconds
while rows arrive faster (a scripted proposer's run); the last one is drawn when the run ends,
and a resume draws it afresh. Drawing it takes time in proportion to the rows, so redrawing it
after every row of a fast run cost more than the whole rest of the page.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from crucible_core.api import OwnedFile, wire
from crucible_results_md.chart import RESULTS_CHART_NAME, ChartFold
from crucible_results_md.document import render_page, render_row

if TYPE_CHECKING:
    from crucible_core.api import RunContext

RESULTS_NAME = "RESULTS.md"
CHART_EVERY = 1.0  # seconds: the least time between two drawings of the chart while rows arrive


@attrs.define
class ResultsView:
    workspace: Path
    goal: str
    gate: str
    direction: str  # the judge's, "higher" without one (what the margins and the chart compare by)
    scored: bool  # the start line names a direction only for a scored judge: no chart otherwise
    note: Callable[[str, str], None]  # a note in the session log: (text, level)
    rows: list[wire.RowWire] = attrs.field(factory=list)
    best: float | None = None
    chart_every: float = CHART_EVERY
    clock: Callable[[], float] = time.monotonic
    # The table's rows as rendered, for the baseline they were rendered against: a row's line
    # does not change until a new baseline (a rescope) is measured, so a page of n rows costs
    # one new line to write instead of n.
    _lines: list[str] = attrs.field(factory=list, init=False)
    _lines_baseline: float | None = attrs.field(default=None, init=False)
    # The chart's points (and the latest baseline) for the rows folded so far, likewise one
    # point per new row; `rows` may also be replaced whole (a resume's fold), hence the count.
    _chart: ChartFold | None = attrs.field(default=None, init=False)
    _charted: int = attrs.field(default=0, init=False)
    # The two files, each rewritten in place through the descriptor that made it (OwnedFile).
    _files: dict[str, OwnedFile] = attrs.field(factory=dict, init=False)
    _drawn_at: float = attrs.field(default=-math.inf, init=False)  # when the chart was last drawn
    _chart_owed: bool = attrs.field(default=False, init=False)  # rows since then are not on it

    @classmethod
    def begin(cls, start: Mapping[str, Any], context: RunContext) -> ResultsView:
        """The view of the run whose start line is `start`, with what its log already holds."""
        loaded = context.manifest
        judge = loaded.manifest.judge if loaded is not None else None
        view = cls(
            workspace=context.workspace,
            goal=str(start.get("goal") or ""),
            gate=str(start.get("gate") or ""),
            direction=judge.direction.value if judge is not None else "higher",
            scored=start.get("direction") is not None,
            note=context.note,
        )
        if context.resumed:
            from crucible_core.api import fold_path  # the log's fold loads only for a resume

            try:
                folded = fold_path(context.session_log)
            except OSError as exc:  # core folded it a moment ago; a view must not end the run
                view.note(f"could not read the session log for RESULTS.md: {exc}", "warn")
                return view
            view.rows, view.best = list(folded.rows), folded.best_score
            if folded.segment_baselined:
                view.write()
        return view

    def row(self, event: Mapping[str, Any]) -> None:
        """A row line was written: the page shows it, and the best it recorded, from now on."""
        line = wire.from_written(event)  # decoded once for every observer of the line
        if line is None or not isinstance(line.event, wire.Row):
            return
        row = line.event.row
        self.rows.append(row)
        self.best = row.best
        self.write()

    def _fold(self) -> ChartFold:
        """The chart fold, caught up with `rows`."""
        if self._chart is None or self._charted > len(self.rows):
            self._chart, self._charted = ChartFold(self.direction), 0
        for row in self.rows[self._charted :]:
            self._chart.add(row)
        self._charted = len(self.rows)
        return self._chart

    def _row_lines(self, baseline: float | None) -> list[str]:
        if baseline != self._lines_baseline or len(self._lines) > len(self.rows):
            self._lines, self._lines_baseline = [], baseline
        for row in self.rows[len(self._lines) :]:
            self._lines.append(render_row(row, baseline, self.direction))
        return self._lines

    def write(self) -> None:
        """Rewrite the page, and the chart unless it was drawn less than `chart_every` ago."""
        fold = self._fold()
        now = self.clock()
        draw = self.scored and now - self._drawn_at >= self.chart_every
        text = render_page(
            gate=self.gate,
            goal=self.goal,
            best=self.best,
            chart=RESULTS_CHART_NAME if self.scored else None,
            row_lines=self._row_lines(fold.baseline),
        )
        try:
            if draw:
                self._draw(fold, now)
            self._file(RESULTS_NAME).write(text.encode("utf-8"))
        except OSError as exc:
            self.note(f"could not update RESULTS.md: {exc}", "warn")
        self._chart_owed = self.scored and not draw

    def finish(self) -> None:
        """The run is ending: draw the chart owed since its last drawing, then let the files go."""
        try:
            if self._chart_owed:
                self._chart_owed = False
                self._draw(self._fold(), self.clock())
        except OSError as exc:
            self.note(f"could not update RESULTS.md: {exc}", "warn")
        finally:
            self.close()

    def _draw(self, fold: ChartFold, now: float) -> None:
        self._drawn_at = now
        self._file(RESULTS_CHART_NAME).write(fold.render().encode("utf-8"))

    def _file(self, name: str) -> OwnedFile:
        found = self._files.get(name)
        if found is None:
            found = self._files[name] = OwnedFile(self.workspace / name)
        return found

    def close(self) -> None:
        """The run is over (or another starts in this process): let the files go."""
        for file in self._files.values():
            file.close()
        self._files.clear()
