"""Folding a session log into the state a resumed run continues from: pure functions, one pass.

The fold is on the hot path of `--resume` for long runs, so it is one loop with local
variables and a kind dispatch ordered by frequency; it keeps references to the row events it
already decoded instead of copying them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs

# Phases in which the loop idles and the budget clock stops.
PARKED_PHASES = frozenset({"parked", "paused", "distressed"})


@attrs.define
class Folded:
    """What the session log says about a run, as of its last decodable line."""

    events: int = 0
    start: dict[str, Any] | None = None  # the first start event: the run's original budget
    identity: dict[str, Any] | None = None  # the first identity event: what scores compare against
    trailing_shutdown: dict[str, Any] | None = None  # only when it is the last event
    last_kind: str | None = None
    # the open segment (a rescope replaces all of these together)
    segment_index: int = -1
    regime: str = ""
    fingerprint: str | None = None
    best_token: str | None = None
    baseline_score: float | None = None
    baseline_total: float | None = None
    best_score: float | None = None
    best_tiebreak: float | None = None
    segment_baselined: bool = False
    # progress
    iteration: int = 0
    kept: int = 0
    discarded: int = 0
    solved: bool = False
    kept_shas: list[str] = attrs.field(factory=list)
    rows: list[dict[str, Any]] = attrs.field(factory=list)
    spent: float = 0.0
    active_s: float = 0.0
    parked_s: float = 0.0
    # where the predecessor was when its log ended
    last_phase: str | None = None
    last_phase_iter: int = 0
    last_step: str | None = None
    last_step_iter: int = 0
    row_after_step: bool = True
    open_wait: dict[str, Any] | None = None  # an approval_wait with no approval_resolved after it
    open_wait_parked_s: float = 0.0  # how long the run parked on that wait (what --max-park bounds)
    escalation: dict[str, Any] | None = None


def fold_events(events: Iterable[dict[str, Any]]) -> Folded:
    """One pass over decoded events; the caller decides how lines are read and skipped."""
    f = Folded()
    rows = f.rows
    kept_shas = f.kept_shas
    count = 0
    kind = None
    iteration = kept = discarded = 0
    solved = False
    best_token = None
    last_step = None
    last_step_iter = 0
    row_after_step = True
    # active time: the cumulative figure of the latest budget event plus the wall-clock since,
    # restarted at each process start (the gap between processes is not active time)
    mark_active = 0.0
    mark_ts: float | None = None
    last_ts: float | None = None
    spent_mark = 0.0
    spent_since = 0.0
    parked_s = 0.0
    park_since: float | None = None
    # the open wait's parked seconds: park stretches from a parked phase to the next phase, or
    # to the last line its process wrote (a killed process's park ends where its log does)
    wait_parked = 0.0
    wait_park_since: float | None = None
    open_wait: dict[str, Any] | None = None
    last_shutdown: dict[str, Any] | None = None
    for ev in events:
        count += 1
        kind = ev.get("kind")
        ts = ev.get("ts")
        if kind == "row":
            rows.append(ev)
            it = ev.get("iter") or 0
            verdict = ev.get("verdict")
            snap = ev.get("snapshot")
            if verdict == "keep":
                if it > 0:
                    kept += 1
                if snap:
                    best_token = snap
                sha = ev.get("sha")
                if sha:
                    kept_shas.append(sha)
                if ev.get("solved"):
                    solved = True
                f.best_score = ev.get("best")
                f.best_tiebreak = ev.get("best_tiebreak")
            elif verdict == "discard":
                if it > 0:
                    discarded += 1
            else:  # baseline, baseline-skipped, invalid: the segment's first measurement
                f.segment_baselined = True
                if snap:
                    best_token = snap
                f.baseline_score = ev.get("baseline")
                f.baseline_total = ev.get("baseline_total")
                f.best_score = ev.get("best")
                f.best_tiebreak = ev.get("best_tiebreak")
                if ev.get("solved") and verdict == "baseline":
                    solved = True
            if it > iteration:
                iteration = it
            row_after_step = True
        elif kind == "budget":
            spent_mark = ev.get("spent") or 0.0
            spent_since = 0.0
            mark_active = ev.get("active_s") or 0.0
            parked_s = ev.get("parked_s") or 0.0
            mark_ts = ts
            # a park's closing budget event already counts it: the next phase must not again
            park_since = None
        elif kind == "step":
            last_step = ev.get("step")
            last_step_iter = ev.get("iter") or 0
            row_after_step = False
        elif kind == "phase":
            phase = ev.get("phase")
            f.last_phase = phase
            f.last_phase_iter = ev.get("iter") or 0
            if wait_park_since is not None and ts is not None:
                wait_parked += ts - wait_park_since
                wait_park_since = None
            if phase in PARKED_PHASES:
                park_since = ts
                if open_wait is not None:
                    wait_park_since = ts
            elif park_since is not None and ts is not None:
                parked_s += ts - park_since
                park_since = None
        elif kind == "turn":
            spent_since += ev.get("cost") or 0.0
        elif kind == "segment":
            f.segment_index = ev.get("index", f.segment_index + 1)
            f.regime = ev.get("regime") or ""
            f.fingerprint = ev.get("fingerprint")
            best_token = ev.get("snapshot")
            f.baseline_score = f.baseline_total = f.best_score = f.best_tiebreak = None
            f.segment_baselined = False
        elif kind == "start":
            if f.start is None:
                f.start = ev
            if mark_ts is not None and last_ts is not None:
                mark_active += max(0.0, (park_since if park_since is not None else last_ts) - mark_ts)
            if park_since is not None and last_ts is not None:
                parked_s += last_ts - park_since  # a process killed while parked: parked to its last line
            mark_ts = ts
            park_since = None
            if wait_park_since is not None and last_ts is not None:
                wait_parked += last_ts - wait_park_since
                wait_park_since = None
        elif kind == "identity":
            if f.identity is None:
                f.identity = ev
        elif kind == "approval_wait":
            open_wait = ev
            wait_parked = 0.0
            wait_park_since = None
        elif kind == "approval_resolved":
            open_wait = None
            wait_park_since = None
        elif kind == "escalation":
            f.escalation = ev
        elif kind == "shutdown":
            last_shutdown = ev
        if ts is not None:
            last_ts = ts
    f.events = count
    f.last_kind = kind
    f.trailing_shutdown = last_shutdown if kind == "shutdown" else None
    f.iteration = iteration
    f.kept = kept
    f.discarded = discarded
    f.solved = solved
    f.best_token = best_token
    f.last_step = last_step
    f.last_step_iter = last_step_iter
    f.row_after_step = row_after_step
    f.spent = spent_mark + spent_since
    end = park_since if park_since is not None else last_ts
    f.active_s = mark_active + (max(0.0, end - mark_ts) if mark_ts is not None and end is not None else 0.0)
    if park_since is not None and last_ts is not None:
        parked_s += last_ts - park_since
    f.parked_s = parked_s
    f.open_wait = open_wait
    if open_wait is not None:
        if wait_park_since is not None and last_ts is not None:
            wait_parked += last_ts - wait_park_since
        f.open_wait_parked_s = wait_parked
    return f


def decode_lines(lines: Iterable[bytes]) -> Iterable[dict[str, Any]]:
    """Decodable events of NDJSON lines; blank, torn and foreign lines are skipped."""
    loads = json.loads
    for raw in lines:
        try:
            event = loads(raw)
        except ValueError:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors
            continue
        if type(event) is dict and "kind" in event:
            yield event


def fold_path(path: Path) -> Folded:
    """Fold the session log at `path` (an absent file folds to an empty run)."""
    try:
        with open(path, "rb") as handle:
            return fold_events(decode_lines(handle))
    except FileNotFoundError:
        return Folded()
