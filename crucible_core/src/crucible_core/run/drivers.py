"""Choosing and building the run's drivers (world, judge, backend, reporter) from the plugin registries."""

from __future__ import annotations

from collections.abc import Callable

import attrs

from crucible_core.contract.records import value_methods
from crucible_core.manifest.driver_settings import ResolvedSettings
from crucible_core.manifest.loader import LoadedManifest
from crucible_core.manifest.paths import RunPaths
from crucible_core.plugins import Plugins
from crucible_core.protocols import (
    AgentBackend,
    BackendContext,
    Harness,
    HarnessContext,
    HarnessFactory,
    Judge,
    JudgeContext,
    World,
    WorldContext,
)
from crucible_core.shell import Shell

# A `takes_mcp` trait value: the agent gets the turn's MCP servers only when the manifest asks.
WHEN_ASKED = "when-asked"


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class DriverChoice:
    """The names a run resolves to; `crucible check` prints these."""

    world: str
    judge: str
    backend: str
    harness: str
    runs_harness: bool = True  # the backend runs the harness (a trait the backend registered)
    # The agent can call tools of the MCP servers a turn hands it (Turn.mcp_servers): the
    # `takes_mcp` trait of the harness the backend runs, or of the backend itself when it runs
    # no harness. A backend running a harness may veto with takes_mcp=False (its agent cannot
    # reach the host's servers). A backend registering takes_mcp="when-asked" takes them only
    # when the manifest asks for the broker (BrokerSection.asked): its program may never call
    # them. False: the run starts no broker server for nobody to call.
    takes_mcp: bool = False

    def agent_name(self) -> str:
        """The backend, and the harness it runs: how a refusal names the agent."""
        return f"{self.backend} (harness {self.harness})" if self.runs_harness else self.backend

    @classmethod
    def of(cls, loaded: LoadedManifest, plugins: Plugins, *, harness: str | None = None) -> DriverChoice:
        m = loaded.manifest
        backend = m.agent.backend
        harness = harness or m.agent.harness
        entry = plugins.registry("backend", strict=False).entries.get(backend)
        runs_harness = entry is None or bool(entry.trait("runs_harness"))
        if entry is None:
            takes_mcp = False
        elif runs_harness:
            harness_entry = plugins.registry("harness", strict=False).entries.get(harness)
            vetoed = entry.trait("takes_mcp") is False
            takes_mcp = harness_entry is not None and bool(harness_entry.trait("takes_mcp")) and not vetoed
        else:
            trait = entry.trait("takes_mcp")
            takes_mcp = trait is True or (trait == WHEN_ASKED and m.agent.broker.asked())
        return cls(
            world=loaded.world_kind,
            judge=m.judge_kind(),
            backend=backend,
            harness=harness,
            runs_harness=runs_harness,
            takes_mcp=takes_mcp,
        )

    def mcp_unreachable(self, plugins: Plugins) -> str | None:
        """Why the agent cannot call MCP tools, in words for its prompt; None when it can."""
        if self.takes_mcp:
            return None
        entry = plugins.registry("backend", strict=False).entries.get(self.backend)
        if self.runs_harness and entry is not None and entry.trait("takes_mcp") is False:
            return f"backend {self.backend} cannot hand its agent the engine host's MCP servers"
        if self.runs_harness:
            return f"harness {self.harness} cannot call MCP tools"
        if entry is not None and entry.trait("takes_mcp") == WHEN_ASKED:
            return f"backend {self.backend} gets the broker only when [agent.broker] asks for it"
        return f"backend {self.backend} cannot call MCP tools"

    def verify(self, plugins: Plugins) -> None:
        """Fail early, naming installed names, for any driver that is not installed."""
        plugins.registry("world").get(self.world, where="[world]")
        plugins.registry("judge").get(self.judge, where="[judge]")
        plugins.registry("backend").get(self.backend, where="[agent].backend")
        if self.runs_harness:
            plugins.registry("harness").get(self.harness, where="[agent].harness")


