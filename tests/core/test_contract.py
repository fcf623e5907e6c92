"""The measure contract: how stdout and exit codes become readings, including garbage."""

from __future__ import annotations

import pytest

from crucible_core.contract.reading import parse_measure_output


def test_last_brace_line_is_the_verdict() -> None:
    out = 'building...\n{"valid": false}\nlog line\n{"valid": true, "score": 12.5, "note": "p99"}\ntrailer\n'
    reading = parse_measure_output(out, 0)
    assert reading.valid and reading.score == 12.5 and reading.note == "p99"


def test_nonzero_exit_forces_invalid() -> None:
    reading = parse_measure_output('{"valid": true, "score": 3}', 1)
    assert not reading.valid
    assert "exited 1" in reading.note


@pytest.mark.parametrize(
    ("stdout", "fragment"),
    [
        ("", "no JSON verdict"),
        ("garbage\nmore garbage", "no JSON verdict"),
        ("{not json", "not valid JSON"),
        ('{"score": 3}', '"valid"'),
        ('["valid", true]', "no JSON verdict"),
    ],
)
def test_garbage_becomes_an_invalid_reading_with_a_note(stdout: str, fragment: str) -> None:
    reading = parse_measure_output(stdout, 0)
    assert not reading.valid
    assert fragment in reading.note


def test_null_or_non_numeric_score_is_invalid() -> None:
    assert not parse_measure_output('{"valid": true, "score": null}', 0).valid
    bad = parse_measure_output('{"valid": true, "score": "fast"}', 0)
    assert not bad.valid and "not a finite number" in bad.note
    assert not parse_measure_output('{"valid": true, "score": true}', 0).valid


def test_optional_fields() -> None:
    reading = parse_measure_output(
        '{"valid": true, "score": 1, "tiebreak": 2, "solved": true, "detail": {"total": 7}}', 0
    )
    assert reading.tiebreak == 2 and reading.solved and reading.detail == {"total": 7}
