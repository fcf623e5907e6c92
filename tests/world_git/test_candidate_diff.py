"""GitWorld.describe_change: the candidate against a kept state, as `git diff` says it, bounded."""

from __future__ import annotations

from pathlib import Path

from crucible_world_git.candidate_diff import FILE_DIFF_CAP
from crucible_world_git.gitworld import GitWorld
from tests.world_git.support import git, symlink, write


def _world(tmp_path: Path) -> tuple[GitWorld, Path, str]:
    ws = tmp_path / "ws"
    write(ws, "keep.txt", "one\ntwo\nthree\n")
    write(ws, "gone.txt", "bye\n")
    write(ws, "becomes/file", "x\n")
    write(ws, "flat", "a file that becomes a directory\n")
    world = GitWorld.at(ws)
    return world, ws, world.prepare()


def test_the_change_is_what_git_diff_says_of_the_same_two_states(tmp_path: Path) -> None:
    world, ws, base = _world(tmp_path)
    write(ws, "keep.txt", "one\n2\nthree\nfour\n")
    (ws / "gone.txt").unlink()
    (ws / "flat").unlink()
    write(ws, "flat/inner.txt", "now a directory\n")
    write(ws, "deep/new/file.py", "print('hi')\n")
    diff, diffstat = world.describe_change(base)
    head = world.snapshot("after")
    assert diff == git(ws, "diff", "--no-renames", "--no-color", base, head)
    assert diffstat == "5 files changed, 4 insertions(+), 3 deletions(-)"
    # ... and git's own summary line says the same
    assert git(ws, "diff", "--no-renames", "--shortstat", base, head).strip() == diffstat


def test_an_unchanged_candidate_has_no_change(tmp_path: Path) -> None:
    world, _, base = _world(tmp_path)
    assert world.describe_change(base) == ("", "")


def test_a_link_is_shown_as_the_path_it_names_and_a_huge_file_by_its_size(tmp_path: Path) -> None:
    world, ws, base = _world(tmp_path)
    secret = tmp_path / "outside.txt"
    secret.write_text("behind the link\n")
    symlink(ws, "escape", str(secret))
    write(ws, "huge.txt", "z" * (FILE_DIFF_CAP + 1))
    diff, diffstat = world.describe_change(base)
    assert "new file mode 120000" in diff and f"+{secret}\n" in diff
    assert "behind the link" not in diff
    assert f"Large file a/huge.txt (0 bytes) and b/huge.txt ({FILE_DIFF_CAP + 1} bytes): not diffed" in diff
    assert diffstat == "2 files changed, 1 insertion(+)"


def test_a_staged_token_is_described_as_the_workspace_it_named(tmp_path: Path) -> None:
    world, ws, base = _world(tmp_path)
    write(ws, "keep.txt", "one\n2\nthree\n")
    write(ws, "added.txt", "new\n")
    staged = world.stage()
    assert staged.token and not staged.refused
    assert world.describe_staged(base, staged.token) == world.describe_change(base)
    # it reads the token, not the workspace: a later edit is not in it
    write(ws, "later.txt", "after the stage\n")
    diff, diffstat = world.describe_staged(base, staged.token)
    assert "later.txt" not in diff and diffstat == "2 files changed, 2 insertions(+), 1 deletion(-)"
