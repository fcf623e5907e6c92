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


# --- the whole-run canary: every engine-written text, including the workspace repository -----

AGENT_SECRET = "canary-agent-secret-7f3a9c"  # handed to the agent through [agent].env
ENGINE_KEY = "sk-ant-api03-CanaryEngineKey0123456789abcdefXYZ"  # key-shaped, in the engine's env
ENGINE_TOKEN = "plain-engine-token-value-5521"  # not key-shaped, but its variable is named like a secret
SECRETS = (AGENT_SECRET, ENGINE_KEY, ENGINE_TOKEN)

# The agent leaks everything it can reach: to stdout (plain, glued to letters, base64, split
# over two lines of one write), and into agent_notes.txt, a tracked file the measure quotes.
LEAKING_PROPOSER = """#!/bin/sh
for s in "$AGENT_SECRET" "$CANARY_ENGINE_VALUE" "$SERVICE_TOKEN"; do
  echo "leak $s and XX$s"
  printf '%s' "$s" | base64
  printf 'base64 in a blob: %s\\n' "$(printf 'prefix-%s-suffix' "$s" | base64 -w 0)"
done
printf 'AGENT-WRITTEN: %s %s %s\\n' "$AGENT_SECRET" "$CANARY_ENGINE_VALUE" "$SERVICE_TOKEN" > agent_notes.txt
echo $(( $(cat value.txt) + 1 )) > value.txt
"""

# The measure puts every secret it can reach into its note, in every form, so that the note
# reaches the log, RESULTS.md and the kept commit's message.
LEAKING_MEASURE = r"""#!/bin/sh
v=$(cat value.txt)
agent=$(cat agent_notes.txt 2>/dev/null | tr -d '\n')
b64=$(printf '%s' "$CANARY_ENGINE_VALUE" | base64 -w 0)
b64a=$(printf 'x%s' "$SERVICE_TOKEN" | base64 -w 0)
printf '{"valid": true, "score": %s, "note": "v=%s %s XX%s %s %s %s split:%.10s\\n%s"}\n' \
  "$v" "$v" "$agent" "$CANARY_ENGINE_VALUE" "$SERVICE_TOKEN" "$b64" "$b64a" \
  "$CANARY_ENGINE_VALUE" "${CANARY_ENGINE_VALUE#??????????}"
"""


def forms(secret: str) -> list[str]:
    """The secret as written and in base64 (whole, and the part any enclosing base64 blob carries)."""
    import base64

    from crucible_core.redact import encoded_forms

    return [secret, base64.b64encode(secret.encode()).decode(), *encoded_forms(secret)]


def git_objects(workspace: Path) -> list[tuple[str, bytes]]:
    """Every object in the repository, decompressed by git: (type, content)."""
    import subprocess

    out = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"], cwd=workspace, capture_output=True, check=True
    ).stdout
    objects, at = [], 0
    while at < len(out):
        header_end = out.index(b"\n", at)
        _sha, kind, size = out[at:header_end].split()
        start = header_end + 1
        objects.append((kind.decode(), out[start : start + int(size)]))
        at = start + int(size) + 1
    return objects


def test_no_engine_written_text_carries_a_secret(tmp_path: Path) -> None:
    import os

    manifest = domain(tmp_path, LEAKING_PROPOSER)
    (tmp_path / "measure.sh").write_text(LEAKING_MEASURE)
    os.chmod(tmp_path / "measure.sh", 0o755)
    manifest.write_text(manifest.read_text() + f'\n[agent.env]\nAGENT_SECRET = "{AGENT_SECRET}"\n')
    proc = start(manifest, "--iterations", "2", CANARY_ENGINE_VALUE=ENGINE_KEY, SERVICE_TOKEN=ENGINE_TOKEN)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    workspace = tmp_path / "workspace"
    objects = git_objects(workspace)
    commits = [body for kind, body in objects if kind == "commit"]
    assert len(commits) >= 3  # baseline and two kept iterations: their messages carry the notes
    assert any(b"[REDACTED]" in body for body in commits)

    texts: dict[str, bytes] = {"stdout": out.encode(), "stderr": err.encode()}
    for path in [
        *(tmp_path / "state").rglob("*"),
        workspace / "RESULTS.md",
        *(workspace / ".git").rglob("*"),
    ]:
        if path.is_file() and "objects" not in path.relative_to(tmp_path).parts:
            texts[str(path)] = path.read_bytes()
    for index, (kind, body) in enumerate(objects):
        # The agent's own files are its change, committed as it wrote them (docs/operating.md);
        # every text the engine writes (commit messages, trees, the log, RESULTS.md) is redacted.
        if not (kind == "blob" and body.startswith(b"AGENT-WRITTEN:")):
            texts[f"{kind} object {index}"] = body
    assert any(kind == "blob" and body.startswith(b"AGENT-WRITTEN:") for kind, body in objects)
    log = (tmp_path / "state" / "session.jsonl").read_text()
    assert "leak [REDACTED] and XX[REDACTED]" in log  # the agent's stdout reached the log, masked
    for name, data in texts.items():
        text = data.decode("utf-8", "replace")
        for secret in SECRETS:
            for form in forms(secret):
                assert form not in text, f"{form!r} (a form of {secret!r}) in {name}"
