"""SIGTERM to `crucible plan run` stops its services gracefully: the tool deletes its cluster first.

(SIGKILL is the other case, tests/services/test_service_kill_resume.py: there only a resume can
reclaim.) The first SIGTERM lets the running task settle (the session's one signal policy); the
second aborts it now. Either way the services stop before the log's closing lines, the run ends
`stopped`, and `--resume` finishes it.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from crucible_core.session_log import read_events
from tests.cli_support import CRUCIBLE, run_crucible
from tests.services.support import (
    ScriptedOubliette,
    env_for,
    scripted,
    service_table,
    tool_processes,
    write_catalog,
)
from tests.services.test_service_kill_resume import kinds, wait_for


@pytest.fixture
def oubliette(tmp_path: Path) -> Iterator[ScriptedOubliette]:
    yield from scripted(tmp_path)


def test_sigterm_stops_the_service_within_its_grace_and_leaves_no_cluster(
    tmp_path: Path, oubliette: ScriptedOubliette
) -> None:
    (tmp_path / "ws").mkdir()
    plan = tmp_path / "plan.toml"
    # The first attempt holds the service while the engine is told to stop; a resume's finishes.
    plan.write_text(
        "version = 1\n[budget]\nusd = 1.0\n"
        + service_table(oubliette.endpoint)
        + """
[[task]]
name = "holds_cluster"
kind = "command"
needs = "service.cluster"
command = '''test -f "$KUBECONFIG" && if [ -f ../first ]; then echo '{}'; else touch ../first; sleep 60; fi'''
"""
    )
    state = tmp_path / "state"
    env = env_for(tmp_path, write_catalog(tmp_path))
    stderr = tmp_path / "stderr.txt"
    with stderr.open("w") as sink:
        proc = subprocess.Popen(
            [str(CRUCIBLE), "plan", "run", str(plan), "--state-dir", str(state)],
            cwd=tmp_path / "ws",
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    try:
        assert wait_for(lambda: (tmp_path / "first").exists() or proc.poll() is not None)
        assert oubliette.inventory()  # the cluster exists while the task runs
        proc.send_signal(signal.SIGTERM)  # graceful: the task holding the cluster would settle
        assert wait_for(lambda: "again aborts now" in stderr.read_text() or proc.poll() is not None)
        proc.send_signal(signal.SIGTERM)  # the second aborts it now
        assert proc.wait(timeout=60) == 3, stderr.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    events = list(read_events(state / "session.jsonl"))
    exits = [e for e in events if e["kind"] == "service_exit"]
    assert [(e["service"], e["how"], e["status"]) for e in exits] == [("cluster", "stopped", 0)]
    assert kinds(state)[-1] == "shutdown" and events[-1]["outcome"] == "stopped"
    assert kinds(state).index("service_exit") < kinds(state).index("finished")  # stopped first
    assert "task_result" not in kinds(state)  # the aborted attempt is not recorded: a resume runs it
    assert oubliette.inventory() == {}  # the tool deleted its cluster on the signal
    assert "oubliette_delete" in oubliette.tools_called()
    assert wait_for(lambda: tool_processes(str(tmp_path)) == [], bound=20)

    done = run_crucible("plan", "run", plan, "--state-dir", state, "--resume", cwd=tmp_path / "ws", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert oubliette.inventory() == {}
    assert tool_processes(str(tmp_path)) == []
