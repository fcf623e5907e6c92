"""Helpers for plan tests: the core task kinds and crucible-plugin-task-agent's, writing a plan file,
running it in-process."""

from __future__ import annotations

import textwrap
import tomllib
from pathlib import Path
from typing import Any

from crucible_core.plan.builtin_kinds import register_core_kinds
from crucible_core.plan.executor import ExecutorConfig, PlanExecutor, PlanReport, PriorRun
from crucible_core.plan.kinds import TaskKindSpec
from crucible_core.plan.load import plan_from_data
from crucible_core.plan.validate import validate
from crucible_core.registry import Registry
from crucible_core.session_log import SessionLog, read_events
from crucible_task_agent.kinds import KINDS as TASK_AGENT_KINDS


def core_kinds() -> Registry[TaskKindSpec]:
    registry: Registry[TaskKindSpec] = Registry("task kind")
    register_core_kinds(lambda name, spec: registry.add(name, spec, "core"))
    for name, spec in TASK_AGENT_KINDS.items():
        registry.add(name, spec, "crucible-plugin-task-agent")
    return registry


def parse(text: str, kinds: Registry[TaskKindSpec] | None = None, **validate_args: Any):
    kinds = kinds or core_kinds()
    return validate(plan_from_data(tomllib.loads(textwrap.dedent(text)), kinds), kinds, **validate_args)


def run_plan(
    tmp_path: Path,
    text: str,
    *,
    kinds: Registry[TaskKindSpec] | None = None,
    resume: bool = False,
    **config: Any,
) -> tuple[PlanReport, list[dict[str, Any]]]:
    kinds = kinds or core_kinds()
    plan = parse(text, kinds)
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    state = tmp_path / "state"
    log_path = state / "session.jsonl"
    prior = PriorRun.read(log_path) if resume else None
    log = SessionLog(log_path)
    try:
        report = PlanExecutor(plan, kinds, log, ExecutorConfig(workspace, state, **config), prior).run()
    finally:
        log.close()
    return report, list(read_events(log_path))


def results(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["task"]: e for e in events if e["kind"] == "task_result"}
