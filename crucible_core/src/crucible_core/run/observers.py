"""Fanning session-log events out to the reporter and plugin observers, so a faulty one cannot end a run.

The session log writes an event to disk first and then shows it to its observers. Everything
the engine must remember is already on disk by then, so an observer is a pure bystander: one
that raises is switched off for the rest of the run and named once in a warning note, and the
others keep receiving events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from crucible_core.plugins import Plugins

# An observer returns nothing, or (the plugins member) the faults it isolated itself.
Observer = Callable[[Mapping[str, Any]], Iterable[str] | None]


@attrs.define
class _Member:
    name: str  # who to blame: "reporter 'console'" or "plugin crucible-plugin-x"
    observe: Observer
    disabled: bool = False


@attrs.define
class ObserverFanout:
    """One session-log observer that calls each member in turn and isolates their failures.

    `note(text)` records a fault; it normally emits a session-log note, which comes back
    through this fan-out after the failing member is already disabled.
    """

    note: Callable[[str], object]  # its return value is ignored
    members: list[_Member] = attrs.field(factory=list)

    def add(self, name: str, observe: Observer) -> None:
        self.members.append(_Member(name, observe))

    def add_plugins(self, plugins: Plugins, hook: str) -> None:
        """Every plugin's `hook(event=...)` as one member, called through pluggy: a plugin that
        raises is muted for the rest of the run (the others still hear every event)."""
        muted: set[object] = set()

        def observe(event: Mapping[str, Any]) -> list[str]:
            faults = plugins.observe(hook, mute=muted, event=event)
            return [f"{fault}; it receives no further events this run" for fault in faults]

        self.members.append(_Member(f"plugins ({hook})", observe))

    def disabled(self) -> list[str]:
        return [m.name for m in self.members if m.disabled]

    def __call__(self, event: Mapping[str, Any]) -> None:
        faults: list[str] = []
        for member in self.members:
            if member.disabled:
                continue
            try:
                faults.extend(member.observe(event) or ())  # a plugins member reports its own faults
            except Exception as exc:  # a bystander's bug; BaseException (aborts, ^C) still propagates
                member.disabled = True
                faults.append(
                    f"{member.name} raised {type(exc).__name__}: {exc} while observing a "
                    f"{event.get('kind', '?')!r} event; it receives no further events this run"
                )
        for text in faults:
            self.note(text)
