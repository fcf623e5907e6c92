"""The score chart beside RESULTS.md (RESULTS-score.svg), drawn from the run's rows by score_chart."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from crucible_core.api import shown_decision
from crucible_results_md.score_chart import ChartPoint, render_score_chart

RESULTS_CHART_NAME = "RESULTS-score.svg"


def _field(row: Any, name: str) -> Any:
    """A row's field, whether the row is a record (wire.RowWire), a row event or a flat mapping."""
    if isinstance(row, Mapping):
        nested = row.get("row")
        return (nested if isinstance(nested, Mapping) else row).get(name)
    return getattr(row, name, None)


def row_decision(row: Any) -> str:
    return str(_field(row, "decision") or _field(row, "verdict") or "")


def row_score(row: Any) -> float | None:
    score = _field(row, "score")
    return float(score) if isinstance(score, int | float) and not isinstance(score, bool) else None


def baseline_of(rows: Iterable[Any]) -> float | None:
    """The latest baseline row's score (a rescope measures a new one)."""
    baseline = None
    for row in rows:
        if row_decision(row) == "baseline":
            baseline = row_score(row)
    return baseline


def _better(value: float, than: float | None, direction: str) -> bool:
    return than is None or (value < than if direction == "lower" else value > than)


@attrs.define
class ChartFold:
    """The chart's points folded row by row: adding a row costs one point, not a walk of every row.

    RESULTS.md is rewritten after each row; walking all n rows each time made a long run's
    page cost O(n) per row before the SVG was even drawn.
    """

    direction: str
    points: list[ChartPoint] = attrs.field(factory=list)
    baseline: float | None = None  # the latest baseline row's score (a rescope measures a new one)
    best: float | None = None  # the best kept score since that baseline, as the step line draws it

    def add(self, row: Any) -> None:
        decision, score = row_decision(row), row_score(row)
        if decision == "baseline":
            self.baseline = self.best = score
            return
        if decision == "keep" and score is not None and _better(score, self.best, self.direction):
            self.best = score
        valid = _field(row, "valid")
        shown = shown_decision(decision, valid if isinstance(valid, bool) else None)
        self.points.append(ChartPoint(int(_field(row, "iter") or 0), score, shown, self.best))

    def render(self) -> str:
        return render_score_chart(self.points, baseline=self.baseline, direction=self.direction)


def render_results_chart(rows: Iterable[Any], *, direction: str) -> str:
    fold = ChartFold(direction)
    for row in rows:
        fold.add(row)
    return fold.render()
