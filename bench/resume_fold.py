"""Resume: folding a 100,000-row session log against a bare loop that only parses the same lines.

With `--quick` the log has 10,000 rows.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

from harness import Options, Row, median, timed

from crucible_core.contract import wire
from crucible_core.contract.fold import fold_path

ROWS = 100_000
QUICK_ROWS = 10_000
TARGET = 2.0
# For the up-front estimate, per row: writing the log, one fold, one bare parse. Measured on
# the shared 2-core machine (load about 12).
SECONDS_PER_ROW_WRITTEN = 100e-6
SECONDS_PER_ROW_FOLDED = 140e-6
SECONDS_PER_ROW_PARSED = 40e-6


def write_log(path: Path, rows: int) -> None:
    """A plausible long run: start, identity, then per iteration the events the engine writes."""
    rng = random.Random(7)
    best = 0.0
    identity = wire.RunIdentity.build(
        components=[wire.ComponentIdentity(name="", repo=".", base_sha="0" * 40)],
        manifest_hash="m",
        inject_hash="i",
        measure_cmd="./measure.sh",
        direction="higher",
    )
    with path.open("w") as out:
        start = wire.Start(
            goal="g", gate="score", model="", namespace="", iters_total=rows, max_cost=0.0, max_secs=0
        )
        out.write(wire.encode(start, 0.0) + "\n")
        out.write(wire.encode(wire.Identity(identity=identity), 0.0) + "\n")
        for it in range(rows):
            ts = float(it)
            out.write(wire.encode(wire.Phase(phase="iteration", iter=it), ts) + "\n")
            out.write(wire.encode(wire.Step(step="measure", iter=it), ts) + "\n")
            score = rng.random() * 100
            keep = score > best
            best = max(best, score)
            sha = f"{it:040x}" if keep else None
            row = wire.RowWire(
                iter=it,
                decision="keep" if keep else "discard",
                note=f"score {score:.2f}",
                detail="",
                score=score,
                kept_snap=sha,
                valid=True,
                best=best,
                baseline=0.0,
                sha=sha,
                fingerprint="fp:0",
                cost=0.01,
            )
            out.write(wire.encode(wire.Row(row=row, solved=False), ts) + "\n")
            budget = wire.Budget(
                spent=it * 0.01, elapsed_secs=it, active_s=ts, parked_s=0.0, iterations_done=it
            )
            out.write(wire.encode(budget, ts) + "\n")


def bare_parse(path: Path) -> int:
    count = 0
    with path.open("rb") as handle:
        for line in handle:
            if line.strip():
                json.loads(line)
                count += 1
    return count


def _rows(options: Options) -> int:
    return QUICK_ROWS if options.quick else ROWS


def estimate(options: Options) -> float:
    rows = _rows(options)
    reps = options.reps
    return rows * (
        SECONDS_PER_ROW_WRITTEN + (1 + reps) * SECONDS_PER_ROW_FOLDED + reps * SECONDS_PER_ROW_PARSED
    )


def run(options: Options) -> list[Row]:
    workdir = options.workdir / "resume_fold"
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "session.jsonl"
    rows = _rows(options)
    write_log(log, rows)
    folded = fold_path(log)
    assert folded.iteration == rows - 1, folded.iteration
    ours = median([timed(lambda: fold_path(log)) for _ in range(options.reps)])
    bare = median([timed(lambda: bare_parse(log)) for _ in range(options.reps)])
    if not options.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return [Row(f"resume: fold {rows:,} rows vs bare json parse", ours, bare, target=TARGET)]
