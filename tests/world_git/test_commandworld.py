"""CommandWorld: the "<sha>\\t<domain token>" round trip and how each domain command failure surfaces."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crucible_core.errors import RunFailed
from crucible_core.manifest.models import WorldSection
from crucible_core.protocols import World, WorldContext
from crucible_core.shell import Shell
from crucible_world_git.commandworld import CommandWorld
from crucible_world_git.settings import CommandWorldSettings
from tests.world_git.support import git, make_base, write

# The "live system" is a file beside the workspace; the domain token names its content.
SNAPSHOT = 'echo "capturing" >&2; echo "first line is not the token"; echo "live-$(cat ../live.txt)"; echo'
RESTORE = 'echo "$CRUCIBLE_TOKEN" >> ../restores.txt; echo "${CRUCIBLE_TOKEN#live-}" > ../live.txt'
APPLY = 'cp value.txt ../live.txt; [ "$(cat value.txt)" != bad ] || { echo "refused bad value" >&2; exit 3; }'


def _settings(unchecked: bool, commands: dict[str, str]) -> CommandWorldSettings:
    if not unchecked:
        return CommandWorldSettings(**commands)
    settings = object.__new__(CommandWorldSettings)
    for field in ("apply_cmd", "snapshot_cmd", "restore_cmd"):
        object.__setattr__(settings, field, commands.get(field))
    return settings


def command_world(tmp_path: Path, *, unchecked: bool = False, **commands: str) -> CommandWorld:
    workspace = make_base(tmp_path / "ws")
    write(workspace, "value.txt", "1\n")
    git(workspace, "add", "value.txt")
    git(workspace, "commit", "-q", "-m", "value")
    (tmp_path / "live.txt").write_text("0\n")
    shell = Shell(cwd=tmp_path, env=dict(os.environ), timeout=30)
    ctx = WorldContext(
        workspace, WorldSection(), (".claude/", "RESULTS.md"), shell, settings=_settings(unchecked, commands)
    )
    world = CommandWorld.from_context(ctx)
    assert isinstance(world, World)
    world.prepare()
    return world


def test_token_joins_the_commit_and_the_domain_token(tmp_path: Path) -> None:
    world = command_world(tmp_path, apply_cmd=APPLY, snapshot_cmd=SNAPSHOT, restore_cmd=RESTORE)
    ws = world.git.memory.workspace
    write(ws, "value.txt", "2\n")
    assert world.apply().ok
    token = world.snapshot("keep 2")
    sha, domain = token.split("\t")
    assert domain == "live-2"  # the last non-empty stdout line
    assert sha == world.last_commit_sha() == git(ws, "rev-parse", "HEAD").strip()
    assert git(ws, "show", f"{sha}:value.txt") == "2\n"

    write(ws, "value.txt", "3\n")
    write(ws, "scratch.txt", "left by the turn\n")
    assert world.apply().ok
    assert (tmp_path / "live.txt").read_text() == "3\n"
    world.restore(token)
    assert (ws / "value.txt").read_text() == "2\n"  # the git half
    assert not (ws / "scratch.txt").exists()
    assert (tmp_path / "live.txt").read_text() == "2\n"  # the domain half, through CRUCIBLE_TOKEN
    assert (tmp_path / "restores.txt").read_text() == "live-2\n"


def test_apply_failure_is_an_outcome_not_an_exception(tmp_path: Path) -> None:
    world = command_world(tmp_path, apply_cmd=APPLY)
    write(world.git.memory.workspace, "value.txt", "bad\n")
    outcome = world.apply()
    assert not outcome.ok
    assert "apply_cmd exited 3" in outcome.note and "refused bad value" in outcome.note


def test_without_snapshot_cmd_the_domain_half_is_empty(tmp_path: Path) -> None:
    # A manifest cannot say this (the settings class wants the pair); the world must still cope.
    world = command_world(tmp_path, unchecked=True, restore_cmd=RESTORE)
    token = world.snapshot("keep")
    sha, domain = token.split("\t")
    assert domain == "" and sha == world.last_commit_sha()
    world.restore(token)
    assert (tmp_path / "restores.txt").read_text() == "\n"  # restore_cmd ran with an empty token


@pytest.mark.parametrize(
    ("snapshot_cmd", "message"),
    [
        ("echo partial; exit 4", "snapshot_cmd exited 4"),
        ("echo; echo '   '", "printed no token"),
        ("printf 'a\\tb\\n'", "containing a tab"),
    ],
)
def test_a_snapshot_command_that_fails_aborts_the_keep(
    tmp_path: Path, snapshot_cmd: str, message: str
) -> None:
    world = command_world(tmp_path, snapshot_cmd=snapshot_cmd, restore_cmd="true")
    write(world.git.memory.workspace, "value.txt", "2\n")
    with pytest.raises(RunFailed, match=message) as caught:
        world.snapshot("keep")
    assert caught.value.hint


def test_a_failing_restore_command_raises_after_the_files_are_back(tmp_path: Path) -> None:
    world = command_world(tmp_path, snapshot_cmd="echo tok", restore_cmd="echo broken >&2; exit 9")
    ws = world.git.memory.workspace
    token = world.snapshot("keep")
    write(ws, "value.txt", "changed\n")
    with pytest.raises(RunFailed, match="restore_cmd exited 9: broken"):
        world.restore(token)
    assert (ws / "value.txt").read_text() == "1\n"
