"""Behaviour crucible-core ships as its own default plugin: reporters, flow renderings, plan task kinds,
output kinds, broker tools, init templates."""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.hookspecs import hookimpl

# Types only: `crucible plugins` (and every command) loads this module and calls its registration
# hooks, so what a driver needs is imported when the driver is first used, not here.
if TYPE_CHECKING:
    from crucible_core.broker.outputs import OutputKindSpec
    from crucible_core.broker.tools import BrokerTool
    from crucible_core.flow.model import FlowModel
    from crucible_core.flow.render import FlowRenderer
    from crucible_core.init_templates import InitTemplate
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


def _render_json(model: FlowModel) -> str:
    from crucible_core.flow.render import render_json

    return render_json(model)


def _render_dot(model: FlowModel) -> str:
    from crucible_core.flow.render import render_dot

    return render_dot(model)


def _render_mermaid(model: FlowModel) -> str:
    from crucible_core.flow.render import render_mermaid

    return render_mermaid(model)


@hookimpl
def crucible_register_flow_renderers(register: Register[FlowRenderer]) -> None:
    register("json", _render_json)
    register("dot", _render_dot)
    register("mmd", _render_mermaid)


@hookimpl
def crucible_register_task_kinds(register: Register[TaskKindSpec]) -> None:
    from crucible_core.plan.builtin_kinds import register_core_kinds

    register_core_kinds(register)


@hookimpl
def crucible_register_output_kinds(register: Register[OutputKindSpec]) -> None:
    from crucible_core.broker.outputs import BUILTIN_KINDS

    for spec in BUILTIN_KINDS:
        register(spec.name, spec)


@hookimpl
def crucible_register_broker_tools(register: Register[BrokerTool]) -> None:
    from crucible_core.run.broker_tools import BUILTIN_TOOLS

    for tool in BUILTIN_TOOLS:
        register(tool.name, tool)


@hookimpl
def crucible_register_init_templates(register: Register[InitTemplate]) -> None:
    from crucible_core.init_templates import CORE_TEMPLATES

    for template in CORE_TEMPLATES:
        register(template.name, template)


@hookimpl
def crucible_before_turn(context: TurnContext) -> TurnAdditions | None:
    """The services [agent].services names, for this turn (started at the first turn that needs them)."""
    from crucible_core.run.service_turns import turn_additions

    return turn_additions(context)
