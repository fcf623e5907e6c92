"""The embeddable Python API: `api.run`, `api.check` and `api.results` drive crucible without the CLI.

Real runs: the counter example copied into a temporary directory (a real git repository made by
the git world, the real measure script), in this process, through the same session as `crucible run`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from crucible_core import api
from crucible_core.session_log import read_events
from tests.cli_support import run_crucible


def test_a_run_from_python_reports_what_crucible_results_reports(example: Any) -> None:
    manifest = example("counter")
    seen: list[Mapping[str, Any]] = []

    result = api.run(manifest, iterations=3, on_event=seen.append)

    assert isinstance(result, api.RunResult)
    assert (result.outcome, result.exit_code, result.ok) == ("finished", api.ExitCode.OK, True)
    assert (result.baseline, result.best, result.kept, result.discarded) == (0, 3, 3, 0)
    assert result.iterations == 3
    assert result.state_dir == (manifest.parent / "state").resolve()
    # every event reached the callback, in the order (and with the content) it was written
    written = list(read_events(result.session_log))
    assert [dict(e) for e in seen] == written
    assert [e["seq"] for e in seen] == list(range(1, len(written) + 1))
    assert seen[0]["kind"] == "start" and seen[-1]["kind"] == "shutdown"
    # the same document the command prints for scripts
    printed = run_crucible("results", "--manifest", manifest, "--json")
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout) == dict(result.document) == api.results(result.state_dir)


def test_a_resume_from_python_continues_the_recorded_run(example: Any) -> None:
    manifest = example("counter")
    first = api.run(manifest, iterations=1)
    assert (first.best, first.iterations) == (1, 1)

    resumed = api.run(manifest, iterations=2, resume=True)

    assert (resumed.outcome, resumed.best, resumed.kept, resumed.iterations) == ("finished", 2, 2, 2)
    starts = [e for e in read_events(resumed.session_log) if e["kind"] == "start"]
    assert [s["resumed"] for s in starts] == [False, True]


def test_a_failing_callback_is_switched_off_and_the_run_goes_on(example: Any) -> None:
    manifest = example("counter")
    calls: list[str] = []

    def fragile(event: Mapping[str, Any]) -> None:
        calls.append(event["kind"])
        raise RuntimeError("the notebook cell broke")

    result = api.run(manifest, iterations=1, on_event=fragile)

    assert result.ok and result.best == 1
    assert calls == ["start"]  # called once, then muted
    notes = [e["msg"] for e in read_events(result.session_log) if e["kind"] == "note"]
    assert any("on_event" in n and "the notebook cell broke" in n for n in notes), notes


def test_refusals_are_typed_errors_and_leave_nothing_behind(example: Any) -> None:
    manifest = example("counter")
    manifest.write_text(manifest.read_text().replace("[judge]\n", '[judge]\nkind = "nonesuch"\n'))

    with pytest.raises(api.PluginError) as refused:
        api.run(manifest, iterations=1)

    assert refused.value.exit_code == api.ExitCode.PLUGIN
    assert "unknown judge 'nonesuch'" in refused.value.render()
    assert not (manifest.parent / "state").exists() and not (manifest.parent / "workspace").exists()
    with pytest.raises(api.WorkspaceError):
        api.results(manifest.parent / "state")


def test_check_from_python_measures_the_gate_without_a_turn(example: Any) -> None:
    manifest = example("counter")

    report = api.check(manifest)

    assert isinstance(report, api.CheckReport) and not report.failed
    texts = [text for _, text in report.lines]
    assert any("plugins: world=git judge=command backend=command" in t for t in texts), texts
    assert ("ok", "judge command measured the workspace: valid=True score=0.0 value=0") in report.lines
    assert not (manifest.parent / "state").exists()  # nothing ran

    (manifest.parent / "measure.sh").write_text("#!/bin/sh\necho 42\n")
    assert api.check(manifest).failed
