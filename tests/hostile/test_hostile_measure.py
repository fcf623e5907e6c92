"""Hostile measure output: huge numbers and deep nesting are invalid readings with a note, never a crash."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crucible_core.contract.reading import parse_measure_output
from tests.live_support import domain, events, start

HUGE = "1" + "0" * 400
HOSTILE_VERDICTS = {
    "401-digit score": '{"valid": true, "score": ' + HUGE + "}",
    "401-digit tiebreak": '{"valid": true, "score": 1, "tiebreak": ' + HUGE + "}",
    "5001-digit integer": '{"valid": true, "score": 1, "detail": {"n": ' + "7" * 5001 + "}}",
    "deep detail": '{"valid": true, "score": 1, "detail": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "deep object": '{"valid": true, "score": 1, "detail": ' + '{"a":' * 100_000 + "1" + "}" * 100_000 + "}",
    "float overflow": '{"valid": true, "score": 1e400}',
    "huge line": '{"valid": true, "score": 1, "note": "' + "x" * 2_000_000 + '"}',
}


@pytest.mark.parametrize("name", sorted(HOSTILE_VERDICTS))
def test_a_hostile_verdict_is_an_invalid_reading_with_a_note(name: str) -> None:
    reading = parse_measure_output("progress\n" + HOSTILE_VERDICTS[name] + "\n", 0)
    assert not reading.valid
    assert reading.note
    assert len(reading.note) < 200  # the note describes, it does not echo the hostile value


def test_a_plain_verdict_still_parses() -> None:
    reading = parse_measure_output('{"valid": true, "score": 12345678901234567890, "tiebreak": 2}', 0)
    assert reading.valid and reading.score == 12345678901234567890.0 and reading.tiebreak == 2


# value.txt counts iterations; from 1 on, the measure prints one hostile verdict per iteration.
MEASURE = """#!/bin/sh
exec "$PYTHON" - <<'PY'
v = int(open("value.txt").read())
huge = "1" + "0" * 400
verdicts = [
    '{"valid": true, "score": 0, "note": "baseline"}',
    '{"valid": true, "score": ' + huge + '}',
    '{"valid": true, "score": 5, "tiebreak": ' + huge + '}',
    '{"valid": true, "score": 5, "detail": {"n": ' + "7" * 5001 + '}}',
    '{"valid": true, "score": 5, "detail": ' + "[" * 100000 + "]" * 100000 + '}',
]
print(verdicts[v])
PY
"""

PROPOSER = """#!/bin/sh
echo $(( $(cat value.txt) + 1 )) > value.txt
"""


def test_a_run_whose_measure_turns_hostile_finishes_with_invalid_readings(tmp_path: Path) -> None:
    manifest = domain(tmp_path, PROPOSER)
    (tmp_path / "measure.sh").write_text(MEASURE)
    os.chmod(tmp_path / "measure.sh", 0o755)
    proc = start(manifest, "--iterations", "4")
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    rows = [e["row"] for e in events(manifest) if e["kind"] == "row"]
    assert [r["decision"] for r in rows] == ["baseline", "discard", "discard", "discard", "discard"]
    assert all(r["valid"] is False and r["note"] for r in rows[1:])
