"""Hostile proposers against the integrity of the world: what is kept, what is read, what is repaired.

What is kept is what was measured, whatever the agent does to the index or the ignore rules;
a FIFO planted where the engine reads never hangs it; a corrupted object or a linked
packed-refs is noticed and repaired during the run; and a workspace made unreadable by
`chmod 000` never wedges a run or a resume.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_support import CRUCIBLE, crucible_env, run_crucible
from tests.e2e.session import rows, verdicts
from tests.hostile.test_hostile_world import git, hostile_domain, notes, run_and_check

# The counter's judge, plus an optional bonus.txt that adds to the score: a file the kept
# tree must hold if the score is to be reproducible from the kept commit.
BONUS_MEASURE = """#!/bin/sh
v=$(cat value.txt 2>/dev/null || true)
b=0
[ -f bonus.txt ] && b=$(cat bonus.txt)
case "$v" in ''|*[!0-9]*) printf '{"valid": false, "note": "no value"}\\n'; exit 0 ;; esac
printf '{"valid": true, "score": %s, "note": "value=%s bonus=%s"}\\n' "$((v + b))" "$v" "$b"
"""


def bonus_domain(example, attacks: dict[int, str]) -> Path:
    manifest = hostile_domain(example, attacks)
    (manifest.parent / "measure.sh").write_text(BONUS_MEASURE)
    return manifest


def score_of(workspace: Path, sha: str) -> int:
    """What the bonus measure gives for the tree of a kept commit."""
    files = git(workspace, "ls-tree", "--name-only", sha).split()
    value = int(git(workspace, "show", f"{sha}:value.txt")) if "value.txt" in files else 0
    bonus = int(git(workspace, "show", f"{sha}:bonus.txt")) if "bonus.txt" in files else 0
    return value + bonus


def assert_kept_is_measured(manifest: Path) -> None:
    """Every kept commit holds exactly what its measure scored (value.txt tracked throughout)."""
    workspace = manifest.parent / "workspace"
    kept = [r for r in rows(manifest) if r["decision"] == "keep"]
    assert kept
    for row in kept:
        assert "value.txt" in git(workspace, "ls-tree", "--name-only", row["sha"]).split(), row
        assert score_of(workspace, row["sha"]) == row["score"], row


# --------------------------------------------------------------- 3: kept is what was measured


@pytest.mark.parametrize(
    "hide",
    ["echo value.txt >> .gitignore", "echo value.txt >> .git/info/exclude"],
    ids=["gitignore", "info-exclude"],
)
def test_untracking_and_ignoring_a_measured_file_does_not_drop_it_from_the_kept_commit(example, hide) -> None:
    manifest = bonus_domain(example, {2: f"git rm -q --cached value.txt && {hide}"})
    run_and_check(manifest, 3)
    assert verdicts(manifest) == ["baseline", "keep", "keep", "keep"]
    assert_kept_is_measured(manifest)
    workspace = manifest.parent / "workspace"
    assert "value.txt" in git(workspace, "ls-files").split()


def test_a_file_the_candidate_ignores_itself_is_kept_with_it(example) -> None:
    """Ignore rules are the kept tree's: a rule the candidate adds does not hide the candidate's
    own file, so the score it got with that file is reproducible from the kept commit."""
    manifest = bonus_domain(example, {2: "echo bonus.txt >> .gitignore && echo 100 > bonus.txt"})
    run_and_check(manifest, 3)
    assert verdicts(manifest) == ["baseline", "keep", "keep", "keep"]
    assert_kept_is_measured(manifest)
    sha = rows(manifest)[2]["sha"]
    assert git(manifest.parent / "workspace", "show", f"{sha}:bonus.txt").strip() == "100"


def test_a_file_hidden_by_info_exclude_does_not_survive_a_rollback(example) -> None:
    # iteration 2 hides a malus behind the agent's own exclude rule: it is measured, discarded,
    # and must not linger to spoil iteration 3's measure
    manifest = bonus_domain(example, {2: "echo bonus.txt >> .git/info/exclude && echo -100 > bonus.txt"})
    run_and_check(manifest, 3)
    assert verdicts(manifest) == ["baseline", "keep", "discard", "keep"]
    assert_kept_is_measured(manifest)
    assert not (manifest.parent / "workspace" / "bonus.txt").exists()


def test_a_forged_index_entry_does_not_keep_content_other_than_measured(example) -> None:
    """The agent writes 7 into value.txt and gives the index entry (still the kept blob) the
    file's new stat data: a stat cache read from that index believes the file unchanged."""
    forge = "echo 7 > value.txt && echo x > other.txt && python3 ../forge_index.py && exit 0"
    manifest = bonus_domain(example, {2: forge})
    (manifest.parent / "forge_index.py").write_text(FORGE_INDEX)
    run_and_check(manifest, 3)
    assert verdicts(manifest) == ["baseline", "keep", "keep", "keep"]
    assert_kept_is_measured(manifest)


