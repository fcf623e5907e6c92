"""The workflow types (lanes) a `[workflow]` document may declare, whatever language authored it."""

from __future__ import annotations

PLAYBOOK = "playbook"
AUTORESEARCH = "autoresearch"
CUSTOM = "custom"
WORKFLOW_TYPES = (AUTORESEARCH, CUSTOM, PLAYBOOK)
# The lanes a judge scores: they run inside the loop.
SCORED_WORKFLOW_TYPES = frozenset({AUTORESEARCH, CUSTOM})
