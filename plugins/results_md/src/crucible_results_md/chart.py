"""The score chart beside RESULTS.md (RESULTS-score.svg), drawn from the run's rows by score_chart."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

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


def render_results_chart(rows: Iterable[Any], *, direction: str) -> str:
    rows = list(rows)
    points: list[ChartPoint] = []
    best = None
    for row in rows:
        decision, score = row_decision(row), row_score(row)
        if decision == "baseline":
            best = score
            continue
        if decision == "keep" and score is not None and _better(score, best, direction):
            best = score
        valid = _field(row, "valid")
        shown = shown_decision(decision, valid if isinstance(valid, bool) else None)
        points.append(ChartPoint(int(_field(row, "iter") or 0), score, shown, best))
    return render_score_chart(points, baseline=baseline_of(rows), direction=direction)
