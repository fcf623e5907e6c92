"""The service parts on their own: requirements, declarations, the catalog, a supervised service."""

from __future__ import annotations

import errno
import socket
import sys
import time
from pathlib import Path

import pytest

from crucible_core import process
from crucible_core.manifest.semver import admits
from crucible_core.manifest.service_declaration import ServiceDeclarationError, parse_declarations
from crucible_core.services.catalog import CATALOG_ENV, CatalogError, load_catalog
from crucible_core.services.resolve import resolve
from crucible_core.services.runtime import free_loopback_port
from tests.cli_support import run_crucible
from tests.services.support import write_catalog


@pytest.mark.parametrize(
    ("requirement", "version", "expected"),
    [
        ("*", "3.1.4", True),
        ("^0.1", "0.1.9", True),
        ("^0.1", "0.2.0", False),
        ("^1.2", "1.9.0", True),
        ("^1.2", "2.0.0", False),
        ("~1.2.3", "1.2.9", True),
        ("~1.2.3", "1.3.0", False),
        (">=1.0, <2", "1.5.0", True),
        (">=1.0, <2", "2.0.0", False),
        ("=1.0.0", "1.0.1", False),
        ("1.0", "1.0.0-rc1", False),
    ],
)
def test_version_requirements(requirement: str, version: str, expected: bool) -> None:
    assert admits(requirement, version) is expected


def problems(tables: list[dict[str, object]], roots: list[Path] = ()) -> list[str]:
    with pytest.raises(ServiceDeclarationError) as caught:
        parse_declarations(tables, forbidden_roots=roots)
    return caught.value.problems


def test_declarations_are_refused_naming_the_service_and_the_field(tmp_path: Path) -> None:
    assert problems([{"name": "Cluster", "tool": "t"}]) == [
        "service 'Cluster': field name must match [a-z][a-z0-9_]*"
    ]
    assert "field name repeats" in problems([{"name": "a", "tool": "t"}, {"name": "a", "tool": "t"}])[0]
    assert problems([{"name": "a"}]) == ["service 'a': field tool is required (the catalog tool's name)"]
    assert "field args must be a list of strings" in problems([{"name": "a", "tool": "t", "args": "x y"}])[0]
    assert "field version" in problems([{"name": "a", "tool": "t", "version": "latest"}])[0]
    assert (
        "each secret needs scope"
        in problems([{"name": "a", "tool": "t", "secrets": [{"name": "S", "system": "jira"}]}])[0]
    )
    (tmp_path / "ws").mkdir()
    inside = problems([{"name": "a", "tool": "t", "args": ["--config=../ws/x"]}], [tmp_path / "ws"])
    assert "service 'a': field args" in inside[0] and "names a path inside" in inside[0]
    # The tool runs in <state>/services/<name>: from there, ../../../workspace is the workspace.
    climbing = problems(
        [{"name": "a", "tool": "t", "args": ["../../../workspace/evil.py", "-v"]}], [tmp_path / "ws"]
    )
    assert (
        len(climbing) == 1
        and "'../../../workspace/evil.py' climbs out of the directory the tool runs in" in climbing[0]
    )
    fine = parse_declarations(
        [{"name": "a", "tool": "t", "args": ["--endpoint", "http://127.0.0.1:1/mcp", "-v"], "version": "^1"}],
        forbidden_roots=[tmp_path / "ws"],
    )
    assert fine[0].capability == "service.a"


def test_a_catalog_entry_pins_its_executable_by_digest(tmp_path: Path) -> None:
    tool = tmp_path / "tool"
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    catalog = load_catalog({CATALOG_ENV: str(write_catalog(tmp_path, tool))})
    declared = parse_declarations([{"name": "cluster", "tool": "oubliette-cluster", "version": "^0.1"}])
    assert resolve(declared, catalog, frozenset()).services[0].available
    tool.write_text("#!/bin/sh\nexit 1\n")
    problem = resolve(declared, catalog, frozenset()).services[0].problem
    assert problem is not None and "'oubliette-cluster'" in problem and "sha256" in problem
    too_new = parse_declarations([{"name": "cluster", "tool": "oubliette-cluster", "version": "^1"}])
    assert "does not admit" in str(resolve(too_new, catalog, frozenset()).services[0].problem)
    secret = parse_declarations(
        [{"name": "c", "tool": "oubliette-cluster", "secrets": [{"name": "T", "system": "s", "scope": "x"}]}]
    )
    tool.write_text("#!/bin/sh\nexit 0\n")
    assert "secret(s) T not granted" in str(resolve(secret, catalog, frozenset()).services[0].problem)
    (tmp_path / "bad.toml").write_text('[[tool]]\nname = "x"\nexecutable = "relative"\n')
    with pytest.raises(CatalogError, match="required"):
        load_catalog({CATALOG_ENV: str(tmp_path / "bad.toml")})


