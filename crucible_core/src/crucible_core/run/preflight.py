"""`[preflight]`: cheap commands that prove the environment before an iteration is spent.

Start rungs run once, against the unmodified workspace, before the baseline: a failure stops
the run with the rung's message (exit 17, PreflightFailed) before any agent turn or measure.
Candidate rungs run before each candidate's measure: a failure discards the candidate
unmeasured, its row naming the rung. Every rung is `sh -c` in the workspace through the
Shell (so through the supervisor), with a deadline.
"""

from __future__ import annotations

import attrs

from crucible_core.contract.preflight import rung_verdict
from crucible_core.contract.records import value_methods
from crucible_core.errors import PreflightFailed
from crucible_core.manifest.models import PreflightRung, PreflightSection
from crucible_core.shell import Shell

DEFAULT_RUNG_TIMEOUT = 60.0
STDERR_TAIL_CHARS = 400


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class RungFailure:
    rung: PreflightRung
    why: str  # what the command did: its exit, its note, the tail of its stderr

    def describe(self) -> str:
        text = f"preflight rung {self.rung.label()!r} failed: {self.why}"
        return f"{text}; {self.rung.message}" if self.rung.message else text


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class RungResult:
    rung: PreflightRung
    failure: RungFailure | None
    seconds: float


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Preflight:
    section: PreflightSection
    shell: Shell

    def run_rung(self, rung: PreflightRung) -> RungResult:
        timeout = rung.timeout or self.section.timeout or DEFAULT_RUNG_TIMEOUT
        done = self.shell.run(rung.cmd, timeout=float(timeout))
        verdict = rung_verdict(done.exit_code, done.stdout)
        if done.ok and verdict.passed:
            return RungResult(rung, None, done.duration)
        why = done.describe_failure() if not done.ok else 'it printed "pass": false'
        if verdict.note:
            why += f" ({verdict.note})"
        tail = done.stderr.strip()[-STDERR_TAIL_CHARS:]
        if tail:
            why += f"; stderr: {tail}"
        return RungResult(rung, RungFailure(rung, why), done.duration)

    def first_failure(self, when: str) -> RungFailure | None:
        """Run the `when` rungs in order; the first that fails stops the ladder."""
        for rung in self.section.rungs(when):
            result = self.run_rung(rung)
            if result.failure is not None:
                return result.failure
        return None

    def prove_start(self) -> None:
        failure = self.first_failure("start")
        if failure is not None:
            raise PreflightFailed(
                failure.describe(),
                hint="fix the environment (`crucible check` runs the rungs), then start the run again",
            )
