"""The workspace a Job brings back is hostile input: refused whole when it could escape the fork."""

from __future__ import annotations

import base64
import gzip
import io
import tarfile
from pathlib import Path

import pytest

from crucible_deploy_kubernetes.render import PACK_SKIP
from crucible_deploy_kubernetes.task_runner import STDOUT_DELIMITER
from crucible_deploy_kubernetes.workspace_return import (
    FILES_DELIMITER,
    WORKSPACE_DELIMITER,
    ReturnRefused,
    bring_back,
    bring_back_files,
    split_workspace,
)


def _archive(*members: tuple[str, bytes | None, bytes]) -> str:
    """(name, data or None, type) members as the pod prints them: gzipped tar, base64."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data, kind in members:
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind == tarfile.SYMTYPE or kind == tarfile.LNKTYPE:
                info.linkname = data.decode() if data else ""
                tar.addfile(info)
            elif kind == tarfile.DIRTYPE:
                info.mode = 0o755
                tar.addfile(info)
            else:
                payload = data or b""
                info.size = len(payload)
                info.mode = 0o755 if name.endswith(".sh") else 0o644
                tar.addfile(info, io.BytesIO(payload))
    return base64.b64encode(gzip.compress(raw.getvalue())).decode()


def _fork(tmp_path: Path) -> Path:
    fork = tmp_path / "fork"
    fork.mkdir()
    (fork / "program.txt").write_text("cost = 100\n")
    (fork / "obsolete.txt").write_text("old\n")
    (fork / ".git").write_text("gitdir: /somewhere/else\n")
    (fork / "sub").mkdir()
    (fork / "sub" / "kept.txt").write_text("kept\n")
    return fork


SHIPPED = ("obsolete.txt", "program.txt", "sub/kept.txt")
REG, DIR, SYM, LNK = tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE


def test_the_returned_workspace_adds_changes_and_deletes_but_never_touches_git(tmp_path: Path) -> None:
    fork = _fork(tmp_path)
    encoded = _archive(
        (".", None, DIR),
        ("./program.txt", b"cost = 70\n", REG),
        ("./sub", None, DIR),
        ("./sub/kept.txt", b"kept\n", REG),
        ("./new/run.sh", b"#!/bin/sh\n", REG),
        ("./.git", b"gitdir: /attacker\n", REG),  # a worktree pointer the pod made: ignored
        ("./state/evil.txt", b"x", REG),  # under the pack's skip list: ignored
        ("./__pycache__/m.pyc", b"x", REG),
    )
    written, deleted = bring_back(fork, encoded, SHIPPED, PACK_SKIP)
    assert (written, deleted) == (3, 1)
    assert (fork / "program.txt").read_text() == "cost = 70\n"
    assert not (fork / "obsolete.txt").exists()
    assert (fork / "new" / "run.sh").stat().st_mode & 0o111
    assert (fork / ".git").read_text() == "gitdir: /somewhere/else\n"
    assert not (fork / "state").exists() and not (fork / "__pycache__").exists()


@pytest.mark.parametrize(
    ("member", "words"),
    [
        (("../escape.txt", b"out", REG), "climbs out"),
        (("./sub/../../escape.txt", b"out", REG), "climbs out"),
        (("/tmp/escape.txt", b"out", REG), "absolute"),
        (("./link", b"/etc", SYM), "a link"),
        (("./hard", b"program.txt", LNK), "a link"),
        (("./fifo", None, tarfile.FIFOTYPE), "special file"),
    ],
)
def test_an_archive_that_could_escape_the_fork_is_refused_before_anything_is_written(
    tmp_path: Path, member: tuple[str, bytes | None, bytes], words: str
) -> None:
    fork = _fork(tmp_path)
    before = {p: p.read_bytes() for p in fork.rglob("*") if p.is_file()}
    encoded = _archive(("./program.txt", b"cost = 1\n", REG), member)
    with pytest.raises(ReturnRefused, match=words):
        bring_back(fork, encoded, SHIPPED, PACK_SKIP)
    assert {p: p.read_bytes() for p in fork.rglob("*") if p.is_file()} == before  # nothing written
    assert not (tmp_path / "escape.txt").exists()


def test_a_file_under_a_link_in_the_fork_is_never_written_through_it(tmp_path: Path) -> None:
    fork = _fork(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (fork / "lib").symlink_to(outside)  # in the kept state; the pack never shipped it
    encoded = _archive(("./program.txt", b"cost = 1\n", REG), ("./lib/planted.txt", b"x", REG))
    with pytest.raises(ReturnRefused, match="through the link lib"):
        bring_back(fork, encoded, SHIPPED, PACK_SKIP)
    assert not (outside / "planted.txt").exists()
    assert (fork / "program.txt").read_text() == "cost = 100\n"


def test_oversized_or_damaged_archives_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from crucible_deploy_kubernetes import workspace_return

    fork = _fork(tmp_path)
    with pytest.raises(ReturnRefused, match="not base64"):
        bring_back(fork, "!!not base64!!", SHIPPED, PACK_SKIP)
    with pytest.raises(ReturnRefused, match="not a gzip"):
        bring_back(fork, base64.b64encode(b"plain bytes").decode(), SHIPPED, PACK_SKIP)
    monkeypatch.setattr(workspace_return, "MAX_UNPACKED_BYTES", 4096)
    bomb = _archive(("./big.bin", b"\0" * 100_000, REG))  # compresses to almost nothing
    with pytest.raises(ReturnRefused, match="unpacks to over 4096 bytes"):
        bring_back(fork, bomb, SHIPPED, PACK_SKIP)
    assert (fork / "program.txt").read_text() == "cost = 100\n"


def test_a_workspace_section_counts_only_after_the_pods_stdout_section() -> None:
    encoded = _archive(("./a.txt", b"a", REG))
    stdout = base64.b64encode(b'{"ok": true}\n').decode()
    log = f"live\n{STDOUT_DELIMITER}0) ===\n{stdout}\n{WORKSPACE_DELIMITER}\n{encoded}\n"
    head, section = split_workspace(log, STDOUT_DELIMITER)
    assert section is not None and "".join(section.split()) == encoded
    assert head.endswith(stdout)
    # a command that printed a workspace section of its own, before the pod's stdout section
    faked = f"{WORKSPACE_DELIMITER}\n{encoded}\n{STDOUT_DELIMITER}1) ===\n{stdout}\n"
    assert split_workspace("x\n" + faked, STDOUT_DELIMITER)[1] is None


DECLARED = ("out/trace.txt", "out/sub/metrics.json")


def test_declared_files_come_back_and_an_absent_one_is_removed_here(tmp_path: Path) -> None:
    fork = _fork(tmp_path)
    (fork / "out" / "sub").mkdir(parents=True)
    (fork / "out" / "sub" / "metrics.json").write_text("stale\n")
    written, removed = bring_back_files(fork, _archive(("./out/trace.txt", b"trace\n", REG)), DECLARED)
    assert (written, removed) == (1, 1)
    assert (fork / "out" / "trace.txt").read_text() == "trace\n"
    assert not (fork / "out" / "sub" / "metrics.json").exists()
    assert (fork / "program.txt").read_text() == "cost = 100\n"  # undeclared files are never touched
    assert bring_back_files(fork, "", DECLARED) == (0, 1)  # the pod had none of them


@pytest.mark.parametrize(
    ("members", "says"),
    [
        ((("program.txt", b"x", REG),), "did not declare"),
        ((("out/trace.txt", b"x", REG), ("out", None, DIR)), "directory 'out'"),
        ((("out/trace.txt", None, DIR),), "directory 'out/trace.txt' (a declared path)"),
        ((("out/trace.txt", b"/etc/passwd", SYM),), "a link"),
        ((("out/trace.txt", b"program.txt", LNK),), "a link"),
        ((("../out/trace.txt", b"x", REG),), "climbs out"),
        ((("out/trace.txt", b"x", REG), ("./out/trace.txt", b"y", REG)), "twice"),
    ],
)
def test_a_files_archive_with_anything_but_declared_plain_files_is_refused_whole(
    tmp_path: Path, members: tuple[tuple[str, bytes | None, bytes], ...], says: str
) -> None:
    fork = _fork(tmp_path)
    with pytest.raises(ReturnRefused) as refused:
        bring_back_files(fork, _archive(*members), DECLARED)
    assert says in str(refused.value)
    assert not (fork / "out").exists() and (fork / "program.txt").read_text() == "cost = 100\n"


def test_declared_files_are_never_written_through_a_link_or_over_a_file_here(tmp_path: Path) -> None:
    fork = _fork(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (fork / "out").symlink_to(outside)
    archive = _archive(("out/trace.txt", b"x", REG))
    with pytest.raises(ReturnRefused, match="through the link out"):
        bring_back_files(fork, archive, DECLARED)
    assert list(outside.iterdir()) == []
    (fork / "out").unlink()
    (fork / "out").write_text("a file of this machine\n")
    with pytest.raises(ReturnRefused, match="not a directory here"):
        bring_back_files(fork, archive, DECLARED)
    assert (fork / "out").read_text() == "a file of this machine\n"


def test_the_files_section_is_split_off_after_the_stdout_and_workspace_sections() -> None:
    log = f"live\n{STDOUT_DELIMITER}0) ===\nb3V0\n{WORKSPACE_DELIMITER}\nV1M=\n{FILES_DELIMITER}\nRklMRVM=\n"
    rest, files = split_workspace(log, STDOUT_DELIMITER, FILES_DELIMITER)
    assert files is not None and files.strip() == "RklMRVM="
    rest, workspace = split_workspace(rest, STDOUT_DELIMITER)
    assert workspace is not None and workspace.strip() == "V1M="
    # A files delimiter the command printed itself (before the stdout section) is not the pod's.
    faked = f"{FILES_DELIMITER}\nRklMRVM=\n{STDOUT_DELIMITER}0) ===\nb3V0\n"
    assert split_workspace("x\n" + faked, STDOUT_DELIMITER, FILES_DELIMITER)[1] is None
