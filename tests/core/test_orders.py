"""The operator vocabulary is one table: the bridge, the ledger's resume rules and the CLI read it."""

from __future__ import annotations

import pytest

from crucible_core.cli import control_cmd, main
from crucible_core.control import commands, orders
from crucible_core.control.commands import BadRequest, payload_of


def test_every_order_is_admitted_by_the_bridge_and_offered_by_the_cli() -> None:
    assert frozenset(order.name for order in orders.ORDERS) == commands.MUTATING
    lazy = main.BUILTIN_COMMANDS
    for order in orders.ORDERS:
        assert order.command in lazy, order
        module, _, attribute = lazy[order.command][0].partition(":")
        assert module == "crucible_core.cli.control_cmd" and attribute == order.command
        command = control_cmd.OPERATOR_COMMANDS[order.command]
        assert getattr(control_cmd, order.command) is command
        assert command.help == order.help


def test_payloads_follow_the_table() -> None:
    assert payload_of(orders.STEER, {"text": "go"}) == {"text": "go"}
    assert payload_of(orders.RESCOPE, {"regime": "wide"}) == {"regime": "wide"}
    assert payload_of(orders.SET_BUDGET, {"iterations": 3}) == {"iterations": 3}
    assert payload_of(orders.PAUSE, {"reason": "lunch"}) == {"reason": "lunch"}
    with pytest.raises(BadRequest):
        payload_of(orders.STEER, {})
    with pytest.raises(BadRequest, match="unknown command"):
        payload_of("launch", {})


def test_resume_rules_cover_every_order_once() -> None:
    groups = [
        orders.OVERRIDDEN_BY_RESUME,
        orders.REDELIVERED_ON_RESUME,
        orders.PAUSE_LEVEL,
        orders.REAPPLIED_ON_RESUME,
    ]
    assert sorted(name for group in groups for name in group) == sorted(orders.BY_NAME)
    assert {orders.STOP, orders.ABORT} == orders.STOPPING
    assert {orders.ABORT} == orders.INTERRUPTING
    assert {orders.APPROVE, orders.DENY} == orders.NEEDS_PENDING_APPROVAL
