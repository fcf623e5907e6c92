"""Publish-on-keep: each kept commit becomes a draft pull request, asked of the mediation point first.

The run's own write outside the workspace ([publish], spec section 1.9), made from the lifecycle
hooks (crucible_commit_kept, see __init__.py): before the publisher pushes anything, the
mediator admits one `draft-pr` write to `[publish].pr_repo` against the resolved bound, exactly
as a broker tool's write is admitted. A refused write (over
the count, or a pr_repo outside the declared target) is an `output_refused` event and a note;
publishing then stops for the rest of the run (the remaining kept commits are not published)
and the run goes on. A publisher that fails costs that publish only: a warning note, and the
admitted write stays counted, since it may have reached the forge.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from crucible_core.api import CrucibleError, OutputRefused, PublishRequest

if TYPE_CHECKING:
    from crucible_core.api import Publisher, PublishSection

PUBLISH_SECONDS = 120.0  # one publish (push and pull request); a hung forge must not hold the run
OUTPUT_KIND = "draft-pr"

Admit = Callable[..., str | None]  # Mediator.admit
Note = Callable[[str, str], None]  # RunContext.note(text, level)


@attrs.define
class KeptPublisher:
    section: PublishSection
    publisher: Publisher
    admit: Admit
    note: Note
    run_id: str
    workspace: Path
    env: Mapping[str, str]
    stopped: str | None = None  # the bound that stopped publishing, once one did

    def on_keep(self, iteration: int, sha: str, summary: str) -> None:
        """Publish one kept commit; never raises for what the forge or the bound says."""
        if self.stopped is not None:
            return
        try:
            repo = self.admit(OUTPUT_KIND, self.section.pr_repo, by="publish", iteration=iteration)
        except OutputRefused as exc:
            self.stopped = exc.violation.bound
            self.note(
                f"publish refused for iteration {iteration}: {exc.violation.message}; "
                "the remaining kept commits are not published",
                "warn",
            )
            return
        request = PublishRequest(
            repo=repo or self.section.pr_repo,
            base=self.section.base,
            branch=f"crucible/{self.run_id}/iter-{iteration}",
            sha=sha,
            workspace=self.workspace,
            title=f"crucible: kept iteration {iteration}",
            body=f"Kept by crucible run {self.run_id} at iteration {iteration}.\n\n{summary}".strip(),
            env=self.env,
            timeout=PUBLISH_SECONDS,
        )
        try:
            url = self.publisher.publish(request)
        except CrucibleError as exc:
            self.note(f"publish of iteration {iteration} failed: {exc.render()}", "warn")
            return
        except Exception as exc:  # a publisher's bug costs its publish, never the run
            self.note(f"publish of iteration {iteration} failed: {type(exc).__name__}: {exc}", "warn")
            return
        self.note(f"published iteration {iteration} ({sha[:12]}) as a draft pull request: {url}", "info")
