"""Errors a plan author can cause: a malformed plan file or a graph validation refused."""

from __future__ import annotations

from crucible_core.errors import ManifestError


class PlanError(ManifestError):
    """The plan cannot be admitted; every problem found is listed, one per line."""

    def __init__(self, problems: list[str], *, source: str = "plan") -> None:
        self.problems = list(problems)
        lines = "\n  ".join(self.problems)
        super().__init__(
            f"{source} was refused before anything ran:\n  {lines}",
            hint="fix the plan file; `crucible plan show FILE` validates without running",
        )