# Copies value.txt's lstat data into its index entry, so git (and a stat cache) believes the
# file on disk is the staged blob.
FORGE_INDEX = """
import hashlib, os, struct
data = bytearray(open(".git/index", "rb").read())
st = os.lstat("value.txt")
count = struct.unpack(">L", data[8:12])[0]
pos = 12
for _ in range(count):
    flags = struct.unpack(">H", data[pos + 60:pos + 62])[0]
    name = bytes(data[pos + 62:pos + 62 + (flags & 0xFFF)])
    if name == b"value.txt":
        fields = [st.st_ctime_ns // 10**9, st.st_ctime_ns % 10**9, st.st_mtime_ns // 10**9,
                  st.st_mtime_ns % 10**9, st.st_dev & 0xFFFFFFFF, st.st_ino & 0xFFFFFFFF,
                  0o100644, st.st_uid, st.st_gid, st.st_size]
        data[pos:pos + 40] = struct.pack(">10L", *fields)
    pos += (62 + (flags & 0xFFF) + 8) & ~7
data[-20:] = hashlib.sha1(bytes(data[:-20])).digest()
open(".git/index", "wb").write(bytes(data))
os.utime(".git/index", ns=(st.st_mtime_ns + 10**9 * 3600, st.st_mtime_ns + 10**9 * 3600))
"""


# ------------------------------------------------------------------ 6: FIFOs where the engine reads


@pytest.mark.parametrize(
    ("attack", "expected"),
    [
        ("mkfifo .gitignore && echo x > new.txt", ["baseline", "keep", "keep", "keep"]),
        ("rm -f .git/HEAD && mkfifo .git/HEAD", ["baseline", "keep", "discard", "keep"]),
        ("rm -f .git/index && mkfifo .git/index", ["baseline", "keep", "discard", "keep"]),
        (
            "rm -f .git/info/exclude && mkfifo .git/info/exclude && echo x > new.txt",
            ["baseline", "keep", "discard", "keep"],
        ),
    ],
    ids=["gitignore", "head", "index", "info-exclude"],
)
def test_a_fifo_where_the_engine_reads_never_hangs_it(example, attack: str, expected: list[str]) -> None:
    manifest = hostile_domain(example, {2: attack})
    run_and_check(manifest, 3, timeout=60)
    assert verdicts(manifest) == expected
    if expected[2] == "discard":
        assert "damaged the workspace repository" in rows(manifest)[2]["note"]
    workspace = manifest.parent / "workspace"
    assert (workspace / "value.txt").read_text().strip() == ("3" if expected[2] == "keep" else "2")


# ------------------------------------------------------- 12: damage is noticed and repaired in the run

CORRUPT_KEPT_BLOB = 'f=".git/objects/$(git rev-parse HEAD:value.txt | sed "s|^..|&/|")" && chmod u+w "$f" && printf garbage > "$f"'


@pytest.mark.parametrize(
    "attack",
    [
        CORRUPT_KEPT_BLOB,
        'ln -s "$PWD/../outside/precious.txt" .git/packed-refs',
        "cp ../outside/precious.txt .git/packed-refs",
    ],
    ids=["corrupt-kept-blob", "packed-refs-symlink", "packed-refs-garbage"],
)
def test_a_damaged_repository_is_repaired_during_the_run(example, attack: str) -> None:
    manifest = hostile_domain(example, {2: attack})
    summary = run_and_check(manifest, 3)  # git fsck passes at the end
    got = rows(manifest)
    assert [r["decision"] for r in got] == ["baseline", "keep", "discard", "keep"]
    assert "damaged the workspace repository" in got[2]["note"]
    assert summary["kept_shas"] == [got[1]["sha"], got[3]["sha"]]
    diff = run_crucible("diff", "--manifest", manifest)
    assert diff.returncode == 0 and "Traceback" not in diff.stderr, diff.stderr


