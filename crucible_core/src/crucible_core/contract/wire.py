"""The session wire: one attrs record per session-log event kind, one cattrs converter, encode and decode.

The shapes follow crucible's contract crate (`crucible-contract/src/session.rs`, `event.rs`,
`identity.rs` in neuralmagic/crucible), so a log written by either engine folds in the other:
the `{"v":1,"ts":...,"kind":...}` envelope, the nested `row` object, agent events nested under
`agent`, the RunIdentity object. Rules kept from there:

- a field the contract always writes is always written (`score: null` included); a field the
  contract omits when empty (`tiebreak`, `phase`, `kept_snap`, `evidence`, ...) is omitted here too;
- decoding is tolerant: unknown fields are ignored, an unknown event kind becomes `Unknown`,
  a blank, torn or mistyped line decodes to None, and a missing optional field takes its default.

Our own additions are optional fields (marked `ours()`, omitted when empty) or additive kinds
(`step`, `turn`, `steer`); nothing of the contract is renamed. Pure: no I/O, nothing imported
from outside `contract`.
"""

from __future__ import annotations

import builtins
import enum
import functools
import json
import math
import operator
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, TypeAlias, get_args, get_origin

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from crucible_core.contract.json_bounds import loads_valid_text, without_lone_surrogates
from crucible_core.contract.records import value_methods
from crucible_core.contract.wire_fields import (
    _NAME,
    _OMIT,
    _OMIT_NONE,
    omitted,
    ours,
)
from crucible_core.contract.wire_fields import MAX_ASK_KEY_BYTES as MAX_ASK_KEY_BYTES
from crucible_core.contract.wire_fields import STAGE_ITERATION as STAGE_ITERATION
from crucible_core.contract.wire_fields import RawStream as RawStream
from crucible_core.contract.wire_fields import RecoveryClass as RecoveryClass
from crucible_core.contract.wire_fields import SessionAction as SessionAction
from crucible_core.contract.wire_fields import ask_key_problem as ask_key_problem
from crucible_core.contract.wire_fields import ask_problem as ask_problem
from crucible_core.contract.wire_fields import ask_workflow_problem as ask_workflow_problem

WIRE_VERSION = 1
IDENTITY_FORMAT = "v2"  # the contract's digest format: v2 added seed_hash to the digest inputs


# -- nested records ---------------------------------------------------------------------------


