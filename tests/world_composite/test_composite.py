"""A composite domain end to end: two counter domains reused verbatim, one combined gate.

The proposer raises both components on odd iterations (kept) and on even ones raises one and
wrecks the other (discarded): a keep commits both components, a discard rolls both back, and
a resume puts both back to the last kept state.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.cli_support import EXAMPLES, run_crucible
from tests.e2e.session import events, rows

COMPOSITE = """\
[composite]
name = "pair"

[[component]]
domain = "domains/left"

[[component]]
domain = "domains/right"
name = "r"

[workspace]
dir = "workspace"
inject = ["measure.sh"]

[agent]
backend = "command"
agent_cmd = "sh ../propose.sh"
goal = "Raise the sum of both counters."

[judge]
measure_cmd = "sh measure.sh"
direction = "higher"
"""

MEASURE = """\
a=$(cat left/value.txt); b=$(cat r/value.txt)
printf '{"valid": true, "score": %s, "note": "left=%s r=%s"}\\n' $((a + b)) "$a" "$b"
"""

PROPOSE = """\
set -eu
a=$(cat left/value.txt); b=$(cat r/value.txt)
if [ $((CRUCIBLE_ITERATION % 2)) -eq 1 ]; then
  echo $((a + 1)) > left/value.txt; echo $((b + 2)) > r/value.txt
else
  echo $((a + 5)) > left/value.txt; echo $((b - 10)) > r/value.txt
fi
"""


def make_composite(root: Path) -> Path:
    for name in ("left", "right"):
        shutil.copytree(
            EXAMPLES / "counter", root / "domains" / name, ignore=shutil.ignore_patterns("workspace", "state")
        )
    (root / "measure.sh").write_text(MEASURE)
    (root / "propose.sh").write_text(PROPOSE)
    manifest = root / "crucible.toml"
    manifest.write_text(COMPOSITE)
    return manifest


def values(workspace: Path) -> tuple[str, str]:
    return (workspace / "left" / "value.txt").read_text().strip(), (
        workspace / "r" / "value.txt"
    ).read_text().strip()


def commits(repo: Path) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(repo), "log", "--format=%s"], capture_output=True, text=True, check=True
    )
    return out.stdout.splitlines()


def test_a_two_component_composite_keeps_discards_and_resumes(tmp_path: Path) -> None:
    manifest = make_composite(tmp_path)
    workspace = tmp_path / "workspace"
    checked = run_crucible("check", "--manifest", manifest)
    assert checked.returncode == 0, checked.stdout
    assert "measured the workspace: valid=True score=0.0" in checked.stdout and not workspace.exists()
    done = run_crucible("--manifest", manifest, "--iterations", "2")
    assert done.returncode == 0, done.stderr
    assert [r["decision"] for r in rows(manifest)] == ["baseline", "keep", "discard"]
    assert values(workspace) == ("1", "2")  # the discard moved both components back
    # each row's evidence spans both components, their paths under the component directories
    keep, discard = rows(manifest)[1:]
    assert "+++ b/left/value.txt" in keep["diff"] and "+++ b/r/value.txt" in keep["diff"]
    assert "-0\n+1\n" in keep["diff"] and "-0\n+2\n" in keep["diff"]
    assert keep["diffstat"] == "2 files changed, 2 insertions(+), 2 deletions(-)"
    assert "+6\n" in discard["diff"] and "+-8\n" in discard["diff"]  # left 1 -> 6, r 2 -> -8
    assert discard["diffstat"] == "2 files changed, 2 insertions(+), 2 deletions(-)"
    for component in ("left", "r"):
        assert [s for s in commits(workspace / component) if s.startswith("crucible: iteration")] == [
            "crucible: iteration 1 (left=1 r=2)"
        ]
    identity = next(e for e in events(manifest) if e["kind"] == "identity")["identity"]
    assert [(c["name"], c["repo"]) for c in identity["components"]] == [("left", "."), ("r", ".")]
    assert all(len(c["base_sha"]) == 40 for c in identity["components"])
    kept = rows(manifest)[1]["kept_snap"]
    assert kept.startswith("composite:") and '"left"' in kept and '"r"' in kept
    # the domains were reused, not touched
    assert not (tmp_path / "domains" / "left" / "workspace").exists()

    # a killed turn's leftovers in both components: the resume rolls both back to the kept state
    (workspace / "left" / "value.txt").write_text("99\n")
    (workspace / "r" / "value.txt").write_text("-99\n")
    (workspace / "r" / "stray.txt").write_text("half-made\n")
    done = run_crucible("--manifest", manifest, "--iterations", "4", "--resume")
    assert done.returncode == 0, done.stderr
    assert [r["decision"] for r in rows(manifest)] == ["baseline", "keep", "discard", "keep", "discard"]
    assert values(workspace) == ("2", "4") and not (workspace / "r" / "stray.txt").exists()
    assert [r["score"] for r in rows(manifest)] == [0, 3, -2, 6, 1]
    diff = run_crucible("diff", "--manifest", manifest)
    assert diff.returncode == 0, diff.stderr
    assert "# component left" in diff.stdout and "# component r" in diff.stdout and "+4" in diff.stdout


def test_a_measure_that_writes_into_a_component_is_rolled_back_before_the_keep(tmp_path: Path) -> None:
    manifest = make_composite(tmp_path)
    # The measure leaves a log in one component: the candidate is put back to what was staged.
    (tmp_path / "measure.sh").write_text("echo measured > left/measure.log\n" + MEASURE)
    done = run_crucible("--manifest", manifest, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    assert [r["decision"] for r in rows(manifest)] == ["baseline", "keep"]
    workspace = tmp_path / "workspace"
    assert values(workspace) == ("1", "2") and not (workspace / "left" / "measure.log").exists()
    tracked = subprocess.run(
        ["git", "-C", str(workspace / "left"), "ls-files"], capture_output=True, text=True, check=True
    )
    assert "measure.log" not in tracked.stdout.split()


LINKING_PROPOSER = """\
set -eu
if [ "$CRUCIBLE_ITERATION" -eq 1 ]; then
  rm -rf left && ln -s "$VICTIM" left
  echo 100 > r/value.txt
fi
"""


def test_a_component_swapped_for_a_link_never_reaches_the_link_target(tmp_path: Path) -> None:
    # The agent works in the composite's workspace, so it can replace a component's directory
    # with a link to another repository on the host; keep, discard and rebuild must not follow it.
    victim = tmp_path / "victim"
    victim.mkdir()
    subprocess.run(["git", "init", "-q", str(victim)], check=True)
    (victim / "value.txt").write_text("7\n")
    subprocess.run(["git", "-C", str(victim), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(victim), "-c", "user.name=o", "-c", "user.email=o@x", "commit", "-qm", "owner"],
        check=True,
    )
    (victim / "wip.txt").write_text("uncommitted work\n")
    root = tmp_path / "c"
    manifest = make_composite(root)
    (root / "propose.sh").write_text(LINKING_PROPOSER.replace("$VICTIM", str(victim)))
    done = run_crucible("--manifest", manifest, "--iterations", "2", cwd=root)
    assert done.returncode == 0, done.stderr
    assert commits(victim) == ["owner"]
    assert sorted(p.name for p in victim.iterdir()) == [".git", "value.txt", "wip.txt"]
    workspace = root / "workspace"
    assert not (workspace / "left").is_symlink()
    assert values(workspace) == ("0", "0")  # the linking candidate was not kept
    decided = rows(manifest)
    assert [r["decision"] for r in decided] == ["baseline", "discard", "discard"]
    assert "symbolic link" in json.dumps(decided[1])
