"""crucible-plugin-world-composite: the composite domain, several domains edited and kept together.

A manifest with [composite] and [[component]] tables runs in the world registered here as
"composite": one world per component (each component's own), kept and rolled back as one
(world.py). Its `parts=` trait names the function that checks those tables and loads each
component's manifest (components.py). Only the registration lives here: both modules load when
a composite manifest is loaded or run, so `crucible plugins` pays for neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:  # type-only: naming them here loads nothing of core when plugins are listed
    from crucible_core.api import Register, World, WorldContext, WorldFactory


def _composite_world(ctx: WorldContext) -> World:
    from crucible_world_composite.world import CompositeWorld

    return CompositeWorld.from_context(ctx)


@hookimpl
def crucible_register_worlds(register: Register[WorldFactory]) -> None:
    register("composite", _composite_world, parts="crucible_world_composite.components:load_components")
