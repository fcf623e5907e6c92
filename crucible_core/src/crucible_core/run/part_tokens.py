"""One snapshot token for a world assembled from parts: each part's own token, by part name.

A world made of other worlds (a composite domain's, crucible-plugin-world-composite) keeps,
restores and resumes every part at once, so one token carries all of theirs; the run identity
reads each component's base commit back out of the base token.
"""

from __future__ import annotations

import json

from crucible_core.errors import RunFailed

TOKEN_PREFIX = "composite:"  # the spelling recorded session logs carry


def encode(parts: dict[str, str]) -> str:
    return TOKEN_PREFIX + json.dumps(parts, sort_keys=True, separators=(",", ":"))


def decode(token: str) -> dict[str, str]:
    """The per-component tokens of a composite token; RunFailed for anything else."""
    if not token.startswith(TOKEN_PREFIX):
        raise RunFailed(f"{token[:60]!r} is not a composite snapshot token")
    try:
        parts = json.loads(token[len(TOKEN_PREFIX) :])
    except ValueError:
        parts = None
    if not isinstance(parts, dict) or not all(isinstance(v, str) for v in parts.values()):
        raise RunFailed(f"{token[:60]!r} is not a composite snapshot token")
    return parts
