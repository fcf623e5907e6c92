"""A file rewritten in place through its own descriptor (RESULTS.md, the prompt copy), never through what the agent plants.

Real files in a temp directory; each case is what an agent that can write the workspace could do
between two rows.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crucible_core.workspace_files import OwnedFile


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside.txt"
    path.write_text("the user's file\n")
    return path


def _page(tmp_path: Path) -> tuple[OwnedFile, Path]:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    page = workspace / "RESULTS.md"
    return OwnedFile(page), page


def test_the_file_it_created_is_rewritten_in_place_and_cut_to_the_new_length(tmp_path: Path) -> None:
    file, page = _page(tmp_path)
    file.write(b"first version, the longer one\n")
    inode = page.stat().st_ino
    file.write(b"second\n")
    assert page.read_bytes() == b"second\n"
    assert page.stat().st_ino == inode  # no new file, no rename: the cheap path
    assert oct(page.stat().st_mode & 0o777) == oct(0o644)
    file.close()


def test_the_file_is_cut_only_when_what_it_held_was_longer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file, page = _page(tmp_path)
    cuts: list[int] = []
    real = os.ftruncate

    def counted(fd: int, length: int) -> None:
        cuts.append(length)
        real(fd, length)

    monkeypatch.setattr(os, "ftruncate", counted)
    file.write(b"short\n")
    file.write(b"a longer text\n")  # grows over the old text: nothing is left to cut
    file.write(b"longer again\n" * 2)
    assert cuts == [] and page.read_bytes() == b"longer again\n" * 2
    file.write(b"cut\n")
    assert cuts == [4] and page.read_bytes() == b"cut\n"
    file.empty()
    file.empty()  # already empty: nothing to cut
    assert cuts == [4, 0] and page.read_bytes() == b""
    file.write(b"after emptying\n")
    assert cuts == [4, 0] and page.read_bytes() == b"after emptying\n"
    file.close()


def test_a_removed_page_is_created_again(tmp_path: Path) -> None:
    file, page = _page(tmp_path)
    file.write(b"one\n")
    page.unlink()
    file.write(b"two\n")
    assert page.read_bytes() == b"two\n"
    file.close()


def test_a_link_planted_at_the_name_is_replaced_not_written_through(tmp_path: Path, outside: Path) -> None:
    file, page = _page(tmp_path)
    file.write(b"one\n")
    page.unlink()
    page.symlink_to(outside)
    file.write(b"two\n")
    assert outside.read_text() == "the user's file\n"
    assert not page.is_symlink() and page.read_bytes() == b"two\n"
    file.close()


def test_a_hard_link_to_another_file_at_the_name_is_replaced_not_written_through(
    tmp_path: Path, outside: Path
) -> None:
    file, page = _page(tmp_path)
    file.write(b"one\n")
    page.unlink()
    os.link(outside, page)
    file.write(b"two\n")
    assert outside.read_text() == "the user's file\n"
    assert page.read_bytes() == b"two\n" and page.stat().st_ino != outside.stat().st_ino
    file.close()


def test_our_file_linked_to_a_second_name_is_left_to_that_name(tmp_path: Path) -> None:
    file, page = _page(tmp_path)
    file.write(b"one\n")
    other = tmp_path / "workspace" / "copy.md"
    os.link(page, other)  # the file now has two names: a rewrite in place would change both
    file.write(b"two\n")
    assert other.read_bytes() == b"one\n" and page.read_bytes() == b"two\n"
    file.close()


def test_a_fifo_at_the_name_is_replaced_without_opening_it(tmp_path: Path) -> None:
    file, page = _page(tmp_path)
    file.write(b"one\n")
    page.unlink()
    os.mkfifo(page)
    file.write(b"two\n")  # opening the FIFO for writing would block: it is never opened
    assert page.is_file() and page.read_bytes() == b"two\n"
    file.close()


def test_a_directory_at_the_name_is_an_error_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    file, page = _page(tmp_path)
    (page / "inside").mkdir(parents=True)
    with pytest.raises(OSError):
        file.write(b"one\n")
    assert sorted(p.name for p in page.parent.iterdir()) == ["RESULTS.md"]
    (page / "inside").rmdir()
    page.rmdir()
    file.write(b"two\n")  # the name is free again: the next row's page lands
    assert page.read_bytes() == b"two\n"
    file.close()


def test_emptying_cuts_its_own_file_and_leaves_what_the_agent_put_at_the_name(
    tmp_path: Path, outside: Path
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    prompt = workspace / "prompt.md"
    file = OwnedFile(prompt, mode=0o600)
    file.write(b"the prompt\n")
    assert oct(prompt.stat().st_mode & 0o777) == oct(0o600)
    file.empty()
    assert prompt.read_bytes() == b""
    file.write(b"the next prompt\n")
    prompt.unlink()
    prompt.symlink_to(outside)
    file.empty()  # the name leads elsewhere now: nothing is cut through it
    assert outside.read_text() == "the user's file\n"
    file.write(b"the third prompt\n")
    assert not prompt.is_symlink() and prompt.read_bytes() == b"the third prompt\n"
    file.close()
