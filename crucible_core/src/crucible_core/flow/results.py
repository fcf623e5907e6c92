"""A run's results as one JSON document: what `crucible results --json` prints and `api.results` returns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crucible_core.flow.model import FlowModel, improvement_pct


def results_document(model: FlowModel) -> dict[str, Any]:
    """The stable JSON shape of a loop's results (documented in docs/cli.md).

    Counted as the console counts: `discarded` includes the `invalid` ones (no valid reading).
    """
    h = model.header
    return {
        "kind": h.kind,  # "loop" here; a playbook's or a plan's document is flow/task_view.py's
        "objective": h.gate,
        "direction": h.direction,
        "baseline": h.baseline,
        "best": h.best,
        "improvement_pct": None if h.improvement_pct is None else round(h.improvement_pct, 3),
        "kept": h.kept,
        "discarded": h.discarded,
        "invalid": h.invalid,
        "outcome": h.outcome,
        "spent_usd": h.spent_usd,
        "rows": [
            {
                "iter": it.iter,
                "decision": it.decision,
                "score": it.score,
                "best": it.best,
                "improvement_pct": _round(improvement_pct(h.baseline, it.score, h.direction)),
                "wide": it.wide,
                "note": it.note,
                "diffstat": it.diffstat,
                "diff": it.diff,
            }
            for it in model.iterations
        ],
    }


def session_document(log: Path) -> dict[str, Any]:
    """The results document of the session log at `log`: a loop's, or a playbook's or plan's tasks."""
    from crucible_core.flow.decode import read_session
    from crucible_core.flow.fold import fold_flow

    model = fold_flow(read_session(log))
    if model.is_task_run:
        from crucible_core.flow.task_view import task_document

        return task_document(model)
    return results_document(model)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
