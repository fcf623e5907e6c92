"""Resuming over damaged state: the engine's own record of kept commits wins over a damaged log.

An agent can cut the session log short and kill the engine; a log can hold a line nested too
deep to parse, a line repeated, or be gone; the lock or the log can be a directory; the whole
workspace can be deleted. Each resume here either repairs what it can prove from the engine's
own record or refuses with exit 11 and the next step; none loses a kept commit or shows a
traceback. The runs that are killed are real processes; the rest drive the CLI in-process.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from crucible_core.contract.fold import fold_objects
from tests.core.test_resume_fold import head as head_lines
from tests.core.test_resume_fold import iteration
from tests.live_support import domain, events, start

BUMP = """#!/bin/sh
echo $(( $(cat value.txt) + 1 )) > value.txt
"""

# At iteration 3 (once) the agent cuts the log back to before iteration 2's row (in place, so
# the engine's file is the one cut) and SIGKILLs the engine, whose pid the lock file names.
CUT_AND_KILL = """#!/bin/sh
if [ "$CRUCIBLE_ITERATION" = 3 ] && [ ! -e ../attacked ]; then
  touch ../attacked
  n=$(grep -n '"iter":2,"decision":"keep"' ../state/session.jsonl | head -1 | cut -d: -f1)
  head -n $((n - 1)) ../state/session.jsonl > ../cut.jsonl
  cat ../cut.jsonl > ../state/session.jsonl
  kill -9 "$(cat ../state/engine.lock)"
  sleep 30
