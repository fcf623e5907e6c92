"""Wide rounds end to end: real git workspaces, the real CLI, a scripted command agent.

The proposer is a Python script. In a wide round (CRUCIBLE_CANDIDATE set) it writes the cost
its approach names into program.txt, in its own worktree; in the deep loop it lowers the cost
by one. Concurrency is shown without a clock: each wide proposer marks that it started, then
waits until every candidate has started, and fails if that never happens (as it would if the
candidates ran one after another). Serial measurement is shown the same way: the measure holds
an exclusive lock file while it runs and reads invalid if another measure holds it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crucible_core.flow.decode import read_session
from crucible_core.flow.fold import fold_flow
from tests.cli_support import CRUCIBLE, crucible_env, run_crucible
from tests.e2e.session import assert_one_trailing_shutdown, events, rows

PROPOSE = """\
import os, pathlib, re, sys, time
root = pathlib.Path({root!r})
p = pathlib.Path("program.txt")
slot = os.environ.get("CRUCIBLE_CANDIDATE")
if slot is None:
    cost = float(re.search(r"cost = (\\S+)", p.read_text()).group(1))
    p.write_text("cost = %g\\n" % (cost - 1))
    sys.exit(0)
approach = os.environ["CRUCIBLE_APPROACH"]
(root / "started").mkdir(exist_ok=True)
(root / "started" / slot).write_text(os.getcwd())
width = int((root / "width").read_text())
deadline = time.monotonic() + 60
while len(list((root / "started").iterdir())) < width:
    if time.monotonic() > deadline:
        sys.exit("the other candidates never started: proposals are not concurrent")
    time.sleep(0.05)
for hold in (root / "hold", root / ("hold-" + slot)):
    while hold.exists():  # a test holding the round open to kill the engine mid-round
        time.sleep(0.05)
if (root / ("fail-" + slot)).exists():
    sys.exit("candidate " + slot + " failed on purpose")
(root / "proposed").mkdir(exist_ok=True)
(root / "proposed" / slot).write_text("")
if approach != "nothing":
    p.write_text("cost = %s\\n" % approach.split()[-1])
"""

MEASURE = """\
import json, os, pathlib, re, sys
root = pathlib.Path({root!r})
lock = root / "measure.lock"
try:
    fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
except FileExistsError:
    print(json.dumps({{"valid": False, "note": "two measures at once"}}))
    sys.exit(0)
try:
    with open(root / "measures.log", "a") as log:
        log.write(pathlib.Path("program.txt").read_text())
    cost = float(re.search(r"cost = (\\S+)", pathlib.Path("program.txt").read_text()).group(1))
    print(json.dumps({{"valid": True, "score": cost, "note": "cost %g" % cost}}))
finally:
    os.close(fd)
    lock.unlink()
"""

MANIFEST = """\
[repo]
path = "."

[workspace]
dir = "workspace"
setup_cmd = "mkdir -p workspace && cp program.txt workspace/"
inject = ["measure.py"]

[agent]
backend = "command"
agent_cmd = "{python} {propose}"
goal = "Lower the cost in program.txt."

