"""CommandWorld: git memory plus the domain's [world] apply/snapshot/restore commands.

Its token joins the two halves as "<commit id>\\t<domain token>"; only this module splits it.
"""

from __future__ import annotations

import attrs

from crucible_core.api import ApplyOutcome, Completed, LocalSource, RunFailed, Shell, Staged, WorldContext
from crucible_world_git.gitworld import GitWorld
from crucible_world_git.settings import CommandWorldSettings

SEPARATOR = "\t"
_TAIL_CHARS = 400


def _tail(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _TAIL_CHARS else "..." + text[-_TAIL_CHARS:]


def _failure(key: str, done: Completed) -> str:
    detail = _tail(done.stderr) or _tail(done.stdout)
    return f"[world].{key} {done.describe_failure()}" + (f": {detail}" if detail else "")


def last_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()
    return ""


def join_token(sha: str, domain: str) -> str:
    return f"{sha}{SEPARATOR}{domain}"


def split_token(token: str) -> tuple[str, str]:
    """(git half, domain half); a bare commit id (no domain half) is accepted as such."""
    sha, _, domain = token.partition(SEPARATOR)
    return sha, domain


@attrs.define
class CommandWorld:
    """A GitWorld for the files, with the domain's commands layered on for everything else."""

    git: GitWorld
    section: CommandWorldSettings
    shell: Shell

    @classmethod
    def from_context(cls, ctx: WorldContext) -> CommandWorld:
        settings = ctx.settings if ctx.settings is not None else CommandWorldSettings()
        return cls(GitWorld.from_context(ctx), settings, ctx.shell)

    def _run(self, command: str, extra_env: dict[str, str] | None = None) -> Completed:
        return self.shell.run(command, cwd=self.git.memory.workspace, extra_env=extra_env)

    def clone_from(self, source: str, ref: str | None) -> None:
        self.git.clone_from(source, ref)

    def source_notice(self, source: LocalSource) -> tuple[str, str] | None:
        return self.git.source_notice(source)

    def clone_working_tree(self, source: LocalSource) -> None:
        self.git.clone_working_tree(source)

    def prepare(self) -> str:
        return self.git.prepare()

    def recover(self) -> None:
        self.git.recover()

    def snapshot(self, label: str) -> str:
        sha = self.git.snapshot(label)
        command = self.section.snapshot_cmd
        if not command:
            return join_token(sha, "")
        done = self._run(command)
        if not done.ok:
            raise RunFailed(
                _failure("snapshot_cmd", done),
                hint="the candidate was not kept; fix snapshot_cmd so it exits 0 and prints a token",
            )
        domain = last_line(done.stdout)
        if not domain:
            raise RunFailed(
                "[world].snapshot_cmd printed no token (its last non-empty stdout line is the token)",
                hint="make snapshot_cmd print the token restore_cmd needs as its last line",
            )
        if SEPARATOR in domain:
            raise RunFailed(
                "[world].snapshot_cmd printed a token containing a tab",
                hint="print a token without tab characters",
            )
        return join_token(sha, domain)

    def restore(self, token: str) -> None:
        sha, domain = split_token(token)
        self.git.restore(sha)
        command = self.section.restore_cmd
        if not command:
            return
        done = self._run(command, {"CRUCIBLE_TOKEN": domain})
        if not done.ok:
            raise RunFailed(
                _failure("restore_cmd", done),
                hint="the files were restored but the rest of the world was not; fix restore_cmd",
            )

    def apply(self) -> ApplyOutcome:
        command = self.section.apply_cmd
        if not command:
            return ApplyOutcome(ok=True)
        done = self._run(command)
        if not done.ok:
            return ApplyOutcome(ok=False, note=_failure("apply_cmd", done))
        return ApplyOutcome(ok=True, note=last_line(done.stdout))

    def stage(self) -> Staged:
        staged = self.git.stage()
        if self.section.snapshot_cmd and staged.unchanged:
            # The domain keeps state outside the files: unchanged files do not mean nothing changed.
            return Staged(token=staged.token, unchanged=False, refused=staged.refused)
        return staged

    def put_back_staged(self, token: str) -> None:
        # the files only: the domain's own state is the measure's business, as it is for restore
        self.git.put_back_staged(token)

    def last_commit_sha(self) -> str | None:
        return self.git.last_commit_sha()

    def changed_paths(self) -> list[str]:
        return self.git.changed_paths()

    def change(self, head: str, base: str | None = None) -> str:
        """The files' half of the change; the domain's own state has no diff to show."""
        return self.git.change(split_token(head)[0], None if base is None else split_token(base)[0])
