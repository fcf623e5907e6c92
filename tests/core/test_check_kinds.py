"""`api.check` finds what `crucible check` prints, line for line, for every kind of manifest.

Each case checks a copied example both ways in this process: the command through click, the
library through `api.check`; the command's lines are the library's findings with their marks,
followed by its closing verdict and exit code.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from crucible_core import api
from crucible_core.cli.check_cmd import MARKS
from tests.cli_support import crucible_in_process, run_crucible


def _both(manifest: Path, ui: str | None = None) -> tuple[api.CheckReport, list[str], int]:
    report = api.check(manifest, ui=ui)
    printed = crucible_in_process("check", "--manifest", manifest, *(("--ui", ui) if ui else ()))
    return report, printed.output.splitlines(), printed.exit_code


def _as_printed(report: api.CheckReport) -> list[str]:
    return [f"{MARKS[level]} {text}" for level, text in report.lines]


def test_a_playbook_is_checked_as_a_playbook(example: Callable[[str], Path]) -> None:
    report, printed, code = _both(example("playbook"))

    assert (code, report.failed) == (0, False)
    assert printed == [*_as_printed(report), "check passed"]
    texts = [text for _, text in report.lines]
    assert any(t.startswith("workflow (playbook) compiled and validated:") for t in texts), texts
    # a playbook is not a task-mode loop: nothing about a missing [judge]
    assert not any("TASK MODE" in t for t in texts), texts


def test_a_lost_service_fails_both_the_same_way(
    example: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CRUCIBLE_SERVICE_CATALOG", raising=False)  # no tool is attested
    report, printed, code = _both(example("service-cluster"))

    assert (code, report.failed) == (int(api.ExitCode.CHECK_FAILED), True)
    assert printed == [*_as_printed(report), "check failed"]
    fails = [text for level, text in report.lines if level == "fail"]
    assert len(fails) == 1 and fails[0].startswith("task deploy needs service.cluster:"), report.lines
    assert fails[0].endswith("it truncates the plan")


def test_a_missing_reporter_fails_before_the_manifest_is_read(example: Callable[[str], Path]) -> None:
    manifest = example("counter")
    manifest.write_text("this is not toml [")  # never reached: the --ui check stops first
    report, printed, code = _both(manifest, ui="nonesuch")

    assert (code, report.failed) == (int(api.ExitCode.CHECK_FAILED), True)
    assert printed == [*_as_printed(report), "check failed"]
    assert [level for level, _ in report.lines] == ["fail"]
    assert "nonesuch" in report.lines[0][1]


def test_a_broken_manifest_raises_what_the_command_exits_with(example: Callable[[str], Path]) -> None:
    manifest = example("counter")
    manifest.write_text(manifest.read_text() + "\n[nonesuch]\nkey = 1\n")

    with pytest.raises(api.ManifestError) as refused:
        api.check(manifest)
    printed = run_crucible("check", "--manifest", manifest)  # the command's error handling is the point

    assert printed.returncode == refused.value.exit_code == api.ExitCode.MANIFEST
    assert refused.value.render() in printed.stderr and "nonesuch" in refused.value.render()
