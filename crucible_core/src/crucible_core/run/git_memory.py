"""A playbook's git memory: a task's workspace changes become a commit only when it passes.

This sits at the playbook runner's edge (not in any loop body) and runs git through the
supervisor. The playbook runs its shared-workspace tasks one at a time (isolated ones still
run side by side), so when a task settles nothing else is writing there: its changes are its
own. The deferral below is a guard for an executor that overlaps shared tasks anyway.
"""

from __future__ import annotations

from pathlib import Path

from crucible_core import process
from crucible_core.plan.files import INPUTS_DIR

GIT_ENV = {
    "PATH": "/usr/bin:/bin:/usr/local/bin",
    "GIT_AUTHOR_NAME": "crucible",
    "GIT_AUTHOR_EMAIL": "crucible@localhost",
    "GIT_COMMITTER_NAME": "crucible",
    "GIT_COMMITTER_EMAIL": "crucible@localhost",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
}
# Engine files a task leaves behind that belong to no commit.
EXCLUDED = (INPUTS_DIR.parts[0], "PLAN_TASK_RESULT.json")


class GitMemory:
    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.deferred: list[str] = []  # passing tasks whose changes could not be committed alone

    def _git(self, *args: str) -> process.Completed:
        return process.run(["git", *args], cwd=self.workspace, env=GIT_ENV, timeout=120)

    def ensure(self) -> None:
        """Make the workspace a repository with a base commit (the pristine start), once."""
        if (self.workspace / ".git").exists():
            return
        self._git("init", "-q")
        exclude = self.workspace / ".git" / "info" / "exclude"
        exclude.parent.mkdir(parents=True, exist_ok=True)
        exclude.write_text("".join(f"/{name}\n" for name in EXCLUDED))
        self._git("add", "-A")
        self._git("commit", "-q", "--allow-empty", "-m", "crucible: playbook base")

    def settled(self, task: str, passed: bool, quiescent: bool) -> None:
        if passed:
            self.deferred.append(task)
        if not quiescent:
            return
        if passed or self.deferred:
            # Everything uncommitted belongs to passing tasks (or, when a failure overlapped a
            # deferred pass, cannot be told apart from theirs: passing work is never thrown away).
            names = ", ".join(self.deferred)
            self._git("add", "-A")
            if not self._git("diff", "--cached", "--quiet").ok:
                self._git("commit", "-q", "-m", f"crucible: task {names}")
            self.deferred.clear()
            return
        # A task that did not pass contributes nothing: its undeclared changes are discarded.
        self._git("reset", "-q", "--hard", "HEAD")
        self._git("clean", "-fdq", *(f"-e{name}" for name in EXCLUDED))

    def base_commit(self) -> str | None:
        """The playbook's base commit (the pristine start), or None when there is none."""
        if not (self.workspace / ".git").exists():
            return None
        roots = self._git("rev-list", "--max-parents=0", "HEAD")
        return roots.stdout.split()[-1] if roots.ok and roots.stdout.split() else None

    def reset_to_base(self) -> bool:
        """Put the workspace back to the playbook's base commit; False when there is none."""
        base = self.base_commit()
        if base is None:
            return False
        return self._git("reset", "-q", "--hard", base).ok and self._git("clean", "-fdqx").ok
