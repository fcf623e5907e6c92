"""One iteration driven through an engine built in one step from in-memory drivers: no subprocess.

The World, Judge and AgentBackend here are small objects that obey the protocols in
crucible_core/protocols.py; the engine, its gates, the iteration graph on the plan executor
and the session log are the real ones.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from crucible_core.contract.reading import Reading
from crucible_core.manifest.loader import load_manifest
from crucible_core.manifest.paths import RunPaths
from crucible_core.protocols import (
    AgentBackend,
    ApplyOutcome,
    FailureClass,
    Judge,
    MeasureContext,
    Staged,
    Turn,
    TurnResult,
    World,
)
from crucible_core.run.assemble import build_engine
from crucible_core.run.budget import Budget
from crucible_core.run.context import LoopExit, Run, Segment, fingerprint
from crucible_core.run.engine import Engine
from crucible_core.run.loop import run_baseline, run_iteration
from crucible_core.session_log import SessionLog, read_events

# One iteration at a time through an engine: its log is never closed with a shutdown.
pytestmark = pytest.mark.leaves_open_log("it drives single iterations; no session closes the log")

MANIFEST = """
[repo]
path = "."
[workspace]
dir = "workspace"
[agent]
backend = "command"
agent_cmd = "./never-run.sh"
goal = "raise the value"
[judge]
measure_cmd = "./never-run.sh"
direction = "higher"
objective = "value"
"""


class MemoryWorld:
    """A world whose candidate is a dict; snapshots are kept copies named by their content."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {"value.txt": "0"}
        self.kept: dict[str, dict[str, str]] = {}
        self.current = ""
        self.put_back: list[str] = []
        self.restored: list[str] = []
        self.stages = 0
        self.described: list[tuple[str, str | None]] = []  # (how, the staged token it was given)

    def _token(self, files: dict[str, str]) -> str:
        return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:12]

    def clone_from(self, source: str, ref: str | None) -> None: ...

    def prepare(self) -> str:
        return self.snapshot("base")

    def recover(self) -> None: ...

    def snapshot(self, label: str) -> str:
        token = self._token(self.files)
        self.kept[token] = dict(self.files)
        self.current = token
        return token

    def restore(self, token: str) -> None:
        self.files = dict(self.kept[token])
        self.current = token
        self.restored.append(token)

    def apply(self) -> ApplyOutcome:
        return ApplyOutcome(ok=True)

    def stage(self) -> Staged:
        self.stages += 1
        token = self._token(self.files)
        self.kept.setdefault("staged:" + token, dict(self.files))
        return Staged(token=token, unchanged=token == self.current)

    def put_back_staged(self, token: str) -> None:
        self.files = dict(self.kept["staged:" + token])
        self.put_back.append(token)

    def last_commit_sha(self) -> str | None:
        return self.current or None

    def changed_paths(self) -> list[str]:
        kept = self.kept.get(self.current, {})
        return sorted(k for k in self.files if self.files[k] != kept.get(k))

    def change(self, head: str, base: str | None = None) -> str:
        return ""

    def describe_change(self, base: str) -> tuple[str, str]:
        self.stage()  # as GitWorld does: the workspace is staged (and checked) to be read
        self.described.append(("change", None))
        return "", ""

    def describe_staged(self, base: str, token: str) -> tuple[str, str]:
        self.described.append(("staged", token))
        return "", ""


class ValueJudge:
    """Scores the integer in value.txt; `then` runs after reading (a measure's side effect)."""

    gate = "value"
    scored = True

    def __init__(self, world: MemoryWorld) -> None:
        self.world = world
        self.measured = 0
        self.invalid = False
        self.then: Callable[[], None] | None = None

    def measure(self, ctx: MeasureContext) -> Reading:
        self.measured += 1
        value = int(self.world.files["value.txt"])
        if self.then is not None:
            self.then()
        if self.invalid:
            return Reading.invalid("the judge refused it")
        return Reading(valid=True, score=float(value), note=f"value={value}")


class ScriptedBackend:
    """Each turn edits the world's dict as the next step says, or fails as told."""

    def __init__(self, world: MemoryWorld, step: Callable[[MemoryWorld], TurnResult | None]) -> None:
        self.world = world
        self.step = step
        self.turns = 0

    def run_turn(self, turn: Turn) -> TurnResult:
        self.turns += 1
        return self.step(self.world) or TurnResult(ok=True, cost_usd=0.01)


def bump(by: int) -> Callable[[MemoryWorld], None]:
    def step(world: MemoryWorld) -> None:
        world.files["value.txt"] = str(int(world.files["value.txt"]) + by)

    return step


