"""RESULTS.md: a human view of the session log kept up to date in the workspace."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from crucible_core.contract import wire
from crucible_core.run.results_chart import baseline_of, row_score


def _score(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _improvement(score: float | None, baseline: float | None, direction: str) -> str:
    """Percent better than the baseline (positive is better, whichever way the objective points)."""
    if score is None or baseline is None or baseline == 0:
        return "-"
    gain = (baseline - score) if direction == "lower" else (score - baseline)
    return f"{100.0 * gain / abs(baseline):+.1f}%"


def render_results(
    *,
    gate: str,
    goal: str,
    rows: Iterable[wire.RowWire],
    best: Any,
    direction: str = "higher",
    chart: str | None = None,
) -> str:
    rows = list(rows)
    baseline = baseline_of(rows)
    lines = [
        "# crucible results",
        "",
        f"Objective: {gate}. Best so far: {_score(best)}.",
        "",
        "Goal:",
        "",
        *(f"> {line}" if line else ">" for line in goal.strip().splitlines()),
        "",
    ]
    if chart:
        lines += [f"![score by iteration]({chart})", ""]
    lines += [
        "| iter | decision | score | best | vs baseline | note |",
        "| ---: | --- | ---: | ---: | ---: | --- |",
    ]
    for row in rows:
        note = row.note.replace("|", "\\|").replace("\n", " ")
        lines.append(
            f"| {row.iter} | {row.decision} | {_score(row.score)} | {_score(row.best)} "
            f"| {_improvement(row_score(row), baseline, direction)} | {note[:160]} |"
        )
    return "\n".join(lines) + "\n"
