"""What a resume owes its predecessor: an undelivered steer after a SIGKILL, and the rest of a park's budget."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from crucible_core.session_log import read_events
from tests.cli_support import run_crucible
from tests.live_support import domain, events, start, wait_for

# Every prompt is copied to ../prompts/<iteration>.md (a redone iteration overwrites its copy).
# HANG: the first time iteration $AT runs, the turn hangs (the engine is killed meanwhile).
# PARK: at iteration $AT the agent asks for an approval it cannot work without (block mode).
PROPOSER = """#!/bin/sh
set -eu
mkdir -p ../prompts
cp "$CRUCIBLE_PROMPT_FILE" "../prompts/$CRUCIBLE_ITERATION.md"
if [ "$CRUCIBLE_ITERATION" = "${AT:-0}" ]; then
  case "${BEHAVIOUR:-}" in
    hang) if [ ! -e ../hung ]; then touch ../hung; exec sleep 60; fi ;;
    park) printf '{"trace_id": "c=9", "regime": "c=9", "handle": "ask-9", "mode": "block"}' \\
            > PROVISIONING_PENDING.json; exit 0 ;;
  esac
fi
echo $(( $(cat value.txt) + 1 )) > value.txt
"""


def test_an_undelivered_steer_survives_a_sigkill_and_lands_in_the_next_prompt(tmp_path: Path) -> None:
    manifest = domain(tmp_path, PROPOSER)
    proc = start(manifest, "--iterations", "2", BEHAVIOUR="hang", AT="1")
    wait_for(manifest, proc, lambda log: (tmp_path / "hung").exists())
    sent = run_crucible("steer", "--manifest", manifest, "--id", "note:1", "try the other file")
    assert sent.returncode == 0, sent.stderr
    admissions = manifest.parent / "state" / "admissions.jsonl"
    assert [e["kind"] for e in read_events(admissions)] == ["admitted"]  # owed, not delivered
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert "try the other file" not in (tmp_path / "prompts" / "1.md").read_text()

    resumed = start(manifest, "--resume", BEHAVIOUR="hang", AT="1")
    assert resumed.wait(timeout=60) == 0, resumed.communicate()
    # the killed turn is redone, and its prompt carries the re-armed steer, once
    assert "try the other file" in (tmp_path / "prompts" / "1.md").read_text()
    assert "try the other file" not in (tmp_path / "prompts" / "2.md").read_text()
    log = events(manifest)
    assert [e["class"] for e in log if e["kind"] == "recovery"] == ["died_mid_turn"]
    assert [(s["iter"], s["text"]) for s in log if s["kind"] == "steer"] == [(1, "try the other file")]
    settled = [e for e in read_events(admissions) if e["kind"] == "settled"]
    assert [(e["key"], e["outcome"]) for e in settled] == [("note:1", "applied")]


def test_max_park_counts_the_park_time_spent_before_a_resume(tmp_path: Path) -> None:
    manifest = domain(tmp_path, PROPOSER)
    proc = start(manifest, "--iterations", "3", BEHAVIOUR="park", AT="1")
    wait_for(manifest, proc, lambda log: any(e.get("phase") == "parked" for e in log))
    time.sleep(1.0)  # the first process parks on the ask for at least this long
    assert run_crucible("stop", "--manifest", manifest).returncode == 0
    assert proc.wait(timeout=60) == 3
    log = events(manifest)
    parked_at = next(e["ts"] for e in log if e.get("phase") == "parked")
    first_park = next(e["ts"] for e in log if e.get("phase") == "finished") - parked_at
    assert first_park >= 1.0

    # a --max-park shorter than what the ask already parked: the resumed park times out at
    # once, and the resolution counts both processes' park time
    resumed = start(manifest, "--resume", "--max-park", "0.5s")
    assert resumed.wait(timeout=60) == 2, resumed.communicate()
    [resolved] = [e for e in events(manifest) if e["kind"] == "approval_resolved"]
    assert resolved["outcome"] == "timeout" and resolved["handle"] == "ask-9"
    assert resolved["waited_s"] >= first_park - 0.01  # both are rounded to the millisecond
