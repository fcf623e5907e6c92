"""Command tasks supervised on the executor's dispatching thread: deadlines, retries, and their
interleaving with attempts that still run on the pool."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import attrs
import pytest

from crucible_core import process
from crucible_core.plan.kinds import Attempt, Outcome, TaskContext, TaskKindSpec
from tests.core.test_process import sleeper, wait_until_gone
from tests.plan.plan_support import core_kinds, results, run_plan

HEAD = "version = 1\n[budget]\nusd = 5.0\n"


def task(name: str, command: str, *extra: str) -> str:
    lines = [f'name = "{name}"', 'kind = "command"', f"command = {json.dumps(command)}", *extra]
    return "[[task]]\n" + "\n".join(lines) + "\n"


def _started_on(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the threads every supervised child is started on, in order."""
    threads: list[str] = []
    real_start = process.start

    def spy(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real_start(*args, **kwargs)

    monkeypatch.setattr(process, "start", spy)
    return threads


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes()
        except OSError:
            return True
        if stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] == b"Z":
            return True  # dead, waiting for whoever adopted it to reap it
        time.sleep(0.05)
    return False


def test_a_command_task_over_its_deadline_is_killed_with_its_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = _started_on(monkeypatch)
    pid_file = tmp_path / "ws" / "grandchild.pid"
    text = HEAD + "".join(
        [
            # the grandchild stays in the task's group: the deadline's group kill must reach it
            task("overrun", f"sleep 60 & echo $! > {pid_file}; sleep 60", "timeout = 1", "required = false"),
            task("beside", "sleep 0.3; echo '{\"ok\": true}'"),
            task("after", "echo done", 'depends_on = ["beside"]'),
        ]
    )
    began = time.monotonic()
    report, events = run_plan(tmp_path, text, jobs=2)
    took = time.monotonic() - began
    by_task = results(events)
    overrun = by_task["overrun"]
    assert overrun["status"] == "fail" and "killed at its deadline" in overrun["note"], overrun
    assert overrun["attempts"] == 1
    # the deadline (1 s), not the 60 s sleep; the grace (2 s) is not needed: sh dies on SIGTERM
    assert took < 10, took
    assert _gone(int(pid_file.read_text()), within=5), "the grandchild outlived its task's deadline"
    # the other slot was served while the first one ran over
    assert by_task["beside"]["status"] == "pass" and by_task["after"]["status"] == "pass"
    assert report.results["beside"].output == {"ok": True}
    # every child was started on the dispatching thread (this one), none on a pool thread
    assert threads == [threading.current_thread().name] * 3


def test_a_command_task_that_cannot_start_is_retried_on_the_dispatching_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = _started_on(monkeypatch)
    monkeypatch.setattr(process, "_SHELL", str(tmp_path / "no-such-shell"))
    report, events = run_plan(tmp_path, HEAD + task("cmd", "true", "retries = 2"))
    result = results(events)["cmd"]
    assert result["status"] == "transport" and result["attempts"] == 3, result
    assert result["transport"] == "command" and result["note"].count("could not start") == 3
    assert report.verdict == "fail"
    assert len(threads) == 3


@attrs.frozen
class _NapFields:
    seconds: float


def _nap(context: TaskContext) -> Attempt:
    fields: _NapFields = context.task.fields
    time.sleep(fields.seconds)
    return Attempt(Outcome.PASS, output={"who": context.task.name, "thread": threading.current_thread().name})


