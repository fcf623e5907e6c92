"""Resume: folding a 100,000-row session log against a bare loop that only parses the same lines."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

from harness import Options, Row, median, timed

from crucible_core.fold import fold_path

ROWS = 100_000
TARGET = 2.0


def write_log(path: Path, rows: int) -> None:
    """A plausible long run: start, identity, then per iteration the events the engine writes."""
    rng = random.Random(7)
    best = 0.0
    with path.open("w") as out:
        out.write(
            json.dumps({"v": 1, "kind": "start", "ts": 0, "gate": "score", "budget": {"iterations": rows}})
            + "\n"
        )
        out.write(json.dumps({"v": 1, "kind": "identity", "ts": 0, "identity": "v1:" + "0" * 64}) + "\n")
        for it in range(rows):
            out.write(
                json.dumps({"v": 1, "kind": "phase", "ts": it, "phase": "iteration", "iter": it}) + "\n"
            )
            out.write(json.dumps({"v": 1, "kind": "step", "ts": it, "step": "measure", "iter": it}) + "\n")
            score = rng.random() * 100
            keep = score > best
            best = max(best, score)
            sha = f"{it:040x}" if keep else None
            row = {
                "v": 1,
                "kind": "row",
                "ts": it,
                "iter": it,
                "gate": "score",
                "verdict": "keep" if keep else "discard",
                "valid": True,
                "score": score,
                "tiebreak": None,
                "solved": False,
                "best": best,
                "baseline": 0.0,
                "baseline_total": None,
                "note": f"score {score:.2f}",
                "detail": None,
                "cost": 0.01,
                "sha": sha,
                "snapshot": sha,
                "fingerprint": "fp:0",
            }
            out.write(json.dumps(row) + "\n")
            out.write(
                json.dumps(
                    {
                        "v": 1,
                        "kind": "budget",
                        "ts": it,
                        "iterations_done": it,
                        "spent": it * 0.01,
                        "active_s": float(it),
                        "parked_s": 0.0,
                    }
                )
                + "\n"
            )


def bare_parse(path: Path) -> int:
    count = 0
    with path.open("rb") as handle:
        for line in handle:
            if line.strip():
                json.loads(line)
                count += 1
    return count


def run(options: Options) -> list[Row]:
    workdir = options.workdir / "resume_fold"
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "session.jsonl"
    write_log(log, ROWS)
    folded = fold_path(log)
    assert folded.iteration == ROWS - 1, folded.iteration
    ours = median([timed(lambda: fold_path(log)) for _ in range(options.reps)])
    bare = median([timed(lambda: bare_parse(log)) for _ in range(options.reps)])
    if not options.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return [Row(f"resume: fold {ROWS:,} rows vs bare json parse", ours, bare, target=TARGET)]
