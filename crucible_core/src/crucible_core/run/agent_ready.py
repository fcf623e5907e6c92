"""Asking the agent backend, before any turn is spent, whether a turn could start at all."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from crucible_core.errors import RunFailed
from crucible_core.protocols import AgentBackend


def agent_problems(backend: AgentBackend, env: Mapping[str, str], workspace: Path | None) -> list[str]:
    """The backend's own preflight problems; a backend without a preflight has none to report.

    `workspace` None: there is no set-up workspace to look in yet.
    """
    preflight = getattr(backend, "preflight", None)
    if preflight is None:
        return []
    return [str(problem) for problem in preflight(env, workspace)]


def refuse_unstartable_agent(backend: AgentBackend, env: Mapping[str, str], workspace: Path | None) -> None:
    """Stop a run whose agent could never start, instead of stalling on it after the baseline."""
    problems = agent_problems(backend, env, workspace)
    if problems:
        raise RunFailed(
            "the agent cannot start: " + "; ".join(problems),
            hint="fix it, then `crucible check` shows whether the agent can start",
        )
