"""Folding a session log for --resume, and classifying how the predecessor ended."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crucible_core.contract.fold import fold_objects as fold_events
from crucible_core.contract.fold import fold_path
from crucible_core.contract.recovery import RecoveryClass, classify
from crucible_core.errors import ResumeConflict
from crucible_core.manifest.paths import RunPaths
from crucible_core.run.resume import refuse_disagreeing_log

START = {
    "goal": "g",
    "gate": "score",
    "model": "",
    "namespace": "",
    "iters_total": 6,
    "max_cost": 0.0,
    "max_secs": 0,
}
IDENTITY = {
    "components": [{"name": "", "repo": ".", "base_sha": "b0"}],
    "manifest_hash": "m",
    "inject_hash": "i",
    "seed_hash": "",
    "measure_cmd": "./measure.sh",
    "direction": "higher",
    "rig": {"def_ref": "", "backend_name": "", "backend_version": ""},
    "digest": "v2:0000000000000000",
}


def ev(kind: str, ts: float = 0.0, **fields: Any) -> dict[str, Any]:
    if kind == "start":
        fields = {**START, **fields}
    if kind == "note":
        fields = {"msg": "", **fields}
    if kind == "budget":
        fields = {"elapsed_secs": int(fields.get("active_s", 0)), **fields}
    return {"v": 1, "kind": kind, "ts": ts, **fields}


def row(it: int, verdict: str, score: float, best: float, **extra: Any) -> dict[str, Any]:
    snapshot = extra.pop("snapshot", None)
    body = {
        "iter": it,
        "decision": verdict,
        "note": "",
        "detail": "",
        "score": score,
        "best": best,
        "baseline": 0.0,
    }
    body.update({k: v for k, v in extra.items() if v is not None})
    if snapshot:
        body["kept_snap"] = snapshot
    return ev("row", row=body, solved=False)


def head() -> list[dict[str, Any]]:
    return [
        ev("start", 100.0, budget={"iterations": 6, "max_cost": None, "max_time": None}),
        ev("identity", 100.1, identity=IDENTITY, base_commit="b0"),
        ev("segment", 100.2, index=0, regime="", fingerprint="fp:0", snapshot="tok0"),
        ev("phase", 100.2, phase="baseline", iter=0),
        ev("step", 100.2, step="measure", iter=0),
        row(0, "baseline", 0.0, 0.0, snapshot="tok0"),
        ev("budget", 101.0, iterations_done=0, spent=0.0, active_s=1.0, parked_s=0.0),
    ]


def iteration(it: int, keep: bool, ts: float) -> list[dict[str, Any]]:
    best = float(it) if keep else float(it - 1)
    return [
        ev("phase", ts, phase="iteration", iter=it),
        ev("step", ts, step="propose", iter=it),
        ev("turn", ts, iter=it, ok=True, cost=0.5),
        ev("step", ts, step="apply", iter=it),
        ev("step", ts, step="measure", iter=it),
        ev("step", ts, step="decide", iter=it),
        row(
            it,
            "keep" if keep else "discard",
            float(it),
            best,
            sha=f"sha{it}" if keep else None,
            snapshot=f"tok{it}" if keep else None,
        ),
        ev("budget", ts + 1, iterations_done=it, spent=0.5 * it, active_s=ts + 1 - 100.0, parked_s=0.0),
    ]


def test_fold_carries_rows_best_shas_and_spend() -> None:
    log = head() + iteration(1, True, 102) + iteration(2, False, 104) + iteration(3, True, 106)
    f = fold_events(log)
    assert (f.iteration, f.kept, f.discarded) == (3, 2, 1)
    assert f.kept_shas == ["sha1", "sha3"]
    assert f.best_token == "tok3" and f.best_score == 3.0 and f.baseline_score == 0.0
    assert f.spent == 1.5 and f.fingerprint == "fp:0"
    assert len(f.rows) == 4
    assert classify(f).cls is RecoveryClass.DIED_BETWEEN_ITERATIONS


def test_a_dead_turn_keeps_its_cost_and_classifies_mid_turn() -> None:
    log = head() + iteration(1, True, 102) + iteration(2, True, 104)[:3]
    f = fold_events(log)
    assert f.iteration == 1 and f.best_token == "tok1"
    assert f.spent == 1.0  # the budget's 0.5 plus the dead turn's 0.5
    rec = classify(f)
    assert (rec.cls, rec.iter) == (RecoveryClass.DIED_MID_TURN, 2)


def test_classes_of_each_tail() -> None:
    assert classify(fold_events(head()[:3])).cls is RecoveryClass.DIED_IN_BASELINE
    assert classify(fold_events(head()[:2])).cls is RecoveryClass.DIED_IN_BASELINE
    deciding = head() + iteration(1, True, 102)[:6]
    assert classify(fold_events(deciding)).cls is RecoveryClass.DIED_DECIDING
    measuring = head() + iteration(1, True, 102)[:5]
    assert "measure" in classify(fold_events(measuring)).detail
    parked = [
        *head(),
        *iteration(1, True, 102),
        ev("approval_wait", 103.5, handle="h", trace_id="t", mode="block"),
        ev("phase", 104, phase="parked", iter=1),
    ]
    f = fold_events(parked)
    assert classify(f).cls is RecoveryClass.DIED_AWAITING_APPROVAL
    assert f.open_wait is not None and f.open_wait["handle"] == "h"
    clean = [
        *head(),
        ev("summary", 102, rows=[], gate="score", best_score=0.0),
        ev("finished", 102),
        ev("shutdown", 102, outcome="solved", reason="x"),
    ]
    assert classify(fold_events(clean)).cls is RecoveryClass.CLEAN_EXIT
    # a shutdown followed by more events belongs to an earlier process: not a clean exit
    later = [*clean, ev("start", 200.0), ev("phase", 200.1, phase="iteration", iter=1)]
    assert classify(fold_events(later)).cls is not RecoveryClass.CLEAN_EXIT


def test_active_time_excludes_the_gap_between_processes_and_parks() -> None:
    first = head() + iteration(1, True, 102)  # budget says 3.0s active at ts 103
    gap = [ev("note", 110.0, msg="last words")]  # died 7s later
    second = [ev("start", 1000.0), ev("phase", 1002.0, phase="parked", iter=1), ev("note", 1050.0)]
    f = fold_events(first + gap + second)
    assert f.active_s == 3.0 + 7.0 + 2.0
    assert f.parked_s == 48.0


def test_a_rescope_opens_a_fresh_segment() -> None:
    log = [
        *head(),
        *iteration(1, True, 102),
        ev("segment", 104, index=1, regime="c=48", fingerprint="fp:1", snapshot="tok1"),
    ]
    f = fold_events(log)
    assert (f.segment_index, f.regime, f.fingerprint, f.best_score) == (1, "c=48", "fp:1", None)
    assert classify(f).cls is RecoveryClass.DIED_IN_BASELINE
    f = fold_events([*log, row(1, "baseline", 7.0, 7.0, snapshot="tok1")])
    assert f.baseline_score is not None and f.best_score == 7.0 and f.iteration == 1 and f.kept == 1


@pytest.mark.leaves_open_log("it writes torn and blank lines to fold")
def test_torn_and_blank_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    lines = [json.dumps(e) for e in head() + iteration(1, True, 102)]
    path.write_text("\n".join(lines) + "\n\n" + lines[-1][: len(lines[-1]) // 2], encoding="utf-8")
    f = fold_path(path)
    assert f.events == len(lines)
    assert f.kept_shas == ["sha1"]
    assert fold_path(tmp_path / "absent.jsonl").events == 0


def test_a_park_closed_by_its_budget_event_is_counted_once() -> None:
    log = [
        *head(),
        ev("phase", 102.0, phase="parked", iter=0),
        # the park's own closing budget event already holds its 5 s
        ev("budget", 107.0, iterations_done=0, spent=0.0, active_s=2.0, parked_s=5.0),
        ev("phase", 107.0, phase="iteration", iter=1),
        ev("note", 108.0),
    ]
    f = fold_events(log)
    assert f.parked_s == 5.0
    assert f.active_s == 3.0


def test_only_a_resumes_identity_line_says_setup_finished_when_the_segment_is_unreadable(
    tmp_path: Path,
) -> None:
    paths = RunPaths(tmp_path, tmp_path / "workspace", tmp_path / "state", tmp_path / "STEER.md")
    # a first process writes its identity before the baseline snapshot and the segment line
    killed_in_setup = [ev("start", 100.0), ev("identity", 100.1, identity=IDENTITY, base_commit="b0")]
    folded = fold_events(killed_in_setup)
    assert folded.fingerprint is None and not folded.resumed_identity
    refuse_disagreeing_log(folded, paths)  # nothing kept: setup may run again
    # a resume writes one only after reading a segment line: this log lost its segment
    resumed = [*killed_in_setup, ev("identity", 200.0, identity=IDENTITY, base_commit="b0", resumed=True)]
    with pytest.raises(ResumeConflict, match="an identity line a resume wrote"):
        refuse_disagreeing_log(fold_events(resumed), paths)


@pytest.mark.parametrize("enabled", [True, False])
def test_the_cyclic_collector_never_runs_during_a_fold_and_is_left_as_it_was(
    tmp_path: Path, enabled: bool
) -> None:
    """A fold keeps every row it decodes and makes no cycles: the collector's passes over the
    growing heap were a quarter of a long log's fold, so it is paused for the fold and put back
    as it was (on, or off as start-up leaves it)."""
    import gc

    log = tmp_path / "long.jsonl"
    lines = [ev("start", goal="g", gate="score", iters_total=3000)]
    for it in range(3000):
        row = {"iter": it, "decision": "discard", "note": f"n{it}", "detail": "", "score": float(it)}
        lines.append(ev("row", float(it), row=row, solved=False))
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    collections: list[str] = []

    def count(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            collections.append(phase)

    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    gc.callbacks.append(count)
    try:
        folded = fold_path(log)
        assert gc.isenabled() is enabled
    finally:
        gc.callbacks.remove(count)
        (gc.enable if was else gc.disable)()
    assert folded.iteration == 2999 and len(folded.rows) == 3000
    # At most the one pass the first allocation after the fold may start (the young objects'
    # count built up while it ran); without the pause there are dozens.
    assert len(collections) <= 1, len(collections)
