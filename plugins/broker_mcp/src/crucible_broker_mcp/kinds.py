"""The standard output kinds that are not a forge's: tracker comments, chat, images, rollouts, GPU jobs.

Each carries its default bound (the same names and counts as crucible's contract); a pack's
`[outputs.<kind>]` overrides it. The forge's kinds (draft-pr, workflow-dispatch) are registered by
crucible-plugin-publish-github.
"""

from __future__ import annotations

from crucible_core.api import OutputKindSpec

# The chat-message default: the engine's own operator channel.
OPERATOR_CHANNEL = "operator-channel"

KINDS: tuple[OutputKindSpec, ...] = (
    OutputKindSpec(
        "tracker-comment", "a comment on an issue-tracker item", 2, default_target_env="CRUCIBLE_ITEM"
    ),
    OutputKindSpec("chat-message", "a message to a chat destination", 8, default_target=OPERATOR_CHANNEL),
    OutputKindSpec(
        "image-push", "a container image pushed to a registry", 100, default_target_env="CRUCIBLE_REGISTRY"
    ),
    OutputKindSpec(
        "deploy",
        "a rollout of a built candidate onto a live deployment",
        100,
        default_target_env="CRUCIBLE_DEPLOYMENT",
    ),
    OutputKindSpec(
        "gpu-capture", "a GPU job capturing a measurement, evaluation or trace", 100, addresses_target=False
    ),
)
