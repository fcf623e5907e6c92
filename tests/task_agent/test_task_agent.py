"""crucible-plugin-task-agent's kinds: registered through its entry point, built only when a plan
needs them, and named as the distribution to install when a plan uses one without it."""

from __future__ import annotations

import tomllib
from importlib.metadata import entry_points

import pytest

from crucible_core.errors import CrucibleError
from crucible_core.plan.load import plan_from_data
from crucible_core.plugins import load_plugins
from crucible_core.registry import Deferred
from crucible_task_agent.kinds import KINDS

INSTALLED = sorted(ep.name for ep in entry_points(group="crucible"))
PLAN = """
version = 1
[[task]]
name = "summary"
kind = "{kind}"
{keys}
"""
KEYS = {"agent": 'prompt = "sum up"', "evaluate": 'command = "true"', "top_k": 'k = 1\ndirection = "higher"'}


def test_the_plugin_registers_its_kinds_as_built_on_first_use() -> None:
    kinds = load_plugins(names=INSTALLED).registry("task kind")
    assert all(isinstance(kinds.entries[name].registered, Deferred) for name in KINDS)  # nothing built yet
    assert {name: kinds.entries[name].value for name in KINDS} == KINDS


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_plan_naming_its_kind_without_it_says_what_to_install(kind: str) -> None:
    plugins = load_plugins(names=[name for name in INSTALLED if name != "task_agent"])
    data = tomllib.loads(PLAN.format(kind=kind, keys=KEYS[kind]))
    with pytest.raises(CrucibleError) as refused:
        plan_from_data(data, plugins.registry("task kind"))
    assert f"unknown task kind {kind!r}" in refused.value.render()
    assert "pip install crucible-plugin-task-agent" in refused.value.render()
