"""Scored workflows through `crucible run`: the authored graph is each iteration, the loop shell is the default's.

Every pack here is a real git repository, measured by a real script, with a shell script as
the agent on the command backend (no credentials): the critics and the synthesis are agent
tasks of the graph, the candidate is the loop's propose.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

from crucible_core.flow.decode import read_session
from crucible_core.flow.fold import fold_flow
from crucible_core.session_log import read_events
from tests.cli_support import CRUCIBLE, EXAMPLES, crucible_env, run_crucible

# The stand-in agent. As the loop's propose (no CRUCIBLE_TASK) it writes the value its
# iteration is scripted to; as a graph task it writes a result, except that the performance
# critic is always down (advisory: the synthesis still runs) and the correctness critic
# rejects a candidate of 1 (required: the iteration is discarded before any measure).
AGENT = """\
#!/bin/sh
set -eu
if [ -n "${CRUCIBLE_TASK:-}" ]; then
  echo "$CRUCIBLE_TASK" >> "$MARKS/tasks"
  case "$CRUCIBLE_TASK" in
    critic-performance) echo "the performance reviewer is down" >&2; exit 1 ;;
    critic-correctness)
      if [ -f "$MARKS/hang" ] && [ ! -f "$MARKS/hung" ]; then touch "$MARKS/hung"; sleep 60; fi
      if [ "$(cat value.txt)" = 1 ]; then echo "the candidate is wrong" >&2; exit 1; fi ;;
  esac
  printf '{"findings": "none"}' > PLAN_TASK_RESULT.json
  exit 0
fi
echo "propose $CRUCIBLE_ITERATION" >> "$MARKS/tasks"
case "$CRUCIBLE_ITERATION" in
  1) echo 3 > value.txt ;;
  2) echo 9 > value.txt ;;
  3) echo 1 > value.txt ;;
  *) echo 2 > value.txt ;;