@value_methods
@attrs.define(repr=False, eq=False)
class NoteRelay:
    """Carries the world's notes to the session log, which is opened after the drivers are built."""

    sink: Callable[[str], None] | None = None
    held: list[str] = attrs.field(factory=list)

    def __call__(self, text: str) -> None:
        if self.sink is None:
            self.held.append(text)
        else:
            self.sink(text)

    def connect(self, sink: Callable[[str], None]) -> None:
        self.sink = sink
        held, self.held = self.held, []
        for text in held:
            sink(text)


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Drivers:
    world: World
    judge: Judge
    backend: AgentBackend
    choice: DriverChoice
    world_notes: NoteRelay = attrs.field(factory=NoteRelay)


def build_drivers(
    plugins: Plugins,
    loaded: LoadedManifest,
    paths: RunPaths,
    shell: Shell,
    *,
    harness: str | None = None,
    model: str | None = None,
    world_record: bool = True,
) -> Drivers:
    """`world_record=False` (a `crucible check` probe) gives the world no private directory."""
    m = loaded.manifest
    choice = DriverChoice.of(loaded, plugins, harness=harness)
    choice.verify(plugins)
    settings = loaded.resolve_settings(plugins, harness=choice.harness)
    agent = attrs.evolve(m.agent, model=model) if model else m.agent
    notes = NoteRelay()
    spared = (*_spared(loaded, paths), *_harness_spared(plugins, choice))
    world = world_of(
        plugins, loaded, paths, shell, notes, spared=spared, world_record=world_record, settings=settings
    )
    judge = plugins.registry("judge").get(choice.judge, where="[judge]")(
        JudgeContext(m.judge, paths.workspace, shell, settings=settings.of("judge"))
    )

    def resolve_harness(name: str) -> Harness:
        factory: HarnessFactory = plugins.registry("harness").get(name, where="[agent].harness")
        own = settings.of("harness") if name == choice.harness else None
        return factory(HarnessContext(agent, paths.manifest_dir, paths.private_dir, own))

    backend = plugins.registry("backend").get(choice.backend, where="[agent].backend")(
        BackendContext(
            manifest=m,
            agent=agent,
            manifest_dir=paths.manifest_dir,
            workspace=paths.workspace,
            private_dir=paths.private_dir,
            shell=shell,
            resolve_harness=resolve_harness,
            harness_name=choice.harness,
            settings=settings.of("backend"),
        )
    )
    return Drivers(world, judge, backend, choice, notes)


def world_of(
    plugins: Plugins,
    loaded: LoadedManifest,
    paths: RunPaths,
    shell: Shell,
    notes: Callable[[str], None],
    *,
    spared: tuple[str, ...],
    world_record: bool,
    settings: ResolvedSettings | None = None,
) -> World:
    """The world the manifest selects. An assembled manifest's gets, in WorldContext.parts, one
    world per component: its own [world], in its own directory, with its own record."""
    worlds = plugins.registry("world")
    parts = []
    for component in loaded.components:
        own = component.loaded.manifest
        workspace = paths.workspace / component.name
        factory = worlds.get(component.loaded.world_kind, where=f"[world] of component {component.name!r}")
        context = WorldContext(
            workspace,
            own.world,
            own.workspace.carried,
            attrs.evolve(shell, cwd=workspace),
            private_dir=paths.private_dir / "world" / component.name if world_record else None,
            note=notes,
            settings=component.loaded.settings.of("world"),
        )
        parts.append((component.name, factory(context)))
    world: World = worlds.get(loaded.world_kind, where="[world]")(
        WorldContext(
            paths.workspace,
            loaded.manifest.world,
            spared,
            shell,
            private_dir=paths.private_dir / "world" if world_record else None,
            note=notes,
            settings=(settings or loaded.settings).of("world"),
            parts=tuple(parts),
        )
    )
    return world


def _spared(loaded: LoadedManifest, paths: RunPaths) -> list[str]:
    return [*paths.spared_in_workspace(), *loaded.manifest.workspace.carried]


def _harness_spared(plugins: Plugins, choice: DriverChoice) -> tuple[str, ...]:
    """Workspace paths the selected harness keeps there (its skills, say) that a restore must keep."""
    entry = plugins.registry("harness", strict=False).entries.get(choice.harness)
    return tuple(entry.trait("spared", ())) if entry is not None else ()
