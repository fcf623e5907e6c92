"""A loop manifest's check: validate it, prove the measure contract, run the gate self-test (session/check.py checks every kind)."""

from __future__ import annotations

import shlex
import shutil
import statistics
from collections.abc import Callable
from pathlib import Path

import attrs

from crucible_core.contract.decide import better
from crucible_core.contract.measure_diagnosis import explain_invalid
from crucible_core.contract.noise import noise_margin
from crucible_core.contract.reading import Direction, Reading
from crucible_core.contract.records import value_methods
from crucible_core.errors import CrucibleError
from crucible_core.manifest.driver_settings import WIDE
from crucible_core.manifest.loader import LoadedManifest
from crucible_core.manifest.paths import RunPaths
from crucible_core.plugins import Plugins
from crucible_core.protocols import MeasureContext, World
from crucible_core.run.agent_ready import agent_problems
from crucible_core.run.drivers import DriverChoice, Drivers, build_drivers
from crucible_core.run.engine import RunOptions, agent_environment, engine_environment
from crucible_core.run.injects import refresh_frozen
from crucible_core.run.opened_runners import DEFAULT_MEASURE_TIMEOUT, RunRunners, open_run_runners
from crucible_core.run.preflight import Preflight
from crucible_core.run.rounds import SearchRound, prepare_round
from crucible_core.run.workspace_setup import prepare_workspace, source_notice, workspace_in_use
from crucible_core.shell import Shell

TASK_NOTICE = (
    "TASK MODE: this manifest has no [judge]. There is no score and no baseline; every "
    "completed turn is kept, and the run exits 0 when its iterations are spent."
)


@value_methods
@attrs.define(repr=False, eq=False)
class Findings:
    lines: list[tuple[str, str]] = attrs.field(factory=list)  # (level, text): ok | warn | fail | info
    # told of each finding as it is made, so `crucible check` prints while a slow measure runs
    on_add: Callable[[str, str], object] | None = attrs.field(default=None, eq=False, repr=False)

    def add(self, level: str, text: str) -> None:
        self.lines.append((level, text))
        if self.on_add is not None:
            self.on_add(level, text)

    @property
    def failed(self) -> bool:
        return any(level == "fail" for level, _ in self.lines)


def unprotected_gate_paths(loaded: LoadedManifest) -> list[str]:
    """measure_cmd tokens naming files inside the workspace that no frozen inject re-copies."""
    judge = loaded.manifest.judge
    if judge is None or judge.measure_cmd is None:
        return []
    frozen = {entry.destination for entry in loaded.injects if entry.frozen}
    try:
        tokens = shlex.split(judge.measure_cmd)
    except ValueError:
        tokens = judge.measure_cmd.split()
    reachable = []
    for token in tokens:
        if "/" not in token or token.startswith("/") or token.startswith("-"):
            continue
        rel = Path(token).as_posix().removeprefix("./")
        if ".." in Path(rel).parts:
            continue
        if rel not in frozen:
            reachable.append(rel)
    return reachable


def _mean(readings: list[Reading]) -> float:
    return statistics.fmean(r.score for r in readings if r.score is not None)


def run_selftest(
    loaded: LoadedManifest, world: World, shell: Shell, measure: Callable[[], Reading]
) -> tuple[bool, str]:
    """C-SELFTEST: the gate must score a known-good control strictly better than a known-bad one."""
    judge = loaded.manifest.judge
    assert judge is not None and judge.selftest is not None
    selftest = judge.selftest
    pristine = world.snapshot("crucible: self-test pristine")
    results: dict[str, list[Reading]] = {}
    try:
        for label, cmd in (("good", selftest.good_cmd), ("bad", selftest.bad_cmd)):
            world.restore(pristine)
            staged = shell.run(cmd)
            if not staged.ok:
                return False, f"{label}_cmd {staged.describe_failure()}"
            results[label] = [measure() for _ in range(selftest.runs)]
            world.restore(pristine)
    finally:
        world.restore(pristine)
    invalid = [f"{label}: {r.note}" for label, rs in results.items() for r in rs if not r.scoreable]
    if invalid:
        return False, "a control reading was invalid (" + "; ".join(invalid) + ")"
    good, bad = _mean(results["good"]), _mean(results["bad"])
    direction: Direction = judge.direction
    if better(good, bad, direction):
        return True, f"good {good:g} beats bad {bad:g} ({direction.value} is better)"
    return (
        False,
        f"good {good:g} does not beat bad {bad:g} ({direction.value} is better): the gate cannot tell them apart",
    )


