"""The sandbox's tree is hostile: what comes back may only change files inside the workspace."""

from __future__ import annotations

import contextlib
import io
import os
import tarfile
from pathlib import Path

import pytest

from crucible_backend_openshell.transfer import TransferError, pack_workspace, sync_back

LIMIT = 1024 * 1024


def archive(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def file(name: str, data: bytes, mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.mode = mode
    return info, data


def link(name: str, target: str) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    return info, None


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (ws / "keep.txt").write_text("keep\n")
    (ws / "drop.txt").write_text("drop\n")
    (ws / "state").mkdir()
    (ws / "state" / "session.jsonl").write_text("{}\n")
    return ws


def test_the_round_trip_writes_changes_and_deletes_what_the_agent_deleted(workspace: Path) -> None:
    packed = pack_workspace(workspace, ("state/",), LIMIT)
    assert packed.paths == {"keep.txt", "drop.txt"}  # no .git, no engine state
    back = archive(file("./keep.txt", b"changed\n"), file("./new/tool.sh", b"#!/bin/sh\n", 0o755))
    changed = sync_back(back, workspace, packed.paths, ("state/",), LIMIT)
    assert sorted(changed) == ["drop.txt", "keep.txt", "new/tool.sh"]
    assert (workspace / "keep.txt").read_text() == "changed\n" and not (workspace / "drop.txt").exists()
    assert os.access(workspace / "new" / "tool.sh", os.X_OK)
    assert (workspace / ".git" / "HEAD").exists() and (workspace / "state" / "session.jsonl").exists()


def test_nothing_lands_outside_the_workspace_or_in_git_or_the_state(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched\n")
    hostile = [
        archive(file("../outside.txt", b"pwned\n")),
        archive(file(str(outside), b"pwned\n")),
        archive(link("./escape", str(tmp_path)), file("./escape/outside.txt", b"pwned\n")),
    ]
    for data in hostile:
        # refused outright, or (a leading "/" stripped) kept inside the workspace
        with contextlib.suppress(TransferError):
            sync_back(data, workspace, frozenset(), ("state/",), LIMIT)
        assert outside.read_text() == "untouched\n"
    sync_back(
        archive(
            file("./.git/HEAD", b"evil\n"),
            file("./state/session.jsonl", b"evil\n"),
            file("./keep.txt", b"keep\n"),
        ),
        workspace,
        frozenset({"keep.txt", "drop.txt"}),
        ("state/",),
        LIMIT,
    )
    assert outside.read_text() == "untouched\n"
    assert (workspace / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert (workspace / "state" / "session.jsonl").read_text() == "{}\n"


def test_a_link_planted_in_the_workspace_is_never_written_through(workspace: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (workspace / "dir").symlink_to(target)
    sync_back(archive(file("./dir/x.txt", b"through the link\n")), workspace, frozenset(), (), LIMIT)
    assert not (target / "x.txt").exists()


def test_an_oversized_tree_is_refused(workspace: Path) -> None:
    with pytest.raises(TransferError):
        sync_back(archive(file("./big", b"x" * 2048)), workspace, frozenset(), (), 1024)
    with pytest.raises(TransferError):
        pack_workspace(workspace, (), 3)
