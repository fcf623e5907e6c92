"""The forge's output kinds: a draft pull request, and a workflow_dispatch fired at a build workflow.

Publish-on-keep asks the run's mediation point for one `draft-pr` write per pull request it opens
(one per run, one per edited component of a composite; its updates are not counted again); a pack
bounds either kind with `[outputs.<kind>]`, or gets the defaults here.
"""

from __future__ import annotations

from crucible_core.api import OutputKindSpec

KINDS: tuple[OutputKindSpec, ...] = (
    OutputKindSpec(
        "draft-pr", "a draft pull request opened on a forge", 2, default_target_env="CRUCIBLE_PR_REPO"
    ),
    OutputKindSpec("workflow-dispatch", "a workflow_dispatch fired at a forge build workflow", 20),
)
