"""A live run under operator control over real sockets: steering mid-turn, stop while parked, deny, escalation."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crucible_core.session_log import read_events
from tests import live_support as live
from tests.cli_support import run_crucible
from tests.live_support import events

# The proposer records every prompt it is given, then behaves as $BEHAVIOUR says at iteration $AT.
PROPOSER = """#!/bin/sh
set -eu
mkdir -p ../prompts
cp "$CRUCIBLE_PROMPT_FILE" "../prompts/$CRUCIBLE_ITERATION.md"
if [ "$CRUCIBLE_ITERATION" = "${AT:-0}" ]; then
  case "$BEHAVIOUR" in
    slow) sleep 1 ;;
    hold) n=0; while [ ! -e ../release ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n + 1)); done ;;
    park) printf '{"trace_id": "c=48", "regime": "c=48", "handle": "ask-1", "mode": "block"}' \\
            > PROVISIONING_PENDING.json; exit 0 ;;
    escalate) "$PYTHON" -m crucible_core.cli.main escalate --category infeasible \\
            --reason "the gate cannot see the change" --evidence "measure output is constant"
            echo 99 > value.txt; exit 0 ;;
  esac
fi
echo $(( $(cat value.txt) + 1 )) > value.txt
"""


def domain(tmp_path: Path) -> Path:
    return live.domain(tmp_path, PROPOSER)


def start(manifest: Path, behaviour: str, at: int, *extra: str) -> subprocess.Popen[str]:
    return live.start(manifest, *extra, BEHAVIOUR=behaviour, AT=str(at))


def wait_for(
    manifest: Path, proc: subprocess.Popen[str], predicate: Callable[[dict[str, Any]], bool]
) -> None:
    """Wait until some event satisfies `predicate`."""
    live.wait_for(manifest, proc, lambda log: any(predicate(e) for e in log))


def test_a_steer_sent_mid_turn_lands_in_the_next_prompt(tmp_path: Path) -> None:
    manifest = domain(tmp_path)
    proc = start(manifest, "slow", 1, "--iterations", "3")
    wait_for(manifest, proc, lambda e: e["kind"] == "step" and e["step"] == "propose" and e["iter"] == 1)
    sent = run_crucible("steer", "--manifest", manifest, "--id", "review:1", "prefer small changes")
    assert sent.returncode == 0, sent.stderr
    again = run_crucible("steer", "--manifest", manifest, "--id", "review:1", "prefer small changes")
    assert "already admitted" in again.stdout
    assert proc.wait(timeout=60) == 0
    prompts = tmp_path / "prompts"
    assert "prefer small changes" not in (prompts / "1.md").read_text()
    assert "prefer small changes" in (prompts / "2.md").read_text()
    assert "prefer small changes" not in (prompts / "3.md").read_text()  # delivered once
    steers = [e for e in events(manifest) if e["kind"] == "steer"]
    assert [(s["iter"], s["status"]) for s in steers] == [(2, "applied")]
    ledger = list(read_events(manifest.parent / "state" / "admissions.jsonl"))
    assert [(e["kind"], e.get("outcome")) for e in ledger] == [("admitted", None), ("settled", "applied")]
    # the run is over: status says no live run answers and shows what the log says instead
    status = run_crucible("status", "--manifest", manifest)
    assert status.returncode == 0 and "no live run answers (no run is reachable" in status.stdout
    assert "outcome: finished" in status.stdout


def test_stop_while_parked_ends_the_run_without_resolving_the_ask(tmp_path: Path) -> None:
    manifest = domain(tmp_path)
    proc = start(manifest, "park", 1, "--iterations", "5")
    wait_for(manifest, proc, lambda e: e["kind"] == "phase" and e["phase"] == "parked")
    status = run_crucible("status", "--json", "--manifest", manifest)
    assert json.loads(status.stdout)["approval"]["handle"] == "ask-1"
    assert run_crucible("stop", "--manifest", manifest).returncode == 0
    assert proc.wait(timeout=60) == 3
    log = events(manifest)
    kinds = [e["kind"] for e in log]
    assert "approval_wait" in kinds and "approval_resolved" not in kinds
    assert log[-1] == {**log[-1], "kind": "shutdown", "outcome": "stopped"}
    budget = [e for e in log if e["kind"] == "budget"][-1]
    assert budget["parked_s"] > 0
    # the resume re-parks on the outstanding ask; an approve re-scopes into a new segment
    resumed = start(manifest, "none", 0, "--resume", "--iterations", "3")
    wait_for(manifest, resumed, lambda e: e["kind"] == "recovery")
    deadline = time.monotonic() + 30
    while run_crucible("approve", "--manifest", manifest).returncode != 0:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert resumed.wait(timeout=60) == 0
    log = events(manifest)
    resolved = [e for e in log if e["kind"] == "approval_resolved"]
    assert [r["outcome"] for r in resolved] == ["granted"]
    segments = [e for e in log if e["kind"] == "segment"]
    assert [(s["index"], s["regime"]) for s in segments] == [(0, ""), (1, "c=48")]
    assert segments[0]["fingerprint"] != segments[1]["fingerprint"]
    rows = [e["row"] for e in log if e["kind"] == "row"]
    assert rows[-1]["fingerprint"] == segments[1]["fingerprint"]


def test_deny_of_a_block_wait_escalates(tmp_path: Path) -> None:
    manifest = domain(tmp_path)
    proc = start(manifest, "park", 2, "--iterations", "5")
    wait_for(manifest, proc, lambda e: e["kind"] == "phase" and e["phase"] == "parked")
    assert run_crucible("deny", "--manifest", manifest, "--reason", "too costly").returncode == 0
    assert proc.wait(timeout=60) == 2
    log = events(manifest)
    assert [e["outcome"] for e in log if e["kind"] == "approval_resolved"] == ["denied"]
    assert log[-1]["outcome"] == "escalated"


def test_max_park_timeout_counts_as_a_deny(tmp_path: Path) -> None:
    manifest = domain(tmp_path)
    proc = start(manifest, "park", 1, "--iterations", "5", "--max-park", "0.3s")
    assert proc.wait(timeout=60) == 2
    assert [e["outcome"] for e in events(manifest) if e["kind"] == "approval_resolved"] == ["timeout"]


def test_the_agent_escalates_and_the_world_is_restored(tmp_path: Path) -> None:
    manifest = domain(tmp_path)
    proc = start(manifest, "escalate", 2, "--iterations", "5")
    assert proc.wait(timeout=60) == 2
    log = events(manifest)
    [escalation] = [e for e in log if e["kind"] == "escalation"]
    assert escalation["category"] == "infeasible" and escalation["iter"] == 2
    assert log[-1]["outcome"] == "escalated"
    workspace = manifest.parent / "workspace"
    assert not (workspace / "ESCALATION.json").exists()
    assert (manifest.parent / "state" / "ESCALATION.json").exists()
    assert (workspace / "value.txt").read_text().strip() == "1"  # the escalating turn's edit is gone


def test_pause_parks_until_unpause(tmp_path: Path) -> None:
    manifest = domain(tmp_path)
    proc = start(manifest, "slow", 1, "--iterations", "2")
    wait_for(manifest, proc, lambda e: e["kind"] == "step" and e["iter"] == 1)
    assert run_crucible("pause", "--manifest", manifest).returncode == 0
    wait_for(manifest, proc, lambda e: e["kind"] == "phase" and e["phase"] == "paused")
    assert json.loads(run_crucible("status", "--json", "--manifest", manifest).stdout)["paused"] is True
    assert run_crucible("unpause", "--manifest", manifest).returncode == 0
    assert proc.wait(timeout=60) == 0
    assert [r["row"]["iter"] for r in events(manifest) if r["kind"] == "row"] == [0, 1, 2]


def test_abort_kills_the_running_turn_and_restores_the_world(tmp_path: Path) -> None:
    manifest = domain(tmp_path)
    (tmp_path / "propose.sh").write_text(
        PROPOSER.replace("slow) sleep 1", "slow) echo 50 > value.txt; sleep 120")
    )
    proc = start(manifest, "slow", 1, "--iterations", "3")
    wait_for(manifest, proc, lambda e: e["kind"] == "step" and e["step"] == "propose" and e["iter"] == 1)
    edited = manifest.parent / "workspace" / "value.txt"
    deadline = time.monotonic() + 60
    while edited.read_text().strip() != "50":  # the proposer's edit is made before it is killed
        assert proc.poll() is None and time.monotonic() < deadline, "the proposer never made its edit"
        time.sleep(0.01)
    assert run_crucible("abort", "--manifest", manifest, "--reason", "wrong direction").returncode == 0
    assert proc.wait(timeout=60) == 3  # long before the 120 s turn would have ended
    log = events(manifest)
    assert log[-1]["outcome"] == "stopped" and "abort" in log[-1]["reason"]
    assert (manifest.parent / "workspace" / "value.txt").read_text().strip() == "0"
    ledger = list(read_events(manifest.parent / "state" / "admissions.jsonl"))
    assert [(e["kind"], e.get("outcome")) for e in ledger] == [("admitted", None), ("settled", "applied")]


def test_status_right_after_a_resume_shows_the_run_so_far(tmp_path: Path) -> None:
    manifest = domain(tmp_path)
    first = start(manifest, "none", 0, "--iterations", "2")
    assert first.wait(timeout=60) == 0
    resumed = start(manifest, "hold", 3, "--iterations", "3", "--resume")
    try:
        wait_for(
            manifest, resumed, lambda e: e["kind"] == "step" and e["step"] == "propose" and e["iter"] == 3
        )
        status = run_crucible("status", "--manifest", manifest, "--json")
        assert status.returncode == 0, status.stderr
        shown = json.loads(status.stdout)
        # before the resumed segment's first row: the best, baseline and counts the log holds
        assert (shown["best"], shown["baseline"], shown["kept"], shown["discarded"]) == (2, 0, 2, 0)
        text = run_crucible("status", "--manifest", manifest)
        assert "best 2 (baseline 0); 2 kept" in text.stdout
    finally:
        (tmp_path / "release").touch()
    assert resumed.wait(timeout=60) == 0
