"""The console of real runs through the real CLI: operator actions as lines, replies, status, usage errors."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

from tests import live_support as live
from tests.cli_support import run_crucible
from tests.e2e.session import events

# Iteration 1 waits until the test lets it go (a file appears), so orders land at a known point.
PROPOSER = """#!/bin/sh
set -eu
if [ "$CRUCIBLE_ITERATION" = 1 ]; then
  i=0
  while [ ! -e ../go ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
fi
echo $(( $(cat value.txt) + 1 )) > value.txt
"""

STAMP = r"\[ *[0-9.]+s\]"


def start(tmp_path: Path, *args: str) -> tuple[Path, subprocess.Popen[str]]:
    manifest = live.domain(tmp_path, PROPOSER)
    proc = live.start(manifest, "--ui", "console", *args)
    live.wait_for(manifest, proc, lambda log: any(e["kind"] == "step" and e["iter"] == 1 for e in log))
    return manifest, proc


def test_operator_actions_print_as_they_take_effect_and_the_total_follows_the_budget(tmp_path: Path) -> None:
    manifest, proc = start(tmp_path, "--iterations", "40")
    paused = run_crucible("pause", "--manifest", manifest, "--reason", "lunch")
    assert paused.stdout.startswith("pause: accepted; key ")
    (tmp_path / "go").touch()
    live.wait_for(manifest, proc, lambda log: any(e.get("phase") == "paused" for e in log))
    status = run_crucible("status", "--manifest", manifest)
    assert status.stdout.splitlines() == [
        "paused by the operator after iteration 1 of 40; `crucible unpause` continues",
        "best 1 (baseline 0); 1 kept, 0 discarded",
        "spent $0.0000; budget 40 iterations",
    ]
    budget = run_crucible("budget", "--manifest", manifest, "--iterations", "3")
    assert budget.stdout.startswith("budget: accepted; key ")
    live.wait_for(manifest, proc, lambda log: any("budget set" in e.get("msg", "") for e in log))
    time.sleep(0.6)  # a park long enough that counting it would show on the clock
    unpaused = run_crucible("unpause", "--manifest", manifest)
    assert unpaused.stdout.startswith("unpause: accepted; key ")
    assert proc.wait(timeout=60) == 0
    lines = proc.communicate()[1].splitlines()
    said = [re.sub(STAMP, "[t]", line) for line in lines]
    # The park is not the run's time: the clock reads about the same when the pause ends as when
    # it began (the note is written a moment before the park itself starts: a tenth may tick).
    [paused_at] = [float(line[1:8].strip(" s]")) for line in lines if "paused by the operator at" in line]
    [unpaused_at] = [float(line[1:8].strip(" s]")) for line in lines if "unpaused by the operator" in line]
    assert 0 <= unpaused_at - paused_at <= 0.15
    actives = [e["active_s"] for e in events(manifest) if e["kind"] == "budget"]
    assert actives == sorted(actives)
    assert said[1:] == [
        "[t] iter  0/40 baseline score 0          best 0          value=0",
        "[t] iter  1/40 keep     score 1          best 1          value=1",
        "[t] paused by the operator at the iteration head: lunch (`crucible unpause` continues)",
        "[t] budget set by the operator: 3 iterations",
        "[t] unpaused by the operator: continuing",
        "[t] iter  2/3  keep     score 2          best 2          value=2",
        "[t] iter  3/3  keep     score 3          best 3          value=3",
        "[t] stopping: iterations spent (3/3)",
        "best 3 (baseline 0); 3 kept, 0 discarded; $0.0000 spent; " + said[-3].rsplit("; ", 1)[1],
        "best by iteration  ▁▃▆█  0 → 3",
        "run ended: finished (iterations spent (3))",
    ]


def test_the_first_ctrl_c_is_answered_at_once_and_the_stop_is_printed_when_it_takes_effect(
    tmp_path: Path,
) -> None:
    manifest, proc = start(tmp_path, "--iterations", "5")
    proc.send_signal(signal.SIGINT)
    live.wait_for(manifest, proc, lambda log: True)
    (tmp_path / "go").touch()
    assert proc.wait(timeout=60) == 3
    stderr = proc.communicate()[1]
    ack = (
        "crucible: Ctrl-C (SIGINT): stopping once the current iteration is decided (Ctrl-C again aborts now)"
    )
    assert ack in stderr.splitlines()
    # the acknowledgement comes before iteration 1 was decided; the stop takes effect after it
    assert stderr.index(ack) < stderr.index("iter 1/5 keep")
    assert re.search(STAMP + r" stopping at the iteration head: received Ctrl-C \(SIGINT\)\n", stderr)
    assert stderr.rstrip().endswith("run ended: stopped (stopped by the operator)")


def test_headless_ends_with_exactly_one_line(example) -> None:
    manifest = example("counter")
    done = run_crucible("--manifest", manifest, "--iterations", "6", "--ui", "headless")
    assert done.returncode == 0, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(
        "run ended: solved (solved at iteration 5); best 5 (baseline 0); 5 kept, 0 discarded;"
    )


def test_the_start_line_records_no_harness_or_model_for_the_command_backend(example) -> None:
    manifest = example("counter")
    done = run_crucible("--manifest", manifest, "--iterations", "1", "--model", "some-model")
    assert done.returncode == 0, done.stderr
    [start_event] = [e for e in events(manifest) if e["kind"] == "start"]
    assert "harness" not in start_event and start_event["model"] == ""
    assert done.stderr.splitlines()[0].startswith(
        "crucible 0.1.0: value (higher), backend command, world git"
    )


def test_a_usage_error_is_one_line_with_exit_64() -> None:
    for args, message in [
        (
            ["run", "--frobnicate"],
            "crucible: error: no such option '--frobnicate' (see `crucible run --help`)",
        ),
        (["steer"], "crucible: error: missing argument 'TEXT' (see `crucible steer --help`)"),
        (["frobnicate"], "crucible: error: no such command 'frobnicate' (see `crucible --help`)"),
    ]:
        done = run_crucible(*args)
        assert done.returncode == 64
        assert done.stderr.splitlines() == [message] and done.stdout == ""
