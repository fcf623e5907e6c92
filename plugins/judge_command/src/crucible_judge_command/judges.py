"""The two built-in judges: a measure command under the command protocol, and keep-everything."""

from __future__ import annotations

import attrs

from crucible_core.api import (
    JudgeContext,
    JudgeSection,
    ManifestError,
    MeasureContext,
    Reading,
    Shell,
    parse_measure_output,
    stderr_tail,
)

DEFAULT_MEASURE_TIMEOUT = 3600.0


def _decimal(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def measure_env(ctx: MeasureContext) -> dict[str, str]:
    """CRUCIBLE_BASELINE_SCORE / _TOTAL / CRUCIBLE_BEST_SCORE, each only when the engine has it."""
    env: dict[str, str] = {}
    if ctx.baseline_score is not None:
        env["CRUCIBLE_BASELINE_SCORE"] = _decimal(ctx.baseline_score)
    if ctx.baseline_total is not None:
        env["CRUCIBLE_BASELINE_TOTAL"] = _decimal(ctx.baseline_total)
    if ctx.best_score is not None:
        env["CRUCIBLE_BEST_SCORE"] = _decimal(ctx.best_score)
    return env


@attrs.frozen
class CommandJudge:
    """Runs [judge].measure_cmd via `sh -c` in the workspace and parses its verdict line."""

    section: JudgeSection
    shell: Shell
    timeout: float
    scored: bool = True

    @property
    def gate(self) -> str:
        return self.section.objective

    @property
    def needs(self) -> str | None:
        """[judge].needs: the capability the measure needs (the engine decides where it runs)."""
        return self.section.needs

    @classmethod
    def from_context(cls, ctx: JudgeContext) -> CommandJudge:
        if ctx.section is None or not ctx.section.measure_cmd:
            raise ManifestError('the "command" judge needs a [judge] section with measure_cmd')
        timeout = ctx.section.measure_timeout or ctx.measure_timeout or DEFAULT_MEASURE_TIMEOUT
        return cls(ctx.section, ctx.shell, timeout)

    def measure(self, ctx: MeasureContext) -> Reading:
        command = self.section.measure_cmd or ""
        if ctx.shell is not None:  # the engine runs this measure elsewhere (a task runner)
            done = ctx.shell(command, measure_env(ctx), self.timeout)
        else:
            done = self.shell.run(command, extra_env=measure_env(ctx), timeout=self.timeout)
        if done.spawn_error or done.timed_out:
            return Reading.invalid(f"measure_cmd {done.describe_failure()}", broken=True)
        reading = parse_measure_output(done.stdout, done.exit_code)
        tail = stderr_tail(done.stderr) if done.exit_code != 0 else ""
        # a failing measure's own words are the fastest way to see why (127: a missing script)
        return attrs.evolve(reading, note=f"{reading.note}; stderr: {tail}") if tail else reading


@attrs.frozen
class TaskJudge:
    """The task lane: no objective, so every completed turn is kept with a null score."""

    gate: str = "task"
    scored: bool = False

    @classmethod
    def from_context(cls, ctx: JudgeContext) -> TaskJudge:
        return cls()

    def measure(self, ctx: MeasureContext) -> Reading:
        return Reading(valid=True, score=None, note="task lane: kept")
