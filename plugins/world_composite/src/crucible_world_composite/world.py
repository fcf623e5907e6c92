"""A composite domain's World: one world per component, kept and rolled back together.

Each component lives in its own directory of the composite workspace with its own world (the
git world by default), which core builds from the component's own [world] and hands over in
WorldContext.parts. A snapshot is the tuple of every component's snapshot, encoded as one
token, so keep, discard and resume move every component at once. Files at the top level of the
composite workspace belong to no component and are neither kept nor rolled back.
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs

from crucible_core.api import ApplyOutcome, RunFailed, Staged, World, WorldContext, decode_components
from crucible_core.api import encode_components as encode

# git's one-line summary: "2 files changed, 3 insertions(+), 1 deletion(-)" (either count may be absent)
_STAT = re.compile(
    r"(?P<files>\d+) files? changed(?:, (?P<ins>\d+) insertions?\(\+\))?(?:, (?P<dels>\d+) deletions?\(-\))?"
)
# the header lines of a unified diff that name a path, with the a/ or b/ side they name it on
_HEADER = re.compile(
    r"^(diff --git a/)(\S+)( b/)(\S+)$|^(--- a/|\+\+\+ b/)(.+)$|^(Binary files a/)(\S+)( and b/)(\S+)( differ)$"
)


def _under(component: str, diff: str) -> str:
    """A component's diff with its paths under the component's directory, as the composite sees them."""

    def moved(match: re.Match[str]) -> str:
        parts = list(match.groups())
        return "".join(
            f"{component}/{part}" if index in (1, 3, 5, 7, 9) and part is not None else (part or "")
            for index, part in enumerate(parts)
        )

    lines = diff.splitlines(keepends=True)
    return "".join(
        _HEADER.sub(moved, line.rstrip("\n")) + ("\n" if line.endswith("\n") else "") for line in lines
    )


def _diffstat(files: int, insertions: int, deletions: int) -> str:
    if not files:
        return ""
    text = f"{files} file{'s' if files != 1 else ''} changed"
    if insertions:
        text += f", {insertions} insertion{'s' if insertions != 1 else ''}(+)"
    if deletions:
        text += f", {deletions} deletion{'s' if deletions != 1 else ''}(-)"
    return text


@attrs.frozen
class CompositeWorld:
    workspace: Path
    parts: tuple[tuple[str, World], ...]  # (component name, its world), in manifest order

    def _each(self, token: str) -> list[tuple[str, World, str]]:
        tokens = decode_components(token)
        missing = [name for name, _ in self.parts if name not in tokens]
        if missing:
            raise RunFailed(f"the composite snapshot names no state for {', '.join(missing)}")
        return [(name, world, tokens[name]) for name, world in self.parts]

    @classmethod
    def from_context(cls, ctx: WorldContext) -> CompositeWorld:
        return cls(ctx.workspace, ctx.parts)

    def part(self, name: str) -> World:
        return dict(self.parts)[name]

    def clone_from(self, source: str, ref: str | None) -> None:
        raise RunFailed("a composite has no repository of its own; each component clones its own")

    def prepare(self) -> str:
        return encode({name: world.prepare() for name, world in self.parts})

    def recover(self) -> None:
        for _, world in self.parts:
            world.recover()

    def snapshot(self, label: str) -> str:
        return encode({name: world.snapshot(label) for name, world in self.parts})

    def restore(self, token: str) -> None:
        for _, world, part in self._each(token):
            world.restore(part)

    def apply(self) -> ApplyOutcome:
        for name, world in self.parts:
            outcome = world.apply()
            if not outcome.ok:
                return ApplyOutcome(False, f"{name}: {outcome.note}")
        return ApplyOutcome(True)

    def stage(self) -> Staged:
        staged = [(name, world.stage()) for name, world in self.parts]
        refused = "; ".join(f"{name}: {s.refused}" for name, s in staged if s.refused)
        return Staged(
            token=encode({name: s.token for name, s in staged}),
            unchanged=all(s.unchanged for _, s in staged),
            refused=refused,
        )

    def put_back_staged(self, token: str) -> None:
        for _, world, part in self._each(token):
            world.put_back_staged(part)

    def last_commit_sha(self) -> str | None:
        shas = {name: world.last_commit_sha() for name, world in self.parts}
        if all(sha is None for sha in shas.values()):
            return None
        return ",".join(f"{name}@{sha or '-'}" for name, sha in shas.items())

    def changed_paths(self) -> list[str]:
        return [f"{name}/{path}" for name, world in self.parts for path in world.changed_paths()]

    def describe_change(self, base: str) -> tuple[str, str]:
        """The candidate across every component against kept state `base`: one unified diff whose
        paths carry the component's directory, and git's one-line diffstat summed over them."""
        diffs: list[str] = []
        files = insertions = deletions = 0
        for name, world, token in self._each(base):
            describe = getattr(world, "describe_change", None)
            if describe is None:
                continue  # a component world that cannot describe its change adds nothing
            diff, stat = describe(token)
            if diff:
                diffs.append(_under(name, diff))
            counted = _STAT.fullmatch(stat.strip()) if stat else None
            if counted:
                files += int(counted["files"])
                insertions += int(counted["ins"] or 0)
                deletions += int(counted["dels"] or 0)
        return "".join(diffs), _diffstat(files, insertions, deletions)

    def change(self, head: str, base: str | None = None) -> str:
        heads = decode_components(head)
        bases = decode_components(base) if base is not None else {}
        out = []
        for name, world in self.parts:
            diff = world.change(heads[name], bases.get(name))
            if diff:
                out.append(f"# component {name}\n{diff}")
        return "\n".join(out)
