"""The loop's agent turns reach the services `[agent].services` names; the run identity covers them.

A keep/discard run on the command backend: each turn's stand-in agent finds `service.cluster`
in its MCP config, calls the catalog tool through the engine's forward, and records what it saw.
The scripted Oubliette shows the tool's calls; the session log shows the service's life.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from crucible_core.services.catalog import file_sha256
from crucible_core.session_log import read_events
from tests.cli_support import run_crucible
from tests.services.support import (
    CALL_CLUSTER_STATUS,
    TOOL,
    ScriptedOubliette,
    env_for,
    scripted,
    service_table,
    tool_processes,
    write_catalog,
)

AGENT = (
    CALL_CLUSTER_STATUS
    + """kubeconfig = os.environ.get("KUBECONFIG", "")
seen = {
    "servers": sorted(servers),
    "phase": found["phase"],
    "kubeconfig": os.path.isfile(kubeconfig) and "server: https://" in open(kubeconfig).read(),
    "token_visible": "OUBLIETTE_MCP_TOKEN" in os.environ,
}
with open(os.environ["SEEN"], "a") as out:
    out.write(json.dumps(seen) + "\\n")
with open("value.txt") as handle:
    value = int(handle.read())
with open("value.txt", "w") as handle:
    handle.write(f"{value + 1}\\n")
"""
)

MANIFEST = """
[repo]
path = "."

[workspace]
dir = "workspace"
setup_cmd = "mkdir -p workspace && cp value.txt workspace/"

[agent]
backend = "command"
agent_cmd = '"$PYTHON" {agent}'
goal = "raise the value, looking at the cluster"
services = ["cluster"]

# a command agent gets the broker beside the service only when the manifest asks for it
[agent.broker]
enabled = true

