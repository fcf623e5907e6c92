"""Hostile agent-written files: markers, notes, results, steering and names the agent controls.

The engine reads what the agent wrote only as a regular file, never through a link, bounded,
and parses its JSON with bounded depth and valid text; a log that already holds invalid text
still reads; the views print, and commits carry, none of the agent's escapes. Each run here is a
real `crucible run` process (a hang must be killable); the views are driven in-process.
"""

from __future__ import annotations

import base64
import contextlib
import os
import pty
import select
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx2
import pytest

from crucible_core.cli.main import main
from crucible_core.plan.files import CaptureRefused, read_confined
from crucible_core.plan.output import last_json_object
from crucible_core.plan.workspace import TempDirCopies
from crucible_core.redact import MASK, Redactor
from tests.cli_support import CRUCIBLE, crucible_env
from tests.live_support import domain, events, start, wait_for

DEEP = "[" * 100_000 + "]" * 100_000
ESCAPES = "\\u001b]0;PWNED\\u0007\\u001b[2J\\u009b31m\\u202e"  # as JSON escapes


@attrs.frozen
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """The real `crucible` entry point in this process; its stdout is strict UTF-8, like a terminal's."""

    def run(*args: str | Path) -> CliResult:
        capsys.readouterr()
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return run


def finish(proc: subprocess.Popen[str], timeout: float = 90) -> tuple[str, str]:
    """Wait for a run; a hung engine (SIGTERM does not end it) is killed and the test fails."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("the engine hung")


def notes(log: list[dict[str, Any]]) -> list[str]:
    return [e["msg"] for e in log if e["kind"] == "note"]


def no_controls(text: str) -> bool:
    """No control character (but line breaks and tabs) and no bidirectional override."""
    return (
        not any((ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F for c in text)
        and "\u202e" not in text
    )


def plain_view(text: str) -> bool:
    """Printed for a person: no control character, and the escapes went whole (their payload too)."""
    return no_controls(text) and "PWNED" not in text


def assert_views_read(cli: Callable[..., CliResult], manifest: Path, tmp_path: Path) -> None:
    """Every view of the run's log works and prints valid, escape-free text."""
    log = manifest.parent / "state" / "session.jsonl"
    for args in (
        ("results", "--manifest", manifest),
        ("results", "--json", "--manifest", manifest),
        ("show", "--manifest", manifest),
        ("flow", "--session", log, "--out", tmp_path / "flow.html"),
        ("flow", "--session", log, "--out", tmp_path / "flow.json"),
    ):
        done = cli(*args)
        assert done.code == 0, (args, done.err)
        assert "internal error" not in done.err
        assert no_controls(done.out), (args, done.out)


# -- the escalation and approval markers ----------------------------------------------------
# The proposer plants `$MARKER` in the workspace, as `$HOW` says, on its first turn.
PLANTING_PROPOSER = """#!/bin/sh
if [ "$(cat value.txt)" = 0 ]; then
  case "$HOW" in
    fifo) mkfifo "$MARKER" ;;
    deep) "$PYTHON" -c 'import sys; sys.stdout.write("[" * 5000 + "]" * 5000)' > "$MARKER" ;;
    surrogate) printf '{"category": "infeasible", "reason": "x \\\\ud800 y", "evidence": ["\\\\udfff"], "trace_id": "t\\\\ud800"}' > "$MARKER" ;;
    link) ln -s "$OUTSIDE" "$MARKER" ;;
  esac
fi
echo $(( $(cat value.txt) + 1 )) > value.txt
"""


def planting(tmp_path: Path) -> Path:
    manifest = domain(tmp_path, PLANTING_PROPOSER)
    (tmp_path / "outside.txt").write_text("TOP-SECRET-CONTENT of a file outside the workspace\n")
    return manifest


