"""A playbook manifest declares `[[service]]`: only its tasks that need service.cluster reach the cluster.

The same tool, catalog and scripted Oubliette as the plan-file tests, driven through
`crucible run --manifest crucible.toml` (the playbook lane): a command task gets the kubeconfig,
an agent task (command backend) gets the MCP server `service.cluster` and calls it through the
forward, and a task that needs nothing sees neither.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from crucible_core.session_log import read_events
from tests.cli_support import run_crucible
from tests.services.support import (
    CALL_CLUSTER_STATUS,
    ScriptedOubliette,
    env_for,
    scripted,
    service_table,
    tool_processes,
    write_catalog,
)

# The agent task's stand-in: find service.cluster in the turn's MCP config, call it with the
# entry's own headers, and write the playbook's result file.
AGENT = (
    CALL_CLUSTER_STATUS
    + """with open("PLAN_TASK_RESULT.json", "w") as out:
    json.dump({"servers": sorted(servers), "phase": found["phase"], "name": found["name"]}, out)
"""
)

TASKS = """
[[workflow.task]]
name = "plain"
kind = "command"
command = '''printf '{"kubeconfig": "%s", "service_vars": %s}' "${KUBECONFIG:-}" "$(env | grep -c '^CRUCIBLE_SERVICE_CLUSTER' || true)"'''

[[workflow.task]]
name = "deploy"
kind = "command"
needs = "service.cluster"
depends_on = ["plain"]
command = '''test -z "$OUBLIETTE_MCP_TOKEN" && grep -m1 "server:" "$KUBECONFIG" | sed 's/.*server: //' | xargs printf '{"server": "%s"}' '''