def test_a_repack_by_the_agent_is_accepted_and_a_corrupted_pack_repaired(example) -> None:
    corrupt_pack = 'p=$(ls .git/objects/pack/*.pack) && chmod u+w "$p" && printf XXXX | dd of="$p" bs=1 seek=40 conv=notrunc 2>/dev/null'
    manifest = hostile_domain(example, {2: "git gc -q", 3: corrupt_pack})
    run_and_check(manifest, 4)
    got = rows(manifest)
    assert [r["decision"] for r in got] == ["baseline", "keep", "keep", "discard", "keep"]
    assert "damaged the workspace repository" in got[3]["note"]


def test_a_resume_verifies_what_changed_since_the_last_keep(example) -> None:
    manifest = hostile_domain(example, {})
    run_and_check(manifest, 2)
    workspace = manifest.parent / "workspace"
    blob = git(workspace, "rev-parse", "HEAD:value.txt").strip()
    obj = workspace / ".git" / "objects" / blob[:2] / blob[2:]
    obj.chmod(0o644)
    obj.write_bytes(b"garbage")
    done = run_crucible("--manifest", manifest, "--resume", "--iterations", "3")
    assert done.returncode == 0, done.stderr
    assert any("was damaged" in n for n in notes(manifest))
    git(workspace, "fsck", "--no-dangling")
    assert verdicts(manifest)[-1] == "keep"


# ------------------------------------------------------------------ 13: chmod 000 as a non-root user

NOBODY = 65534


@pytest.fixture
def nobody_dir() -> Iterator[Path]:
    """A directory a user without privileges owns (pytest's tmp_path is private to root)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to hand a directory to an unprivileged user")
    base = Path(tempfile.mkdtemp(prefix="crucible-nobody-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        for current, dirs, _ in os.walk(base):
            for name in dirs:
                os.chmod(os.path.join(current, name), 0o755)
        shutil.rmtree(base)


def run_as_nobody(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = crucible_env(HOME=str(root / "home"))
    return subprocess.run(
        [str(CRUCIBLE), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        user=NOBODY,
        group=NOBODY,
        extra_groups=[],
        cwd=root,
    )


def git_as_root(workspace: Path, *args: str) -> str:
    # the repository belongs to another user: tell git it is safe to read
    done = subprocess.run(
        ["git", "-c", "safe.directory=*", *args], cwd=workspace, capture_output=True, text=True
    )
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


def test_chmod_000_as_a_user_never_wedges_a_run_or_a_resume(example, nobody_dir: Path) -> None:
    manifest = hostile_domain(
        example, {1: "mkdir -p sub && echo a > sub/a.txt", 2: "chmod 000 sub", 3: "chmod 000 .git"}
    )
    domain = nobody_dir / "counter"
    shutil.copytree(manifest.parent, domain)
    (nobody_dir / "home").mkdir()
    for current, dirs, files in os.walk(nobody_dir):
        for name in dirs + files + ["."]:
            os.chown(os.path.join(current, name), NOBODY, NOBODY, follow_symlinks=False)
    manifest = domain / "crucible.toml"

    done = run_as_nobody(nobody_dir, "--manifest", str(manifest), "--iterations", "4")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert verdicts(manifest) == ["baseline", "keep", "keep", "keep", "keep"]
    workspace = domain / "workspace"
    assert any("permission" in n for n in notes(manifest))
    git_as_root(workspace, "fsck", "--no-dangling")
    assert git_as_root(workspace, "show", "HEAD:value.txt").strip() == "4"

    # the same damage while no engine runs: the resume puts it right and goes on
    subprocess.run(["chmod", "000", str(workspace / "sub"), str(workspace / ".git")], check=True, user=NOBODY)
    done = run_as_nobody(nobody_dir, "--manifest", str(manifest), "--resume", "--iterations", "6")
    assert done.returncode == 0, done.stderr
    assert verdicts(manifest)[-1] == "keep"  # iteration 5 reaches the counter's target: solved
    git_as_root(workspace, "fsck", "--no-dangling")
    assert git_as_root(workspace, "show", "HEAD:value.txt").strip() == "5"
    assert (workspace / "sub" / "a.txt").read_text() == "a\n"
