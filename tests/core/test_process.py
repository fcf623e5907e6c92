"""The supervisor: deadlines, whole-group kills, output caps, and no child outliving the engine."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from crucible_core import process


def processes_with(marker: str) -> list[int]:
    """Processes with `marker` as a whole argument: the sleepers, not the shells or engines that
    merely mention it inside a longer command line, nor a sleeper's fork in the moment before it
    execs `sleep` (it still shows its parent's arguments; counting it made two tests flaky)."""
    found: dict[int, int] = {}  # pid -> parent's pid
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if marker.encode() in cmdline.split(b"\0"):
            found[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return [pid for pid, parent in found.items() if parent not in found]


def sleeper(marker: str, seconds: int = 300) -> str:
    """A shell command that sleeps with the marker in its command line (the `; :` stops exec)."""
    return f"sh -c 'sleep {seconds}; :' {marker}"


def wait_until_present(marker: str, seconds: float = 10.0) -> list[int]:
    """The processes carrying `marker`, once there is one (empty if none came within `seconds`)."""
    deadline = time.monotonic() + seconds
    while not (found := processes_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def wait_until_gone(marker: str, seconds: float = 10.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        alive = processes_with(marker)
        if not alive:
            return []
        time.sleep(0.05)
    return processes_with(marker)


def test_output_and_exit_code(tmp_path: Path) -> None:
    done = process.run("echo out; echo err >&2; exit 3", cwd=tmp_path, env=os.environ)
    assert (done.exit_code, done.stdout, done.stderr.strip()) == (3, "out\n", "err")
    assert not done.ok and done.describe_failure() == "exited 3"


def test_env_is_exactly_what_was_given(tmp_path: Path) -> None:
    done = process.run(
        "echo ${ONLY_THIS:-unset} ${HOME:-nohome}",
        cwd=tmp_path,
        env={"ONLY_THIS": "yes", "PATH": os.environ["PATH"]},
    )
    assert done.stdout.strip() == "yes nohome"


def test_deadline_kills_the_whole_group_grandchildren_included(tmp_path: Path) -> None:
    marker = f"crucible-test-{uuid.uuid4().hex}"
    started = time.monotonic()
    done = process.run(
        f"{sleeper(marker)} & {sleeper(marker, 301)}; wait",
        cwd=tmp_path,
        env=os.environ,
        timeout=0.5,
        grace=0.5,
    )
    assert done.timed_out and "deadline" in done.describe_failure()
    assert time.monotonic() - started < 30
    assert wait_until_gone(marker) == []


def test_background_leftovers_are_killed_when_the_leader_exits(tmp_path: Path) -> None:
    marker = f"crucible-test-{uuid.uuid4().hex}"
    done = process.run(
        f"({sleeper(marker)} &) ; sleep 0.3; ps -eo args | grep -c {marker}; echo leader done",
        cwd=tmp_path,
        env=os.environ,
        timeout=30,
    )
    assert done.ok and "leader done" in done.stdout
    assert int(done.stdout.split()[0]) >= 2  # the leftover was running (the grep counts itself)
    assert wait_until_gone(marker) == []


def test_stdin_data_reaches_the_child_whole_and_stdin_is_empty_otherwise(tmp_path: Path) -> None:
    data = bytes(range(256)) * 4096  # 1 MiB: many times what a pipe holds, so written in parts
    done = process.run("cksum", cwd=tmp_path, env=os.environ, stdin_data=data, timeout=60)
    expected = subprocess.run(["cksum"], input=data, capture_output=True, check=True).stdout.decode()
    assert done.ok and done.stdout == expected
    # without stdin_data the child reads an empty stdin (never the engine's own)
    assert process.run("wc -c", cwd=tmp_path, env=os.environ, timeout=30).stdout.strip() == "0"


def test_stdin_that_fits_in_the_pipe_is_written_without_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[object] = []
    real_thread = process.threading.Thread

    def counted(*args: object, **kwargs: object) -> threading.Thread:
        started.append(kwargs.get("target"))
        return real_thread(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(process.threading, "Thread", counted)
    prompt = b"a prompt of a few kilobytes\n" * 200
    done = process.run("cat", cwd=tmp_path, env=os.environ, stdin_data=prompt, timeout=60)
    assert done.ok and done.stdout.encode() == prompt
    assert started == []  # written in place: no feeder thread for a turn's prompt
    # a child that exits without reading its stdin is no error (the pipe was filled, then closed)
    assert process.run("true", cwd=tmp_path, env=os.environ, stdin_data=prompt, timeout=60).ok
    big = b"x" * (4 << 20)  # more than any pipe holds: the rest goes to a feeder thread
    done = process.run("wc -c", cwd=tmp_path, env=os.environ, stdin_data=big, timeout=60)
    assert done.ok and done.stdout.strip() == str(len(big))
    assert started == [process._feed]


def test_spawn_failure_is_reported_not_raised(tmp_path: Path) -> None:
    done = process.run(["/nonexistent/agent"], cwd=tmp_path, env=os.environ)
    assert done.spawn_error and done.describe_failure().startswith("could not start")


def test_capture_keeps_the_tail(tmp_path: Path) -> None:
    done = process.run(
        "i=0; while [ $i -lt 5000 ]; do echo line-$i; i=$((i+1)); done; echo '{\"valid\": true}'",
        cwd=tmp_path,
        env=os.environ,
        capture_bytes=1000,
    )
    assert len(done.stdout) <= 1000
    assert done.stdout.rstrip().endswith('{"valid": true}')


def test_lines_are_streamed_as_they_arrive(tmp_path: Path) -> None:
    seen: list[str] = []
    process.run("echo one; echo two; printf three", cwd=tmp_path, env=os.environ, on_stdout_line=seen.append)
    assert seen == ["one", "two", "three"]


def test_both_streams_are_drained_while_the_child_runs_and_no_thread_is_started(tmp_path: Path) -> None:
    # Far more than a pipe holds (64 KiB) on both streams at once: a supervisor that read one
    # pipe only after the other, or only after the exit, would leave the child blocked on a
    # full pipe until its deadline. The supervising thread drains both itself: no pump threads.
    lines: list[str] = []
    peak: list[int] = []
    threads_before = threading.active_count()
    started = time.monotonic()
    done = process.run(
        "i=0; while [ $i -lt 20000 ]; do echo out-$i; echo err-$i >&2; i=$((i+1)); done; printf tail",
        cwd=tmp_path,
        env=os.environ,
        timeout=60,
        on_stdout_line=lambda line: (lines.append(line), peak.append(threading.active_count())),
    )
    assert done.ok and not done.timed_out, done.describe_failure()
    assert lines[:2] == ["out-0", "out-1"] and lines[-2:] == ["out-19999", "tail"] and len(lines) == 20001
    assert done.stderr.endswith("err-19999\n") and done.stderr.count("\n") == 20000
    assert max(peak) == threads_before  # the lines were handed over on the calling thread
    assert time.monotonic() - started < 30


def test_a_failing_line_callback_ends_the_child_and_reaches_the_caller(tmp_path: Path) -> None:
    marker = f"crucible-callback-{uuid.uuid4().hex}"

    def refuse(line: str) -> None:
        raise ValueError(f"refused {line}")

    started = time.monotonic()
    try:
        process.run(f"echo first; {sleeper(marker)}", cwd=tmp_path, env=os.environ, on_stdout_line=refuse)
    except ValueError as exc:
        assert str(exc) == "refused first"
    else:
        raise AssertionError("the callback's error was swallowed")
    assert time.monotonic() - started < 30  # not left to sleep out its 300 seconds
    assert wait_until_gone(marker) == []


def kill_engine_running(tmp_path: Path, command: str, marker: str, expected: int) -> None:
    """Start an engine process that supervises `command`, SIGKILL it once `expected` marked
    processes run, and assert that none of them survives it."""
    engine = textwrap.dedent(
        f"""
        import os
        from pathlib import Path
        from crucible_core import process
        print("ready", flush=True)
        process.run({command!r}, cwd=Path("."), env=dict(os.environ))
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", engine], cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    deadline = time.monotonic() + 10
    while len(processes_with(marker)) < expected and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(processes_with(marker)) >= expected
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert wait_until_gone(marker) == []


def test_a_child_never_outlives_an_engine_killed_with_sigkill(tmp_path: Path) -> None:
    marker = f"crucible-test-{uuid.uuid4().hex}"
    kill_engine_running(tmp_path, f"{sleeper(marker)} & {sleeper(marker, 301)}; wait", marker, 2)


def test_a_descendant_that_left_the_group_is_still_killed(tmp_path: Path) -> None:
    """An agent's tool shell may start a session of its own; the child's mark still finds it."""
    marker = f"crucible-test-{uuid.uuid4().hex}"
    done = process.run(
        f"setsid {sleeper(marker)} & sleep 0.3; echo started", cwd=tmp_path, env=os.environ, timeout=30
    )
    assert done.ok and "started" in done.stdout
    assert wait_until_gone(marker) == []


def test_an_escaped_descendant_dies_with_the_engine(tmp_path: Path) -> None:
    marker = f"crucible-test-{uuid.uuid4().hex}"
    kill_engine_running(tmp_path, f"setsid {sleeper(marker)} & wait", marker, 1)


ADOPTING_ENGINE = """
import os, sys
from pathlib import Path

import pytest
from crucible_core import process
assert process.adopt_orphans()
done = process.run(sys.argv[1], cwd=Path(sys.argv[2]), env=os.environ, timeout=30)
print("ok" if done.ok else "failed")
# the sweep reaped what it killed: no zombie of the escaped sleeper is left as our child
left = [p for p in process._children(os.getpid()) if p != process._guard.pid()]
print("children", left)
"""


def test_an_adopting_engine_kills_a_descendant_that_left_the_group(tmp_path: Path) -> None:
    """The subreaper path (the CLI's): orphans re-parent to the engine, and the sweep that then
    walks only its descendants still finds and kills the escaped one, and reaps it."""
    marker = f"crucible-test-{uuid.uuid4().hex}"
    command = f"setsid {sleeper(marker)} & sleep 0.3; echo started"
    done = subprocess.run(
        [sys.executable, "-c", ADOPTING_ENGINE, command, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "ok" in done.stdout and "children []" in done.stdout, done.stdout
    assert wait_until_gone(marker) == []


def _unreaped(pid: int) -> bool:
    """Whether `pid` is still this process's child, running or exited but not waited for: its pid
    (and so its group's id) cannot have been given to another process."""
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def test_a_group_is_signalled_only_while_its_leader_still_holds_the_id(tmp_path: Path, monkeypatch) -> None:
    """Once a child is reaped its pid, which is also its group's id, is free, and a busy machine
    hands it out again within minutes (pid_max is 32,768 here), possibly to another session
    leader at once: killing the group by that id after the reap kills a stranger, a task of a
    plan running beside it, say. So every group kill, and the end of the child's registration
    with the guard and with the abort list, happens while the exited leader is still a zombie."""
    signalled: list[tuple[str, int, bool]] = []
    kill_group, unregister, discard = process._kill_group, process._guard.unregister, process._running.discard

    def spy_kill(pgid: int, sig: int) -> None:
        signalled.append((f"killpg {sig}", pgid, _unreaped(pgid)))
        kill_group(pgid, sig)

    def spy_unregister(pgid: int) -> None:
        signalled.append(("guard -", pgid, _unreaped(pgid)))
        unregister(pgid)

    def spy_discard(pgid: int) -> None:
        signalled.append(("abort list -", pgid, _unreaped(pgid)))
        discard(pgid)

    monkeypatch.setattr(process, "_kill_group", spy_kill)
    monkeypatch.setattr(process._guard, "unregister", spy_unregister)
    monkeypatch.setattr(process._running, "discard", spy_discard)
    assert process.run("true", cwd=tmp_path, env=os.environ, timeout=30).ok
    assert process.run("sleep 30", cwd=tmp_path, env=os.environ, timeout=0.2, grace=5).timed_out
    assert process.run("true", cwd=tmp_path, env=os.environ).ok  # no deadline
    # A service found exited by `poll` (the runtime looks before each dispatch) is still a zombie
    # until `stop`, which ends its registration.
    for script, code in (("exit 3", 3), ("kill -KILL $$", -signal.SIGKILL)):
        service = process.spawn(["sh", "-c", script], cwd=tmp_path, env=os.environ, output=tmp_path / "out")
        while service.poll() is None:
            time.sleep(0.01)
        assert service.poll() == code and _unreaped(service.pid)
        assert service.stop(grace=5) == (code, False)
    assert signalled and all(held for _, _, held in signalled), signalled


FORKING_ENGINE = """
import os, sys, time
from pathlib import Path

import pytest
from crucible_core import process
assert process.run("true", cwd=Path("."), env=dict(os.environ)).ok  # the guard is started
helper = os.fork()
if helper == 0:  # a forked helper that outlives nothing it should: it only lingers
    time.sleep(60)
    os._exit(0)
print(helper, flush=True)
process.run(sys.argv[1], cwd=Path("."), env=dict(os.environ))
"""


def test_a_child_never_outlives_an_engine_that_forked_a_lingering_helper(tmp_path: Path) -> None:
    """A fork inherits the engine's end of the guard's pipe; if the forked process kept it open,
    the guard would not see the engine die while that process lingers, and would kill nothing."""
    marker = f"crucible-test-{uuid.uuid4().hex}"
    engine = subprocess.Popen(
        [sys.executable, "-c", FORKING_ENGINE, f"{sleeper(marker)} & wait"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert engine.stdout is not None
    helper = int(engine.stdout.readline())
    try:
        assert wait_until_present(marker)
        os.kill(engine.pid, signal.SIGKILL)
        engine.wait()
        assert wait_until_gone(marker) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(helper, signal.SIGKILL)


GUARD_KILLED_ENGINE = """
import os, sys
from pathlib import Path

import pytest
from crucible_core import process
assert process.run("true", cwd=Path("."), env=dict(os.environ)).ok  # the guard is started
print(process._guard.pid(), flush=True)
sys.stdin.readline()  # the test kills the guard meanwhile
process.run(sys.argv[1], cwd=Path("."), env=dict(os.environ))
"""


def _running(pid: int) -> bool:
    """Whether the process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rpartition(b")")[2].split()[0] != b"Z"
    except OSError:
        return False


def test_a_guard_that_was_killed_is_replaced_before_the_next_child_needs_it(tmp_path: Path) -> None:
    """The engine learns of its guard's death only when telling it fails; the child being
    registered then is told to a new guard, which still kills it when the engine dies."""
    marker = f"crucible-test-{uuid.uuid4().hex}"
    engine = subprocess.Popen(
        [sys.executable, "-c", GUARD_KILLED_ENGINE, f"{sleeper(marker)} & wait"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert engine.stdin is not None and engine.stdout is not None
    first_guard = int(engine.stdout.readline())
    os.kill(first_guard, signal.SIGKILL)
    # Dead means its pipe is closed: a zombie (the engine reaps it later) or gone. A SIGKILL is
    # not instant on a loaded machine, and a guard still closing would take one more line.
    deadline = time.monotonic() + 10
    while _running(first_guard) and time.monotonic() < deadline:
        time.sleep(0.01)
    engine.stdin.write("go\n")
    engine.stdin.flush()
    assert wait_until_present(marker)
    os.kill(engine.pid, signal.SIGKILL)
    engine.wait()
    assert wait_until_gone(marker) == []


FORKED_FROM_AN_ADOPTING_ENGINE = """
import os, sys, time
from pathlib import Path

import pytest
from crucible_core import process
assert process.adopt_orphans()
child = os.fork()
if child == 0:  # the kernel does not pass the subreaper mode on to a fork
    done = process.run(sys.argv[1], cwd=Path(sys.argv[2]), env=os.environ, timeout=30)
    print("ok" if done.ok else "failed", os.getpid(), flush=True)
    time.sleep(60)  # lives on: its guard must not be what kills the escaped descendant
    os._exit(0)
os.waitpid(child, 0)
"""


def test_a_forked_engine_still_kills_a_descendant_that_left_the_group(tmp_path: Path) -> None:
    """A fork of an adopting engine is no subreaper, so the escaped descendant is not among its
    children: it must take the full sweep by mark, not the subreaper's look at its children."""
    marker = f"crucible-test-{uuid.uuid4().hex}"
    command = f"setsid {sleeper(marker)} & sleep 0.3; echo started"
    engine = subprocess.Popen(
        [sys.executable, "-c", FORKED_FROM_AN_ADOPTING_ENGINE, command, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert engine.stdout is not None
    verdict, forked = engine.stdout.readline().split()
    try:
        assert verdict == "ok"
        assert wait_until_gone(marker, seconds=5) == []  # while the forked engine still runs
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(forked), signal.SIGKILL)
        engine.wait(timeout=30)
        wait_until_gone(marker)


def test_the_guard_looks_again_for_a_child_that_shows_its_mark_just_after_the_engine_died(
    tmp_path: Path,
) -> None:
    """A child the engine was spawning as it died carries its mark only once it has exec'd: the
    guard's first look may find nothing, and a second look a moment later must still kill it."""
    mark = f"{os.getpid()}-{uuid.uuid4().hex}"
    guard = subprocess.Popen(
        [sys.executable, "-S", "-c", process._GUARD_SOURCE, process.SUPERVISOR_ENV, mark],
        stdin=subprocess.PIPE,
    )
    assert guard.stdin is not None
    time.sleep(0.3)  # started and reading
    guard.stdin.close()  # the engine is gone
    time.sleep(0.03)  # after the guard's first look
    late = subprocess.Popen(
        ["sleep", "30"], env={**os.environ, process.SUPERVISOR_ENV: f"{mark}.1"}, cwd=tmp_path
    )
    try:
        assert late.wait(timeout=5) == -signal.SIGKILL
    finally:
        if late.poll() is None:
            late.kill()
            late.wait()
        guard.wait(timeout=10)


def test_a_finish_interrupted_halfway_is_completed_by_the_next_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second Ctrl-C can land inside `finish` on the thread that drives the children (the plan
    executor's): the call its caller makes on the way out still kills the escaped descendants,
    reaps the leader and closes the pipes, rather than handing back what the first call had."""
    marker = f"crucible-test-{uuid.uuid4().hex}"
    readiness = process.Readiness()
    child = process.start(
        f"setsid {sleeper(marker)} & sleep 0.3; echo started",
        cwd=tmp_path,
        env=os.environ,
        readiness=readiness,
        timeout=30,
    )
    assert isinstance(child, process.Supervised)
    while not child.advance(time.monotonic()):
        wake = child.next_wake()
        readiness.wait(None if wake is None else wake - time.monotonic())
    assert wait_until_present(marker)
    sweeps = [process._sweep_adopted, process.kill_marked]

    def interrupted(mark: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(process, "_sweep_adopted", interrupted)
    monkeypatch.setattr(process, "kill_marked", interrupted)
    with pytest.raises(KeyboardInterrupt):
        child.finish()
    monkeypatch.setattr(process, "_sweep_adopted", sweeps[0])
    monkeypatch.setattr(process, "kill_marked", sweeps[1])
    done = child.finish()
    assert done.exit_code == 0 and "started" in done.stdout
    assert wait_until_gone(marker) == []
    assert child.proc.stdout is not None and child.proc.stdout.closed


SCRUBBING_ENGINE = """
import os, sys
from pathlib import Path

from crucible_core import process
process.GROUP_TABLE_CELLS = int(sys.argv[2])
readiness = process.Readiness()
# Children that drop the mark from their environment stay in their group: only the group's
# registration with the guard can find them once the engine is gone.
children = [
    process.start(sys.argv[1], cwd=Path("."), env=dict(os.environ), readiness=readiness)
    for _ in range(3)
]
table = process._guard._table
print(len(table._where) if table is not None else -1, flush=True)
sys.stdin.readline()  # the test kills the engine meanwhile
"""


def _scrubbed(marker: str) -> list[int]:
    """The processes with `marker` as an argument whose environment lacks the supervisor's mark."""
    found = []
    for pid in processes_with(marker):
        with (
            contextlib.suppress(FileNotFoundError, ProcessLookupError),
            open(f"/proc/{pid}/environ", "rb") as handle,
        ):
            if process.SUPERVISOR_ENV.encode() not in handle.read():
                found.append(pid)
    return found


@contextlib.contextmanager
def _engine(tmp_path: Path, source: str, *args: str, marker: str) -> Iterator[subprocess.Popen[str]]:
    """An engine process running `source` (its stdout a pipe, its stdin held open until the test
    kills it); it and every process carrying `marker` are killed afterwards, whatever happened."""
    engine = subprocess.Popen(
        [sys.executable, "-c", source, *args],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert engine.stdin is not None and engine.stdout is not None
    try:
        yield engine
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(engine.pid, signal.SIGKILL)
        engine.wait()
        for pid in processes_with(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("cells", [4096, 1])
def test_groups_are_killed_when_the_engine_dies_though_their_processes_dropped_the_mark(
    tmp_path: Path, cells: int
) -> None:
    """Each child's group is registered with the guard (in the table it shares, or, with the
    table full, as a line down its pipe): a process that scrubbed its environment of the mark
    but stayed in the group is killed when the engine dies."""
    marker = f"crucible-test-{uuid.uuid4().hex}"
    command = f"env -i {sleeper(marker)} & wait"
    with _engine(tmp_path, SCRUBBING_ENGINE, command, str(cells), marker=marker) as engine:
        assert engine.stdout is not None
        in_table = int(engine.stdout.readline())
        assert in_table == min(cells, 3)  # the rest went down the pipe
        deadline = time.monotonic() + 10
        # Three shells whose environment no longer carries the mark (`env` shows the marker in
        # its command line for a moment before it has exec'd the shell, with the mark still on).
        while len(_scrubbed(marker)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_scrubbed(marker)) >= 3
        os.kill(engine.pid, signal.SIGKILL)
        engine.wait()
        assert wait_until_gone(marker) == []


def test_a_forked_process_never_writes_its_parents_group_table(tmp_path: Path) -> None:
    """The table's memory is shared with the guard, and a fork shares it too: a forked engine
    registers its children in a table of its own, never in its parent's."""
    assert process.run("true", cwd=tmp_path, env=os.environ).ok  # the guard and its table exist
    table = process._guard._table
    if table is None:
        pytest.skip("no memfd on this platform: the guard's pipe carries every group")
    before = table._cells.tolist()
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the fork
        try:
            os.close(ready_r)
            os.close(go_w)
            readiness = process.Readiness()
            running = process.start("sleep 30", cwd=tmp_path, env=dict(os.environ), readiness=readiness)
            assert isinstance(running, process.Supervised)
            mine = process._guard._table
            os.write(ready_w, b"1" if mine is not None and mine is not table else b"0")
            os.read(go_r, 1)
            running.finish()
        finally:
            os._exit(0)
    os.close(ready_w)
    os.close(go_r)
    try:
        assert os.read(ready_r, 1) == b"1"
        assert table._cells.tolist() == before  # the fork's running child is not in ours
    finally:
        os.write(go_w, b"1")
        os.waitpid(child, 0)
        os.close(ready_r)
        os.close(go_w)


GUARD_REPLACING_ENGINE = """
import os, signal, sys, time
from pathlib import Path

from crucible_core import process
readiness = process.Readiness()
first = process.start(sys.argv[1], cwd=Path("."), env=dict(os.environ), readiness=readiness)
old = process._guard._proc
os.kill(old.pid, signal.SIGKILL)  # the guard dies (an agent's kill, an OOM kill)
old.wait()
second = process.start(sys.argv[1], cwd=Path("."), env=dict(os.environ), readiness=readiness)
new = process._guard._proc
print(int(new is not None and new is not old), flush=True)
sys.stdin.readline()  # the test kills the engine meanwhile
"""


def test_a_replaced_guard_kills_the_groups_registered_with_the_one_that_died(tmp_path: Path) -> None:
    """The guard died with a child still running, and the next child started a new one: the
    new guard reads the same table, so the first child's group (which dropped the mark the new
    guard looks for) is killed with the second's when the engine dies."""
    marker = f"crucible-test-{uuid.uuid4().hex}"
    command = f"env -i {sleeper(marker)} & wait"
    with _engine(tmp_path, GUARD_REPLACING_ENGINE, command, marker=marker) as engine:
        assert engine.stdout is not None
        assert engine.stdout.readline().strip() == "1"
        deadline = time.monotonic() + 10
        # (`env -i` carries the marker too for the moment before it execs the sleeper's shell.)
        while len(processes_with(marker)) != 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(processes_with(marker)) == 2
        os.kill(engine.pid, signal.SIGKILL)
        engine.wait()
        assert wait_until_gone(marker) == []
