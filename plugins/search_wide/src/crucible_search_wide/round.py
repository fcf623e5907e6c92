"""A wide round: N candidates proposed at once in forks, measured one by one, ranked, the best kept.

The round is the graph of graph.py on the plan executor, with one worker per candidate:

- `propose-<slot>` (worker threads, concurrently): the executor asks `WorldForks` for a fork
  of the kept state (the World's `fork`, a git worktree under the state directory), the agent
  takes one turn there with its slot's approach biased into the prompt (or, when
  `[search].needs` sends it elsewhere, the backend's turn command runs through the task
  runner's shell, which brings the fork back edited; placement.py), and the fork's change
  is captured to `<private>/wide/candidates/<slot>.patch` and made durable *before* the
  candidate's record `<slot>.json` is written. A candidate with a record is finished: a
  resume never proposes it again. The executor removes the fork when the task settles.
- `measure` (once every proposal settled): for each candidate in slot order, the main
  workspace goes back to the kept state, the World adopts the captured change, and the
  candidate is staged, preflighted and measured there as a deep candidate is. Measures are
  strictly serial. The policy (`top-k` or `halving`, policy.py) decides which
  candidates are measured again.
- `decide`: one `phase: "wide"` row per candidate, the best is applied once more and kept when
  it beats the incumbent by the usual rule and margin, and the round's last row says so.

Everything here runs on the engine's operations (World, Judge, backend); nothing touches git
or a subprocess directly.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from crucible_core.api import (
    DEFAULT_TURN_TIMEOUT,
    AgentBackend,
    Attempt,
    CommandShell,
    ExecutorConfig,
    FailureClass,
    ForkingWorld,
    LoopExit,
    ManifestError,
    Outcome,
    PlanExecutor,
    Reading,
    Run,
    RunFailed,
    ShellStdin,
    ShellTurnBackend,
    Statistic,
    TaskContext,
    Turn,
    TurnResult,
    Verdict,
    World,
    combine,
    decide,
    measure_staged,
    note_with_margin,
    refresh_frozen,
    snapshot_keep,
    stage_for_measure,
    wire,
    write_atomic,
)
from crucible_search_wide.graph import admitted, proposals_plan, ranking_plan, slot_of, wide_kinds
from crucible_search_wide.policy import Ranked, successive_halving, top_k
from crucible_search_wide.settings import WIDE_DIR, SearchSettings, search_problem

if TYPE_CHECKING:
    from crucible_core.api import Engine
    from crucible_search_wide.placement import ProposalPlacement

WIDE_PHASE = wire.WIDE_PHASE
# The note that opens the round's last row: a resume that finds it knows the round is over.
DECIDED = wire.WIDE_DECIDED


@attrs.frozen
class WideSettings:
    """The round as this run executes it: `[search]` with the CLI's overrides applied."""

    width: int
    approaches: tuple[str, ...]
    policy: str
    keep: int
    needs: str | None = None  # [search].needs: what each proposal needs (placement.py)


def wide_settings(
    has_judge: bool, search: SearchSettings | None, wide: int | None, keep: int | None
) -> WideSettings | None:
    """The round to run, or None for a pure-deep run; ManifestError when it cannot run as asked.

    `search` is the manifest's `[search]`; `--wide N` and `--wide-keep K` override
    `[search].wide` and `[search].policy_k`.
    """
    width = wide if wide is not None else (search.wide if search is not None else 0)
    if width == 0:
        return None
    if not has_judge:
        raise ManifestError("--wide needs a [judge]: a wide round ranks its candidates by the judge")
    approaches = search.approaches if search is not None else ()
    policy_k = keep if keep is not None else (search.policy_k if search is not None else 1)
    problem = search_problem(
        width,
        policy_k,
        len(approaches),
        "--wide" if wide is not None else "[search].wide",
        "--wide-keep" if keep is not None else "[search].policy_k",
    )
    if problem:
        raise ManifestError(problem, hint="add [search].approaches, one line per candidate (docs/search.md)")
    return WideSettings(
        width,
        approaches[:width],
        search.policy if search is not None else "top-k",
        policy_k,
        str(search.needs) if search is not None and search.needs is not None else None,
    )