def test_the_port_given_to_a_service_is_held_until_the_tool_binds_it() -> None:
    """No other bind can take it in the meantime (another run's service once did, in CI, and
    answered this run's readiness probe), yet the tool binding it by number with SO_REUSEADDR can."""
    port = free_loopback_port()
    with socket.socket() as other:
        with pytest.raises(OSError) as refused:
            other.bind(("127.0.0.1", port))
        assert refused.value.errno == errno.EADDRINUSE
    with socket.socket() as tool:
        tool.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tool.bind(("127.0.0.1", port))
        tool.listen()
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass


def test_a_service_ignoring_the_stop_signal_is_killed_after_the_grace(tmp_path: Path) -> None:
    stubborn = "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    child = process.spawn([sys.executable, "-c", stubborn], cwd=tmp_path, env={}, output=tmp_path / "out")
    deadline = time.monotonic() + 60
    while "up" not in (tmp_path / "out").read_text():  # its handler is in place before the signal
        assert child.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    status, killed = child.stop(0.3)
    assert killed and status == -9
    polite = process.spawn(
        [sys.executable, "-c", "import time; time.sleep(60)"], cwd=tmp_path, env={}, output=tmp_path / "o2"
    )
    status, killed = polite.stop(5)
    assert not killed and status == -15


@pytest.mark.leaves_open_log("it drives the service runtime alone, writing a log of its events only")
def test_a_catalog_reclaim_command_cleans_up_without_starting_a_service(tmp_path: Path) -> None:
    """A resumed run whose remaining tasks need no service must not start one (C-SERVICE-LIFECYCLE):
    with `reclaim_args` in the catalog, the attested executable runs once to reclaim, under the
    run id, and no instance (no port, no readiness, no service_start) is made."""
    from crucible_core.contract import wire
    from crucible_core.services.run_services import left_running
    from crucible_core.services.runtime import ServiceRuntime

    record = tmp_path / "calls.txt"
    tool = tmp_path / "tool"
    tool.write_text(
        f"#!{sys.executable}\nimport os, sys\n"
        f"open({str(record)!r}, 'a').write(' '.join(sys.argv[1:]) + ' ' + os.environ['CRUCIBLE_RUN_ID'] + ' '"
        " + str('CRUCIBLE_SERVICE_PORT' in os.environ) + '\\n')\n"
    )
    tool.chmod(0o755)
    catalog_path = write_catalog(tmp_path, tool)
    catalog_path.write_text(catalog_path.read_text() + 'reclaim_args = ["--reclaim", "--all"]\n')
    declared = parse_declarations([{"name": "cluster", "tool": "oubliette-cluster", "args": ["--serve"]}])
    resolution = resolve(declared, load_catalog({CATALOG_ENV: str(catalog_path)}), frozenset())
    events: list[object] = []
    runtime = ServiceRuntime(
        resolution, run_id="run-7", state_dir=tmp_path / "state", emit=events.append, env={}, transports={}
    )
    try:
        runtime.reclaim(["cluster"])
    finally:
        runtime.close()
    assert record.read_text() == "--reclaim --all run-7 False\n"  # once, no port: not a service
    assert events == [wire.ServiceReclaim(service="cluster", status=0, note="")]
    # recorded in the log, the reclaim closes what the killed instance left running
    log = tmp_path / "session.jsonl"
    lines = [wire.ServiceStart(service="cluster", port=1, task="t", attempt=1, resolution="r"), *events]
    log.write_text("".join(wire.encode(event) + "\n" for event in lines))  # type: ignore[arg-type]
    assert left_running(log) == []


def test_tasks_sharing_a_session_must_declare_the_same_needs(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(
        "version = 1\n[budget]\nusd = 1.0\n"
        '[[task]]\nname = "a"\nkind = "agent"\nprompt = "p"\nsession = "s"\nneeds = "service.x"\n'
        '[[task]]\nname = "b"\nkind = "agent"\nprompt = "p"\nsession = "s"\ndepends_on = ["a"]\n'
    )
    done = run_crucible("plan", "show", plan)
    assert done.returncode == 10
    assert "session 's' declare different needs" in done.stderr
