"""Hostile proposers and measures against the world: links, a wrecked .git, a measure that edits the tree.

Each test drives a real `crucible run` of the counter example with a shell proposer that
attacks the world, then checks that the run ended normally, that nothing outside the
workspace changed, that the session log is whole, and that every kept commit survived.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli_support import run_crucible
from tests.e2e.session import events, rows, verdicts

# Bumps value.txt like the counter's proposer, after running the attack meant for this iteration.
PROPOSER = """#!/bin/sh
set -u
case "$CRUCIBLE_ITERATION" in
{cases}
esac
v=$(cat value.txt)
echo $((v + 1)) > value.txt
"""


def proposer(attacks: dict[int, str]) -> str:
    cases = "\n".join(f"  {n}) {command} ;;" for n, command in sorted(attacks.items()))
    return PROPOSER.format(cases=cases or "  0) ;;")


def hostile_domain(example: Callable[[str], Path], attacks: dict[int, str]) -> Path:
    """The counter example whose proposer runs `attacks[iteration]` (in the workspace) before bumping."""
    manifest = example("counter")
    script = manifest.parent / "bump.sh"
    script.write_text(proposer(attacks))
    script.chmod(0o755)
    (manifest.parent / "outside").mkdir()
    (manifest.parent / "outside" / "precious.txt").write_text("the user's file\n")
    return manifest


def tree_outside_workspace(root: Path) -> dict[str, tuple[int, str]]:
    """Every file under root except the workspace and the state dir: (link count, content hash)."""
    found: dict[str, tuple[int, str]] = {}
    for current, dirnames, filenames in os.walk(root):
        if Path(current) == root:
            dirnames[:] = [d for d in dirnames if d not in ("workspace", "state")]
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(current, d))]:
            full = os.path.join(current, name)
            st = os.lstat(full)
            data = os.readlink(full).encode() if os.path.islink(full) else Path(full).read_bytes()
            found[os.path.relpath(full, root)] = (st.st_nlink, hashlib.sha256(data).hexdigest())
    return found


def git(workspace: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=workspace, capture_output=True, text=True)
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


def run_and_check(manifest: Path, iterations: int, timeout: float = 120) -> dict[str, Any]:
    """Run, then assert the run ended normally, the log is whole and kept history is intact."""
    root = manifest.parent
    before = tree_outside_workspace(root)
    done = run_crucible("--manifest", manifest, "--iterations", str(iterations), timeout=timeout)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert tree_outside_workspace(root) == before  # nothing outside the workspace changed

    log_path = root / "state" / "session.jsonl"
    assert os.lstat(log_path).st_nlink == 1
    lines = log_path.read_bytes().splitlines()
    parsed = [json.loads(line) for line in lines]  # every line is an event: nothing wrote over the log
    assert parsed[0]["kind"] == "start"
    assert [e["kind"] for e in parsed].count("shutdown") == 1 and parsed[-1]["kind"] == "shutdown"
    assert parsed[-1]["outcome"] == "finished"

    summary = next(e for e in parsed if e["kind"] == "summary")
    base = next(e for e in parsed if e["kind"] == "identity")["base_commit"]
    workspace = root / "workspace"
    kept = summary["kept_shas"]
    assert len(kept) == len(set(kept)) and base not in kept
    git(workspace, "fsck", "--no-dangling")
    history = git(workspace, "rev-list", "HEAD").split()
    assert base in history and all(sha in history for sha in kept)
    assert git(workspace, "rev-parse", "refs/crucible/base").strip() == base
    return summary


def notes(manifest: Path) -> list[str]:
    return [e["msg"] for e in events(manifest) if e["kind"] == "note"]


def test_a_hardlinked_gate_is_replaced_not_written_through(example) -> None:
    manifest = hostile_domain(
        example,
        {
            1: "rm -f measure.sh; ln ../state/session.jsonl measure.sh",
            2: "rm -f measure.sh; ln ../outside/precious.txt measure.sh",
        },
    )
    run_and_check(manifest, 3)
    assert verdicts(manifest) == ["baseline", "keep", "keep", "keep"]
    gate = manifest.parent / "workspace" / "measure.sh"
    assert gate.read_bytes() == (manifest.parent / "measure.sh").read_bytes()
    assert os.lstat(gate).st_nlink == 1 and os.access(gate, os.X_OK)
    assert (manifest.parent / "outside" / "precious.txt").read_text() == "the user's file\n"
    assert sum("re-copied frozen injects" in n for n in notes(manifest)) == 2


def test_a_symlinked_inject_directory_is_replaced_by_a_real_one(example) -> None:
    manifest = hostile_domain(
        example, {1: 'rm -rf judge; ln -s "$PWD/../outside" judge', 2: "rm -rf judge; echo x > judge"}
    )
    text = manifest.read_text().replace(
        'inject = ["measure.sh"]', 'inject = [{src = "measure.sh", dst = "judge/measure.sh"}]'
    )
    manifest.write_text(text.replace('measure_cmd = "./measure.sh"', 'measure_cmd = "./judge/measure.sh"'))
    run_and_check(manifest, 2)
    assert verdicts(manifest) == ["baseline", "keep", "keep"]
    assert sorted(os.listdir(manifest.parent / "outside")) == ["precious.txt"]
    workspace = manifest.parent / "workspace"
    assert not (workspace / "judge").is_symlink() and (workspace / "judge" / "measure.sh").is_file()
    for sha in rows(manifest)[1]["sha"], rows(manifest)[2]["sha"]:
        listing = git(workspace, "ls-tree", "-r", sha)
        assert "100755 blob" in listing and "\tjudge/measure.sh" in listing
        assert "120000" not in listing  # no kept commit stores judge as a link


@pytest.mark.parametrize(
    "attack",
    [
        "rm -rf .git",
        "echo garbage > .git/HEAD",
        'echo zzz > ".git/$(sed -n "s/^ref: //p" .git/HEAD)"',
        "chmod -R u+w .git/objects && rm -rf .git/objects/*",
        'rm -rf .git && ln -s "$PWD/../outside" .git',
        'ln -sf "$PWD/../outside/precious.txt" .git/logs/HEAD',
    ],
    ids=["rm-git", "garbage-head", "garbage-branch", "no-objects", "git-symlink", "reflog-symlink"],
)
def test_a_wrecked_repository_is_rebuilt_from_the_engines_record(example, attack: str) -> None:
    manifest = hostile_domain(example, {2: attack})
    summary = run_and_check(manifest, 3)
    got = rows(manifest)
    assert [r["decision"] for r in got] == ["baseline", "keep", "discard", "keep"]
    assert "damaged the workspace repository" in got[2]["note"]
    assert any("was damaged" in n and "rebuilt it" in n for n in notes(manifest))
    workspace = manifest.parent / "workspace"
    # the wrecking candidate was rolled back: iteration 3 bumped the value kept at iteration 1
    assert (workspace / "value.txt").read_text().strip() == "2"
    assert summary["kept_shas"] == [got[1]["sha"], got[3]["sha"]]
    assert git(workspace, "rev-parse", "HEAD").strip() == got[3]["sha"]
    assert sorted(os.listdir(manifest.parent / "outside")) == ["precious.txt"]


def test_a_resume_after_the_repository_was_wrecked_rebuilds_it(example) -> None:
    manifest = hostile_domain(example, {})
    run_and_check(manifest, 2)
    workspace = manifest.parent / "workspace"
    kept = rows(manifest)[-1]["sha"]
    (workspace / ".git" / "HEAD").write_text("garbage\n")
    (workspace / "value.txt").write_text("77\n")
    done = run_crucible("--manifest", manifest, "--resume", "--iterations", "3")
    assert done.returncode == 0, done.stderr
    assert any("was damaged" in n for n in notes(manifest))
    assert verdicts(manifest)[-1] == "keep"
    assert (workspace / "value.txt").read_text().strip() == "3"
    assert kept in git(workspace, "rev-list", "HEAD").split()


MEASURE_THAT_EDITS = """#!/bin/sh
v=$(cat value.txt)
printf '{"valid": true, "score": %s, "note": "value=%s"}\\n' "$v" "$v"
# from 2 on, the measure "improves" the candidate after scoring it
[ "$v" -ge 2 ] && echo 100 > value.txt
exit 0
"""


def test_a_measure_that_edits_the_candidate_does_not_get_the_edit_kept(example) -> None:
    """Keep what was measured: the edit the measure makes after printing its score is rolled
    back, and the commit holds the content that was scored."""
    manifest = hostile_domain(example, {})
    (manifest.parent / "measure.sh").write_text(MEASURE_THAT_EDITS)
    run_and_check(manifest, 3)
    got = rows(manifest)
    assert [r["decision"] for r in got] == ["baseline", "keep", "keep", "keep"]
    assert [r["valid"] for r in got] == [True, True, True, True]
    workspace = manifest.parent / "workspace"
    assert (workspace / "value.txt").read_text().strip() == "3"
    for sha in git(workspace, "rev-list", "--all").split():
        assert git(workspace, "show", f"{sha}:value.txt").strip() != "100"
    assert git(workspace, "show", f"{got[2]['sha']}:value.txt").strip() == "2"


PYTHON_MEASURE = """#!/bin/sh
# an ordinary Python measure: importing a module of the workspace writes __pycache__/
exec env -u PYTHONDONTWRITEBYTECODE python3 -c 'import scoring; scoring.main()'
"""

SCORING = """import json


