"""The seam for a round before the deep loop: core calls whatever round strategy is registered as
`wide`, hands it `[search]` in the settings class it registered, and names the distribution to
install when a manifest asks for a round and none is installed."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest

from crucible_core import api
from crucible_core.plugins import Plugins, load_plugins
from tests.cli_support import EXAMPLES, crucible_env, run_crucible

COUNTER_PLUGINS = ["world_git", "judge_command", "backend_local"]  # no search_wide
SEARCH = '\n[search]\nwide = 2\napproaches = ["a", "b"]\n'


def _counter(tmp_path: Path, extra: str = "") -> Path:
    # Without the run a developer's `tasks.py demo` leaves in the example (the README's first command).
    shutil.copytree(
        EXAMPLES / "counter", tmp_path / "counter", ignore=shutil.ignore_patterns("workspace", "state")
    )
    manifest = tmp_path / "counter" / "crucible.toml"
    manifest.write_text(manifest.read_text() + extra)
    return manifest


def test_search_without_a_round_strategy_is_refused_naming_the_distribution(tmp_path: Path) -> None:
    manifest = _counter(tmp_path, SEARCH)
    env = crucible_env(CRUCIBLE_LOAD_PLUGINS=",".join(COUNTER_PLUGINS))
    for command in (("check",), ("run", "--iterations", "1")):
        done = run_crucible(*command, "--manifest", manifest, env=env)
        assert done.returncode == 10, done.stdout + done.stderr  # a manifest error
        assert "[search] asks for a wide round" in done.stderr
        assert "pip install crucible-plugin-search-wide" in done.stderr and "Traceback" not in done.stderr
    assert not (manifest.parent / "state" / "session.jsonl").exists()


def test_wide_on_the_command_line_without_a_round_strategy_is_refused_before_the_run(tmp_path: Path) -> None:
    manifest = _counter(tmp_path)
    env = crucible_env(CRUCIBLE_LOAD_PLUGINS=",".join(COUNTER_PLUGINS))
    done = run_crucible("--manifest", manifest, "--iterations", "1", "--wide", "2", env=env)
    assert done.returncode == 12, done.stderr  # a plugin missing
    assert "unknown round strategy 'wide' in --wide" in done.stderr
    assert "pip install crucible-plugin-search-wide" in done.stderr
    assert not (manifest.parent / "state" / "session.jsonl").exists()
    # without [search] and without --wide, the deep loop needs no strategy
    plain = run_crucible("--manifest", manifest, "--iterations", "1", env=env)
    assert plain.returncode == 0, plain.stderr


@attrs.frozen
class CoinSettings:
    """A third party's [search] table."""

    wide: int = 0
    coin: str = "heads"


@attrs.define
class CoinRound:
    calls: list[str]
    settings: CoinSettings

    @property
    def needs(self) -> str | None:
        return None

    def describe(self, world_name: str) -> str:
        return f"coin {self.settings.coin} on the {world_name} world"

    def refuse(
        self, world: Any, world_name: str, backend: Any, backend_name: str, caps: frozenset[str]
    ) -> None:
        self.calls.append(f"refuse {world_name} {backend_name}")

    def place(self, plugins: Plugins, *, runners: Any, env: Mapping[str, str], **_where: Any) -> str:
        self.calls.append(f"place runners={runners}")
        return "here"

    def graph(self) -> Any:
        raise AssertionError("not asked for by a run")

    def run(self, engine: api.Engine, run: api.Run, *, resumed: bool) -> api.LoopExit | None:
        baseline = [row.decision for row in run.rows]
        self.calls.append(f"run after {baseline} at iteration {run.iteration}")
        engine.note(f"the coin says {self.settings.coin}")
        return None

    def close(self) -> None:
        self.calls.append("close")


class CoinStrategy:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def prepare(self, request: api.RoundRequest) -> CoinRound | None:
        settings = request.settings
        assert isinstance(settings, CoinSettings)
        self.calls.append(f"prepare wide={settings.wide} resume={request.resume}")
        return CoinRound(self.calls, settings) if settings.wide else None


def _with_strategy(strategy: CoinStrategy) -> Plugins:
    class Plugin:
        @api.hookimpl
        def crucible_register_round_strategies(self, register: api.Register[api.RoundStrategy]) -> None:
            register("wide", strategy, settings=CoinSettings)

    plugins = load_plugins(names=["core", *COUNTER_PLUGINS])
    plugins.register_module(Plugin(), name="coin", distribution="crucible-plugin-coin", version="0")
    return plugins


def test_core_runs_a_registered_strategy_between_the_baseline_and_iteration_1(tmp_path: Path) -> None:
    manifest = _counter(tmp_path, '\n[search]\nwide = 1\ncoin = "tails"\n')
    strategy = CoinStrategy()
    events: list[dict[str, Any]] = []
    result = api.run(manifest, iterations=1, plugins=_with_strategy(strategy), on_event=events.append)
    assert result.exit_code == 0, result.reason
    assert strategy.calls == [
        "prepare wide=1 resume=False",
        "refuse git command",
        "place runners=()",
        "run after ['baseline'] at iteration 0",
        "close",
    ]
    notes = [e["msg"] for e in events if e["kind"] == "note"]
    assert "the coin says tails" in notes
    assert result.iterations == 1  # the deep loop ran after the round


def test_the_strategy_owns_search_and_its_schema_refuses_with_key_paths(tmp_path: Path) -> None:
    manifest = _counter(tmp_path, "\n[search]\nwide = 1\ncoin = 3\n")
    with pytest.raises(api.ManifestError) as refused:
        api.load_manifest(manifest, plugins=_with_strategy(CoinStrategy()))
    assert "[search].coin" in refused.value.message
    assert "checked by crucible-plugin-coin, which registered round strategy 'wide'" in refused.value.message


def test_resuming_a_round_without_its_strategy_is_refused_naming_the_distribution(tmp_path: Path) -> None:
    from crucible_core.errors import PluginError
    from crucible_core.run.engine import RunOptions
    from crucible_core.run.rounds import prepare_round

    manifest = _counter(tmp_path)  # the round was started with --wide: no [search] to say so
    plugins = load_plugins(names=["core", *COUNTER_PLUGINS])
    loaded = api.load_manifest(manifest, plugins=plugins)
    assert prepare_round(plugins, loaded, RunOptions(), resume=True) is None
    with pytest.raises(PluginError) as refused:
        prepare_round(plugins, loaded, RunOptions(), resume=True, unfinished=True)
    assert "in the resumed run's wide round" in refused.value.message
    assert "pip install crucible-plugin-search-wide" in refused.value.message
