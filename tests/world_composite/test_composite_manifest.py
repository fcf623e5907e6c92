"""The composite manifest's own tables, as the world_composite plugin checks them: [composite]
and its [[component]] domains load as one manifest, and every composite rule refuses by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from crucible_core.errors import ManifestError, UnsupportedSectionError
from crucible_core.manifest.loader import load_manifest
from tests.core.test_manifest import BASE, refusal, write


def composite_dir(tmp_path: Path, body: str) -> Path:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        write(tmp_path / name, BASE)
    return write(tmp_path, body)


COMPOSITE = BASE.replace('[repo]\npath = "."\n', '[composite]\nname = "pair"\n') + (
    '\n[[component]]\ndomain = "a"\n\n[[component]]\ndomain = "b"\nname = "bee"\n'
)


def test_composite_loads_its_components(tmp_path: Path) -> None:
    loaded = load_manifest(composite_dir(tmp_path, COMPOSITE))
    assert [c.name for c in loaded.components] == ["a", "bee"]
    assert loaded.components[0].loaded.manifest.repo is not None


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda t: t.split("[[component]]")[0] + '[[component]]\ndomain = "a"\n', "at least two"),
        (lambda t: t.replace('name = "bee"', 'name = "a"'), "two components are named 'a'"),
        (lambda t: t.replace('domain = "b"', 'domain = "nowhere"'), "holds no crucible.toml"),
        (lambda t: t.replace('name = "pair"', 'name = "pair"\n\n[repo]\npath = "."'), "no [repo]"),
        (lambda t: t.replace('name = "bee"', 'name = "../x"'), "plain directory name"),
    ],
)
def test_composite_refusals(tmp_path: Path, edit: object, words: str) -> None:
    composite_dir(tmp_path, "")
    text = edit(COMPOSITE)  # type: ignore[operator]
    with pytest.raises(ManifestError) as err:
        load_manifest(write(tmp_path, text))
    assert words in err.value.render()


def test_a_judgeless_composite_is_refused_unless_it_is_a_playbook(tmp_path: Path) -> None:
    composite_dir(tmp_path, "")
    judgeless = COMPOSITE.replace('[judge]\nmeasure_cmd = "./measure.sh"\ndirection = "higher"\n', "")
    assert "[composite] needs a [judge]" in refusal(tmp_path, judgeless)
    playbook = (
        judgeless
        + '\n[workflow]\ntype = "playbook"\n[[workflow.task]]\nname = "a"\nkind = "command"\nrun = "true"\n'
    )
    loaded = load_manifest(write(tmp_path, playbook))  # valid (C-PLAYBOOK-COMPOSITE)
    assert loaded.manifest.judge is None
    assert [c.name for c in loaded.components] == ["a", "bee"]


def test_components_need_a_composite_table(tmp_path: Path) -> None:
    text = BASE + '\n[[component]]\ndomain = "a"\n'
    assert "need a [composite] table" in refusal(tmp_path, text)


@pytest.mark.parametrize("world", ['[world]\nkind = "git"\n', '[world]\napply_cmd = "true"\n'])
def test_a_composite_refuses_a_world_of_its_own(tmp_path: Path, world: str) -> None:
    composite_dir(tmp_path, "")
    with pytest.raises(UnsupportedSectionError) as err:
        load_manifest(write(tmp_path, COMPOSITE + "\n" + world))
    assert "[world] in a composite is not supported" in err.value.render()


def test_a_composite_runs_in_the_world_that_assembles_it(tmp_path: Path) -> None:
    loaded = load_manifest(composite_dir(tmp_path, COMPOSITE))
    assert loaded.world_kind == "composite"
    assert [c.loaded.world_kind for c in loaded.components] == ["git", "git"]


def test_without_the_plugin_a_composite_is_refused_naming_it(tmp_path: Path) -> None:
    from importlib.metadata import entry_points

    from crucible_core.errors import ExitCode, PluginError
    from crucible_core.plugins import load_plugins

    others = sorted(ep.name for ep in entry_points(group="crucible") if ep.name != "world_composite")
    with pytest.raises(PluginError) as err:
        load_manifest(composite_dir(tmp_path, COMPOSITE), plugins=load_plugins(names=others))
    assert err.value.exit_code == ExitCode.PLUGIN
    assert "pip install crucible-plugin-world-composite" in err.value.render()
