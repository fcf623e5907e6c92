"""Bad input gets a one-line error with a documented exit code, no traceback, and loses nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_support import run_crucible
from tests.e2e.session import assert_one_trailing_shutdown, events, rows


def assert_clean_error(done, code: int, *fragments: str) -> None:
    assert done.returncode == code, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    errors = [line for line in done.stderr.splitlines() if line.startswith("crucible: error:")]
    assert len(errors) == 1, done.stderr
    for fragment in fragments:
        assert fragment in errors[0]


def test_malformed_toml(example) -> None:
    manifest = example("counter")
    manifest.write_text(manifest.read_text().replace('direction = "higher"', 'direction = "higher'))
    assert_clean_error(run_crucible("--manifest", manifest), 10, str(manifest), "line", "column")


def test_unknown_key(example) -> None:
    manifest = example("counter")
    manifest.write_text(manifest.read_text().replace("[judge]", "[judge]\nmesure_cmd = 'x'"))
    assert_clean_error(run_crucible("--manifest", manifest), 10, "mesure_cmd", "[judge]")


def test_a_misspelled_required_key_names_the_key_it_probably_is(example) -> None:
    manifest = example("counter")
    manifest.write_text(manifest.read_text().replace("measure_cmd =", "measure_cmdd ="))
    assert_clean_error(
        run_crucible("--manifest", manifest),
        10,
        "unknown key 'measure_cmdd' in [judge] (did you mean measure_cmd?)",
        "[judge].measure_cmd is required",
    )


def test_a_misspelled_core_agent_key_is_named_by_core_not_the_backend(example) -> None:
    manifest = example("counter")
    manifest.write_text(manifest.read_text().replace("goal =", "gaol ="))
    done = run_crucible("--manifest", manifest)
    assert_clean_error(done, 10, "unknown key 'gaol' in [agent] (did you mean goal?)")
    assert "checked by" not in done.stderr and "backend-local" not in done.stderr


def test_missing_manifest(tmp_path: Path) -> None:
    assert_clean_error(
        run_crucible("--manifest", tmp_path / "nope.toml"), 10, "no such manifest", "crucible init"
    )


def test_missing_referenced_file(example) -> None:
    manifest = example("counter")
    manifest.write_text(manifest.read_text().replace('inject = ["measure.sh"]', 'inject = ["gate.sh"]'))
    assert_clean_error(run_crucible("--manifest", manifest), 10, "gate.sh", "matches no file")


def test_unknown_backend_suggests(example) -> None:
    manifest = example("counter")
    manifest.write_text(manifest.read_text().replace('backend = "command"', 'backend = "comand"'))
    assert_clean_error(
        run_crucible("--manifest", manifest), 12, "comand", "installed:", "did you mean 'command'"
    )


@pytest.mark.parametrize(
    ("script", "note"),
    [
        ("echo 'all good, probably'", "no JSON verdict"),
        ("true", "no JSON verdict"),
        ("echo '{\"valid\": tru'", "not valid JSON"),
        ('echo \'{"valid": true, "score": 9}\'; exit 3', "exited 3"),
        ("echo '{\"valid\": true}'", 'says "valid": true but has no "score"'),
        ('echo \'{"valid": "yes", "score": 1}\'', "\"valid\" must be true or false, not 'yes'"),
    ],
)
def test_a_measure_that_prints_garbage_reads_invalid_and_the_run_stops_at_its_baseline(
    example, script: str, note: str
) -> None:
    """With no valid baseline every candidate would be discarded: stop before spending a turn."""
    manifest = example("counter")
    (manifest.parent / "measure.sh").write_text(f"#!/bin/sh\n{script}\n")
    done = run_crucible("--manifest", manifest, "--iterations", "2")
    assert done.returncode == 4, done.stderr
    assert "the baseline measure gave no valid reading" in done.stderr
    got = rows(manifest)
    assert [(r["decision"], r["valid"]) for r in got] == [("invalid", False)]
    assert note in got[0]["note"]
    assert assert_one_trailing_shutdown(manifest)["outcome"] == "error"


def test_a_measure_that_hangs_is_killed_at_its_deadline(example) -> None:
    manifest = example("counter")
    (manifest.parent / "measure.sh").write_text("#!/bin/sh\nsleep 600\n")
    manifest.write_text(
        manifest.read_text().replace('objective = "value"', 'objective = "value"\nmeasure_timeout = 1')
    )
    done = run_crucible("--manifest", manifest, "--iterations", "1", timeout=60)
    assert done.returncode == 4, done.stderr
    got = rows(manifest)
    assert len(got) == 1 and not got[0]["valid"]
    assert "deadline" in got[0]["note"]


def test_an_agent_command_that_fails_is_a_discarded_iteration(example) -> None:
    manifest = example("counter")
    manifest.write_text(
        manifest.read_text().replace('agent_cmd = "./bump.sh"', 'agent_cmd = "echo nope >&2; exit 7"')
    )
    done = run_crucible("--manifest", manifest, "--iterations", "2")
    assert done.returncode == 0, done.stderr
    got = rows(manifest)
    assert [r["decision"] for r in got] == ["baseline", "discard", "discard"]
    assert "exited 7" in got[1]["note"] and "nope" in got[1]["note"]


def test_a_setup_command_that_fails_ends_the_run_with_a_clean_error_and_a_shutdown(example) -> None:
    manifest = example("counter")
    manifest.write_text(manifest.read_text().replace("mkdir -p workspace &&", "false &&"))
    done = run_crucible("--manifest", manifest, "--iterations", "2")
    assert done.returncode == 4
    assert "Traceback" not in done.stderr
    shutdown = assert_one_trailing_shutdown(manifest)
    assert shutdown["outcome"] == "error" and "setup_cmd" in shutdown["reason"]


def test_a_plain_rerun_after_a_failed_first_run_says_how_it_ended_and_to_resume(example) -> None:
    manifest = example("counter")
    fixed = manifest.read_text()
    manifest.write_text(fixed.replace('measure_cmd = "./measure.sh"', 'measure_cmd = "./missing.sh"'))
    first = run_crucible("--manifest", manifest, "--iterations", "1")
    assert first.returncode == 4
    manifest.write_text(fixed)  # the user fixes the manifest and runs again
    again = run_crucible("--manifest", manifest, "--iterations", "1")
    assert_clean_error(again, 11, "the run recorded there ended error after iteration 0", "--resume")
    resumed = run_crucible("--manifest", manifest, "--iterations", "1", "--resume")
    assert resumed.returncode == 0, resumed.stderr  # the baseline is measured again, now valid


def test_an_existing_workspace_is_refused_and_left_alone(example) -> None:
    manifest = example("counter")
    first = run_crucible("--manifest", manifest, "--iterations", "1")
    assert first.returncode == 0
    state = manifest.parent / "state" / "session.jsonl"
    before = state.read_bytes()
    value_before = (manifest.parent / "workspace" / "value.txt").read_text()
    again = run_crucible("--manifest", manifest, "--iterations", "1")
    assert_clean_error(again, 11, "already exists", "--resume")
    assert state.read_bytes() == before
    assert (manifest.parent / "workspace" / "value.txt").read_text() == value_before
    for line in before.decode().splitlines():
        json.loads(line)  # still readable, line by line


def test_the_log_of_a_failed_run_stays_readable(example) -> None:
    manifest = example("counter")
    (manifest.parent / "measure.sh").write_text("#!/bin/sh\necho garbage\n")
    run_crucible("--manifest", manifest, "--iterations", "1")
    assert events(manifest)[0]["kind"] == "start"
