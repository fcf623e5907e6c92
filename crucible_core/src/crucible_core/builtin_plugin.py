"""Behaviour crucible-core ships as its own default plugin: reporters, plan task kinds, service turns."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from crucible_core.hookspecs import hookimpl
from crucible_core.registry import Deferred

# Types only: `crucible plugins` (and every command) loads this module and calls its registration
# hooks, so what a driver needs is imported when the driver is first used, not here.
if TYPE_CHECKING:
    from crucible_core.plan.kinds import TaskKindSpec
    from crucible_core.protocols import Reporter, ReporterContext, ReporterFactory
    from crucible_core.registry import Register
    from crucible_core.run.lifecycle import TurnAdditions, TurnContext


def _console(ctx: ReporterContext) -> Reporter:
    from crucible_core.reporters.console import ConsoleReporter

    return ConsoleReporter.from_context(ctx)


def _headless(ctx: ReporterContext) -> Reporter:
    from crucible_core.reporters.console import HeadlessReporter

    return HeadlessReporter.from_context(ctx)


def _jsonl(ctx: ReporterContext) -> Reporter:
    from crucible_core.reporters.jsonl import JsonlReporter

    return JsonlReporter.from_context(ctx)


@hookimpl
def crucible_register_reporters(register: Register[ReporterFactory]) -> None:
    register("console", _console)
    register("headless", _headless)
    register("jsonl", _jsonl)


# The built-in task kinds are registered by name and built on first use: their specs bring in the
# plan's field classes (a large part of what listing plugins would cost otherwise). The names are written out here; tests/core/test_plugins.py checks them
# against what is built.
CORE_TASK_KINDS = (
    "command",
    *(f"engine_{op}" for op in ("propose", "apply", "measure", "grade", "decide")),
)


@functools.cache
def _core_task_kinds() -> dict[str, TaskKindSpec]:
    from crucible_core.plan.builtin_kinds import register_core_kinds

    built: dict[str, TaskKindSpec] = {}
    register_core_kinds(lambda name, spec, /, **_: built.__setitem__(name, spec))
    return built


def _core_task_kind(name: str) -> TaskKindSpec:
    return _core_task_kinds()[name]


@hookimpl
def crucible_register_task_kinds(register: Register[TaskKindSpec]) -> None:
    for name in CORE_TASK_KINDS:
        register(name, Deferred(functools.partial(_core_task_kind, name)))


@hookimpl
def crucible_before_turn(context: TurnContext) -> TurnAdditions | None:
    """The services [agent].services names, for this turn (started at the first turn that needs them)."""
    if context.run.services is None:  # the run declares no service: its turn module is not loaded
        return None
    from crucible_core.run.service_turns import turn_additions

    return turn_additions(context)