def assemble(tmp_path: Path, step: Callable[[MemoryWorld], TurnResult | None]) -> tuple[Engine, Run]:
    (tmp_path / "crucible.toml").write_text(MANIFEST)
    (tmp_path / "workspace").mkdir()
    loaded = load_manifest(tmp_path / "crucible.toml")
    paths = RunPaths.resolve(loaded, state_dir=tmp_path / "state")
    paths.ensure_state_dirs()
    world = MemoryWorld()
    judge = ValueJudge(world)
    backend = ScriptedBackend(world, step)
    assert isinstance(world, World) and isinstance(judge, Judge) and isinstance(backend, AgentBackend)
    engine = build_engine(
        loaded=loaded,
        paths=paths,
        log=SessionLog(paths.session_log),
        budget=Budget(iterations=5),
        world=world,
        judge=judge,
        backend=backend,
    )
    base = world.prepare()
    run = Run(segment=Segment(regime="", fingerprint=fingerprint("g", "value", ""), best_token=base))
    assert run_baseline(engine, run) is None
    return engine, run


def iteration_steps(engine: Engine) -> list[str]:
    events = read_events(engine.paths.session_log)
    return [e["step"] for e in events if e["kind"] == "step" and e.get("iter") == 1]


def decisions(run: Run) -> list[tuple[str, float | None, str]]:
    return [(row.decision, row.score, row.note) for row in run.rows]


def test_a_better_candidate_is_kept(tmp_path: Path) -> None:
    engine, run = assemble(tmp_path, bump(2))
    assert run_iteration(engine, run) is None
    assert decisions(run) == [("baseline", 0.0, "value=0"), ("keep", 2.0, "value=2")]
    world = engine.world
    assert world.kept[run.segment.best_token] == {"value.txt": "2"}
    assert run.segment.best.score == 2.0 and run.kept == 1 and run.spent == pytest.approx(0.01)
    kinds = [event["kind"] for event in read_events(engine.paths.session_log)]
    # the iteration graph writes the loop's events, not plan events (docs/architecture.md)
    assert "plan_admitted" not in kinds and "task_result" not in kinds
    assert iteration_steps(engine) == [
        "propose",
        "apply",
        "measure",
        "decide",
    ]


def test_a_worse_candidate_is_discarded_and_rolled_back(tmp_path: Path) -> None:
    engine, run = assemble(tmp_path, bump(-1))
    assert run_iteration(engine, run) is None
    assert decisions(run)[-1] == ("discard", -1.0, "value=-1")
    assert engine.world.files == {"value.txt": "0"}
    assert engine.world.restored[-1] == run.segment.best_token


def test_an_unchanged_candidate_is_discarded_unmeasured(tmp_path: Path) -> None:
    engine, run = assemble(tmp_path, lambda world: None)
    measured_before = engine.judge.measured
    assert run_iteration(engine, run) is None
    assert decisions(run)[-1] == ("discard", None, "no change")
    assert engine.judge.measured == measured_before  # the measure step was skipped
    assert iteration_steps(engine) == ["propose", "apply"]


def test_an_invalid_measure_discards(tmp_path: Path) -> None:
    engine, run = assemble(tmp_path, bump(5))
    engine.judge.invalid = True
    assert run_iteration(engine, run) is None
    decision, score, note = decisions(run)[-1]
    assert (decision, score, note) == ("discard", None, "the judge refused it")
    assert engine.world.files == {"value.txt": "0"}


def test_a_transport_failure_spends_no_iteration_and_three_stall_the_run(tmp_path: Path) -> None:
    engine, run = assemble(tmp_path, lambda world: TurnResult(ok=False, failure=FailureClass.SPAWN))
    assert run_iteration(engine, run) is None
    assert run_iteration(engine, run) is None
    assert run.iteration == 0 and len(run.rows) == 1  # no row: the iteration was not spent
    assert run.transport_failures == 2
    assert run_iteration(engine, run) is LoopExit.STALLED
    assert engine.backend.turns == 3


def test_a_measures_side_effect_is_rolled_back_before_the_keep(tmp_path: Path) -> None:
    engine, run = assemble(tmp_path, bump(1))
    world: MemoryWorld = engine.world

    def scribble() -> None:
        world.files["value.txt"] = "100"
        world.files["__pycache__/x.pyc"] = "build output"

    engine.judge.then = scribble
    assert run_iteration(engine, run) is None
    assert decisions(run)[-1] == ("keep", 1.0, "value=1")
    assert world.kept[run.segment.best_token] == {"value.txt": "1"}  # what was measured
    assert len(world.put_back) == 1


def test_a_validly_measured_candidate_is_described_from_its_staged_token_without_a_third_stage(
    tmp_path: Path,
) -> None:
    engine, run = assemble(tmp_path, bump(2))
    world: MemoryWorld = engine.world
    stages_before = world.stages
    assert run_iteration(engine, run) is None
    assert decisions(run)[-1] == ("keep", 2.0, "value=2")
    # the measured token, which is the one kept; staged twice (before and after the measure)
    assert world.described == [("staged", run.segment.best_token)]
    assert world.stages - stages_before == 2


def test_an_invalid_reading_is_described_by_staging_the_workspace_again(tmp_path: Path) -> None:
    engine, run = assemble(tmp_path, bump(5))
    world: MemoryWorld = engine.world
    engine.judge.invalid = True
    assert run_iteration(engine, run) is None
    assert decisions(run)[-1][0] == "discard"
    assert world.described == [("change", None)]
