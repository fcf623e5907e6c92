"""The distress channel over the real CLI: the agent pages, the run suspends at the next head, a human answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from crucible_core.contract.fold import fold_objects as fold_events
from crucible_core.contract.recovery import RecoveryClass, classify
from crucible_core.manifest.paths import RunPaths
from crucible_core.run.gates import park_deadline, park_phase
from crucible_core.run.signals import SignalContext, owner
from crucible_distress import pages as distress
from crucible_distress.signals import DistressSignals
from tests.cli_support import crucible_env, run_crucible
from tests.live_support import after_last_start, domain, events, start, wait_for

# At iteration $AT the agent pages as $BEHAVIOUR says (then still makes its edit); every call's
# reply is kept in ../replies so a test can read what the agent was told.
PROPOSER = """#!/bin/sh
set -eu
page() { "$PYTHON" -m crucible_core.cli.main distress "$@" >> ../replies; }
if [ "$CRUCIBLE_ITERATION" = "${AT:-0}" ]; then
  case "${BEHAVIOUR:-}" in
    error) page --severity error --reason "the toolchain is missing" --evidence "cc: not found"
           page --severity error --reason "still missing" ;;
    notes) page --severity warn --reason "flaky network" --evidence "timeout after 30s"
           page --severity info --reason "trying the slow path" ;;
  esac
