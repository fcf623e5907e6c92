"""The session wire's kinds a plain run never writes, defined the first time one is needed.

A run of a command agent writes some fifteen of the wire's 35 event kinds; the others (an
agent's own events, plans and their tasks, approvals, escalations, the broker's calls, services,
artifacts, pull requests) and the records nested in them were defined at every start, about a
third of `wire.py`'s import (issue 27, docs/performance.md). They live here, and `wire` loads
this module the first time one of its names is asked for (`wire.__getattr__`) or a line of one
of these kinds is decoded, and takes over every name defined here (`wire._adopt`), so
`wire.PlanAdmitted`, `wire.KINDS` and the encoding and decoding are what they were. Import the
names from `wire`, never from here; nothing here imports `wire`.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeAlias

import attrs

from crucible_core.contract.records import value_methods
from crucible_core.contract.wire_fields import (
    RawStream,
    RecoveryClass,
    SessionAction,
    _refuse,
    _wire_stage,
    ask_key_problem,
    ask_workflow_problem,
    omitted,
    omitted_if_none,
    ours,
    renamed,
)


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class PrLinkWire:
    url: str
    repo: str
    name: str = ""
    branch: str = ""


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class PlanTaskWire:
    """One admitted plan task (what a viewer draws; `stage = "epilogue"` is never part of a verdict)."""

    name: str
    kind: str
    depends_on: list[str] = attrs.field(factory=list)
    session: str = ""
    needs: str = ""
    required: bool = False
    join: str = ""
    stage: str = attrs.field(default="", converter=_wire_stage)  # "iteration" or "epilogue"
    over: str = ""
    max_fanout: int = 0


# -- agent events (nested under {"kind":"agent","event":{...}}) -------------------------------


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class AgentMeta:
    KIND: ClassVar[str] = "meta"
    model: str = ""


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class AgentLog:
    KIND: ClassVar[str] = "log"
    level: str = ""
    label: str = ""
    value: str | None = None


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class AgentGate:
    KIND: ClassVar[str] = "gate"
    phase: str = ""
    name: str = ""
    status: str = ""
    error: str | None = None


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class AgentInit:
    KIND: ClassVar[str] = "init"
    model: str = ""
    tools: int = 0
    agents: int = 0
    # ours: what our harnesses report at session start
    harness: str | None = ours()
    version: str | None = ours()
    permission_mode: str | None = ours()


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class AgentThinking:
    KIND: ClassVar[str] = "thinking"
    delta: str = ""


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class AgentText:
    KIND: ClassVar[str] = "text"
    delta: str = ""
    truncated: dict[str, Any] | None = ours()  # ours: what the per-turn output cap left out


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class AgentTool:
    KIND: ClassVar[str] = "tool"
    name: str = ""
    summary: str = ""
    subagent: bool = False
    input: Any = omitted()
    result: str | None = omitted()
    id: str | None = ours()  # ours: pairs a call with its result
    is_error: bool | None = ours()


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class AgentTokens:
    KIND: ClassVar[str] = "tokens"
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total: int = 0
    rate: float | None = None
    cost_usd: float | None = None


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class ModelUsage:
    model: str = ""
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost_usd: float = 0.0


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class AgentOtelSummary:
    KIND: ClassVar[str] = "otel_summary"
    cost_usd: float = 0.0
    total: int = 0
    models: list[ModelUsage] = attrs.field(factory=list)
    api_requests: int = 0
    api_ms: float = 0.0
    active_seconds: float = 0.0


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class AgentRetry:
    KIND: ClassVar[str] = "retry"
    attempt: int = 0
    max: int = 0
    error: str = ""
    delay_ms: float | None = ours()


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class AgentError:
    KIND: ClassVar[str] = "error"
    error_type: str = ""
    message: str = ""


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class AgentResult:
    KIND: ClassVar[str] = "result"
    subtype: str = ""
    is_error: bool = False
    turns: int = 0
    cost_usd: float = 0.0
    error: str | None = None
    duration_ms: float | None = ours()
    text: str | None = ours()


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class AgentExit:
    KIND: ClassVar[str] = "exit"
    code: int = 0


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class AgentSandboxLog:
    """One line of the sandbox's own log, replayed into the turn's stream, with the engine's
    verdict on whether it reports a policy denial (so no consumer re-derives it from the text)."""

    KIND: ClassVar[str] = "sandbox_log"
    ts_ms: int = 0
    level: str = ""
    target: str = ""  # the subsystem that wrote it (proxy, supervisor, ...)
    message: str = ""
    denial: bool = False  # it reports a blocked egress attempt
    fields: dict[str, str] = omitted(factory=dict)  # the line's own structured fields, verbatim


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class AgentRaw:
    KIND: ClassVar[str] = "raw"
    text: str
    stream: RawStream


AgentEvent: TypeAlias = (
    AgentMeta
    | AgentLog
    | AgentGate
    | AgentInit
    | AgentThinking
    | AgentText
    | AgentTool
    | AgentTokens
    | AgentOtelSummary
    | AgentRetry
    | AgentError
    | AgentResult
    | AgentExit
    | AgentSandboxLog
    | AgentRaw
)
AGENT_KINDS: dict[str, type] = {
    c.KIND: c
    for c in (
        AgentMeta,
        AgentLog,
        AgentGate,
        AgentInit,
        AgentThinking,
        AgentText,
        AgentTool,
        AgentTokens,
        AgentOtelSummary,
        AgentRetry,
        AgentError,
        AgentResult,
        AgentExit,
        AgentSandboxLog,
        AgentRaw,
    )
}


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class AgentSession:
    KIND: ClassVar[str] = "agent_session"
    session: str
    action: SessionAction
    turn: int


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class Agent:
    KIND: ClassVar[str] = "agent"
    event: AgentEvent


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class Escalation:
    KIND: ClassVar[str] = "escalation"
    category: str
    reason: str
    evidence: str = ""
    iter: int | None = ours()


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class PrLinks:
    KIND: ClassVar[str] = "pr_links"
    links: list[PrLinkWire]


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class PlanAdmitted:
    KIND: ClassVar[str] = "plan_admitted"
    plan_version: int
    reason: str = ""
    budget_usd: float | None  # null: the graph has no cap of its own (a scored workflow's iteration)
    tasks: list[PlanTaskWire]


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class Ask:
    """One proposed unit of work for an orchestrator; refused on decode as on construction."""

    key: str = attrs.field(validator=_refuse(ask_key_problem))
    workflow: str = attrs.field(validator=_refuse(ask_workflow_problem))
    params: Any = None


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class AsksEmitted:
    KIND: ClassVar[str] = "asks_emitted"
    task: str
    asks: list[Ask]


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class TaskResult:
    KIND: ClassVar[str] = "task_result"
    task: str
    status: str  # pass, fail, transport, skipped, blocked, truncated
    plan_version: int = 0
    task_kind: str = ""
    iter: int = 0
    digest: str = ""
    job: str = ""
    attempts: int = 0
    cost_usd: float = 0.0
    metric: float | None = omitted()
    output: Any = omitted_if_none()  # `{}` is an output (the task printed one), not an absence
    note: str = ""
    secs: float = 0.0
    trace_id: str = ""
    span_id: str = ""
    # ours (the plan executor): why a task was blocked, and a transport failure's class
    blocked: dict[str, Any] | None = ours()
    transport: str | None = ours()


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class ApprovalWait:
    KIND: ClassVar[str] = "approval_wait"
    handle: str
    trace_id: str = ""
    mode: str
    task: str | None = omitted()
    source: Any = omitted()
    park: str | None = omitted()
    iter: int | None = ours()
    regime: str | None = ours()
    reason: str | None = ours()
    marker: str | None = ours()


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class ApprovalResolved:
    KIND: ClassVar[str] = "approval_resolved"
    outcome: str
    reason: str = ""
    trace_id: str = omitted("")
    by: str | None = omitted()
    source: str | None = omitted()
    handle: str | None = ours()
    waited_s: float | None = ours()


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class OutputRefused:
    KIND: ClassVar[str] = "output_refused"
    output_kind: str
    bound: str
    tool: str = ""
    detail: str = ""
    requested: str | None = ours()  # the target the refused write named
    iter: int | None = ours()


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class Recovery:
    KIND: ClassVar[str] = "recovery"
    cls: RecoveryClass = renamed("class")
    iter: int = 0
    detail: str = ""


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class Steer:
    """Ours: an operator steer delivered with an iteration's prompt."""

    KIND: ClassVar[str] = "steer"
    iter: int = 0
    text: str = ""
    status: str = ""


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class OutputAdmitted:
    """Ours: one mediated write the broker's mediation point admitted (a resume recounts them)."""

    KIND: ClassVar[str] = "output_admitted"
    output_kind: str
    target: str | None = None
    tool: str = ""
    used: int = 0
    count: int = 0
    iter: int | None = ours()


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class BrokerCall:
    """Ours: an agent's call of a broker tool (arguments bounded, redacted like every event)."""

    KIND: ClassVar[str] = "broker_call"
    tool: str
    iter: int | None = None
    arguments: Any = None


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class BrokerResult:
    """Ours: what a broker tool call returned, or why it failed."""

    KIND: ClassVar[str] = "broker_result"
    tool: str
    iter: int | None = None
    ok: bool = False
    result: Any = None
    error: str | None = None


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class ServiceStart:
    """Ours: a run service was started (its loopback port, and the task whose dispatch needed it)."""

    KIND: ClassVar[str] = "service_start"
    service: str
    port: int
    task: str = ""
    attempt: int = 1  # 1 for the first start of this process, then each restart
    resolution: str = ""  # the services' identity digest this process resolved


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class ServiceReady:
    """Ours: a run service answered its readiness probe."""

    KIND: ClassVar[str] = "service_ready"
    service: str
    secs: float = 0.0


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class ServiceExit:
    """Ours: a run service ended: its exit status, and whether it stopped on the signal or was killed."""

    KIND: ClassVar[str] = "service_exit"
    service: str
    status: int | None = None
    how: str = "stopped"  # stopped (exited after the signal), killed (after the grace), exited (on its own)
    note: str = ""


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class ServiceReclaim:
    """Ours: a resumed run ran a service's catalog reclaim command (no instance was started)."""

    KIND: ClassVar[str] = "service_reclaim"
    service: str
    status: int | None = None  # its exit status; None when it could not run
    note: str = ""


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class ArtifactWire:
    """Ours: one declared artifact's embed or upload as collected: the file taken, or why none was."""

    path: str  # the declared [[workspace.artifact]] path
    mode: str  # embed or upload
    status: str  # taken, missing (nothing matches yet) or refused (see note)
    name: str = ours("")  # the workspace-relative path of the file taken
    bytes: int | None = ours()
    digest: str = ours("")  # sha256:<hex> of what the run record keeps
    truncated: bool | None = ours()  # an embed cut at its bound
    note: str = ours("")


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class Artifacts:
    """Ours: the declared artifacts collected after a keep and at run end (the content is never logged)."""

    KIND: ClassVar[str] = "artifacts"
    iter: int = 0
    items: list[ArtifactWire] = attrs.field(factory=list)
    notes: list[str] = ours(factory=list)  # entries passed over: links, FIFOs, a walk cut at its bound
