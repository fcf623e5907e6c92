"""The `wide` round strategy: core's seam (`RoundStrategy`, `SearchRound`) over this plugin's round.

`prepare` turns `[search]` and the `--wide` / `--wide-keep` overrides into the round's settings;
a fresh run forgets what an earlier round in its state directory left, and a resume takes back
the settings its round started with when the command line no longer names them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from crucible_search_wide.graph import admitted_wide_plan
from crucible_search_wide.placement import ProposalPlacement, place_proposals, refuse_unsendable_turns
from crucible_search_wide.round import (
    WideSettings,
    forget_round,
    recorded_settings,
    refuse_unforkable,
    wide_round_due,
    wide_settings,
)

if TYPE_CHECKING:
    from crucible_core.api import (
        AgentBackend,
        Engine,
        LoadedManifest,
        LoopExit,
        Plugins,
        RoundRequest,
        Run,
        TaskRunner,
        World,
        ir,
    )


def prepare(request: RoundRequest) -> WideRound | None:
    """The `wide` strategy's `prepare` (the registered strategy calls it)."""
    loaded = request.loaded
    settings = wide_settings(loaded.manifest.judge is not None, request.settings, request.width, request.keep)
    if request.private_dir is not None:
        if not request.resume:
            forget_round(request.private_dir)  # what an earlier run in this state directory left
        elif settings is None:
            settings = recorded_settings(request.private_dir)  # started with --wide, resumed without it
    return WideRound(settings, loaded) if settings is not None else None


@attrs.define
class WideRound:
    """One run's wide round: its settings, and where its proposals run once placed."""

    settings: WideSettings
    loaded: LoadedManifest
    placement: ProposalPlacement | None = None

    @property
    def needs(self) -> str | None:
        return self.settings.needs

    def describe(self, world_name: str) -> str:
        wide = self.settings
        return (
            f"{wide.width} candidates ({wide.policy}, {wide.keep} seed the deep loop); "
            f"the {world_name} world forks worktrees"
        )

    def refuse(
        self, world: World, world_name: str, backend: AgentBackend, backend_name: str, caps: frozenset[str]
    ) -> None:
        refuse_unforkable(world, world_name)
        # A round sent elsewhere needs a backend whose turn is one command: said before anything.
        refuse_unsendable_turns(self.settings.needs, caps, backend, backend_name)

    def place(
        self,
        plugins: Plugins,
        *,
        state_dir: Path,
        caps: frozenset[str],
        backend: AgentBackend,
        backend_name: str,
        env: Mapping[str, str],
        runners: tuple[TaskRunner, ...] | None,
    ) -> str:
        self.placement = place_proposals(
            plugins,
            self.loaded,
            state_dir=state_dir,
            needs=self.settings.needs,
            caps=caps,
            backend=backend,
            backend_name=backend_name,
            env=env,
            runners=runners,
        )
        return self.placement.describe()

    def graph(self) -> ir.ValidPlan:
        return admitted_wide_plan(range(1, self.settings.width + 1), self.settings.needs)

    def run(self, engine: Engine, run: Run, *, resumed: bool) -> LoopExit | None:
        due = wide_round_due(engine, run, self.settings, resumed=resumed, placement=self.placement)
        return due() if due is not None else None

    def close(self) -> None:
        if self.placement is not None:
            self.placement.close()
