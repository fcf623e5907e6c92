"""The seam for a round before the deep loop (`[search]`, `--wide`): a plugin's round strategy.

Core runs the ordinary loop itself: a baseline, then one candidate per iteration. A run whose
`[search]` table or `--wide N` asks for more (today: a wide round, N candidates proposed at once
and ranked, crucible-plugin-search-wide) asks the registry of round strategies for the one named
`wide`. The strategy owns `[search]` (it registers the settings class its keys convert into) and
everything the round does; core only calls it at the points below, in this order:

- `RoundStrategy.prepare`, before anything starts: the round this run executes, or None;
- `SearchRound.refuse`, still before anything starts: a world or backend the round cannot use;
- `SearchRound.needs` opens the task runners with the judge's, then `SearchRound.place` says
  where the round's work runs (a refusal raises CapabilityUnserved);
- `SearchRound.run`, once the baseline is measured (or a resume recovered the run), before
  iteration 1;
- `SearchRound.close`, when the run ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from crucible_core.contract.records import value_methods
from crucible_core.manifest.driver_settings import ROUND_STRATEGY, WIDE

if TYPE_CHECKING:
    from crucible_core.manifest.loader import LoadedManifest
    from crucible_core.plan.ir import ValidPlan
    from crucible_core.plan.runners import TaskRunner
    from crucible_core.plugins import Plugins
    from crucible_core.protocols import AgentBackend, World
    from crucible_core.run.context import LoopExit, Run
    from crucible_core.run.engine import Engine, RunOptions


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class RoundRequest:
    """What a strategy prepares a run's round from.

    settings: `[search]` converted into the class the strategy registered (None without the table).
    width, keep: `--wide N` and `--wide-keep K` (None: not given).
    private_dir: the run's private state directory, where a round keeps what a resume needs;
    None for `crucible check`, which reads and writes nothing there.
    resume: the run resumes an earlier one in that directory.
    """

    loaded: LoadedManifest
    settings: Any
    width: int | None = None
    keep: int | None = None
    private_dir: Path | None = None
    resume: bool = False


class SearchRound(Protocol):
    """One run's round, as its strategy prepared it."""

    @property
    def needs(self) -> str | None:
        """A capability the round's work needs (`[search].needs`): core opens the task runners for it."""
        ...

    def describe(self, world_name: str) -> str:
        """For `crucible check`, once `refuse` passed: what the round is and what it uses of the world."""
        ...

    def refuse(
        self, world: World, world_name: str, backend: AgentBackend, backend_name: str, caps: frozenset[str]
    ) -> None:
        """Raise a CrucibleError when this world or backend cannot serve the round (before anything starts)."""
        ...

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
        """Decide where the round's work runs; a sentence saying where. CapabilityUnserved when nowhere.

        `runners`: the run's open task runners; None (`crucible check`) lets the round open its
        own as an offline probe, which `close` closes.
        """
        ...

    def graph(self) -> ValidPlan:
        """The round as the graph it executes (`crucible plan show --wide-round`)."""
        ...

    def run(self, engine: Engine, run: Run, *, resumed: bool) -> LoopExit | None:
        """Run the round if it is still due (not decided yet, before iteration 1); an exit ends the run."""
        ...

    def close(self) -> None:
        """Release what `place` opened for the round alone."""
        ...


class RoundStrategy(Protocol):
    """What `crucible_register_round_strategies` registers, with `settings=` its `[search]` class."""

    def prepare(self, request: RoundRequest) -> SearchRound | None:
        """This run's round, or None when it asks for none; ManifestError when it cannot run as asked."""
        ...


def asks_for_round(loaded: LoadedManifest, options: RunOptions) -> bool:
    """Whether this run names a round at all: a `[search]` table, or `--wide` other than 0."""
    return loaded.manifest.search is not None or bool(options.wide)


def prepare_round(
    plugins: Plugins,
    loaded: LoadedManifest,
    options: RunOptions,
    *,
    private_dir: Path | None = None,
    resume: bool = False,
    unfinished: bool = False,
) -> SearchRound | None:
    """The round this run executes, from the installed strategy; None when nothing asks for one.

    With no strategy installed, a run that asks for a round is refused naming the distribution
    to install (PluginError); so is the resume of a run whose log ends inside its round
    (`unfinished`). One that does not ask runs the deep loop alone. A resume asks the
    strategy even without `[search]`: a round started with `--wide` resumes without it.
    """
    registry = plugins.registry(ROUND_STRATEGY)
    if WIDE not in registry and not (unfinished or asks_for_round(loaded, options)):
        return None
    where = "--wide" if options.wide else "the resumed run's wide round" if unfinished else "[search]"
    strategy: RoundStrategy = registry.get(WIDE, where=where)
    request = RoundRequest(
        loaded,
        loaded.settings.of(ROUND_STRATEGY),
        options.wide,
        options.wide_keep,
        private_dir,
        resume,
    )
    return strategy.prepare(request)
