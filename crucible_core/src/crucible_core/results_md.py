"""RESULTS.md: a human view of the session log kept up to date in the workspace."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def _score(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def render_results(*, gate: str, goal: str, rows: Iterable[Mapping[str, Any]], best: Any) -> str:
    lines = [
        "# crucible results",
        "",
        f"Objective: {gate}. Best so far: {_score(best)}.",
        "",
        "Goal:",
        "",
        *(f"> {line}" if line else ">" for line in goal.strip().splitlines()),
        "",
        "| iter | verdict | score | best | note |",
        "| ---: | --- | ---: | ---: | --- |",
    ]
    for row in rows:
        note = str(row.get("note") or "").replace("|", "\\|").replace("\n", " ")
        lines.append(
            f"| {row.get('iter')} | {row.get('verdict')} | {_score(row.get('score'))} "
            f"| {_score(row.get('best'))} | {note[:160]} |"
        )
    return "\n".join(lines) + "\n"
