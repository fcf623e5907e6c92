"""GitWorld against the git CLI: the same edits on twin clones must give the same trees, index and files."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from crucible_world_git.sealed_git import ATTRIBUTES
from tests.world_git.support import GIT_ENV, Twin, git, symlink, write

FIXED_DATE = {"GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z"}


def edit_contents(root: Path) -> None:
    write(root, "README.md", "hello again\n")
    write(root, "src/lib/util.py", "X = 2  # longer now\n")
    write(root, "src/new/module.py", "new = True\n")
    write(root, "new-top.txt", "top\n")
    (root / "docs/guide.md").unlink()  # its directory goes with it
    (root / "src/lib/deep/leaf.txt").rename(root / "src/leaf-moved.txt")


def edit_modes_and_links(root: Path) -> None:
    (root / "tools/run.sh").chmod(0o644)
    (root / "src/app.py").chmod(0o755)
    symlink(root, "link-to-readme", "src/app.py")
    (root / "README.md").unlink()
    symlink(root, "README.md", "docs/guide.md")
    (root / "link-to-src").unlink()
    write(root, "link-to-src", "a file where a link was\n")
    symlink(root, "tools-link", "tools")
    symlink(root, "dangling", "does/not/exist")


def edit_type_swaps(root: Path) -> None:
    (root / "docs/guide.md").unlink()
    (root / "docs").rmdir()
    write(root, "docs", "a file where a directory was\n")
    (root / "a/keep.txt").unlink()
    write(root, "a/keep.txt/inner.txt", "a directory where a file was\n")


def edit_ignored_and_spared(root: Path) -> None:
    write(root, "debug.log", "ignored\n")
    write(root, "src/lib/trace.log", "ignored deeper\n")
    write(root, "build/out.bin", "ignored directory\n")
    write(root, "src/x.tmp", "ignored by src/.gitignore\n")
    write(root, "cache/c.txt", "ignored: /cache/ is anchored\n")
    write(root, "src/cache/c.txt", "not ignored: the anchor is the top\n")
    write(root, "forced.log", "tracked although ignored: its change is staged\n")
    write(root, ".claude/settings.json", "{}\n")
    write(root, "RESULTS.md", "# results\n")
    write(root, "a/b/codegen-out/gen.txt", "carried\n")
    write(root, "a/b/sibling.txt", "an untracked sibling of a carried path\n")
    write(root, "gen/deep/artifact.txt", "carried\n")


def edit_untracked_nests(root: Path) -> None:
    write(root, "scratch/one/two/three.txt", "nested\n")
    write(root, "scratch/one/keep.log", "ignored inside an untracked directory\n")
    (root / "emptydir/sub").mkdir(parents=True)
    write(root, "src/lib/deep/more/x.txt", "below a tracked directory\n")


def edit_gitignore(root: Path) -> None:
    write(root, ".gitignore", "*.log\nbuild/\n/cache/\n*.md\n!README.md\n")
    write(root, "notes.md", "ignored under the new rules only\n")
    write(root, "src/.gitignore", "")
    write(root, "src/x.tmp", "no longer ignored\n")


def edit_nested_repository(root: Path) -> None:
    nested = root / "vendor/dep"
    nested.mkdir(parents=True)
    git(nested, "init", "-q", "-b", "main")
    write(nested, "dep.txt", "dependency\n")
    env = {**GIT_ENV, **FIXED_DATE}
    subprocess.run(["git", "add", "-A"], cwd=nested, env=env, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "dep"], cwd=nested, env=env, check=True)
    write(root, "not-a-repo/.git/placeholder", "an invalid .git directory is just files\n")


def edit_tricky_ignores(root: Path) -> None:
    write(root, ".gitignore", "*.log\nbuild/\n/cache/\nout/*\n!out/keep.txt\n**/tmp/\n/only-top.txt\n")
    write(root, "src/lib/.gitignore", "*.o\n!important.o\n")
    for rel in (
        "out/drop.txt",
        "out/keep.txt",
        "src/tmp/x.txt",
        "src/lib/tmp/y.txt",
        "only-top.txt",
        "src/only-top.txt",
        "src/lib/a.o",
        "src/lib/important.o",
        "src/lib/deep/b.o",
        "build/nested/keep.txt",
    ):
        write(root, rel, f"{rel}\n")


EDITS: list[Callable[[Path], None]] = [
    edit_tricky_ignores,
    edit_contents,
    edit_modes_and_links,
    edit_type_swaps,
    edit_ignored_and_spared,
    edit_untracked_nests,
    edit_gitignore,
    edit_nested_repository,
]


def make_noise(root: Path) -> None:
    """What a discarded turn leaves behind."""
    if (root / "src/app.py").exists():
        write(root, "src/app.py", "print('discarded')\n")
    if (root / "tools/run.sh").is_file():
        (root / "tools/run.sh").unlink()
    if (root / "src/new").is_dir():
        write(root, "src/new/untracked.txt", "keeps a directory the target no longer has\n")
    write(root, "noise/untracked/deep.txt", "noise\n")
    write(root, "noise.txt", "noise\n")
    write(root, "noise.log", "ignored noise stays\n")
    write(root, "RESULTS.md", "# results after the discard\n")
    write(root, "a/b/codegen-out/second.txt", "carried again\n")


@pytest.mark.parametrize("edit", EDITS, ids=[e.__name__ for e in EDITS])
def test_snapshot_and_restore_match_git(tmp_path: Path, edit: Callable[[Path], None]) -> None:
    twin = Twin.create(tmp_path)
    base = twin.snapshot("base")
    twin.assert_same()

    twin.edit(edit)
    after = twin.snapshot("after")
    twin.assert_same()
    assert after[1] != base[1]

    twin.edit(make_noise)
    twin.restore(*base)  # back across the edit: the differing paths plus the clean
    twin.assert_same()

    twin.restore(*after)  # and forward again
    twin.assert_same()

    twin.edit(make_noise)
    twin.restore(*after)  # only the agent's leftovers differ
    twin.assert_same()


def test_spared_paths_stay_out_of_commits_and_survive_restores(tmp_path: Path) -> None:
    twin = Twin.create(tmp_path)
    base = twin.snapshot("base")
    twin.edit(edit_ignored_and_spared)
    after = twin.snapshot("after")
    committed = git(twin.ours, "ls-tree", "-r", "--name-only", after[1]).splitlines()
    assert "a/b/sibling.txt" in committed
    assert not [
        p for p in committed if p.startswith((".claude/", "gen/", "a/b/codegen-out/")) or p == "RESULTS.md"
    ]

    twin.restore(*base)
    twin.assert_same()
    ours = twin.ours
    assert (ours / "a/b/codegen-out/gen.txt").read_text() == "carried\n"
    assert (ours / "gen/deep/artifact.txt").exists()
    assert (ours / ".claude/settings.json").exists() and (ours / "RESULTS.md").exists()
    assert not (ours / "a/b/sibling.txt").exists()  # the clean descended into a/b and took the sibling


def test_nothing_to_commit_returns_head_without_a_commit(tmp_path: Path) -> None:
    twin = Twin.create(tmp_path)
    head = git(twin.ours, "rev-parse", "HEAD").strip()
    assert twin.world.snapshot("nothing") == head
    (twin.ours / "README.md").touch()  # new stat data, same content
    write(twin.ours, "ignored.log", "ignored\n")
    write(twin.ours, "RESULTS.md", "spared\n")
    assert twin.world.snapshot("still nothing") == head
    assert git(twin.ours, "rev-list", "--count", "HEAD").strip() == "1"
    assert git(twin.ours, "diff-files", "--name-only") == ""  # the touched file's stat was refreshed


def test_commits_carry_the_crucible_identity_and_label(tmp_path: Path) -> None:
    twin = Twin.create(tmp_path)
    write(twin.ours, "README.md", "changed\n")
    sha = twin.world.snapshot("crucible: iteration 3 (kept)")
    shown = git(twin.ours, "show", "-s", "--format=%an <%ae>|%cn <%ce>|%B|%P", sha)
    author, committer, message, parent = shown.split("|")
    assert author == committer == "crucible <crucible@localhost>"
    assert message.strip() == "crucible: iteration 3 (kept)"
    assert parent.strip() == git(twin.ours, "rev-parse", "HEAD~1").strip()
    assert git(twin.ours, "rev-parse", "HEAD").strip() == sha
    assert git(twin.ours, "symbolic-ref", "HEAD").strip() == "refs/heads/main"  # the branch moved
    assert "commit: crucible: iteration 3" in git(twin.ours, "reflog", "-1", "main")
    git(twin.ours, "fsck", "--strict")


def test_same_size_edits_right_after_a_snapshot_are_seen(tmp_path: Path) -> None:
    # A file changed within the clock tick the index was written keeps its size and mtime
    # granularity; only the racy-git rule (re-read anything not older than the index) sees it.
    twin = Twin.create(tmp_path)
    for n in range(5):
        twin.edit(lambda root, n=n: write(root, "README.md", f"version {n}\n"))
        _, ours = twin.snapshot(f"v{n}")
        twin.assert_same()
        assert git(twin.ours, "show", f"{ours}:README.md") == f"version {n}\n"


def test_a_world_picks_up_index_changes_made_by_git_itself(tmp_path: Path) -> None:
    twin = Twin.create(tmp_path)
    base = twin.snapshot("base")

    def agent_uses_git(root: Path) -> None:
        write(root, "README.md", "staged by the agent\n")
        git(root, "add", "README.md")
        git(root, "rm", "-q", "--cached", "docs/guide.md")
        write(root, "src/app.py", "committed by the agent\n")
        git(root, "commit", "-q", "-am", "agent commit")

    twin.edit(agent_uses_git)
    twin.snapshot("after the agent")
    twin.assert_same()
    twin.edit(agent_uses_git)
    twin.restore(*base)
    twin.assert_same()


def test_a_fresh_world_on_a_git_written_index(tmp_path: Path) -> None:
    from crucible_world_git.gitworld import GitWorld

    twin = Twin.create(tmp_path)
    twin.edit(edit_contents)
    git(twin.ours, "status", "--porcelain")  # git refreshes and rewrites the index
    twin.world = GitWorld.at(twin.ours, twin.world.memory.spared)
    kept = twin.snapshot("cold")
    twin.assert_same()
    twin.edit(make_noise)
    git(twin.ours, "status", "--porcelain")
    twin.world = GitWorld.at(twin.ours, twin.world.memory.spared)
    twin.restore(*kept)
    twin.assert_same()


def test_index_version_4_is_read(tmp_path: Path) -> None:
    from crucible_world_git.gitworld import GitWorld

    twin = Twin.create(tmp_path)
    for root in (twin.oracle, twin.ours):
        git(root, "update-index", "--index-version", "4")
    twin.world = GitWorld.at(twin.ours, twin.world.memory.spared)
    twin.edit(edit_contents)
    twin.snapshot("from a v4 index")
    twin.assert_same()


def test_a_conflicted_index_is_resolved_like_add_all(tmp_path: Path) -> None:
    from crucible_world_git.gitworld import GitWorld

    twin = Twin.create(tmp_path)

    def conflict(root: Path) -> None:
        git(root, "checkout", "-q", "-b", "other")
        write(root, "README.md", "other side\n")
        git(root, "commit", "-q", "-am", "other")
        git(root, "checkout", "-q", "main")
        write(root, "README.md", "main side\n")
        git(root, "commit", "-q", "-am", "main")
        git(root, "merge", "-q", "other", check=False)

    twin.edit(conflict)
    assert "UU README.md" in git(twin.ours, "status", "--porcelain")
    twin.world = GitWorld.at(twin.ours, twin.world.memory.spared)
    twin.snapshot("resolved")
    twin.assert_same()


def test_big_files_are_streamed_to_the_same_blob(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from crucible_world_git import loose_objects

    monkeypatch.setattr(loose_objects, "STREAM_THRESHOLD", 100)
    monkeypatch.setattr(loose_objects, "_CHUNK", 64)
    twin = Twin.create(tmp_path)
    twin.edit(lambda root: write(root, "big.txt", "".join(f"line {n}\n" for n in range(2000))))
    twin.snapshot("big")
    twin.assert_same()
    assert git(twin.ours, "cat-file", "-p", "HEAD:big.txt").count("\n") == 2000


def test_restore_refuses_what_is_not_a_commit(tmp_path: Path) -> None:
    from crucible_core.errors import RunFailed

    twin = Twin.create(tmp_path)
    tree = git(twin.ours, "rev-parse", "HEAD^{tree}").strip()
    with pytest.raises(RunFailed, match="not a commit"):
        twin.world.restore(tree)
    with pytest.raises(RunFailed, match="does not name a commit"):
        twin.world.restore("no-such-branch")
    with pytest.raises(RunFailed, match="does not name a commit"):
        twin.world.restore("0123456789" * 4)
    assert git(twin.ours, "status", "--porcelain") == ""


def test_restore_by_branch_name_and_changed_paths(tmp_path: Path) -> None:
    twin = Twin.create(tmp_path)
    world = twin.world
    assert world.changed_paths() == []
    twin.edit(edit_contents)
    twin.edit(lambda root: write(root, "skip.log", "ignored\n"))
    twin.edit(lambda root: write(root, "RESULTS.md", "spared\n"))
    assert world.changed_paths() == [
        "README.md",
        "docs/guide.md",
        "new-top.txt",
        "src/leaf-moved.txt",
        "src/lib/deep/leaf.txt",
        "src/lib/util.py",
        "src/new/module.py",
    ]
    world.restore("main")
    assert world.changed_paths() == []
    assert (twin.ours / "docs/guide.md").read_text() == "guide\n"


def test_executable_bits_follow_the_umask_on_checkout(tmp_path: Path) -> None:
    twin = Twin.create(tmp_path)
    base = twin.snapshot("base")
    twin.edit(lambda root: (root / "tools/run.sh").unlink())
    twin.restore(*base)
    mode = os.lstat(twin.ours / "tools/run.sh").st_mode
    assert mode & 0o100 and mode & 0o777 == os.lstat(twin.oracle / "tools/run.sh").st_mode & 0o777


def test_gitattributes_never_convert_what_is_kept(tmp_path: Path) -> None:
    """A file is kept byte for byte as the measure read it, and a checkout writes those bytes
    back, whatever .gitattributes asks for; the oracle is git with every conversion turned off."""
    base = tmp_path / "base"
    base.mkdir()
    git(base, "init", "-q", "-b", "main")
    write(base, ".gitattributes", "* text=auto\n*.bat text eol=crlf\n*.bin -text\n")
    write(base, "plain.txt", "lf\n")
    write(base, "run.bat", "echo one\n")
    git(base, "add", "-A")
    git(base, "commit", "-q", "-m", "attributes")
    twin = Twin.create(tmp_path, base)
    for side in (twin.oracle, twin.ours):  # git's side converts nothing either
        (side / ".git" / "info" / "attributes").write_text(ATTRIBUTES)
        # The clone checked run.bat out with CRLF. Whether `git add` re-reads it then depends on
        # whether its stat data is racily clean (written in the index's own second), which is
        # timing, not behaviour: a changed mtime makes both sides read every file's bytes.
        for name in (".gitattributes", "plain.txt", "run.bat"):
            stamp = (side / name).stat().st_mtime_ns - 10_000_000_000
            os.utime(side / name, ns=(stamp, stamp))
    start = twin.snapshot("start")

    def crlf(root: Path) -> None:
        (root / "dos.txt").write_bytes(b"one\r\ntwo\r\n")  # text=auto would store it with LF
        (root / "data.bin").write_bytes(b"raw\r\nbytes\r\n")
        (root / "new.bat").write_bytes(b"echo two\n")  # eol=crlf would check it out with CRLF

    twin.edit(crlf)
    after = twin.snapshot("crlf")
    twin.assert_same()
    blob = subprocess.run(
        ["git", "cat-file", "blob", f"{after[1]}:dos.txt"], cwd=twin.ours, env=GIT_ENV, capture_output=True
    )
    assert blob.stdout == b"one\r\ntwo\r\n"

    twin.restore(*start)
    twin.restore(*after)
    twin.assert_same()
    assert (twin.ours / "new.bat").read_bytes() == b"echo two\n"
    assert (twin.ours / "dos.txt").read_bytes() == b"one\r\ntwo\r\n"


def test_a_directory_replaced_by_a_symlink_never_leads_outside(tmp_path: Path) -> None:
    twin = Twin.create(tmp_path)
    base = twin.snapshot("base")

    def outside(root: Path) -> Path:
        # Outside the working tree, at the same relative spot on both sides.
        return root / ".git" / "outside"

    def link_out(root: Path) -> None:
        target = outside(root)
        write(target, "util.py", "outside: must survive\n")
        write(target, "deep/leaf.txt", "outside: must survive\n")
        for path in sorted((root / "src/lib").rglob("*"), reverse=True):
            path.unlink() if not path.is_dir() else path.rmdir()
        (root / "src/lib").rmdir()
        symlink(root, "src/lib", "../.git/outside")

    def untouched(root: Path) -> bool:
        target = outside(root)
        return (
            (target / "util.py").read_text()
            == (target / "deep/leaf.txt").read_text()
            == ("outside: must survive\n")
        )

    twin.edit(link_out)
    twin.restore(*base)  # straight back: the link goes, the directory returns
    twin.assert_same()
    assert untouched(twin.ours) and (twin.ours / "src/lib/util.py").read_text() == "X = 1\n"

    twin.edit(link_out)
    linked = twin.snapshot("linked")  # the link is committed, the files below it are deleted
    twin.assert_same()
    assert git(twin.ours, "ls-tree", linked[1], "src/lib").startswith("120000")
    twin.restore(*base)
    twin.assert_same()
    assert untouched(twin.ours)
