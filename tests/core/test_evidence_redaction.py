"""Every file a run writes from what agents and operators hand it is redacted: ledger, kept markers, log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.cli_support import run_crucible
from tests.live_support import domain, start, wait_for

CANARY = "canary-secret-value-42"
PASTED_KEY = "sk-ant-api03-PASTEDBYANOPERATOR0123"

# Iteration 1 pages with the secret in its reason; iteration 2 escalates quoting it again.
PROPOSER = """#!/bin/sh
set -eu
cli() { "$PYTHON" -m crucible_core.cli.main "$@"; }
case "$CRUCIBLE_ITERATION" in
  1) cli distress --severity error --reason "stuck, my key is $CANARY" > /dev/null ;;
  2) cli escalate --category needs-info --reason "cannot go on with $CANARY" --evidence "$CANARY" ;;
esac
echo $(( $(cat value.txt) + 1 )) > value.txt
"""


def distressed(log: list[dict[str, Any]]) -> bool:
    return any(e["kind"] == "phase" and e["phase"] == "distressed" for e in log)


def test_agent_and_operator_text_reaches_no_file_unredacted(tmp_path: Path) -> None:
    manifest = domain(tmp_path, PROPOSER)
    manifest.write_text(manifest.read_text() + f'\n[agent.env]\nCANARY = "{CANARY}"\n')
    proc = start(manifest, "--iterations", "3")
    wait_for(manifest, proc, distressed)
    state = manifest.parent / "state"
    marker = state / "distress" / "distress"
    assert marker.exists() and CANARY not in marker.read_text()  # rewritten at the head
    steer = run_crucible("steer", "--manifest", manifest, f"the deploy key is {PASTED_KEY}")
    assert steer.returncode == 0, steer.stderr
    marker.unlink()  # the resume grant
    assert proc.wait(timeout=60) == 2  # iteration 2 escalated
    written = [p for p in state.rglob("*") if p.is_file()]
    written.append(manifest.parent / "workspace" / "RESULTS.md")
    assert any(p.name == "admissions.jsonl" for p in written)
    assert any(p.name == "ESCALATION.json" for p in written)
    for path in written:
        text = path.read_bytes().decode("utf-8", "replace")
        assert CANARY not in text, path
        assert PASTED_KEY not in text, path
    # the evidence is still there, masked
    assert "[REDACTED]" in (state / "ESCALATION.json").read_text()
    assert "[REDACTED]" in (state / "admissions.jsonl").read_text()
