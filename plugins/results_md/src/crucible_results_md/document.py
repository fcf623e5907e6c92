"""RESULTS.md: a human view of the session log kept up to date in the workspace."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from crucible_core.api import note_with_margin, shown_decision, versus_baseline
from crucible_results_md.chart import baseline_of

if TYPE_CHECKING:
    from crucible_core.api import wire


def _score(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _cell(text: str) -> str:
    """Text as one table cell: no pipe ends it early, no newline breaks the row."""
    return text.replace("|", "\\|").replace("\n", " ").strip()


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
    lines = [render_row(row, baseline, direction) for row in rows]
    return render_page(gate=gate, goal=goal, best=best, chart=chart, row_lines=lines)


def render_page(*, gate: str, goal: str, best: Any, chart: str | None, row_lines: Iterable[str]) -> str:
    """The page around its table's rows, each already rendered by `render_row`."""
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
        "| iter | decision | score | best | vs baseline | note | change |",
        "| ---: | --- | ---: | ---: | ---: | --- | --- |",
        *row_lines,
    ]
    return "\n".join(lines) + "\n"


def render_row(row: wire.RowWire, baseline: float | None, direction: str) -> str:
    """One row of the table: it depends on the row, the run's baseline score and the direction."""
    decision = shown_decision(row.decision, row.valid)
    note = row.note
    if decision == "discard":
        note = note_with_margin(note, score=row.score, best=row.best, margin=row.margin, direction=direction)
    note = note.replace("|", "\\|").replace("\n", " ")
    change = _cell(row.diffstat) or "-"  # the diffstat: a row with no candidate has none
    return (
        f"| {row.iter} | {decision} | {_score(row.score)} | {_score(row.best)} "
        f"| {versus_baseline(baseline, row.score, direction) or '-'} | {note[:160]} | {change[:120]} |"
    )
