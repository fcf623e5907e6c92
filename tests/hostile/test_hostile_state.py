"""Damaged state files: a bad admission ledger is skipped record by record with a note, and the run goes on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crucible_core.control.ledger import Ledger
from tests.live_support import domain, events, start

PROPOSER = """#!/bin/sh
mkdir -p ../prompts
cp "$CRUCIBLE_PROMPT_FILE" "../prompts/$CRUCIBLE_ITERATION.md"
echo $(( $(cat value.txt) + 1 )) > value.txt
"""

GOOD_STEER = {
    "v": 1,
    "kind": "admitted",
    "key": "good",
    "seq": 9,
    "ts": 1.0,
    "input": "steer",
    "text": "keep me",
}
DAMAGED = [
    {"v": 1, "kind": "admitted", "key": "a", "seq": "abc", "ts": 1.0, "input": "steer", "text": "x"},
    {
        "v": 1,
        "kind": "admitted",
        "key": "b",
        "seq": 2,
        "ts": 1.0,
        "input": "set-budget",
        "iterations": 3,
        "bogus": 3,
    },
    {
        "v": 1,
        "kind": "admitted",
        "key": "c",
        "seq": 3,
        "ts": 1.0,
        "input": "set-budget",
        "iterations": "many",
    },
    {"v": 1, "kind": "admitted", "key": "d", "seq": 4, "ts": 1.0, "input": "set-budget", "iterations": -5},
    {"v": 1, "kind": "admitted", "key": "e", "seq": 5, "ts": 1.0, "input": "launch-missiles"},
    {"v": 1, "kind": "admitted", "key": 7, "seq": 6, "ts": 1.0, "input": "pause"},
    {"v": 1, "kind": "admitted", "key": "f", "seq": 7, "ts": 1.0, "input": "steer", "text": ["not", "text"]},
    {
        "v": 1,
        "kind": "settled",
        "key": "good",
        "outcome": {"odd": True},
    },  # after GOOD_STEER, see write_ledger
]


def write_ledger(path: Path, records: list[dict]) -> None:
    records = [r for r in records if r["kind"] == "admitted"] + [
        r for r in records if r["kind"] != "admitted"
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + "not json at all\n")


def test_damaged_records_are_skipped_with_a_reason_each(tmp_path: Path) -> None:
    path = tmp_path / "admissions.jsonl"
    write_ledger(path, [*DAMAGED, GOOD_STEER])
    ledger = Ledger(path)
    assert list(ledger.entries) == ["good"]
    assert ledger.entries["good"].outcome is None  # the damaged settled line did not close it
    assert len(ledger.problems) == len(DAMAGED)
    assert any("seq" in p for p in ledger.problems)
    assert any("bogus" in p for p in ledger.problems)


def test_a_directory_in_place_of_the_ledger_is_a_note_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "admissions.jsonl").mkdir()
    ledger = Ledger(tmp_path / "admissions.jsonl")
    assert ledger.entries == {} and "could not be read" in ledger.problems[0]


@pytest.mark.parametrize("damage", ["records", "directory"])
def test_a_resume_over_a_damaged_ledger_goes_on(tmp_path: Path, damage: str) -> None:
    manifest = domain(tmp_path, PROPOSER)
    first = start(manifest, "--iterations", "1")
    assert first.wait(timeout=60) == 0, first.communicate()
    admissions = manifest.parent / "state" / "admissions.jsonl"
    if damage == "records":
        write_ledger(admissions, [*DAMAGED, GOOD_STEER])
    else:
        admissions.mkdir()
    resumed = start(manifest, "--resume", "--iterations", "2")
    _out, err = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, err
    assert "Traceback" not in err
    log = events(manifest)
    warnings = [e["msg"] for e in log if e["kind"] == "note" and e["level"] == "warn"]
    assert [e["row"]["iter"] for e in log if e["kind"] == "row"] == [0, 1, 2]
    if damage == "records":
        assert sum("damaged" in w for w in warnings) == len(DAMAGED)
        # the one sound record is re-armed and delivered
        assert "keep me" in (tmp_path / "prompts" / "2.md").read_text()
    else:
        assert any("could not be read" in w for w in warnings)


# Iteration 1 deletes the whole state directory, 2 empties the log in place (and notes what
# the engine had put back by then), 3 replaces the log with a forged one.
STATE_WRECKER = """#!/bin/sh
case "$CRUCIBLE_ITERATION" in
  1) for _ in $(seq 200); do grep -qs keep-me ../state/admissions.jsonl && break; sleep 0.05; done
     rm -rf ../state ;;
  2) ls ../state > ../seen-at-2.txt; : > ../state/session.jsonl ;;
  3) rm -f ../state/session.jsonl ../state/admissions.jsonl
     echo '{"v":1,"kind":"shutdown","outcome":"solved"}' > ../state/session.jsonl ;;
esac
echo $(( $(cat value.txt) + 1 )) > value.txt
"""


def test_an_agent_wrecking_the_state_directory_loses_no_log(tmp_path: Path) -> None:
    from tests.cli_support import run_crucible
    from tests.live_support import wait_for

    manifest = domain(tmp_path, STATE_WRECKER)
    proc = start(manifest, "--iterations", "3", "--max-park", "1h")
    # an operator input recorded before the wreck survives it
    wait_for(manifest, proc, lambda log: any(e["kind"] == "step" and e["step"] == "propose" for e in log))
    sent = run_crucible("steer", "--manifest", manifest, "--id", "keep-me", "mind the state")
    assert sent.returncode == 0, sent.stderr
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    seen = (tmp_path / "seen-at-2.txt").read_text().split()
    assert {"session.jsonl", "engine.lock", "control.json", "admissions.jsonl"} <= set(seen)
    log = events(manifest)
    kinds = [e["kind"] for e in log]
    assert kinds[0] == "start" and kinds.count("start") == 1
    assert kinds[-1] == "shutdown" and kinds.count("shutdown") == 1 and log[-1]["outcome"] == "finished"
    assert [e["row"]["iter"] for e in log if e["kind"] == "row"] == [0, 1, 2, 3]
    repairs = [e["msg"] for e in log if e["kind"] == "note" and "tampered" in e["msg"]]
    assert len(repairs) == 3, repairs
    assert "deleted" in repairs[0] and "truncated" in repairs[1] and "replaced" in repairs[2]
    assert "the admission ledger (deleted)" in repairs[2]
    assert [e["text"] for e in log if e["kind"] == "steer"] == ["mind the state"]  # delivered to iteration 2
    admissions = (tmp_path / "state" / "admissions.jsonl").read_text()
    assert '"admitted","key":"keep-me"' in admissions and '"settled","key":"keep-me"' in admissions
    # the restored log is whole enough to resume from
    more = start(manifest, "--resume", "--iterations", "4")
    assert more.wait(timeout=60) == 0, more.communicate()
    assert [e["row"]["iter"] for e in events(manifest) if e["kind"] == "row"] == [0, 1, 2, 3, 4]


BLOCKER = """#!/bin/sh
rm -rf ../state && echo "not a directory" > ../state
"""


def test_a_state_directory_that_cannot_be_put_back_fails_clearly_and_keeps_the_log(tmp_path: Path) -> None:
    manifest = domain(tmp_path, BLOCKER)
    proc = start(manifest, "--iterations", "2")
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 4, err
    assert "could not be put back" in err and "Traceback" not in err
    rescued = tmp_path / "state-rescued-session.jsonl"
    kinds = [json.loads(line)["kind"] for line in rescued.read_text().splitlines()]
    assert kinds[0] == "start" and "row" in kinds and kinds[-1] == "shutdown"