def check(
    plugins: Plugins,
    loaded: LoadedManifest,
    *,
    harness: str | None = None,
    caps: frozenset[str] = frozenset(),
    findings: Findings | None = None,
) -> Findings:
    """A loop manifest's drivers, settings, declaration, agent and gate, added to `findings`."""
    findings = findings if findings is not None else Findings()
    m = loaded.manifest
    findings.add("ok", f"manifest {loaded.path} parsed")
    choice = DriverChoice.of(loaded, plugins, harness=harness)
    findings.add(
        "info",
        f"plugins: world={choice.world} judge={choice.judge} backend={choice.backend}"
        + (f" harness={choice.harness}" if choice.runs_harness else ""),
    )
    try:
        choice.verify(plugins)
        settings = loaded.resolve_settings(plugins, harness=choice.harness)
    except CrucibleError as exc:
        findings.add("fail", exc.render())
        return findings
    for driver in settings:
        findings.add("info", f"settings: {driver.describe()}")
        # A driver may say more about what its settings resolve to (a sandbox's egress, say).
        describe_resolved = getattr(driver.value, "describe_resolved", None)
        if driver.used and callable(describe_resolved):
            for line in describe_resolved():
                findings.add("info", f"{driver.role} {driver.driver}: {line}")
    _report_declaration(plugins, loaded, findings, unreachable=choice.mcp_unreachable(plugins))
    _report_unignored(loaded, findings)
    if m.task_lane:
        findings.add("warn", TASK_NOTICE)
        if not (m.agent.goal or m.agent.goal_file) or not loaded.goal_text().strip():
            findings.add("fail", "a task manifest needs a goal: set [agent].goal or goal_file")
        else:
            findings.add("ok", "goal present")
        _probe_agent(plugins, loaded, findings, harness)
        return findings
    for rel in unprotected_gate_paths(loaded):
        findings.add(
            "warn",
            f"measure_cmd names {rel!r} inside the workspace the agent edits, and no frozen inject "
            "re-copies it: the agent could change its own gate (add it to [workspace].inject)",
        )
    _probe_gate(plugins, loaded, findings, harness, caps)
    return findings


def _report_declaration(
    plugins: Plugins, loaded: LoadedManifest, findings: Findings, *, unreachable: str | None
) -> None:
    """The resolved output bounds and disclosure, as the run will enforce them (no pack command runs).

    Kept short where nothing was chosen (the session log's exposure still records it all):
    bounds that are all the engine's defaults are one line, and an agent that cannot call MCP
    tools (`unreachable` says why) asks for no mediated write and calls no broker tool, so
    unless publish-on-keep writes, its bounds and tools are one line saying so.
    """
    from crucible_core.broker.service import declaration_for

    try:
        declaration = declaration_for(plugins, loaded)
    except CrucibleError as exc:
        findings.add("fail", exc.render())
        return
    publish = loaded.manifest.publish
    lines = declaration.describe()
    capabilities = lines.index("Capabilities:")
    if unreachable is not None and publish is None:
        lines = [
            f"Output bounds and broker tools: none apply ({unreachable}, so it asks for no mediated write)",
            *(line for line in lines[capabilities:] if not line.startswith("  broker tools:")),
        ]
    elif all(o.source != "manifest" for o in declaration.outputs):
        defaults = ", ".join(f"{o.kind} {o.count}" for o in declaration.outputs)
        lines = [
            f"Output bounds (mediated writes per run): the engine defaults, no [outputs] declared "
            f"({defaults}; a write to a target nothing resolves is refused)",
            *lines[capabilities:],
        ]
    for line in lines:
        findings.add("info", line)
    if publish is not None:
        from crucible_core.run.publish import build_publisher

        try:
            build_publisher(plugins, publish)
            findings.add(
                "info",
                f"publish: the run's kept commits as one draft pull request on {publish.pr_repo} "
                f"(forge {publish.forge}), updated on each keep; one draft-pr write",
            )
        except CrucibleError as exc:
            findings.add("fail", exc.render())
    for problem in declaration.capabilities.uncovered_grants():
        findings.add("fail", problem)


