"""The operator's vocabulary, defined once: every order a live run accepts and how each behaves.

The bridge admits these inputs, the ledger records them, the gates act on them, a resume
re-arms or supersedes what is owed, and the CLI offers one command each; all of them read this
table, so adding or changing an order is one row here.
"""

from __future__ import annotations

import enum
from typing import NamedTuple


class Payload(enum.Enum):
    """What an order carries besides its name."""

    REASON = "reason"  # an optional free-text reason
    TEXT = "text"  # steering text (required)
    REGIME = "regime"  # the regime to move to (required)
    BUDGET = "budget"  # iterations / max_cost / max_time


class OnResume(enum.Enum):
    """What a resume does with an order still owed (admitted, not settled) by a dead process."""

    OVERRIDE = "override"  # settled superseded: the new process is itself the operator's answer
    REDELIVER = "redeliver"  # queued again for the new process's gates
    LEVEL = "level"  # pause/unpause: only the latest holds (re-armed); earlier ones superseded
    REAPPLY = "reapply"  # folded into the resumed state, settled applied


# A NamedTuple, not attrs: `crucible --help` lists one command per order, and importing attrs
# would be most of its start-up (docs/performance.md).
class OrderSpec(NamedTuple):
    name: str  # the input on the bridge and in the ledger
    command: str  # the `crucible` command that sends it
    summary: str  # one line for `crucible --help`
    help: str  # the command's own help
    payload: Payload
    on_resume: OnResume
    stops: bool = False  # ends the run; must take effect even when the ledger cannot record it
    interrupts: bool = False  # kills the running child now instead of waiting for a safe point
    needs_pending_approval: bool = False  # refused when no approval is outstanding
    offline: str | None = None  # what the CLI says when no run is live (None: the usual error)


STEER = "steer"
STOP = "stop"
ABORT = "abort"
PAUSE = "pause"
RESUME = "resume"
APPROVE = "approve"
DENY = "deny"
RESCOPE = "rescope"
SET_BUDGET = "set-budget"

ORDERS: tuple[OrderSpec, ...] = (
    OrderSpec(
        STEER,
        "steer",
        "Deliver steering into a live run's next prompt.",
        "Deliver TEXT into the live run's next agent prompt ({{STEER}}).",
        Payload.TEXT,
        OnResume.REDELIVER,
        offline=(
            "no run is live to steer: put the text in STEER.md next to the manifest, and the next "
            "`crucible run --resume` (or a fresh run) delivers it with its first prompt"
        ),
    ),
    OrderSpec(
        STOP,
        "stop",
        "Stop a live run at its next iteration head.",
        "Stop the live run at its next iteration head (the running turn is finished and judged).",
        Payload.REASON,
        OnResume.OVERRIDE,
        stops=True,
    ),
    OrderSpec(
        ABORT,
        "abort",
        "Stop a live run now: kill the turn, restore the world.",
        "Stop the live run now: kill the running turn or measure and restore the last kept state.",
        Payload.REASON,
        OnResume.OVERRIDE,
        stops=True,
        interrupts=True,
    ),
    OrderSpec(
        PAUSE,
        "pause",
        "Park a live run at its next iteration head.",
        "Park the live run at its next iteration head; the budget clock stops while parked.",
        Payload.REASON,
        OnResume.LEVEL,
    ),
    OrderSpec(
        RESUME,
        "unpause",
        "Let a paused run continue.",
        "Let a paused run continue.",
        Payload.REASON,
        OnResume.LEVEL,
    ),
    OrderSpec(
        APPROVE,
        "approve",
        "Grant a live run's pending approval (re-scope).",
        "Grant the pending approval: re-baseline in the asked-for regime.",
        Payload.REASON,
        OnResume.OVERRIDE,
        needs_pending_approval=True,
    ),
    OrderSpec(
        DENY,
        "deny",
        "Refuse a live run's pending approval.",
        "Refuse the pending approval (a block-mode wait then escalates).",
        Payload.REASON,
        OnResume.OVERRIDE,
        needs_pending_approval=True,
    ),
    OrderSpec(
        RESCOPE,
        "rescope",
        "Move a live run to a new regime (new segment).",
        "Move the live run to REGIME: a new segment with its own baseline.",
        Payload.REGIME,
        OnResume.REDELIVER,
    ),
    OrderSpec(
        SET_BUDGET,
        "budget",
        "Change a live run's iteration, cost or time budget.",
        "Change the live run's budget; iterations count from the start of the run.",
        Payload.BUDGET,
        OnResume.REAPPLY,
    ),
)

BY_NAME: dict[str, OrderSpec] = {order.name: order for order in ORDERS}
MUTATING = frozenset(BY_NAME)
STOPPING = frozenset(order.name for order in ORDERS if order.stops)
INTERRUPTING = frozenset(order.name for order in ORDERS if order.interrupts)
NEEDS_PENDING_APPROVAL = frozenset(order.name for order in ORDERS if order.needs_pending_approval)
PAUSE_LEVEL = frozenset(order.name for order in ORDERS if order.on_resume is OnResume.LEVEL)
OVERRIDDEN_BY_RESUME = frozenset(order.name for order in ORDERS if order.on_resume is OnResume.OVERRIDE)
REDELIVERED_ON_RESUME = frozenset(order.name for order in ORDERS if order.on_resume is OnResume.REDELIVER)
REAPPLIED_ON_RESUME = frozenset(order.name for order in ORDERS if order.on_resume is OnResume.REAPPLY)
