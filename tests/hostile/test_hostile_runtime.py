"""Hostile conditions around a live run: two engines on one state directory, a closed stdout, a flood of agent output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.cli_support import CRUCIBLE, crucible_env
from tests.live_support import domain, events, start, wait_for

SLOW_PROPOSER = """#!/bin/sh
sleep "${NAP:-0.3}"
echo $(( $(cat value.txt) + 1 )) > value.txt
"""


def test_two_fresh_runs_started_together_never_both_run(tmp_path: Path) -> None:
    for trial in range(3):
        root = tmp_path / f"trial{trial}"
        root.mkdir()
        manifest = domain(root, SLOW_PROPOSER)
        both = [start(manifest, "--iterations", "2"), start(manifest, "--iterations", "2")]
        results = [(p.wait(timeout=60), p.communicate()[1]) for p in both]
        codes = sorted(code for code, _err in results)
        assert codes == [0, 11], results
        refused = next(err for code, err in results if code == 11)
        winner = next(p for p in both if p.returncode == 0)
        assert f"pid {winner.pid}" in refused and "Traceback" not in refused
        starts = [e for e in events(manifest) if e["kind"] == "start"]
        assert len(starts) == 1  # the refused engine wrote nothing to the log


def test_resume_beside_a_live_run_is_refused_even_without_control_json(tmp_path: Path) -> None:
    manifest = domain(tmp_path, SLOW_PROPOSER)
    live = start(manifest, "--iterations", "3", NAP="2")
    wait_for(manifest, live, lambda log: any(e["kind"] == "step" and e["step"] == "propose" for e in log))
    (tmp_path / "state" / "control.json").unlink()
    second = start(manifest, "--resume")
    _out, err = second.communicate(timeout=60)
    assert second.returncode == 11, err
    assert f"pid {live.pid}" in err
    assert live.wait(timeout=60) == 0, live.communicate()
    log = events(manifest)
    assert [e["kind"] for e in log].count("start") == 1
    assert [e["iter"] for e in log if e["kind"] == "row"] == [0, 1, 2, 3]
    # the lock dies with its holder: a resume afterwards is let in (nothing left to do)
    after = start(manifest, "--resume")
    assert after.wait(timeout=60) == 0, after.communicate()
