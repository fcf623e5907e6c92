"""crucible-plugin-search-wide: the `wide` round strategy, N candidates proposed at once before the deep loop.

It owns `[search]` (settings.py) and runs the round core asks for when `[search].wide` or
`--wide N` is not 0 (docs/search.md). Only the registration lives here; the round's modules
load when a run or a check first prepares one, so `crucible --help` does not pay for them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:
    from crucible_core.api import Register, RoundRequest, RoundStrategy, SearchRound

# In the run's private state directory: a round's forks, records and settings. Here, not in
# settings.py, so a run without a round does not define the settings class to learn the name.
WIDE_DIR = "wide"


class _Wide:
    """The registered strategy: it imports the round only when asked to prepare one."""

    def prepare(self, request: RoundRequest) -> SearchRound | None:
        if _no_round(request):
            return None  # a pure-deep run (most runs) never imports the round's modules
        from crucible_search_wide.strategy import prepare

        return prepare(request)


def _no_round(request: RoundRequest) -> bool:
    """No width asked for and no round on disk: nothing to run, forget or resume (what
    `strategy.prepare` concludes too, after importing the round: about 4 ms of CPU)."""
    search = request.settings
    width = request.width if request.width is not None else (search.wide if search is not None else 0)
    if width != 0:
        return False
    return request.private_dir is None or not os.path.lexists(request.private_dir / WIDE_DIR)


@hookimpl
def crucible_register_round_strategies(register: Register[RoundStrategy]) -> None:
    register("wide", _Wide(), settings="crucible_search_wide.settings:SearchSettings")