def forget_round(private_dir: Path) -> None:
    """Drop a wide round's files before a fresh run (a fresh run has no worktree to remove)."""
    shutil.rmtree(RoundFiles(private_dir).root, ignore_errors=True)


def recorded_settings(private_dir: Path) -> WideSettings | None:
    """The settings a wide round of this state directory started with, or None."""
    try:
        raw = json.loads((RoundFiles(private_dir).settings).read_text(encoding="utf-8"))
        return WideSettings(
            width=int(raw["width"]),
            approaches=tuple(str(a) for a in raw["approaches"]),
            policy=str(raw["policy"]),
            keep=int(raw["keep"]),
            needs=str(raw["needs"]) if raw.get("needs") is not None else None,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def refuse_unforkable(world: World, world_name: str) -> None:
    """A wide round needs a World that forks; say which one does not, before anything starts."""
    if not isinstance(world, ForkingWorld):
        raise ManifestError(
            f"[search].wide needs a world that can fork worktrees, and the {world_name!r} world cannot",
            hint="run without --wide / [search].wide, or use the git world (a command or composite "
            "world keeps state a worktree cannot copy)",
        )
    problem = world.fork_problem()
    if problem:
        raise ManifestError(
            f"[search].wide cannot run here: {problem}", hint="install git, or run without --wide"
        )


# -- forks as the executor's disposable copies ------------------------------------------------


class _Fork:
    def __init__(self, world: ForkingWorld, path: Path) -> None:
        self.world = world
        self.path = path

    def diff(self) -> str:
        return ""  # the propose operation captures the change itself, durably

    def discard(self) -> None:
        self.world.remove_fork(self.path)


class WorldForks:
    """`DisposableCopies` for the executor, lent by the World: each copy is a fork of `token`."""

    def __init__(self, world: ForkingWorld, root: Path, token: str) -> None:
        self.world = world
        self.root = root
        self.token = token

    def make_copy(self, label: str) -> _Fork:
        path = self.root / label
        try:
            if os.path.lexists(path):  # a fork a killed process left at this name
                self.world.remove_fork(path)
            self.world.fork(path, self.token)
        except RunFailed as exc:  # the executor settles an OSError as a transport failure
            raise OSError(exc.message) from exc
        return _Fork(self.world, path)


def sweep_forks(world: World, root: Path) -> list[str]:
    """Remove every fork under `root` (what a killed round left); the names removed."""
    if not root.is_dir():
        return []
    removed = []
    for entry in sorted(root.iterdir()):
        if isinstance(world, ForkingWorld):
            world.remove_fork(entry)
        if entry.is_symlink() or entry.is_file():
            entry.unlink()
        elif entry.exists():
            shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry.name)
    return removed


# -- the durable record of a proposed candidate ----------------------------------------------


@attrs.frozen
class Candidate:
    """A finished proposal, as its record file says (written after its patch is durable)."""

    slot: int
    approach: str
    ok: bool  # the turn completed
    changed: bool  # the patch holds a change
    note: str = ""
    cost: float = 0.0

    def to_json(self) -> bytes:
        return json.dumps(attrs.asdict(self), sort_keys=True).encode("utf-8")

    @classmethod
    def read(cls, path: Path) -> Candidate | None:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            return cls(
                slot=int(raw["slot"]),
                approach=str(raw["approach"]),
                ok=bool(raw["ok"]),
                changed=bool(raw["changed"]),
                note=str(raw.get("note", "")),
                cost=float(raw.get("cost", 0.0)),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None  # torn or absent: the candidate is proposed again


class RoundFiles:
    """Where one run's wide round keeps its forks, patches, records and prompts (mode 0700)."""

    def __init__(self, private_dir: Path) -> None:
        self.root = private_dir / WIDE_DIR
        self.forks = self.root / "forks"
        self.candidates = self.root / "candidates"
        self.settings = self.root / "settings.json"  # the round as started: a resume needs no --wide

    def make(self) -> None:
        for directory in (self.root, self.forks, self.candidates):
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)

    def clear(self) -> None:
        shutil.rmtree(self.candidates, ignore_errors=True)

    def patch(self, slot: int) -> Path:
        return self.candidates / f"{slot}.patch"

    def record(self, slot: int) -> Path:
        return self.candidates / f"{slot}.json"

    def finished(self, slot: int) -> Candidate | None:
        found = Candidate.read(self.record(slot))
        if found is None or found.slot != slot:
            return None
        if found.changed and not self.patch(slot).is_file():
            return None
        return found


