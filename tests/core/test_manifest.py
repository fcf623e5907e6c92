"""Manifest loading: every C-MANIFEST / C-PATHS rule, and errors that name file, key and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from crucible_core.errors import ManifestError, UnsupportedSectionError
from crucible_core.manifest.loader import load_manifest

BASE = """
[repo]
path = "."

[agent]
backend = "command"
agent_cmd = "true"
goal = "g"

[judge]
measure_cmd = "./measure.sh"
direction = "higher"
"""


def write(tmp_path: Path, text: str, name: str = "crucible.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_minimal_manifest_loads_with_defaults(tmp_path: Path) -> None:
    loaded = load_manifest(write(tmp_path, BASE))
    m = loaded.manifest
    assert m.workspace.dir == "workspace"
    assert loaded.workspace == (tmp_path / "workspace").resolve()
    assert m.judge is not None and m.judge.objective == "score"
    assert m.world.resolved_kind() == "git"
    assert m.judge_kind() == "command"


def test_syntax_error_names_file_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "[repo]\npath = \n")
    with pytest.raises(ManifestError) as err:
        load_manifest(path)
    text = err.value.render()
    assert str(path) in text and "line 2" in text and "column" in text


def test_unknown_key_names_the_key_path(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as err:
        load_manifest(
            write(tmp_path, BASE.replace('direction = "higher"', 'direction = "higher"\ndirectoin = 1'))
        )
    assert "directoin" in err.value.render() and "[judge]" in err.value.render()


def test_wrong_value_names_the_key_path(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as err:
        load_manifest(write(tmp_path, BASE.replace('"higher"', '"sideways"')))
    assert "[judge].direction" in err.value.render() and "lower, higher" in err.value.render()


def test_missing_required_key(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as err:
        load_manifest(write(tmp_path, BASE.replace('direction = "higher"', "")))
    assert "[judge].direction is required" in err.value.render()


@pytest.mark.parametrize("section", ["search", "workflow", "publish", "preflight", "outputs"])
def test_sections_this_version_does_not_execute_are_refused(tmp_path: Path, section: str) -> None:
    with pytest.raises(UnsupportedSectionError) as err:
        load_manifest(write(tmp_path, BASE + f"\n[{section}]\n"))
    assert f"[{section}] is not supported by this version" in err.value.render()


def test_openshell_agent_table_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedSectionError):
        load_manifest(write(tmp_path, BASE + '\n[agent.openshell]\nendpoints = ["x:443:full"]\n'))


def test_repo_needs_exactly_one_of_url_and_path(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="exactly one of url and path"):
        load_manifest(write(tmp_path, BASE.replace('path = "."', 'path = "."\nurl = "https://x/y.git"')))


def test_selftest_requires_both_controls_and_positive_runs(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="bad_cmd"):
        load_manifest(write(tmp_path, BASE + '\n[judge.selftest]\ngood_cmd = "true"\n'))
    with pytest.raises(ManifestError, match="runs must be at least 1"):
        load_manifest(write(tmp_path, BASE + '\n[judge.selftest]\ngood_cmd = "a"\nbad_cmd = "b"\nruns = 0\n'))


def test_snapshot_and_restore_come_as_a_pair(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="pair"):
        load_manifest(write(tmp_path, BASE + '\n[world]\nsnapshot_cmd = "echo t"\n'))
    loaded = load_manifest(write(tmp_path, BASE + '\n[world]\napply_cmd = "true"\n'))
    assert loaded.manifest.world.resolved_kind() == "command"


def test_no_judge_is_the_task_lane(tmp_path: Path) -> None:
    text = BASE.split("[judge]")[0]
    loaded = load_manifest(write(tmp_path, text))
    assert loaded.manifest.task_lane and loaded.manifest.judge_kind() == "task"


def test_missing_referenced_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"method\.md"):
        load_manifest(write(tmp_path, BASE.replace('goal = "g"', 'goal = "g"\nmethod_prompt = "method.md"')))
    with pytest.raises(ManifestError, match=r"goals/x\.md"):
        load_manifest(write(tmp_path, BASE.replace('goal = "g"', 'goal_file = "goals/x.md"')))


def test_inject_forms_expand_sorted_and_frozen(tmp_path: Path) -> None:
    (tmp_path / "tools").mkdir()
    for name in ("b.py", "a.py"):
        (tmp_path / "tools" / name).write_text(name)
    (tmp_path / "measure.sh").write_text("m")
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "fixtures" / "seed.json").write_text("{}")
    text = BASE.replace(
        "[agent]",
        '[workspace]\ninject = ["measure.sh", "tools/*.py", '
        '{ src = "fixtures/seed.json", dst = "testdata/seed.json", frozen = false }]\n\n[agent]',
    )
    loaded = load_manifest(write(tmp_path, text))
    got = [(i.destination, i.frozen) for i in loaded.injects]
    assert got == [
        ("measure.sh", True),
        ("tools/a.py", True),
        ("tools/b.py", True),
        ("testdata/seed.json", False),
    ]


def test_inject_that_matches_nothing_is_named(tmp_path: Path) -> None:
    text = BASE.replace("[agent]", '[workspace]\ninject = ["gates/*.sh"]\n\n[agent]')
    with pytest.raises(ManifestError, match=r"gates/\*\.sh"):
        load_manifest(write(tmp_path, text))


def test_inject_string_may_not_escape_the_manifest_dir(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    pack.mkdir()
    (tmp_path / "outside.sh").write_text("x")
    text = BASE.replace("[agent]", '[workspace]\ninject = ["../outside.sh"]\n\n[agent]')
    with pytest.raises(ManifestError, match="escapes the manifest directory"):
        load_manifest(write(pack, text))


@pytest.mark.parametrize("entry", ["../x", "/abs", "./x", "a/../b"])
def test_carry_forward_entries_must_be_plain_relative(tmp_path: Path, entry: str) -> None:
    text = BASE.replace("[agent]", f'[workspace]\ncarry_forward = ["{entry}"]\n\n[agent]')
    with pytest.raises(ManifestError, match="carry_forward"):
        load_manifest(write(tmp_path, text))


def test_frozen_loading_reads_the_base_commit_copy(tmp_path: Path) -> None:
    """A manifest inside its workspace is parsed from the pristine base, not the working tree."""
    text = BASE.replace("[agent]", '[workspace]\ndir = "."\n\n[agent]')
    path = write(tmp_path, text.replace('"higher"', '"lower"'))
    pristine = text.encode()
    loaded = load_manifest(path, read_pristine=lambda ws, rel: pristine if rel == "crucible.toml" else None)
    assert loaded.frozen_from_base
    assert loaded.manifest.judge is not None and loaded.manifest.judge.direction.value == "higher"
    assert any("base commit" in w for w in loaded.warnings)


def test_frozen_loading_before_any_base_commit_warns_and_trusts_the_tree(tmp_path: Path) -> None:
    text = BASE.replace("[agent]", '[workspace]\ndir = "."\n\n[agent]')
    loaded = load_manifest(write(tmp_path, text), read_pristine=lambda ws, rel: None)
    assert not loaded.frozen_from_base
    assert any(w.startswith("WARNING") and "this run only" in w for w in loaded.warnings)


def test_manifest_outside_the_workspace_is_not_frozen(tmp_path: Path) -> None:
    calls: list[str] = []
    load_manifest(write(tmp_path, BASE), read_pristine=lambda ws, rel: calls.append(rel))
    assert calls == []
