"""Hostile conditions around a live run: two engines on one state directory, a closed stdout, a flood of agent output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_support import CRUCIBLE, crucible_env
from tests.live_support import domain, events, start, wait_for

SLOW_PROPOSER = """#!/bin/sh
sleep "${NAP:-0.3}"
# held while the test's gate file exists (bounded), so a live run stays live however loaded the machine is
n=0; while [ -n "${GATE:-}" ] && [ -e "$GATE" ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done
echo $(( $(cat value.txt) + 1 )) > value.txt
"""


# Three races, each its own case so they spread over the suite's workers.
@pytest.mark.parametrize("trial", range(3))
def test_two_fresh_runs_started_together_never_both_run(tmp_path: Path, trial: int) -> None:
    root = tmp_path / f"trial{trial}"
    root.mkdir()
    manifest = domain(root, SLOW_PROPOSER)
    both = [start(manifest, "--iterations", "2"), start(manifest, "--iterations", "2")]
    results = [(p.wait(timeout=60), p.communicate()[1]) for p in both]
    codes = sorted(code for code, _err in results)
    assert codes == [0, 11], results
    refused = next(err for code, err in results if code == 11)
    winner = next(p for p in both if p.returncode == 0)
    assert f"pid {winner.pid}" in refused and "Traceback" not in refused
    starts = [e for e in events(manifest) if e["kind"] == "start"]
    assert len(starts) == 1  # the refused engine wrote nothing to the log


def test_resume_beside_a_live_run_is_refused_even_without_control_json(tmp_path: Path) -> None:
    manifest = domain(tmp_path, SLOW_PROPOSER)
    gate = tmp_path / "hold"
    gate.touch()
    live = start(manifest, "--iterations", "3", NAP="0", GATE=str(gate))
    wait_for(manifest, live, lambda log: any(e["kind"] == "step" and e["step"] == "propose" for e in log))
    (tmp_path / "state" / "control.json").unlink()
    second = start(manifest, "--resume")
    _out, err = second.communicate(timeout=60)
    gate.unlink()  # the live run goes on only now, so the resume above met it running
    assert second.returncode == 11, err
    assert f"pid {live.pid}" in err
    assert live.wait(timeout=60) == 0, live.communicate()
    log = events(manifest)
    assert [e["kind"] for e in log].count("start") == 1
    assert [e["row"]["iter"] for e in log if e["kind"] == "row"] == [0, 1, 2, 3]
    # the lock dies with its holder: a resume afterwards is let in (nothing left to do)
    after = start(manifest, "--resume")
    assert after.wait(timeout=60) == 0, after.communicate()


def test_a_closed_stdout_ends_the_view_not_the_run(tmp_path: Path) -> None:
    manifest = domain(tmp_path, SLOW_PROPOSER)
    first = start(manifest, "--iterations", "1", NAP="0")
    assert first.wait(timeout=60) == 0, first.communicate()
    # `crucible run --resume --ui jsonl | head -n 1`: the reader goes away after one line
    proc = subprocess.Popen(
        [str(CRUCIBLE), "run", "--manifest", str(manifest), "--resume", "--iterations", "3", "--ui", "jsonl"],
        env=crucible_env(PYTHON=sys.executable, NAP="0.2"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode() if proc.stderr else ""
    assert proc.wait(timeout=60) == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err
    log = events(manifest)
    assert log[-1]["kind"] == "shutdown" and log[-1]["outcome"] == "finished"
    assert [e["row"]["iter"] for e in log if e["kind"] == "row"] == [0, 1, 2, 3]


# A measure note that tries to retitle the terminal and clear the screen, and a proposer that
# leaves a warning-level trail: the console shows the text, never the escapes.
ESCAPING_MEASURE = r"""#!/bin/sh
v=$(cat value.txt)
printf '{"valid": true, "score": %s, "note": "v\u001b]0;PWNED\u0007\u001b[2J\u009b31m\u202eok"}\n' "$v"
"""


def test_the_console_prints_no_terminal_escapes_from_measure_text(tmp_path: Path) -> None:
    manifest = domain(tmp_path, SLOW_PROPOSER)
    (tmp_path / "measure.sh").write_text(ESCAPING_MEASURE)
    proc = subprocess.run(
        [str(CRUCIBLE), "run", "--manifest", str(manifest), "--iterations", "1"],
        env=crucible_env(PYTHON=sys.executable, NAP="0"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "iter 1/1" in proc.stderr and "ok" in proc.stderr
    controls = [c for c in proc.stderr if (ord(c) < 32 and c != "\n") or 0x7F <= ord(c) <= 0x9F]
    assert controls == [] and "\u202e" not in proc.stderr
    assert "PWNED" not in proc.stderr  # the title payload went with its escape sequence


# 100 MB of output in one turn: lines, then one line with no newline at all.
FLOODING_PROPOSER = """#!/bin/sh
"$PYTHON" - <<'PY'
import sys
line = b"flood " + b"x" * 94 + b"\\n"
for _ in range(900_000):
    sys.stdout.buffer.write(line)
sys.stdout.buffer.write(b"y" * 10_000_000)
sys.stdout.buffer.write(b"\\nthe last words\\n")
PY
echo $(( $(cat value.txt) + 1 )) > value.txt
"""


def test_a_flood_of_agent_output_leaves_a_small_log(tmp_path: Path) -> None:
    manifest = domain(tmp_path, FLOODING_PROPOSER)
    proc = start(manifest, "--iterations", "1")
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    log_path = tmp_path / "state" / "session.jsonl"
    assert log_path.stat().st_size < 2_000_000  # 100 MB printed; the log holds the allowance and a tail
    log = events(manifest)
    texts = [e["event"] for e in log if e["kind"] == "agent" and e["event"]["kind"] == "text"]
    truncated = [e for e in texts if e.get("truncated")]
    assert len(truncated) == 1
    assert truncated[0]["delta"].endswith("the last words")
    assert truncated[0]["truncated"]["dropped_chars"] > 50_000_000
    assert any(e["kind"] == "note" and "not logged" in e["msg"] for e in log)
    assert [r["row"]["decision"] for r in log if r["kind"] == "row"] == ["baseline", "keep"]
