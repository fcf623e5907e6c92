"""The operator's values and the operator's way in: caps bounded at every entry, a resume's flags
over the ledger, and a live run's bridge under a flood of local connections."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from crucible_core.contract.fold import Folded, fold_objects, fold_path
from crucible_core.control.bridge import MAX_CONNECTIONS
from crucible_core.control.ledger import Ledger
from crucible_core.errors import WorkspaceError
from crucible_core.run.budget import Budget
from crucible_core.run.resume import resumed_budget
from crucible_core.session_log import read_events
from tests.cli_support import run_crucible
from tests.live_support import domain, start, wait_for

# At iteration $AT the proposer waits (bounded) for ../go, so the run stays live while the test acts.
PROPOSER = """#!/bin/sh
set -eu
if [ "$CRUCIBLE_ITERATION" = "${AT:-0}" ]; then
  i=0
  while [ ! -e ../go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
fi
echo $(( $(cat value.txt) + 1 )) > value.txt
"""


def proposing(iteration: int) -> Callable[[list[dict[str, Any]]], bool]:
    """A predicate over the log: the agent is working on `iteration`."""
    return lambda log: any(
        e["kind"] == "step" and e.get("step") == "propose" and e.get("iter") == iteration for e in log
    )


# -- 8. caps that are not finite or in range ---------------------------------------------------


@pytest.fixture
def cli(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., tuple[int, str]]:
    """The real `crucible` entry point, in this process, in an empty directory."""
    from crucible_core.cli.main import main

    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> tuple[int, str]:
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        return code, capsys.readouterr().err

    return run


@pytest.mark.parametrize(
    "args",
    [
        ("run", "--max-cost", "nan"),
        ("run", "--max-cost", "inf"),
        ("run", "--max-cost", "1e308"),
        ("run", "--iterations", "10000000000"),
        ("budget", "--max-cost", "nan"),
        ("budget", "--max-cost", "-inf"),
        ("budget", "--iterations", "10000000000"),
    ],
)
def test_a_budget_flag_out_of_range_is_a_usage_error_that_names_the_range(
    cli: Callable[..., tuple[int, str]], args: tuple[str, ...]
) -> None:
    code, err = cli(*args)
    assert code == 64, err
    assert "from 0 to" in err and err.count("\n") == 1, err


def test_a_ledger_line_with_a_cap_out_of_range_is_not_replayed(tmp_path: Path) -> None:
    # What an older engine wrote, or someone appended: json.dumps writes NaN and Infinity literally.
    path = tmp_path / "admissions.jsonl"
    caps = [
        {"max_time": float("nan")},
        {"max_cost": float("nan")},
        {"max_cost": float("inf")},
        {"max_time": 1e308},
        {"iterations": 10**12},
        {"iterations": 7},
    ]
    lines = [
        {"v": 1, "kind": "admitted", "key": f"k{n}", "seq": n, "ts": 0, "input": "set-budget", **cap}
        for n, cap in enumerate(caps, 1)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    ledger = Ledger(path)
    assert [(e.key, e.payload) for e in ledger.entries.values()] == [("k6", {"iterations": 7})]
    assert len(ledger.problems) == 5 and all("from 0 to" in p for p in ledger.problems), ledger.problems


# -- 9. a resume's budget flags win over the ledger ----------------------------------------------


def _start_with(budget: dict[str, Any]) -> Folded:
    start = {"goal": "g", "gate": "score", "model": "", "namespace": "", "iters_total": 0, "max_cost": 0.0}
    return fold_objects([{"v": 1, "kind": "start", "ts": 0.0, **start, "max_secs": 0, "budget": budget}])


def test_a_start_line_cap_out_of_range_refuses_the_resume_unless_a_flag_replaces_it() -> None:
    # the log is the third place a cap enters: a hand-edited start line is not taken as "no cap"
    folded = _start_with({"iterations": 5, "max_cost": 1e308, "max_time": None})
    with pytest.raises(WorkspaceError, match="max_cost must be a finite number from 0 to 1000000"):
        resumed_budget(Budget(), folded)
    assert resumed_budget(Budget(max_cost=2.0), folded) == Budget(iterations=5, max_cost=2.0)


def test_the_resumed_budget_layers_start_then_ledger_then_flags() -> None:
    folded = _start_with({"iterations": 5, "max_cost": 1.0, "max_time": 60.0})
    changes = [{"iterations": 50}, {"max_cost": 3.0}, {"iterations": 9}]
    assert resumed_budget(Budget(), folded, changes) == Budget(iterations=9, max_cost=3.0, max_time=60.0)
    assert resumed_budget(Budget(iterations=3), folded, changes) == Budget(3, 3.0, 60.0)


def test_a_resumes_iterations_win_over_an_earlier_crucible_budget_and_are_kept(tmp_path: Path) -> None:
    manifest = domain(tmp_path, PROPOSER)
    proc = start(manifest, "--iterations", "2", AT="1")
    wait_for(manifest, proc, proposing(1))
    raised = run_crucible("budget", "--manifest", manifest, "--iterations", "6")
    assert raised.returncode == 0, raised.stderr
    assert run_crucible("stop", "--manifest", manifest).returncode == 0
    (tmp_path / "go").touch()
    assert proc.wait(timeout=60) == 3, proc.communicate()
    log = manifest.parent / "state" / "session.jsonl"
    assert fold_path(log).iteration == 1

    resumed = start(manifest, "--resume", "--iterations", "3")
    assert resumed.wait(timeout=120) == 0, resumed.communicate()
    assert fold_path(log).iteration == 3  # not 6: the resume's flag wins over the earlier budget
    # ... and is recorded, so a later resume without flags keeps it instead of going back to 6
    again = start(manifest, "--resume")
    _, err = again.communicate(timeout=120)
    assert again.returncode == 0 and "already ended (iterations spent (3/3))" in err, err
    assert fold_path(log).iteration == 3
    admitted = [
        e for e in read_events(manifest.parent / "state" / "admissions.jsonl") if e["kind"] == "admitted"
    ]
    assert [e.get("iterations") for e in admitted if e["input"] == "set-budget"] == [6, 3]


# -- 10. a flood of local connections ------------------------------------------------------------


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no thread count")


def test_the_operator_gets_through_a_flood_of_reconnecting_local_connections(tmp_path: Path) -> None:
    manifest = domain(tmp_path, PROPOSER)
    proc = start(manifest, "--iterations", "1", AT="1")
    wait_for(manifest, proc, proposing(1))
    record = json.loads((manifest.parent / "state" / "control.json").read_text())
    address = (record["host"], record["port"])
    done = threading.Event()
    flooders = 3 * MAX_CONNECTIONS  # far more than the bridge holds: it must evict, not refuse
    opened = [0] * flooders

    def flood(index: int) -> None:
        # connect, start a request that never finishes (no token), hold it until the bridge lets
        # go, and connect again at once
        while not done.is_set():
            try:
                with socket.create_connection(address, timeout=10) as conn:
                    opened[index] += 1
                    conn.sendall(b'{"cmd": "status"')
                    conn.recv(4096)
            except OSError:
                pass

    threads = [threading.Thread(target=flood, args=(n,), daemon=True) for n in range(flooders)]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 60
        while sum(opened) < 4 * flooders:  # the flood is at full strength before the operator comes
            assert time.monotonic() < deadline, f"the flood never got going ({sum(opened)} connections)"
            time.sleep(0.05)
        threads_during = _threads(proc.pid)
        status = run_crucible("status", "--manifest", manifest)
        stop = run_crucible("stop", "--manifest", manifest)
        flooded = sum(opened)
    finally:
        done.set()
        for thread in threads:
            thread.join(timeout=30)
    assert status.returncode == 0 and "running iteration 1" in status.stdout, (status.stdout, status.stderr)
    assert stop.returncode == 0 and "stop: accepted" in stop.stdout, stop.stderr
    assert flooded >= 4 * flooders
    assert threads_during <= 8, f"the bridge spent a thread per connection ({threads_during} threads)"
    (tmp_path / "go").touch()
    assert proc.wait(timeout=60) == 3, proc.communicate()