@pytest.mark.parametrize("how", ["fifo", "deep", "surrogate", "link"])
def test_an_unusable_escalation_marker_escalates_and_says_why(
    tmp_path: Path, how: str, cli: Callable[..., CliResult]
) -> None:
    manifest = planting(tmp_path)
    proc = start(
        manifest,
        "--iterations",
        "3",
        MARKER="ESCALATION.json",
        HOW=how,
        OUTSIDE=str(tmp_path / "outside.txt"),
    )
    _out, err = finish(proc)
    assert proc.returncode == 2, err  # escalated: the agent meant to stop, however it wrote the marker
    assert "internal error" not in err and "Traceback" not in err
    log = events(manifest)
    [escalation] = [e for e in log if e["kind"] == "escalation"]
    why = {
        "fifo": "not a regular file",
        "deep": "nests deeper than",
        "surrogate": "lone surrogate",
        "link": "symbolic link",
    }[how]
    assert escalation["category"] == "needs-info" and why in escalation["reason"], escalation
    assert log[-1]["kind"] == "shutdown"
    assert not os.path.lexists(tmp_path / "workspace" / "ESCALATION.json")  # consumed
    written = (tmp_path / "state" / "session.jsonl").read_text() + "".join(
        p.read_text(errors="replace") for p in (tmp_path / "state").glob("ESCALATION.json")
    )
    assert "TOP-SECRET-CONTENT" not in written  # the link was never followed
    assert (tmp_path / "outside.txt").read_text().startswith("TOP-SECRET-CONTENT")
    if how != "surrogate":
        return
    # the invalid text never reached the log: every view reads it, and a resume goes on
    assert_views_read(cli, manifest, tmp_path)
    resumed = start(manifest, "--resume", "--iterations", "4")
    _out, err = finish(resumed)
    assert resumed.returncode == 0, err
    assert [r["row"]["iter"] for r in events(manifest) if r["kind"] == "row"][-1] == 4


@pytest.mark.parametrize("how", ["fifo", "deep", "surrogate", "link"])
def test_an_unusable_approval_marker_is_ignored_with_a_warning(tmp_path: Path, how: str) -> None:
    manifest = planting(tmp_path)
    proc = start(
        manifest,
        "--iterations",
        "2",
        MARKER="PROVISIONING_PENDING.json",
        HOW=how,
        OUTSIDE=str(tmp_path / "outside.txt"),
    )
    _out, err = finish(proc)
    assert proc.returncode == 0, err
    log = events(manifest)
    assert [r["row"]["decision"] for r in log if r["kind"] == "row"] == ["baseline", "keep", "keep"]
    warned = [n for n in notes(log) if "ignored the agent's approval request" in n]
    assert len(warned) == 1, notes(log)
    assert not any(e["kind"] == "approval_wait" for e in log)
    assert not os.path.lexists(tmp_path / "workspace" / "PROVISIONING_PENDING.json")
    assert "TOP-SECRET-CONTENT" not in (tmp_path / "state" / "session.jsonl").read_text()


# -- lone surrogates: in a measure note, and in a log written before they were refused --------
SURROGATE_MEASURE = r"""#!/bin/sh
v=$(cat value.txt)
if [ "$v" = 0 ]; then note=baseline; else note='v \ud800 w'; fi
printf '{"valid": true, "score": %s, "note": "%s"}\n' "$v" "$note"
"""


def test_a_lone_surrogate_in_a_measure_note_is_an_invalid_reading(tmp_path: Path) -> None:
    manifest = domain(tmp_path, PLANTING_PROPOSER)
    (tmp_path / "measure.sh").write_text(SURROGATE_MEASURE)
    proc = start(manifest, "--iterations", "2", HOW="none")
    _out, err = finish(proc)
    assert proc.returncode == 0, err
    rows = [e["row"] for e in events(manifest) if e["kind"] == "row"]
    assert [r["decision"] for r in rows] == ["baseline", "discard", "discard"]
    assert all(not r["valid"] and "lone surrogate" in r["note"] for r in rows[1:])


