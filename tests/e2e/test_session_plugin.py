"""A third-party plugin, pip-installed, hears every kind of run the same way (the session shell).

The distribution is built here and installed with pip into a directory of its own; the real
`crucible` finds it through its entry point. For the loop, a playbook and a plan file, ended
normally, by `crucible stop` from another process and by SIGTERM, it must see exactly the
session log's event stream and exactly one run end, before the shutdown, with the shutdown's
outcome. Also ended by `crucible abort` and by a second SIGTERM, which cancel what runs now.
The stopped runs answer `crucible status` first, and a playbook or a plan refuses by name an
order it cannot honour.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crucible_core.session_log import read_events
from tests.cli_support import CRUCIBLE, EXAMPLES, crucible_env, run_crucible

PIP_INSTALL = [sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps"]

PYPROJECT = """\
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "crucible-plugin-listener"
version = "0.1.0"
requires-python = ">=3.11"

[project.entry-points.crucible]
listener = "crucible_listener"

[tool.hatch.build.targets.wheel]
packages = ["crucible_listener"]
"""

PLUGIN = '''\
"""Writes each session event's kind and each run end to $LISTENER_RECORD, one JSON line each."""

import json
import os

from crucible_core.hookspecs import hookimpl


def _write(entry):
    with open(os.environ["LISTENER_RECORD"], "a", encoding="utf-8") as record:
        record.write(json.dumps(entry) + "\\n")


@hookimpl
def crucible_session_event(event):
    _write({"event": event["kind"]})


@hookimpl
def crucible_run_end(end):
    _write({"run_end": end.outcome, "lane": end.run.lane, "manifest": end.run.manifest is not None})
