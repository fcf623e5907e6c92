"""crucible-plugin-task-agent: the plan task kinds beyond a plain command.

`agent` runs one agent turn as a task (turn.py), `evaluate` grades a measurement command and
`top_k` ranks its dependencies' outputs by score (kinds.py). Only the registration lives here:
the kinds are built when a plan first needs them, so `crucible plugins` builds none.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:  # type-only: naming them here loads nothing of core when plugins are listed
    from crucible_core.api import Register, TaskKindSpec

KIND_NAMES = ("agent", "evaluate", "top_k")


def _kind(name: str) -> TaskKindSpec:
    from crucible_task_agent.kinds import KINDS

    return KINDS[name]


@hookimpl
def crucible_register_task_kinds(register: Register[TaskKindSpec]) -> None:
    from crucible_core.api import Deferred

    for name in KIND_NAMES:
        register(name, Deferred(functools.partial(_kind, name)))
