"""A judge that runs pytest in the workspace and scores the number of passing tests."""

import re
import shlex
import sys

import attrs

from crucible_core.api import JudgeContext, MeasureContext, Reading, Shell

PASSED = re.compile(r"(\d+) passed")
# pytest exit codes: 0 all passed, 1 some failed, 5 nothing collected; anything else means
# the test run itself broke (interrupted, internal error, bad usage).
COMPLETED = (0, 1, 5)
# No cache directory and no bytecode, so measuring leaves the candidate's tree as it was.
COMMAND = f"{shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider"


@attrs.frozen
class PytestSettings:
    """This judge's own [judge] keys; crucible refuses any other key with its path."""

    args: tuple[str, ...] = ()  # extra pytest arguments, e.g. ["-k", "not slow"]


@attrs.frozen
class PytestJudge:
    shell: Shell
    timeout: float
    command: str = COMMAND
    gate: str = "passing tests"
    scored: bool = True

    @classmethod
    def from_context(cls, ctx: JudgeContext) -> "PytestJudge":
        settings = ctx.settings or PytestSettings()
        timeout = (ctx.section.measure_timeout if ctx.section else None) or 900.0
        return cls(ctx.shell, timeout, " ".join([COMMAND, *map(shlex.quote, settings.args)]))

    def measure(self, ctx: MeasureContext) -> Reading:
        done = self.shell.run(self.command, extra_env={"PYTHONDONTWRITEBYTECODE": "1"}, timeout=self.timeout)
        if done.timed_out or done.spawn_error:
            return Reading.invalid(f"pytest {done.describe_failure()}", broken=True)
        if done.exit_code not in COMPLETED:
            return Reading.invalid(f"pytest could not run the tests (exit {done.exit_code})")
        match = PASSED.search(done.stdout)
        passed = int(match.group(1)) if match else 0
        return Reading(valid=True, score=float(passed), note=f"{passed} passed")
