"""A composite playbook's history: one workspace memory per component, moved together.

A judgeless composite playbook (C-PLAYBOOK-COMPOSITE) keeps each component's history where that
component lives, `<workspace>/<component>`, in the workspace memory the git world registers,
recorded under `<record_dir>/<component>`. Every call reaches every component: a passing task
becomes one commit in each component it changed, a failing one is discarded in all of them,
and the base is the composite token of every component's base commit (the form the run's
identity reads one entry per component from). Files at the top level of the composite
workspace belong to no component, as in the loop's composite world: nothing keeps or discards
them. Nothing here runs git; the component memories do.

A task runs at the top level, so it can replace a component's directory with a link: each
directory is checked (without following it) before its memory is asked to touch it, or the
engine's git would reset, clean or commit wherever the link leads.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import attrs

from crucible_core.api import RunFailed, WorkspaceError, WorkspaceMemory, encode_components


@attrs.frozen
class CompositeMemory:
    workspace: Path
    record_dir: Path  # holds every component's record, one directory each
    parts: tuple[tuple[str, WorkspaceMemory], ...]  # (component name, its memory), in manifest order

    def component(self, name: str) -> WorkspaceMemory:
        return dict(self.parts)[name]

    def clone_from(self, source: str, ref: str | None, *, cwd: Path) -> None:
        raise RunFailed("a composite has no repository of its own; each component clones its own")

    def _in_place(self, name: str) -> bool:
        try:
            return stat.S_ISDIR(os.lstat(self.workspace / name).st_mode)
        except OSError:
            return False

    def _each(self) -> Iterator[WorkspaceMemory]:
        for name, memory in self.parts:
            if not self._in_place(name):
                raise WorkspaceError(
                    f"component {name!r} of {self.workspace} is no longer a directory (a task replaced it)",
                    hint="resume the run (--resume) to make the workspace again from the pristine start",
                )
            yield memory

    def ensure(self) -> None:
        for memory in self._each():
            memory.ensure()

    def settled(self, task: str, passed: bool, quiescent: bool) -> None:
        for memory in self._each():
            memory.settled(task, passed, quiescent)

    def base_commit(self) -> str | None:
        bases = {name: memory.base_commit() for name, memory in self.parts}
        if any(base is None for base in bases.values()):
            return None
        return encode_components({name: base for name, base in bases.items() if base is not None})

    def reset_to_base(self) -> bool:
        """Every component back to its base; when any cannot be, every record is forgotten so
        the whole composite is made again from the pristine start (a component its setup_cmd
        makes gets a new base commit then, so no record of the old one may survive)."""
        done = [self._in_place(name) and memory.reset_to_base() for name, memory in self.parts]
        if all(done):
            return True
        shutil.rmtree(self.record_dir, ignore_errors=True)
        return False