[judge]
measure_cmd = "{python} measure.py"
direction = "lower"
{extra}
"""

APPROACHES = ["cost 90", "cost 70", "cost 95", "cost 80"]


def make_domain(tmp_path: Path, *, extra: str = "", width: int = 4) -> Path:
    root = tmp_path / "domain"
    root.mkdir()
    (root / "program.txt").write_text("cost = 100\n")
    (root / "width").write_text(str(width))
    (root / "measure.py").write_text(MEASURE.format(root=str(root)))
    (root / "propose.py").write_text(PROPOSE.format(root=str(root)))
    manifest = root / "crucible.toml"
    manifest.write_text(MANIFEST.format(python=sys.executable, propose=root / "propose.py", extra=extra))
    return manifest


def search(width: int = 4, approaches: list[str] = APPROACHES, **keys: object) -> str:
    lines = ["[search]", f"wide = {width}", f"approaches = {json.dumps(approaches)}"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in keys.items()]
    return "\n".join(lines) + "\n"


def worktrees(manifest: Path) -> list[str]:
    done = subprocess.run(
        ["git", "worktree", "list", "--porcelain"],
        cwd=manifest.parent / "workspace",
        capture_output=True,
        text=True,
        check=True,
    )
    return [line for line in done.stdout.splitlines() if line.startswith("worktree ")]


def forks(manifest: Path) -> list[str]:
    """The forks on disk, and beside each the engine git directory the world made for it."""
    private = manifest.parent / "state" / "private"
    found = []
    for where in (private / "wide" / "forks", private / "world" / "engine-git"):
        found += sorted(p.name for p in where.iterdir()) if where.is_dir() else []
    return found


def assert_no_fork_left(manifest: Path) -> None:
    assert len(worktrees(manifest)) == 1, worktrees(manifest)  # the main workspace only, as ever
    assert forks(manifest) == []


def wide_rows(manifest: Path) -> list[dict]:
    return [r for r in rows(manifest) if r.get("phase") == "wide"]


def by_slot(manifest: Path) -> dict[int, dict]:
    """The wide rows by the candidate slot their note names (every wide row sits at iter 0)."""
    found = {}
    for r in wide_rows(manifest):
        assert r["iter"] == 0
        found[int(re.search(r"candidate (\d+)", r["note"]).group(1))] = r
    return found


def test_a_wide_round_proposes_concurrently_measures_serially_and_keeps_the_best(tmp_path: Path) -> None:
    manifest = make_domain(tmp_path, extra=search())
    done = run_crucible("--manifest", manifest, "--iterations", "2")
    assert done.returncode == 0, done.stderr
    root = manifest.parent
    # every candidate waited for all the others: the four turns ran at the same time
    assert sorted(p.name for p in (root / "proposed").iterdir()) == ["1", "2", "3", "4"]
    # each ran in its own worktree under the state directory, not in the main workspace
    cwds = {(root / "started" / s).read_text() for s in "1234"}
    assert len(cwds) == 4 and all("/state/private/wide/forks/" in c for c in cwds)
    wide = wide_rows(manifest)
    assert len(wide) == 4
    assert all(r["valid"] for r in wide), wide  # never two measures at once
    last = wide[-1]
    assert last["decision"] == "keep" and last["score"] == 70
    assert last["note"].startswith("wide round decided: candidate 2")
    # the kept winner's row carries its change against the baseline it was proposed from
    assert last["diffstat"] == "1 file changed, 1 insertion(+), 1 deletion(-)"
    assert "-cost = 100\n+cost = 70\n" in last["diff"]
    assert sorted(by_slot(manifest)) == [1, 2, 3, 4]
    # deep rows carry no phase, start from the winner, and count iterations from 1
    deep = [r for r in rows(manifest) if "phase" not in r]
    assert [r["iter"] for r in deep] == [0, 1, 2]
    assert [r["score"] for r in deep] == [100, 69, 68]
    # the flow page draws the round before iteration 1, and the best it kept
    flow = fold_flow(read_session(root / "state" / "session.jsonl"))
    assert [(it.iter, it.decision, it.score, it.best) for it in flow.iterations] == [
        (0, "keep", 70, 70),
        (1, "keep", 69, 69),
        (2, "keep", 68, 68),
    ]
    assert flow.iterations[0].wide and len(flow.iterations[0].candidates) == 4
    assert assert_one_trailing_shutdown(manifest)["outcome"] == "finished"
    assert (root / "workspace" / "program.txt").read_text() == "cost = 68\n"
    assert_no_fork_left(manifest)
    phases = [e["phase"] for e in events(manifest) if e["kind"] == "phase"]
    assert phases.index("wide") < phases.index("iteration")


def test_cli_overrides_width_and_a_failed_or_unchanged_candidate_is_not_measured(tmp_path: Path) -> None:
    approaches = ["cost 90", "nothing", "cost 60"]
    manifest = make_domain(tmp_path, extra=search(width=1, approaches=approaches), width=3)
    (manifest.parent / "fail-3").write_text("")
    done = run_crucible("--manifest", manifest, "--iterations", "1", "--wide", "3", "--wide-keep", "2")
    assert done.returncode == 0, done.stderr
    wide = by_slot(manifest)
    assert wide[1]["decision"] == "keep" and wide[1]["score"] == 90
    assert wide[2]["score"] is None and "no change" in wide[2]["note"]
    assert wide[3]["score"] is None and "failed on purpose" in wide[3]["note"]
    measured = (manifest.parent / "measures.log").read_text().splitlines()
    assert measured.count("cost = 60") == 0  # the failed turn's candidate was never measured
    assert_no_fork_left(manifest)


def test_halving_re_measures_the_leaders(tmp_path: Path) -> None:
    manifest = make_domain(tmp_path, extra=search(policy="halving", policy_k=1))
    done = run_crucible("--manifest", manifest, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    measured = (manifest.parent / "measures.log").read_text().splitlines()
    # baseline, 4 candidates, the better 2 again, the best once more, then one deep iteration
    assert len(measured) == 1 + 4 + 2 + 1 + 1
    assert measured[5:8] == ["cost = 70", "cost = 80", "cost = 70"]
    wide = by_slot(manifest)
    assert wide[2]["decision"] == "keep" and wide[2]["score"] == 70
    assert "winner 1 of 1" in wide[2]["note"]


@pytest.mark.parametrize(
    ("extra", "args", "words"),
    [
        (
            search(width=3, approaches=["a", "b"]),
            (),
            "[search].wide = 3 needs at least 3 [search].approaches",
        ),
        (search(policy="round-robin"), (), "[search].policy must be one of top-k, halving"),
        (search(policy_k=5), (), "[search].policy_k must be between 1 and [search].wide (4)"),
        (search(), ("--wide", "5"), "--wide = 5 needs at least 5"),
        (search(), ("--wide-keep", "9"), "--wide-keep must be between 1"),
        ("[search]\nwide = 1\napproches = ['a']\n", (), "approches"),
        (search() + '\n[world]\napply_cmd = "true"\n', (), "the 'command' world cannot"),
    ],
)
def test_a_wide_round_that_cannot_run_is_refused_before_anything_starts(
    tmp_path: Path, extra: str, args: tuple[str, ...], words: str
) -> None:
    manifest = make_domain(tmp_path, extra=extra)
    done = run_crucible("--manifest", manifest, "--iterations", "1", *args)
    assert done.returncode == 10, done.stderr
    assert words in done.stderr
    assert not (manifest.parent / "workspace").exists()


def _wait_for(predicate, what: str, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_a_sigkill_mid_round_resumes_without_proposing_finished_candidates_again(tmp_path: Path) -> None:
    manifest = make_domain(tmp_path, extra=search())
    root = manifest.parent
    (root / "hold").write_text("")
    (root / "hold-4").write_text("")  # candidate 4 is still at work when the engine dies
    proc = subprocess.Popen(
        [str(CRUCIBLE), "--manifest", str(manifest), "--iterations", "1"],
        env=crucible_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_for(
            lambda: (root / "started").is_dir() and len(list((root / "started").iterdir())) == 4, "4 starts"
        )
        # let three candidates finish, then kill the engine while the fourth still works
        (root / "hold").unlink()
        records = root / "state" / "private" / "wide" / "candidates"
        _wait_for(lambda: len(list(records.glob("*.json"))) >= 3, "three finished proposals")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    finished = sorted(p.stem for p in records.glob("*.json"))
    assert finished == ["1", "2", "3"]
    assert len(forks(manifest)) >= 2  # candidate 4's fork (and its engine git directory) outlived the engine
    (root / "hold-4").unlink()
    for marker in (root / "started").iterdir():
        marker.unlink()
    (root / "width").write_text(str(4 - len(finished)))  # only the unfinished candidates start again
    proposed_before = {p.name for p in (root / "proposed").iterdir()}
    done = run_crucible("--manifest", manifest, "--resume", "--iterations", "1")
    assert done.returncode == 0, done.stderr
    recovery = [e for e in events(manifest) if e["kind"] == "recovery"]
    assert recovery and recovery[-1]["class"] == "died_in_wide_round"
    started_again = sorted(p.name for p in (root / "started").iterdir())
    assert started_again == ["4"]
    assert not proposed_before & set(started_again)
    wide = wide_rows(manifest)
    assert sorted(by_slot(manifest)) == [1, 2, 3, 4] and len(wide) == 4
    assert wide[-1]["decision"] == "keep" and wide[-1]["score"] == 70
    deep = [r for r in rows(manifest) if "phase" not in r]
    assert [r["score"] for r in deep] == [100, 69]
    assert_no_fork_left(manifest)


def test_an_operator_stop_during_the_round_leaves_no_worktree(tmp_path: Path) -> None:
    manifest = make_domain(tmp_path, extra=search())
    root = manifest.parent
    (root / "hold").write_text("")
    proc = subprocess.Popen(
        [str(CRUCIBLE), "--manifest", str(manifest), "--iterations", "3"],
        env=crucible_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _wait_for(
            lambda: (root / "started").is_dir() and len(list((root / "started").iterdir())) == 4, "4 starts"
        )
        assert len(forks(manifest)) == 8  # four forks, each with its engine git directory
        proc.send_signal(signal.SIGTERM)
        (root / "hold").unlink()
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 3, stderr
    assert assert_one_trailing_shutdown(manifest)["outcome"] == "stopped"
    assert [r["iter"] for r in rows(manifest) if "phase" not in r] == [0]  # no deep iteration ran
    assert_no_fork_left(manifest)


def test_plan_show_prints_the_wide_round_graph_the_run_executes(tmp_path: Path) -> None:
    manifest = make_domain(tmp_path, extra=search(width=3, approaches=["a", "b", "c"]))
    done = run_crucible("plan", "show", "--manifest", manifest, "--wide-round")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["order"] == ["propose-1", "propose-2", "propose-3", "measure", "decide"]
    tables = {t["name"]: t for t in shown["task_tables"]}
    assert tables["propose-2"]["isolation"] == "worktree"
    assert tables["measure"].get("isolation", "shared") == "shared"
    assert tables["measure"]["depends_on"] == ["propose-1", "propose-2", "propose-3"]


def test_check_reports_the_wide_round_and_refuses_a_world_that_cannot_fork(tmp_path: Path) -> None:
    manifest = make_domain(tmp_path, extra=search())
    done = run_crucible("check", "--manifest", manifest)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "wide round: 4 candidates (top-k, 1 seed the deep loop); the git world forks" in done.stdout
    (tmp_path / "cmd").mkdir()
    command_world = make_domain(tmp_path / "cmd", extra=search() + '\n[world]\napply_cmd = "true"\n')
    done = run_crucible("check", "--manifest", command_world)
    assert done.returncode != 0
    assert "the 'command' world cannot" in done.stdout + done.stderr
