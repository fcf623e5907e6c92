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


UNEVEN = """#!/bin/sh
# +2 on iterations 1 and 4, a value the measure cannot read on 2, a worse value on 3
set -eu
case "$CRUCIBLE_ITERATION" in
  2) echo oops > value.txt ;;
  3) echo 1 > value.txt ;;
  *) echo $(($(cat value.txt) + 2)) > value.txt ;;
esac
"""


@pytest.fixture(scope="module")
def uneven_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A counter run from 0: 1 keep (2), 2 invalid, 3 discard (1), 4 keep (4); and its console."""
    folder = tmp_path_factory.mktemp("uneven") / "counter"
    shutil.copytree(
        EXAMPLES / "counter", folder, ignore=shutil.ignore_patterns("workspace", "state", "STEER.md")
    )
    manifest = folder / "crucible.toml"
    (folder / "uneven.sh").write_text(UNEVEN)
    (folder / "uneven.sh").chmod(0o755)
    text = manifest.read_text().replace("cp value.txt bump.sh", "cp value.txt uneven.sh")
    manifest.write_text(text.replace('agent_cmd = "./bump.sh"', 'agent_cmd = "./uneven.sh"'))
    done = run_crucible("--manifest", manifest, "--iterations", "4")
    assert done.returncode == 0, done.stderr
    return manifest, done.stderr


def test_an_invalid_iteration_has_one_name_and_one_count_in_every_view(
    uneven_run: tuple[Path, str], tmp_path: Path
) -> None:
    """Issue 28: the console said "invalid" while results, show, RESULTS.md and the flow page
    said "discard" and "invalid 0". A discard without a valid reading is `invalid` everywhere,
    and counted among the discarded, as the console counts it."""
    manifest, console = uneven_run
    decisions = ["keep", "invalid", "discard", "keep"]
    assert "iter 2/4 invalid" in console and "2 kept, 2 discarded (1 invalid)" in console

    doc = json.loads(run_crucible("results", "--json", "--manifest", manifest).stdout)
    assert [r["decision"] for r in doc["rows"]] == decisions
    assert (doc["kept"], doc["discarded"], doc["invalid"]) == (2, 2, 1)
    text = run_crucible("results", "--manifest", manifest).stdout
    assert "kept 2, discarded 2 (1 invalid)" in text and "    2  invalid " in text

    shown = json.loads(run_crucible("show", "--json", "--manifest", manifest).stdout)
    assert [r["decision"] for r in shown["rows"]] == ["baseline", *decisions]
    assert "iter    2  invalid " in run_crucible("show", "--manifest", manifest).stdout

    results_md = (manifest.parent / "workspace" / "RESULTS.md").read_text()
    assert "| 2 | invalid | - | 2 | - |" in results_md and "| 3 | discard | 1 | 2 | +1 |" in results_md

    out = tmp_path / "flow.json"
    session = manifest.parent / "state" / "session.jsonl"
    assert run_crucible("flow", "--session", session, "--out", out).returncode == 0
    flow = json.loads(out.read_text())
    assert [it["decision"] for it in flow["iterations"]] == decisions
    h = flow["header"]
    assert (h["kept"], h["discarded"], h["invalid"]) == (2, 2, 1)


def test_a_baseline_of_zero_still_shows_how_far_each_score_moved(uneven_run: tuple[Path, str]) -> None:
    manifest, _ = uneven_run
    results_md = (manifest.parent / "workspace" / "RESULTS.md").read_text()
    assert "| 1 | keep | 2 | 2 | +2 |" in results_md and "| 4 | keep | 4 | 4 | +4 |" in results_md
    text = run_crucible("results", "--manifest", manifest).stdout
    assert "best 4 vs baseline 0 (+4)" in text


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
