"""The control bridge's commands and their payloads, validated as pure functions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from crucible_core.control.caps import BOUNDS, cap_value
from crucible_core.control.orders import BY_NAME, MUTATING, STOPPING, Payload
from crucible_core.durations import parse_duration
from crucible_core.errors import UsageError

READ_ONLY = frozenset({"status"})
# MUTATING (every operator order) and STOPPING come from the one table in control/orders.py.
__all__ = ["MUTATING", "READ_ONLY", "STOPPING", "BadRequest", "budget_payload", "payload_of"]
MAX_TEXT_BYTES = 64 * 1024


class BadRequest(Exception):
    """A request the bridge refuses before anything is recorded."""


def _text(request: Mapping[str, Any], name: str, *, required: bool) -> str | None:
    value = request.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise BadRequest(f"{name} must be a non-empty string")
    if len(value.encode("utf-8")) > MAX_TEXT_BYTES:
        raise BadRequest(f"{name} is longer than {MAX_TEXT_BYTES} bytes")
    return value


def budget_payload(request: Mapping[str, Any]) -> dict[str, Any]:
    """The caps a set-budget carries, each finite and in range (control/caps.py)."""
    out: dict[str, Any] = {}
    for name in BOUNDS:
        raw = request.get(name)
        if raw is None:
            continue
        if name == "max_time" and isinstance(raw, str):
            try:
                raw = parse_duration(raw)
            except UsageError as exc:
                raise BadRequest(exc.render()) from exc
        try:
            out[name] = cap_value(name, raw)
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
    if not out:
        raise BadRequest("set-budget needs at least one of iterations, max_cost, max_time")
    return out


def payload_of(cmd: str, request: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a mutating command that the ledger records and idempotency compares."""
    order = BY_NAME.get(cmd)
    if order is None:
        raise BadRequest(f"unknown command {cmd!r} (known: {', '.join(sorted(MUTATING | READ_ONLY))})")
    if order.payload is Payload.TEXT:
        return {"text": _text(request, "text", required=True)}
    if order.payload is Payload.REGIME:
        return {"regime": _text(request, "regime", required=True)}
    if order.payload is Payload.BUDGET:
        return budget_payload(request)
    reason = _text(request, "reason", required=False)
    return {"reason": reason} if reason is not None else {}