def test_a_log_that_already_holds_a_lone_surrogate_still_reads_and_resumes(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    manifest = domain(tmp_path, PLANTING_PROPOSER)
    proc = start(manifest, "--iterations", "2", HOW="none")
    _out, err = finish(proc)
    assert proc.returncode == 0, err
    log = tmp_path / "state" / "session.jsonl"
    # what an older engine wrote for such a note: the escape, valid JSON, invalid text once decoded
    log.write_text(log.read_text().replace('"note":"value=1"', '"note":"value=\\ud800 \\udfff"'))
    assert "\\ud800" in log.read_text()
    assert_views_read(cli, manifest, tmp_path)
    shown = cli("results", "--manifest", manifest)
    assert "value=\ufffd \ufffd" in shown.out
    resumed = start(manifest, "--resume", "--iterations", "3", HOW="none")
    _out, err = finish(resumed)
    assert resumed.returncode == 0, err
    assert "\ufffd" in (tmp_path / "workspace" / "RESULTS.md").read_text()


# -- the distress channel (in the state directory, which a local agent reaches) --------------
DISTRESS_PROPOSER = """#!/bin/sh
if [ "$(cat value.txt)" = 0 ]; then
  case "$HOW" in
    marker) mkfifo "$CRUCIBLE_DISTRESS_DIR/distress" ;;
    notes) mkfifo "$CRUCIBLE_DISTRESS_DIR/distress-notes.jsonl" ;;
    lines)
      notes="$CRUCIBLE_DISTRESS_DIR/distress-notes.jsonl"
      "$PYTHON" -c 'import sys; sys.stdout.write("[" * 100000 + "]" * 100000 + "\\n")' > "$notes"
      printf '{"severity": "warn", "reason": "bad \\\\ud800 text"}\\n' >> "$notes"
      printf '{"severity": "warn", "reason": "the honest note"}\\n' >> "$notes" ;;
  esac
fi
echo $(( $(cat value.txt) + 1 )) > value.txt
"""


def test_a_fifo_distress_marker_suspends_the_run_until_it_is_removed(tmp_path: Path) -> None:
    manifest = domain(tmp_path, DISTRESS_PROPOSER)
    proc = start(manifest, "--iterations", "2", HOW="marker")
    try:
        log = wait_for(manifest, proc, lambda log: any(e["kind"] == "approval_wait" for e in log))
        [wait] = [e for e in log if e["kind"] == "approval_wait"]
        assert wait["handle"] == "distress"
        (tmp_path / "state" / "distress" / "distress").unlink()  # the human's answer
        _out, err = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert [r["row"]["iter"] for r in events(manifest) if r["kind"] == "row"] == [0, 1, 2]


@pytest.mark.parametrize("how", ["notes", "lines"])
def test_unusable_distress_notes_never_stop_the_run(tmp_path: Path, how: str) -> None:
    manifest = domain(tmp_path, DISTRESS_PROPOSER)
    proc = start(manifest, "--iterations", "2", HOW=how)
    _out, err = finish(proc)
    assert proc.returncode == 0, err
    log = events(manifest)
    assert [r["row"]["decision"] for r in log if r["kind"] == "row"] == ["baseline", "keep", "keep"]
    said = notes(log)
    if how == "notes":
        assert any(
            "could not read the agent's distress notes" in n and "not a regular file" in n for n in said
        )
    else:  # the deep and the invalid lines are skipped; the honest note reaches the log and its row
        assert [n for n in said if n.startswith("the agent says")] == [
            "the agent says (warn): the honest note"
        ]


# -- STEER.md: the operator's file channel, which a local agent can reach --------------------
@pytest.mark.parametrize("how", ["fifo", "link"])
def test_a_steer_file_that_is_not_a_regular_file_is_left_alone(tmp_path: Path, how: str) -> None:
    manifest = domain(tmp_path, PLANTING_PROPOSER)
    steer, outside = tmp_path / "STEER.md", tmp_path / "outside.txt"
    outside.write_text("TOP-SECRET-CONTENT the operator's own file\n")
    if how == "fifo":
        os.mkfifo(steer)
    else:
        steer.symlink_to(outside)
    proc = start(manifest, "--iterations", "1", HOW="none")
    _out, err = finish(proc)
    assert proc.returncode == 0, err
    log = events(manifest)
    assert any("STEER.md" in n and ("not a regular file" in n or "symbolic link" in n) for n in notes(log))
    assert (
        outside.read_text() == "TOP-SECRET-CONTENT the operator's own file\n"
    )  # never emptied through the link
    assert "TOP-SECRET-CONTENT" not in (tmp_path / "state" / "session.jsonl").read_text()
    assert os.path.lexists(steer)


# -- the control record: the engine checks it after every turn, the operator's commands read it
CONTROL_PROPOSER = """#!/bin/sh
if [ "$(cat value.txt)" = 0 ]; then
  rm -f ../state/control.json && mkfifo ../state/control.json
fi
echo $(( $(cat value.txt) + 1 )) > value.txt
"""


def test_a_fifo_control_record_is_put_back_without_blocking(tmp_path: Path) -> None:
    manifest = domain(tmp_path, CONTROL_PROPOSER)
    proc = start(manifest, "--iterations", "2")
    _out, err = finish(proc)
    assert proc.returncode == 0, err
    log = events(manifest)
    assert [r["row"]["iter"] for r in log if r["kind"] == "row"] == [0, 1, 2]
    assert any("put back" in n and "the control record" in n for n in notes(log)), notes(log)


def test_a_command_reading_a_fifo_control_record_fails_at_once(tmp_path: Path) -> None:
    from crucible_core.control.client import read_control
    from crucible_core.errors import ControlError

    os.mkfifo(tmp_path / "control.json")
    assert not blocks(lambda: read_control(tmp_path), tmp_path / "control.json")
    with pytest.raises(ControlError, match="not a regular file"):
        read_control(tmp_path)


def test_a_fifo_session_cursor_is_refused_without_blocking(tmp_path: Path) -> None:
    from crucible_harness_claude.sessions import SessionStateError, SessionStore

    store = SessionStore.under(tmp_path / "private", "claude")
    store.root.mkdir(parents=True)
    os.mkfifo(store.path_of("solver"))
    assert not blocks(lambda: store.load("solver"), store.path_of("solver"))
    with pytest.raises(SessionStateError, match="not a regular file"):
        store.load("solver")


# -- plan files and outputs, read in-process ------------------------------------------------
def blocks(action: Callable[[], Any], fifo: Path) -> bool:
    """Whether `action` blocks on `fifo`; a blocked reader is released by opening the write end."""
    reader = threading.Thread(target=lambda: _swallow(action), daemon=True)
    reader.start()
    reader.join(10)
    if not reader.is_alive():
        return False
    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    os.close(fd)
    reader.join(10)
    return True


def _swallow(action: Callable[[], Any]) -> None:
    with contextlib.suppress(Exception):  # the refusal itself is asserted elsewhere; this measures blocking
        action()


def test_a_declared_output_file_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "out.txt")
    assert not blocks(lambda: read_confined(tmp_path, "out.txt", 1024), tmp_path / "out.txt")
    with pytest.raises(CaptureRefused, match="not a regular file"):
        read_confined(tmp_path, "out.txt", 1024)
    (tmp_path / "big.txt").write_bytes(b"x" * 2048)
    with pytest.raises(CaptureRefused, match="at most 1024"):
        read_confined(tmp_path, "big.txt", 1024)