'''

# The held step: it says it started, then waits until the test releases it.
HOLD = """\
touch "{dir}/started"
while [ ! -e "{dir}/release" ]; do sleep 0.05; done
"""

PLAYBOOK_MANIFEST = """\
[workflow]
type = "playbook"

[workspace]
dir = "workspace"

[agent]
goal = "hold, then finish"
backend = "command"
agent_cmd = "true"
"""

PLAYBOOK_GRAPH = """\
hold = command(name = "hold", run = "sh {hold}")
after = command(name = "after", run = "true", depends_on = [hold])
workflow(type = "playbook", tasks = [hold, after])
"""

PLAN = """\
version = 1
[budget]
usd = 1.0
[[task]]
name = "hold"
kind = "command"
command = "sh {hold}"
[[task]]
name = "after"
kind = "command"
command = "true"
depends_on = ["hold"]
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("listener-src")
    (source / "pyproject.toml").write_text(PYPROJECT)
    (source / "crucible_listener").mkdir()
    (source / "crucible_listener" / "__init__.py").write_text(PLUGIN)
    target = tmp_path_factory.mktemp("listener-site")
    subprocess.run([*PIP_INSTALL, "--target", str(target), str(source)], check=True, capture_output=True)
    return target


def _lane(lane: str, tmp_path: Path) -> tuple[list[str], Path]:
    """The argv that runs `lane` with one held step, and its state directory."""
    hold = tmp_path / "hold.sh"
    if lane == "loop":
        domain = tmp_path / "counter"
        shutil.copytree(EXAMPLES / "counter", domain, ignore=shutil.ignore_patterns("workspace", "state"))
        hold.write_text(HOLD.format(dir=tmp_path) + "./bump.sh\n")
        manifest = domain / "crucible.toml"
        manifest.write_text(
            manifest.read_text().replace('agent_cmd = "./bump.sh"', f'agent_cmd = "sh {hold}"')
        )
        return ["run", "--manifest", str(manifest), "-n", "2"], domain / "state"
    hold.write_text(HOLD.format(dir=tmp_path))
    if lane == "playbook":
        domain = tmp_path / "playbook"
        domain.mkdir()
        (domain / "crucible.toml").write_text(PLAYBOOK_MANIFEST)
        (domain / "workflow.star").write_text(PLAYBOOK_GRAPH.format(hold=hold))
        argv = ["run", "--manifest", str(domain / "crucible.toml"), "--max-cost", "1", "--max-time", "5m"]
        return argv, domain / "state"
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN.format(hold=hold))
    (tmp_path / "ws").mkdir()
    state = tmp_path / "state"
    return ["plan", "run", str(plan), "--workspace", str(tmp_path / "ws"), "--state-dir", str(state)], state


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.mark.parametrize("ending", ["finished", "stop", "sigterm", "abort", "sigterm twice"])
@pytest.mark.parametrize("lane", ["loop", "playbook", "plan"])
def test_a_pip_installed_plugin_hears_every_lane_the_same_way(
    site: Path, tmp_path: Path, lane: str, ending: str
) -> None:
    record = tmp_path / "record.jsonl"
    env = crucible_env(PYTHONPATH=str(site), LISTENER_RECORD=str(record))
    argv, state = _lane(lane, tmp_path)
    if ending == "finished":
        (tmp_path / "release").touch()
    stderr = tmp_path / "stderr.txt"
    with stderr.open("w") as sink:
        proc = subprocess.Popen(
            [str(CRUCIBLE), *argv, "--ui", "headless"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=sink,
            text=True,
        )
    try:
        if ending != "finished":
            _wait_for(tmp_path / "started", proc)
            _wait_for(state / "control.json", proc)
            status = run_crucible("status", "--state-dir", state, "--json", env=env)
            assert status.returncode == 0, status.stdout + status.stderr
            standing = json.loads(status.stdout)  # the live bridge answers, not the log
            if lane != "loop":
                assert (standing["phase"], standing["tasks"], standing["settled"]) == ("running", 2, 0)
            else:
                assert standing["iter"] == 1, standing
            if lane != "loop":  # a graph takes stop and abort; any other order is refused by name
                steer = run_crucible("steer", "--state-dir", state, "--", "go faster", env=env)
                assert steer.returncode != 0
                assert f"a {lane} run does not take `crucible steer`" in steer.stdout + steer.stderr
            if ending in ("stop", "abort"):
                order = run_crucible(ending, "--state-dir", state, "--reason", "enough", env=env)
                assert order.returncode == 0, order.stdout + order.stderr
            else:
                proc.send_signal(signal.SIGTERM)
            if ending == "sigterm twice":
                deadline = time.monotonic() + 60
                while "again aborts now" not in stderr.read_text():  # the first one was taken
                    assert time.monotonic() < deadline and proc.poll() is None
                    time.sleep(0.05)
                proc.send_signal(signal.SIGTERM)  # the second one aborts now: the held step never ends
            elif ending != "abort":
                (tmp_path / "release").touch()
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    err = stderr.read_text()
    expected = ("finished", 0) if ending == "finished" else ("stopped", 3)
    assert proc.returncode == expected[1], out + err
    events = list(read_events(state / "session.jsonl"))
    assert events[-1]["kind"] == "shutdown" and events[-1]["outcome"] == expected[0]
    assert [e["kind"] for e in events].count("shutdown") == 1
    heard = [json.loads(line) for line in record.read_text().splitlines()]
    assert [h["event"] for h in heard if "event" in h] == [e["kind"] for e in events]
    ends = [h for h in heard if "run_end" in h]
    assert ends == [{"run_end": expected[0], "lane": lane, "manifest": lane != "plan"}]
    # the run end comes before the closing lines (the summary where the lane has one, finished, shutdown)
    assert heard.index(ends[0]) < [h.get("event") for h in heard].index("finished")
    if lane != "loop" and ending != "finished":
        settled = [e["task"] for e in events if e["kind"] == "task_result"]
        if ending in ("abort", "sigterm twice"):
            assert settled == []  # the running task was cancelled, its result unrecorded
        else:
            assert settled == ["hold"]  # what ran settled; nothing new was dispatched
