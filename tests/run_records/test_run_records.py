"""crucible-plugin-run-records: a counter run's record in file:// and s3:// (moto in server mode on
127.0.0.1, reached through boto3), read back with `crucible fetch`; a refused or hung destination
costs a note, never the run; credentials never reach the record.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

import crucible_run_records
from crucible_core import api
from crucible_core.broker.service import declaration_for
from crucible_core.manifest.loader import load_manifest
from crucible_core.plugins import load_plugins
from crucible_core.session_log import read_events
from crucible_run_records import destination, layout, writer
from crucible_run_records.destination import FileStore, RecordAddressError, RecordStoreError, parse_address
from tests.cli_support import crucible_env, run_crucible
from tests.run_records.conftest import ACCESS_KEY, SECRET_KEY


def _run_id(log: Path) -> str:
    return next(str(e["run_id"]) for e in read_events(log) if e["kind"] == "start")


def _notes(log: Path, level: str = "warn") -> list[str]:
    return [str(e["msg"]) for e in read_events(log) if e["kind"] == "note" and e.get("level") == level]


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _expected_diffs(log: Path) -> dict[str, bytes]:
    """The diffs/ files a record of `log` holds: one per row that carries a diff (its latest row)."""
    found: dict[str, bytes] = {}
    for event in read_events(log):
        if event["kind"] == "row" and event["row"].get("diff"):
            found[layout.diff_key(event["row"]["iter"])] = event["row"]["diff"].encode()
    return found


def _check_counter_record(files: Mapping[str, bytes], log: Path) -> dict[str, Any]:
    """The record of a finished two-iteration counter run: the whole log, its summary and diffs."""
    assert files["session.jsonl"] == log.read_bytes()  # the log as written, through its shutdown line
    assert json.loads(files["session.jsonl"].splitlines()[-1])["kind"] == "shutdown"
    summary = json.loads(files["summary.json"])
    identity = next(e["identity"]["digest"] for e in read_events(log) if e["kind"] == "identity")
    assert summary["run_id"] == _run_id(log) and summary["outcome"] == "finished"
    assert (summary["baseline"], summary["best"], summary["iterations"], summary["keeps"]) == (0.0, 2.0, 2, 2)
    assert summary["identity_digest"] == identity and len(summary["kept_shas"]) == 2
    assert isinstance(summary["cost"], float)
    diffs = {k: v for k, v in files.items() if k.startswith("diffs/")}
    assert diffs == _expected_diffs(log) and summary["diffs"] == sorted(diffs)
    for data in files.values():
        assert SECRET_KEY.encode() not in data and ACCESS_KEY.encode() not in data
    return summary


# -- addresses -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("s3://bucket", "s3://bucket"),
        ("s3://my.bucket/runs/nightly/", "s3://my.bucket/runs/nightly"),
        ("file:///srv/records", "file:///srv/records"),
        ("file://localhost/srv/records/", "file:///srv/records"),
    ],
)
def test_an_address_is_s3_or_an_absolute_file_path(text: str, shown: str) -> None:
    assert str(parse_address(text)) == shown
    assert str(parse_address(text).child("run-1")) == shown + "/run-1"


@pytest.mark.parametrize(
    "text",
    [
        "file://records/here",  # a relative path written as a host
        "file:records",
        "file:///",
        "file:///srv/../etc",
        "s3://AKIA:secret@bucket/prefix",  # credentials never ride in the address
        "s3://bucket:9000/prefix",
        "s3://b",
        "s3://bucket/a/../b",
        "s3://bucket/prefix?versionId=1",
        "https://bucket.s3.amazonaws.com/prefix",
        "/srv/records",
    ],
)
def test_an_address_of_any_other_shape_is_refused_saying_what_to_write(text: str) -> None:
    with pytest.raises(RecordAddressError) as refused:
        parse_address(text)
    assert refused.value.exit_code == api.ExitCode.MANIFEST and "file:///" in refused.value.render()


def test_the_file_store_never_follows_a_link_out_of_its_folder(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "records" / "run-1"
    root.mkdir(parents=True)
    (root / "diffs").symlink_to(outside)
    store = FileStore(root)
    with pytest.raises(RecordStoreError, match="symbolic link"):
        store.put("diffs/iter-1.diff", b"x")
    for key in ("../escape", "/etc/passwd", "a/./b", ""):
        with pytest.raises(ValueError):
            store.put(key, b"x")
    (root / "linked.json").symlink_to(outside / "secret.json")
    (outside / "secret.json").write_text("{}")
    store.put("summary.json", b"{}")
    assert store.keys() == ["summary.json"] and list(outside.iterdir()) == [outside / "secret.json"]


# -- the writer, on a log whose rows carry diffs ------------------------------------------------------
def _log_with_diffs(path: Path) -> Path:
    lines = [
        {"kind": "start", "run_id": "run-diffs", "goal": "g", "gate": "value"},
        {"kind": "row", "row": {"iter": 0, "decision": "baseline", "score": 1.0, "best": 1.0, "diff": ""}},
        {
            "kind": "row",
            "row": {
                "iter": 1,
                "decision": "keep",
                "score": 2.0,
                "best": 2.0,
                "sha": "a" * 40,
                "diff": "--- a/v\n+++ b/v\n-1\n+2\n",
                "diffstat": "1 file",
            },
        },
        {
            "kind": "row",
            "row": {
                "iter": 2,
                "decision": "discard",
                "score": 0.5,
                "best": 2.0,
                "diff": "--- a/v\n+++ b/v\n-2\n+0\n" + "x" * (layout.MAX_DIFF_BYTES + 10),
            },
        },
        {"kind": "shutdown", "outcome": "finished", "reason": "iterations spent"},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _write_record(address: str, log: Path, env: Mapping[str, str]) -> writer.RecordWriter:
    folder = parse_address(address).child("run-diffs")
    made = writer.RecordWriter(folder, lambda: destination.open_store(folder, env), log)
    for event in read_events(log):
        made.add(event)
    made.add_artifact("runtime/summary.txt", b"final numbers\n")
    made.finish(10)
    assert made.take_warnings() == []
    return made


def test_each_row_that_carries_a_diff_is_a_file_and_both_schemes_fetch_back_identically(
    tmp_path: Path, bucket: str, aws_env: dict[str, str]
) -> None:
    log = _log_with_diffs(tmp_path / "session.jsonl")
    _write_record(f"file://{tmp_path}/records", log, aws_env)
    _write_record(f"s3://{bucket}/team/records", log, aws_env)

    fetched = []
    for uri in (f"file://{tmp_path}/records/run-diffs", f"s3://{bucket}/team/records/run-diffs"):
        dest = tmp_path / f"fetched-{len(fetched)}"
        done = run_crucible("fetch", "--uri", uri, "--dest", dest, env=crucible_env(**aws_env))
        assert done.returncode == 0, done.stderr
        assert "fetched 5 files" in done.stdout
        fetched.append(_tree(dest))
    assert fetched[0] == fetched[1]
    files = fetched[0]
    assert files["diffs/iter-1.diff"] == b"--- a/v\n+++ b/v\n-1\n+2\n"
    assert files["diffs/iter-2.diff"].startswith(b"--- a/v\n+++ b/v\n-2\n+0\n")
    assert files["diffs/iter-2.diff"].endswith(b"more bytes not recorded]\n")
    assert len(files["diffs/iter-2.diff"]) < layout.MAX_DIFF_BYTES + 100
    assert files["artifacts/runtime/summary.txt"] == b"final numbers\n"
    assert files["session.jsonl"] == log.read_bytes()
    summary = json.loads(files["summary.json"])
    assert summary["diffs"] == ["diffs/iter-1.diff", "diffs/iter-2.diff"]
    assert (summary["keeps"], summary["discards"], summary["best"], summary["outcome"]) == (
        1,
        1,
        2.0,
        "finished",
    )


def test_a_second_write_puts_only_what_changed(tmp_path: Path) -> None:
    log = _log_with_diffs(tmp_path / "session.jsonl")
    made = _write_record(f"file://{tmp_path}/records", log, {})
    diff = tmp_path / "records" / "run-diffs" / "diffs" / "iter-1.diff"
    before = diff.stat().st_mtime_ns
    time.sleep(0.01)
    made.final_pending = False
    again = writer.RecordWriter(made.address, made.open_store, log, made.state, written=made.written)
    again.finish(10)
    assert diff.stat().st_mtime_ns == before  # unchanged bytes are not written twice


# -- a counter run's record --------------------------------------------------------------------------
def test_a_counter_run_leaves_its_record_in_a_file_destination(example: Any, tmp_path: Path) -> None:
    manifest = example("counter")
    records = tmp_path / "records"
    done = run_crucible(
        "run", "--manifest", manifest, "-n", "2", "--ui", "headless", "--results-bucket", f"file://{records}"
    )
    assert done.returncode == 0, done.stderr
    log = manifest.parent / "state" / "session.jsonl"
    folder = records / _run_id(log)
    files = _tree(folder)
    _check_counter_record(files, log)
    admitted = [e for e in read_events(log) if e["kind"] == "output_admitted"]
    assert [(e["output_kind"], e["target"]) for e in admitted] == [("run-record", f"file://{records}")]
    assert f"run record: file://{folder}" in _notes(log, "info")


def test_a_counter_run_leaves_its_record_in_s3_and_fetch_reads_it_back(
    example: Any, tmp_path: Path, bucket: str, aws_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = example("counter")
    monkeypatch.setenv("CRUCIBLE_RESULTS_BUCKET", f"s3://{bucket}/nightly")
    added: list[bool] = []

    def add_artifact(event: Mapping[str, Any]) -> None:
        if event["kind"] == "row" and event["row"]["iter"] == 1:
            added.append(crucible_run_records.add_artifact(_run_id(log), "deck/summary.pptx", b"\x00PK\x03"))

    log = manifest.parent / "state" / "session.jsonl"
    result = api.run(manifest, iterations=2, on_event=add_artifact)
    assert result.exit_code == 0 and added == [True]
    run_id = _run_id(log)

    dest = tmp_path / "fetched"
    done = run_crucible(
        "fetch", "--uri", f"s3://{bucket}/nightly/{run_id}", "--dest", dest, env=crucible_env(**aws_env)
    )
    assert done.returncode == 0, done.stderr
    files = _tree(dest)
    _check_counter_record(files, log)
    assert files["artifacts/deck/summary.pptx"] == b"\x00PK\x03"
    assert SECRET_KEY not in log.read_text() and ACCESS_KEY not in log.read_text()
    assert crucible_run_records.add_artifact(run_id, "late.txt", b"x") is False  # the run is over


def test_fetch_refuses_a_key_that_climbs_out_of_the_destination(
    tmp_path: Path, bucket: str, aws_env: dict[str, str]
) -> None:
    import boto3

    client: Any = boto3.client("s3")
    client.put_object(Bucket=bucket, Key="runs/r1/summary.json", Body=b"{}")
    client.put_object(Bucket=bucket, Key="runs/r1/../../escape.txt", Body=b"owned")
    dest = tmp_path / "inbox" / "r1"
    done = run_crucible(
        "fetch", "--uri", f"s3://{bucket}/runs/r1", "--dest", dest, env=crucible_env(**aws_env)
    )
    assert done.returncode == int(api.ExitCode.REMOTE), done.stdout + done.stderr
    assert "not a plain path" in done.stderr
    assert not any(p.name == "escape.txt" for p in tmp_path.rglob("*"))


def test_fetch_of_no_record_says_so(tmp_path: Path, bucket: str, aws_env: dict[str, str]) -> None:
    done = run_crucible(
        "fetch", "--uri", f"s3://{bucket}/nothing", "--dest", tmp_path / "d", env=crucible_env(**aws_env)
    )
    assert done.returncode == int(api.ExitCode.REMOTE) and "no run record" in done.stderr
    done = run_crucible("fetch", "--uri", "file://relative/dir", env=crucible_env(**aws_env))
    assert done.returncode == int(api.ExitCode.MANIFEST) and "absolute path" in done.stderr


# -- a destination that refuses or hangs ------------------------------------------------------------
def test_a_refusing_destination_costs_a_note_never_the_run(
    example: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = example("counter")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("CRUCIBLE_RESULTS_BUCKET", f"file://{blocker}/records")
    result = api.run(manifest, iterations=2)
    assert result.exit_code == 0 and result.outcome == "finished"
    log = manifest.parent / "state" / "session.jsonl"
    assert any("could not write the run record" in note for note in _notes(log))
    assert [e["row"]["decision"] for e in read_events(log) if e["kind"] == "row"] == [
        "baseline",
        "keep",
        "keep",
    ]


def test_a_missing_bucket_costs_a_note_never_the_run(
    example: Any, aws_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = example("counter")
    monkeypatch.setenv("CRUCIBLE_RESULTS_BUCKET", "s3://no-such-bucket-here/x")
    result = api.run(manifest, iterations=1)
    log = manifest.parent / "state" / "session.jsonl"
    assert result.exit_code == 0, _notes(log)
    assert any("NoSuchBucket" in note for note in _notes(log))
    assert all(SECRET_KEY not in note for note in _notes(log))


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """A TCP server on 127.0.0.1 that accepts connections and never answers: a hung S3."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()


