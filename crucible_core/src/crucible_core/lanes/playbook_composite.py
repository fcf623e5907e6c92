"""A composite playbook's history: one workspace memory per component, moved together.

A judgeless composite playbook (C-PLAYBOOK-COMPOSITE) keeps each component's history where that
component lives, `<workspace>/<component>`, in the workspace memory the git world registers,
recorded under `<record_dir>/<component>`. Every call reaches every component: a passing task
becomes one commit in each component it changed, a failing one is discarded in all of them,
and the base is the composite token of every component's base commit (the form the run's
identity reads one entry per component from). Files at the top level of the composite
workspace belong to no component, as in the loop's composite world: nothing keeps or discards
them. Nothing here runs git; the component memories do.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import attrs

from crucible_core.errors import RunFailed
from crucible_core.protocols import WorkspaceMemory
from crucible_core.run import composite_world


@attrs.frozen
class CompositeMemory:
    workspace: Path
    record_dir: Path  # holds every component's record, one directory each
    parts: tuple[tuple[str, WorkspaceMemory], ...]  # (component name, its memory), in manifest order

    def component(self, name: str) -> WorkspaceMemory:
        return dict(self.parts)[name]

    def clone_from(self, source: str, ref: str | None, *, cwd: Path) -> None:
        raise RunFailed("a composite has no repository of its own; each component clones its own")

    def ensure(self) -> None:
        for _, memory in self.parts:
            memory.ensure()

    def settled(self, task: str, passed: bool, quiescent: bool) -> None:
        for _, memory in self.parts:
            memory.settled(task, passed, quiescent)

    def base_commit(self) -> str | None:
        bases = {name: memory.base_commit() for name, memory in self.parts}
        if any(base is None for base in bases.values()):
            return None
        return composite_world.encode({name: base for name, base in bases.items() if base is not None})

    def reset_to_base(self) -> bool:
        """Every component back to its base; when any cannot be, every record is forgotten so
        the whole composite is made again from the pristine start (one base for all)."""
        done = [memory.reset_to_base() for _, memory in self.parts]
        if all(done):
            return True
        shutil.rmtree(self.record_dir, ignore_errors=True)
        return False
