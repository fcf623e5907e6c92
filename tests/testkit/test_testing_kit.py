"""The plugin authors' test kit: the memory world, the scripted judge and backend, and the real loop over them.

The fixtures used here (crucible_kit, crucible_run, memory_world) come from the pytest plugin
crucible-testkit declares under `pytest11`: nothing in this suite imports or registers it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from crucible_core import api
from crucible_testkit import CrucibleKit, KitRun, MemoryWorld


def test_the_loop_keeps_and_rolls_back_through_the_memory_world(
    crucible_run: Callable[..., KitRun],
) -> None:
    done = crucible_run(
        files={"value.txt": "1\n", "notes/keep.md": "kept as it is\n"},
        turns=[
            {"value.txt": "2\n"},
            {"value.txt": "0\n", "scratch.txt": "left by a discarded turn\n"},
            {"value.txt": "3\n", "notes/keep.md": None},
        ],
        scores=[1, 2, 0, 3],
        iterations=3,
    )

    assert [(row.decision, row.score) for row in done.rows] == [
        ("baseline", 1.0),
        ("keep", 2.0),
        ("discard", 0.0),
        ("keep", 3.0),
    ]
    assert (done.result.outcome, done.result.best, done.result.kept, done.result.iterations) == (
        "finished",
        3.0,
        2,
        3,
    )
    # the discarded turn's file is gone, and the deletion the last kept turn made holds
    assert not (done.workspace / "scratch.txt").exists()
    assert not (done.workspace / "notes" / "keep.md").exists()
    assert (done.workspace / "value.txt").read_text() == "3\n"
    kinds = [e["kind"] for e in done.events]
    assert kinds[0] == "start" and kinds[-1] == "shutdown" and kinds.count("row") == 4
    assert [e["seq"] for e in done.events] == list(range(1, len(kinds) + 1))
    start = done.of_kind("start")[0]
    assert (start["world"], start["judge"], start["backend"]) == ("memory", "scripted", "scripted")


def test_a_turn_past_the_script_fails_and_a_solved_reading_ends_the_run(
    crucible_kit: CrucibleKit,
) -> None:
    done = crucible_kit.run(
        files={"a.txt": "a"},
        turns=[{"a.txt": "b"}],
        scores=[1, api.Reading(valid=True, score=2.0, solved=True, note="done")],
        iterations=5,
    )
    assert [row.decision for row in done.rows] == ["baseline", "keep"]
    assert done.result.outcome == "solved" and done.result.exit_code == api.ExitCode.OK

    again = CrucibleKit(crucible_kit.root.parent / "second").run(
        files={"a.txt": "a"}, turns=[], scores=[1], iterations=1
    )
    assert [row.decision for row in again.rows] == ["baseline", "discard"]
    assert "the script has no turn 1" in again.rows[1].note


def test_a_link_left_in_the_workspace_is_refused_and_never_followed(
    crucible_run: Callable[..., KitRun], tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("not the workspace's")

    def plant(turn: api.Turn) -> None:
        os.symlink(outside, turn.workspace / "escape.txt")

    done = crucible_run(files={"v.txt": "1"}, turns=[plant], scores=[1, 5], iterations=1)

    assert [row.decision for row in done.rows] == ["baseline", "discard"]
    assert "not a regular file" in done.rows[1].note
    assert outside.read_text() == "not the workspace's"
    assert not (done.workspace / "escape.txt").is_symlink()


def test_a_plugin_under_test_is_registered_on_the_kit_alone(crucible_kit: CrucibleKit) -> None:
    class Doubling:
        """A judge plugin defined in the test: the score is twice the number in n.txt."""

        @api.hookimpl
        def crucible_register_judges(self, register: api.Register[Any]) -> None:
            register("doubling", lambda ctx: _Doubling(ctx.workspace))

    crucible_kit.register(Doubling(), name="doubling-judge")
    done = crucible_kit.run(
        files={"n.txt": "2"},
        turns=[{"n.txt": "5"}],
        iterations=1,
        manifest={"judge": {"kind": "doubling"}},
    )
    assert [(row.decision, row.score) for row in done.rows] == [("baseline", 4.0), ("keep", 10.0)]
    # a second kit (another test) does not see it
    other = CrucibleKit(crucible_kit.root.parent / "other")
    with pytest.raises(api.PluginError, match="unknown judge 'doubling'"):
        other.registered("judge", "doubling")


def test_a_kit_names_an_installed_plugin_it_cannot_load(tmp_path: Path) -> None:
    with pytest.raises(api.PluginError, match=r"could not load the installed plugin\(s\) no_such_plugin"):
        CrucibleKit(tmp_path, installed=["judge_command", "no_such_plugin"])
    kit = CrucibleKit(tmp_path, installed=["judge_command"])
    assert kit.registered("judge", "command") is not None


class _Doubling:
    gate = "twice n"
    scored = True

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace

    def measure(self, ctx: api.MeasureContext) -> api.Reading:
        return api.Reading(valid=True, score=2.0 * int((self.workspace / "n.txt").read_text()))


def test_the_memory_world_fixture_snapshots_and_restores(memory_world: MemoryWorld) -> None:
    (memory_world.workspace / "sub").mkdir()
    (memory_world.workspace / "sub" / "f.txt").write_text("one")
    first = memory_world.snapshot("one")
    (memory_world.workspace / "sub" / "f.txt").write_text("two")
    (memory_world.workspace / "g.txt").write_text("new")
    assert memory_world.changed_paths() == ["g.txt", "sub/f.txt"]
    assert memory_world.stage().unchanged is False

    memory_world.restore(first)

    assert (memory_world.workspace / "sub" / "f.txt").read_text() == "one"
    assert not (memory_world.workspace / "g.txt").exists()
    assert memory_world.stage() == api.Staged(token=first, unchanged=True)


def test_the_kit_ships_as_a_pytest_plugin_and_core_never_imports_pytest() -> None:
    declared = {ep.value for ep in entry_points(group="pytest11")}
    assert "crucible_testkit.pytest_plugin" in declared
    assert not any(value.startswith("crucible_core") for value in declared)  # core ships no kit
    probe = (
        "import sys; from crucible_core import api; import crucible_testkit; crucible_testkit.CrucibleKit; "
        "api.run; import crucible_core.cli.main; print('pytest' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
    # every pytest run in an environment with the kit loads the fixtures: they import the kit late
    probe = (
        "import sys; import crucible_testkit.pytest_plugin; "
        "print(sorted(m for m in sys.modules if m.startswith(('crucible_core', 'crucible_testkit'))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['crucible_testkit', 'crucible_testkit.pytest_plugin']"


@pytest.mark.parametrize("path", ["../up.txt", "/abs.txt"])
def test_a_scripted_edit_stays_in_the_workspace(crucible_run: Callable[..., KitRun], path: str) -> None:
    done = crucible_run(files={"v.txt": "1"}, turns=[{path: "x"}], scores=[1, 2], iterations=1)
    assert done.result.outcome == "error" and "is not a path inside the workspace" in done.result.reason
