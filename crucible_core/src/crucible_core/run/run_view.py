"""An offline view of one run, from its folded session log: what `crucible show` prints (pure)."""

from __future__ import annotations

from typing import Any

from crucible_core.contract import wire
from crucible_core.contract.decide import shown_decision
from crucible_core.contract.fold import Folded
from crucible_core.contract.plain_text import plain


def _best(f: Folded) -> float | None:
    # the fold's best follows every keep row, even past the last summary (a resumed run that died)
    return f.best_score if f.best_score is not None else f.summary_best


def row_view(row: wire.RowWire) -> dict[str, Any]:
    # every view's word for a discard without a valid reading is `invalid` (contract/decide.py)
    decision = shown_decision(row.decision, row.valid)
    view: dict[str, Any] = {"iter": row.iter, "decision": decision, "score": row.score, "note": row.note}
    if row.phase:
        view["phase"] = row.phase
    if row.kept_snap:
        view["kept_snap"] = row.kept_snap
    # the candidate's change: a log written before rows carried it (or a row with no candidate) has none
    if row.diffstat:
        view["diffstat"] = row.diffstat
    if row.diff:
        view["diff"] = row.diff
    return view


def run_view(f: Folded) -> dict[str, Any]:
    """The run as one JSON object: scores, counters, spend, outcome, resumes and every row."""
    deep = [r for r in f.rows if r.deep]
    start = f.start
    return {
        "gate": start.gate if start is not None else None,
        "best_score": _best(f),
        "baseline_score": f.baseline_score,
        "iterations": max((r.iter for r in deep), default=0),
        "kept": sum(1 for r in deep if r.decision == "keep"),
        "spent": round(f.spent, 6),
        "outcome": f.outcome,
        "resumes": f.resumes,
        "recoveries": [{"class": r.cls.value, "iter": r.iter, "detail": r.detail} for r in f.recoveries],
        "identity": f.identity.identity.digest if f.identity is not None else None,
        "plan": (
            {
                "plan_version": f.plan.plan_version,
                "tasks": [t.name for t in f.plan.tasks],
                "results": {name: r.status for name, r in f.plan_results.items()},
            }
            if f.plan is not None
            else None
        ),
        "unknown_events": f.unknown,
        "rows": [row_view(r) for r in f.rows],
    }


def _num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _recovery_text(recovery: dict[str, Any]) -> str:
    if recovery["class"] == wire.RecoveryClass.CLEAN_EXIT.value:
        return f"{recovery['class']} ({plain(recovery['detail'] or '')[:100]})"
    return f"{recovery['class']} at iteration {recovery['iter']}"


def render_text(view: dict[str, Any]) -> str:
    lines = []
    for row in view["rows"]:
        phase = f" [{row['phase']}]" if row.get("phase") else ""
        note = plain(row.get("note") or "")[:100]  # agent and measure text: no escapes reach a terminal
        lines.append(
            f"iter {row['iter']:>4}  {row['decision']:<16} score {_num(row['score']):>10}{phase}  {note}"
        )
        if row.get("diffstat"):
            lines.append(f"{'':>11}{plain(row['diffstat'])[:100]}")
    lines.append(
        f"best {_num(view['best_score'])} (baseline {_num(view['baseline_score'])}); "
        f"{view['kept']} kept over {view['iterations']} iterations; spent ${view['spent']:.4f}"
    )
    outcome = view["outcome"] or "none yet (the run is live, or died without a shutdown line)"
    lines.append(f"outcome: {outcome}")
    recoveries = view["recoveries"]
    lines.append(
        f"resumed {view['resumes']} time(s)"
        + (": " + ", ".join(_recovery_text(r) for r in recoveries) if recoveries else "")
    )
    if view.get("plan"):
        plan = view["plan"]
        lines.append(
            f"plan v{plan['plan_version']}: {len(plan['results'])}/{len(plan['tasks'])} tasks resulted"
        )
    return "\n".join(lines)