def test_an_isolated_tasks_diff_skips_a_fifo_it_left(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "a.txt").write_text("one\n")
    copy = TempDirCopies(workspace).make_copy("t")
    try:
        os.mkfifo(copy.path / "planted")
        (copy.path / "a.txt").write_text("two\n")
        diffs: list[str] = []
        assert not blocks(lambda: diffs.append(copy.diff()), copy.path / "planted")
        assert "+two" in diffs[0]
    finally:
        copy.discard()


def test_a_deep_task_output_line_is_refused_with_a_reason() -> None:
    value, why = last_json_object("progress\n" + DEEP + "\n")
    assert value is None and "nests deeper than" in why
    value, why = last_json_object('{"note": "\\ud800"}')
    assert value is None and "lone surrogate" in why


# -- what the views print and what a commit carries ----------------------------------------
ESCAPING_MEASURE = """#!/bin/sh
v=$(cat value.txt)
printf '{"valid": true, "score": %s, "note": "v=%s ESCAPES"}\\n' "$v" "$v"
""".replace("ESCAPES", ESCAPES.replace("\\", "\\\\"))

# the second turn asks for approval with an escaping trace id and regime: the run parks on it
PARKING_PROPOSER = """#!/bin/sh
v=$(cat value.txt)
if [ "$v" = 1 ]; then
  printf '{"trace_id": "t-ESCAPES", "regime": "r-ESCAPES", "mode": "block"}' > PROVISIONING_PENDING.json
fi
echo $(( v + 1 )) > value.txt
""".replace("ESCAPES", ESCAPES.replace("\\", "\\\\"))


