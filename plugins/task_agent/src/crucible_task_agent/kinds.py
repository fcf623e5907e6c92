"""The agent, evaluate and top_k task kinds: their fields, their rules and how one attempt runs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from crucible_core.api import (
    Attempt,
    Direction,
    Outcome,
    Task,
    TaskContext,
    TaskKindSpec,
    finite_score,
    last_json_object,
    reported_cost,
    spawn_failure,
    task_shell,
)
from crucible_task_agent.turn import run_agent_turn


@attrs.frozen
class EvaluateFields:
    command: str
    threshold: float | None = None
    direction: Direction | None = None


@attrs.frozen
class AgentFields:
    prompt: str
    harness: str | None = None
    model: str | None = None
    effort: str | None = None


@attrs.frozen
class TopKFields:
    k: int
    direction: Direction


def run_evaluate(context: TaskContext) -> Attempt:
    fields: EvaluateFields = context.task.fields
    done = task_shell(context, fields.command)
    transport = spawn_failure(done)
    if transport is not None:
        return transport
    output, why = last_json_object(done.stdout)
    cost = reported_cost(output)
    if not done.ok:
        return Attempt(Outcome.FAIL, output=output, note=done.describe_failure(), cost_usd=cost)
    if output is None:
        return Attempt(Outcome.FAIL, note=f"evaluate needs a JSON object: {why}")
    verdict = output.get("pass", True)
    if not isinstance(verdict, bool):
        return Attempt(Outcome.FAIL, output=output, note=f"pass must be true or false, got {verdict!r}")
    if not verdict:
        return Attempt(
            Outcome.FAIL, output=output, note="the evaluation reported pass = false", cost_usd=cost
        )
    score = finite_score(output)
    if fields.threshold is not None and fields.direction is not None:
        if score is None:
            return Attempt(Outcome.FAIL, output=output, note="a thresholded evaluate needs a finite score")
        lower = fields.direction is Direction.LOWER
        within = score <= fields.threshold if lower else score >= fields.threshold
        if not within:
            sign = "<=" if lower else ">="
            note = f"score {score} is not {sign} threshold {fields.threshold}"
            return Attempt(Outcome.FAIL, output=output, note=note, cost_usd=cost, metric=score)
    return Attempt(Outcome.PASS, output=output, cost_usd=cost, metric=score)


def evaluate_problems(task: Task, by_name: Mapping[str, Task]) -> list[str]:
    fields: EvaluateFields = task.fields
    problems = []
    if (fields.threshold is None) != (fields.direction is None):
        problems.append("threshold and direction go together")
    elif fields.threshold is not None and fields.threshold != fields.threshold:
        problems.append("threshold must be a finite number")
    if fields.threshold is not None and task.emits and "score" not in task.emits:
        problems.append('a thresholded evaluate compares score, but its emits omits "score"')
    return problems


def run_agent(context: TaskContext) -> Attempt:
    """A turn through the run's backend; standalone plans run a stand-in command (`--agent-cmd`)."""
    fields: AgentFields = context.task.fields
    if context.agent is not None:
        return run_agent_turn(context, context.agent)
    if context.agent_cmd is None:
        note = "no agent runner: pass --agent-cmd to `crucible plan run`"
        return Attempt(Outcome.TRANSPORT, note=note, transport="agent")
    extra = {
        "CRUCIBLE_PROMPT": fields.prompt,
        "CRUCIBLE_HARNESS": fields.harness or "",
        "CRUCIBLE_MODEL": fields.model or "",
        "CRUCIBLE_EFFORT": fields.effort or "",
    }
    if context.mcp_servers:  # needed MCP services, as "service.<name>", in the usual mcpServers shape
        extra["CRUCIBLE_MCP_CONFIG"] = json.dumps({"mcpServers": dict(context.mcp_servers)})
    done = task_shell(context, context.agent_cmd, extra)
    transport = spawn_failure(done, "agent")
    if transport is not None:
        return transport
    output, why = last_json_object(done.stdout)
    cost = reported_cost(output)
    if not done.ok:
        return Attempt(Outcome.FAIL, output=output, note=done.describe_failure(), cost_usd=cost)
    if output is None:
        return Attempt(Outcome.FAIL, note=f"the agent turn returned no JSON object: {why}")
    return Attempt(Outcome.PASS, output=output, cost_usd=cost, metric=finite_score(output))


def run_top_k(context: TaskContext) -> Attempt:
    """The k best dependency outputs by numeric score; ties keep declaration order."""
    fields: TopKFields = context.task.fields
    ranked: list[tuple[float, int, str]] = []
    for index, name in enumerate(context.task.depends_on):
        if name not in context.inputs:
            continue  # did not pass: a lossy fan-out just does not rank
        score = finite_score(context.inputs[name])
        if score is None:
            return Attempt(Outcome.FAIL, note=f"input {name!r} carries no finite numeric score")
        ranked.append((score if fields.direction is Direction.LOWER else -score, index, name))
    if not ranked:
        return Attempt(Outcome.FAIL, note="no dependency passed with a score to rank")
    ranked.sort()
    best = ranked[: fields.k]
    chosen: list[dict[str, Any]] = [
        {"task": name, "score": finite_score(context.inputs[name]), "output": context.inputs[name]}
        for _, _, name in best
    ]
    return Attempt(Outcome.PASS, output={"top": chosen, "k": fields.k}, metric=chosen[0]["score"])


def top_k_problems(task: Task, by_name: Mapping[str, Task]) -> list[str]:
    fields: TopKFields = task.fields
    return ["k must be at least 1"] if fields.k < 1 else []


KINDS: dict[str, TaskKindSpec] = {
    "evaluate": TaskKindSpec(
        "evaluate",
        EvaluateFields,
        run_evaluate,
        describe="a graded measurement command",
        remote=True,
        field_problems=evaluate_problems,
    ),
    "agent": TaskKindSpec(
        "agent",
        AgentFields,
        run_agent,
        exclusive=True,
        allows_session=True,
        describe="an agent turn driven by a prompt",
    ),
    "top_k": TaskKindSpec(
        "top_k",
        TopKFields,
        run_top_k,
        may_emit=False,
        reads_score=True,
        allows_settled_join=False,
        needs_dependencies=True,
        describe="the k best dependency outputs by score",
        field_problems=top_k_problems,
    ),
}