# -- the round's operations -------------------------------------------------------------------


class WideOperations:
    """The engine operations of a wide round's graph (plan/wide.py), lent to the executor."""

    def __init__(self, engine: Engine, run: Run, settings: WideSettings, files: RoundFiles) -> None:
        self.engine = engine
        self.run = run
        self.settings = settings
        self.files = files
        self.error: Exception | None = None
        self.candidates: dict[int, Candidate] = {}
        self.readings: dict[int, list[Reading]] = {}
        self.ranked: Ranked | None = None
        self.exit: LoopExit | None = None
        world = engine.world
        assert isinstance(world, ForkingWorld)  # refuse_unforkable ran before the run started
        self.world: ForkingWorld = world
        self._lock = threading.Lock()  # spend and plugin hooks, from the proposal threads

    def run_operation(self, op: str, context: TaskContext) -> Attempt:
        try:
            if op == "propose":
                slot = slot_of(context.task.name)
                if slot is None:
                    return Attempt(Outcome.FAIL, note=f"{context.task.name} is not a candidate slot")
                return self._propose(slot, context.workdir, context.shell)
            if op == "measure":
                return self._measure()
            if op == "decide":
                return self._decide()
            return Attempt(Outcome.FAIL, note=f"a wide round has no {op} operation")
        except Exception as exc:  # re-raised once the graph settled: the run must fail
            with self._lock:
                if self.error is None:
                    self.error = exc
            return Attempt(Outcome.FAIL, note=f"{type(exc).__name__}: {exc}")

    # -- propose (a worker thread, in the candidate's fork) --------------------------------
    def _propose(self, slot: int, fork: Path, shell: CommandShell | None) -> Attempt:
        engine = self.engine
        approach = self.settings.approaches[slot - 1]
        refresh_frozen(engine.loaded.injects, fork)  # the candidate sees its gate as the main workspace does
        turn = propose_candidate(
            engine, self.run, slot, self.settings.width, approach, fork, self._lock, shell=shell
        )
        with self._lock:
            self.run.spent += turn.cost_usd
        if shell is not None and turn.transport_failure:
            # Lost with the machine it ran on (an evicted pod): no record, so the executor's
            # retries propose it again in the same fork (which came back untouched).
            return Attempt(Outcome.TRANSPORT, note=turn.note, cost_usd=0.0, transport="agent")
        changed, ok, note = False, turn.ok, turn.note
        if turn.ok:
            patch = self.files.patch(slot)
            scratch = patch.with_name(f".{patch.name}.partial")
            try:
                changed = self.world.capture(fork, self.run.segment.best_token, scratch)
            except RunFailed as exc:  # a candidate that wrecked its own worktree: its failure, not the run's
                ok, note = False, f"its change could not be captured: {exc.message}"
            else:
                _make_durable(scratch, patch)
                note = "" if changed else "no change"
        record = Candidate(slot, approach, ok, changed, note, turn.cost_usd)
        # the record last: with it on disk the candidate is finished and never proposed again
        write_atomic(self.files.record(slot), record.to_json(), mode=0o600)
        engine.note(
            f"wide candidate {slot}/{self.settings.width} proposed "
            f"({'changed' if changed else note or 'no change'}; approach: {_short(approach)})"
        )
        return Attempt(Outcome.PASS, output={"changed": changed}, cost_usd=0.0)

    # -- measure (the loop's thread, serial) -----------------------------------------------
    def _measure(self) -> Attempt:
        engine, run = self.engine, self.run
        for slot in range(1, self.settings.width + 1):
            found = self.files.finished(slot)
            if found is None:  # never finished: no worktree, or its machine lost on every attempt
                approach = self.settings.approaches[slot - 1]
                why = (
                    "its worktree could not be made"
                    if self.settings.needs is None
                    else "its worktree could not be made, or every attempt was lost with its machine"
                )
                found = Candidate(slot, approach, False, False, f"its proposal never finished: {why}")
                engine.note(f"wide candidate {slot} never finished: {why}", "warn")
            self.candidates[slot] = found
        measurable = [str(s) for s, c in self.candidates.items() if c.ok and c.changed]
        judge = engine.loaded.manifest.judge
        statistic = judge.statistic if judge is not None else Statistic.MEDIAN
        policy = successive_halving if self.settings.policy == "halving" else top_k
        engine.gates.check_abort()
        self.ranked = policy(measurable, self._measure_one, self.settings.keep, engine.direction, statistic)
        engine.world.restore(run.segment.best_token)
        best = self.ranked.winners[0] if self.ranked.winners else None
        return Attempt(Outcome.PASS, metric=self._score(int(best)) if best else None)

    def _measure_one(self, name: str) -> float | None:
        """Bring candidate `name` into the main workspace and measure it there; its score or None."""
        slot = int(name)
        reading = self._apply_and_measure(slot)
        self.readings.setdefault(slot, []).append(reading)
        return reading.score if reading.scoreable else None

    def _apply_and_measure(self, slot: int) -> Reading:
        engine, run = self.engine, self.run
        engine.world.restore(run.segment.best_token)
        adopted = self.world.adopt(self.files.patch(slot))
        if not adopted.ok:
            return Reading.invalid(f"the candidate did not apply: {adopted.note}")
        staged = stage_for_measure(engine, run.iteration)
        if staged.refused:
            return Reading.invalid(staged.refused)
        rejected = engine.candidate_preflight(run.iteration)
        if rejected is not None:
            return Reading.invalid(rejected)
        if engine.has_candidate_rungs:
            staged = stage_for_measure(engine, run.iteration)
            if staged.refused:
                return Reading.invalid(staged.refused)
        return measure_staged(engine, run, run.iteration, staged)

    def _reading(self, slot: int) -> Reading | None:
        readings = self.readings.get(slot)
        if not readings:
            return None
        judge = self.engine.loaded.manifest.judge
        return combine(readings, judge.statistic if judge is not None else Statistic.MEDIAN)

    def _score(self, slot: int) -> float | None:
        reading = self._reading(slot)
        return reading.score if reading is not None and reading.scoreable else None

    # -- decide ----------------------------------------------------------------------------
    def _decide(self) -> Attempt:
        engine, run = self.engine, self.run
        assert self.ranked is not None
        engine.step("decide", run.iteration)
        winners = [int(name) for name in self.ranked.winners]
        for slot, found in sorted(self.candidates.items()):
            if winners and slot == winners[0]:
                continue  # the round's last row
            rank = winners.index(slot) + 1 if slot in winners else None
            reading = self._reading(slot) or Reading.invalid(found.note or "not measured")
            prefix = f"wide candidate {slot}" + (f", winner {rank} of {len(winners)}" if rank else "")
            engine.row(
                run,
                iteration=0,  # the round's rows sit before iteration 1, as the wire expects
                verdict="discard",
                reading=reading,
                note=f"{prefix} ({_short(found.approach)}): {reading.note or found.note}",
                phase=WIDE_PHASE,
            )
        if not winners:
            engine.world.restore(run.segment.best_token)
            engine.row(
                run,
                iteration=0,
                verdict="discard",
                reading=None,
                token=run.segment.best_token,
                note=f"{DECIDED}: no candidate gave a valid score; the deep loop starts from the kept state",
                phase=WIDE_PHASE,
            )
            return Attempt(Outcome.PASS)
        self.exit = self._settle_winner(winners[0], len(winners))
        return Attempt(Outcome.PASS)

    def _settle_winner(self, slot: int, of: int) -> LoopExit | None:
        engine, run = self.engine, self.run
        seg = run.segment
        reading = self._reading(slot)
        assert reading is not None
        found = self.candidates[slot]
        margin = engine.keep_margin(run)
        verdict = decide(reading, seg.best, engine.direction, engine.tiebreak_direction, margin)
        sha = token = None
        change = None  # a kept winner's row carries its change; a discarded one was never re-applied
        engine.world.restore(seg.best_token)
        if verdict is not Verdict.DISCARD:
            adopted = self.world.adopt(self.files.patch(slot))
            staged = stage_for_measure(engine, run.iteration) if adopted.ok else None
            if staged is None or staged.refused:
                why = adopted.note if not adopted.ok else (staged.refused if staged else "")
                engine.world.restore(seg.best_token)
                verdict, reading = (
                    Verdict.DISCARD,
                    attrs.evolve(reading, note=f"could not apply again: {why}"),
                )
            else:
                change = engine.describe_candidate(seg.best_token)
                token, sha = snapshot_keep(
                    engine, run, f"crucible: wide candidate {slot} ({_short(found.approach)})"
                )
                seg.adopt(reading, verdict)
        kept = verdict is not Verdict.DISCARD
        said = reading.note
        if not kept:  # what the margin asked of it, in the log's own note
            said = note_with_margin(
                said, score=reading.score, best=seg.best.score, margin=margin, direction=engine.direction
            )
        engine.row(
            run,
            iteration=0,  # the round's rows sit before iteration 1, as the wire expects
            verdict="keep" if kept else "discard",
            reading=reading,
            sha=sha,
            token=token,
            margin=margin,
            change=change,
            note=(
                f"{DECIDED}: candidate {slot}, winner 1 of {of} ({_short(found.approach)}), "
                f"{'kept' if kept else 'not better than the incumbent'}: {said}"
            ),
            phase=WIDE_PHASE,
        )
        if sha is not None:
            engine.kept(run.iteration, sha, reading.note)  # a kept commit, like any keep
        if kept and reading.solved:
            run.solved = True
            if not engine.options.no_early_stop:
                return LoopExit.SOLVED
        return None