def test_command_tasks_and_an_in_process_task_interleave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool's settlement wakes the dispatching thread while its own children still run: a
    task waiting on the in-process one starts before the slow command ends."""
    threads = _started_on(monkeypatch)
    kinds = core_kinds()
    kinds.add("nap", TaskKindSpec("nap", _NapFields, _nap, describe="sleeps in-process"), "test")
    ws = tmp_path / "ws"
    text = HEAD + "".join(
        [
            task("slow", f'sleep 2; date +%s.%N > {ws}/slow.end; echo \'{{"who": "slow"}}\''),
            '[[task]]\nname = "nap"\nkind = "nap"\nseconds = 0.2\n',
            task(
                "after_nap",
                f'date +%s.%N > {ws}/after_nap.start; echo "$CRUCIBLE_INPUTS"',
                'depends_on = ["nap"]',
            ),
            task("join", 'echo "$CRUCIBLE_INPUTS"', 'depends_on = ["slow", "after_nap"]'),
        ]
    )
    report, events = run_plan(tmp_path, text, kinds=kinds, jobs=3)
    assert report.verdict == "pass", report.reason
    assert [results(events)[n]["status"] for n in ("slow", "nap", "after_nap", "join")] == ["pass"] * 4
    nap = report.results["nap"].output
    assert nap is not None and nap["who"] == "nap" and nap["thread"].startswith("plan-task")
    assert report.results["after_nap"].output == {"nap": nap}
    assert report.results["join"].output == {"slow": {"who": "slow"}, "after_nap": {"nap": nap}}
    assert float((ws / "after_nap.start").read_text()) < float((ws / "slow.end").read_text())
    assert threads == [threading.current_thread().name] * 3
    # every task settled once, and the log ends with the run's one shutdown
    assert sorted(e["task"] for e in events if e["kind"] == "task_result") == sorted(report.results)
    assert events[-1]["kind"] == "shutdown" and events[-1]["outcome"] == "finished"


class _Aborted(Exception):
    pass


@pytest.mark.leaves_open_log(
    "an abort raised out of the executor: the lane, not the executor, would end the log"
)
def test_an_abort_while_waiting_ends_the_children_of_the_dispatching_thread(tmp_path: Path) -> None:
    """An operator's abort raises in the thread's wait: the children it supervises go with it
    (group killed, reaped), and their tasks get no result, so a resume runs them."""
    pid_file = tmp_path / "ws" / "grandchild.pid"
    text = HEAD + task("long", f"sleep 60 & echo $! > {pid_file}; sleep 60")

    def abort(_signum: int, _frame: object) -> None:
        raise _Aborted

    previous = signal.signal(signal.SIGALRM, abort)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    began = time.monotonic()
    try:
        with pytest.raises(_Aborted):
            run_plan(tmp_path, text)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - began < 10
    assert _gone(int(pid_file.read_text()), within=5), "a grandchild outlived the aborted run"
    assert process.kill_running() == 0  # nothing left registered with the abort list
    events = [json.loads(line) for line in (tmp_path / "state" / "session.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in events] == ["plan_admitted"]


@pytest.mark.leaves_open_log(
    "an abort raised out of the executor: the lane, not the executor, would end the log"
)
def test_an_abort_finishes_every_child_even_when_one_finish_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On an abort, a child whose finish raises does not keep the thread's other children
    from being finished (group killed, reaped), and the abort is what propagates."""
    ws = tmp_path / "ws"
    text = HEAD + "".join(
        task(name, f"sleep 60 & echo $! > {ws / (name + '.pid')}; sleep 60") for name in ("first", "second")
    )
    real_finish = process.Supervised.finish
    calls: list[int] = []

    def failing_once(self: process.Supervised) -> process.Completed:
        calls.append(self.proc.pid)
        if len(calls) == 1:
            raise RuntimeError("finish broke")
        return real_finish(self)

    monkeypatch.setattr(process.Supervised, "finish", failing_once)

    def abort(_signum: int, _frame: object) -> None:
        raise _Aborted

    previous = signal.signal(signal.SIGALRM, abort)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        with pytest.raises(_Aborted):
            run_plan(tmp_path, text, jobs=2)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        monkeypatch.undo()
    try:
        assert len(calls) == 2, "the second child was never finished"
        grandchildren = [int((ws / f"{name}.pid").read_text()) for name in ("first", "second")]
        # the second by its finish, the first by the abort list's kill as the executor is left
        assert all(_gone(pid, within=5) for pid in grandchildren), "a grandchild outlived the aborted run"
    finally:
        process.kill_running()


ADOPTING_PLAN_ENGINE = """
import os, sys
from pathlib import Path

sys.path.insert(0, sys.argv[1])
from crucible_core import process
from tests.plan.plan_support import run_plan
assert process.adopt_orphans()
report, events = run_plan(Path(sys.argv[2]), Path(sys.argv[3]).read_text(), jobs=2)
print(report.verdict, sorted(r.status for r in report.results.values()) == ["pass"] * 41)
print("children", [p for p in process._children(os.getpid()) if p != process._guard.pid()])
from tests.core.test_process import processes_with
print("escaped", processes_with(os.environ["ESCAPED_MARKER"]))  # before this engine (and its guard) ends
"""


def test_an_escaped_descendant_is_killed_among_the_children_of_the_dispatching_thread(tmp_path: Path) -> None:
    """The CLI's path (a subreaper engine), the dispatching thread driving two children at a
    time: the descendant that left its task's group is found by its mark and killed before the
    run ends (not only by the guard once the engine is gone)."""
    marker = f"crucible-test-{uuid.uuid4().hex}"
    escaping = task("escaping", f"setsid {sleeper(marker)} & sleep 0.3; echo '{{}}'")
    quick = "".join(task(f"quick{i}", "true") for i in range(40))
    plan_file = tmp_path / "plan.toml"  # not on the engine's command line, which is searched
    plan_file.write_text(HEAD + quick + escaping)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            ADOPTING_PLAN_ENGINE,
            str(Path(__file__).parents[2]),
            str(tmp_path),
            str(plan_file),
        ],
        env={**os.environ, "ESCAPED_MARKER": marker},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "pass True" in done.stdout and "children []" in done.stdout, done.stdout
    assert "escaped []" in done.stdout, done.stdout
    assert wait_until_gone(marker) == []