[[workflow.task]]
name = "look"
kind = "agent"
prompt = "look at the cluster"
needs = "service.cluster"
depends_on = ["deploy"]
"""


@pytest.fixture
def oubliette(tmp_path: Path) -> Iterator[ScriptedOubliette]:
    yield from scripted(tmp_path)


def write_pack(root: Path, endpoint: str, tasks: str = TASKS) -> Path:
    pack = root / "pack"
    pack.mkdir()
    (root / "agent.py").write_text(AGENT)
    (pack / "crucible.toml").write_text(
        '[workflow]\ntype = "playbook"\n\n'
        f'[agent]\ngoal = "use the cluster"\nbackend = "command"\nagent_cmd = \'"$PYTHON" {root / "agent.py"}\'\n\n'
        + service_table(endpoint)
        + tasks
    )
    return pack


def play(pack: Path, env: dict[str, str], *args: str):
    return run_crucible(
        "run",
        "--manifest",
        pack / "crucible.toml",
        "--max-cost",
        "1",
        "--max-time",
        "5m",
        *args,
        cwd=pack,
        env=env,
    )


def test_only_the_tasks_that_need_the_service_reach_the_cluster(
    tmp_path: Path, oubliette: ScriptedOubliette
) -> None:
    pack = write_pack(tmp_path, oubliette.endpoint)
    done = play(pack, env_for(tmp_path, write_catalog(tmp_path)))
    assert done.returncode == 0, done.stdout + done.stderr
    events = list(read_events(pack / "state" / "session.jsonl"))
    results = {e["task"]: e for e in events if e["kind"] == "task_result"}
    assert results["plain"]["output"] == {"kubeconfig": "", "service_vars": 0}
    assert results["deploy"]["output"]["server"].startswith("https://vc-crucible-")
    assert results["look"]["output"]["servers"] == ["service.cluster"]
    assert results["look"]["output"]["phase"] == "Ready"
    # One shared instance, started by the first task that needed it, stopped at the end.
    started = [e for e in events if e["kind"] == "service_start"]
    assert [(e["service"], e["task"]) for e in started] == [("cluster", "deploy")]
    assert [e["how"] for e in events if e["kind"] == "service_exit"] == ["stopped"]
    # stopped before the closing lines, which end with the shutdown
    kinds = [e["kind"] for e in events]
    assert kinds.index("service_exit") < kinds.index("summary") and kinds[-1] == "shutdown"
    # the run's identity covers its services, as the loop's does
    (identity,) = [e["identity"] for e in events if e["kind"] == "identity"]
    assert [s["name"] for s in identity["services"]] == ["cluster"]
    assert [c for c in oubliette.tools_called() if c == "oubliette_create"] == ["oubliette_create"]
    assert oubliette.inventory() == {}
    assert tool_processes(str(tmp_path)) == []


def test_a_bad_service_declaration_is_refused_before_the_workflow_compiles(tmp_path: Path) -> None:
    pack = write_pack(tmp_path, "http://127.0.0.1:9/mcp")
    text = (pack / "crucible.toml").read_text()
    # A broken graph too: the service is what the refusal names, so it was checked first.
    (pack / "crucible.toml").write_text(
        text.replace('name = "cluster"', 'name = "Cluster"').replace(
            'depends_on = ["plain"]', 'depends_on = ["nope"]'
        )
    )
    done = play(pack, env_for(tmp_path, None))
    assert done.returncode == 10, done.stdout + done.stderr
    assert "service 'Cluster'" in done.stderr or "#1" in done.stderr
    assert "field name" in done.stderr and "nope" not in done.stderr
    assert not (pack / "state").exists() and not (pack / "workspace").exists()


def test_an_argument_naming_a_pack_path_is_refused_naming_service_and_field(tmp_path: Path) -> None:
    pack = write_pack(tmp_path, "http://127.0.0.1:9/mcp")
    text = (pack / "crucible.toml").read_text()
    (pack / "crucible.toml").write_text(
        text.replace('"--ttl-seconds"', '"--config=./evil.yaml", "--ttl-seconds"')
    )
    done = play(pack, env_for(tmp_path, None))
    assert done.returncode == 10, done.stdout + done.stderr
    assert "service 'cluster': field args" in done.stderr and "evil.yaml" in done.stderr


def test_an_unattested_service_truncates_the_playbook_by_name(tmp_path: Path) -> None:
    pack = write_pack(tmp_path, "http://127.0.0.1:9/mcp")
    done = play(pack, env_for(tmp_path, None))  # no catalog named: nothing attested
    assert done.returncode == 4, done.stdout + done.stderr
    events = list(read_events(pack / "state" / "session.jsonl"))
    results = {e["task"]: e for e in events if e["kind"] == "task_result"}
    assert results["deploy"]["status"] == "truncated"
    assert "oubliette-cluster" in json.dumps(results["deploy"])
    assert not [e for e in events if e["kind"] == "service_start"]


def test_check_prints_the_playbooks_service_resolution(tmp_path: Path) -> None:
    pack = write_pack(tmp_path, "http://127.0.0.1:9/mcp")
    checked = run_crucible(
        "check",
        "--manifest",
        pack / "crucible.toml",
        cwd=pack,
        env=env_for(tmp_path, write_catalog(tmp_path)),
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "service bounds: readiness 30s, restarts 2, grace 5s" in checked.stdout
    assert "needed by deploy, look; available" in checked.stdout
    refused = run_crucible(
        "check", "--manifest", pack / "crucible.toml", cwd=pack, env=env_for(tmp_path, None)
    )
    assert refused.returncode == 13, refused.stdout + refused.stderr
    assert "task deploy needs service.cluster: tool 'oubliette-cluster' is not attested" in refused.stdout


def test_the_disclosure_lists_each_service_as_a_relay(tmp_path: Path) -> None:
    pack = write_pack(tmp_path, "http://127.0.0.1:9/mcp")
    env = env_for(tmp_path, write_catalog(tmp_path))
    done = run_crucible("plan", "exposure", "--manifest", pack / "crucible.toml", cwd=pack, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    (relay,) = json.loads(done.stdout)["capabilities"]["relays"]
    assert relay["service"] == "cluster" and relay["tool"] == "oubliette-cluster"
    assert relay["secrets"] == [
        {
            "name": "OUBLIETTE_MCP_TOKEN",
            "context": "service",
            "system": "oubliette",
            "scope": "create and delete clusters",
        }
    ]
    assert relay["exposed_to"] == ["deploy", "look"]  # never "plain"
    assert relay["forward"] == "the engine's authenticating loopback forward"
    assert relay["handoff"] == {
        "env": "KUBECONFIG",
        "context": "agent",
        "target": "the run's virtual cluster",
        "scope": "cluster-admin inside it",
    }
    assert "scripted-oubliette-token" not in done.stdout
