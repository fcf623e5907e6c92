"""crucible-testkit: a test kit for plugin authors, in-memory and scripted drivers and the real loop over them.

    from crucible_testkit import CrucibleKit, MemoryWorld, ScriptedBackend, ScriptedJudge

The pytest fixtures (crucible_kit, crucible_run, memory_world) live in
`crucible_testkit.pytest_plugin`, which pytest loads by itself (the `pytest11` entry point).
Names resolve lazily, so loading the fixtures into every pytest run costs nothing until a test
uses one. Install it beside crucible-core for your tests: `pip install crucible-testkit`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crucible_testkit.drivers import MemoryWorld as MemoryWorld
    from crucible_testkit.drivers import ScriptedBackend as ScriptedBackend
    from crucible_testkit.drivers import ScriptedJudge as ScriptedJudge
    from crucible_testkit.kit import CrucibleKit as CrucibleKit
    from crucible_testkit.kit import KitRun as KitRun

_WHERE = {
    "MemoryWorld": "crucible_testkit.drivers",
    "ScriptedBackend": "crucible_testkit.drivers",
    "ScriptedJudge": "crucible_testkit.drivers",
    "CrucibleKit": "crucible_testkit.kit",
    "KitRun": "crucible_testkit.kit",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    try:
        module = _WHERE[name]
    except KeyError:
        raise AttributeError(f"module 'crucible_testkit' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