def _report_unignored(loaded: LoadedManifest, findings: Findings) -> None:
    """WARN when the run's workspace or state directory sits in the repository unignored."""
    from crucible_core.manifest.ignore_rules import repository_root, unignored

    m = loaded.manifest
    if m.repo is None or m.repo.path is None:
        return
    # the repository the manifest sits in, or the one [repo].path will be once `git init` ran there
    root = repository_root(loaded.dir) or loaded.resolve(m.repo.path)
    paths = RunPaths.resolve(loaded)
    found = unignored(root, [paths.workspace, paths.state_dir])
    if found:
        listed = " and ".join(f"{rel}/" for rel in found)
        findings.add(
            "warn",
            f"{listed} {'is' if len(found) == 1 else 'are'} inside the repository {root} and no "
            "ignore file covers them: `git add -A` would commit the run's state and add the "
            f"workspace as an embedded repository (add {' '.join('/' + rel + '/' for rel in found)} "
            f"to {root / '.gitignore'})",
        )


# A `noise = "auto"` margin this large a share of the score keeps only changes larger than it.
LARGE_MARGIN_SHARE = 0.10


def report_spread(
    repeats: int, first: Reading, measure: Callable[[], Reading], findings: Findings, *, auto: bool
) -> None:
    """With `[judge].repeats`, measure the workspace that many times and show the margin a
    `noise = "auto"` run would take; with `auto` (the margin in force), warn when it is large."""
    readings = [first, *(measure() for _ in range(repeats - 1))]
    scores = [r.score for r in readings if r.scoreable and r.score is not None]
    if len(scores) < len(readings):
        findings.add(
            "fail", f"{len(readings) - len(scores)} of {repeats} repeated measures gave no valid reading"
        )
        return
    median, margin = statistics.median(scores), noise_margin(scores)
    findings.add(
        "info",
        f"{repeats} measures: median {median:g}, low {min(scores):g}, high {max(scores):g}; "
        f'margin {margin:g} (what noise = "auto" would require)',
    )
    if not auto or margin <= 0:
        return
    if median == 0:
        size = "more than the score itself (0)"
    elif margin >= LARGE_MARGIN_SHARE * abs(median):
        size = f"{margin / abs(median):.0%} of the score {median:g}"
    else:
        return
    findings.add(
        "warn",
        f'noise = "auto" sets a margin of {margin:g}, {size}: only a candidate better than the best '
        f"by more than that is kept. Steady the measure (a longer benchmark, a quieter machine), "
        f'or drop noise = "auto" for a min_improvement you choose',
    )


def check_preflight(preflight: Preflight, findings: Findings) -> None:
    """Every [preflight] rung, start and candidate alike, against the unmodified workspace."""
    for when in ("start", "candidate"):
        for rung in preflight.section.rungs(when):
            result = preflight.run_rung(rung)
            if result.failure is None:
                findings.add("ok", f"preflight {when} rung {rung.label()!r} passed ({result.seconds:.1f}s)")
            else:
                findings.add("fail", result.failure.describe())


def _report_agent(drivers: Drivers, loaded: LoadedManifest, workspace: Path, findings: Findings) -> None:
    """Whether the chosen backend (and harness) can start a turn, each problem with its fix."""
    env = agent_environment(engine_environment(), loaded)
    problems = agent_problems(drivers.backend, env, workspace)
    choice = drivers.choice
    agent = f"backend {choice.backend}" + (f" (harness {choice.harness})" if choice.runs_harness else "")
    for problem in problems:
        findings.add("fail", f"{agent}: {problem}")
    if not problems:
        findings.add("ok", f"{agent} can start a turn")


def _probe_agent(plugins: Plugins, loaded: LoadedManifest, findings: Findings, harness: str | None) -> None:
    paths = RunPaths.resolve(loaded)
    shell = Shell(cwd=paths.workspace, env=engine_environment())
    try:
        drivers = build_drivers(plugins, loaded, paths, shell, harness=harness, world_record=False)
        _report_agent(drivers, loaded, paths.workspace, findings)
    except CrucibleError as exc:
        findings.add("fail", exc.render())