def propose_candidate(
    engine: Engine,
    run: Run,
    slot: int,
    width: int,
    approach: str,
    fork: Path,
    hooks: threading.Lock,
    *,
    shell: CommandShell | None = None,
) -> TurnResult:
    """One candidate's agent turn in its fork; safe to run on several threads at once.

    Each candidate has its own prompt file and workspace; the operator's steering is left for
    the deep loop (a wide prompt carries its approach instead). Plugin turn hooks run one
    candidate at a time, and only without a broker: its grants are per turn and serial.
    With a task runner's `shell` the turn's command runs there (`remote_turn`).
    """
    iteration = run.iteration + 1
    steer = (
        f"This is wide-round candidate {slot} of {width}: several agents attack the goal at once, "
        f"each from a different angle. Take this approach, and only this one:\n\n{approach}"
    )
    text = engine.render_prompt(run, iteration, steer)
    redacted = engine.redactor.text(text)
    if shell is not None:
        text = redacted  # the prompt leaves this machine: only as the prompt file has it
    prompt_file = engine.paths.private_dir / WIDE_DIR / f"prompt-{slot}.md"
    write_atomic(prompt_file, redacted.encode("utf-8"), mode=0o600, durable=False)
    env = {
        "CRUCIBLE_PROMPT_FILE": str(prompt_file),
        "CRUCIBLE_CANDIDATE": str(slot),
        "CRUCIBLE_APPROACH": approach,
    }
    # candidates are independent: no shared conversation
    turn, capped = engine.agent_turn(iteration, text, fork, env, session=None)
    lifecycle = engine.lifecycle if engine.broker is None else None
    if lifecycle is not None:
        with hooks:
            turn = lifecycle.before_turn(turn)
    result: TurnResult | None = None
    try:
        result = engine.backend.run_turn(turn) if shell is None else remote_turn(engine.backend, turn, shell)
    finally:
        prompt_file.unlink(missing_ok=True)
        capped.finish()
        if lifecycle is not None:
            with hooks:
                lifecycle.after_turn(turn, result)
    engine.log.emit(
        wire.Turn(
            iter=iteration,
            ok=result.ok,
            failure=result.failure.value if result.failure else None,
            cost=result.cost_usd,
            note=f"wide candidate {slot}: {result.note}",
        )
    )
    return result


