"""The hand-over between the control bridge's thread and the loop: admitted orders and a status view.

The bridge only admits and puts; the loop takes what it is ready for at its own safe points
(the iteration head, the prompt render, the park wait). Nothing here runs loop operations.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import attrs

from crucible_core.contract.records import value_methods
from crucible_core.control.orders import INTERRUPTING


@value_methods
@attrs.frozen(repr=False, eq=False)
class Order:
    """One admitted operator input: the ledger key to settle and what was asked."""

    key: str
    input: str
    payload: dict[str, Any] = attrs.field(factory=dict)
    unrecorded: bool = False  # a stop/abort the ledger could not write: still obeyed, never settled


class Inbox:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._orders: list[Order] = []
        self._status: dict[str, Any] = {"phase": "starting", "iter": 0}
        self.abort_requested = False
        # Called on the bridge thread after an abort is queued, to interrupt a running child.
        self.on_abort: Callable[[], None] | None = None

    def put(self, order: Order) -> None:
        with self._cond:
            self._orders.append(order)
            if order.input in INTERRUPTING:
                self.abort_requested = True
            self._cond.notify_all()
        if order.input in INTERRUPTING and self.on_abort is not None:
            self.on_abort()

    def take(self, inputs: frozenset[str] | None = None) -> list[Order]:
        """Remove and return the queued orders (only those among `inputs` when given), oldest first."""
        with self._cond:
            taken = [o for o in self._orders if inputs is None or o.input in inputs]
            self._orders = [o for o in self._orders if inputs is not None and o.input not in inputs]
            return taken

    def peek(self, inputs: frozenset[str]) -> list[Order]:
        """The queued orders among `inputs`, left in place (the broker's steer_inbox reads them)."""
        with self._cond:
            return [o for o in self._orders if o.input in inputs]

    def wait(self, timeout: float | None) -> None:
        """Block until an order arrives or `timeout` passes (the park loop's sleep)."""
        with self._cond:
            if not self._orders:
                self._cond.wait(timeout)

    def publish(self, **fields: Any) -> None:
        with self._cond:
            self._status.update(fields)

    def status(self) -> dict[str, Any]:
        with self._cond:
            return dict(self._status)