def test_views_and_commits_carry_no_terminal_escapes(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    manifest = domain(tmp_path, PARKING_PROPOSER)
    (tmp_path / "measure.sh").write_text(ESCAPING_MEASURE)
    proc = start(manifest, "--iterations", "3")
    try:
        wait_for(manifest, proc, lambda log: any(e["kind"] == "approval_wait" for e in log))
        status = cli("status", "--manifest", manifest)
        assert status.code == 0, status.err
        assert "approval pending" in status.out and plain_view(status.out), status.out
        assert cli("deny", "--manifest", manifest).code == 0
        finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert any("\\u001b" in line for line in (tmp_path / "state" / "session.jsonl").read_text().splitlines())
    results = cli("results", "--manifest", manifest)
    assert results.code == 0 and "v=1" in results.out and plain_view(results.out), results.out
    assert_views_read(cli, manifest, tmp_path)
    messages = subprocess.run(
        ["git", "log", "--format=%B"], cwd=tmp_path / "workspace", capture_output=True, text=True, check=True
    ).stdout
    assert "crucible: iteration 1 (v=1" in messages and plain_view(messages), messages


# A kept file whose name is not UTF-8 (and one with an escape in it), and content with escapes.
NAMING_PROPOSER = """#!/bin/sh
printf 'plain\\n' > "$(printf 'bad\\377name.txt')"
printf 'x\\n' > "$(printf 'esc\\033]0;PWNED\\007.txt')"
printf 'title \\033]0;PWNED\\007 end\\n' > content.txt
echo $(( $(cat value.txt) + 1 )) > value.txt
"""


def test_diff_shows_a_kept_non_utf8_name_and_no_escapes_on_a_terminal(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    manifest = domain(tmp_path, NAMING_PROPOSER)
    proc = start(manifest, "--iterations", "1")
    _out, err = finish(proc)
    assert proc.returncode == 0, err
    for args in ((), ("--stat",), ("--iter", "1")):
        done = cli("diff", "--manifest", manifest, *args)
        assert done.code == 0, (args, done.err)
        assert "bad\\377name.txt" in done.out and "esc\\033]0;PWNED\\007.txt" in done.out, done.out
    piped = cli("diff", "--manifest", manifest)
    assert "+title \x1b]0;PWNED\x07 end" in piped.out  # piped: what was kept, byte for byte
    on_terminal = terminal_output([str(CRUCIBLE), "diff", "--manifest", str(manifest)])
    assert "+title  end" in on_terminal and "\x1b" not in on_terminal, on_terminal


def terminal_output(argv: list[str]) -> str:
    """What `argv` prints when its stdout is a terminal (a pseudo-terminal read to its end)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(argv, stdout=follower, stderr=subprocess.PIPE, env=crucible_env(), text=False)
    os.close(follower)
    chunks = []
    while True:
        ready, _w, _x = select.select([leader], [], [], 60)
        if not ready:
            proc.kill()
            break
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    return b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


# -- the broker and redaction ----------------------------------------------------------------
@pytest.fixture
def broker_url(tmp_path: Path) -> Iterator[tuple[str, str]]:
    from crucible_broker_mcp.broker import Broker
    from crucible_broker_mcp.mediation import Mediator
    from crucible_broker_mcp.server import BrokerServer
    from crucible_broker_mcp.tools import BUILTIN_TOOLS
    from crucible_core.broker.declaration import Declaration, Disclosure
    from crucible_core.broker.tools import BrokerRuntime
    from crucible_distress.tools import TOOLS as DISTRESS_TOOLS

    events_: list[Any] = []
    broker = Broker(
        Declaration((), Disclosure((), (), None, (), ("distress",))),
        {t.name: t for t in (*BUILTIN_TOOLS, *DISTRESS_TOOLS)},
        BrokerRuntime(tmp_path, tmp_path / "distress", pending_steers=list),
        Mediator((), events_.append),
        events_.append,
    )
    server = BrokerServer(broker, tmp_path / "private" / "broker")
    server.start()
    yield server.url, server.token
    server.stop()


@pytest.mark.parametrize(
    "body",
    [
        b'[{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]',
        b"[]",
        b"42",
        b'{"jsonrpc": "2.0", "id": 1}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": 5}',
        b'{"x": ',
    ],
)
def test_a_malformed_broker_request_gets_a_short_error_of_ours(
    broker_url: tuple[str, str], body: bytes
) -> None:
    url, token = broker_url
    reply = httpx2.post(
        url,
        content=body,
        headers={
            "authorization": f"Bearer {token}",
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
        },
        timeout=30,
    )
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["code"] in (-32600, -32700)
    assert set(error) == {"code", "message"} and len(error["message"]) < 120, error
    for leak in ("pydantic", "validation error", "input_value", "JSONRPCRequest", "tools/list"):
        assert leak.lower() not in reply.text.lower(), reply.text


@pytest.mark.parametrize(
    "secret", ["handed-out-value-91f2", "a-secret-of-twenty-one", "sk-test-0123456789abcd"]
)
def test_base64_of_a_secret_leaves_no_tail(secret: str) -> None:
    redactor = Redactor()
    redactor.add([secret])
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        blob = encode(secret.encode()).decode()  # `printf '%s' "$SECRET" | base64`
        assert redactor.text(f"leak {blob}\n") == f"leak {MASK}\n"


# -- the anthropic harness's file tools read the workspace for the agent ---------------------
def test_the_read_file_tool_reads_no_fifo_and_no_giant(tmp_path: Path) -> None:
    from crucible_harness_claude.workspace_tools import MAX_FILE_BYTES, WorkspaceTools

    tools = WorkspaceTools.for_workspace(tmp_path, {}, None)
    (tmp_path / "giant.txt").write_bytes(b"x\n" * (MAX_FILE_BYTES // 2 + 1))
    text, failed = tools.call("read_file", {"path": "giant.txt", "limit": 1})
    assert failed and "at most" in text
    text, failed = tools.call("edit_file", {"path": "giant.txt", "old_string": "x", "new_string": "y"})
    assert failed and "at most" in text
    os.mkfifo(tmp_path / "pipe")
    assert not blocks(lambda: tools.call("read_file", {"path": "pipe"}), tmp_path / "pipe")
    text, failed = tools.call("read_file", {"path": "pipe"})
    assert failed and "not a regular file" in text
