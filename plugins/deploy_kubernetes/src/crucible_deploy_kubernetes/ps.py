"""`crucible ps`: one row per crucible pod, built by pure functions from the pod and its log tail."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import attrs

from crucible_core.api import wire
from crucible_deploy_kubernetes import labels as L

LOG_TAIL_LINES = 400


@attrs.frozen
class PodRow:
    name: str
    namespace: str
    run: str
    mode: str
    phase: str
    age: str
    restarts: int
    iteration: str | None  # "3/10", or None when unknown
    best: str | None
    outcome: str | None  # the shutdown line's outcome once the run ended

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class Progress:
    iteration: int | None = None
    best: Any = None
    outcome: str | None = None


def progress_from_log(lines: Iterable[str]) -> Progress:
    """The latest iteration, best score and outcome the session events in a log tail show.

    Lines after the session delimiter repeat the log, so reading stops there.
    """
    iteration: int | None = None
    best: Any = None
    outcome: str | None = None
    for line in lines:
        if line.startswith(L.SESSION_DELIMITER):
            break
        decoded = wire.decode_line(line)  # read through the session wire; other lines are skipped
        if decoded is None:
            continue
        event = decoded.event
        if isinstance(event, wire.Row) and event.row.deep:
            row = event.row
            iteration = row.iter
            if row.best is not None:
                best = row.best
            elif row.decision == "keep" and row.score is not None:  # a crucible-written row
                best = row.score
        elif isinstance(event, wire.Summary) and event.best_score is not None:
            best = event.best_score
        elif isinstance(event, wire.Shutdown):
            outcome = event.outcome
    return Progress(iteration, best, outcome)


def format_age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _num(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def row_for(pod: Any, progress: Progress, now: datetime) -> PodRow:
    meta = pod.metadata
    labels: Mapping[str, str] = meta.labels or {}
    annotations: Mapping[str, str] = meta.annotations or {}
    status = pod.status
    created = meta.creation_timestamp
    age = format_age((now - created).total_seconds()) if created else "-"
    restarts = sum(c.restart_count or 0 for c in (status.container_statuses or [])) if status else 0
    iteration = annotations.get(L.ITER_ANNOTATION)
    if iteration is None and progress.iteration is not None:
        iteration = str(progress.iteration)
    total = annotations.get(L.ITERATIONS_ANNOTATION)
    if iteration is not None and total and "/" not in iteration:
        iteration = f"{iteration}/{total}"
    best = annotations.get(L.BEST_ANNOTATION)
    if best is None and progress.best is not None:
        best = _num(progress.best)
    return PodRow(
        name=meta.name or "",
        namespace=meta.namespace or "",
        run=labels.get(L.RUN_LABEL, "-"),
        mode=labels.get(L.MODE_LABEL, "-"),
        phase=(status.phase if status else None) or "Unknown",
        age=age,
        restarts=restarts,
        iteration=iteration,
        best=best,
        outcome=progress.outcome,
    )


def format_table(rows: list[PodRow]) -> str:
    headers = ("NAME", "NAMESPACE", "MODE", "PHASE", "AGE", "RESTARTS", "ITER", "BEST", "OUTCOME")
    cells = [
        (
            r.name,
            r.namespace,
            r.mode,
            r.phase,
            r.age,
            str(r.restarts),
            r.iteration or "-",
            r.best or "-",
            r.outcome or "-",
        )
        for r in rows
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(headers)]
    lines = [
        "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in [headers, *cells]
    ]
    return "\n".join(lines) + "\n"


def collect(api: Any, namespace: str | None) -> list[PodRow]:
    from crucible_deploy_kubernetes import cluster

    pods = cluster.list_pods(api, namespace, L.MANAGED_BY_SELECTOR)
    now = datetime.now(UTC)
    rows = []
    for pod in sorted(pods, key=lambda p: (p.metadata.namespace or "", p.metadata.name or "")):
        progress = Progress()
        annotations = pod.metadata.annotations or {}
        has_progress = L.ITER_ANNOTATION in annotations and L.BEST_ANNOTATION in annotations
        started = pod.status is not None and pod.status.phase in ("Running", "Succeeded", "Failed")
        if not has_progress and started:
            try:
                lines = cluster.log_tail(api, pod.metadata.namespace, pod.metadata.name, LOG_TAIL_LINES)
            except Exception:  # a log that cannot be read leaves the columns at "-"
                lines = []
            progress = progress_from_log(lines)
        rows.append(row_for(pod, progress, now))
    return rows