def main():
    v = int(open("value.txt").read())
    print(json.dumps({"valid": True, "score": v, "note": "value=%d" % v}))
"""


def test_a_python_measure_leaving_pycache_keeps_normally(example) -> None:
    manifest = hostile_domain(example, {})
    (manifest.parent / "measure.sh").write_text(PYTHON_MEASURE)
    (manifest.parent / "scoring.py").write_text(SCORING)
    toml = manifest.read_text()
    assert 'inject = ["measure.sh"]' in toml
    manifest.write_text(toml.replace('inject = ["measure.sh"]', 'inject = ["measure.sh", "scoring.py"]'))
    run_and_check(manifest, 2)
    got = rows(manifest)
    assert [r["decision"] for r in got] == ["baseline", "keep", "keep"], [r["note"] for r in got]
    workspace = manifest.parent / "workspace"
    assert not (workspace / "__pycache__").exists()  # the measure's build output was rolled back
    tracked = git(workspace, "ls-tree", "-r", "--name-only", "HEAD").split()
    assert not any("__pycache__" in name for name in tracked)


def test_a_candidate_that_changes_nothing_is_discarded_unmeasured(example) -> None:
    manifest = hostile_domain(example, {})
    # the proposer bumps on odd iterations and does nothing on even ones
    (manifest.parent / "bump.sh").write_text(
        "#!/bin/sh\n[ $((CRUCIBLE_ITERATION % 2)) -eq 0 ] && exit 0\nv=$(cat value.txt)\necho $((v + 1)) > value.txt\n"
    )
    measured = manifest.parent.parent / "measured.txt"  # outside the tree run_and_check compares
    gate = manifest.parent / "measure.sh"
    gate.write_text(gate.read_text().replace("solved=false", f"echo x >> {measured}\nsolved=false"))
    summary = run_and_check(manifest, 4)
    got = rows(manifest)
    assert [r["decision"] for r in got] == ["baseline", "keep", "discard", "keep", "discard"]
    assert [r["note"] for r in got[2::2]] == ["no change", "no change"]
    assert [r["score"] for r in got[2::2]] == [None, None]
    assert len(summary["kept_shas"]) == 2
    assert measured.read_text().count("x") == 3  # the baseline and the two changed candidates


def test_refresh_frozen_never_writes_through_a_link(tmp_path: Path) -> None:
    from crucible_core.manifest.loader import ResolvedInject
    from crucible_core.run.injects import refresh_frozen

    source = tmp_path / "gate.sh"
    source.write_text("#!/bin/sh\necho gate\n")
    source.chmod(0o755)
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("keep me\n")
    entries = [
        ResolvedInject(source, "gate.sh", frozen=True),
        ResolvedInject(source, "judge/gate.sh", frozen=True),
        ResolvedInject(source, "deep/er/gate.sh", frozen=True),
        ResolvedInject(source, "was_a_dir.sh", frozen=True),
    ]
    os.link(victim, workspace / "gate.sh")  # a hardlink to a file outside
    os.symlink(outside, workspace / "judge")  # a directory link out of the workspace
    (workspace / "deep").write_text("a file where a directory belongs\n")
    (workspace / "was_a_dir.sh").mkdir()
    os.symlink(victim, workspace / "was_a_dir.sh" / "inner")
    assert refresh_frozen(entries, workspace) == [e.destination for e in entries]
    assert victim.read_text() == "keep me\n" and os.lstat(victim).st_nlink == 1
    assert sorted(os.listdir(outside)) == ["victim.txt"]
    for entry in entries:
        target = workspace / entry.destination
        assert not target.is_symlink() and target.read_bytes() == source.read_bytes()
        assert os.access(target, os.X_OK) and os.lstat(target).st_nlink == 1
    assert not (workspace / "judge").is_symlink() and (workspace / "deep").is_dir()
    assert refresh_frozen(entries, workspace) == []  # intact copies are left alone


def test_a_verified_gate_is_read_again_once_either_file_is_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crucible_core.manifest.loader import ResolvedInject
    from crucible_core.run.injects import Verified, refresh_frozen

    source = tmp_path / "gate.sh"
    source.write_text("#!/bin/sh\necho 1\n")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    entries = [ResolvedInject(source, "gate.sh", frozen=True)]
    verified: Verified = {}
    assert refresh_frozen(entries, workspace, verified) == ["gate.sh"]
    time.sleep(0.08)  # both files' last change now lies outside the racy window
    reads: list[Path] = []
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: reads.append(self) or real(self))
    assert refresh_frozen(entries, workspace, verified) == [] and len(reads) == 2  # compared once
    assert refresh_frozen(entries, workspace, verified) == [] and len(reads) == 2  # then known equal
    gate = workspace / "gate.sh"
    with open(gate, "r+b") as handle:  # the candidate edits its gate in place, keeping its size
        handle.write(b"#!/bin/sh\necho 9\n")
    assert refresh_frozen(entries, workspace, verified) == ["gate.sh"]
    assert gate.read_bytes() == source.read_bytes()
    time.sleep(0.08)
    assert refresh_frozen(entries, workspace, verified) == []
    source.write_text("#!/bin/sh\necho 2\n")  # the operator edits the manifest's copy
    assert refresh_frozen(entries, workspace, verified) == ["gate.sh"]
    assert gate.read_text() == "#!/bin/sh\necho 2\n"
