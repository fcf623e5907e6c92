"""[preflight] end to end on the counter: start rungs stop a run before any spend, candidate
rungs reject a candidate unmeasured, `crucible check` runs them all."""

from __future__ import annotations

from pathlib import Path

from crucible_core.errors import ExitCode
from tests.cli_support import run_crucible
from tests.e2e.session import events, rows

BROKEN_START = """
[[preflight.rung]]
name = "toolchain"
cmd = "echo 'cc: not found' >&2; exit 3"
message = "install a C compiler first"
timeout = "10s"
"""

CANDIDATE_RUNG = """
[preflight]
commands = ["test -f value.txt"]

[[preflight.rung]]
name = "small"
when = "candidate"
cmd = "test $(cat value.txt) -lt 3"
message = "values from 3 up are out of range"
"""


def with_preflight(manifest: Path, text: str) -> Path:
    manifest.write_text(manifest.read_text() + text)
    return manifest


def test_a_failing_start_rung_stops_the_run_before_any_spend(example) -> None:
    manifest = with_preflight(example("counter"), BROKEN_START)
    done = run_crucible("--manifest", manifest, "--iterations", "3")
    assert done.returncode == ExitCode.PREFLIGHT == 17, done.stderr
    assert "preflight rung 'toolchain' failed" in done.stderr
    assert "install a C compiler first" in done.stderr and "cc: not found" in done.stderr
    log = events(manifest)
    kinds = [e["kind"] for e in log]
    assert "agent_start" not in kinds and "turn" not in kinds
    assert not [e for e in log if e["kind"] == "step" and e["step"] == "measure"]
    assert {"kind": "phase", "phase": "preflight", "iter": 0}.items() <= next(
        e for e in log if e["kind"] == "phase" and e["phase"] == "preflight"
    ).items()
    (row,) = rows(manifest)
    assert row["decision"] == "preflight-failed" and "toolchain" in row["note"]
    assert log[-1]["kind"] == "shutdown" and log[-1]["outcome"] == "error"
    assert (manifest.parent / "workspace" / "value.txt").read_text().strip() == "0"


def test_a_failing_candidate_rung_rejects_the_candidate_unmeasured(example) -> None:
    manifest = with_preflight(example("counter"), CANDIDATE_RUNG)
    done = run_crucible("--manifest", manifest, "--iterations", "4")
    assert done.returncode == 0, done.stderr
    written = rows(manifest)
    assert [r["decision"] for r in written] == ["baseline", "keep", "keep", "discard", "discard"]
    for row in written[3:]:
        assert row["score"] is None
        assert "preflight rung 'small' failed" in row["note"] and "out of range" in row["note"]
    measured = [e["iter"] for e in events(manifest) if e["kind"] == "step" and e["step"] == "measure"]
    assert measured == [0, 1, 2]  # the rejected candidates were never measured
    assert (manifest.parent / "workspace" / "value.txt").read_text().strip() == "2"


def test_check_runs_every_rung(example) -> None:
    manifest = with_preflight(example("counter"), CANDIDATE_RUNG)
    done = run_crucible("check", "--manifest", manifest)
    assert done.returncode == 0, done.stdout
    assert "preflight start rung 'test -f value.txt' passed" in done.stdout
    assert "preflight candidate rung 'small' passed" in done.stdout
    broken = manifest.read_text().replace(
        'commands = ["test -f value.txt"]', 'commands = ["test -f nope.txt"]'
    )
    manifest.write_text(broken)
    done = run_crucible("check", "--manifest", manifest)
    assert done.returncode == ExitCode.CHECK_FAILED, done.stdout
    assert "preflight rung 'test -f nope.txt' failed: exit" in done.stdout


def test_a_candidate_rung_may_leave_build_outputs_behind(example) -> None:
    """A rung that writes into the workspace (a build) is not mistaken for a measure that did."""
    manifest = with_preflight(
        example("counter"),
        '\n[[preflight.rung]]\nname = "build"\nwhen = "candidate"\ncmd = "cp value.txt built.txt"\n',
    )
    done = run_crucible("--manifest", manifest, "--iterations", "2")
    assert done.returncode == 0, done.stderr
    assert [r["decision"] for r in rows(manifest)] == ["baseline", "keep", "keep"]
