"""The test kit: one test's crucible (a fresh plugin manager, the scripted drivers, a directory) and its runs.

A plugin author registers the plugin under test on the kit, scripts what the others do (the
workspace's files, each turn's edits, each measure's score) and runs the real loop through
`api.run`, the same session every `crucible run` goes through. What comes back is the run's
result and every session event in the order it was written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from crucible_core.api import (
    AgentBackend,
    BackendContext,
    Judge,
    JudgeContext,
    PluginError,
    Plugins,
    Register,
    RunResult,
    World,
    WorldContext,
    hookimpl,
    load_manifest,
    load_plugins,
    run,
    toml_document,
    wire,
)
from crucible_testkit.drivers import (
    Content,
    Files,
    MemoryWorld,
    Score,
    ScriptedBackend,
    ScriptedJudge,
    Step,
)

# The names the kit's drivers are registered under.
MEMORY_WORLD = "memory"
SCRIPTED_JUDGE = "scripted"
SCRIPTED_BACKEND = "scripted"
KIT_PLUGIN = "crucible-testkit"

# The manifest a kit run uses unless told otherwise: the three scripted drivers.
DEFAULT_MANIFEST: dict[str, dict[str, Any]] = {
    "repo": {"path": "."},  # required by every loop; the memory world clones nothing from it
    "workspace": {"dir": "workspace"},
    "world": {"kind": MEMORY_WORLD},
    "agent": {"backend": SCRIPTED_BACKEND, "goal": "follow the script"},
    "judge": {"kind": SCRIPTED_JUDGE, "direction": "higher"},
}


@attrs.frozen
class KitRun:
    """One kit run: its result, and each session event as written (in order)."""

    result: RunResult
    events: tuple[Mapping[str, Any], ...]
    workspace: Path

    @property
    def records(self) -> list[wire.Line]:
        """The events decoded as the session wire's typed records."""
        return [line for line in map(wire.from_object, self.events) if line is not None]

    @property
    def rows(self) -> list[wire.RowWire]:
        """The decided rows (the baseline's first), as `crucible results` counts them."""
        return [line.event.row for line in self.records if isinstance(line.event, wire.Row)]

    def of_kind(self, kind: str) -> list[Mapping[str, Any]]:
        return [event for event in self.events if event.get("kind") == kind]


class _Drivers:
    """The kit's pluggy plugin: registers the scripted drivers over what the kit holds."""

    def __init__(self, kit: CrucibleKit) -> None:
        self.kit = kit

    @hookimpl
    def crucible_register_worlds(self, register: Register[Any]) -> None:
        register(MEMORY_WORLD, self.kit.make_world)

    @hookimpl
    def crucible_register_judges(self, register: Register[Any]) -> None:
        register(SCRIPTED_JUDGE, self.kit.make_judge)

    @hookimpl
    def crucible_register_backends(self, register: Register[Any]) -> None:
        register(SCRIPTED_BACKEND, self.kit.make_backend)


class CrucibleKit:
    """One test's crucible, in `root`: core's own plugin, the kit's drivers, and what the test adds.

    `installed` names installed plugins (entry-point names, "world_git" say) to load as well.
    """

    def __init__(self, root: Path, *, installed: Iterable[str] = ()) -> None:
        self.root = root
        wanted = ["core", *installed]
        self.plugins: Plugins = load_plugins(names=wanted)
        missing = set(wanted) - {info.name for info in self.plugins.infos}
        if missing:
            failed = "; ".join(f"{f.name}: {f.error}" for f in self.plugins.failures)
            raise PluginError(
                f"the kit could not load the installed plugin(s) {', '.join(sorted(missing))}"
                + (f" ({failed})" if failed else ""),
                hint="name entry points of the crucible group that are installed (`crucible plugins` lists them)",
            )
        self.register(_Drivers(self), name=KIT_PLUGIN)
        self.files: Mapping[str, Content] = {}
        self.turns: Sequence[Step] = ()
        self.scores: Sequence[Score] = ()
        self.states: dict[str, Files] = {}  # the memory world's kept states, across its rebuilds
        self.world: MemoryWorld | None = None
        self.judge: ScriptedJudge | None = None
        self.backend: ScriptedBackend | None = None

    def register(self, plugin: object, *, name: str | None = None) -> None:
        """Register a plugin under test: its module, or any object holding @hookimpl methods."""
        label = name or getattr(plugin, "__name__", None) or type(plugin).__name__
        self.plugins.register_module(plugin, name=label, distribution=label, version="test")

    def registered(self, kind: str, name: str) -> Any:
        """What a plugin registered as `name` in the registry of `kind` ("judge", "pack", ...).

        PluginError (naming what is registered) when nothing did.
        """
        return self.plugins.registry(kind).get(name, where=f"the kit's {kind} registry")

    # -- the factories the registered drivers use ---------------------------------------------
    def make_world(self, ctx: WorldContext) -> World:
        self.world = MemoryWorld.from_context(ctx, self.files, self.states)
        return self.world

    def make_judge(self, ctx: JudgeContext) -> Judge:
        self.judge = ScriptedJudge(ctx.workspace, self.scores)
        return self.judge

    def make_backend(self, ctx: BackendContext) -> AgentBackend:
        self.backend = ScriptedBackend(self.turns)
        return self.backend

    # -- running --------------------------------------------------------------------------------
    def manifest(self, sections: Mapping[str, Mapping[str, Any]] | None = None) -> Path:
        """Write the kit's manifest (the default one, each given section's keys merged over it)."""
        data = {name: dict(keys) for name, keys in DEFAULT_MANIFEST.items()}
        for name, keys in (sections or {}).items():
            data[name] = {**data.get(name, {}), **keys}
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / "crucible.toml"
        path.write_text(toml_document(data), encoding="utf-8")
        return path

    def run(
        self,
        *,
        files: Mapping[str, Content] | None = None,
        turns: Sequence[Step] | None = None,
        scores: Sequence[Score] | None = None,
        iterations: int | None = None,
        manifest: Path | Mapping[str, Mapping[str, Any]] | None = None,
        resume: bool = False,
        **options: Any,
    ) -> KitRun:
        """Run the real loop (the session `crucible run` uses) for `iterations` agent turns.

        files: the workspace the memory world starts from; turns: what each turn writes (or a
        function of the Turn); scores: what each measure reads, the baseline's first. manifest:
        sections merged over the kit's default manifest, or the path of a manifest of your own.
        Other keyword arguments go to `api.run` (max_cost, params, state_dir, ...).
        """
        if files is not None:
            self.files = files
        if turns is not None:
            self.turns = turns
        if scores is not None:
            self.scores = scores
        path = manifest if isinstance(manifest, Path) else self.manifest(manifest)
        events: list[Mapping[str, Any]] = []
        result = run(
            path,
            iterations=iterations,
            resume=resume,
            on_event=events.append,
            plugins=self.plugins,
            **options,
        )
        return KitRun(result, tuple(events), load_manifest(path, plugins=self.plugins).workspace)
