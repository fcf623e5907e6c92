"""One openshell turn at a time against the test gateway: the sandbox's whole life, and every way it breaks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crucible_backend_openshell.gateway import policy_message
from crucible_backend_openshell.services import ServiceNeed
from crucible_backend_openshell.settings import Timeouts
from crucible_core.manifest.models import Seconds
from crucible_core.protocols import FailureClass
from tests.backend_openshell.conftest import PROVIDER_KEY
from tests.backend_openshell.fake_gateway import FakeGateway
from tests.backend_openshell.support import IMAGE, ScriptedHarness, make_backend, make_turn, settings


def test_a_turn_creates_runs_streams_syncs_and_deletes(
    gateway: FakeGateway, workspace: Path, private_dir: Path
) -> None:
    (workspace / "gone.txt").write_text("the agent deletes nothing here, the sync must keep me\n")
    harness = ScriptedHarness()
    table = settings(gateway, endpoints=("api.example.com:443:read-only",), providers=("anthropic",))
    backend = make_backend(table, harness, workspace, private_dir, disclosed={"FOO": "bar"})
    result = backend.run_turn(make_turn(workspace, {"FOO": "bar", "CRUCIBLE_ITERATION": "1"}))

    assert result.ok, result.note
    assert (workspace / "value.txt").read_text() == "2\n"  # the edit came back
    assert (workspace / "gone.txt").exists()
    assert [json.loads(line)["event"] for line in harness.lines] == ["edited", "done"]
    seen = json.loads((workspace / "seen-env.json").read_text())
    # the provider key came from the gateway's own mechanism, not from crucible
    assert seen == {"IS_SANDBOX": "1", "PROVIDED_KEY": PROVIDER_KEY, "CRUCIBLE_ITERATION": "1"}

    (create,) = gateway.requests("CreateSandbox")
    assert create.spec.template.image == IMAGE and list(create.spec.providers) == ["anthropic"]
    assert create.labels["crucible.run-id"].startswith("adhoc-")
    assert create.spec.policy == policy_message(backend.resolved_egress())
    hosts = [(e.host, e.port) for e in create.spec.policy.network_policies["crucible"].endpoints]
    assert ("api.example.com", 443) in hosts and ("api.anthropic.com", 443) in hosts
    assert [r.name for r in gateway.requests("DeleteSandbox")] == [create.name]
    assert gateway.sandboxes == {}


def test_inherit_defaults_false_sends_exactly_the_manifest_egress(
    gateway: FakeGateway, workspace: Path, private_dir: Path
) -> None:
    table = settings(
        gateway,
        endpoints=("models.internal:8443:full",),
        binaries=("/opt/agent/bin/claude",),
        inherit_defaults=False,
    )
    backend = make_backend(table, ScriptedHarness(), workspace, private_dir)
    assert backend.run_turn(make_turn(workspace, {})).ok
    (create,) = gateway.requests("CreateSandbox")
    (rule,) = create.spec.policy.network_policies.values()
    assert [(e.host, e.port) for e in rule.endpoints] == [("models.internal", 8443)]
    assert [b.path for b in rule.binaries] == ["/opt/agent/bin/claude"]


@pytest.mark.parametrize(
    ("fail", "failure", "created"),
    [
        ("unavailable", FailureClass.SPAWN, False),
        ("refuse_create", FailureClass.SPAWN, True),
        ("never_ready", FailureClass.SPAWN, True),
        ("cut_stream", FailureClass.STREAM, True),
    ],
)
def test_transport_failures_are_classified_and_still_delete(
    gateway: FakeGateway, workspace: Path, private_dir: Path, fail: str, failure: FailureClass, created: bool
) -> None:
    gateway.fail = fail
    backend = make_backend(settings(gateway), ScriptedHarness(), workspace, private_dir)
    result = backend.run_turn(make_turn(workspace, {}))
    assert not result.ok and result.failure is failure and result.transport_failure, result.note
    assert (workspace / "value.txt").read_text() == "1\n"  # nothing came back from a broken turn
    creates = gateway.requests("CreateSandbox")
    if created:
        assert [r.name for r in gateway.requests("DeleteSandbox")] == [r.name for r in creates]
    assert gateway.sandboxes == {}


def test_an_unreachable_gateway_is_a_transport_failure(
    tmp_path: Path, workspace: Path, private_dir: Path
) -> None:
    gateway = FakeGateway(tmp_path / "g")
    address = gateway.address
    gateway.stop()  # nothing listens there any more
    backend = make_backend(
        settings(gateway, timeouts=Timeouts(connect=Seconds(2.0))), ScriptedHarness(), workspace, private_dir
    )
    result = backend.run_turn(make_turn(workspace, {}))
    assert result.failure is FailureClass.SPAWN and "unreachable" in result.note, (address, result.note)


def test_an_agent_error_is_measured_not_transport(
    gateway: FakeGateway, workspace: Path, private_dir: Path
) -> None:
    backend = make_backend(
        settings(gateway), ScriptedHarness(), workspace, private_dir, disclosed={"AGENT_EXIT": "3"}
    )
    result = backend.run_turn(make_turn(workspace, {"AGENT_EXIT": "3"}))
    assert result.failure is FailureClass.AGENT and not result.transport_failure
    assert (workspace / "value.txt").read_text() == "2\n"  # what it did still came back
    assert gateway.sandboxes == {}


def test_only_the_disclosed_env_reaches_the_sandbox(
    gateway: FakeGateway, workspace: Path, private_dir: Path
) -> None:
    secret = "canary-engine-secret-6c1d0e9b"
    engine_env = {"AWS_SECRET_ACCESS_KEY": secret, "GITHUB_TOKEN": secret + "-gh", "DISCLOSED": "yes"}
    backend = make_backend(
        settings(gateway), ScriptedHarness(), workspace, private_dir, disclosed={"DISCLOSED": "yes"}
    )
    assert backend.run_turn(make_turn(workspace, engine_env)).ok
    wire = b"".join(request.SerializeToString() for _, request in gateway.calls)
    assert secret.encode() not in wire and b"AWS_SECRET_ACCESS_KEY" not in wire
    assert PROVIDER_KEY.encode() not in wire  # held by the gateway, never sent by crucible
    (agent,) = [r for r in gateway.requests("ExecSandbox") if r.command[0] == "python3"]
    assert agent.environment["DISCLOSED"] == "yes"


def test_a_service_forward_refuses_requests_without_its_bearer(
    gateway: FakeGateway, workspace: Path, private_dir: Path
) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Service(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return

        def do_GET(self) -> None:
            body = b"tickets: 3 open"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    service = ThreadingHTTPServer(("127.0.0.1", 0), Service)
    threading.Thread(target=service.serve_forever, daemon=True).start()
    try:
        need = ServiceNeed("tickets", service.server_address[1], "per-run-bearer-0123456789abcdef")
        backend = make_backend(settings(gateway), ScriptedHarness(), workspace, private_dir)
        assert backend.run_turn_with(make_turn(workspace, {}), [need]).ok
        results = json.loads((workspace / "service-results.json").read_text())
        assert results["service.tickets without"][0] == 401
        assert results["service.tickets with"] == [200, "tickets: 3 open"]
        assert results["mode"] == "0o600"  # the bearer travels in a private file
        (expose,) = gateway.requests("ExposeService")
        assert expose.name == "svc-tickets" and expose.authorization_mode == 2  # BEARER_PASSTHROUGH
        # the gateway forward is in that sandbox's egress, and only while a turn needs it
        (create,) = gateway.requests("CreateSandbox")
        host, port = gateway.address.rsplit(":", 1)
        rule = create.spec.policy.network_policies["crucible"]
        assert (host, int(port)) in [(e.host, e.port) for e in rule.endpoints]
        (workspace / "service-results.json").unlink()
        assert backend.run_turn(make_turn(workspace, {}, iteration=2)).ok
        second = gateway.requests("CreateSandbox")[1].spec.policy.network_policies["crucible"]
        assert (host, int(port)) not in [(e.host, e.port) for e in second.endpoints]
        assert len(gateway.requests("ExposeService")) == 1
        assert "per-run-bearer" not in json.dumps([str(r) for _, r in gateway.calls if _ == "CreateSandbox"])
    finally:
        service.shutdown()
        service.server_close()


def test_services_the_engine_hands_a_turn_reach_the_sandbox_through_the_gateway(
    gateway: FakeGateway, workspace: Path, private_dir: Path
) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import attrs

    from crucible_core.services.runtime import ServiceForward

    class Service(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return

        def do_GET(self) -> None:
            body = b"the run's service"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    service = ThreadingHTTPServer(("127.0.0.1", 0), Service)
    threading.Thread(target=service.serve_forever, daemon=True).start()
    try:
        bearer = "per-run-bearer-fedcba9876543210"
        forward = ServiceForward(
            service="tickets",
            url="http://127.0.0.1:9/host-only",
            bearer=bearer,
            port=service.server_address[1],
        )
        # What the engine's before-turn hook leaves on the turn: the host-side forward, unusable in a sandbox.
        turn = attrs.evolve(
            make_turn(workspace, {"CRUCIBLE_SERVICE_TICKETS_URL": forward.url}),
            services=(forward,),
            mcp_servers={"service.tickets": forward.mcp_config()},
        )
        backend = make_backend(settings(gateway), ScriptedHarness(), workspace, private_dir)
        assert backend.services_for(turn) == (ServiceNeed("tickets", service.server_address[1], bearer, ""),)
        assert backend.run_turn(turn).ok
        results = json.loads((workspace / "service-results.json").read_text())
        assert results["service.tickets without"][0] == 401
        assert results["service.tickets with"] == [200, "the run's service"]  # through the gateway's exposure
        (expose,) = gateway.requests("ExposeService")
        assert expose.name == "svc-tickets"
    finally:
        service.shutdown()
        service.server_close()


def test_a_sessions_store_follows_it_into_the_next_fresh_sandbox(
    gateway: FakeGateway, workspace: Path, private_dir: Path
) -> None:
    backend = make_backend(settings(gateway), ScriptedHarness(), workspace, private_dir)
    first = make_turn(workspace, {"CRUCIBLE_ITERATION": "1"}, session="solver")
    assert backend.run_turn(first).ok
    assert not (workspace / "restored.json").exists()
    (store,) = (private_dir / "openshell" / "sessions").iterdir()
    assert store.stat().st_mode & 0o777 == 0o600 and (store.parent.stat().st_mode & 0o777) == 0o700
    second = make_turn(workspace, {"CRUCIBLE_ITERATION": "2"}, iteration=2, session="solver")
    assert backend.run_turn(second).ok
    text, mode = json.loads((workspace / "restored.json").read_text())
    assert text == "turn 1\n" and mode == "0o600"  # restored, private, in a sandbox of its own
    assert len(gateway.requests("DeleteSandbox")) == 2 and gateway.sandboxes == {}
    # a turn outside any session starts clean
    (workspace / "restored.json").unlink()
    assert backend.run_turn(make_turn(workspace, {}, iteration=3)).ok
    assert not (workspace / "restored.json").exists()
