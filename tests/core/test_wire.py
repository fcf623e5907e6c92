"""The session wire against crucible's contract: field lists per kind, tolerant decoding, a crucible-written log."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from crucible_core.contract import agent_wire, wire
from crucible_core.contract.fold import fold_path
from crucible_core.contract.recovery import RecoveryClass, classify
from crucible_core.run.run_view import run_view

FIXTURE = Path(__file__).parent.parent / "fixtures" / "crucible_session.jsonl"

ROW = wire.RowWire(iter=1, decision="keep", note="n", detail="d")
IDENTITY = wire.RunIdentity.build(
    components=[wire.ComponentIdentity(name="", repo="r", base_sha="b")],
    manifest_hash="m",
    inject_hash="i",
    measure_cmd="./measure.sh",
    direction="lower",
)

# (minimal event, the keys the contract always writes for it). Keys a serde field marks
# skip_serializing_if are absent from a minimal event; `v` and `kind` head every line.
GOLDEN: list[tuple[wire.Event, set[str]]] = [
    (
        wire.Start(goal="g", gate="bench", model="m", namespace="", iters_total=3, max_cost=5.0, max_secs=60),
        {"goal", "gate", "model", "namespace", "iters_total", "max_cost", "max_secs"},
    ),
    (wire.Phase(phase="baseline"), {"phase", "iter"}),
    (wire.Note(msg="x"), {"msg"}),
    (wire.Row(row=ROW, solved=False), {"row", "solved"}),
    (wire.AgentStart(iter=1), {"iter"}),
    (
        wire.AgentSession(session="s", action=wire.SessionAction.STARTED, turn=0),
        {"session", "action", "turn"},
    ),
    (wire.Agent(event=wire.AgentText(delta="t")), {"event"}),
    (wire.AgentDone(), set()),
    (wire.Budget(spent=1.0, elapsed_secs=3), {"spent", "elapsed_secs"}),
    (wire.Summary(rows=[], gate="bench", best_score=None), {"rows", "gate", "best_score"}),
    (wire.Escalation(category="c", reason="r"), {"category", "reason", "evidence"}),
    (wire.Segment(fingerprint="f", regime=""), {"fingerprint", "baseline_score", "regime"}),
    (wire.Identity(identity=IDENTITY), {"identity"}),
    (wire.PrLinks(links=[]), {"links"}),
    (wire.Finished(), set()),
    (
        wire.PlanAdmitted(plan_version=1, budget_usd=1.0, tasks=[]),
        {"plan_version", "reason", "budget_usd", "tasks"},
    ),
    (wire.AsksEmitted(task="t", asks=[]), {"task", "asks"}),
    (
        wire.TaskResult(task="t", status="pass"),
        {
            "task",
            "status",
            "plan_version",
            "task_kind",
            "iter",
            "digest",
            "job",
            "attempts",
            "cost_usd",
            "note",
            "secs",
            "trace_id",
            "span_id",
        },
    ),
    (wire.Shutdown(outcome="finished", reason="r"), {"outcome", "reason"}),
    (wire.ApprovalWait(handle="h", mode="block"), {"handle", "trace_id", "mode"}),
    (wire.ApprovalResolved(outcome="granted"), {"outcome", "reason"}),
    (wire.OutputRefused(output_kind="k", bound="b"), {"output_kind", "bound", "tool", "detail"}),
    (wire.Recovery(cls=RecoveryClass.DIED_MID_TURN), {"class", "iter", "detail"}),
]


def test_the_golden_cases_cover_every_contract_kind() -> None:
    assert {type(e) for e, _ in GOLDEN} == set(wire.CONTRACT_KINDS)


@pytest.mark.parametrize("event,keys", GOLDEN, ids=[type(e).KIND for e, _ in GOLDEN])
def test_each_kind_writes_exactly_the_contract_fields(event: wire.Event, keys: set[str]) -> None:
    obj = json.loads(wire.encode(event, ts=1.5))
    assert list(obj)[:3] == ["v", "ts", "kind"] and obj["v"] == 1 and obj["kind"] == type(event).KIND
    assert set(obj) - {"v", "ts", "kind"} == keys
    assert wire.decode(wire.encode(event)) == event


def test_a_row_writes_the_contract_row_fields_and_omits_the_empty_optional_ones() -> None:
    obj = json.loads(wire.encode(wire.Row(row=ROW, solved=True)))
    assert obj["row"] == {
        "iter": 1,
        "decision": "keep",
        "note": "n",
        "detail": "d",
        "diff": "",
        "diffstat": "",
        "score": None,
        "total": None,
    }
    full = wire.RowWire(
        iter=2,
        decision="keep",
        note="",
        detail="",
        score=3.0,
        tiebreak=0.5,
        phase="wide",
        kept_snap="abc",
        evidence=[wire.EvidenceEntry("refcheck", wire.EvidenceDisposition.PASSED)],
        candidate_md="# c",
    )
    obj = json.loads(wire.encode(wire.Row(row=full, solved=False)))["row"]
    assert {"tiebreak", "phase", "kept_snap", "evidence", "candidate_md"} <= set(obj)
    assert obj["evidence"] == [{"task": "refcheck", "disposition": "passed"}]


def test_identity_is_the_run_identity_object_with_a_hash_of_hashes_digest() -> None:
    obj = json.loads(wire.encode(wire.Identity(identity=IDENTITY)))["identity"]
    assert set(obj) == {
        "components",
        "manifest_hash",
        "inject_hash",
        "seed_hash",
        "measure_cmd",
        "direction",
        "rig",
        "digest",
    }
    assert obj["components"] == [{"name": "", "repo": "r", "base_sha": "b"}]
    assert obj["rig"] == {"def_ref": "", "backend_name": "", "backend_version": ""}
    assert IDENTITY.digest.startswith("v2:") and len(IDENTITY.digest) == 3 + 16
    # FNV-1a 64 with a separator after every part: the offset basis for no parts, no collisions
    assert wire.fnv1a_hex([]) == "cbf29ce484222325"
    assert wire.fnv1a_hex([b"ab", b"c"]) != wire.fnv1a_hex([b"a", b"bc"])
    other = wire.RunIdentity.build(
        components=IDENTITY.components,
        manifest_hash="m",
        inject_hash="i",
        measure_cmd="./measure.sh",
        direction="higher",
    )
    assert other.digest != IDENTITY.digest and other.differing(IDENTITY) == ["direction"]


def test_decoding_is_tolerant_as_the_contract_is() -> None:
    assert wire.decode("") is None and wire.decode("   ") is None
    assert wire.decode('{"v":1,"kind":"row","row":{"iter":1,"deci') is None  # torn
    assert wire.decode(b"\xff\xfe garbage") is None
    assert wire.decode('{"v":1,"kind":"note","msg":5}') is None  # mistyped
    assert (
        wire.decode(
            '{"v":1,"kind":"row","row":{"iter":"many","decision":"k","note":"","detail":""},"solved":false}'
        )
        is None
    )
    assert wire.decode("[" * 100_000) is None
    assert wire.decode('{"v":1,"kind":"teleport","x":1}') == wire.Unknown(kind="teleport")
    # an old row without the later optional fields, and an unknown field, still load
    old = wire.decode(
        '{"kind":"row","row":{"iter":1,"decision":"keep","note":"n","detail":"d","future":1},"solved":false}'
    )
    assert isinstance(old, wire.Row) and old.row.evidence == [] and old.row.kept_snap is None
    line = wire.decode_line('{"v":1,"ts":12.5,"kind":"finished"}')
    assert line is not None and line.ts == 12.5 and line.event == wire.Finished()
    summary = wire.decode('{"v":1,"kind":"summary","rows":[],"gate":"task","best_score":null}')
    assert isinstance(summary, wire.Summary) and summary.best_score is None


# Lines a log can hold, each with what a line-at-a-time reader (parse, then decode) makes of it.
HOSTILE_LINES: list[str | bytes] = [
    "",
    "  \n",
    '{"v":1,"kind":"row","row":{"iter":1,"deci',
    b"\xff\xfe garbage",
    '{"v":1,"kind":"note","msg":5}',
    "[" * 100_000,
    "[1, 2]",
    '"a string"',
    '{"v":1,"kind":5}',
    '{"v":1,"kind":"finished"} trailing',
    '{"v":1,"kind":"finished"}{"v":1}',
    '\u00a0{"v":1,"kind":"finished"}',  # a non-JSON space before the value
    ' \t{"v":1,"ts":3,"seq":4,"kind":"finished"}\r\n',
    '{"v":1,"ts":true,"seq":-1,"kind":"finished"}',
    '{"v":1,"ts":"late","seq":2.0,"kind":"finished"}',
    '{"v":1,"kind":"note","msg":"bad \\ud800 half"}',
    '{"v":1,"kind":"teleport","x":1}',
    b'{"v":1,"ts":1.5,"kind":"phase","phase":"iteration","iter":2}\n',
    '{"v":1,"kind":"budget","spent":1,"elapsed_secs":2.0,"parked_s":null}',
    '{"v":1,"kind":"budget","spent":"1","elapsed_secs":2}',
    '{"v":1,"kind":"row","row":{"iter":1,"decision":"keep","note":"","detail":"","score":3,"sha":7}}',
    '{"v":1,"kind":"row","row":{"iter":1,"decision":"keep","note":"","detail":"","score":3,"valid":null}}',
]


def _one_line_at_a_time(raw: str | bytes) -> wire.Line | None:
    obj = wire.parse_object(raw)
    return wire.from_object(obj) if obj is not None else None


def test_the_batch_decoder_reads_every_line_as_the_line_at_a_time_reader_does() -> None:
    # decode_lines inlines parse_object and from_object for speed (a resume's hot loop): the
    # two must agree on every line, the hostile ones included, and a bad line must not stop it.
    expected = [line for line in map(_one_line_at_a_time, HOSTILE_LINES) if line is not None]
    assert len(expected) >= 6  # the list holds good lines too, not only refused ones
    assert list(wire.decode_lines(HOSTILE_LINES)) == expected
    for raw in HOSTILE_LINES:
        assert wire.decode_line(raw) == _one_line_at_a_time(raw), raw
    note = wire.decode('{"v":1,"kind":"note","msg":"bad \\ud800 half"}')
    assert isinstance(note, wire.Note) and "\ud800" not in note.msg


def test_optional_scalars_decode_strictly() -> None:
    def budget(**fields: Any) -> wire.Event | None:
        return wire.decode(json.dumps({"v": 1, "kind": "budget", "spent": 1.0, "elapsed_secs": 2, **fields}))

    decoded = budget(active_s=3, parked_s=None, iterations_done=4.0)
    assert isinstance(decoded, wire.Budget)
    assert decoded.active_s == 3.0 and type(decoded.active_s) is float and decoded.parked_s is None
    assert decoded.iterations_done == 4 and type(decoded.iterations_done) is int
    for bad in ({"active_s": "3"}, {"active_s": True}, {"iterations_done": 4.5}, {"iterations_done": "4"}):
        assert budget(**bad) is None, bad

    def row(**fields: Any) -> wire.Event | None:
        body = {"iter": 1, "decision": "keep", "note": "", "detail": "", **fields}
        return wire.decode(json.dumps({"v": 1, "kind": "row", "row": body, "solved": False}))

    decoded_row = row(valid=None, sha="abc", kept_snap=None)
    assert (
        isinstance(decoded_row, wire.Row) and decoded_row.row.sha == "abc" and decoded_row.row.valid is None
    )
    for bad in ({"valid": 1}, {"valid": "yes"}, {"sha": 7}, {"kept_snap": ["x"]}):
        assert row(**bad) is None, bad


def test_every_agent_kind_nests_under_agent_and_round_trips() -> None:
    events: list[Any] = [
        wire.AgentMeta(model="m"),
        wire.AgentLog(level="section", label="l"),
        wire.AgentGate(phase="post", name="gitleaks", status="passed"),
        wire.AgentInit(model="m", tools=3),
        wire.AgentThinking(delta="x"),
        wire.AgentText(delta="y"),
        wire.AgentTool(name="Edit", summary="s", input={"file_path": "p"}),
        wire.AgentTokens(input=1, output=2, total=3, cost_usd=0.5),
        wire.AgentOtelSummary(cost_usd=0.8, models=[wire.ModelUsage(model="m", cost_usd=0.8)]),
        wire.AgentRetry(attempt=1, max=5, error="overloaded"),
        wire.AgentError(error_type="e", message="m"),
        wire.AgentResult(subtype="success", turns=3, cost_usd=0.8),
        wire.AgentExit(code=0),
        wire.AgentSandboxLog(level="WARN", target="proxy", message="CONNECT denied", denial=True),
        wire.AgentRaw(text="line", stream=wire.RawStream.STDERR),
    ]
    assert {type(e) for e in events} == set(wire.AGENT_KINDS.values())
    for event in events:
        obj = json.loads(wire.encode(wire.Agent(event=event)))
        assert obj["kind"] == "agent" and obj["event"]["kind"] == event.KIND
        assert wire.decode(wire.encode(wire.Agent(event=event))) == wire.Agent(event=event)
    tool = json.loads(wire.encode(wire.Agent(event=wire.AgentTool(name="n"))))["event"]
    assert "input" not in tool and "result" not in tool  # the contract omits them when absent


def test_harness_events_are_written_in_the_contracts_agent_vocabulary() -> None:
    assert agent_wire.to_wire("agent_text", {"text": "hi"}) == wire.Agent(event=wire.AgentText(delta="hi"))
    session = agent_wire.to_wire("agent_session", {"session": "solver", "action": "resumed", "turn": 2})
    assert session == wire.AgentSession(session="solver", action=wire.SessionAction.RESUMED, turn=2)
    usage = agent_wire.to_wire("agent_usage", {"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.2})
    assert isinstance(usage, wire.Agent) and usage.event == wire.AgentTokens(
        input=10, output=5, total=15, cost_usd=0.2
    )
    other = agent_wire.to_wire("agent_something_new", {"x": 1})
    assert isinstance(other, wire.Agent) and isinstance(other.event, wire.AgentLog)
    assert other.event.label == "agent_something_new"


def test_a_sandbox_log_line_decodes_with_its_structure_and_is_not_dropped() -> None:
    line = (
        '{"v":1,"kind":"agent","event":{"kind":"sandbox_log","ts_ms":1787759206035,"level":"WARN",'
        '"target":"proxy","message":"CONNECT denied api.example.com:443","denial":true,'
        '"fields":{"denial_stage":"connect"}}}'
    )
    event = wire.decode(line)
    assert event == wire.Agent(
        event=wire.AgentSandboxLog(
            ts_ms=1787759206035,
            level="WARN",
            target="proxy",
            message="CONNECT denied api.example.com:443",
            denial=True,
            fields={"denial_stage": "connect"},
        )
    )
    assert json.loads(wire.encode(event)) == json.loads(line)
    plain = json.loads(wire.encode(wire.Agent(event=wire.AgentSandboxLog(level="INFO", message="up"))))
    assert "fields" not in plain["event"] and plain["event"]["denial"] is False
    from_harness = agent_wire.to_wire("sandbox_log", {"level": "WARN", "denial": True, "fields": {"n": 1}})
    assert from_harness == wire.Agent(
        event=wire.AgentSandboxLog(level="WARN", denial=True, fields={"n": "1"})
    )


def test_a_plan_task_stage_is_the_contracts_iteration_or_epilogue() -> None:
    admitted = wire.PlanAdmitted(
        plan_version=1,
        budget_usd=1.0,
        tasks=[
            wire.PlanTaskWire(name="a", kind="command", stage="main"),
            wire.PlanTaskWire(name="b", kind="command", stage="epilogue"),
        ],
    )
    assert [t["stage"] for t in json.loads(wire.encode(admitted))["tasks"]] == ["iteration", "epilogue"]
    older = '{"v":1,"kind":"plan_admitted","plan_version":1,"budget_usd":1.0,"tasks":[{"name":"a","kind":"command","stage":"main"}]}'
    decoded = wire.decode(older)
    assert isinstance(decoded, wire.PlanAdmitted) and decoded.tasks[0].stage == "iteration"


def test_an_empty_task_output_is_written_and_read_back() -> None:
    empty = json.loads(wire.encode(wire.TaskResult(task="t", status="pass", output={})))
    assert empty["output"] == {}
    assert "output" not in json.loads(wire.encode(wire.TaskResult(task="t", status="pass")))
    decoded = wire.decode('{"v":1,"kind":"task_result","task":"t","status":"pass","output":{}}')
    assert isinstance(decoded, wire.TaskResult) and decoded.output == {}


@pytest.mark.parametrize(
    "ask",
    [
        {"key": "with space", "workflow": "w", "params": None},
        {"key": "", "workflow": "w"},
        {"key": "a\u0007b", "workflow": "w"},
        {"key": "x" * 257, "workflow": "w"},
        {"key": "k", "workflow": "impl:paper"},
        {"key": "k", "workflow": "two words"},
    ],
)
def test_an_ask_with_an_unusable_key_or_workflow_does_not_decode(ask: dict[str, Any]) -> None:
    line = json.dumps({"v": 1, "kind": "asks_emitted", "task": "classify", "asks": [ask]})
    assert wire.decode(line) is None
    assert wire.ask_problem(ask) is not None
    with pytest.raises(ValueError):
        wire.Ask(**{"params": None, **ask})


def test_a_usable_ask_round_trips_with_its_params() -> None:
    key = "x" * 256  # the bound itself is fine; a colon in a key is too
    for ask in (
        {"key": "arxiv.org/abs/2401.12345", "workflow": "implement-paper", "params": {"n": 1}},
        {"key": "jira:INFERENG-42", "workflow": "w", "params": None},
        {"key": key, "workflow": "w", "params": None},
    ):
        event = wire.decode(json.dumps({"v": 1, "kind": "asks_emitted", "task": "c", "asks": [ask]}))
        assert isinstance(event, wire.AsksEmitted) and wire.ask_problem(ask) is None
        assert json.loads(wire.encode(event))["asks"] == [ask]


def test_a_crucible_written_log_folds_to_its_best_kept_set_spend_and_resumes() -> None:
    f = fold_path(FIXTURE)
    assert f.best_score == 231.0 and f.baseline_score == 277.0
    assert [r.iter for r in f.rows if r.deep and r.decision == "keep"] == [1, 3]
    assert f.kept == 2 and f.discarded == 2
    assert f.kept_shas == ["1c" * 20, "3c" * 20] and f.best_token == "3c" * 20  # the wide row is not kept
    assert f.spent == pytest.approx(2.05)
    assert f.active_s == 1200.0  # crucible's budget line carries elapsed_secs
    assert [r.cls for r in f.recoveries] == [RecoveryClass.DIED_MID_TURN, RecoveryClass.CLEAN_EXIT]
    assert f.unknown == 1 and f.iteration == 4
    assert f.plan is not None and [t.stage for t in f.plan.tasks] == ["iteration", "iteration", "epilogue"]
    assert set(f.plan_results) == {"propose-a", "measure-a"}
    assert f.plan_results["measure-a"].output == {"score": 231.0}
    assert f.identity is not None and f.identity.identity.digest.startswith("v2:")
    assert f.start is not None and f.start.iters_total == 6
    assert classify(f).cls is RecoveryClass.CLEAN_EXIT
    view = run_view(f)
    assert {
        k: view[k] for k in ("best_score", "baseline_score", "iterations", "kept", "outcome", "resumes")
    } == {
        "best_score": 231.0,
        "baseline_score": 277.0,
        "iterations": 4,
        "kept": 2,
        "outcome": "stopped",
        "resumes": 2,
    }
    assert len(view["rows"]) == 7


def test_every_line_of_the_crucible_log_but_the_torn_one_round_trips() -> None:
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()
    decoded = [(raw, wire.decode_line(raw)) for raw in lines]
    assert sum(1 for _, line in decoded if line is None) == 1
    for raw, line in decoded:
        if line is None or isinstance(line.event, wire.Unknown):
            continue
        assert json.loads(wire.encode(line.event, line.ts, line.seq)) == json.loads(raw), raw


@pytest.mark.leaves_open_log("it writes only the plan_admitted line to fold")
def test_a_graph_without_a_cap_of_its_own_is_admitted_with_a_null_budget_and_still_folds(
    tmp_path: Path,
) -> None:
    from crucible_core.plan import ir
    from crucible_core.plan.events import PlanAdmitted

    # a scored workflow's iteration graph has no budget of its own: its usd is infinite, which
    # JSON cannot carry; the line says null, and every reader still sees the graph
    plan = ir.Plan(version=1, budget=ir.Budget(usd=float("inf")), tasks=())
    graph = ir.ValidPlan(plan=plan, order=(), dependents={})
    assert PlanAdmitted.of(graph).budget_usd is None
    log = tmp_path / "session.jsonl"
    lines = [
        {"v": 1, "kind": "start", "goal": "g", "gate": "bench", "model": "m", "namespace": "",
         "iters_total": 2, "max_cost": 1.0, "max_secs": 60},
        {"v": 1, "kind": "plan_admitted", "plan_version": 1, "reason": "", "budget_usd": None,
         "tasks": [{"name": "propose", "kind": "engine_propose", "depends_on": [], "session": "",
                    "needs": "any", "required": True, "join": "all", "stage": "iteration"}]},
        {"v": 1, "kind": "row", "row": {"iter": 1, "decision": "discard", "valid": False, "note": "no reading", "detail": ""},
         "solved": False},
    ]  # fmt: skip
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    view = run_view(fold_path(log))
    assert view["plan"] == {"plan_version": 1, "tasks": ["propose"], "results": {}}
    # a discard without a valid reading reads `invalid` in show --json as everywhere else
    assert [row["decision"] for row in view["rows"]] == ["invalid"]


@pytest.mark.parametrize(
    "fields",
    [
        {"task": "t", "status": "pass"},
        {"task": "build", "status": "pass", "plan_version": 1, "task_kind": "command", "iter": 3,
         "attempts": 2, "cost_usd": 0.25, "metric": 7, "output": {"score": 1, "nested": [1, {"a": None}]},
         "note": "ok \u00e9", "secs": 1.5},
        {"task": "t", "status": "pass", "metric": 0.0, "output": {}, "cost_usd": 0},
        {"task": "late", "status": "blocked", "blocked": {"reason": "required_task_failed", "task": "build"}},
        {"task": "late", "status": "blocked", "blocked": {"reason": "wall_clock_ceiling", "task": None}},
        {"task": "net", "status": "transport", "transport": "workspace", "note": "no copy"},
    ],
)  # fmt: skip
def test_a_task_result_is_built_for_the_wire_exactly_as_decoding_its_fields_builds_it(
    fields: dict[str, Any],
) -> None:
    from crucible_core.plan.events import BlockedWire, TaskResult

    blocked = fields.pop("blocked", None)
    result = TaskResult(
        **fields, blocked=None if blocked is None else BlockedWire(blocked["reason"], blocked["task"])
    )
    # the executor writes `as_wire()`; it must be the event the wire decodes from the record's fields
    decoded = wire.from_object({"kind": "task_result", **result.fields()})
    assert decoded is not None
    direct = result.as_wire()
    assert direct == decoded.event
    assert wire.encode(direct, 1.0, 1) == wire.encode(decoded.event, 1.0, 1)


@pytest.mark.parametrize("budget", [1.5, 2, None])
def test_a_plan_admitted_is_built_for_the_wire_exactly_as_decoding_its_fields_builds_it(
    budget: float | None,
) -> None:
    from crucible_core.plan.events import PlanAdmitted, PlanTaskWire

    tasks = [
        PlanTaskWire("build", "command", [], "", "any", True, "all", "iteration"),
        PlanTaskWire("critic", "agent", ["build"], "s1", "gpu", False, "settled", "iteration"),
        PlanTaskWire("report", "command", ["build", "critic"], "", "any", True, "passed", "epilogue"),
    ]
    admitted = PlanAdmitted(plan_version=1, reason="why \u00e9", budget_usd=budget, tasks=tasks)
    # the executor writes `as_wire()`; it must be the event the wire decodes from the record's fields
    decoded = wire.from_object({"kind": "plan_admitted", **admitted.fields()})
    assert decoded is not None
    direct = admitted.as_wire()
    assert direct == decoded.event
    assert wire.encode(direct, 1.0, 1) == wire.encode(decoded.event, 1.0, 1)


def test_the_rare_kinds_are_listed_by_name_as_their_module_defines_them() -> None:
    """wire.py names the kinds and names of contract/wire_rare.py without importing it (so a run
    that writes none of them never defines them): both lists must be that module's exactly."""
    from crucible_core.contract import wire_rare

    assert set(wire.KINDS) == wire.RARE_KINDS | set(wire._COMMON_KINDS)
    assert not wire.RARE_KINDS & set(wire._COMMON_KINDS)
    assert {
        cls.KIND for cls in wire.KINDS.values() if cls.__module__ == wire_rare.__name__
    } == wire.RARE_KINDS
    defined = {
        name
        for name, value in vars(wire_rare).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == wire_rare.__name__
    }
    tables = {"AGENT_KINDS", "AgentEvent", "CONTRACT_KINDS", "OUR_KINDS", "KINDS", "Event"}
    assert defined | tables == wire.RARE_NAMES
    assert all(
        getattr(wire, name) is getattr(wire_rare, name, getattr(wire, name)) for name in wire.RARE_NAMES
    )
    assert [cls.__name__ for cls in wire.CONTRACT_KINDS + wire.OUR_KINDS] == [
        *wire._CONTRACT_KIND_NAMES,
        *wire._OUR_KIND_NAMES,
    ]