def remote_turn(backend: AgentBackend, turn: Turn, shell: CommandShell) -> TurnResult:
    """The turn's one command, carried out by a task runner's shell; the fork comes back edited.

    The placement refused a backend without `shell_turn` at start; one reaching here anyway
    fails its candidate rather than running the turn on this machine.
    """
    if not isinstance(backend, ShellTurnBackend):
        return TurnResult(False, FailureClass.COMMAND, note="the backend's turn is not one shell command")

    command = backend.shell_turn(turn)
    done = shell(
        command.command,
        command.env,
        turn.deadline_seconds or DEFAULT_TURN_TIMEOUT,
        stdin=ShellStdin(command.stdin, command.stdin_file_env),
        returns_workspace=True,
    )
    return command.finish(done)


def _make_durable(scratch: Path, final: Path) -> None:
    """fsync the captured patch and move it into place, so a kill after this keeps it whole."""
    fd = os.open(scratch, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(scratch, 0o600)
    os.replace(scratch, final)
    directory = os.open(final.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _short(text: str, limit: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


# -- the round, as the runner calls it --------------------------------------------------------


def round_decided(run: Run) -> bool:
    """Whether this run's wide round already ended (its last row is in the log)."""
    return wire.wide_round_decided(run.rows)


def run_wide_round(
    engine: Engine,
    run: Run,
    settings: WideSettings,
    *,
    resuming: bool = False,
    placement: ProposalPlacement | None = None,
) -> LoopExit | None:
    """Propose, measure, rank and decide one wide round; an exit when the run must end.

    A resumed round keeps the candidates whose records are on disk and proposes the rest.
    `placement` says where the proposals run (placement.py); None: here.
    """
    world = engine.world
    assert isinstance(world, ForkingWorld)
    files = RoundFiles(engine.paths.private_dir)
    files.make()
    swept = sweep_forks(world, files.forks)
    if swept:
        engine.note(f"removed {len(swept)} worktree(s) a killed wide round left behind")
    if not resuming:
        files.clear()
        files.make()
        write_atomic(files.settings, json.dumps(attrs.asdict(settings)).encode("utf-8"), mode=0o600)
    engine.phase(WIDE_PHASE, run.iteration)
    pending = [slot for slot in range(1, settings.width + 1) if files.finished(slot) is None]
    done = settings.width - len(pending)
    engine.note(
        f"wide round: {settings.width} candidates ({settings.policy}, keep {settings.keep})"
        + (f"; {done} already proposed before the resume" if resuming and done else "")
        + (f"; {placement.describe()}" if placement is not None and placement.needs else "")
    )
    operations = WideOperations(engine, run, settings, files)
    config = ExecutorConfig(
        workspace=engine.paths.workspace,
        state_dir=engine.paths.private_dir,
        jobs=max(1, len(pending)),
        engine=operations,
        copies=WorldForks(world, files.forks, run.segment.best_token),
        env={},
        iteration=run.iteration,
        inline=False,  # one worker thread per candidate: the turns run at the same time
        record=False,
        caps=placement.caps if placement is not None else frozenset(),
        task_runners=placement.runners if placement is not None else (),
    )
    if pending:
        try:
            proposals = admitted(proposals_plan(pending, settings.needs))
            PlanExecutor(proposals, wide_kinds(), engine.log, config).run()
        finally:
            sweep_forks(world, files.forks)  # an interrupted executor still leaves no worktree
        if operations.error is not None:
            raise operations.error
    # measures and the keep on the loop's own thread, one at a time, as in the deep loop
    ranking = attrs.evolve(config, jobs=1, inline=True, copies=None, task_runners=())
    PlanExecutor(admitted(ranking_plan()), wide_kinds(), engine.log, ranking).run()
    if operations.error is not None:
        raise operations.error
    if operations.ranked is None:
        raise RunFailed("the wide round ended without ranking its candidates", hint="see the log's notes")
    files.clear()
    return operations.exit


def wide_round_due(
    engine: Engine,
    run: Run,
    settings: WideSettings | None,
    *,
    resumed: bool,
    placement: ProposalPlacement | None = None,
) -> Callable[[], LoopExit | None] | None:
    """The round to run before the deep loop, or None: it runs once, before iteration 1."""
    if settings is None or round_decided(run):
        return None
    if run.iteration > 0:
        engine.note("the wide round was not run: the deep loop had already started", level="warn")
        return None
    return lambda: run_wide_round(engine, run, settings, resuming=resumed, placement=placement)
