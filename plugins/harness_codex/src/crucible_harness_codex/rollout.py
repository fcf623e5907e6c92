"""The token usage Codex recorded in its rollout file: the cost of a turn whose stream never said.

`codex exec --json` reports usage once, at `turn.completed`. A turn killed at its deadline (or
cut off) never gets there, yet the provider has billed every request it made; the CLI's own
rollout ($CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl) records the turn's running usage
as each response arrives (a `token_usage_record`, and a `token_count` once tools have run). The turn's home is the harness's, but the file is the agent program's
writing, so it is read as hostile input: a regular file only, never through a link, bounded.
"""

from __future__ import annotations

import json
from pathlib import Path

from crucible_core.api import AgentFileRefused, read_regular
from crucible_harness_codex.pricing import Usage

MAX_ROLLOUT_BYTES = 64 * 1024 * 1024


def recorded_usage(codex_home: Path) -> Usage | None:
    """The last running total of the newest rollout under `codex_home`, or None when there is none."""
    sessions = codex_home / "sessions"
    candidates = [p for p in sessions.glob("*/*/*/rollout-*.jsonl") if not p.is_symlink()]
    if not candidates:
        return None
    newest = max(candidates, key=lambda p: p.stat().st_mtime)
    try:
        text = read_regular(newest, MAX_ROLLOUT_BYTES).decode("utf-8", errors="replace")
    except (OSError, AgentFileRefused):
        return None
    totals = []
    for line in text.splitlines():
        if '"token_usage_record"' not in line and '"token_count"' not in line:
            continue
        try:
            payload = json.loads(line)["payload"]
            if payload.get("type") == "token_count":
                total = payload["info"]["total_token_usage"]
            else:
                total = payload["turn_token_usage"]
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            continue
        if isinstance(total, dict):
            totals.append(Usage.of(total))
    # Running totals only grow, but the CLI records a zeroed one when the context overflows:
    # the largest is what was spent.
    return max(totals, key=lambda u: u.input_tokens + u.output_tokens, default=None)
