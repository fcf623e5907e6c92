"""GitWorld's private record of kept commits, the rebuild of a wrecked repository from it, and stage()."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import shutil
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from crucible_core.errors import CrucibleError
from crucible_core.manifest.models import WorldSection
from crucible_core.protocols import World, WorldContext
from crucible_core.shell import Shell
from crucible_world_git.commandworld import CommandWorld
from crucible_world_git.gitworld import GitWorld
from crucible_world_git.kept_record import KeptRecord
from crucible_world_git.loose_objects import STREAM_THRESHOLD
from crucible_world_git.settings import CommandWorldSettings
from tests.world_git.support import GIT_ENV, git, make_base, worktree, write


def recorded_world(tmp_path: Path) -> tuple[GitWorld, list[str]]:
    notes: list[str] = []
    workspace = make_base(tmp_path / "ws")
    world = GitWorld.at(workspace, (".claude/",), record=tmp_path / "state" / "record", note=notes.append)
    assert isinstance(world, World)
    world.prepare()
    return world, notes


def test_stage_names_the_candidate_and_says_when_nothing_changed(tmp_path: Path) -> None:
    world, _ = recorded_world(tmp_path)
    ws = world.memory.workspace
    kept = world.stage()
    assert kept.unchanged and not kept.refused
    write(ws, "build.log", "ignored output\n")  # ignored: not part of what a snapshot keeps
    write(ws, ".claude/settings.json", "{}\n")  # spared
    assert world.stage() == kept
    write(ws, "src/app.py", "print('changed')\n")
    changed = world.stage()
    assert not changed.unchanged and changed.token != kept.token
    assert world.stage() == changed  # stable while nothing moves
    write(ws, "new.txt", "untracked\n")
    assert world.stage().token != changed.token
    world.snapshot("kept")
    assert world.stage().unchanged


def test_rm_rf_git_is_rebuilt_from_the_record_with_every_kept_commit(tmp_path: Path) -> None:
    world, notes = recorded_world(tmp_path)
    ws = world.memory.workspace
    base = git(ws, "rev-parse", "refs/crucible/base").strip()
    write(ws, "src/app.py", "print('one')\n")
    first = world.snapshot("one")
    write(ws, "docs/guide.md", "two\n")
    second = world.snapshot("two")
    expected = worktree(ws)
    shutil.rmtree(ws / ".git")
    write(ws, "src/app.py", "print('wrecked')\n")
    world.restore(second)
    assert worktree(ws) == expected
    assert git(ws, "rev-parse", "HEAD").strip() == second
    assert git(ws, "rev-list", "HEAD").split()[:3] == [second, first, base]
    assert git(ws, "rev-parse", "refs/crucible/base").strip() == base
    assert git(ws, "status", "--porcelain") == ""
    git(ws, "fsck", "--no-dangling")
    assert len(notes) == 1 and ".git is missing" in notes[0]
    world.restore(first)  # the rebuilt repository works as before
    assert (ws / "src" / "app.py").read_text() == "print('one')\n"


def test_garbage_head_is_refused_by_stage_and_rebuilt_keeping_the_damaged_copy(tmp_path: Path) -> None:
    world, notes = recorded_world(tmp_path)
    ws = world.memory.workspace
    write(ws, "src/app.py", "print('one')\n")
    kept = world.snapshot("one")
    (ws / ".git" / "HEAD").write_text("garbage\n")
    staged = world.stage()
    assert "damaged the workspace repository" in staged.refused and not staged.unchanged
    assert git(ws, "rev-parse", "HEAD").strip() == kept
    damaged = [p for p in (tmp_path / "state" / "record").iterdir() if p.name.startswith("damaged-")]
    assert len(damaged) == 1 and (damaged[0] / "HEAD").read_text() == "garbage\n"
    assert "damaged one is at" in notes[0]


def test_a_deleted_kept_object_is_noticed_and_healed_before_the_restore(tmp_path: Path) -> None:
    world, notes = recorded_world(tmp_path)
    ws = world.memory.workspace
    write(ws, "docs/guide.md", "kept guide\n")
    kept = world.snapshot("one")
    blob = git(ws, "rev-parse", f"{kept}:docs/guide.md").strip()
    (ws / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    write(ws, "docs/guide.md", "candidate\n")
    world.restore(kept)
    assert (ws / "docs" / "guide.md").read_text() == "kept guide\n"
    assert notes and f"object {blob} of kept history was deleted" in notes[0]


def test_a_git_symlink_is_never_followed(tmp_path: Path) -> None:
    world, _ = recorded_world(tmp_path)
    ws = world.memory.workspace
    kept = world.snapshot("kept")
    elsewhere = make_base(tmp_path / "elsewhere")
    before = git(elsewhere, "rev-parse", "HEAD")
    shutil.rmtree(ws / ".git")
    os.symlink(elsewhere / ".git", ws / ".git")
    world.restore(kept)
    assert not (ws / ".git").is_symlink()
    assert git(elsewhere, "rev-parse", "HEAD") == before
    assert git(ws, "rev-parse", "HEAD").strip() == kept


def test_without_a_record_a_deleted_repository_fails_with_a_typed_error(tmp_path: Path) -> None:
    workspace = make_base(tmp_path / "ws")
    world = GitWorld.at(workspace)
    kept = world.prepare()
    shutil.rmtree(workspace / ".git")
    world.memory.close()
    with pytest.raises(CrucibleError):
        world.restore(kept)


def test_command_world_with_a_domain_snapshot_is_never_unchanged(tmp_path: Path) -> None:
    workspace = make_base(tmp_path / "ws")
    shell = Shell(cwd=tmp_path, env=dict(os.environ), timeout=30)

    def staged(**commands: str) -> bool:
        ctx = WorldContext(
            workspace,
            WorldSection(),
            (),
            shell,
            private_dir=tmp_path / "p",
            settings=CommandWorldSettings(**commands),
        )
        world = CommandWorld.from_context(ctx)
        world.prepare()
        return world.stage().unchanged

    assert staged(apply_cmd="true")
    assert not staged(snapshot_cmd="echo live", restore_cmd="true")


def victim_repository(root: Path) -> tuple[Path, dict[str, str], str]:
    """A repository outside the workspace with a commit and uncommitted work: what must survive."""
    victim = make_base(root)
    write(victim, "precious.txt", "committed elsewhere\n")
    git(victim, "add", "-A")
    git(victim, "commit", "-qm", "the owner's commit")
    write(victim, "wip.txt", "uncommitted work\n")
    return victim, worktree(victim), git(victim, "rev-parse", "HEAD").strip()


def test_a_link_in_place_of_the_workspace_is_never_followed(tmp_path: Path) -> None:
    # A composite component sits in the agent's working directory: the agent can swap the
    # component's directory for a link to another repository. Nothing may reach that one.
    world, notes = recorded_world(tmp_path)
    ws = world.memory.workspace
    write(ws, "src/app.py", "print('kept')\n")
    kept = world.snapshot("kept")
    expected = worktree(ws)
    victim, victim_files, victim_head = victim_repository(tmp_path / "victim")

    def swap_for_link() -> None:
        shutil.rmtree(ws)
        os.symlink(victim, ws)

    swap_for_link()
    assert world.changed_paths() == []
    with pytest.raises(CrucibleError, match="symbolic link"):
        world.snapshot("through the link")
    staged = world.stage()
    assert "symbolic link" in staged.refused
    assert not ws.is_symlink() and any("symbolic link" in note for note in notes)
    world.restore(kept)  # the discard that follows a refused candidate
    assert worktree(ws) == expected  # rebuilt in place from the record

    swap_for_link()
    world.restore(kept)
    assert not ws.is_symlink() and worktree(ws) == expected
    assert worktree(victim) == victim_files
    assert git(victim, "rev-parse", "HEAD").strip() == victim_head
    assert git(victim, "status", "--porcelain").strip() == "?? wip.txt"


def test_keeping_what_stage_just_wrote_leaves_the_index_file_alone(tmp_path: Path) -> None:
    # An iteration stages its candidate, measures it, then keeps it: the index stage() wrote is
    # already the kept tree's, so the keep must not write it (and the record's checksum) again.
    world, _ = recorded_world(tmp_path)
    ws = world.memory.workspace
    index = ws / ".git" / "index"
    own_index = tmp_path / "state" / "record" / "index"
    write(ws, "src/app.py", "print('changed')\n")
    world.stage()
    written = (os.stat(index).st_ino, index.read_bytes(), os.stat(own_index).st_ino)
    kept = world.snapshot("kept")
    assert (os.stat(index).st_ino, index.read_bytes(), os.stat(own_index).st_ino) == written
    assert git(ws, "rev-parse", "HEAD").strip() == kept
    assert git(ws, "status", "--porcelain") == ""  # git agrees the index is the kept tree
    # An index someone else wrote in between (the measure's `git rm --cached`) is still
    # replaced by the engine's own.
    write(ws, "src/app.py", "print('again')\n")
    world.stage()
    git(ws, "rm", "-q", "--cached", "README.md")
    kept = world.snapshot("kept again")
    assert git(ws, "show", f"{kept}:README.md") == "hello\n"
    assert git(ws, "status", "--porcelain") == ""


def test_the_kept_commit_is_rewritten_in_place_and_still_read_back_after_each_keep(tmp_path: Path) -> None:
    world, _ = recorded_world(tmp_path)
    record = world.memory.record
    assert record is not None
    kept_file = record.directory / "kept"
    before = os.stat(kept_file)
    write(world.memory.workspace, "src/app.py", "print('one')\n")
    first = world.snapshot("one")
    assert record.kept() == first and kept_file.read_text() == first
    after = os.stat(kept_file)
    assert after.st_ino == before.st_ino  # the same file, written over: no temporary, no rename
    # Since when a resume verifies the store: the check before the keep, kept beside it.
    assert record.kept_since_ns() == int((record.directory / "sound").read_text()) <= after.st_mtime_ns
    write(world.memory.workspace, "src/app.py", "print('two')\n")
    second = world.snapshot("two")
    assert record.kept() == second != first
    assert not [p.name for p in record.directory.iterdir() if ".tmp" in p.name]
    # A value of another length (an old record's, a hand-edited one) is replaced whole.
    kept_file.write_text(second + "\n\n")
    write(world.memory.workspace, "src/app.py", "print('three')\n")
    third = world.snapshot("three")
    assert kept_file.read_text() == third


def mangle(ws: Path, sha: str) -> None:
    """Rewrite a loose object in place: same inode, same size, other bytes."""
    path = ws / ".git" / "objects" / sha[:2] / sha[2:]
    path.chmod(0o644)
    with open(path, "r+b") as f:
        f.seek(2)
        f.write(b"\xff" * 4)


def _kept_blob_damaged_after_a_stage(tmp_path: Path) -> tuple[GitWorld, list[str], str, str]:
    """A world with one kept commit and a staged candidate, whose kept blob (returned) was then
    rewritten in place, as a measure running between the stage's check and the keep could.
    Returns the world, its notes, the kept commit and the damaged blob."""
    world, notes = recorded_world(tmp_path)
    ws = world.memory.workspace
    write(ws, "docs/guide.md", "kept guide\n")
    first = world.snapshot("one")
    old_blob = git(ws, "rev-parse", f"{first}:docs/guide.md").strip()
    write(ws, "src/app.py", "print('two')\n")
    assert not world.stage().refused
    mangle(ws, old_blob)
    return world, notes, first, old_blob


def test_an_object_damaged_between_the_stage_and_the_keep_never_enters_kept_history(tmp_path: Path) -> None:
    # The keep right after a stage does not walk the object store again (the stage just did).
    # An object of kept history, damaged in the gap: the keep goes ahead (the record holds its
    # own copy and copies nothing from the damaged file), and the next check finds it.
    world, notes, _, old_blob = _kept_blob_damaged_after_a_stage(tmp_path)
    ws = world.memory.workspace
    second = world.snapshot("two")
    record = world.memory.record
    assert record is not None and record.kept() == second
    # A resume after a kill right here verifies what changed since the stage's check.
    resumed = GitWorld.at(ws, (".claude/",), record=tmp_path / "state" / "record", note=notes.append)
    staged = resumed.stage()
    assert "damaged the workspace repository" in staged.refused
    assert f"objects/{old_blob[:2]}/{old_blob[2:]} is not the object it names" in notes[-1]
    assert git(ws, "rev-parse", "HEAD").strip() == second
    git(ws, "fsck", "--no-dangling")

    # An object the keep copies into the record (the candidate's new tree), damaged in the gap:
    # the record refuses it, the candidate is not kept, the next stage rebuilds at `second`.
    write(ws, "src/app.py", "print('three')\n")
    token = resumed.stage().token
    mangle(ws, token)
    with pytest.raises(CrucibleError, match="the candidate was not kept"):
        resumed.snapshot("three")
    assert record.kept() == second
    assert "damaged the workspace repository" in resumed.stage().refused
    assert git(ws, "rev-parse", "HEAD").strip() == second
    git(ws, "fsck", "--no-dangling")
    for sha in git(ws, "rev-list", "--objects", "--all").split():
        if len(sha) == 40:
            assert record.db.has(bytes.fromhex(sha)) or sha == token


class _Killed(BaseException):
    """A SIGKILL at one system call: nothing after it runs."""


def test_a_kill_right_after_the_kept_commit_is_written_still_has_a_resume_verify_the_gap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The keep after a stage trusts the stage's check; what changed after that check (the
    # measure ran in between) must be verified by a resume whatever system call a kill lands
    # on, the one after the kept commit is written included.
    world, notes, first, old_blob = _kept_blob_damaged_after_a_stage(tmp_path)
    ws = world.memory.workspace

    def killed(*args: object, **kwargs: object) -> None:
        raise _Killed

    monkeypatch.setattr(os, "utime", killed)
    with contextlib.suppress(_Killed):  # the kill, wherever in the keep the call is made
        world.snapshot("two")
    monkeypatch.undo()
    record = world.memory.record
    assert record is not None and record.kept() != first  # the new kept commit was written

    resumed = GitWorld.at(ws, (".claude/",), record=tmp_path / "state" / "record", note=notes.append)
    staged = resumed.stage()
    assert "damaged the workspace repository" in staged.refused
    assert f"objects/{old_blob[:2]}/{old_blob[2:]} is not the object it names" in notes[-1]


_KEEP_A_HUGE_AGENT_BLOB = """
import subprocess, sys
from pathlib import Path
from typing import Any
from crucible_world_git import git_memory
from crucible_world_git.gitworld import GitWorld
from crucible_world_git.kept_record import KeptRecord
from tests.world_git.support import GIT_ENV, make_base

