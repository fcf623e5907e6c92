"""What a run record holds, as pure functions of the session log's events.

One layout for every destination, under the run's folder `<run-id>/`:

    session.jsonl          the session log as written (already redacted)
    summary.json           outcome, best, baseline, iterations, keeps, cost, identity digest
    diffs/iter-<n>.diff    the diff a row carries, one file per row that carries one
    artifacts/<name>       files other plugins add (declared artifacts' uploads)

Everything here comes from the log, which agent- and measure-written text reaches: a diff is
bounded before it is written, and nothing in an event is ever followed or run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

SESSION_LOG = "session.jsonl"
SUMMARY = "summary.json"
DIFFS = "diffs"
ARTIFACTS = "artifacts"
# A row's diff is bounded on the wire already; this bound holds whatever a row carries.
MAX_DIFF_BYTES = 1 << 20
SUMMARY_VERSION = 1


def diff_key(iteration: int) -> str:
    return f"{DIFFS}/iter-{iteration}.diff"


def artifact_key(name: str) -> str:
    return f"{ARTIFACTS}/{name}"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


@attrs.define
class RecordState:
    """What the record says so far, folded from the log's events in order."""

    run_id: str = ""
    gate: str = ""
    outcome: str = "running"  # the shutdown's outcome once written
    reason: str = ""
    baseline: float | None = None
    best: float | None = None
    iterations: int = 0
    keeps: int = 0
    discards: int = 0
    cost: float = 0.0
    identity_digest: str = ""
    kept_shas: list[str] = attrs.field(factory=list)
    diffs: dict[int, str] = attrs.field(factory=dict)  # iteration -> the diff its latest row carries

    def add(self, event: Mapping[str, Any]) -> None:
        """Fold one event; an event of an unexpected shape is skipped, never trusted."""
        kind = event.get("kind")
        if kind == "start":
            self.run_id = str(event.get("run_id") or self.run_id)
            self.gate = str(event.get("gate") or "")
        elif kind == "row" and isinstance(event.get("row"), Mapping):
            self._row(event["row"])
        elif kind == "identity" and isinstance(event.get("identity"), Mapping):
            self.identity_digest = str(event["identity"].get("digest") or "")
        elif kind in ("budget", "summary"):
            spent = _number(event.get("spent"))
            self.cost = spent if spent is not None else self.cost
            if kind == "summary":
                self.best = _number(event.get("best_score")) if "best_score" in event else self.best
        elif kind == "shutdown":
            self.outcome = str(event.get("outcome") or self.outcome)
            self.reason = str(event.get("reason") or "")

    def _row(self, row: Mapping[str, Any]) -> None:
        iteration = row.get("iter")
        if not isinstance(iteration, int) or isinstance(iteration, bool) or iteration < 0:
            return
        decision = str(row.get("decision") or "")
        if iteration == 0:
            self.baseline = _number(row.get("score"))
        else:
            self.iterations = max(self.iterations, iteration)
            self.keeps += decision == "keep"
            self.discards += decision == "discard"
        if decision == "keep" and isinstance(row.get("sha"), str):
            self.kept_shas.append(row["sha"])
        if "best" in row:
            self.best = _number(row.get("best"))
        diff = row.get("diff")
        if isinstance(diff, str) and diff:
            self.diffs[iteration] = diff

    def summary(self) -> dict[str, Any]:
        return {
            "version": SUMMARY_VERSION,
            "run_id": self.run_id,
            "outcome": self.outcome,
            "reason": self.reason,
            "gate": self.gate,
            "baseline": self.baseline,
            "best": self.best,
            "iterations": self.iterations,
            "keeps": self.keeps,
            "discards": self.discards,
            "cost": round(self.cost, 6),
            "identity_digest": self.identity_digest,
            "kept_shas": list(self.kept_shas),
            "diffs": [diff_key(n) for n in sorted(self.diffs)],
        }


def fold_state(events: Iterable[Mapping[str, Any]]) -> RecordState:
    state = RecordState()
    for event in events:
        state.add(event)
    return state


def summary_bytes(state: RecordState) -> bytes:
    return (json.dumps(state.summary(), indent=2, sort_keys=True) + "\n").encode("utf-8")


def diff_bytes(diff: str) -> bytes:
    """A row's diff as its file holds it, cut at MAX_DIFF_BYTES with a marker saying so."""
    data = diff.encode("utf-8", errors="replace")
    if len(data) <= MAX_DIFF_BYTES:
        return data
    cut = data[:MAX_DIFF_BYTES].decode("utf-8", errors="ignore").encode("utf-8")
    return cut + f"\n[... {len(data) - len(cut)} more bytes not recorded]\n".encode()
