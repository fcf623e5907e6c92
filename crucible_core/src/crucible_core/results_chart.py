"""The score chart beside RESULTS.md (RESULTS-score.svg), drawn from the run's rows by score_chart."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from crucible_core.score_chart import ChartPoint, render_score_chart

RESULTS_CHART_NAME = "RESULTS-score.svg"


def row_fields(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """A row event's own fields, whether nested under "row" (crucible's wire shape) or flat."""
    nested = row.get("row")
    return nested if isinstance(nested, Mapping) else row


def row_decision(row: Mapping[str, Any]) -> str:
    fields = row_fields(row)
    return str(fields.get("decision") or fields.get("verdict") or "")


def row_score(row: Mapping[str, Any]) -> float | None:
    score = row_fields(row).get("score")
    return float(score) if isinstance(score, int | float) and not isinstance(score, bool) else None


def baseline_of(rows: Iterable[Mapping[str, Any]]) -> float | None:
    """The latest baseline row's score (a rescope measures a new one)."""
    baseline = None
    for row in rows:
        if row_decision(row) == "baseline":
            baseline = row_score(row)
    return baseline


def _better(value: float, than: float | None, direction: str) -> bool:
    return than is None or (value < than if direction == "lower" else value > than)


def render_results_chart(rows: Iterable[Mapping[str, Any]], *, direction: str) -> str:
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
        points.append(ChartPoint(int(row_fields(row).get("iter") or 0), score, decision, best))
    return render_score_chart(points, baseline=baseline_of(rows), direction=direction)