[judge]
measure_cmd = "../measure.sh"
direction = "higher"
"""


@pytest.fixture
def oubliette(tmp_path: Path) -> Iterator[ScriptedOubliette]:
    yield from scripted(tmp_path)


def domain(root: Path, endpoint: str) -> Path:
    pack = root / "domain"
    pack.mkdir()
    (pack / "value.txt").write_text("1\n")
    measure = pack / "measure.sh"
    # The measure records whether it could see the service's secret (it must not).
    measure.write_text(
        '#!/bin/sh\nenv | grep -c "^OUBLIETTE_MCP_TOKEN=" >> "$SEEN.measure"\n'
        'printf \'{"valid": true, "score": %s}\\n\' "$(cat value.txt)"\n'
    )
    measure.chmod(0o755)
    (root / "agent.py").write_text(AGENT)
    (pack / "crucible.toml").write_text(MANIFEST.format(agent=root / "agent.py") + service_table(endpoint))
    return pack / "crucible.toml"


def events(manifest: Path) -> list[dict[str, object]]:
    return list(read_events(manifest.parent / "state" / "session.jsonl"))


def test_agent_turns_get_the_service_as_an_mcp_server_started_at_the_first_turn(
    tmp_path: Path, oubliette: ScriptedOubliette
) -> None:
    manifest = domain(tmp_path, oubliette.endpoint)
    seen = tmp_path / "seen.jsonl"
    env = env_for(tmp_path, write_catalog(tmp_path), SEEN=str(seen))
    done = run_crucible("--manifest", manifest, "--iterations", "2", "--ui", "headless", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    turns = [json.loads(line) for line in seen.read_text().splitlines()]
    servers = [turn.pop("servers") for turn in turns]
    assert servers == [["crucible", "service.cluster"]] * 2  # beside the broker
    assert turns == [{"phase": "Ready", "kubeconfig": True, "token_visible": False}] * 2
    assert set((tmp_path / "seen.jsonl.measure").read_text().split()) == {"0"}  # nor did any measure
    log = events(manifest)
    kinds = [e["kind"] for e in log]
    # Lazily: the baseline was measured before anything started; one instance served both turns.
    starts = [e for e in log if e["kind"] == "service_start"]
    assert [(e["service"], e["task"]) for e in starts] == [("cluster", "agent turn 1")]
    assert kinds.index("service_start") > kinds.index("row")
    # Stopped at the run's end, before the shutdown line.
    assert [e["how"] for e in log if e["kind"] == "service_exit"] == ["stopped"]
    assert kinds.index("service_exit") < kinds.index("shutdown")
    (identity,) = [e for e in log if e["kind"] == "identity"]
    assert [s["name"] for s in identity["identity"]["services"]] == ["cluster"]
    assert "scripted-oubliette-token" not in (manifest.parent / "state" / "session.jsonl").read_text()
    assert oubliette.inventory() == {}
    assert tool_processes(str(tmp_path)) == []


def test_a_service_the_agent_turns_cannot_have_refuses_the_run_before_anything(tmp_path: Path) -> None:
    manifest = domain(tmp_path, "http://127.0.0.1:9/mcp")
    done = run_crucible(
        "--manifest", manifest, "--iterations", "1", "--ui", "headless", env=env_for(tmp_path, None)
    )
    assert done.returncode == 4, done.stdout + done.stderr
    assert "[agent].services" in done.stderr and "oubliette-cluster" in done.stderr
    assert not (manifest.parent / "state" / "session.jsonl").exists()


def test_agent_services_must_name_a_declared_service(tmp_path: Path) -> None:
    manifest = domain(tmp_path, "http://127.0.0.1:9/mcp")
    manifest.write_text(manifest.read_text().replace('services = ["cluster"]', 'services = ["tickets"]'))
    done = run_crucible("check", "--manifest", manifest, env=env_for(tmp_path, None))
    assert done.returncode == 10, done.stdout + done.stderr
    assert "[agent].services names 'tickets', which no [[service]] declares" in done.stderr


def test_a_resume_under_a_changed_catalog_is_detected_and_runs_the_new_resolution(
    tmp_path: Path, oubliette: ScriptedOubliette
) -> None:
    manifest = domain(tmp_path, oubliette.endpoint)
    env = env_for(tmp_path, write_catalog(tmp_path), SEEN=str(tmp_path / "seen.jsonl"))
    first = run_crucible("--manifest", manifest, "--iterations", "1", "--ui", "headless", env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    # The operator re-attests the tool at another version (same executable, same digest).
    catalog = Path(env["CRUCIBLE_SERVICE_CATALOG"])
    catalog.write_text(catalog.read_text().replace('version = "0.1.0"', 'version = "0.1.7"'))
    assert file_sha256(TOOL)  # the executable itself is unchanged
    again = run_crucible("--manifest", manifest, "--iterations", "2", "--resume", "--ui", "headless", env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    log = events(manifest)
    before, after = [e["identity"] for e in log if e["kind"] == "identity"]
    assert before["digest"] != after["digest"]
    assert before["services"][0]["digest"] != after["services"][0]["digest"]
    notes = " ".join(str(e.get("msg")) for e in log if e["kind"] == "note")
    assert "RUN IDENTITY CHANGED" in notes and "services" in notes
    assert "service(s) cluster resolve differently" in notes
    starts = [e for e in log if e["kind"] == "service_start"]
    assert (
        len(starts) == 2 and starts[0]["resolution"] != starts[1]["resolution"]
    )  # a new instance, new resolution
    assert oubliette.inventory() == {}


def test_a_suspended_run_stops_its_services_and_the_next_turn_starts_a_new_instance(
    tmp_path: Path, oubliette: ScriptedOubliette
) -> None:
    import subprocess
    import time

    from tests.cli_support import CRUCIBLE

    manifest = domain(tmp_path, oubliette.endpoint)
    # Turn 1 pages a human (distress error): the run suspends at the next iteration head.
    agent = tmp_path / "agent.py"
    agent.write_text(
        agent.read_text()
        + "\nimport subprocess, sys\n"
        + 'if os.environ["CRUCIBLE_ITERATION"] == "1":\n'
        + '    subprocess.run([sys.executable, "-m", "crucible_core.cli.main", "distress", "--severity", "error",'
        + ' "--reason", "need a human"], check=True)\n'
    )
    env = env_for(tmp_path, write_catalog(tmp_path), SEEN=str(tmp_path / "seen.jsonl"))
    proc = subprocess.Popen(
        [str(CRUCIBLE), "--manifest", str(manifest), "--iterations", "2", "--ui", "headless"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            path = manifest.parent / "state" / "session.jsonl"
            if path.exists() and any(e["kind"] == "service_exit" for e in read_events(path)):
                break
            time.sleep(0.1)
        suspended = [e for e in events(manifest) if e["kind"] == "service_exit"]
        assert [(e["how"], e["note"]) for e in suspended] == [("stopped", "suspended: the run is distressed")]
        assert oubliette.inventory() == {}  # nothing outlives the suspend
        assert tool_processes(str(tmp_path)) == []
        (manifest.parent / "state" / "distress" / "distress").unlink()  # the human's answer
        assert proc.wait(timeout=90) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log = events(manifest)
    starts = [e for e in log if e["kind"] == "service_start"]
    assert [(e["task"], e["attempt"]) for e in starts] == [("agent turn 1", 1), ("agent turn 2", 2)]
    assert [e["how"] for e in log if e["kind"] == "service_exit"] == ["stopped", "stopped"]
    assert oubliette.inventory() == {}


def test_sigkill_during_a_turn_then_resume_leaves_no_cluster_and_no_process(
    tmp_path: Path, oubliette: ScriptedOubliette
) -> None:
    import signal
    import subprocess
    import time

    from tests.cli_support import CRUCIBLE

    manifest = domain(tmp_path, oubliette.endpoint)
    agent = tmp_path / "agent.py"
    # The first turn holds the cluster until the engine is killed; the resumed run's turns do not.
    agent.write_text(
        agent.read_text()
        + "\nimport time\n"
        + 'marker = os.path.join(os.environ["SEEN"] + ".held")\n'
        + "if not os.path.exists(marker):\n"
        + "    open(marker, 'w').close()\n"
        + "    time.sleep(60)\n"
    )
    env = env_for(tmp_path, write_catalog(tmp_path), SEEN=str(tmp_path / "seen.jsonl"))
    proc = subprocess.Popen(
        [str(CRUCIBLE), "--manifest", str(manifest), "--iterations", "2", "--ui", "headless"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            if (tmp_path / "seen.jsonl.held").exists():
                break
            time.sleep(0.1)
        assert oubliette.inventory()  # the killed engine's cluster
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + 20
    while tool_processes(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert tool_processes(str(tmp_path)) == []  # the guard reaped the service with the engine
    assert oubliette.inventory()  # only the resume can reclaim it
    done = run_crucible("--manifest", manifest, "--iterations", "2", "--resume", "--ui", "headless", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert oubliette.inventory() == {}
    assert tool_processes(str(tmp_path)) == []
    created = [c["arguments"]["name"] for c in oubliette.calls() if c["tool"] == "oubliette_create"]
    deleted = [c["arguments"]["name"] for c in oubliette.calls() if c["tool"] == "oubliette_delete"]
    assert len(created) == 2 and set(created) <= set(deleted)


def test_check_fails_when_the_agent_turns_would_lose_their_service(tmp_path: Path) -> None:
    manifest = domain(tmp_path, "http://127.0.0.1:9/mcp")
    done = run_crucible("check", "--manifest", manifest, env=env_for(tmp_path, None))
    assert done.returncode == 13, done.stdout + done.stderr
    assert "needed by agent turns; UNAVAILABLE" in done.stdout
    assert "agent turns need service.cluster: tool 'oubliette-cluster' is not attested" in done.stdout
