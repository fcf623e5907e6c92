"""SIGKILL `crucible plan run` at seeded instants; `--resume` finishes without re-running settled work.

Every task appends one line to its own marker file when it starts, so the number of lines is
the number of times it ran. A task that had settled before the kill must not gain a line on
resume, the log must hold exactly one plan_admitted and one task_result per task.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from crucible_core.session_log import read_events
from tests.cli_support import CRUCIBLE, crucible_env, run_crucible

SEED = 20261130
TRIALS = 4


def task(name: str, deps: list[str], *extra: str) -> str:
    command = f"echo x >> $RUNS/{name}; sleep 0.12; echo '{{\"score\": {len(name)}}}'"
    lines = [f'name = "{name}"', 'kind = "command"', "command = '''" + command + "'''"]
    lines.append(f"depends_on = {deps!r}".replace("'", '"'))
    return "[[task]]\n" + "\n".join([*lines, *extra]) + "\n"


def write_plan(root: Path) -> Path:
    layer1 = [f"wide{i}" for i in range(4)]
    body = ["version = 1\n[budget]\nusd = 10.0\n", task("root", [])]
    body += [task(n, ["root"], 'emits = ["score"]') for n in layer1]
    body.append(task("iso", ["root"], 'isolation = "worktree"'))
    body.append(task("advisory", ["root"], "required = false"))
    body.append(
        '[[task]]\nname = "best"\nkind = "top_k"\nk = 2\ndirection = "higher"\n'
        f"depends_on = {layer1!r}\n".replace("'", '"')
    )
    body.append(task("join", ["best", "iso"]))
    body.append(task("last", ["join"]))
    body.append(task("epilogue", [], 'stage = "epilogue"'))
    (root / "runs").mkdir()
    (root / "ws").mkdir()
    path = root / "plan.toml"
    path.write_text("".join(body))
    return path


def runs(root: Path) -> dict[str, int]:
    return {p.name: len(p.read_text().split()) for p in (root / "runs").iterdir()}


def settled(state: Path) -> set[str]:
    return {e["task"] for e in read_events(state / "session.jsonl") if e["kind"] == "task_result"}


def wait_for_settled(state: Path, count: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and proc.poll() is None:
        if (state / "session.jsonl").exists() and len(settled(state)) >= count:
            return
        time.sleep(0.01)


@pytest.mark.parametrize("trial", range(TRIALS))
def test_sigkill_then_resume_never_reruns_a_settled_task(tmp_path: Path, trial: int) -> None:
    rng = random.Random(SEED + trial)
    plan = write_plan(tmp_path)
    state = tmp_path / "state"
    args = [str(CRUCIBLE), "plan", "run", str(plan), "--state-dir", str(state), "--jobs", "3"]
    proc = subprocess.Popen(
        args,
        cwd=tmp_path / "ws",
        env=crucible_env(RUNS=str(tmp_path / "runs")),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    if trial:  # trial 0 dies before admission; the others after a seeded number of settlements
        wait_for_settled(state, rng.randint(1, 9), proc)
        time.sleep(rng.uniform(0.0, 0.1))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    time.sleep(0.3)  # the supervisor's guard reaps the dead engine's children
    before_settled = settled(state) if (state / "session.jsonl").exists() else set()
    before_runs = runs(tmp_path)

    done = run_crucible(
        "plan",
        "run",
        plan,
        "--state-dir",
        state,
        "--jobs",
        "3",
        "--resume",
        cwd=tmp_path / "ws",
        env=crucible_env(RUNS=str(tmp_path / "runs")),
    )
    assert done.returncode == 0, done.stderr + done.stdout

    events = list(read_events(state / "session.jsonl"))
    kinds = [e["kind"] for e in events]
    assert kinds.count("plan_admitted") == 1
    results = [e["task"] for e in events if e["kind"] == "task_result"]
    assert sorted(results) == sorted(set(results)) and len(results) == 11
    after_runs = runs(tmp_path)
    for name in before_settled:
        if name != "best":  # top_k runs in-process: no marker
            assert after_runs[name] == before_runs[name], f"{name} settled before the kill and ran again"
    assert len(before_settled) < 11 or trial == 0
    if before_settled:
        recovery = [e for e in events if e["kind"] == "recovery"]
        assert [r["class"] for r in recovery] == ["died_in_plan_task"]
    assert kinds[-1] == "shutdown" and kinds.count("shutdown") == 1


def test_resuming_a_finished_plan_runs_nothing(tmp_path: Path) -> None:
    plan = write_plan(tmp_path)
    state = tmp_path / "state"
    env = crucible_env(RUNS=str(tmp_path / "runs"))
    first = run_crucible("plan", "run", plan, "--state-dir", state, cwd=tmp_path / "ws", env=env)
    assert first.returncode == 0, first.stderr
    counts = runs(tmp_path)
    again = run_crucible("plan", "run", plan, "--state-dir", state, "--resume", cwd=tmp_path / "ws", env=env)
    assert again.returncode == 0 and "already finished" in again.stdout
    assert runs(tmp_path) == counts
    refused = run_crucible("plan", "run", plan, "--state-dir", state, cwd=tmp_path / "ws", env=env)
    assert refused.returncode == 11 and "--resume" in refused.stderr