fi
echo $(( $(cat value.txt) + 1 )) > value.txt
"""


def marker(manifest: Path) -> Path:
    return manifest.parent / "state" / "distress" / "distress"


def distressed(log: list[dict[str, Any]]) -> bool:
    return any(e["kind"] == "phase" and e["phase"] == "distressed" for e in after_last_start(log))


def redistressed(log: list[dict[str, Any]]) -> bool:
    """Suspended again by a resumed process (its log part starts with a recovery)."""
    return sum(e["kind"] == "recovery" for e in log) == 1 and distressed(log)


def test_error_suspends_at_the_next_head_and_deleting_the_marker_resumes(tmp_path: Path) -> None:
    manifest = domain(tmp_path, PROPOSER)
    proc = start(manifest, "--iterations", "3", BEHAVIOUR="error", AT="1")
    log = wait_for(manifest, proc, distressed)
    # the distressed turn's bookkeeping happened first: its row is written and counts
    rows = [e["row"] for e in log if e["kind"] == "row"]
    assert [r["iter"] for r in rows] == [0, 1] and rows[-1]["decision"] == "keep"
    [wait] = [e for e in log if e["kind"] == "approval_wait"]
    assert (wait["handle"], wait["mode"], wait["iter"]) == ("distress", "block", 1)
    assert wait["reason"] == "the toolchain is missing"
    status = json.loads(run_crucible("status", "--json", "--manifest", manifest).stdout)
    assert status["phase"] == "distressed" and status["approval"]["handle"] == "distress"
    assert str(marker(manifest)) in run_crucible("status", "--manifest", manifest).stdout
    replies = [json.loads(line) for line in (tmp_path / "replies").read_text().splitlines()]
    assert replies == [{"status": "suspending"}, {"status": "suspending", "already": True}]
    assert json.loads(marker(manifest).read_text())["reason"] == "the toolchain is missing"

    marker(manifest).unlink()  # the resume grant
    assert proc.wait(timeout=60) == 0
    log = events(manifest)
    [resolved] = [e for e in log if e["kind"] == "approval_resolved"]
    assert resolved["outcome"] == "granted" and resolved["handle"] == "distress"
    assert [r["row"]["iter"] for r in log if r["kind"] == "row"] == [0, 1, 2, 3]
    assert [e for e in log if e["kind"] == "budget"][-1]["parked_s"] > 0


def test_warn_and_info_notes_reach_the_next_row(tmp_path: Path) -> None:
    manifest = domain(tmp_path, PROPOSER)
    proc = start(manifest, "--iterations", "3", BEHAVIOUR="notes", AT="2")
    assert proc.wait(timeout=60) == 0, proc.communicate()
    log = events(manifest)
    rows = {r["row"]["iter"]: r["row"] for r in log if r["kind"] == "row"}
    assert [(n["severity"], n["reason"], n["evidence"]) for n in rows[2]["distress"]] == [
        ("warn", "flaky network", ["timeout after 30s"]),
        ("info", "trying the slow path", []),
    ]
    assert all("distress" not in rows[i] for i in (0, 1, 3))  # consumed once
    assert "approval_wait" not in [e["kind"] for e in log]  # notes never suspend
    notes = [e["msg"] for e in log if e["kind"] == "note" and "the agent says" in e["msg"]]
    assert len(notes) == 2 and "flaky network" in notes[0]
    assert (tmp_path / "replies").read_text().count('"noted"') == 2


def test_max_park_timeout_escalates(tmp_path: Path) -> None:
    manifest = domain(tmp_path, PROPOSER)
    proc = start(manifest, "--iterations", "3", "--max-park", "0.3s", BEHAVIOUR="error", AT="1")
    assert proc.wait(timeout=60) == 2
    log = events(manifest)
    [resolved] = [e for e in log if e["kind"] == "approval_resolved"]
    assert (resolved["outcome"], resolved["handle"]) == ("timeout", "distress")
    [escalation] = [e for e in log if e["kind"] == "escalation"]
    assert "timeout" in escalation["reason"]
    assert log[-1]["kind"] == "shutdown" and log[-1]["outcome"] == "escalated"


def test_stop_while_distressed_and_a_resume_reparks_until_approve(tmp_path: Path) -> None:
    manifest = domain(tmp_path, PROPOSER)
    proc = start(manifest, "--iterations", "3", BEHAVIOUR="error", AT="1")
    wait_for(manifest, proc, distressed)
    assert run_crucible("stop", "--manifest", manifest).returncode == 0
    assert proc.wait(timeout=60) == 3
    assert "approval_resolved" not in [e["kind"] for e in events(manifest)]
    assert marker(manifest).exists()

    resumed = start(manifest, "--resume")
    wait_for(manifest, resumed, redistressed)  # the marker is still there: suspended again
    approve = run_crucible("approve", "--manifest", manifest)
    assert approve.returncode == 0, approve.stderr
    assert resumed.wait(timeout=60) == 0, resumed.communicate()
    assert not marker(manifest).exists()  # an approve clears the marker
    log = events(manifest)
    assert [(e["outcome"], e["reason"]) for e in log if e["kind"] == "approval_resolved"] == [
        ("granted", "approved by the operator")
    ]
    assert [e["index"] for e in log if e["kind"] == "segment"] == [0]  # no re-scope
    assert [r["row"]["iter"] for r in log if r["kind"] == "row"] == [0, 1, 2, 3]


def test_a_resume_that_finds_the_marker_gone_does_not_repark(tmp_path: Path) -> None:
    manifest = domain(tmp_path, PROPOSER)
    proc = start(manifest, "--iterations", "2", BEHAVIOUR="error", AT="1")
    wait_for(manifest, proc, distressed)
    assert run_crucible("stop", "--manifest", manifest).returncode == 0
    assert proc.wait(timeout=60) == 3
    marker(manifest).unlink()  # answered while the run was down

    resumed = start(manifest, "--resume")
    assert resumed.wait(timeout=60) == 0, resumed.communicate()
    log = events(manifest)
    assert not distressed(log)
    [resolved] = [e for e in log if e["kind"] == "approval_resolved"]
    assert resolved["outcome"] == "granted" and "gone" in resolved["reason"]
    assert [r["row"]["iter"] for r in log if r["kind"] == "row"] == [0, 1, 2]


def test_an_unwritable_marker_fails_and_claims_nothing(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    result = run_crucible("distress", "--severity", "error", "--reason", "stuck", "--dir", blocker / "d")
    assert result.returncode == 11
    assert result.stdout == "" and "NOT suspended" in result.stderr
    empty = run_crucible("distress", "--severity", "warn", "--reason", " ", "--dir", tmp_path)
    assert empty.returncode == 64 and not (tmp_path / distress.NOTES_NAME).exists()


def test_the_engine_names_the_distress_directory_and_the_default_is_the_state_dir(tmp_path: Path) -> None:
    state = tmp_path / "state"
    result = run_crucible("distress", "--severity", "error", "--reason", "r", "--state-dir", state)
    assert result.returncode == 0 and (state / "distress" / "distress").exists()
    named = tmp_path / "named"
    env_result = run_crucible(
        "distress",
        "--severity",
        "info",
        "--reason",
        "r",
        env=crucible_env(**{distress.ENV_DIR: str(named)}),
    )
    assert env_result.returncode == 0 and (named / distress.NOTES_NAME).exists()


# -- pure pieces ------------------------------------------------------------------------------
START = {
    "goal": "g",
    "gate": "score",
    "model": "",
    "namespace": "",
    "iters_total": 0,
    "max_cost": 0.0,
    "max_secs": 0,
}


def ev(kind: str, ts: float, **fields: Any) -> dict[str, Any]:
    if kind == "start":
        fields = {**START, **fields}
    return {"v": 1, "kind": kind, "ts": ts, **fields}


def test_a_distress_wait_folds_as_an_approval_wait_with_its_parked_time(tmp_path: Path) -> None:
    log = [
        ev("start", 100.0),
        ev("segment", 100.1, index=0, regime="", fingerprint="fp", snapshot="t0"),
        ev(
            "row",
            100.2,
            row={"iter": 0, "decision": "baseline", "note": "", "detail": "", "kept_snap": "t0"},
            solved=False,
        ),
        ev("approval_wait", 101.0, iter=0, handle="distress", trace_id="distress", mode="block"),
        ev("phase", 101.0, phase="distressed", iter=0),
        ev("note", 104.0, msg="last words before a SIGKILL"),
        ev("start", 200.0),
        ev("phase", 201.0, phase="distressed", iter=0),
        ev("phase", 203.0, phase="finished", iter=0),
    ]
    f = fold_events(log)
    plugin = DistressSignals()
    assert f.open_wait is not None and owner((plugin,), f.open_wait.get("handle")) is plugin
    assert f.open_wait_parked_s == 3.0 + 2.0  # each process's stretch; the gap between is not parked
    assert f.parked_s == 5.0
    recovery = classify(fold_events(log[:6]))
    assert recovery.cls is RecoveryClass.DIED_AWAITING_APPROVAL and "distress" in recovery.detail
    # a resume re-parks while the marker is there, closes the wait once it is gone; not ours: None
    paths = RunPaths(tmp_path, tmp_path / "workspace", tmp_path / "state", tmp_path / "STEER.md")
    context = SignalContext(paths)
    paths.distress_dir.mkdir(parents=True)
    distress.marker_path(paths.distress_dir).write_text('{"severity": "error", "reason": "r"}')
    assert plugin.held(context) is True
    distress.marker_path(paths.distress_dir).unlink()
    assert plugin.held(context) is False
    assert owner((plugin,), "ask-1") is None


def test_park_decisions() -> None:
    assert park_phase(paused=False, suspended="distressed") == "distressed"
    assert park_phase(paused=True, suspended="distressed") == "paused"
    assert park_phase(paused=False, suspended=None) == "parked"
    assert park_deadline(10.0, None, 5.0) is None
    assert park_deadline(10.0, 30.0, 12.0) == 28.0
    assert park_deadline(10.0, 30.0, 45.0) == 10.0  # already over: times out at once


# -- without the plugin -----------------------------------------------------------------------
PROMPT_KEEPER = """#!/bin/sh
cat > ../prompt.txt
env > ../env.txt
echo $(( $(cat value.txt) + 1 )) > value.txt
"""


def test_the_prompt_and_the_turn_offer_distress_only_when_the_plugin_is_installed(tmp_path: Path) -> None:
    for plugins, offered in (("", True), ("core,world_git,judge_command,backend_local", False)):
        root = tmp_path / ("with" if offered else "without")
        root.mkdir()
        manifest = domain(root, PROMPT_KEEPER)
        env = crucible_env(CRUCIBLE_LOAD_PLUGINS=plugins) if plugins else crucible_env()
        done = run_crucible("run", "--manifest", manifest, "--iterations", "1", "--ui", "headless", env=env)
        assert done.returncode == 0, done.stderr
        said = (root / "prompt.txt").read_text()  # the keeper writes beside its workspace
        assert ("crucible distress --severity error" in said) is offered
        assert ("crucible escalate --category" in said) is offered
        assert (distress.ENV_DIR in (root / "env.txt").read_text()) is offered
    refused = run_crucible(
        "distress", "--severity", "info", "--reason", "r", env=crucible_env(CRUCIBLE_LOAD_PLUGINS="core")
    )
    assert refused.returncode != 0 and "pip install crucible-plugin-distress" in refused.stderr


# Slow turns, quiet at first: by the time it leaves anything, the directories it leaves it in were
# last changed long enough ago for the loop to watch them with one stat (agent_files.DirectoryWatch).
LATE = """#!/bin/sh
set -eu
sleep 0.07
case "$CRUCIBLE_ITERATION" in
  3) printf 'steered from outside\\n' > ../STEER.md ;;
  4) "$PYTHON" -m crucible_core.cli.main distress --severity warn --reason "a late note" >> ../replies ;;
  5) printf '{"trace_id": "t-late", "mode": "continue"}' > PROVISIONING_PENDING.json ;;
  6) "$PYTHON" -m crucible_core.cli.main escalate --category infeasible --reason "a late escalation" >> ../replies ;;
esac
echo $(( $(cat value.txt) + 1 )) > value.txt
"""


def test_what_the_agent_leaves_after_quiet_turns_is_still_taken(tmp_path: Path) -> None:
    manifest = domain(tmp_path, LATE)
    proc = start(manifest, "--iterations", "8")
    assert proc.wait(timeout=60) == 2, proc.communicate()  # escalated
    log = events(manifest)
    [steer] = [e for e in log if e["kind"] == "steer"]
    assert (steer["iter"], steer["text"], steer["status"]) == (4, "steered from outside", "applied")
    rows = {e["row"]["iter"]: e["row"] for e in log if e["kind"] == "row"}
    assert [n["reason"] for n in rows[4]["distress"]] == ["a late note"]
    [wait] = [e for e in log if e["kind"] == "approval_wait"]
    assert (wait["trace_id"], wait["iter"]) == ("t-late", 5)
    [escalation] = [e for e in log if e["kind"] == "escalation"]
    assert (escalation["iter"], escalation["reason"]) == (6, "a late escalation")
    assert max(rows) == 6 and not (manifest.parent / "workspace" / "ESCALATION.json").exists()
