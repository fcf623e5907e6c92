"""pytest fixtures for plugin authors (loaded through the `pytest11` entry point when pytest is installed).

    def test_my_judge(crucible_kit):
        crucible_kit.register(my_plugin)
        done = crucible_kit.run(files={...}, turns=[{...}], iterations=1, manifest={"judge": {...}})
        assert [row.decision for row in done.rows] == ["baseline", "keep"]

Only pytest loads this module; crucible-testkit itself does not depend on pytest.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # imported by the fixtures: every pytest run in an environment with crucible loads this
    from crucible_testkit.drivers import MemoryWorld
    from crucible_testkit.kit import CrucibleKit, KitRun


@pytest.fixture
def crucible_kit(tmp_path: Path) -> CrucibleKit:
    """A fresh CrucibleKit for this test: core's plugin and the scripted drivers, in a temporary directory."""
    from crucible_testkit.kit import CrucibleKit

    return CrucibleKit(tmp_path / "crucible")


@pytest.fixture
def crucible_run(crucible_kit: CrucibleKit) -> Callable[..., KitRun]:
    """`crucible_kit.run`: the real loop over the scripted drivers; returns the result and the events."""
    return crucible_kit.run


@pytest.fixture
def memory_world(tmp_path: Path) -> MemoryWorld:
    """A MemoryWorld over an empty workspace in a temporary directory, its base state kept."""
    from crucible_testkit.drivers import MemoryWorld

    world = MemoryWorld(tmp_path / "memory-workspace")
    world.prepare()
    return world
