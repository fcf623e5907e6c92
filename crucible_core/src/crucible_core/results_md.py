"""RESULTS.md: a human view of the session log kept up to date in the workspace."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from crucible_core import wire


def _score(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def render_results(*, gate: str, goal: str, rows: Iterable[wire.RowWire], best: Any) -> str:
    lines = [
        "# crucible results",
        "",
        f"Objective: {gate}. Best so far: {_score(best)}.",
        "",
        "Goal:",
        "",
        *(f"> {line}" if line else ">" for line in goal.strip().splitlines()),
        "",
        "| iter | decision | score | best | note |",
        "| ---: | --- | ---: | ---: | --- |",
    ]
    for row in rows:
        note = row.note.replace("|", "\\|").replace("\n", " ")
        lines.append(
            f"| {row.iter} | {row.decision} | {_score(row.score)} | {_score(row.best)} | {note[:160]} |"
        )
    return "\n".join(lines) + "\n"