fi
echo $(( $(cat value.txt) + 1 )) > value.txt
"""

# Iteration 2 changes nothing, so it is discarded: the log holds both kinds of decision.
SKIP_TWO = """#!/bin/sh
[ "$CRUCIBLE_ITERATION" = 2 ] && exit 0
echo $(( $(cat value.txt) + 1 )) > value.txt
"""


@attrs.frozen
class CliResult:
    code: int
    out: str
    err: str


Cli = Callable[..., CliResult]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    """The real `crucible` entry point, in this process."""
    from crucible_core.cli.main import main

    def run(*args: str | Path) -> CliResult:
        capsys.readouterr()
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return run


def git(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=workspace, capture_output=True, text=True)


def head(workspace: Path) -> str:
    return git(workspace, "rev-parse", "HEAD").stdout.strip()


def finished_run(tmp_path: Path, cli: Cli, proposer: str = BUMP, iterations: int = 2) -> Path:
    manifest = domain(tmp_path, proposer)
    done = cli("run", "--manifest", manifest, "--iterations", str(iterations), "--ui", "headless")
    assert done.code == 0, done.err
    return manifest


def resume(cli: Cli, manifest: Path, iterations: int) -> CliResult:
    return cli("run", "--manifest", manifest, "--resume", "--iterations", str(iterations), "--ui", "headless")


def kept_shas(log: list[dict[str, Any]]) -> list[str]:
    return [e["row"]["sha"] for e in log if e["kind"] == "row" and e["row"].get("sha")]


# --------------------------------------------------------------- the record wins over the log


def test_an_agent_that_cuts_the_log_and_kills_the_engine_loses_no_kept_commit(
    tmp_path: Path, cli: Cli
) -> None:
    manifest = domain(tmp_path, CUT_AND_KILL)
    workspace = tmp_path / "workspace"
    proc = start(manifest, "--iterations", "4")
    proc.communicate(timeout=120)
    assert proc.returncode == -9
    second = head(workspace)  # iteration 2's kept commit: the log no longer names it
    assert git(workspace, "show", f"{second}:value.txt").stdout.strip() == "2"
    assert second not in json.dumps(events(manifest))

    done = resume(cli, manifest, 4)
    assert done.code == 0, done.err
    log = events(manifest)
    # the cut log ends where a process dying between keeping and logging would leave it
    assert [e["class"] for e in log if e["kind"] == "recovery"] == ["died_deciding"]
    assert git(workspace, "merge-base", "--is-ancestor", second, "HEAD").returncode == 0
    recovered = [e for e in log if e["kind"] == "segment" and e.get("reason") == "recovered"]
    assert [e["snapshot"] for e in recovered] == [second]
    assert any(e["kind"] == "note" and second[:12] in e["msg"] for e in log)
    # measured again as the new segment's baseline, then improved on; iterations count on from
    # where the log ends (iteration 1), so the budget of 4 runs three more
    resumed_rows = [e["row"] for e in log[log.index(recovered[0]) :] if e["kind"] == "row"]
    assert [(r["iter"], r["decision"], r["score"]) for r in resumed_rows] == [
        (1, "baseline", 2.0),
        (2, "keep", 3.0),
        (3, "keep", 4.0),
        (4, "keep", 5.0),
    ]
    assert git(workspace, "show", "HEAD:value.txt").stdout.strip() == "5"
    assert log[-1]["kind"] == "shutdown" and log[-1]["outcome"] == "finished"
    assert all(
        git(workspace, "merge-base", "--is-ancestor", sha, "HEAD").returncode == 0 for sha in kept_shas(log)
    )


@pytest.mark.leaves_open_log(
    "it cuts a finished log back to its start line, and the refused resume writes nothing"
)
def test_a_log_cut_back_to_its_start_line_is_refused_not_set_up_again(tmp_path: Path, cli: Cli) -> None:
    manifest = finished_run(tmp_path, cli)
    workspace = tmp_path / "workspace"
    kept = head(workspace)
    log_path = tmp_path / "state" / "session.jsonl"
    log_path.write_bytes(log_path.read_bytes().splitlines(keepends=True)[0])  # only the start line

    done = resume(cli, manifest, 3)
    assert done.code == 11, done.err
    assert "record kept" in done.err and kept[:12] in done.err
    assert head(workspace) == kept  # the workspace was neither removed nor set up again
    assert len(log_path.read_bytes().splitlines()) == 1  # nothing was written


def test_the_unlogged_keep_rule() -> None:
    """Pure: which recorded state lies beyond the log (the runner's decision, without a run)."""
    from crucible_core.contract.recovery import unlogged_keep

    folded = fold_objects(head_lines() + iteration(1, True, 102) + iteration(2, True, 104))
    assert folded.best_token == "tok2"
    assert unlogged_keep(folded, "tok2") is None  # the log's own best
    assert unlogged_keep(folded, "tok1") is None  # a state the log names already
    assert unlogged_keep(folded, None) is None  # a world without a record
    assert unlogged_keep(folded, "tok3") == "tok3"
    assert unlogged_keep(fold_objects(head_lines()[:2]), "tok3") is None  # the log names no kept state


# ------------------------------------------------------ damaged state: typed errors or repairs


def deep_line() -> bytes:
    depth = 200_000
    return b'{"v":1,"kind":"row","row":' + b"[" * depth + b"]" * depth + b"}\n"


READERS = {
    "show": ("show", "--manifest", "{manifest}"),
    "results": ("results", "--manifest", "{manifest}"),
    "status": ("status", "--manifest", "{manifest}"),
    "flow": ("flow", "--session", "{log}", "--out", "{out}"),
    "diff": ("diff", "--manifest", "{manifest}"),
}


@pytest.mark.leaves_open_log("it appends a hostile line after the shutdown; only the readers run after it")
@pytest.mark.parametrize("command", ["resume", *READERS])
def test_a_log_line_nested_200k_deep_is_skipped(tmp_path: Path, cli: Cli, command: str) -> None:
    manifest = finished_run(tmp_path, cli)
    log_path = tmp_path / "state" / "session.jsonl"
    with open(log_path, "ab") as handle:
        handle.write(deep_line())
    if command == "resume":
        done = resume(cli, manifest, 3)
        assert done.code == 0, done.err
        assert [e["row"]["iter"] for e in events(manifest) if e["kind"] == "row"] == [0, 1, 2, 3]
        return
    args = [a.format(manifest=manifest, log=log_path, out=tmp_path / "flow.json") for a in READERS[command]]
    done = cli(*args)
    assert done.code == 0, done.err
    assert "internal error" not in done.err


def test_a_directory_for_the_log_is_refused_with_a_next_step(tmp_path: Path, cli: Cli) -> None:
    manifest = finished_run(tmp_path, cli)
    log_path = tmp_path / "state" / "session.jsonl"
    log_path.unlink()
    log_path.mkdir()
    kept = head(tmp_path / "workspace")
    for attempt in (resume(cli, manifest, 3), cli("run", "--manifest", manifest, "--ui", "headless")):
        assert attempt.code == 11, attempt.err
        assert "is a directory, not a regular file" in attempt.err and "move it aside" in attempt.err
    for reader in ("show", "results", "diff"):
        assert cli(reader, "--manifest", manifest).code == 11
    assert log_path.is_dir() and head(tmp_path / "workspace") == kept


@pytest.mark.parametrize("planted", ["directory", "symlink"])
def test_a_lock_that_is_not_a_file_is_refused_and_never_written_through(
    tmp_path: Path, cli: Cli, planted: str
) -> None:
    manifest = finished_run(tmp_path, cli)
    lock = tmp_path / "state" / "engine.lock"
    lock.unlink()
    precious = tmp_path / "precious.txt"
    precious.write_text("the user's file\n")
    if planted == "directory":
        lock.mkdir()
    else:
        lock.symlink_to(precious)
    done = resume(cli, manifest, 3)
    assert done.code == 11, done.err
    assert f"cannot take the state lock {lock}: a {planted.replace('symlink', 'symbolic link')}" in done.err
    assert "remove it" in done.err
    assert precious.read_text() == "the user's file\n"
    lock.unlink() if planted == "symlink" else lock.rmdir()
    assert resume(cli, manifest, 3).code == 0  # the stated next step works


def test_a_deleted_workspace_is_rebuilt_from_the_record(tmp_path: Path, cli: Cli) -> None:
    manifest = finished_run(tmp_path, cli)
    workspace = tmp_path / "workspace"
    kept = kept_shas(events(manifest))
    subprocess.run(["rm", "-rf", str(workspace)], check=True)
    done = resume(cli, manifest, 3)
    assert done.code == 0, done.err
    log = events(manifest)
    assert any(e["kind"] == "note" and "the whole workspace was gone" in e["msg"] for e in log)
    assert all(git(workspace, "merge-base", "--is-ancestor", sha, "HEAD").returncode == 0 for sha in kept)
    assert git(workspace, "show", "HEAD:value.txt").stdout.strip() == "3"
    assert git(workspace, "fsck").returncode == 0


# ------------------------------------------------------------ repeated lines and a missing log


def test_a_repeated_line_counts_once(tmp_path: Path, cli: Cli) -> None:
    manifest = finished_run(tmp_path, cli, SKIP_TWO, iterations=3)
    log_path = tmp_path / "state" / "session.jsonl"
    before = json.loads(cli("show", "--json", "--manifest", manifest).out)
    assert (before["kept"], before["iterations"]) == (2, 3)
    doubled = [
        copy
        for line in log_path.read_bytes().splitlines(keepends=True)
        for copy in ([line, line] if b'"kind":"row"' in line or b'"kind":"turn"' in line else [line])
    ]
    log_path.write_bytes(b"".join(doubled))

    shown = json.loads(cli("show", "--json", "--manifest", manifest).out)
    assert shown == before
    results = json.loads(cli("results", "--json", "--manifest", manifest).out)
    assert (results["kept"], results["discarded"]) == (2, 1)

    done = resume(cli, manifest, 4)
    assert done.code == 0, done.err
    summary = [e for e in events(manifest) if e["kind"] == "summary"][-1]
    assert (summary["kept"], summary["discarded"], summary["iterations"]) == (3, 1, 4)
    assert len(summary["kept_shas"]) == len(set(summary["kept_shas"])) == 3
    assert [r["iter"] for r in summary["rows"]] == [0, 1, 2, 3, 4]


def test_with_the_log_deleted_resume_and_a_fresh_run_name_the_same_way_out(tmp_path: Path, cli: Cli) -> None:
    manifest = finished_run(tmp_path, cli)
    (tmp_path / "state" / "session.jsonl").unlink()
    resumed = resume(cli, manifest, 3)
    fresh = cli("run", "--manifest", manifest, "--iterations", "1", "--ui", "headless")
    assert resumed.code == fresh.code == 11
    assert "move the workspace aside" in resumed.err
    assert "--resume" not in fresh.err and "move the directory away" in fresh.err
    # the way out both name works, and the moved workspace keeps its history
    os.rename(tmp_path / "workspace", tmp_path / "workspace-old")
    again = cli("run", "--manifest", manifest, "--iterations", "1", "--ui", "headless")
    assert again.code == 0, again.err
    assert git(tmp_path / "workspace-old", "show", "HEAD:value.txt").stdout.strip() == "2"