def test_a_fresh_reader_defines_the_rare_kinds_at_their_first_line_or_name_and_reads_them_the_same(
    tmp_path: Path,
) -> None:
    """In a fresh interpreter: importing the wire, and reading and writing the kinds every run
    writes, define no rare kind; the first rare line decodes as it does once they are defined, and
    `wire.X` or `from wire import X` defines them too."""
    script = textwrap.dedent(
        """
        import json, sys
        from crucible_core.contract import wire
        rare = "crucible_core.contract.wire_rare"
        common = [wire.encode(wire.Note(msg="n")), wire.encode(wire.Step(step="s", iter=1))]
        assert [wire.decode_line(line).event for line in common] == [wire.Note(msg="n"), wire.Step(step="s", iter=1)]
        assert wire.decode_line('{"v":1,"kind":"not_a_kind"}').event == wire.Unknown(kind="not_a_kind")
        assert rare not in sys.modules, "a common kind defined the rare ones"
        first = wire.decode_line('{"v":1,"ts":1.5,"kind":"steer","iter":2,"text":"t","status":"applied"}')
        assert rare in sys.modules
        assert first == wire.Line(wire.Steer(iter=2, text="t", status="applied"), 1.5, None), first
        agent = wire.decode_line('{"v":1,"kind":"agent","event":{"kind":"text","delta":"hi"}}')
        assert agent is not None and agent.event == wire.Agent(event=wire.AgentText(delta="hi")), agent
        print(json.dumps(wire.envelope(agent.event)))
        """
    )
    by_name = textwrap.dedent(
        """
        import sys
        from crucible_core.contract.wire import PlanAdmitted, KINDS
        assert "crucible_core.contract.wire_rare" in sys.modules and KINDS["plan_admitted"] is PlanAdmitted
        """
    )
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == wire.envelope(wire.Agent(event=wire.AgentText(delta="hi")))
    named = subprocess.run([sys.executable, "-c", by_name], capture_output=True, text=True, check=False)
    assert named.returncode == 0, named.stderr


def test_a_rare_record_made_from_its_own_module_is_written_as_the_wire_writes_it() -> None:
    """A plugin that imports contract/wire_rare.py itself (against its advice) still gets the
    wire's writing: the nested records' empty fields of ours left out, as when named via `wire`."""
    event = wire.Artifacts(iter=1, items=[wire.ArtifactWire(path="a", mode="embed", status="missing")])
    script = textwrap.dedent(
        """
        import json
        from crucible_core.contract import wire_rare
        from crucible_core.contract import wire
        event = wire_rare.Artifacts(iter=1, items=[wire_rare.ArtifactWire(path="a", mode="embed", status="missing")])
        print(json.dumps(wire.envelope(event)))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == wire.envelope(event)
    assert json.loads(done.stdout)["items"] == [{"path": "a", "mode": "embed", "status": "missing"}]
