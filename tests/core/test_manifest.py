"""Manifest loading: every C-MANIFEST / C-PATHS rule, and errors that name file, key and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from crucible_core.durations import parse_duration
from crucible_core.errors import ExitCode, ManifestError, UnsupportedSectionError, UsageError
from crucible_core.manifest.loader import load_manifest
from crucible_core.manifest.paths import RunPaths

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
    assert loaded.world_kind == "git"
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


@pytest.mark.parametrize("section", ["measure", "scope"])
def test_sections_this_version_does_not_execute_are_refused(tmp_path: Path, section: str) -> None:
    with pytest.raises(UnsupportedSectionError) as err:
        load_manifest(write(tmp_path, BASE + f"\n[{section}]\n"))
    assert "not supported by this version" in err.value.render() and f"[{section}]" in err.value.render()


def test_a_table_no_installed_driver_owns_is_refused_by_the_selected_backend(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as err:
        load_manifest(write(tmp_path, BASE + '\n[agent.sandboxy]\nendpoints = ["x:443:full"]\n'))
    message = err.value.render()
    assert "unknown key 'sandboxy' in [agent]" in message
    assert "crucible-plugin-backend-local, which registered backend 'command'" in message


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
    assert loaded.world_kind == "command"


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


# --- hostile values: each is refused at load time, naming its key path (issue 8, items 4 and 9) ---


def refusal(tmp_path: Path, text: str) -> str:
    with pytest.raises(ManifestError) as err:
        load_manifest(write(tmp_path, text))
    return err.value.render()


def with_workspace(lines: str) -> str:
    return BASE.replace("[agent]", f"[workspace]\n{lines}\n\n[agent]")


def with_agent(lines: str) -> str:
    return BASE.replace('goal = "g"', lines if "goal" in lines else f'goal = "g"\n{lines}')


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ('".."', "'..'"),
        ('"../../elsewhere"', "'..'"),
        ('"/tmp/x"', "absolute"),
        ('"."', "manifest directory itself"),
        ('"./"', "manifest directory itself"),
        ('"state"', "state directory"),
        ('"state/ws"', "state directory"),
        ('"value.txt"', "existing file"),
        (f'"{"d" * 300}"', "longer than 255"),
        ('"ws\\u0000x"', "NUL"),
        ('"link"', "symlink"),
    ],
)
def test_workspace_dir_must_be_a_directory_strictly_inside_the_manifest_dir(
    tmp_path: Path, value: str, why: str
) -> None:
    (tmp_path / "value.txt").write_text("1")
    (tmp_path / "link").symlink_to(tmp_path.parent)
    text = refusal(tmp_path, with_workspace(f"dir = {value}"))
    assert "[workspace].dir" in text and why in text


@pytest.mark.parametrize("key", ["goal_file", "method_prompt"])
@pytest.mark.parametrize("value", ["/etc/passwd", "../../x", "out.md"])
def test_agent_files_may_not_leave_the_manifest_dir(tmp_path: Path, key: str, value: str) -> None:
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "out.md").symlink_to("/etc/passwd")
    line = f'{key} = "{value}"' if key == "method_prompt" else f'goal_file = "{value}"'
    text = refusal(pack, with_agent(line))
    assert f"[agent].{key}" in text and "manifest directory" in text


def test_toolbox_dir_may_not_be_the_filesystem_root(tmp_path: Path) -> None:
    from crucible_harness_claude.toolbox import resolve_toolbox

    with pytest.raises(ManifestError) as err:
        resolve_toolbox("/", tmp_path)
    text = err.value.render()
    assert "[agent].toolbox_dir" in text and "absolute" in text


def test_a_goal_file_inside_the_manifest_dir_still_loads(tmp_path: Path) -> None:
    (tmp_path / "goals").mkdir()
    (tmp_path / "goals" / "g.md").write_text("grow")
    loaded = load_manifest(write(tmp_path, with_agent('goal_file = "goals/g.md"')))
    assert loaded.goal_text() == "grow"


@pytest.mark.parametrize("key", ["[judge].measure_timeout", "[agent].turn_timeout"])
@pytest.mark.parametrize("value", ["1e300", str(2**63 - 1), "inf", "nan", "-5", "0", '"soon"', "true"])
def test_timeouts_out_of_range_are_refused(tmp_path: Path, key: str, value: str) -> None:
    name = key.split(".")[1]
    text = BASE + f"{name} = {value}\n" if key.startswith("[judge]") else with_agent(f"{name} = {value}")
    message = refusal(tmp_path, text)
    assert key in message and ("seconds" in message or "zero" in message or "year" in message)


@pytest.mark.parametrize(
    ("value", "seconds"), [("10", 10.0), ("2.5", 2.5), ('"10s"', 10.0), ('"5m"', 300.0), ('"1h30m"', 5400.0)]
)
def test_durations_accept_seconds_and_duration_text(tmp_path: Path, value: str, seconds: float) -> None:
    loaded = load_manifest(write(tmp_path, BASE + f"measure_timeout = {value}\n"))
    assert loaded.manifest.judge is not None and loaded.manifest.judge.measure_timeout == seconds
    loaded = load_manifest(write(tmp_path, with_agent(f"turn_timeout = {value}")))
    assert loaded.manifest.agent.turn_timeout == seconds


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (BASE.replace('"./measure.sh"', '"./measure.sh\\u0000; rm -rf /"'), "[judge].measure_cmd"),
        (BASE.replace('agent_cmd = "true"', 'agent_cmd = "t\\u0000"'), "[agent].agent_cmd"),
        (with_workspace('setup_cmd = "a\\u0000b"'), "[workspace].setup_cmd"),
        (with_workspace('inject = ["a\\u0000b"]'), "[workspace].inject[0]"),
        (with_agent('env = { "A=B" = "x" }'), "[agent].env"),
        (with_agent('env = { "" = "x" }'), "[agent].env"),
        (with_agent('env = { "A\\u0000" = "x" }'), "[agent].env"),
        (with_agent('env = { A = "x\\u0000" }'), "[agent.env].A"),
        (with_agent("env = { A = 5 }"), "[agent.env].A"),
    ],
)
def test_nul_bytes_and_bad_env_names_are_refused(tmp_path: Path, text: str, where: str) -> None:
    message = refusal(tmp_path, text)
    assert where in message


def test_a_deeply_nested_array_is_refused_not_a_recursion_error(tmp_path: Path) -> None:
    message = refusal(tmp_path, BASE + "x = " + "[" * 5000 + "]" * 5000 + "\n")
    assert "nested too deeply" in message


def test_selftest_runs_is_bounded(tmp_path: Path) -> None:
    message = refusal(
        tmp_path, BASE + '\n[judge.selftest]\ngood_cmd = "a"\nbad_cmd = "b"\nruns = 1000000000000000000\n'
    )
    assert "[judge.selftest].runs" in message and "at most" in message


@pytest.mark.parametrize("key", ["carry_forward", "inject"])
def test_a_string_where_an_array_belongs_is_refused_not_split_into_characters(
    tmp_path: Path, key: str
) -> None:
    message = refusal(tmp_path, with_workspace(f'{key} = "abc"'))
    assert f"[workspace].{key}" in message and "array" in message


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (BASE.replace("[judge]", "[[judge]]"), "[judge]"),
        ("judge = 5\n" + BASE.split("[judge]")[0], "[judge]"),
        (with_workspace("carry_forward = 5"), "[workspace].carry_forward"),
        (with_workspace("inject = [5]"), "[workspace].inject[0]"),
        (with_workspace("inject = [{ src = 5 }]"), "[workspace].inject[0].src"),
        (with_agent("env = [1, 2]"), "[agent].env"),
        (BASE.replace('"higher"', "5"), "[judge].direction"),
        ("repo = [1]\n" + BASE.replace('[repo]\npath = "."', ""), "[repo]"),
    ],
)
def test_wrong_shapes_name_the_key_path_without_python_wording(tmp_path: Path, text: str, where: str) -> None:
    message = refusal(tmp_path, text)
    assert where in message
    for python_wording in ("object", "attribute", "iterable", "Traceback", "NoneType", "<class"):
        assert python_wording not in message


def test_a_misspelled_key_gets_a_did_you_mean(tmp_path: Path) -> None:
    message = refusal(tmp_path, BASE.replace("direction =", "directon ="))
    assert "directon" in message and "did you mean direction?" in message
    message = refusal(tmp_path, BASE.replace("[judge]", "[jugde]"))
    assert "did you mean judge?" in message


def test_every_unsupported_section_is_named_at_once(tmp_path: Path) -> None:
    text = BASE.replace('goal = "g"', 'goal = "g"\nallow_unverified_image = true') + (
        '\n[scope]\nx = 1\n\n[[agent.relay]]\nname = "a"\n\n[measure]\ny = 2\n\n[rig]\nbackend = "helm"\n'
    )
    with pytest.raises(UnsupportedSectionError) as err:
        load_manifest(write(tmp_path, text))
    message = err.value.render()
    for name in ("[scope]", "[[agent.relay]]", "[measure]", "[rig]", "[agent].allow_unverified_image"):
        assert name in message
    assert "[]" not in message
    assert err.value.exit_code == ExitCode.UNSUPPORTED != ExitCode.MANIFEST


@pytest.mark.parametrize("judge", [True, False])
def test_only_a_playbook_may_leave_out_repo_even_with_a_setup_cmd(tmp_path: Path, judge: bool) -> None:
    text = BASE.replace('[repo]\npath = "."\n', "").replace(
        "[agent]", '[workspace]\nsetup_cmd = "mkdir workspace"\n\n[agent]'
    )
    if not judge:  # a task manifest is no playbook either
        text = text.split("[judge]")[0]
    message = refusal(tmp_path, text)
    assert "[repo] is required: only a playbook may leave it out" in message
    assert "[repo] is required" in refusal(tmp_path, BASE.replace('[repo]\npath = "."\n', ""))
    playbook = (
        text.split("[judge]")[0]
        + '\n[workflow]\ntype = "playbook"\n[[workflow.task]]\nname = "a"\nkind = "command"\nrun = "true"\n'
    )
    assert load_manifest(write(tmp_path, playbook)).manifest.repo is None


@pytest.mark.parametrize("setup", ["", 'setup_cmd = "mkdir workspace"'])
def test_a_repo_path_that_does_not_exist_is_refused(tmp_path: Path, setup: str) -> None:
    text = BASE.replace('path = "."', 'path = "does/not/exist"').replace(
        "[agent]", f"[workspace]\n{setup}\n\n[agent]"
    )
    message = refusal(tmp_path, text)
    assert "[repo].path" in message and "does/not/exist" in message


def test_inject_sources_inside_the_workspace_are_refused(tmp_path: Path) -> None:
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "measure.sh").write_text("x")
    message = refusal(tmp_path, with_workspace('inject = ["workspace/measure.sh"]'))
    assert "inside the workspace" in message


def test_a_state_dir_inside_the_workspace_is_refused(tmp_path: Path) -> None:
    loaded = load_manifest(write(tmp_path, BASE))
    with pytest.raises(UsageError, match=r"--state-dir: the state directory .* is inside the workspace"):
        RunPaths.resolve(loaded, state_dir=tmp_path / "workspace" / "state")
    with pytest.raises(UsageError, match="inside the state directory"):
        RunPaths.resolve(loaded, state_dir=tmp_path)
    assert RunPaths.resolve(loaded, state_dir=tmp_path / "elsewhere").state_dir == tmp_path / "elsewhere"


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90.0), ("1h30m", 5400.0), ("1.5h", 5400.0), ("250ms", 0.25)]
)
def test_command_line_durations_share_the_manifest_forms(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["1h30", "soon", "9" * 40 + "d", "-5s"])
def test_command_line_durations_refuse_what_they_cannot_read(text: str) -> None:
    with pytest.raises(UsageError):
        parse_duration(text)


def test_noise_keys_load(tmp_path: Path) -> None:
    from crucible_core.contract.noise import Margin, Statistic

    judge = load_manifest(
        write(tmp_path, BASE + 'repeats = 5\nstatistic = "mean"\nmin_improvement = "2%"\nnoise = "auto"\n')
    ).manifest.judge
    assert judge is not None
    assert (judge.repeats, judge.statistic, judge.min_improvement, judge.noise) == (
        5,
        Statistic.MEAN,
        Margin(relative=0.02),
        "auto",
    )
    judge = load_manifest(write(tmp_path, BASE + "min_improvement = 0.5\n")).manifest.judge
    assert judge is not None and judge.min_improvement == Margin(absolute=0.5) and judge.repeats == 1


@pytest.mark.parametrize(
    ("lines", "words"),
    [
        ("repeats = 0", "repeats must be at least 1"),
        ("repeats = 1000", "at most 100"),
        ('repeats = "3"', "expected an integer"),
        ('min_improvement = "two"', "percentage"),
        ("min_improvement = -1", "at least 0"),
        ("min_improvement = true", "percentage"),
        ('statistic = "mode"', "median, mean"),
        ('noise = "loud"', 'must be "auto"'),
        ('noise = "auto"', "repeats of at least 2"),
    ],
)
def test_noise_keys_refused(tmp_path: Path, lines: str, words: str) -> None:
    assert words in refusal(tmp_path, BASE + lines + "\n")


@pytest.mark.parametrize("line", ['needs = "gpu"', 'needs = ["gpu"]'])
def test_the_judge_names_the_capability_its_measure_needs(tmp_path: Path, line: str) -> None:
    judge = load_manifest(write(tmp_path, BASE + line + "\n")).manifest.judge
    assert judge is not None and judge.needs == "gpu"


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ('needs = ["gpu", "a100"]', "[judge].needs: names one capability"),
        ("needs = []", "[judge].needs: names one capability"),
        ('needs = "any"', "[judge].needs: must name a capability"),
        ('needs = " "', "[judge].needs: must name a capability"),
        ("needs = 3", "[judge].needs"),
    ],
)
def test_judge_needs_refuses_anything_but_one_capability(tmp_path: Path, line: str, words: str) -> None:
    assert words in refusal(tmp_path, BASE + line + "\n")


def test_preflight_loads_rungs(tmp_path: Path) -> None:
    m = load_manifest(
        write(
            tmp_path,
            BASE
            + '\n[preflight]\ncommands = ["true"]\ntimeout = "5s"\n\n[[preflight.rung]]\nname = "cc"\n'
            + 'cmd = "cc --version"\nmessage = "install cc"\nwhen = "candidate"\n',
        )
    ).manifest
    assert m.preflight is not None
    assert [r.cmd for r in m.preflight.rungs("start")] == ["true"]
    (rung,) = m.preflight.rungs("candidate")
    assert (rung.label(), rung.message, m.preflight.timeout) == ("cc", "install cc", 5.0)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('\n[[preflight.rung]]\ncmd = "x"\nwhen = "later"\n', 'must be "start" or "candidate"'),
        ('\n[[preflight.rung]]\ncmd = " "\n', "cmd is empty"),
        ('\n[preflight]\ncommands = [""]\n', "commands[0] is empty"),
        ('\n[preflight]\nrung = "x"\n', "[[preflight.rung]]"),
        ('\n[[preflight.rung]]\nname = "x"\n', "cmd"),
    ],
)
def test_preflight_refusals(tmp_path: Path, text: str, words: str) -> None:
    assert words in refusal(tmp_path, BASE + text)


def test_preflight_needs_a_judge(tmp_path: Path) -> None:
    task = BASE.split("[judge]")[0] + '\n[preflight]\ncommands = ["true"]\n'
    assert "[preflight] needs a [judge]" in refusal(tmp_path, task)


@pytest.mark.parametrize(
    ("files", "rel", "expected"),
    [
        ({".gitignore": "workspace/\n"}, "workspace", True),
        ({".gitignore": "/workspace/\n"}, "workspace", True),
        ({".gitignore": "/workspace/\n"}, "sub/workspace", False),  # anchored at the root
        ({".gitignore": "workspace\n"}, "sub/workspace", True),  # a name matches at any depth
        ({"sub/.gitignore": "/state/\n"}, "sub/state", True),
        ({".gitignore": "sub/\n"}, "sub/state", True),  # a parent that is ignored
        ({".gitignore": "work*\n!workspace\n"}, "workspace", False),  # the last match decides
        ({".gitignore": "**/state\n"}, "a/b/state", True),
        ({".git/info/exclude": "state/\n"}, "state", True),
        ({".gitignore": "# workspace/\nstat\n"}, "state", False),
    ],
)
def test_the_ignore_reading_follows_the_usual_gitignore_patterns(
    tmp_path: Path, files: dict[str, str], rel: str, expected: bool
) -> None:
    from crucible_core.manifest.ignore_rules import ignored

    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert ignored(tmp_path, rel) is expected
