"""A [preflight] rung's verdict from its exit code and stdout."""

from __future__ import annotations

from crucible_core.contract.preflight import RungVerdict, rung_verdict


def test_preflight_rung_verdicts() -> None:
    assert rung_verdict(0, "") == RungVerdict(True)
    assert rung_verdict(0, "gcc 12\n") == RungVerdict(True)
    assert rung_verdict(2, "") == RungVerdict(False)
    assert rung_verdict(0, 'x\n{"pass": false, "note": "no GPU"}\n\n') == RungVerdict(False, "no GPU")
    assert rung_verdict(0, '{"pass": true, "note": "ok"}') == RungVerdict(True, "ok")
    assert rung_verdict(1, '{"pass": true}') == RungVerdict(False)  # the exit decides first
    assert rung_verdict(0, "{not json") == RungVerdict(True)
