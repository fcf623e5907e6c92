"""crucible-plugin-search-wide: the `wide` round strategy, N candidates proposed at once before the deep loop.

It owns `[search]` (settings.py) and runs the round core asks for when `[search].wide` or
`--wide N` is not 0 (docs/search.md). Only the registration lives here; the round's modules
load when a run or a check first prepares one, so `crucible --help` does not pay for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:
    from crucible_core.api import Register, RoundRequest, RoundStrategy, SearchRound


class _Wide:
    """The registered strategy: it imports the round only when asked to prepare one."""

    def prepare(self, request: RoundRequest) -> SearchRound | None:
        from crucible_search_wide.strategy import prepare

        return prepare(request)


@hookimpl
def crucible_register_round_strategies(register: Register[RoundStrategy]) -> None:
    register("wide", _Wide(), settings="crucible_search_wide.settings:SearchSettings")
