"""The seam through which an agent asks for a human: what a plugin reads at the loop's safe points.

Core keeps the loop, the park and the approval machinery; what the agent writes to ask for help
(a page that suspends the run, notes for the next row, an escalation that ends it) is the
business of the plugins that return an AgentSignals from `crucible_agent_signals`
(crucible-plugin-distress in the standard set). The loop asks each of them: for the agent's
environment before a turn, for notes and an escalation after it, at the iteration head whether
the run must suspend, while parked whether the suspend still holds, and how an operator's
approve answers it. A suspend parks as a block-mode approval wait under the plugin's `handle`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from crucible_core.contract.records import value_methods

if TYPE_CHECKING:
    from crucible_core.manifest.paths import RunPaths


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class SignalContext:
    """Where the run keeps its files, and the run's redaction for what the agent wrote."""

    paths: RunPaths
    redact: Callable[[str], str] = str


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class AgentNote:
    """A note the agent left (severity "warn" or "info"): logged now, carried on the next row."""

    severity: str
    reason: str
    evidence: tuple[str, ...] = ()
    iteration: int | None = None

    def to_wire(self) -> dict[str, Any]:
        return {
            "severity": self.severity,
            "reason": self.reason,
            "evidence": list(self.evidence),
            "iter": self.iteration,
        }


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Escalated:
    """The agent says no change here can be judged fairly: the run ends escalated (exit 2)."""

    category: str
    reason: str
    evidence: tuple[str, ...] = ()


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class AfterTurn:
    """What the agent signalled during its turn; `trouble` are warnings about files it left unreadable."""

    notes: tuple[AgentNote, ...] = ()
    escalation: Escalated | None = None
    trouble: tuple[str, ...] = ()


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Suspend:
    """The agent asked the run to wait for a human: `reason` is its words, `marker` what answers it."""

    reason: str
    marker: str = ""


class AgentSignals(Protocol):
    # the approval_wait handle its suspends park under, and the phase the park is logged as
    handle: str
    phase: str

    def method_text(self) -> str:
        """Lines the default method prompt adds, telling the agent how to ask for a human."""
        ...

    def env(self, context: SignalContext) -> Mapping[str, str]:
        """Variables every agent turn gets (CRUCIBLE_* names are allowed here: the engine sets them)."""
        ...

    def after_turn(self, context: SignalContext) -> AfterTurn:
        """Take what the agent left during the turn (consumed: a resume never takes it twice)."""
        ...

    def suspend(self, context: SignalContext) -> Suspend | None:
        """At the iteration head, after the turn's row: a request to park until a human answers."""
        ...

    def held(self, context: SignalContext) -> bool:
        """While parked (and on resume): whether the suspend still stands; False resumes the run."""
        ...

    def answer(self, context: SignalContext) -> None:
        """An operator's approve answers the suspend; OSError when it could not, and it still stands."""
        ...


def owner(signals: tuple[AgentSignals, ...], handle: str | None) -> AgentSignals | None:
    """The plugin whose suspend parked under `handle`, if one did (None: an ordinary approval)."""
    return next((s for s in signals if handle is not None and s.handle == handle), None)
