"""Looking at a finished run: RESULTS.md's chart and column, `crucible diff`, `results --json`, completion."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli_support import EXAMPLES, run_crucible

ALTERNATING = """#!/bin/sh
# good on odd iterations (+2), bad on even ones (-1)
set -eu
v=$(cat value.txt)
if [ $((CRUCIBLE_ITERATION % 2)) -eq 1 ]; then echo $((v + 2)) > value.txt; else echo $((v - 1)) > value.txt; fi
"""


@pytest.fixture(scope="module")
def alternating_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One finished counter run (1 -> 3 keep, 2 discard, 5 keep, 4 discard) the tests only read."""
    folder = tmp_path_factory.mktemp("views") / "counter"
    shutil.copytree(
        EXAMPLES / "counter", folder, ignore=shutil.ignore_patterns("workspace", "state", "STEER.md")
    )
    manifest = folder / "crucible.toml"
    (folder / "value.txt").write_text("1\n")
    (folder / "alternate.sh").write_text(ALTERNATING)
    (folder / "alternate.sh").chmod(0o755)
    text = manifest.read_text().replace("cp value.txt bump.sh", "cp value.txt alternate.sh")
    manifest.write_text(text.replace('agent_cmd = "./bump.sh"', 'agent_cmd = "./alternate.sh"'))
    done = run_crucible("--manifest", manifest, "--iterations", "4", "--no-early-stop")
    assert done.returncode == 0, done.stderr
    return manifest


def test_results_md_links_a_score_chart_and_shows_the_improvement(alternating_run: Path) -> None:
    manifest = alternating_run
    workspace = manifest.parent / "workspace"
    results = (workspace / "RESULTS.md").read_text()
    assert "![score by iteration](RESULTS-score.svg)" in results
    assert "| vs baseline |" in results
    assert "| 1 | keep | 3 | 3 | +200.0% |" in results  # 1 -> 3, higher is better
    assert "| 2 | discard | 2 | 3 | +100.0% |" in results
    chart = (workspace / "RESULTS-score.svg").read_text()
    assert chart.startswith("<svg") and chart.count('class="point"') == 4
    assert 'class="baseline"' in chart
    tracked = subprocess.run(["git", "-C", str(workspace), "ls-files"], capture_output=True, text=True).stdout
    assert "RESULTS-score.svg" not in tracked  # a view, never part of a kept commit


def test_diff_shows_the_best_change_and_a_kept_iterations_change(alternating_run: Path) -> None:
    manifest = alternating_run
    best = run_crucible("diff", "--manifest", manifest)
    assert best.returncode == 0, best.stderr
    assert "diff --git a/value.txt b/value.txt" in best.stdout
    assert "-1\n+5\n" in best.stdout  # baseline 1, best 5
    third = run_crucible("diff", "--manifest", manifest, "--iter", "3")
    assert third.returncode == 0, third.stderr
    assert "-3\n+5\n" in third.stdout  # kept iteration 3 moved 3 -> 5 (the discarded 2 never landed)
    stat = run_crucible("diff", "--manifest", manifest, "--best", "--stat")
    assert stat.stdout == " value.txt |    2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)\n"


def test_diff_of_a_discarded_iteration_says_why_there_is_none(alternating_run: Path) -> None:
    manifest = alternating_run
    done = run_crucible("diff", "--manifest", manifest, "--iter", "2")
    assert done.returncode == 64
    assert done.stderr.count("\n") == 1 and "iteration 2 was not kept (discard)" in done.stderr
    done = run_crucible("diff", "--manifest", manifest, "--iter", "9")
    assert done.returncode == 64 and "no iteration 9" in done.stderr


def test_results_json_for_scripts(alternating_run: Path) -> None:
    manifest = alternating_run
    done = run_crucible("results", "--json", "--manifest", manifest)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["baseline"], doc["best"], doc["kept"], doc["discarded"]) == (1, 5, 2, 2)
    assert doc["direction"] == "higher" and doc["improvement_pct"] == 400.0
    assert [(r["iter"], r["decision"], r["score"], r["best"]) for r in doc["rows"]] == [
        (1, "keep", 3, 3),
        (2, "discard", 2, 3),
        (3, "keep", 5, 5),
        (4, "discard", 4, 5),
    ]
    text = run_crucible("results", "--manifest", manifest)
    assert "best 5 vs baseline 1 (+400.0%)" in text.stdout


def test_completion_scripts_for_each_shell(tmp_path: Path) -> None:
    for shell, marker in (
        ("bash", "complete -o nosort -F"),
        ("zsh", "#compdef crucible"),
        ("fish", "complete --no-files --command crucible"),
    ):
        done = run_crucible("completion", shell)
        assert done.returncode == 0 and marker in done.stdout, (shell, done.stdout[:200])
    bad = run_crucible("completion", "tcsh")
    assert bad.returncode == 64


def test_completion_completes_commands(tmp_path: Path) -> None:
    from tests.cli_support import CRUCIBLE, crucible_env

    env = crucible_env(_CRUCIBLE_COMPLETE="bash_complete", COMP_WORDS="crucible fl", COMP_CWORD="1")
    done = subprocess.run([str(CRUCIBLE)], env=env, capture_output=True, text=True, timeout=60)
    assert "plain,flow" in done.stdout.splitlines()
