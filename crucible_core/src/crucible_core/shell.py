"""Shell commands of the command protocol: `sh -c` in the workspace with an explicitly built env."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import attrs

from crucible_core import process
from crucible_core.contract.records import value_methods
from crucible_core.process import Completed


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Shell:
    """Runs contract commands (measure, apply, snapshot, restore, setup) under the supervisor.

    `env` is the complete base environment the engine decided on; callers add per-command
    variables (CRUCIBLE_TOKEN, CRUCIBLE_BEST_SCORE, ...) through `extra_env`.
    """

    cwd: Path
    env: Mapping[str, str]
    timeout: float | None = None

    def run(
        self,
        command: str,
        *,
        cwd: Path | None = None,
        extra_env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Completed:
        env = dict(self.env)
        if extra_env:
            env.update(extra_env)
        return process.run(
            command,
            cwd=cwd or self.cwd,
            env=env,
            timeout=timeout if timeout is not None else self.timeout,
        )
