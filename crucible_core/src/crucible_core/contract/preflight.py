"""Preflight rungs' verdicts: what a rung's exit and stdout say about the environment. Pure."""

from __future__ import annotations

import json

import attrs

from crucible_core.contract.records import value_methods

# A rung's verdict line is short; anything longer is not parsed as one.
MAX_VERDICT_LINE = 64 * 1024


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class RungVerdict:
    passed: bool
    note: str = ""


def rung_verdict(exit_code: int, stdout: str) -> RungVerdict:
    """A rung passes when it exits 0 and its last non-empty stdout line, if it is a JSON object,
    does not say `"pass": false`. A plain command (`cc --version`) passes on exit 0 alone."""
    note = ""
    passed = exit_code == 0
    last = next((line.strip() for line in reversed(stdout.splitlines()) if line.strip()), "")
    if last.startswith("{") and len(last) <= MAX_VERDICT_LINE:
        try:
            verdict = json.loads(last)
        except ValueError:
            verdict = None
        if isinstance(verdict, dict):
            if verdict.get("pass") is False:
                passed = False
            if isinstance(verdict.get("note"), str):
                note = verdict["note"][:500]
    return RungVerdict(passed=passed, note=note)