class EvidenceDisposition(enum.StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class EvidenceEntry:
    task: str
    disposition: EvidenceDisposition
    note: str = omitted("")


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class RowWire:
    """One decided row: the contract's RowWire plus our optional additions (best, sha, cost...)."""

    iter: int
    decision: str
    note: str
    detail: str
    diff: str = ""
    diffstat: str = ""
    score: float | None = None
    tiebreak: float | None = omitted()
    total: int | None = None
    phase: str | None = omitted()
    kept_snap: str | None = omitted()
    evidence: list[EvidenceEntry] = omitted(factory=list)
    candidate_md: str = omitted("")
    # ours: the segment's standing after this row, so a resume restores it without re-deciding
    valid: bool | None = ours()
    best: float | None = ours()
    best_tiebreak: float | None = ours()
    baseline: float | None = ours()
    baseline_total: float | None = ours()
    sha: str | None = ours()
    fingerprint: str | None = ours()
    cost: float | None = ours()
    distress: list[Any] = ours(factory=list)
    # noise handling (docs/search.md): every score of a repeated measure (`score` is their
    # statistic), the margin this decision had to clear, and the segment's baseline-derived margin
    samples: list[float] = ours(factory=list)
    margin: float | None = ours()
    noise_margin: float | None = ours()

    @property
    def deep(self) -> bool:
        """A deep-loop row: not a `wide` tournament row or an `infra` never-started-turn record."""
        return self.phase not in ("wide", "infra")


# A wide round's rows carry phase "wide"; its last row's note starts with WIDE_DECIDED, which is
# how a reader (and a resume) tells a finished round from one that died part-way.
WIDE_PHASE = "wide"
WIDE_DECIDED = "wide round decided"


def wide_round_decided(rows: list[RowWire]) -> bool:
    return any(row.phase == WIDE_PHASE and row.note.startswith(WIDE_DECIDED) for row in rows)


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class ComponentIdentity:
    name: str
    repo: str
    base_sha: str


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class ServiceIdentity:
    """One resolved run service as the identity covers it: its name and the digest of its resolution
    (tool, attested version, executable and its sha256, arguments, secret names, bounds; never a value)."""

    name: str
    digest: str


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class RigIdentity:
    def_ref: str = ""
    backend_name: str = ""
    backend_version: str = ""


def fnv1a_hex(parts: list[bytes]) -> str:
    """FNV-1a 64 over parts, each followed by a 0x01 separator (so ["ab","c"] != ["a","bc"])."""
    h = 0xCBF29CE484222325
    prime = 0x100000001B3
    mask = 0xFFFFFFFFFFFFFFFF
    for part in parts:
        for b in part:
            h = ((h ^ b) * prime) & mask
        h = ((h ^ 0x01) * prime) & mask
    return f"{h:016x}"


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class RunIdentity:
    """The comparability key; `digest` is the hash of every other field in a fixed order."""

    components: list[ComponentIdentity]
    manifest_hash: str
    inject_hash: str
    seed_hash: str = ""
    measure_cmd: str
    direction: str
    rig: RigIdentity = attrs.field(factory=RigIdentity)
    # Ours: the run's resolved services. Digest inputs only when there are any, so a run that
    # declares none keeps the contract's digest exactly.
    services: list[ServiceIdentity] = ours(factory=list)
    digest: str

    @classmethod
    def build(
        cls,
        *,
        components: list[ComponentIdentity],
        manifest_hash: str,
        inject_hash: str,
        measure_cmd: str,
        direction: str,
        seed_hash: str = "",
        rig: RigIdentity | None = None,
        services: list[ServiceIdentity] | None = None,
    ) -> RunIdentity:
        rig = rig or RigIdentity()
        services = services or []
        parts: list[str] = []
        for c in components:
            parts += [c.name, c.repo, c.base_sha]
        parts += [manifest_hash, inject_hash, seed_hash, measure_cmd, direction]
        parts += [rig.def_ref, rig.backend_name, rig.backend_version]
        for service in services:
            parts += ["service", service.name, service.digest]
        digest = f"{IDENTITY_FORMAT}:{fnv1a_hex([p.encode('utf-8') for p in parts])}"
        return cls(
            components=components,
            manifest_hash=manifest_hash,
            inject_hash=inject_hash,
            seed_hash=seed_hash,
            measure_cmd=measure_cmd,
            direction=direction,
            rig=rig,
            services=services,
            digest=digest,
        )

    def differing(self, other: RunIdentity) -> list[str]:
        """Names of the fields (other than the digest) that differ: why two runs are not comparable."""
        return [
            f.name
            for f in attrs.fields(RunIdentity)
            if f.name != "digest" and getattr(self, f.name) != getattr(other, f.name)
        ]


# -- session events ---------------------------------------------------------------------------


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class Start:
    KIND: ClassVar[str] = "start"
    goal: str
    gate: str
    model: str
    namespace: str
    iters_total: int
    max_cost: float
    max_secs: int
    # ours: the drivers, and the budget with "unlimited" kept as null (the contract writes 0)
    version: str | None = ours()
    run_id: str | None = ours()
    manifest: str | None = ours()
    workspace: str | None = ours()
    direction: str | None = ours()
    world: str | None = ours()
    judge: str | None = ours()
    backend: str | None = ours()
    harness: str | None = ours()
    budget: dict[str, Any] | None = ours()
    resumed: bool | None = ours()


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class Phase:
    KIND: ClassVar[str] = "phase"
    phase: str
    iter: int = 0


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class Note:
    KIND: ClassVar[str] = "note"
    msg: str
    level: str | None = ours()  # ours: info, warn or error


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class Row:
    KIND: ClassVar[str] = "row"
    row: RowWire
    solved: bool


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class AgentStart:
    KIND: ClassVar[str] = "agent_start"
    iter: int


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class AgentDone:
    KIND: ClassVar[str] = "agent_done"


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class Budget:
    KIND: ClassVar[str] = "budget"
    spent: float
    elapsed_secs: int
    # ours: active and parked time to the millisecond, and the caps in force
    active_s: float | None = ours()
    parked_s: float | None = ours()
    iterations_done: int | None = ours()
    caps: dict[str, Any] | None = ours()


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class Summary:
    KIND: ClassVar[str] = "summary"
    rows: list[RowWire]
    gate: str
    best_score: float | None = None
    baseline_score: float | None = ours()
    iterations: int | None = ours()
    kept: int | None = ours()
    discarded: int | None = ours()
    kept_shas: list[str] = ours(factory=list)
    spent: float | None = ours()
    active_s: float | None = ours()
    solved: bool | None = ours()


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class Segment:
    KIND: ClassVar[str] = "segment"
    fingerprint: str
    baseline_score: float | None = None
    regime: str
    index: int | None = ours()
    snapshot: str | None = ours()  # ours: the world token the segment starts from
    reason: str | None = ours()


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class Identity:
    KIND: ClassVar[str] = "identity"
    identity: RunIdentity
    base_commit: str | None = ours()
    resumed: bool | None = ours()


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class Finished:
    KIND: ClassVar[str] = "finished"
    outcome: str | None = ours()
    iterations: int | None = ours()


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class Shutdown:
    KIND: ClassVar[str] = "shutdown"
    outcome: str
    reason: str


# our additive kinds


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class Step:
    """Ours: which operation of an iteration is under way (propose, measure, decide...)."""

    KIND: ClassVar[str] = "step"
    step: str
    iter: int = 0


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class Turn:
    """Ours: how one agent turn ended and what it cost."""

    KIND: ClassVar[str] = "turn"
    iter: int = 0
    ok: bool = True
    failure: str | None = None
    cost: float = 0.0
    note: str = ""


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class Exposure:
    """Ours: the run's resolved output bounds and disclosure (`crucible plan exposure`), and its params."""

    KIND: ClassVar[str] = "exposure"
    version: int = 1
    outputs: Any = None
    capabilities: Any = None
    params: dict[str, str] = attrs.field(factory=dict)


@value_methods
@attrs.frozen(kw_only=True, repr=False, eq=False, slots=False)
class Unknown:
    """A kind this reader does not know (a newer writer's): kept as its tag, counted by folds."""

    KIND: ClassVar[str] = "unknown"
    kind: str = "unknown"


# The event kinds defined here, by their wire name: what a run of a command agent writes.
_COMMON_KINDS: dict[str, type] = {
    c.KIND: c
    for c in (
        Start,
        Phase,
        Note,
        Row,
        AgentStart,
        AgentDone,
        Budget,
        Summary,
        Segment,
        Identity,
        Finished,
        Shutdown,
        Step,
        Turn,
        Exposure,
    )
}
# The other kinds' wire names, and every name `wire_rare.py` defines: asking for one of these
# names, or decoding a line of one of these kinds, defines them (tests/core/test_wire.py holds
# both lists to that module).
RARE_KINDS = frozenset(
    {
        "agent_session",
        "agent",
        "escalation",
        "pr_links",
        "plan_admitted",
        "asks_emitted",
        "task_result",
        "approval_wait",
        "approval_resolved",
        "output_refused",
        "recovery",
        "steer",
        "output_admitted",
        "broker_call",
        "broker_result",
        "service_start",
        "service_ready",
        "service_exit",
        "service_reclaim",
        "artifacts",
    }
)
# The contract's kinds, then our additive ones, in the order of crucible's contract crate.
_CONTRACT_KIND_NAMES = (
    "Start",
    "Phase",
    "Note",
    "Row",
    "AgentStart",
    "AgentSession",
    "Agent",
    "AgentDone",
    "Budget",
    "Summary",
    "Escalation",
    "Segment",
    "Identity",
    "PrLinks",
    "Finished",
    "PlanAdmitted",
    "AsksEmitted",
    "TaskResult",
    "Shutdown",
    "ApprovalWait",
    "ApprovalResolved",
    "OutputRefused",
    "Recovery",
)
_OUR_KIND_NAMES = (
    "Step",
    "Turn",
    "Steer",
    "OutputAdmitted",
    "BrokerCall",
    "BrokerResult",
    "Exposure",
    "ServiceStart",
    "ServiceReady",
    "ServiceExit",
    "ServiceReclaim",
    "Artifacts",
)
RARE_NAMES = frozenset(
    {
        "AGENT_KINDS",
        "Agent",
        "AgentError",
        "AgentEvent",
        "AgentExit",
        "AgentGate",
        "AgentInit",
        "AgentLog",
        "AgentMeta",
        "AgentOtelSummary",
        "AgentRaw",
        "AgentResult",
        "AgentRetry",
        "AgentSandboxLog",
        "AgentSession",
        "AgentText",
        "AgentThinking",
        "AgentTokens",
        "AgentTool",
        "ApprovalResolved",
        "ApprovalWait",
        "ArtifactWire",
        "Artifacts",
        "Ask",
        "AsksEmitted",
        "BrokerCall",
        "BrokerResult",
        "CONTRACT_KINDS",
        "Escalation",
        "Event",
        "KINDS",
        "ModelUsage",
        "OUR_KINDS",
        "OutputAdmitted",
        "OutputRefused",
        "PlanAdmitted",
        "PlanTaskWire",
        "PrLinkWire",
        "PrLinks",
        "Recovery",
        "ServiceExit",
        "ServiceReady",
        "ServiceReclaim",
        "ServiceStart",
        "Steer",
        "TaskResult",
    }
)

if TYPE_CHECKING:
    from crucible_core.contract import wire_rare as _rare

    AGENT_KINDS = _rare.AGENT_KINDS
    Agent = _rare.Agent
    AgentError = _rare.AgentError
    AgentEvent = _rare.AgentEvent
    AgentExit = _rare.AgentExit
    AgentGate = _rare.AgentGate
    AgentInit = _rare.AgentInit
    AgentLog = _rare.AgentLog
    AgentMeta = _rare.AgentMeta
    AgentOtelSummary = _rare.AgentOtelSummary
    AgentRaw = _rare.AgentRaw
    AgentResult = _rare.AgentResult
    AgentRetry = _rare.AgentRetry
    AgentSandboxLog = _rare.AgentSandboxLog
    AgentSession = _rare.AgentSession
    AgentText = _rare.AgentText
    AgentThinking = _rare.AgentThinking
    AgentTokens = _rare.AgentTokens
    AgentTool = _rare.AgentTool
    ApprovalResolved = _rare.ApprovalResolved
    ApprovalWait = _rare.ApprovalWait
    ArtifactWire = _rare.ArtifactWire
    Artifacts = _rare.Artifacts
    Ask = _rare.Ask
    AsksEmitted = _rare.AsksEmitted
    BrokerCall = _rare.BrokerCall
    BrokerResult = _rare.BrokerResult
    Escalation = _rare.Escalation
    ModelUsage = _rare.ModelUsage
    OutputAdmitted = _rare.OutputAdmitted
    OutputRefused = _rare.OutputRefused
    PlanAdmitted = _rare.PlanAdmitted
    PlanTaskWire = _rare.PlanTaskWire
    PrLinks = _rare.PrLinks
    PrLinkWire = _rare.PrLinkWire
    Recovery = _rare.Recovery
    ServiceExit = _rare.ServiceExit
    ServiceReady = _rare.ServiceReady
    ServiceReclaim = _rare.ServiceReclaim
    ServiceStart = _rare.ServiceStart
    Steer = _rare.Steer
    TaskResult = _rare.TaskResult

    Event: TypeAlias = (
        Start
        | Phase
        | Note
        | Row
        | AgentStart
        | AgentSession
        | Agent
        | AgentDone
        | Budget
        | Summary
        | Escalation
        | Segment
        | Identity
        | PrLinks
        | Finished
        | PlanAdmitted
        | AsksEmitted
        | TaskResult
        | Shutdown
        | ApprovalWait
        | ApprovalResolved
        | OutputRefused
        | Recovery
        | Step
        | Turn
        | Steer
        | OutputAdmitted
        | BrokerCall
        | BrokerResult
        | Exposure
        | ServiceStart
        | ServiceReady
        | ServiceExit
        | ServiceReclaim
        | Artifacts
        | Unknown
    )
    CONTRACT_KINDS: tuple[type, ...]
    OUR_KINDS: tuple[type, ...]
    KINDS: dict[str, type]
else:

    def __getattr__(name: str) -> Any:
        """A name of the rare kinds (see RARE_NAMES): defined now, then found in this module."""
        if name not in RARE_NAMES:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        _rare_kinds()
        return globals()[name]


_RARE_MODULE = "crucible_core.contract.wire_rare"


def _rare_kinds() -> dict[str, type]:
    """Every event kind by its wire name, the rare ones defined first if they were not yet."""
    if "KINDS" not in globals():
        from crucible_core.contract import wire_rare

        _adopt(vars(wire_rare))
    kinds: dict[str, type] = globals()["KINDS"]
    return kinds


def _adopt(defined: dict[str, Any]) -> None:
    """Take over what `wire_rare` defined: its names become this module's, with the tables of
    every kind (`KINDS`, `CONTRACT_KINDS`, `OUR_KINDS`, the `Event` union); its records are
    written and read by the converter's rules for the wire's own, and an agent event (nested in
    an `agent` line) is structured by its `kind`. Done again by a thread that raced here, to
    the same effect."""
    names = {name: defined[name] for name in RARE_NAMES if name in defined}
    every = {**globals(), **names}
    contract_kinds = tuple(every[name] for name in _CONTRACT_KIND_NAMES)
    our_kinds = tuple(every[name] for name in _OUR_KIND_NAMES)
    agent_kinds: dict[str, type] = names["AGENT_KINDS"]
    _WIRE_CLASSES.update(
        (
            names["PrLinkWire"],
            names["PlanTaskWire"],
            names["ArtifactWire"],
            names["Ask"],
            names["ModelUsage"],
            *agent_kinds.values(),
            *contract_kinds,
            *our_kinds,
        )
    )

    def _agent_structure(value: Any, _type: Any) -> Any:
        if not isinstance(value, Mapping):
            raise TypeError("an agent event is an object")
        kind = value.get("kind")
        cls = agent_kinds.get(kind) if isinstance(kind, str) else None
        if cls is None:
            raise ValueError(f"unknown agent event kind {value.get('kind')!r}")
        return converter.structure(value, cls)

    def _agent_unstructure(value: Any) -> dict[str, Any]:
        return {"kind": value.KIND, **converter.unstructure(value, type(value))}

    converter.register_structure_hook(names["AgentEvent"], _agent_structure)
    converter.register_unstructure_hook(names["AgentEvent"], _agent_unstructure)
    names["Event"] = functools.reduce(operator.or_, (*contract_kinds, *our_kinds, Unknown))
    names["CONTRACT_KINDS"] = contract_kinds
    names["OUR_KINDS"] = our_kinds
    # Every event class declares its wire name as a `KIND` class variable. Set last: its
    # presence tells that the rest is in place.
    names["KINDS"] = {vars(c)["KIND"]: c for c in contract_kinds + our_kinds}
    globals().update(names)


class Line(NamedTuple):
    """One decoded line: the event, when it was written and its place in the log (`seq`), if the
    writer stamped them.

    A NamedTuple, not an attrs class: a resume builds one per line, and a tuple is built in
    about half the time of a frozen attrs instance.
    """

    event: Event
    ts: float | None = None
    seq: int | None = None


# -- the converter ----------------------------------------------------------------------------


def _is_empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def _strict_float(value: Any, _type: Any = None) -> float:
    kind = type(value)
    if kind is float:
        return value  # type: ignore[no-any-return]
    if kind is int:
        return float(value)
    raise TypeError(f"not a number: {value!r}")


def _strict_int(value: Any, _type: Any = None) -> int:
    kind = type(value)
    if kind is int:
        return int(value)
    if kind is float and value.is_integer():
        return int(value)
    raise TypeError(f"not an integer: {value!r}")


def _strict_str(value: Any, _type: Any = None) -> str:
    if type(value) is str:
        return value
    raise TypeError(f"not a string: {value!r}")


def _strict_bool(value: Any, _type: Any = None) -> bool:
    if type(value) is bool:
        return value
    raise TypeError(f"not a boolean: {value!r}")


def _optional_float(value: Any, _type: Any = None) -> float | None:
    kind = type(value)
    if value is None or kind is float:
        return value  # type: ignore[no-any-return]
    if kind is int:
        return float(value)
    raise TypeError(f"not a number: {value!r}")


def _optional_int(value: Any, _type: Any = None) -> int | None:
    if value is None or type(value) is int:
        return value
    return _strict_int(value)


def _optional_str(value: Any, _type: Any = None) -> str | None:
    if value is None or type(value) is str:
        return value
    raise TypeError(f"not a string: {value!r}")


def _optional_bool(value: Any, _type: Any = None) -> bool | None:
    if value is None or type(value) is bool:
        return value
    raise TypeError(f"not a boolean: {value!r}")


# The records the converter writes and reads by the wire's rules (omitted and renamed fields);
# the rare kinds' are added when they are defined.
_WIRE_CLASSES: set[type] = {
    EvidenceEntry,
    RowWire,
    ComponentIdentity,
    RigIdentity,
    RunIdentity,
    *_COMMON_KINDS.values(),
}


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(detailed_validation=False)
    conv.register_structure_hook(float, _strict_float)
    conv.register_structure_hook(int, _strict_int)
    conv.register_structure_hook(str, _strict_str)
    conv.register_structure_hook(bool, _strict_bool)
    conv.register_structure_hook(Any, lambda v, _t: v)
    # the hot optional scalars (every row has several): one call, no nested check, instead of
    # cattrs's union dispatch
    optionals: tuple[tuple[Any, Callable[[Any, Any], Any]], ...] = (
        (float | None, _optional_float),
        (int | None, _optional_int),
        (str | None, _optional_str),
        (bool | None, _optional_bool),
    )
    for optional, check in optionals:
        conv.register_structure_hook(optional, check)
    for enum_cls in (EvidenceDisposition, RawStream, RecoveryClass, SessionAction):
        conv.register_structure_hook(enum_cls, lambda v, t: t(v))
        conv.register_unstructure_hook(enum_cls, lambda v: v.value)
    # a non-finite float has no JSON form; the contract writes it as null
    conv.register_unstructure_hook(float, lambda v: v if math.isfinite(v) else None)

    # Each class's structure and unstructure functions are generated on first use, not here: a
    # process that writes a few kinds (every run's start-up) no longer generates code for all
    # of them. cattrs caches what a factory returns, so the hot paths are unchanged. The rare
    # kinds' records join _WIRE_CLASSES when they are defined (`_adopt`).
    def _overrides(cls: type) -> dict[str, Any]:
        overrides: dict[str, Any] = {}
        for f in attrs.fields(cls):
            kwargs: dict[str, Any] = {}
            if f.metadata.get(_OMIT):
                kwargs["omit_if_default"] = True
            if f.metadata.get(_NAME):
                kwargs["rename"] = f.metadata[_NAME]
            if kwargs:
                overrides[f.name] = override(**kwargs)
        return overrides

    def _is_wire_class(cls: Any) -> bool:
        return cls in _WIRE_CLASSES

    conv.register_structure_hook_factory(
        _is_wire_class, lambda cls: make_dict_structure_fn(cls, conv, **_overrides(cls))
    )
    conv.register_unstructure_hook_factory(
        _is_wire_class, lambda cls: make_dict_unstructure_fn(cls, conv, **_overrides(cls))
    )
    return conv


converter = _make_converter()
# the structure function of each kind, looked up once (decoding is on the hot path of --resume);
# filled as kinds are first met, so a process generates only the functions it uses
_HOOKS: dict[str, tuple[Callable[[Any, Any], Any], type]] = {}


def _hook(kind: str) -> tuple[Callable[[Any, Any], Any], type] | None:
    cls = _COMMON_KINDS.get(kind)
    if cls is None:
        if kind not in RARE_KINDS:
            return None
        cls = _rare_kinds()[kind]
    found = _HOOKS[kind] = (_structurer(cls), cls)
    return found


# -- structuring, written here as well ----------------------------------------------------------
# The same for decoding: cattrs generated each kind's structure function at its first line (the
# console folds every event it shows back from its line), some 5 ms of a run's start. Written
# here on cattrs' own template: the fields without a default read as `o[key]` (a missing one
# raises, and the line is skipped), the others only when present, unknown keys ignored, each
# value through the converter's hook for its type (the strict scalar checks above). A type not
# listed keeps the converter's own hook. tests/core/test_wire_unstructure.py holds every kind's
# result, and every refusal of a mistyped value, to the converter's.

_STRICT: dict[str, Callable[[Any, Any], Any]] = {
    "str": _strict_str,
    "int": _strict_int,
    "float": _strict_float,
    "bool": _strict_bool,
    "str | None": _optional_str,
    "int | None": _optional_int,
    "float | None": _optional_float,
    "bool | None": _optional_bool,
}
_STRUCTURERS: dict[type, Callable[[Any, Any], Any]] = {}


def _structurer(cls: type) -> Callable[[Any, Any], Any]:
    found = _STRUCTURERS.get(cls)
    if found is None:
        _adopted(cls)
        found = _STRUCTURERS[cls] = _write_structurer(cls)
    return found


def _adopted(cls: type) -> None:
    """A record of `wire_rare` imported from there rather than from here: its names taken over
    first, so the functions written for it find its nested records (and the converter's rules)."""
    if cls.__module__ == _RARE_MODULE and "KINDS" not in globals():
        _rare_kinds()


def _structure_hook(annotation: Any) -> Callable[[Any, Any], Any] | None:
    """The function turning a decoded value into this annotation's (called with the value and a
    type, as cattrs' hooks are); None for an annotation the converter leaves as it is (Any)."""
    text = annotation_text(annotation)
    if text == "Any":
        return None
    if text in _STRICT:
        return _STRICT[text]
    if text in _ENUM_FIELDS:
        enum_cls = globals()[text]
        return lambda value, _type: enum_cls(value)
    listed = text[5:-1] if text is not None and text.startswith("list[") and text.endswith("]") else None
    nested = globals().get(listed or text or "")
    if isinstance(nested, type) and attrs.has(nested):
        own = _structurer(nested)
        if listed:
            return lambda value, _type: [own(item, nested) for item in value]
        return own
    resolved = eval(text, globals()) if text is not None else annotation  # our own annotation text, not input
    hook = converter.get_structure_hook(resolved)
    return lambda value, _type: hook(value, resolved)  # some (an optional's) read the type they are given


def _write_structurer(cls: type) -> Callable[[Any, Any], Any]:
    names: dict[str, Any] = {"_cls": cls, "_new": object.__new__}
    required: list[str] = []
    present: list[str] = []
    # Each attribute's value, for a record built without its __init__ (`_built_directly`).
    direct: list[str] = []
    for field in attrs.fields(cls):
        if not field.init:
            return converter.get_structure_hook(cls)
        key = field.metadata.get(_NAME, field.name)
        try:
            hook = _structure_hook(field.type)
        except NameError:  # an annotation naming what this module does not: the converter's own
            return converter.get_structure_hook(cls)
        value = f"o[{key!r}]"
        if hook is not None:
            names[f"_hook_{field.name}"] = hook
            value = f"_hook_{field.name}({value}, None)"
        if field.default is attrs.NOTHING:
            required.append(f"        {field.alias}={value},")
            direct.append(f"        {field.name!r}: {value},")
        else:
            present.append(f"    if {key!r} in o:\n        res[{field.alias!r}] = {value}")
            default = field.default
            factory = getattr(default, "factory", None) if isinstance(default, _FACTORY) else None
            if factory is not None:
                names[f"_default_{field.name}"] = factory
                fallback = f"_default_{field.name}()"
            else:
                names[f"_default_{field.name}"] = default
                fallback = f"_default_{field.name}"
            direct.append(f"        {field.name!r}: {value} if {key!r} in o else {fallback},")
    if _built_directly(cls):
        body = ["    self = _new(_cls)", "    self.__dict__.update({", *direct, "    })", "    return self"]
    else:
        body = ["    res = {}", *present, "    return _cls(", *required, "        **res,", "    )"]
    source = "\n".join(["def structure(o, _type):", *body])
    exec(compile(source, f"<wire structure {cls.__module__}.{cls.__qualname__}>", "exec"), names)
    written: Callable[[Any, Any], Any] = names["structure"]
    return written


def _built_directly(cls: type) -> bool:
    """Whether a decoded record of `cls` may be built by filling its attributes in, not through
    its __init__: a record with an instance dictionary whose __init__ only stores each argument
    (no validator, converter, hook or factory taking the instance). A frozen record's __init__
    stores each of its fields with its own object.__setattr__ call: a row has 27 of them, and
    building rows was a fifth of what a resume's fold of its session log cost (issue 27)."""
    if "__slots__" in cls.__dict__ or any(
        hasattr(cls, hook) for hook in ("__attrs_pre_init__", "__attrs_post_init__")
    ):
        return False
    for field in attrs.fields(cls):
        if field.validator is not None or field.converter is not None:
            return False
        if isinstance(field.default, _FACTORY) and getattr(field.default, "takes_self", True):
            return False
    return True


# -- unstructuring, written here rather than generated by cattrs -------------------------------
# cattrs builds each class's unstructure function at the first line of its kind, walking every
# field's type through its dispatch machinery: about half a millisecond a class, some 8 ms of a
# run's start (issue 27, docs/performance.md). The wire's records hold a dozen field types, so
# the same function is written here from each field's annotation text: the converter's key
# order (fields always written first, then those omitted when at their default), its omission
# test (`value != default`), and its value for each type. A class with a field type not listed
# below keeps the converter's function. tests/core/test_wire_unstructure.py holds every kind's
# output to the converter's.

_PLAIN_VALUES = frozenset({str, int, bool, type(None)})
# Annotations whose value is written as it is.
_AS_IS = frozenset({"str", "int", "bool", "str | None", "int | None", "bool | None"})
_ENUM_FIELDS = frozenset({"EvidenceDisposition", "RawStream", "RecoveryClass", "SessionAction"})
# Annotations the converter unstructures by the value's own class: done here for plain values,
# left to the converter for the rest (dicts and lists, whose members may be anything).
_BY_VALUE = frozenset({"Any", "list[Any]", "dict[str, Any]", "dict[str, Any] | None", "dict[str, str]"})


def _finite(value: Any) -> Any:
    return value if math.isfinite(value) else None  # the contract writes a non-finite float as null


def _finite_or_none(value: Any) -> Any:
    return None if value is None else _finite(value)


def _by_value(value: Any) -> Any:
    return value if type(value) in _PLAIN_VALUES else converter.unstructure(value)


def _agent_event(value: Any) -> dict[str, Any]:
    return {"kind": value.KIND, **_unstructurer(type(value))(value)}


_UNSTRUCTURERS: dict[type, Callable[[Any], dict[str, Any]]] = {}
_FACTORY: type = type(attrs.Factory(list))  # a field default made by calling a function


def _unstructurer(cls: type) -> Callable[[Any], dict[str, Any]]:
    found = _UNSTRUCTURERS.get(cls)
    if found is None:
        _adopted(cls)
        found = _UNSTRUCTURERS[cls] = _write_unstructurer(cls)
    return found


def annotation_text(annotation: Any) -> str | None:
    """A field's annotation as its source text: attrs keeps the text, until cattrs (structuring a
    class) resolves it to the types it names; None for a type this module does not spell."""
    if isinstance(annotation, str):
        return annotation
    if annotation is Any:
        return "Any"
    if "AgentEvent" in globals() and annotation == globals()["AgentEvent"]:  # defined with the rare kinds
        return "AgentEvent"
    if annotation is type(None):
        return "NoneType"
    if isinstance(annotation, type):
        name = annotation.__name__
        return name if globals().get(name, getattr(builtins, name, None)) is annotation else None
    parts = [annotation_text(arg) for arg in get_args(annotation)]
    if None in parts:
        return None
    origin = get_origin(annotation)
    if origin in (list, dict):
        return f"{origin.__name__}[{', '.join(parts)}]"  # type: ignore[arg-type]
    if isinstance(annotation, types.UnionType) and len(parts) == 2 and parts[1] == "NoneType":
        return f"{parts[0]} | None"
    return None


def _value_expression(annotation: Any, value: str, names: dict[str, Any]) -> str | None:
    """Python text computing what the converter writes for `value` of this annotation; None when
    the annotation is not one of the wire's plain shapes."""
    annotation = annotation_text(annotation)
    if annotation is None:
        return None
    if annotation in _AS_IS:
        return value
    if annotation == "float":
        return f"_finite({value})"
    if annotation == "float | None":
        return f"_finite_or_none({value})"
    if annotation in _ENUM_FIELDS:
        return f"{value}.value"
    if annotation in _BY_VALUE:
        return f"_by_value({value})"
    if annotation == "AgentEvent":
        return f"_agent_event({value})"
    if annotation == "list[str]":
        return f"list({value})"
    if annotation == "list[float]":
        return f"[_finite(e) for e in {value}]"
    listed = annotation[5:-1] if annotation.startswith("list[") and annotation.endswith("]") else None
    nested = globals().get(listed or annotation)
    if not (isinstance(nested, type) and attrs.has(nested)):
        return None
    name = f"_unstructure_{nested.__name__}"
    names[name] = _unstructurer(nested)
    return f"[{name}(e) for e in {value}]" if listed else f"{name}({value})"


def _write_unstructurer(cls: type) -> Callable[[Any], dict[str, Any]]:
    names: dict[str, Any] = {
        "_finite": _finite,
        "_finite_or_none": _finite_or_none,
        "_by_value": _by_value,
        "_agent_event": _agent_event,
    }
    always: list[str] = []
    when_set: list[str] = []
    for field in attrs.fields(cls):
        expression = _value_expression(field.type, f"instance.{field.name}", names)
        if expression is None or not field.init:
            return lambda instance: converter.unstructure(instance, cls)
        key = field.metadata.get(_NAME, field.name)
        default = field.default
        if not field.metadata.get(_OMIT) or default is attrs.NOTHING:
            always.append(f"        {key!r}: {expression},")
            continue
        factory = type(default) is _FACTORY
        names[f"_default_{field.name}"] = default.factory if factory else default
        test = f"_default_{field.name}()" if factory else f"_default_{field.name}"
        when_set.append(f"    if instance.{field.name} != {test}:\n        fields[{key!r}] = {expression}")
    source = "\n".join(
        ["def unstructure(instance):", "    fields = {", *always, "    }", *when_set, "    return fields"]
    )
    exec(compile(source, f"<wire unstructure {cls.__module__}.{cls.__qualname__}>", "exec"), names)
    written: Callable[[Any], dict[str, Any]] = names["unstructure"]
    return written


def to_fields(event: Event) -> dict[str, Any]:
    """The event's fields as the wire writes them, without the envelope."""
    fields = _unstructurer(type(event))(event)
    return {k: v for k, v in fields.items() if not (_is_empty(v) and _omittable(type(event), k, v))}


def _omittable(cls: type, name: str, value: Any) -> bool:
    rules = _OMIT_RULES.get(cls)
    if rules is None:  # once per class: every line written asks for its empty fields
        rules = _OMIT_RULES[cls] = {
            f.metadata.get(_NAME, f.name): f.metadata.get(_OMIT) for f in attrs.fields(cls)
        }
    omit = rules.get(name)
    return value is None if omit == _OMIT_NONE else bool(omit)


# Per event class: each field's wire name and how it is omitted when empty (`_omittable`).
_OMIT_RULES: dict[type, dict[str, Any]] = {}


def envelope(event: Event, ts: float | None = None, seq: int | None = None) -> dict[str, Any]:
    """The whole line as a JSON object: `v`, the optional `seq` and `ts`, the `kind` tag, then the
    fields. `seq` is the line's place in its log (ours, additive: the session log numbers every
    line; a reader that does not know it ignores it)."""
    head: dict[str, Any] = {"v": WIRE_VERSION}
    if seq is not None:
        head["seq"] = seq
    if ts is not None:
        head["ts"] = ts
    kind = event.kind if isinstance(event, Unknown) else event.KIND
    fields = to_fields(event)
    fields.pop("kind", None)
    return {**head, "kind": kind, **fields}


def encode(event: Event, ts: float | None = None, seq: int | None = None) -> str:
    """One NDJSON line (no newline)."""
    return json.dumps(envelope(event, ts, seq), separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def line_time(obj: Mapping[str, Any]) -> float | None:
    """A log object's `ts` as a line carries it: a number (not a bool), else None."""
    ts = obj.get("ts")
    return float(ts) if isinstance(ts, int | float) and type(ts) is not bool else None


def from_object(obj: Any) -> Line | None:
    """Decode one parsed JSON value; None when it is not an event object of a known shape."""
    if type(obj) is not dict:
        return None
    kind = obj.get("kind")
    if not isinstance(kind, str):
        return None
    ts = line_time(obj)
    seq_raw = obj.get("seq")
    seq = seq_raw if type(seq_raw) is int and seq_raw >= 0 else None
    hook = _HOOKS.get(kind) or _hook(kind)
    if hook is None:
        return Line(Unknown(kind=kind), ts, seq)
    try:
        event = hook[0](obj, hook[1])
    except (Exception, RecursionError):  # a mistyped line is skipped like a torn one
        return None
    return Line(event, ts, seq)


# json.loads without its two wrapper calls per line: the C scanner json.loads ends in. JSON's
# own whitespace (and nothing else) may surround the value, as json.loads allows.
_scan_json: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_JSON_SPACE = " \t\n\r"


def decode_lines(raws: Iterable[bytes | str]) -> Iterator[Line]:
    """Decode NDJSON lines in one loop, yielding what `decode_line` returns for each that is not None.

    The same checks as `decode_line` line by line, inlined: a resume decodes every line of
    a long log, and the nested calls cost about as much as parsing the JSON itself.
    """
    scan = _scan_json
    space = _JSON_SPACE
    hooks = _HOOKS
    for raw in raws:
        try:
            text = (raw.decode("utf-8") if isinstance(raw, bytes) else raw).strip(space)
            obj, end = scan(text, 0)
        except (ValueError, RecursionError, StopIteration):  # UnicodeDecodeError is a ValueError
            continue
        if end != len(text) or type(obj) is not dict:
            continue
        if "\\ud" in text or "\\uD" in text:
            obj = without_lone_surrogates(obj)
        kind = obj.get("kind")
        if type(kind) is not str:
            continue
        ts_raw = obj.get("ts")
        ts_type = type(ts_raw)
        ts = float(ts_raw) if ts_type is float or ts_type is int else None
        seq_raw = obj.get("seq")
        seq = seq_raw if type(seq_raw) is int and seq_raw >= 0 else None
        hook = hooks.get(kind) or _hook(kind)  # the kind's structure function, made on first use
        if hook is None:
            yield Line(Unknown(kind=kind), ts, seq)
            continue
        try:
            event = hook[0](obj, hook[1])
        except (Exception, RecursionError):  # a mistyped line is skipped like a torn one
            continue
        yield Line(event, ts, seq)


def parse_object(raw: str | bytes) -> dict[str, Any] | None:
    """One NDJSON line as a JSON object with a string `kind`, or None: blank, torn, not UTF-8,
    not an event object, or nested too deep to parse (anyone who can reach a log can write one)."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        if not text or text.isspace():
            return None
        obj = loads_valid_text(text)
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return None
    return obj if type(obj) is dict and isinstance(obj.get("kind"), str) else None


def decode_line(raw: str | bytes) -> Line | None:
    """Decode one NDJSON line; None for blank, torn or mistyped lines (readers skip them)."""
    for line in decode_lines((raw,)):
        return line
    return None


def decode(raw: str | bytes) -> Event | None:
    line = decode_line(raw)
    return line.event if line is not None else None


# The last line `from_written` decoded, with the object it came from (held, so its id is not reused).
_last_written: tuple[dict[str, Any], Line | None] | None = None


def from_written(obj: Any) -> Line | None:
    """`from_object` of a line the session log wrote, decoded once for everyone shown it.

    The log hands one object to each observer and back to its caller; a row is decoded by the
    engine, the console and RESULTS.md, and each decoding cost about as much as writing the line.
    The object is the line as written, which nobody changes, so the same object decodes the same.
    """
    global _last_written
    last = _last_written
    if last is not None and last[0] is obj:
        return last[1]
    line = from_object(obj)
    if type(obj) is dict:
        _last_written = (obj, line)
    return line
