"""Async approval waits (ADR 0003): the PROVISIONING_PENDING.json marker and what a park resolves to."""

from __future__ import annotations

import contextlib
import enum
import json
from pathlib import Path
from typing import Any

import attrs

from crucible_core.agent_files import MAX_MARKER_BYTES, MAX_MARKER_DEPTH, read_regular
from crucible_core.contract.json_bounds import JsonRefused, loads_bounded
from crucible_core.contract.records import value_methods

MARKER_NAME = "PROVISIONING_PENDING.json"


class WaitMode(enum.StrEnum):
    BLOCK = "block"  # the ask is the agent's only path: the loop parks until it resolves
    CONTINUE = "continue"  # the agent has frozen-regime work left: keep iterating meanwhile


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Pending:
    """An outstanding approval: the loop parks on it (block) or keeps it registered (continue)."""

    trace_id: str
    regime: str
    handle: str
    mode: WaitMode

    def to_wire(self) -> dict[str, Any]:
        return {
            "handle": self.handle,
            "trace_id": self.trace_id,
            "mode": self.mode.value,
            "regime": self.regime,
        }

    @classmethod
    def from_wire(cls, event: dict[str, Any]) -> Pending:
        mode = event.get("mode")
        return cls(
            trace_id=str(event.get("trace_id") or ""),
            regime=str(event.get("regime") or event.get("trace_id") or ""),
            handle=str(event.get("handle") or ""),
            mode=WaitMode(mode) if mode in ("block", "continue") else WaitMode.BLOCK,
        )


def _regime_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    # a structured regime is compared and fingerprinted by its canonical JSON text
    return json.dumps(value, sort_keys=True, separators=(",", ":")) if value is not None else ""


def parse_marker(data: bytes, *, changed_anything: bool) -> Pending | str:
    """The pending ask, or why the marker cannot be used.

    Without an explicit mode, a turn that also changed the workspace has a frozen-regime
    fallback (continue); a turn that produced only the ask blocks.
    """
    try:
        record = loads_bounded(data, max_chars=MAX_MARKER_BYTES, max_depth=MAX_MARKER_DEPTH)
    except JsonRefused as exc:
        return f"{MARKER_NAME} is not usable JSON: {exc}"
    if not isinstance(record, dict):
        return "PROVISIONING_PENDING.json is not a JSON object"
    trace_id = record.get("trace_id")
    if not isinstance(trace_id, str) or not trace_id.strip():
        return "PROVISIONING_PENDING.json has no trace_id"
    mode = record.get("mode")
    if mode is None:
        mode = WaitMode.CONTINUE if changed_anything else WaitMode.BLOCK
    elif mode not in ("block", "continue"):
        return f"PROVISIONING_PENDING.json has mode {mode!r}; use block or continue"
    return Pending(
        trace_id=trace_id,
        regime=_regime_text(record.get("regime")) or trace_id,
        handle=str(record.get("handle") or ""),
        mode=WaitMode(mode),
    )


def take_marker(path: Path) -> bytes | None:
    """Read and delete the marker: consumed once, so a stale file cannot re-trigger a wait on resume.

    Raises AgentFileRefused (the marker is removed all the same) when something other than a
    small regular file stands there: a FIFO or a link is never opened blocking nor followed.
    """
    try:
        return read_regular(path, MAX_MARKER_BYTES)
    except FileNotFoundError:
        return None
    finally:
        with contextlib.suppress(OSError):  # absent already, or a directory (which stays)
            path.unlink()