def test_a_hung_destination_holds_neither_an_iteration_nor_the_end_for_long(
    example: Any, aws_env: dict[str, str], silent_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = example("counter")
    monkeypatch.setenv("AWS_ENDPOINT_URL", silent_endpoint)
    monkeypatch.setenv("CRUCIBLE_RESULTS_BUCKET", "s3://hung-bucket/records")
    monkeypatch.setattr(destination, "READ_SECONDS", 30.0)  # longer than the whole run may take
    monkeypatch.setattr(writer, "END_SECONDS", 2.0)
    started = time.monotonic()
    result = api.run(manifest, iterations=3)
    elapsed = time.monotonic() - started
    log = manifest.parent / "state" / "session.jsonl"
    assert result.exit_code == 0 and result.outcome == "finished"
    assert elapsed < 15, elapsed  # the keeps did not wait on the destination; the end waited 2 s
    assert any("was not written within 2 s" in note for note in _notes(log))


def test_a_refused_record_write_is_not_made(
    example: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = example("counter")
    text = (
        manifest.read_text() + '\n[outputs.run-record]\ncount = 0\ntarget = { fixed = "file:///nowhere" }\n'
    )
    manifest.write_text(text)
    records = tmp_path / "records"
    monkeypatch.setenv("CRUCIBLE_RESULTS_BUCKET", f"file://{records}")
    result = api.run(manifest, iterations=1)
    log = manifest.parent / "state" / "session.jsonl"
    assert result.exit_code == 0
    assert not records.exists()
    assert any(e["kind"] == "output_refused" and e["output_kind"] == "run-record" for e in read_events(log))
    assert any("the run record is not written" in note for note in _notes(log))


def test_publish_record_names_the_destination_in_the_manifest(tmp_path: Path) -> None:
    from crucible_core.manifest.models import PublishSection

    assert PublishSection(pr_repo="you/fork", record="s3://bucket/runs").record == "s3://bucket/runs"
    with pytest.raises(ValueError, match="file:///abs/path"):
        PublishSection(pr_repo="you/fork", record="records/here")


# -- without the plugin ---------------------------------------------------------------------------------
INSTALLED = sorted(ep.name for ep in entry_points(group="crucible"))


def test_without_the_plugin_a_named_destination_is_refused_naming_it(example: Any, tmp_path: Path) -> None:
    manifest = example("counter")
    others = ",".join(name for name in INSTALLED if name != "run_records")
    done = run_crucible(
        "run",
        "--manifest",
        manifest,
        "-n",
        "1",
        "--results-bucket",
        f"file://{tmp_path}/records",
        env=crucible_env(CRUCIBLE_LOAD_PLUGINS=others),
    )
    assert done.returncode == int(api.ExitCode.PLUGIN), done.stderr
    assert "pip install crucible-plugin-run-records" in done.stderr
    assert not (manifest.parent / "state").exists() and not (tmp_path / "records").exists()

    manifest.write_text(
        manifest.read_text() + f'\n[publish]\npr_repo = "you/fork"\nrecord = "file://{tmp_path}/records"\n'
    )
    with pytest.raises(api.ManifestError) as refused:
        declaration_for(load_plugins(names=others.split(",")), load_manifest(manifest), environ={})
    assert "pip install crucible-plugin-run-records" in refused.value.render()
    assert declaration_for(load_plugins(), load_manifest(manifest), environ={}).outputs  # with it: fine
    done = run_crucible(
        "fetch", "--uri", f"file://{tmp_path}", env=crucible_env(CRUCIBLE_LOAD_PLUGINS=others)
    )
    assert done.returncode == int(api.ExitCode.USAGE) and "crucible-plugin-run-records" in done.stderr


def test_a_resumed_run_completes_the_same_record(
    example: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = example("counter")
    records = tmp_path / "records"
    monkeypatch.setenv("CRUCIBLE_RESULTS_BUCKET", f"file://{records}")
    assert api.run(manifest, iterations=1).exit_code == 0
    log = manifest.parent / "state" / "session.jsonl"
    first = json.loads((records / _run_id(log) / "summary.json").read_text())
    assert (first["iterations"], first["keeps"]) == (1, 1)
    assert api.run(manifest, iterations=2, resume=True).exit_code == 0
    assert [p.name for p in records.iterdir()] == [_run_id(log)]  # one run, one folder
    _check_counter_record(_tree(records / _run_id(log)), log)


def test_run_refuses_a_results_bucket_of_another_shape(example: Any) -> None:
    manifest = example("counter")
    done = run_crucible("run", "--manifest", manifest, "--results-bucket", "records/here")
    assert done.returncode == int(api.ExitCode.USAGE) and "file:///abs/path" in done.stderr
    assert not (manifest.parent / "state").exists()
