"""The task kinds crucible-core ships: command, evaluate, agent, top_k and the engine operations."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from crucible_core.contract.reading import Direction
from crucible_core.plan.kinds import Attempt, Outcome, Register, TaskContext, TaskKindSpec
from crucible_core.plan.output import finite_score, last_json_object, reported_cost

if TYPE_CHECKING:  # the supervisor loads when a task first runs, not when the kinds are registered
    from crucible_core import process

ENGINE_OPS = ("propose", "apply", "measure", "grade", "decide")


@attrs.frozen
class CommandFields:
    command: str


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


@attrs.frozen
class EngineFields:
    op: str
    source: str | None = None
    tiebreak: str | None = None


def _shell(context: TaskContext, command: str, extra_env: dict[str, str] | None = None) -> process.Completed:
    env = dict(context.env)
    if extra_env:
        env.update(extra_env)
    if context.shell is not None:  # a task runner carries the command out elsewhere
        return context.shell(command, env, context.timeout)
    from crucible_core import process

    return process.run(command, cwd=context.workdir, env=env, timeout=context.timeout)


def _tail(text: str, limit: int = 400) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def _spawned(done: process.Completed) -> Attempt | None:
    """A spawn failure is transport-class; anything else the child did is its own result."""
    if done.spawn_error is not None:
        return Attempt(Outcome.TRANSPORT, note=done.describe_failure(), transport="command")
    return None


def run_command(context: TaskContext) -> Attempt:
    fields: CommandFields = context.task.fields
    done = _shell(context, fields.command)
    transport = _spawned(done)
    if transport is not None:
        return transport
    output, _why = last_json_object(done.stdout)
    cost = reported_cost(output)
    if not done.ok:
        note = done.describe_failure()
        if done.stderr.strip():
            note += f": {_tail(done.stderr)}"
        return Attempt(Outcome.FAIL, output=output, note=note, cost_usd=cost)
    return Attempt(Outcome.PASS, output=output, cost_usd=cost, metric=finite_score(output))


def run_evaluate(context: TaskContext) -> Attempt:
    fields: EvaluateFields = context.task.fields
    done = _shell(context, fields.command)
    transport = _spawned(done)
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


def run_agent(context: TaskContext) -> Attempt:
    """Standalone plans run an agent task through a stand-in command (`--agent-cmd`)."""
    fields: AgentFields = context.task.fields
    if context.agent_runner is not None:
        return context.agent_runner(context)
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
    done = _shell(context, context.agent_cmd, extra)
    if done.spawn_error is not None:
        return Attempt(Outcome.TRANSPORT, note=done.describe_failure(), transport="agent")
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


def _engine_runner(op: str) -> Callable[[TaskContext], Attempt]:
    def run(context: TaskContext) -> Attempt:
        if context.engine is None:
            # Validation refuses engine kinds without a World and Judge; reaching here is a bug.
            return Attempt(Outcome.TRANSPORT, note=f"no engine to run {op}", transport="other")
        return context.engine.run_operation(op, context)

    return run


def register_core_kinds(register: Register) -> None:
    register(
        "command",
        TaskKindSpec(
            "command", CommandFields, run_command, describe="a shell command in the workspace", remote=True
        ),
    )
    register(
        "evaluate",
        TaskKindSpec(
            "evaluate", EvaluateFields, run_evaluate, describe="a graded measurement command", remote=True
        ),
    )
    register(
        "agent",
        TaskKindSpec(
            "agent",
            AgentFields,
            run_agent,
            exclusive=True,
            allows_session=True,
            describe="an agent turn driven by a prompt",
        ),
    )
    register(
        "top_k",
        TaskKindSpec(
            "top_k",
            TopKFields,
            run_top_k,
            may_emit=False,
            reads_score=True,
            allows_settled_join=False,
            needs_dependencies=True,
            describe="the k best dependency outputs by score",
        ),
    )
    for op in ENGINE_OPS:
        register(
            f"engine_{op}",
            TaskKindSpec(
                f"engine_{op}",
                EngineFields,
                _engine_runner(op),
                exclusive=True,
                may_emit=False,
                engine=True,
                allows_session=op == "propose",
                allows_settled_join=False,
                describe=f"the engine's {op} operation (needs a World and a frozen Judge)",
            ),
        )