def _report_placement(
    plugins: Plugins, loaded: LoadedManifest, drivers: Drivers, search: SearchRound, caps: frozenset[str]
) -> str:
    """Where the round's work will run (a refusal raises CapabilityUnserved); nothing remote is touched."""
    try:
        return search.place(
            plugins,
            state_dir=RunPaths.resolve(loaded).state_dir,
            caps=caps,
            backend=drivers.backend,
            backend_name=drivers.choice.agent_name(),
            env=engine_environment(),
            runners=None,
        )
    finally:
        search.close()


def _probe_gate(
    plugins: Plugins, loaded: LoadedManifest, findings: Findings, harness: str | None, caps: frozenset[str]
) -> None:
    m = loaded.manifest
    assert m.judge is not None
    paths = RunPaths.resolve(loaded)
    created = not workspace_in_use(paths.workspace)
    shell = Shell(cwd=paths.workspace, env=engine_environment())
    opened = RunRunners()
    try:
        drivers = build_drivers(plugins, loaded, paths, shell, harness=harness, world_record=False)
        if created:
            notice = source_notice(loaded, paths, drivers.world)
            if notice is not None:
                findings.add(*notice)
            prepare_workspace(loaded, paths, drivers.world, shell)
        _report_agent(drivers, loaded, paths.workspace, findings)
        search = prepare_round(plugins, loaded, RunOptions())
        if search is not None:
            # a refusal is a failed finding
            search.refuse(
                drivers.world, drivers.choice.world, drivers.backend, drivers.choice.agent_name(), caps
            )
            findings.add("ok", f"{WIDE} round: {search.describe(drivers.choice.world)}")
            try:
                findings.add(
                    "ok", f"{WIDE} round: {_report_placement(plugins, loaded, drivers, search, caps)}"
                )
            except CrucibleError as exc:
                findings.add("fail", f"{WIDE} round: {exc.render()}")
        if m.preflight is not None:
            check_preflight(Preflight(m.preflight, shell), findings)

        opened = open_run_runners(
            plugins,
            loaded,
            drivers.judge,
            caps=caps,
            # its own identity: opening reclaims what a run of that name left, never a live run's Jobs
            state_dir=paths.state_dir / "check",
            workspace=paths.workspace,
            timeout=m.judge.measure_timeout or DEFAULT_MEASURE_TIMEOUT,
            env=shell.env,
            emit=lambda event: findings.add("info", str(getattr(event, "msg", event))),
        )
        remote = opened.measure
        if remote is not None:
            findings.add(
                "info", f"the judge needs {remote.needs!r}: measured on {remote.where}, as a run will"
            )

        def measure() -> Reading:
            refresh_frozen(loaded.injects, paths.workspace)
            if remote is not None:
                return remote.measure(MeasureContext(iteration=0))
            return drivers.judge.measure(MeasureContext(iteration=0))

        # Through the chosen judge, exactly as the run's baseline will measure.
        reading = measure()
        if not reading.scoreable:
            # A run would discard every candidate against a baseline that never reads valid.
            what = "measure contract" if reading.broken else "baseline"
            findings.add(
                "fail",
                f"{what} ({drivers.choice.judge} judge): the measure gave no valid reading "
                f"({explain_invalid(reading)}); a run would stop at its baseline",
            )
            findings.add("info", "gate self-test skipped: the measure gives no valid reading yet")
            return
        findings.add(
            "ok",
            f"judge {drivers.choice.judge} measured the workspace: valid={reading.valid} "
            f"score={reading.score} {reading.note}".rstrip(),
        )
        if m.judge.repeats > 1:
            report_spread(m.judge.repeats, reading, measure, findings, auto=m.judge.noise == "auto")
        if m.judge.selftest is None:
            findings.add(
                "warn",
                "no [judge.selftest]: the gate has not been shown to tell good from bad (add "
                "[judge.selftest] with good_cmd, a command that stages a change the measure must "
                "score better, and bad_cmd, one it must score worse; both run in a fresh copy of "
                "the workspace; see docs/manifest.md)",
            )
        else:
            passed, detail = run_selftest(loaded, drivers.world, shell, measure)
            findings.add("ok" if passed else "fail", f"gate self-test: {detail}")
    except CrucibleError as exc:
        findings.add("fail", exc.render())
    finally:
        opened.close()
        if created and paths.workspace.exists():
            shutil.rmtree(paths.workspace, ignore_errors=True)
