"""The acp harness's parts on their own: settings, the mediation decision, confined file access,
terminals, the session-update decoder, the driver's stream and the verdict. No agent runs here."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from crucible_core.errors import ManifestError
from crucible_core.manifest.converter import converter
from crucible_core.process import Completed
from crucible_core.protocols import FailureClass
from crucible_harness_acp import confine, launch
from crucible_harness_acp import terminals as terminals_module
from crucible_harness_acp.client import Out, TurnClient
from crucible_harness_acp.driver import TurnFailed, mcp_servers
from crucible_harness_acp.policy import Grant, Option, ToolCallView, decide, path_problem
from crucible_harness_acp.settings import AcpSettings, AcpTable
from crucible_harness_acp.stream import DriverStream
from crucible_harness_acp.terminals import Terminals
from crucible_harness_acp.updates import UpdateDecoder
from crucible_harness_acp.verdict import classify
from tests.harness_acp.support import make_harness
from tests.harness_claude.support import Recorder

OPTIONS = [Option("always", "allow_always"), Option("once", "allow_once"), Option("no", "reject_once")]


# -- settings ------------------------------------------------------------------------------------


def test_the_table_is_validated_with_its_key_path() -> None:
    settings = converter.structure({"acp": {"command": ["agent", "--acp"]}}, AcpSettings)
    assert settings.acp.allow == ("read", "edit", "search", "think", "mcp")
    with pytest.raises(ValueError, match="'shell', which is not a tool family"):
        AcpTable(command=("agent",), allow=("read", "shell"))
    with pytest.raises(ValueError, match="command must name the agent program"):
        AcpTable(command=())
    with pytest.raises(ValueError, match="not an environment variable name"):
        AcpTable(command=("agent",), credentials=("MY-KEY",))


def test_a_manifest_selecting_acp_without_its_table_is_refused_by_name(tmp_path: Path) -> None:
    from crucible_core.manifest.models import AgentSection
    from crucible_core.protocols import HarnessContext
    from crucible_harness_acp.harness import AcpHarness

    with pytest.raises(ManifestError, match=r"needs an \[agent.acp\] table"):
        AcpHarness.from_context(HarnessContext(AgentSection(), tmp_path, tmp_path, None))


# -- mediation -----------------------------------------------------------------------------------


def test_only_a_granted_family_inside_the_workspace_is_allowed_and_only_once() -> None:
    grant = Grant(frozenset({"read", "edit"}))
    edit = ToolCallView("t1", "Write a.txt", "edit")
    allowed = decide(grant, edit, [], OPTIONS)
    assert (allowed.allowed, allowed.option_id) == (True, "once")  # never "always"
    execute = decide(grant, ToolCallView("t2", "`rm -rf /`", "execute"), [], OPTIONS)
    assert (execute.allowed, execute.option_id) == (False, "no")
    assert execute.reason == "tool family 'execute' is not granted by [agent.acp].allow"
    unknown = decide(grant, ToolCallView("t3", "Mystery", "teleport"), [], OPTIONS)
    assert (unknown.family, unknown.allowed) == ("other", False)
    outside = decide(grant, edit, ["/etc/passwd is outside the workspace"], OPTIONS)
    assert not outside.allowed and outside.reason == "/etc/passwd is outside the workspace"
    only_always = decide(grant, edit, [], [Option("always", "allow_always")])
    assert not only_always.allowed and only_always.option_id is None  # answered "cancelled"


def test_tools_of_crucibles_mcp_servers_are_the_mcp_family() -> None:
    grant = Grant(frozenset({"mcp"}), ("crucible", "service.db"))
    broker = ToolCallView("t1", "mcp__crucible__distress", "other")
    service = ToolCallView("t2", "query", "other", names=("mcp__service_db__query",))
    foreign = ToolCallView("t3", "mcp__elsewhere__steal", "other")
    disguised = ToolCallView("t4", "mcp__crucible__distress", "execute")  # a command named like a broker tool
    assert [grant.family(c) for c in (broker, service, foreign, disguised)] == [
        "mcp",
        "mcp",
        "other",
        "execute",
    ]
    assert decide(grant, broker, [], OPTIONS).allowed and not decide(grant, foreign, [], OPTIONS).allowed


def test_a_tool_call_view_merges_what_the_request_adds_to_what_updates_said() -> None:
    seen = ToolCallView("t1").merged(
        {
            "title": "Write",
            "kind": "edit",
            "locations": [{"path": "/ws/a"}],
            "_meta": {"x": {"toolName": "Write"}},
        }
    )
    asked = seen.merged({"title": "Write /ws/a", "rawInput": {}})  # a request without kind or locations
    assert (asked.title, asked.kind, asked.locations, asked.names) == (
        "Write /ws/a",
        "edit",
        ("/ws/a",),
        ("Write",),
    )


def test_path_problems_name_an_outside_path_and_a_link_out(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "out").symlink_to(tmp_path)
    (ws / "in").symlink_to(ws / "sub")
    assert path_problem(ws, str(ws / "sub" / "new.txt")) is None
    assert path_problem(ws, "sub/new.txt") is None
    assert path_problem(ws, str(ws / "in" / "x")) is None  # a link that stays inside
    assert path_problem(ws, str(tmp_path / "x")) == f"{tmp_path / 'x'} is outside the workspace"
    assert path_problem(ws, str(ws / ".." / "x")) == f"{ws / '..' / 'x'} is outside the workspace"
    assert (
        path_problem(ws, str(ws / "out" / "x"))
        == f"{ws / 'out' / 'x'} leads out of the workspace through a link"
    )


# -- file requests -------------------------------------------------------------------------------


def test_file_requests_stay_inside_the_workspace_and_follow_no_link(tmp_path: Path) -> None:
    ws = (tmp_path / "ws").resolve()
    ws.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    (ws / "lines.txt").write_text("a\nb\nc\n")
    (ws / "link.txt").symlink_to(outside)
    (ws / "dirlink").symlink_to(tmp_path)
    os.link(outside, ws / "hard.txt")
    os.mkfifo(ws / "fifo")

    assert confine.read_text(ws, str(ws / "lines.txt"), line=2, limit=1) == "b\n"
    confine.write_text(ws, str(ws / "new" / "deep" / "f.txt"), "made\n")
    assert (ws / "new" / "deep" / "f.txt").read_text() == "made\n"
    refusals = {
        "outside": (lambda: confine.read_text(ws, str(outside)), "is outside the workspace"),
        "relative": (lambda: confine.read_text(ws, "lines.txt"), "is not an absolute path"),
        "climb": (lambda: confine.read_text(ws, f"{ws}/../outside.txt"), "climbs with '..'"),
        "link": (lambda: confine.read_text(ws, str(ws / "link.txt")), "links are never followed"),
        "dirlink read": (
            lambda: confine.read_text(ws, str(ws / "dirlink" / "outside.txt")),
            "links are never followed",
        ),
        "dirlink write": (
            lambda: confine.write_text(ws, str(ws / "dirlink" / "x.txt"), "x"),
            "links are never followed",
        ),
        "hard link": (lambda: confine.write_text(ws, str(ws / "hard.txt"), "x"), "more than one name"),
        "fifo": (lambda: confine.read_text(ws, str(ws / "fifo")), "is not a regular file"),
        "git": (lambda: confine.write_text(ws, str(ws / ".git" / "config"), "x"), ".git directory"),
    }
    for request, message in refusals.values():
        with pytest.raises(confine.Refused, match=message):
            request()
    assert outside.read_text() == "secret\n"  # the hard link's other name was never truncated
    assert not (tmp_path / "x.txt").exists()


# -- terminals -----------------------------------------------------------------------------------


def test_a_terminal_keeps_the_tail_of_its_output_and_reports_its_exit(tmp_path: Path) -> None:
    async def scenario() -> tuple[str, bool, int, int]:
        terminals = Terminals({"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        tid = await terminals.create("printf '%s' 0123456789; exit 3", [], {}, tmp_path, 4)
        code = await terminals.wait(tid)
        terminal = terminals.get(tid)
        assert terminal.exit_code() == 3  # what terminal/output reports once the command exited
        argv_id = await terminals.create("sh", ["-c", "pwd"], {}, tmp_path, None)
        await terminals.wait(argv_id)
        where = terminals.get(argv_id).text().strip()
        await terminals.close()
        return terminal.text(), terminal.truncated, code, len(where) if where == str(tmp_path) else -1

    text, truncated, code, where = asyncio.run(scenario())
    assert (text, truncated, code) == ("6789", True, 3)
    assert where == len(str(tmp_path))


def test_terminal_output_reports_the_exit_of_a_command_that_ended(tmp_path: Path) -> None:
    # The leader is not reaped before release (below), so the status comes from waitid, not
    # from Popen.returncode: terminal/output must still say the command ended, and how.
    async def scenario() -> tuple[Any, Any]:
        client = TurnClient(tmp_path, Grant(frozenset({"execute"})), Out(io.StringIO()))
        created = await client.create_terminal("s", "exit 4")
        running = await client.terminal_output("s", created.terminal_id)
        await client.wait_for_terminal_exit("s", created.terminal_id)
        ended = await client.terminal_output("s", created.terminal_id)
        await client.release_terminal("s", created.terminal_id)
        await client.terminals.close()
        return running.exit_status, ended.exit_status

    _running, ended = asyncio.run(scenario())
    assert ended is not None and (ended.exit_code, ended.signal) == (4, None)


def _alive_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if marker.encode() in (entry / "cmdline").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
    return found


def test_releasing_a_terminal_whose_command_exited_kills_what_it_left_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The command line exits at once and leaves a sleeper in its group. The group is killed by
    # the leader's pid, which is safe only while the leader is not reaped: reaped, that pid is
    # free for any new process on the machine (another session leader, whose group the kill
    # would then hit). So the leader stays unreaped until its terminal is released, and every
    # group kill happens before the reap.
    marker = f"crucible-terminal-{uuid.uuid4().hex}"
    signalled: list[tuple[int, bool]] = []
    real_killpg = os.killpg

    def spy_killpg(pgid: int, sig: int) -> None:
        try:
            unreaped = os.waitid(os.P_PID, pgid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            unreaped = False  # reaped already: the id may be someone else's now
        signalled.append((pgid, unreaped))
        real_killpg(pgid, sig)

    monkeypatch.setattr(terminals_module.os, "killpg", spy_killpg)

    async def scenario() -> int:
        terminals = Terminals({"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        tid = await terminals.create(
            f"sh -c 'sleep 300; :' {marker} >/dev/null 2>&1 & echo started", [], {}, tmp_path, None
        )
        code = await terminals.wait(tid)
        await asyncio.sleep(0.2)  # let any watcher of the child run
        assert _alive_with(marker), "the sleeper should still run before the release"
        terminals.release(tid)
        await terminals.close()
        return code

    assert asyncio.run(scenario()) == 0
    deadline = time.monotonic() + 10
    while _alive_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _alive_with(marker) == []
    assert signalled and all(unreaped for _pgid, unreaped in signalled), signalled


# -- session updates -----------------------------------------------------------------------------


def test_streamed_chunks_become_one_message_and_tool_calls_are_told_once() -> None:
    recorder = Recorder()
    costs: list[float] = []
    decoder = UpdateDecoder(recorder, on_cost=costs.append)
    for part in ("Let me ", "look."):
        decoder.feed({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": part}})
    decoder.feed(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "t1",
            "title": "Read",
            "kind": "read",
            "status": "pending",
            "rawInput": {},
        }
    )
    decoder.feed(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t1",
            "title": "Read a",
            "rawInput": {"file_path": "/ws/a"},
        }
    )
    decoder.feed(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t1",
            "status": "completed",
            "content": [{"type": "content", "content": {"type": "text", "text": "42"}}],
        }
    )
    decoder.feed(
        {
            "sessionUpdate": "usage_update",
            "used": 10,
            "size": 100,
            "cost": {"amount": 0.25, "currency": "USD"},
        }
    )
    decoder.feed(
        {"sessionUpdate": "usage_update", "used": 10, "size": 100, "cost": {"amount": 9.0, "currency": "EUR"}}
    )
    decoder.feed({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}})
    decoder.finish()
    assert recorder.kinds() == ["agent_text", "agent_tool_call", "agent_tool_result", "agent_thinking"]
    assert recorder.of("agent_text") == [{"text": "Let me look."}]
    [call] = recorder.of("agent_tool_call")
    assert (call["title"], call["input"]) == ("Read a", {"file_path": "/ws/a"})
    assert recorder.of("agent_tool_result") == [{"id": "t1", "is_error": False, "content": "42"}]
    assert (decoder.cost_usd, costs) == (0.25, [0.25])  # another currency is not a USD figure


def test_the_turns_mcp_servers_are_passed_in_acps_shape_or_refused() -> None:
    class Http:
        http = True
        sse = False

    servers = {
        "crucible": {
            "type": "http",
            "url": "http://127.0.0.1:1/mcp",
            "headers": {"Authorization": "Bearer t"},
        }
    }
    [server] = mcp_servers(servers, Http())
    assert server.model_dump(by_alias=True, exclude_none=True) == {
        "type": "http",
        "name": "crucible",
        "url": "http://127.0.0.1:1/mcp",
        "headers": [{"name": "Authorization", "value": "Bearer t"}],
    }
    with pytest.raises(TurnFailed, match="does not accept HTTP MCP servers"):
        mcp_servers(servers, None)


# -- the driver's stream and the verdict ---------------------------------------------------------


def done(
    code: int = 0, *, stderr: str = "", timed_out: bool = False, spawn_error: str | None = None
) -> Completed:
    return Completed(code, "", stderr, timed_out, 1.0, spawn_error)


def stream_of(*lines: str, secrets: tuple[str, ...] = ()) -> tuple[DriverStream, Recorder]:
    recorder = Recorder()
    stream = DriverStream(recorder, secrets)
    for line in lines:
        stream.feed(line)
    return stream, recorder


def test_the_stream_passes_the_vocabulary_masks_credentials_and_keeps_the_end() -> None:
    stream, recorder = stream_of(
        '{"event": "agent_start", "fields": {"harness": "acp"}}',
        '{"event": "agent_text", "fields": {"text": "key lic-value-123456 here"}}',
        '{"event": "engine_stop", "fields": {}}',
        "not json",
        '{"cost_usd": 0.5}',
        '{"end": {"stop_reason": "end_turn", "cost_usd": 0.75}}',
        secrets=("lic-value-123456",),
    )
    assert recorder.kinds() == ["agent_start", "agent_text"]  # an unknown kind is not passed on
    assert recorder.of("agent_text") == [{"text": "key [REDACTED] here"}]
    assert stream.started and stream.undecodable == 2 and stream.cost_usd == 0.5
    result = classify(done(), stream)
    assert result.ok and result.cost_usd == 0.75


@pytest.mark.parametrize(
    ("lines", "completed", "failure", "note"),
    [
        ([], done(spawn_error="No such file"), FailureClass.SPAWN, "could not start the acp driver"),
        (['{"cost_usd": 0.2}'], done(-15, timed_out=True), FailureClass.TIMEOUT, "killed at its deadline"),
        (
            [],
            done(1, stderr=f"No module named {'crucible_harness_acp.driver'}"),
            FailureClass.SPAWN,
            "install crucible-plugin-harness-acp",
        ),
        ([], done(1, stderr="boom"), FailureClass.SPAWN, "boom"),
        (['{"event": "agent_start", "fields": {}}'], done(-9), FailureClass.STREAM, "without an end"),
        (['{"end": {"failure": "provider", "note": "529"}}'], done(1), FailureClass.PROVIDER, "529"),
        (['{"end": {"failure": "agent", "note": "bad"}}'], done(1), FailureClass.AGENT, "bad"),
        (
            ['{"end": {"stop_reason": "max_tokens"}}'],
            done(),
            FailureClass.AGENT,
            "the agent stopped: max_tokens",
        ),
    ],
)
def test_each_way_a_turn_ends_is_classified(
    lines: list[str], completed: Completed, failure: FailureClass, note: str
) -> None:
    stream, _ = stream_of(*lines)
    result = classify(completed, stream)
    assert not result.ok and result.failure is failure and note in result.note
    if failure is FailureClass.TIMEOUT:
        assert result.cost_usd == 0.2  # the running cost the agent reported before it was killed


# -- launch --------------------------------------------------------------------------------------


def test_each_turn_gets_a_home_of_its_own_and_no_inherited_sandbox_claim() -> None:
    turn_env = {"HOME": "/root", "IS_SANDBOX": "1", "CLAUDECODE": "1", "DO_NOT_TRACK": "0", "KEY": "v"}
    env = launch.child_env(turn_env, launch.home_env("/tmp/t/home", frozenset()), frozenset())
    assert env["HOME"] == "/tmp/t/home" and env["XDG_CONFIG_HOME"] == "/tmp/t/home/.config"
    assert "IS_SANDBOX" not in env and "CLAUDECODE" not in env
    assert env["DO_NOT_TRACK"] == "0" and env["DISABLE_AUTOUPDATER"] == "1" and env["KEY"] == "v"
    kept = frozenset({"HOME", "IS_SANDBOX"})  # what the manifest's [agent].env sets itself
    env = launch.child_env(turn_env, launch.home_env("/tmp/t/home", kept), kept)
    assert (
        env["HOME"] == "/root" and env["IS_SANDBOX"] == "1" and env["XDG_CACHE_HOME"] == "/tmp/t/home/.cache"
    )


def test_preflight_names_each_problem_with_its_fix(tmp_path: Path) -> None:
    harness = make_harness(
        tmp_path, ["no-such-acp-agent"], credentials=("ANTHROPIC_API_KEY", "AGENT_LICENSE")
    )
    assert harness.preflight({"PATH": "/usr/bin", "ANTHROPIC_API_KEY": "k"}) == [
        "the ACP agent was not found (`no-such-acp-agent` on the agent's PATH): install it, "
        "or set [agent.acp].command to its path",
        "[agent.acp].credentials names AGENT_LICENSE, which is not set for the agent: "
        "set it in [agent].env or crucible's environment",
    ]
    script = tmp_path / "agents" / "my-agent"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    relative = make_harness(tmp_path, ["agents/my-agent", "--acp"], credentials=())
    assert relative.preflight({}) == []
    lookup: Any = launch.find_command(("agents/my-agent", "--acp"), {}, tmp_path)
    assert lookup.argv == (str(script), "--acp")
