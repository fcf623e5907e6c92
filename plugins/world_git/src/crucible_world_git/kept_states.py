"""Which kept states a session log names: the tokens `crucible diff` hands the world's change()."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from crucible_core.api import UsageError, is_kept


@attrs.frozen
class ChangeRange:
    head: str
    base: str | None  # None: the kept state just before head
    label: str


def iteration_change(events: Sequence[Mapping[str, Any]], iteration: int) -> ChangeRange:
    rows = [e["row"] for e in events if e["kind"] == "row" and int(e["row"].get("iter") or 0) == iteration]
    if iteration <= 0 or not rows:
        raise UsageError(f"the session log has no iteration {iteration}", hint="see `crucible results`")
    kept = [r for r in rows if is_kept(str(r.get("decision") or "")) and r.get("kept_snap")]
    if not kept:
        decision = rows[-1].get("decision") or "no decision"
        raise UsageError(
            f"iteration {iteration} was not kept ({decision}): its change was rolled back",
            hint="only kept iterations stay in the world's memory; try `crucible diff --best`",
        )
    return ChangeRange(head=str(kept[-1]["kept_snap"]), base=None, label=f"iteration {iteration}")


def best_change(events: Sequence[Mapping[str, Any]]) -> ChangeRange:
    """The latest kept state against the baseline of its segment (or the run's base commit)."""
    base: str | None = None
    head: str | None = None
    for event in events:
        kind = event["kind"]
        if kind == "identity" and base is None:
            base = _identity_base(event)
        elif kind == "segment" and event.get("snapshot"):
            base, head = str(event["snapshot"]), None  # a new segment compares against its own baseline
        elif (
            kind == "row"
            and is_kept(str(event["row"].get("decision") or ""))
            and event["row"].get("kept_snap")
        ):
            head = str(event["row"]["kept_snap"])
    if head is None:
        raise UsageError(
            "no iteration was kept: there is no best change to show", hint="see `crucible results`"
        )
    if base is None:
        raise UsageError("the session log names no base state to compare with", hint="use --iter N instead")
    return ChangeRange(head=head, base=base, label="best vs baseline")


def _identity_base(event: Mapping[str, Any]) -> str | None:
    if event.get("base_commit"):
        return str(event["base_commit"])
    identity = event.get("identity")
    if isinstance(identity, Mapping):
        for component in identity.get("components") or []:
            if isinstance(component, Mapping) and component.get("base_sha"):
                return str(component["base_sha"])
    return None
