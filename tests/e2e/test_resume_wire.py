"""Resuming through the wire: our own log round-trips, a crucible-written log resumes, a damaged log is refused."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from crucible_core.contract import wire
from tests.cli_support import run_crucible
from tests.e2e.session import rows
from tests.live_support import domain

BUMP = """#!/bin/sh
v=$(cat value.txt)
echo $((v + 1)) > value.txt
"""
FIXTURE = Path(__file__).parent.parent / "fixtures" / "crucible_session.jsonl"


def run(manifest: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_crucible("run", "--manifest", manifest, "--ui", "headless", *args)


def head(workspace: Path) -> str:
    out = subprocess.run(["git", "-C", str(workspace), "rev-parse", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip()


def fresh(tmp_path: Path) -> tuple[Path, Path, Path]:
    manifest = domain(tmp_path, BUMP)
    done = run(manifest, "--iterations", "2")
    assert done.returncode == 0, done.stderr
    return manifest, manifest.parent / "state" / "session.jsonl", manifest.parent / "workspace"


def test_our_log_is_the_wire_and_show_reads_it(tmp_path: Path) -> None:
    manifest = domain(tmp_path, BUMP)
    # before any run there is neither a live run nor a log: status still says so with exit 14
    assert run_crucible("status", "--manifest", manifest).returncode == 14
    assert run_crucible("show", "--manifest", manifest).returncode == 11
    manifest, log, _ = fresh(tmp_path)
    lines = log.read_text(encoding="utf-8").splitlines()
    for raw in lines:
        line = wire.decode_line(raw)
        assert line is not None and not isinstance(line.event, wire.Unknown), raw
        assert json.loads(wire.encode(line.event, line.ts, line.seq)) == json.loads(raw), raw
    assert [(r["iter"], r["decision"]) for r in rows(manifest)] == [(0, "baseline"), (1, "keep"), (2, "keep")]
    shown = run_crucible("show", "--json", "--manifest", manifest)
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    assert (view["best_score"], view["baseline_score"], view["kept"], view["iterations"]) == (2, 0, 2, 2)
    assert view["outcome"] == "finished" and view["resumes"] == 0
    # no live run answers: status reads the log instead
    status = run_crucible("status", "--manifest", manifest)
    assert status.returncode == 0, status.stderr
    assert "no live run answers" in status.stdout and "best 2 (baseline 0)" in status.stdout


def test_a_crucible_written_log_resumes(tmp_path: Path) -> None:
    manifest, log, workspace = fresh(tmp_path)
    kept = [r["kept_snap"] for r in rows(manifest) if r["decision"] == "keep"]
    text = FIXTURE.read_text(encoding="utf-8").replace("1c" * 20, kept[0]).replace("3c" * 20, kept[1])
    log.write_text(text, encoding="utf-8")
    done = run(manifest, "--resume", "--iterations", "6")
    assert done.returncode == 0, done.stderr
    after = log.read_text(encoding="utf-8")
    assert after.startswith(text)  # the crucible-written history is kept as it was
    appended = [wire.decode(line) for line in after[len(text) :].splitlines()]
    recoveries = [e for e in appended if isinstance(e, wire.Recovery)]
    assert [r.cls for r in recoveries] == [wire.RecoveryClass.CLEAN_EXIT]
    assert [e.row.iter for e in appended if isinstance(e, wire.Row)] == [5, 6]
    assert (workspace / "value.txt").read_text().strip() == "2"  # the kept tree the log named
    view = json.loads(run_crucible("show", "--json", "--manifest", manifest).stdout)
    assert (view["resumes"], view["iterations"], view["kept"], view["best_score"]) == (3, 6, 2, 231.0)


def test_a_resume_never_removes_kept_history_when_the_segment_line_is_unreadable(tmp_path: Path) -> None:
    manifest, log, workspace = fresh(tmp_path)
    tip = head(workspace)
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if '"kind":"segment"' in line)
    damaged = "".join([*lines[:at], '{"v":1,"kind":"segm\n', *lines[at + 1 :]])
    truncated = "".join(lines[at + 1 :])  # a proposer's `> ../state/session.jsonl` under a live run
    for text in (damaged, truncated):
        log.write_text(text, encoding="utf-8")
        done = run(manifest, "--resume", "--iterations", "4")
        assert done.returncode == 11, done.stderr
        assert "no readable segment" in done.stderr and "Traceback" not in done.stderr
        assert log.read_text(encoding="utf-8") == text  # nothing appended, no recovery line
        assert head(workspace) == tip and (workspace / "value.txt").read_text().strip() == "2"


def _cut_after_identity(log: Path) -> str:
    """The log as a SIGKILL between the identity line and the segment line leaves it."""
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if '"kind":"identity"' in line)
    assert not any('"kind":"segment"' in line for line in lines[:at])  # identity comes first
    return "".join(lines[: at + 1])


def test_a_run_killed_between_its_identity_and_segment_lines_resumes_from_setup(tmp_path: Path) -> None:
    # The identity is written before the baseline snapshot and the segment line: a kill in
    # between (seen in kill trials) leaves a log with an identity and no segment, and nothing kept.
    manifest = domain(tmp_path, BUMP)
    done = run(manifest, "--iterations", "0")  # the baseline only: the world keeps nothing past setup
    assert done.returncode == 0, done.stderr
    log = manifest.parent / "state" / "session.jsonl"
    log.write_text(_cut_after_identity(log), encoding="utf-8")
    resumed = run(manifest, "--resume", "--iterations", "2")
    assert resumed.returncode == 0, resumed.stderr
    assert [(r["iter"], r["decision"]) for r in rows(manifest)] == [(0, "baseline"), (1, "keep"), (2, "keep")]
    assert (manifest.parent / "workspace" / "value.txt").read_text().strip() == "2"


@pytest.mark.leaves_open_log("the refused resume appends nothing to the cut log")
def test_a_log_cut_after_its_identity_is_still_refused_when_the_world_kept_a_state(tmp_path: Path) -> None:
    manifest, log, workspace = fresh(tmp_path)
    tip = head(workspace)
    text = _cut_after_identity(log)
    log.write_text(text, encoding="utf-8")
    done = run(manifest, "--resume", "--iterations", "4")
    assert done.returncode == 11, done.stderr
    assert "no readable segment" in done.stderr and "kept" in done.stderr
    assert log.read_text(encoding="utf-8") == text
    assert head(workspace) == tip and (workspace / "value.txt").read_text().strip() == "2"