root, size, stored = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
git_memory.LOOSE_LIMIT = 3  # past it, a check moves loose objects into a pack
ws = make_base(root / "ws")
world = GitWorld.at(ws, (".claude/",), record=root / "state" / "record", note=lambda _: None)
world.prepare()
# The agent's step, with the real git CLI: a sparse file of zeros, added by the agent itself,
# so git writes its blob loosely and the engine's own write of it is skipped as already there.
subprocess.run(["truncate", "-s", str(size), str(ws / "zeros.bin")], check=True)
add = ["-c", "core.bigFileThreshold=1m"] if stored == "packed" else []
subprocess.run(["git", *add, "add", "zeros.bin"], cwd=ws, env=GIT_ENV, check=True)
if stored == "among many loose":
    for n in range(5):
        (ws / f"small{n}.txt").write_text(f"small {n}\\n")
        subprocess.run(["git", "add", f"small{n}.txt"], cwd=ws, env=GIT_ENV, check=True)
def peak_kib():
    # This process's own peak (VmHWM): ru_maxrss would carry the spawning test worker's size
    # over the exec, however small this process stayed.
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise SystemExit("no VmHWM in /proc/self/status")


Path("/proc/self/clear_refs").write_text("5")  # the peak from here on: the keep's own
before = peak_kib()
kept = world.snapshot("huge")
after = peak_kib()
print(kept, before * 1024, after * 1024)
"""


@pytest.mark.parametrize("stored", ["loose", "packed", "among many loose"])
def test_keeping_a_huge_blob_the_agent_added_itself_never_holds_it_in_memory(
    tmp_path: Path, stored: str
) -> None:
    # A compressible object is cheap for the agent to make and costs its whole size to inflate.
    # Measured as the peak resident size (VmHWM) of a child process that does the keep: it
    # counts every allocation, zlib's and dulwich's included, which tracemalloc would not see.
    # Under core.bigFileThreshold (512 MiB by default), `git add` writes the blob loose; past
    # it, into a pack of its own, whole (the agent sets the threshold low to get that cheaply).
    size = 400 << 20
    # Among many loose objects, the check before the keep moves them into a pack (as git's
    # auto gc would), reading each one.
    done = subprocess.run(
        [sys.executable, "-c", _KEEP_A_HUGE_AGENT_BLOB, str(tmp_path), str(size), stored],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    kept, _, peak = done.stdout.split()
    assert int(peak) < size // 4, f"peak resident {int(peak) >> 20} MiB keeping a {size >> 20} MiB blob"
    ws = tmp_path / "ws"
    blob = git(ws, "rev-parse", f"{kept}:zeros.bin").strip()
    # The agent's blob stays loose unless git packed it; the small ones went into a pack.
    assert (ws / ".git" / "objects" / blob[:2] / blob[2:]).is_file() == (stored != "packed")
    small = git(ws, "rev-parse", f"{kept}:small0.txt").strip() if stored == "among many loose" else None
    assert small is None or not (ws / ".git" / "objects" / small[:2] / small[2:]).exists()
    # The record's copy, read back by git itself, in pieces: the same blob.
    env = {**GIT_ENV, "GIT_OBJECT_DIRECTORY": str(tmp_path / "state" / "record" / "objects")}
    reader = subprocess.Popen(["git", "cat-file", "blob", blob], cwd=ws, env=env, stdout=subprocess.PIPE)
    assert reader.stdout is not None
    digest = hashlib.sha1(b"blob %d\0" % size)
    while chunk := reader.stdout.read(1 << 20):
        digest.update(chunk)
    assert reader.wait() == 0 and digest.hexdigest() == blob


def _staged_huge_agent_blob(
    tmp_path: Path, *git_options: str
) -> tuple[GitWorld, KeptRecord, str | None, str, int]:
    """A recorded world whose agent `git add`-ed a file of STREAM_THRESHOLD + 1 zero bytes itself
    (with `git_options`), staged: (world, record, the record's kept commit, the blob id, its size)."""
    world, _ = recorded_world(tmp_path)
    ws = world.memory.workspace
    record = world.memory.record
    assert record is not None
    kept = record.kept()
    size = STREAM_THRESHOLD + 1
    subprocess.run(["truncate", "-s", str(size), str(ws / "zeros.bin")], check=True)
    git(ws, *git_options, "add", "zeros.bin")
    blob = git(ws, "hash-object", "zeros.bin").strip()
    assert not world.stage().refused
    return world, record, kept, blob, size


@pytest.mark.parametrize(
    "damage",
    [
        "other content of the same size",
        "checksum cut off",
        "bytes after the end",
        "a header saying it is small",  # read whole unless the read stops at the stated size
        "a header saying one byte less",
    ],
)
def test_a_huge_loose_blob_damaged_before_the_keep_is_refused_by_the_record(
    tmp_path: Path, damage: str
) -> None:
    # The streamed copy verifies the object against its id as the whole-object one does.
    world, record, kept, blob, size = _staged_huge_agent_blob(tmp_path)  # loose
    ws = world.memory.workspace
    path = ws / ".git" / "objects" / blob[:2] / blob[2:]
    path.chmod(0o644)
    if damage == "checksum cut off":  # every byte of the body still inflates
        path.write_bytes(path.read_bytes()[:-4])
    elif damage == "bytes after the end":
        path.write_bytes(path.read_bytes() + b"trailing")
    elif damage == "a header saying it is small":
        path.write_bytes(zlib.compress(b"blob 5\0" + b"\0" * size, 1))
    elif damage == "a header saying one byte less":
        path.write_bytes(zlib.compress(b"blob %d\0" % (size - 1) + b"\0" * size, 1))
    else:
        path.write_bytes(zlib.compress(b"blob %d\0" % size + b"\1" * size, 1))
    with pytest.raises(CrucibleError, match="the candidate was not kept"):
        world.snapshot("huge")
    assert record.kept() == kept
    assert not record.db.on_disk(bytes.fromhex(blob))
    assert not list((record.objects / blob[:2]).glob("tmp_obj_*"))  # nothing half-written left behind


def test_a_huge_packed_blob_damaged_before_the_keep_is_refused_by_the_record(tmp_path: Path) -> None:
    # the agent's blob, packed whole
    world, record, kept, blob, _ = _staged_huge_agent_blob(tmp_path, "-c", "core.bigFileThreshold=1m")
    ws = world.memory.workspace
    (pack,) = (ws / ".git" / "objects" / "pack").glob("*.pack")
    pack.chmod(0o644)
    with open(pack, "r+b") as f:  # same size, other bytes inside the object's compressed data
        f.seek(pack.stat().st_size // 2)
        damaged = bytes(byte ^ 0x55 for byte in f.read(4))
        f.seek(pack.stat().st_size // 2)
        f.write(damaged)
    with pytest.raises(CrucibleError, match="the candidate was not kept"):
        world.snapshot("huge")
    assert record.kept() == kept
    assert not record.db.on_disk(bytes.fromhex(blob))
    assert not list((record.objects / blob[:2]).glob("tmp_obj_*"))


def test_an_object_is_never_written_through_a_link_at_its_temporary_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The temporary name is random; one that is taken (here: a link planted at the very name
    the first draw gives) is skipped, never written through nor removed, and the object lands."""
    world, _ = recorded_world(tmp_path)
    ws = world.memory.workspace
    victim = tmp_path / "victim"
    victim.write_bytes(b"untouched")
    content = b"a new file\n"
    blob = hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()
    fanout = ws / ".git" / "objects" / blob[:2]
    fanout.mkdir(exist_ok=True)
    draws = itertools.chain([b"\1" * 8], (b"%08d" % n for n in itertools.count(2)))
    monkeypatch.setattr(os, "urandom", lambda n: next(draws)[:n])
    os.symlink(victim, fanout / ("tmp_obj_" + (b"\1" * 8).hex()))
    # Planted after the stage's check (which refuses a link anywhere in objects/): a write
    # racing the agent's own processes.
    assert world.memory.db.write(b"blob", content).hex() == blob
    assert victim.read_bytes() == b"untouched"
    assert (fanout / ("tmp_obj_" + (b"\1" * 8).hex())).is_symlink()
    assert git(ws, "cat-file", "-p", blob) == content.decode()


def _loose_files(objects: Path) -> list[Path]:
    return [path for path in objects.glob("??/*") if path.is_file()]


def test_each_keep_goes_into_the_record_as_one_small_pack_that_git_reads(tmp_path: Path) -> None:
    """A keep's commit, tree and blobs (teed at the stage) land in the record as one pack:
    two files, no loose object and no fan-out directory, and git reads every one of them."""
    world, _ = recorded_world(tmp_path)
    ws = world.memory.workspace
    record = world.memory.record
    assert record is not None
    loose_before = _loose_files(record.objects)
    kept = []
    for n in range(3):
        write(ws, f"src/file{n}.py", f"print({n})\n")
        assert not world.stage().refused  # the blob is teed here, held until the keep
        kept.append(world.snapshot(f"keep {n}"))
    assert _loose_files(record.objects) == loose_before
    ours = sorted((record.objects / "pack").glob("pack-crucible-*.idx"))
    assert len(ours) == 3
    reader = {**GIT_ENV, "GIT_OBJECT_DIRECTORY": str(record.objects)}
    for idx in ours:
        subprocess.run(["git", "verify-pack", str(idx)], cwd=ws, env=reader, check=True)
    listed = subprocess.run(
        ["git", "rev-list", "--objects", kept[-1]],
        cwd=ws,
        env=reader,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert all(commit in listed for commit in kept)
    for n in range(3):
        blob = git(ws, "rev-parse", f"{kept[-1]}:src/file{n}.py").strip()
        shown = subprocess.run(
            ["git", "cat-file", "-p", blob], cwd=ws, env=reader, capture_output=True, text=True
        )
        assert shown.stdout == f"print({n})\n"


def test_the_records_own_packs_are_merged_and_a_rebuild_still_has_every_kept_commit(tmp_path: Path) -> None:
    from crucible_world_git.loose_objects import SMALL_PACKS

    world, _ = recorded_world(tmp_path)
    ws = world.memory.workspace
    record = world.memory.record
    assert record is not None
    kept = []
    for n in range(SMALL_PACKS * 3):
        write(ws, "value.txt", f"{n}\n")
        kept.append(world.snapshot(f"keep {n}"))
        assert len(list((record.objects / "pack").glob("pack-crucible-*.idx"))) <= SMALL_PACKS
        assert not list((record.objects / "pack").glob("tmp_*"))
    fresh = type(record)(record.directory)  # read back by another process's record
    assert all(fresh.has_commit(commit) for commit in kept)
    fresh.close()
    shutil.rmtree(ws / ".git")
    world.restore(kept[-1])  # rebuilt from the record's packs
    assert git(ws, "rev-list", "HEAD").split()[: len(kept)] == kept[::-1]
    git(ws, "fsck", "--no-dangling")
    world.restore(kept[0])
    assert (ws / "value.txt").read_text() == "0\n"


def test_a_pack_added_after_a_listing_the_next_operation_skipped_is_still_found(tmp_path: Path) -> None:
    """refresh() lists pack/ again only when its signature moved: a pack someone adds moves it."""
    import time

    world, _ = recorded_world(tmp_path)
    ws = world.memory.workspace
    db = world.memory.db
    assert db.watch is not None
    time.sleep(db.watch.window_ns / 1e9 + 0.05)
    db.refresh()  # listed outside the racy window: the next refresh may skip the listing
    db.refresh()
    other = tmp_path / "other"
    git(tmp_path, "init", "-q", str(other))
    (other / "new.txt").write_text("only in a pack\n")
    blob = git(other, "hash-object", "-w", "new.txt").strip()
    subprocess.run(
        ["git", "pack-objects", "-q", str(ws / ".git" / "objects" / "pack" / "pack")],
        cwd=other,
        env=GIT_ENV,
        input=blob + "\n",
        text=True,
        check=True,
        capture_output=True,
    )
    assert not (ws / ".git" / "objects" / blob[:2] / blob[2:]).exists()
    time.sleep(db.watch.window_ns / 1e9 + 0.05)  # not racy: only the signature tells
    db.refresh()
    assert db.on_disk(bytes.fromhex(blob), refresh=False)


def _keeps_past_the_loose_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, check: bool = True
) -> tuple[GitWorld, list[str], list[str]]:
    """A recorded world with LOOSE_LIMIT at 3 and three keeps of one new file each, staged once
    more (the check that packs) unless not `check`: (world, the kept commits, the notes)."""
    from crucible_world_git import git_memory

    monkeypatch.setattr(git_memory, "LOOSE_LIMIT", 3)
    world, notes = recorded_world(tmp_path)
    ws = world.memory.workspace
    kept = []
    for n in range(3):
        write(ws, f"src/file{n}.py", f"print({n})\n")
        kept.append(world.snapshot(f"keep {n}"))
    if check:
        assert not world.stage().refused
    return world, kept, notes


def _pack_offsets(idx: Path) -> dict[str, int]:
    """Each object's offset in the pack, as `git show-index` reads the index."""
    shown = subprocess.run(
        ["git", "show-index"], input=idx.read_bytes(), capture_output=True, check=True
    ).stdout.decode()
    return {line.split()[1]: int(line.split()[0]) for line in shown.splitlines()}


def test_a_big_loose_object_is_offered_to_packing_once_while_it_stays_loose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An object too big to pack stays loose, and the checks after the one that found it
    remember it: it is not offered (its header read again) at every packing."""
    from crucible_world_git import loose_objects

    monkeypatch.setattr(loose_objects, "STREAM_THRESHOLD", 200)
    offered: list[list[bytes]] = []
    real_pack_loose = loose_objects.ObjectDatabase.pack_loose

    def spy(self: loose_objects.ObjectDatabase, shas: list[bytes], **kwargs: Any) -> list[bytes]:
        offered.append(list(shas))
        return real_pack_loose(self, shas, **kwargs)

    monkeypatch.setattr(loose_objects.ObjectDatabase, "pack_loose", spy)
    world, kept, _notes = _keeps_past_the_loose_limit(tmp_path, monkeypatch, check=False)
    ws = world.memory.workspace
    write(ws, "big.txt", "x" * 1000)
    kept.append(world.snapshot("big"))
    for n in range(4, 12):  # enough keeps for several packings after the big one's
        write(ws, f"src/file{n}.py", f"print({n})\n")
        kept.append(world.snapshot(f"keep {n}"))
    assert not world.stage().refused
    big = bytes.fromhex(git(ws, "rev-parse", f"{kept[-1]}:big.txt").strip())
    objects = ws / ".git" / "objects"
    assert (objects / big.hex()[:2] / big.hex()[2:]).is_file()  # still loose
    assert len(offered) >= 2, "the keeps did not pack more than once"
    assert sum(big in shas for shas in offered) == 1


def test_past_the_loose_limit_a_check_packs_the_loose_objects_and_drops_their_emptied_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk each check takes lstat-s every loose object and fan-out directory: past
    LOOSE_LIMIT, what the check found sound goes into one of the store's own small packs, and
    the fan-out directories it emptied go too (as `git prune-packed` does)."""
    world, kept, notes = _keeps_past_the_loose_limit(tmp_path, monkeypatch)
    ws = world.memory.workspace
    objects = ws / ".git" / "objects"
    assert _loose_files(objects) == []
    assert [d for d in objects.glob("??") if d.is_dir() and not any(d.iterdir())] == []
    ours = list((objects / "pack").glob("pack-crucible-*.idx"))
    assert ours
    for idx in ours:
        git(ws, "verify-pack", str(idx))
    git(ws, "fsck", "--strict", "--no-dangling")
    assert git(ws, "rev-list", "HEAD").split()[:3] == kept[::-1]
    for n in range(3):
        assert git(ws, "cat-file", "-p", f"{kept[-1]}:src/file{n}.py") == f"print({n})\n"
    # The engine goes on as before: the next keep is loose again, the store sound.
    write(ws, "src/file3.py", "print(3)\n")
    kept.append(world.snapshot("keep 3"))
    assert not world.stage().refused and notes == []
    world.restore(kept[0])
    assert not (ws / "src" / "file1.py").exists() and notes == []


def _blob_in_a_new_fan_out(objects: Path, taken: set[str]) -> bytes:
    """A blob's body whose id starts with two hex digits naming no directory in `objects`."""
    for n in itertools.count():
        body = b"fresh %d\n" % n
        prefix = hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest()[:2]
        if prefix not in taken and not (objects / prefix).exists():
            return body
    raise AssertionError("unreachable")


def test_packing_keeps_its_emptied_fan_out_directories_aside_and_a_new_loose_object_takes_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mkdir costs the kernel several times a rename: the fan-out directories packing empties
    wait beside objects/ (not walked by any check) and come back as the ones later loose objects
    need, instead of rmdir now and mkdir then. git sees an ordinary repository throughout."""
    from crucible_world_git import loose_objects

    made: list[bytes] = []
    real_mkdir = os.mkdir

    def counting_mkdir(path: Any, *args: Any, **kwargs: Any) -> None:
        made.append(os.fsencode(path))
        real_mkdir(path, *args, **kwargs)

    world, kept, notes = _keeps_past_the_loose_limit(tmp_path, monkeypatch)
    ws = world.memory.workspace
    objects = ws / ".git" / "objects"
    spare = ws / ".git" / os.fsdecode(loose_objects.SPARE_DIRS)
    waiting = sorted(spare.iterdir())
    assert waiting and all(path.is_dir() and not any(path.iterdir()) for path in waiting)
    assert [d for d in objects.glob("??") if d.is_dir()] == []
    monkeypatch.setattr(loose_objects.os, "mkdir", counting_mkdir)
    db = world.memory.db
    db.refresh()
    sha = db.write(b"blob", _blob_in_a_new_fan_out(objects, set()))
    assert (objects / sha.hex()[:2] / sha.hex()[2:]).is_file()
    assert not (objects / sha.hex()[:2]).is_symlink()
    assert made == []  # the fan-out came from the spares
    assert len(list(spare.iterdir())) == len(waiting) - 1
    assert git(ws, "cat-file", "-p", sha.hex()).startswith("fresh ")
    git(ws, "fsck", "--strict", "--no-dangling")
    write(ws, "src/file3.py", "print(3)\n")
    kept.append(world.snapshot("keep 3"))
    assert not world.stage().refused and notes == []


def test_a_link_or_file_planted_among_the_spare_fan_out_directories_is_never_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What waits beside objects/ is the agent's to change: a symlink to a directory elsewhere,
    or a file, named like a spare is passed over (nothing is written through the link), and a
    fan-out directory is made as before once the real spares are gone."""
    from crucible_world_git import loose_objects

    world, _, notes = _keeps_past_the_loose_limit(tmp_path, monkeypatch)
    ws = world.memory.workspace
    objects = ws / ".git" / "objects"
    spare = ws / ".git" / os.fsdecode(loose_objects.SPARE_DIRS)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for path in list(spare.iterdir()):
        path.rmdir()
    (spare / "fanout-link").symlink_to(elsewhere)
    (spare / "fanout-file").write_text("not a directory")
    db = world.memory.db
    db._spare_dirs = None  # listed again, as a resumed engine would
    db.refresh()
    taken: set[str] = set()
    for _ in range(3):
        sha = db.write(b"blob", _blob_in_a_new_fan_out(objects, taken))
        taken.add(sha.hex()[:2])
        directory = objects / sha.hex()[:2]
        assert directory.is_dir() and not directory.is_symlink()
        assert (directory / sha.hex()[2:]).is_file()
    assert list(elsewhere.iterdir()) == []
    assert (spare / "fanout-link").is_symlink() and (spare / "fanout-file").is_file()
    assert not world.stage().refused and notes == []


def test_a_spare_fan_out_directory_the_agent_put_objects_into_is_never_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files the agent put into a spare directory would land in objects/ by the engine's own
    rename, after the object check looked and as if the engine wrote them: a planted object the
    engine then takes as present (its name says so) while its bytes are another's. A spare that
    is not empty stays where it is; the fan-out directory is made instead."""
    from crucible_world_git import loose_objects

    world, _, notes = _keeps_past_the_loose_limit(tmp_path, monkeypatch)
    ws = world.memory.workspace
    objects = ws / ".git" / "objects"
    spare = ws / ".git" / os.fsdecode(loose_objects.SPARE_DIRS)
    for path in list(spare.iterdir()):
        path.rmdir()
    db = world.memory.db
    body = _blob_in_a_new_fan_out(objects, set())
    wanted = hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest()
    planted = spare / "fanout-planted"
    planted.mkdir()
    # Another object of the same fan-out, under its own name, holding bytes that are not it.
    other = wanted[2:-1] + ("0" if wanted[-1] != "0" else "1")
    (planted / other).write_bytes(zlib.compress(b"blob 5\0lies\n"))
    # And an empty one we may not write into.
    (spare / "fanout-read-only").mkdir(mode=0o555)
    db._spare_dirs = None  # listed again, as a resumed engine would
    db.refresh()
    sha = db.write(b"blob", body)
    assert sha.hex() == wanted
    directory = objects / wanted[:2]
    assert sorted(path.name for path in directory.iterdir()) == [wanted[2:]]
    assert (planted / other).is_file() and (spare / "fanout-read-only").is_dir()
    assert directory.stat().st_mode & 0o700 == 0o700
    assert not db.has(bytes.fromhex(wanted[:2] + other))
    assert not world.stage().refused and notes == []


def test_spare_fan_out_directories_are_not_kept_through_a_link_in_place_of_their_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spares' directory replaced by a symlink: packing moves nothing through it (the
    emptied fan-out directories are removed, as git does) and the store stays sound."""
    from crucible_world_git import loose_objects

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    world, _ = recorded_world(tmp_path)
    ws = world.memory.workspace
    (ws / ".git" / os.fsdecode(loose_objects.SPARE_DIRS)).symlink_to(elsewhere)
    db = world.memory.db
    objects = ws / ".git" / "objects"
    before = {d.name for d in objects.glob("??")}
    shas = [db.write(b"blob", b"blob %d\n" % n) for n in range(5)]
    assert db.pack_loose(shas) == []
    assert list(elsewhere.iterdir()) == []
    assert {d.name for d in objects.glob("??")} == before
    assert git(ws, "cat-file", "-p", shas[0].hex()) == "blob 0\n"


def test_a_kept_blob_damaged_inside_the_workspaces_own_pack_is_found_and_healed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the hostile tests do to a loose object, done to the pack the check moved it into:
    the pack no longer matches its checksum, and the repository is rebuilt from the record."""
    world, kept, notes = _keeps_past_the_loose_limit(tmp_path, monkeypatch)
    ws = world.memory.workspace
    blob = git(ws, "rev-parse", f"{kept[-1]}:src/file2.py").strip()
    ((pack, offset),) = [
        (idx.with_suffix(".pack"), offsets[blob])
        for idx in (ws / ".git" / "objects" / "pack").glob("pack-crucible-*.idx")
        if blob in (offsets := _pack_offsets(idx))
    ]
    pack.chmod(0o644)
    with open(pack, "r+b") as f:  # the blob's compressed bytes, past its entry header
        f.seek(offset + 4)
        damaged = bytes(byte ^ 0x55 for byte in f.read(2))
        f.seek(offset + 4)
        f.write(damaged)
    staged = world.stage()
    assert "damaged the workspace repository" in staged.refused
    assert notes and "fails its checksum" in notes[0]
    assert git(ws, "cat-file", "-p", blob) == "print(2)\n"  # rebuilt from the record
    git(ws, "fsck", "--no-dangling")


def test_a_loose_object_rewritten_after_its_check_stays_loose_for_the_next_check(tmp_path: Path) -> None:
    """pack_loose hashes each object again: a file that no longer holds what its name says
    (the agent rewrote it after the check) is neither packed nor removed, so the next check
    still finds it."""
    world, _ = recorded_world(tmp_path)
    ws = world.memory.workspace
    db = world.memory.db
    good = db.write(b"blob", b"good\n")
    bad = db.write(b"blob", b"bad\n")
    path = ws / ".git" / "objects" / bad.hex()[:2] / bad.hex()[2:]
    path.chmod(0o644)
    path.write_bytes(zlib.compress(b"blob 6\0other\n"))
    assert db.pack_loose([good, bad]) == []
    assert not (ws / ".git" / "objects" / good.hex()[:2] / good.hex()[2:]).exists()
    assert path.exists()
    assert git(ws, "cat-file", "-p", good.hex()) == "good\n"
    assert "is not the object it names" in world.stage().refused


def test_a_fan_out_directory_swapped_for_a_link_while_packing_is_not_deleted_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pack_loose removes each packed object's file: an agent that swaps the fan-out directory
    for a symlink after the read (while the pack is written) must not make the engine remove a
    file of that name elsewhere (another repository's copy of the object)."""
    from crucible_world_git import small_pack

    world, _ = recorded_world(tmp_path)
    ws = world.memory.workspace
    db = world.memory.db
    sha = db.write(b"blob", b"elsewhere too\n")
    directory = ws / ".git" / "objects" / sha.hex()[:2]
    outside = tmp_path / "other-repo-objects" / sha.hex()[:2]
    outside.mkdir(parents=True)
    (outside / sha.hex()[2:]).write_bytes(b"another repository's object")
    real_write_pack = small_pack.write_pack

    def write_pack_then_swap(*args: object, **kwargs: object) -> bytes:
        base = real_write_pack(*args, **kwargs)  # type: ignore[arg-type]
        directory.rename(tmp_path / "moved-away")
        directory.symlink_to(outside)
        return base

    monkeypatch.setattr(small_pack, "write_pack", write_pack_then_swap)
    assert db.pack_loose([sha]) == []
    assert (outside / sha.hex()[2:]).read_bytes() == b"another repository's object"


def test_a_pack_directory_swapped_for_a_link_while_merging_is_not_deleted_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workspace's small packs are merged now and then, and the merged ones removed: an
    agent that swaps pack/ for a symlink once the merge is written must not make the engine
    remove the packs of those names elsewhere (the kept record's are named the same way)."""
    from crucible_world_git import loose_objects, small_pack

    monkeypatch.setattr(loose_objects, "SMALL_PACKS", 2)
    world, _ = recorded_world(tmp_path)
    db = world.memory.db
    pack_dir = world.memory.workspace / ".git" / "objects" / "pack"
    outside = tmp_path / "record-packs"
    outside.mkdir()
    real_merge_packs = small_pack.merge_packs
    merged: list[bytes] = []

    def merge_then_swap(directory: bytes, bases: list[bytes], **kwargs: bool) -> bytes:
        merged.extend(bases)
        base = real_merge_packs(directory, bases, **kwargs)
        for taken in bases:
            for suffix in (".idx", ".pack"):
                (outside / (os.path.basename(os.fsdecode(taken)) + suffix)).write_bytes(b"kept history")
        pack_dir.rename(tmp_path / "moved-away")
        pack_dir.symlink_to(outside)
        return base

    monkeypatch.setattr(small_pack, "merge_packs", merge_then_swap)
    for n in range(3):
        db.pack_loose([db.write(b"blob", b"blob %d\n" % n)])
    assert merged
    assert sorted(path.read_bytes() for path in outside.iterdir()) == [b"kept history"] * 2 * len(merged)


def test_an_object_planted_while_a_check_packs_is_still_checked_by_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Packing the loose objects takes a while after the check's listing: a file the agent
    writes meanwhile (older than the racy window once the packing is done) is not the engine's
    and must be read by the next check, not taken as known."""
    from crucible_world_git import small_pack

    world, _, _ = _keeps_past_the_loose_limit(tmp_path, monkeypatch, check=False)
    objects = world.memory.workspace / ".git" / "objects"
    planted = objects / "ab" / ("cd" * 19)
    real_write_pack = small_pack.write_pack

    def write_pack_while_the_agent_writes(*args: object, **kwargs: object) -> bytes:
        planted.parent.mkdir(exist_ok=True)
        planted.write_bytes(zlib.compress(b"blob 4\0lie\n"))
        watch = world.memory._watch
        assert watch is not None
        time.sleep(watch.window_ns / 1e9 + 0.05)  # not racy by the time the packing ends
        return real_write_pack(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(small_pack, "write_pack", write_pack_while_the_agent_writes)
    assert not world.stage().refused  # the check that packs
    monkeypatch.setattr(small_pack, "write_pack", real_write_pack)
    assert "is not the object it names" in world.stage().refused


def test_loose_objects_on_disk_for_a_while_are_packed_durably(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loose object written long enough ago may be on disk for good: the pack that replaces
    it is fsynced before it goes. A young store's (a quick run's) pack is not."""
    from crucible_world_git import git_memory

    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    young, _, _ = _keeps_past_the_loose_limit(tmp_path / "young", monkeypatch, check=False)
    synced.clear()
    assert not young.stage().refused
    assert synced == []
    monkeypatch.setattr(git_memory, "SETTLED_NS", 0)
    settled, _, _ = _keeps_past_the_loose_limit(tmp_path / "settled", monkeypatch, check=False)
    synced.clear()
    assert not settled.stage().refused
    assert len(synced) >= 3  # the pack, its index and pack/


def test_a_keeps_objects_are_read_back_from_memory_not_through_the_records_new_pack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next stage rebuilds the ignore rules from the kept tree, read from the record: the
    keep's own objects come from what the record has just written (opening its newest pack
    through dulwich cost more than the rest of the read), and are the objects their ids name."""
    from dulwich.object_store import DiskObjectStore

    world, notes = recorded_world(tmp_path)
    ws = world.memory.workspace
    write(ws, "src/new.py", "print('new')\n")
    write(ws, ".gitignore", "*.log\nbuild/\n/cache/\n*.bak\n")
    kept = world.snapshot("keep")

    def no_pack_reads(self: DiskObjectStore, name: bytes) -> tuple[int, bytes]:
        raise AssertionError(f"read {name!r} through dulwich")

    monkeypatch.setattr(DiskObjectStore, "get_raw", no_pack_reads)
    write(ws, "junk.bak", "ignored by the kept .gitignore\n")
    write(ws, "src/other.py", "print('other')\n")
    staged = world.stage()
    assert not staged.refused and notes == []
    memory = world.memory
    record = memory.record
    assert record is not None
    tree_id = bytes.fromhex(git(ws, "rev-parse", f"{kept}^{{tree}}").strip())
    kind, body = record.db.read(tree_id)
    assert kind == b"tree" and hashlib.sha1(b"tree %d\0" % len(body) + body).digest() == tree_id
    assert memory.changed_paths() == ["src/other.py"]
