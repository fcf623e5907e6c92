"""Plugin-owned settings: a driver's own keys are validated by the attrs class its plugin registered."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from crucible_core.errors import ManifestError
from crucible_core.manifest.loader import load_manifest
from crucible_core.manifest.models import Seconds
from crucible_core.plugins import load_plugins
from tests.core.test_plugins import make_plugin

BASE = """
[repo]
path = "."

[agent]
backend = "command"
agent_cmd = "true"
goal = "g"

[judge]
kind = "ruler"
direction = "higher"
"""


@attrs.frozen
class Limits:
    wall: Seconds = Seconds(60.0)


@attrs.frozen
class RulerSettings:
    unit: str
    marks: tuple[str, ...] = ()
    limits: Limits = Limits()

    def __attrs_post_init__(self) -> None:
        if self.unit not in ("cm", "in"):
            raise ValueError(f"unit must be cm or in, not {self.unit!r}")


def plugins_with_ruler():
    plugins = load_plugins(names=["core", "world_git", "backend_local", "judge_command"])

    def register(register):
        register("ruler", lambda ctx: ctx.settings, settings=RulerSettings)

    plugins.register_module(
        make_plugin("ruler", crucible_register_judges=register),
        name="ruler",
        distribution="crucible-plugin-ruler",
        version="1",
    )
    return plugins


def load(tmp_path: Path, extra: str):
    path = tmp_path / "crucible.toml"
    path.write_text(BASE + extra)
    return load_manifest(path, plugins=plugins_with_ruler())


def refusal(tmp_path: Path, extra: str) -> str:
    with pytest.raises(ManifestError) as err:
        load(tmp_path, extra)
    return err.value.render()


def test_the_judge_table_beyond_core_keys_reaches_the_plugins_class(tmp_path: Path) -> None:
    loaded = load(tmp_path, 'unit = "cm"\nmarks = ["a", "b"]\n[judge.limits]\nwall = "2m"\n')
    settings = loaded.settings.of("judge")
    assert settings == RulerSettings("cm", ("a", "b"), Limits(Seconds(120.0)))
    assert loaded.manifest.judge is not None and loaded.manifest.judge.kind == "ruler"  # core keeps its own
    (ruler,) = [d for d in loaded.settings if d.role == "judge"]
    assert ruler.plugin == "crucible-plugin-ruler"
    assert (
        ruler.describe()
        == "judge ruler (crucible-plugin-ruler) [judge]: unit=cm marks=[a, b] limits.wall=120.0"
    )


def test_unknown_keys_are_refused_with_their_path_and_the_owning_plugin(tmp_path: Path) -> None:
    message = refusal(tmp_path, 'unit = "cm"\nmarkz = ["a"]\n')
    assert "unknown key 'markz' in [judge] (did you mean marks?)" in message
    assert "crucible-plugin-ruler, which registered judge 'ruler'" in message
    nested = refusal(tmp_path, 'unit = "cm"\n[judge.limits]\nwal = 3\n')
    assert "unknown key 'wal' in [judge.limits]" in nested


def test_types_and_the_classs_own_rules_are_enforced(tmp_path: Path) -> None:
    assert "[judge].marks: expected an array of strings" in refusal(tmp_path, 'unit = "cm"\nmarks = "a"\n')
    assert "[judge].unit is required" in refusal(tmp_path, "")
    assert "[judge]: unit must be cm or in, not 'km'" in refusal(tmp_path, 'unit = "km"\n')


def test_a_driver_without_a_settings_class_takes_no_keys(tmp_path: Path) -> None:
    path = tmp_path / "crucible.toml"
    path.write_text(BASE.replace('kind = "ruler"', 'measure_cmd = "true"') + "colour = 1\n")
    with pytest.raises(ManifestError) as err:
        load_manifest(path, plugins=plugins_with_ruler())
    assert "unknown key 'colour' in [judge]" in err.value.render()
    assert "crucible-plugin-judge-command" in err.value.render()


def test_agent_keys_go_to_their_driver_and_others_are_set_aside(tmp_path: Path) -> None:
    path = tmp_path / "crucible.toml"
    text = BASE.replace('kind = "ruler"', 'measure_cmd = "true"').replace(
        'backend = "command"', 'backend = "local"\ntoolbox_dir = "skills"'
    )
    (tmp_path / "skills").mkdir()
    path.write_text(text)
    loaded = load_manifest(path, plugins=load_plugins())
    by_role = {(d.role, d.driver): d for d in loaded.settings}
    assert by_role[("harness", "claude")].value.toolbox_dir == "skills"
    command = by_role[("backend", "command")]
    assert not command.used and command.value.agent_cmd == "true"  # validated, not used
    assert by_role[("backend", "local")].value is None


def test_the_command_backend_still_requires_agent_cmd(tmp_path: Path) -> None:
    path = tmp_path / "crucible.toml"
    path.write_text(
        BASE.replace('agent_cmd = "true"\n', "").replace('kind = "ruler"', 'measure_cmd = "true"')
    )
    with pytest.raises(ManifestError) as err:
        load_manifest(path)
    assert "[agent].agent_cmd is required" in err.value.render()


def test_settings_named_by_import_path_are_imported_only_when_a_manifest_is_converted(tmp_path: Path) -> None:
    plugins = load_plugins(names=["core", "world_git", "backend_local", "judge_command"])

    def register(register):
        register("ruler", lambda ctx: ctx.settings, settings=f"{__name__}:RulerSettings")

    plugins.register_module(
        make_plugin("ruler", crucible_register_judges=register),
        name="ruler",
        distribution="crucible-plugin-ruler",
        version="1",
    )
    entry = plugins.registry("judge").entry("ruler", where="test")
    assert entry.settings_ref == f"{__name__}:RulerSettings" and entry.settings is RulerSettings
    path = tmp_path / "crucible.toml"
    path.write_text(BASE + 'unit = "in"\n')
    assert load_manifest(path, plugins=plugins).settings.of("judge") == RulerSettings("in")


@pytest.mark.parametrize(
    ("settings", "refusal"),
    [
        ("RulerSettings", "is not an import path such as 'package.settings:MySettings'"),
        (f"{__name__}:Nowhere", "failed to load: AttributeError"),
        ("crucible_no_such_plugin.settings:S", "failed to load: ModuleNotFoundError"),
        (f"{__name__}:BASE", "which is not an attrs class"),
    ],
)
def test_a_settings_path_that_names_no_attrs_class_is_a_plugin_error_naming_the_plugin(
    settings: str, refusal: str
) -> None:
    from crucible_core.errors import PluginError
    from crucible_core.registry import Registry

    registry: Registry[object] = Registry("judge")
    with pytest.raises(PluginError) as err:
        registry.add("ruler", object(), "crucible-plugin-ruler", settings=settings)
        registry.entry("ruler", where="test").settings  # noqa: B018 - the read imports it
    assert refusal in err.value.render() and "crucible-plugin-ruler" in err.value.render()
