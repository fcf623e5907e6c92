"""The labels and annotations every rendered object carries, shared by render, ps and the Job runner.

Kept free of heavy imports: `crucible ps` and the CLI read these names without the client.
"""

from __future__ import annotations

import re

MANAGED_BY_KEY = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "crucible"
MANAGED_BY_SELECTOR = f"{MANAGED_BY_KEY}={MANAGED_BY_VALUE}"
RUN_LABEL = "crucible.dev/run"
MODE_LABEL = "crucible.dev/mode"  # loop | playbook | task
ITER_ANNOTATION = "crucible.dev/iteration"
BEST_ANNOTATION = "crucible.dev/best"
ITERATIONS_ANNOTATION = "crucible.dev/iterations"
IMAGE_TAG_ANNOTATION = "crucible.dev/image-tag"
FIELD_MANAGER = "crucible"
LOOP_CONTAINER = "loop"
# The loop pod ends its log with this line, then the whole session log (completion ingest reads
# everything after the last such line; `crucible view` stops there).
SESSION_DELIMITER = "=== SESSION (rc="


def run_name(raw: str) -> str:
    """A DNS-1123 label from a directory or run name: lowercase, '-' for anything else, <= 40 chars."""
    name = re.sub(r"[^a-z0-9-]+", "-", raw.lower()).strip("-")
    name = re.sub(r"-{2,}", "-", name)[:40].strip("-")
    return name or "run"
