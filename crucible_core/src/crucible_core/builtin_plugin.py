"""Behaviour crucible-core ships as its own default plugin: the run reporters."""

from __future__ import annotations

from crucible_core.hookspecs import hookimpl
from crucible_core.protocols import ReporterFactory
from crucible_core.registry import Register


@hookimpl
def crucible_register_reporters(register: Register[ReporterFactory]) -> None:
    from crucible_core.reporters import console, jsonl

    register("console", console.ConsoleReporter.from_context)
    register("headless", console.HeadlessReporter.from_context)
    register("jsonl", jsonl.JsonlReporter.from_context)
