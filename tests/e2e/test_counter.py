"""The counter domain end to end through the real CLI, real git repositories and real subprocesses."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.cli_support import run_crucible
from tests.e2e.session import assert_one_trailing_shutdown, events, rows, verdicts


def git_log(workspace: Path) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(workspace), "log", "--format=%s"], capture_output=True, text=True, check=True
    )
    return out.stdout.splitlines()


def test_counter_keeps_every_bump_and_stops_when_solved(example) -> None:
    manifest = example("counter")
    done = run_crucible("--manifest", manifest, "--iterations", "6")
    assert done.returncode == 0, done.stderr
    assert verdicts(manifest) == ["baseline", "keep", "keep", "keep", "keep", "keep"]
    assert [r["score"] for r in rows(manifest)] == [0, 1, 2, 3, 4, 5]
    shutdown = assert_one_trailing_shutdown(manifest)
    assert shutdown["outcome"] == "solved"
    workspace = manifest.parent / "workspace"
    assert (workspace / "value.txt").read_text().strip() == "5"
    log = git_log(workspace)
    assert len([s for s in log if s.startswith("crucible: iteration")]) == 5
    kinds = [e["kind"] for e in events(manifest)]
    assert kinds[0] == "start" and "identity" in kinds
    assert kinds.index("summary") < kinds.index("finished") < kinds.index("shutdown")
    identity = next(e for e in events(manifest) if e["kind"] == "identity")
    digest = identity["identity"]["digest"]
    assert digest.startswith("v2:") and len(digest) == 3 + 16
    assert identity["identity"]["components"][0]["base_sha"] == identity["base_commit"]
    results = (workspace / "RESULTS.md").read_text()
    assert "| 5 | keep | 5 | 5 |" in results
    # RESULTS.md and the engine's files never enter the kept commits
    tracked = subprocess.run(["git", "-C", str(workspace), "ls-files"], capture_output=True, text=True).stdout
    assert "RESULTS.md" not in tracked and "measure.sh" in tracked
    assert "iter 5/6 keep" in done.stderr  # the console reporter's live line


def test_no_early_stop_spends_every_iteration(example) -> None:
    manifest = example("counter")
    done = run_crucible("--manifest", manifest, "--iterations", "7", "--no-early-stop")
    assert done.returncode == 0, done.stderr
    assert len(rows(manifest)) == 8
    assert assert_one_trailing_shutdown(manifest)["outcome"] == "finished"


ALTERNATING = """#!/bin/sh
# good on odd iterations (+2), bad on even ones (-1)
set -eu
v=$(cat value.txt)
if [ $((CRUCIBLE_ITERATION % 2)) -eq 1 ]; then echo $((v + 2)) > value.txt; else echo $((v - 1)) > value.txt; fi
echo scratch > untracked-$CRUCIBLE_ITERATION.txt
"""


def test_alternating_proposer_keeps_good_and_discards_bad(example) -> None:
    manifest = example("counter")
    (manifest.parent / "alternate.sh").write_text(ALTERNATING)
    (manifest.parent / "alternate.sh").chmod(0o755)
    text = manifest.read_text().replace("cp value.txt bump.sh", "cp value.txt alternate.sh")
    manifest.write_text(text.replace('agent_cmd = "./bump.sh"', 'agent_cmd = "./alternate.sh"'))
    done = run_crucible("--manifest", manifest, "--iterations", "4", "--no-early-stop")
    assert done.returncode == 0, done.stderr
    assert verdicts(manifest) == ["baseline", "keep", "discard", "keep", "discard"]
    assert [r["best"] for r in rows(manifest)] == [0, 2, 2, 4, 4]
    workspace = manifest.parent / "workspace"
    # the last discard rolled value.txt back and cleaned its untracked file
    assert (workspace / "value.txt").read_text().strip() == "4"
    assert not (workspace / "untracked-4.txt").exists()
    assert (workspace / "untracked-3.txt").exists()  # kept with iteration 3's commit


CHEAT = """#!/bin/sh
# edits the gate instead of the value
cat > measure.sh <<'GATE'
#!/bin/sh
echo '{"valid": true, "score": 1000}'
GATE
"""


def test_a_proposer_that_edits_the_frozen_measure_cannot_raise_its_score(example) -> None:
    manifest = example("counter")
    (manifest.parent / "cheat.sh").write_text(CHEAT)
    (manifest.parent / "cheat.sh").chmod(0o755)
    text = manifest.read_text().replace("cp value.txt bump.sh", "cp value.txt cheat.sh")
    manifest.write_text(text.replace('agent_cmd = "./bump.sh"', 'agent_cmd = "./cheat.sh"'))
    done = run_crucible("--manifest", manifest, "--iterations", "2")
    assert done.returncode == 0, done.stderr
    # with the gate put back the candidate is the kept state again: nothing to measure
    assert [r["score"] for r in rows(manifest)] == [0, None, None]
    assert [r["note"] for r in rows(manifest)][1:] == ["no change", "no change"]
    assert verdicts(manifest) == ["baseline", "discard", "discard"]
    notes = [e["msg"] for e in events(manifest) if e["kind"] == "note"]
    assert any("re-copied frozen injects" in n and "measure.sh" in n for n in notes)


def test_measure_sees_baseline_and_best_scores(example) -> None:
    manifest = example("counter")
    spy = manifest.parent / "measure.sh"
    spy.write_text(
        spy.read_text().replace(
            "solved=false",
            'echo "${CRUCIBLE_BASELINE_SCORE:-none} ${CRUCIBLE_BEST_SCORE:-none}" >> ../seen.txt\nsolved=false',
        )
    )
    done = run_crucible("--manifest", manifest, "--iterations", "2")
    assert done.returncode == 0, done.stderr
    assert (manifest.parent / "seen.txt").read_text().splitlines() == ["none none", "0 0", "0 1"]


def test_jsonl_ui_streams_every_event_on_stdout(example) -> None:
    manifest = example("counter")
    done = run_crucible("--manifest", manifest, "--iterations", "1", "--ui", "jsonl")
    assert done.returncode == 0, done.stderr
    streamed = [json.loads(line) for line in done.stdout.splitlines()]
    assert [e["kind"] for e in streamed] == [e["kind"] for e in events(manifest)]


def test_run_subcommand_and_top_level_flags_are_the_same(example) -> None:
    manifest = example("counter")
    done = run_crucible("run", "--manifest", manifest, "--iterations", "1", "--ui", "headless")
    assert done.returncode == 0, done.stderr
    assert verdicts(manifest) == ["baseline", "keep"]
    assert "iter 1" not in done.stderr and "run ended" in done.stderr