esac
"""

MEASURE = """\
#!/bin/sh
echo "{\\"valid\\": true, \\"score\\": $(cat value.txt)}"
"""


def git_pack(pack: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=pack, check=True)
    subprocess.run(["git", "add", "-A"], cwd=pack, check=True)
    subprocess.run(
        ["git", "-c", "user.email=t@localhost", "-c", "user.name=t", "commit", "-qm", "pack"],
        cwd=pack,
        check=True,
    )


def adversarial_review(tmp_path: Path) -> tuple[Path, Path]:
    """The example as shipped, with the stand-in agent, a measure that reads value.txt, and value 5."""
    pack = tmp_path / "adversarial_review"
    shutil.copytree(
        EXAMPLES / "adversarial_review", pack, ignore=shutil.ignore_patterns("workspace", "state")
    )
    marks = tmp_path / "marks"
    marks.mkdir()
    agent = tmp_path / "agent.sh"
    agent.write_text(AGENT)
    (pack / "measure.sh").write_text(MEASURE)
    (pack / "value.txt").write_text("5\n")
    manifest = pack / "crucible.toml"
    text = manifest.read_text()
    assert "[agent]\n" in text
    manifest.write_text(
        text.replace("[agent]\n", f'[agent]\nbackend = "command"\nagent_cmd = "sh {agent}"\n')
    )
    git_pack(pack)
    return pack, marks


def events(pack: Path) -> list[dict[str, Any]]:
    return list(read_events(pack / "state" / "session.jsonl"))


def decided(pack: Path) -> list[tuple[int, str, float | None]]:
    return [
        (e["row"]["iter"], e["row"]["decision"], e["row"]["score"])
        for e in events(pack)
        if e["kind"] == "row"
    ]


def row_notes(pack: Path) -> dict[int, str]:
    return {e["row"]["iter"]: e["row"]["note"] for e in events(pack) if e["kind"] == "row"}


def test_adversarial_review_keeps_a_better_candidate_and_discards_the_rest(tmp_path: Path) -> None:
    pack, marks = adversarial_review(tmp_path)
    env = crucible_env(MARKS=str(marks))
    done = run_crucible(
        "run",
        "--manifest",
        pack / "crucible.toml",
        "--iterations",
        "3",
        "--ui",
        "headless",
        cwd=pack,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert decided(pack) == [
        (0, "baseline", 5.0),
        (1, "keep", 3.0),
        (2, "discard", 9.0),
        (3, "discard", None),
    ]
    # iteration 3 was better by the numbers (1 < 3), but the required critic blocked it before any measure
    assert "task 'critic-correctness' fail" in row_notes(pack)[3]
    tasks = (marks / "tasks").read_text().split()
    # each iteration ran the authored graph: the candidate, both critics, and (while the
    # required critic passed) the synthesis; the advisory critic's failure did not stop it
    assert tasks.count("synthesize") == 2 and tasks.count("critic-correctness") == 3
    assert tasks.count("critic-performance") == 3 and tasks[0] == "propose"
    workspace = pack / "workspace"
    assert (workspace / "value.txt").read_text() == "3\n"  # the kept state; the discards rolled back
    log = subprocess.run(
        ["git", "log", "--format=%s"], cwd=workspace, capture_output=True, text=True, check=True
    ).stdout
    assert log.count("crucible: iteration") == 1
    assert not (workspace / "PLAN_TASK_RESULT.json").exists()
    assert (pack / "state" / "workflow.toml").read_text() == (
        Path(__file__).parent.parent / "workflow_starlark" / "golden" / "adversarial_review.toml"
    ).read_text()
    # additive plan lines, one admission and one result per task per iteration; one shutdown
    kinds = [e["kind"] for e in events(pack)]
    assert kinds.count("plan_admitted") == 3 and kinds.count("shutdown") == 1
    results = [(e["iter"], e["task"], e["status"]) for e in events(pack) if e["kind"] == "task_result"]
    assert (3, "critic-correctness", "fail") in results and (3, "benchmark", "blocked") in results
    assert (1, "keep-if-better", "pass") in results and len(results) == 3 * 8
    # the summary and the readers work as for the default loop
    (summary,) = [e for e in events(pack) if e["kind"] == "summary"]
    assert summary["kept"] == 1 and summary["discarded"] == 2 and summary["best_score"] == 3.0
    shown = run_crucible("results", "--manifest", pack / "crucible.toml", cwd=pack, env=env)
    assert shown.returncode == 0 and "kept 1, discarded 2 (1 invalid)" in shown.stdout
    # the flow page shows each iteration's own graph, not the last one's as the run's plan
    flow = fold_flow(read_session(pack / "state" / "session.jsonl"))
    assert flow.plan == []
    graphs = {it.iter: {t.name: t.status for t in it.plan} for it in flow.iterations}
    assert graphs[1]["critic-correctness"] == "pass" and graphs[1]["keep-if-better"] == "pass"
    assert graphs[3]["critic-correctness"] == "fail" and graphs[3]["keep-if-better"] == "blocked"


SEEDED_PROPOSE = """\
#!/bin/sh
# A seeded proposer: the same value sequence every run, some better and some worse.
set -eu
echo $(( (CRUCIBLE_ITERATION * 37 + 11) % 17 )) > value.txt
"""


def seeded_domain(root: Path, workflow_star: str | None) -> Path:
    pack = root
    pack.mkdir()
    (pack / "value.txt").write_text("9\n")
    (pack / "propose.sh").write_text(SEEDED_PROPOSE)
    (pack / "measure.sh").write_text(MEASURE)
    (pack / "crucible.toml").write_text(
        textwrap.dedent(
            """\
            [repo]
            path = "."
            [workspace]
            dir = "workspace"
            inject = ["measure.sh", "propose.sh"]
            [agent]
            backend = "command"
            agent_cmd = "sh propose.sh"
            goal = "lower the value"
            [judge]
            measure_cmd = "sh measure.sh"
            direction = "lower"
            """
        )
    )
    if workflow_star is not None:
        (pack / "workflow.star").write_text(workflow_star)
    git_pack(pack)
    return pack


def test_default_autoresearch_keeps_the_same_rows_as_the_built_in_loop(tmp_path: Path) -> None:
    built_in = seeded_domain(tmp_path / "built_in", None)
    authored = seeded_domain(
        tmp_path / "authored",
        'workflow(type = "autoresearch", tasks = default_autoresearch([]), result = "decide")\n',
    )
    # grade(): the same score, read from an evaluate task of the graph instead of the judge
    graded = seeded_domain(
        tmp_path / "graded",
        textwrap.dedent(
            """\
            candidate = propose(name = "candidate")
            live = apply(name = "live", depends_on = [candidate])
            bench = evaluate(name = "bench", run = "sh measure.sh", depends_on = [live], emits = ["score"])
            score = grade(name = "score", evidence = [bench], score = bench)
            decision = decide(name = "d", measurement = score)
            workflow(type = "custom", tasks = [candidate, live, bench, score, decision], result = decision)
            """
        ),
    )
    for pack in (built_in, authored, graded):
        done = run_crucible(
            "run", "--manifest", pack / "crucible.toml", "--iterations", "6", "--ui", "headless"
        )
        assert done.returncode == 0, done.stdout + done.stderr
    assert decided(authored) == decided(built_in)
    assert decided(graded) == decided(built_in)
    notes = [note for i, note in row_notes(graded).items() if i > 0]
    assert notes and all(note == "graded by bench" for note in notes)
    assert {d for _, d, _ in decided(built_in)} == {"baseline", "keep", "discard"}
    assert (authored / "state" / "workflow.toml").exists()
    assert not (built_in / "state" / "workflow.toml").exists()


def test_a_scored_workflow_killed_mid_graph_resumes_like_the_default_loop(tmp_path: Path) -> None:
    pack, marks = adversarial_review(tmp_path)
    env = crucible_env(MARKS=str(marks))
    argv = [str(CRUCIBLE), "run", "--manifest", str(pack / "crucible.toml"), "--ui", "headless"]
    assert run_crucible(*argv[1:], "--iterations", "1", cwd=pack, env=env).returncode == 0
    (marks / "hang").touch()  # the correctness critic of iteration 2 hangs: the run dies there
    proc = subprocess.Popen(
        [*argv, "--resume", "--iterations", "2"],
        cwd=pack,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):
            if (marks / "hung").exists():
                break
            time.sleep(0.05)
        assert (marks / "hung").exists()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert decided(pack) == [(0, "baseline", 5.0), (1, "keep", 3.0)]
    # a resume with a different compiled workflow is refused, and nothing is changed
    star = pack / "workflow.star"
    original = star.read_text()
    star.write_text(original.replace('run = "sh measure.sh"', 'run = "true"'))
    refused = run_crucible(*argv[1:], "--resume", "--iterations", "2", cwd=pack, env=env)
    assert refused.returncode == 11 and "compiled workflow differs" in refused.stderr
    star.write_text(original)
    resumed = run_crucible(*argv[1:], "--resume", "--iterations", "2", cwd=pack, env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    # the half-run iteration 2 ran again from the kept state, and wrote its one row
    assert decided(pack) == [(0, "baseline", 5.0), (1, "keep", 3.0), (2, "discard", 9.0)]
    assert (pack / "workspace" / "value.txt").read_text() == "3\n"
    assert (marks / "tasks").read_text().split().count("propose") == 3


def test_a_scored_workflow_binds_its_launch_params_and_resumes_with_the_recorded_ones(tmp_path: Path) -> None:
    pack = seeded_domain(
        tmp_path / "params",
        textwrap.dedent(
            """\
            params = {"smoke": {"type": "string", "default": "true", "description": "a smoke test"}}
            workflow(
                type = "autoresearch",
                tasks = default_autoresearch([command(name = "smoke", run = param("smoke"))]),
                result = "decide",
            )
            """
        ),
    )
    manifest = pack / "crucible.toml"
    # the default ("true") would pass; the launch value fails the smoke test, so no candidate survives
    done = run_crucible(
        "run", "--manifest", manifest, "-n", "1", "--param", "smoke=false", "--ui", "headless"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'command = "false"' in (pack / "state" / "workflow.toml").read_text()
    assert "task 'smoke' fail" in row_notes(pack)[1]
    # a resume without --param keeps the recorded value, so the frozen workflow still matches
    resumed = run_crucible("run", "--manifest", manifest, "--resume", "-n", "2", "--ui", "headless")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert [(i, d) for i, d, _ in decided(pack)] == [(0, "baseline"), (1, "discard"), (2, "discard")]
    assert "task 'smoke' fail" in row_notes(pack)[2]
