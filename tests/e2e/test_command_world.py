"""CommandWorld end to end: composite tokens, snapshot/restore commands, apply failures."""

from __future__ import annotations

from pathlib import Path

from tests.cli_support import run_crucible
from tests.e2e.session import rows, verdicts

WORLD = """
[world]
apply_cmd = "./apply.sh"
snapshot_cmd = "./snap.sh"
restore_cmd = "./restore.sh"
"""

# The "live system" is a file outside the workspace that apply copies the candidate into.
APPLY = '#!/bin/sh\ncp value.txt ../live.txt\n[ "$(cat value.txt)" != 3 ]\n'
SNAP = '#!/bin/sh\necho snapshotting >&2\necho "live-$(cat ../live.txt)"\n'
RESTORE = (
    '#!/bin/sh\necho "$CRUCIBLE_TOKEN" >> ../restored.txt\necho "${CRUCIBLE_TOKEN#live-}" > ../live.txt\n'
)


def setup_world(manifest: Path) -> None:
    for name, body in (("apply.sh", APPLY), ("snap.sh", SNAP), ("restore.sh", RESTORE)):
        (manifest.parent / name).write_text(body)
        (manifest.parent / name).chmod(0o755)
    text = manifest.read_text().replace(
        'inject = ["measure.sh"]', 'inject = ["measure.sh", "apply.sh", "snap.sh", "restore.sh"]'
    )
    manifest.write_text(text + WORLD)
    (manifest.parent / "live.txt").write_text("0\n")


def test_composite_tokens_and_restore_on_discard(example) -> None:
    manifest = example("counter")
    setup_world(manifest)
    done = run_crucible("--manifest", manifest, "--iterations", "4", "--no-early-stop")
    assert done.returncode == 0, done.stderr
    got = rows(manifest)
    # iteration 3 writes value 3, which apply refuses: an invalid candidate, discarded
    assert verdicts(manifest) == ["baseline", "keep", "keep", "discard", "discard"]
    assert "apply failed" in got[3]["note"]
    kept = [r for r in got[1:] if r["decision"] == "keep"]
    for row in kept:
        sha, token = row["kept_snap"].split("\t")
        assert sha == row["sha"] and len(sha) == 40
        assert token == f"live-{int(row['score'])}"
    # each discard restored the world to the last kept token (live-2)
    assert (manifest.parent / "restored.txt").read_text().splitlines() == ["live-2", "live-2"]
    assert (manifest.parent / "live.txt").read_text().strip() == "2"


def test_a_failing_snapshot_command_ends_the_run_with_an_error(example) -> None:
    manifest = example("counter")
    setup_world(manifest)
    (manifest.parent / "snap.sh").write_text("#!/bin/sh\nexit 5\n")
    done = run_crucible("--manifest", manifest, "--iterations", "2")
    assert done.returncode == 4
    assert "Traceback" not in done.stderr
