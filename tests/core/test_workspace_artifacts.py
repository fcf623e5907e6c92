"""[[workspace.artifact]]: the manifest table, the collection of the newest match as hostile input, the
PR-body and run-record views of it, and a counter run that carries artifacts across discards."""

from __future__ import annotations

import os
import subprocess
import threading
import types
from pathlib import Path
from typing import Any

import pytest

from crucible_core import artifacts
from crucible_core.artifacts import (
    EMBED_MAX_BYTES,
    Collected,
    collect_artifacts,
    embed_markdown,
    record_files,
)
from crucible_core.contract import wire
from crucible_core.errors import UnsupportedSectionError
from crucible_core.hookspecs import hookimpl
from crucible_core.manifest.loader import load_manifest
from crucible_core.manifest.models import ArtifactEntry
from crucible_core.redact import Redactor
from tests.core.test_lifecycle_hooks import fresh_plugins, log, run
from tests.core.test_manifest import BASE, refusal, write
from tests.world_composite.test_composite_manifest import COMPOSITE, composite_dir

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" * 2  # shaped like a GitHub token: redacted wherever it is written


def with_artifacts(tables: str) -> str:
    return BASE + "\n" + tables


# -- the manifest table --------------------------------------------------------------------------


def test_a_declared_artifact_loads_and_is_carried_like_carry_forward(tmp_path: Path) -> None:
    text = BASE.replace("[agent]", '[workspace]\ncarry_forward = ["build/"]\n\n[agent]') + (
        '\n[[workspace.artifact]]\npath = "target/codegen-out"\nembed = "summary.txt"\nupload = "deck.pptx"\n'
        '\n[[workspace.artifact]]\npath = "traces"\nupload = "V*/trace.json.gz"\ntitle = "Traces"\n'
    )
    workspace = load_manifest(write(tmp_path, text)).manifest.workspace
    assert workspace.artifact == (
        ArtifactEntry(path="target/codegen-out", embed="summary.txt", upload="deck.pptx"),
        ArtifactEntry(path="traces", upload="V*/trace.json.gz", title="Traces"),
    )
    assert workspace.carried == ("build/", "target/codegen-out", "traces")
    assert [entry.heading for entry in workspace.artifact] == ["target/codegen-out", "Traces"]


@pytest.mark.parametrize(
    ("table", "words"),
    [
        (
            'path = "out"\nembd = "s.txt"',
            "'embd' in [workspace.artifact[0]] (did you mean embed?)",
        ),  # strict keys
        ('embed = "s.txt"', "[workspace].artifact[0]"),  # path is required
        ('path = "../out"\nembed = "s.txt"', "[workspace].artifact[0].path"),
        ('path = "/abs"\nembed = "s.txt"', "[workspace].artifact[0].path"),
        ('path = "!out"\nembed = "s.txt"', "[workspace].artifact[0].path"),
        ('path = "out"', "names neither embed nor upload"),
        ('path = "out"\nembed = "../secret"', "[workspace].artifact[0].embed"),
        ('path = "out"\nupload = "/etc/passwd"', "[workspace].artifact[0].upload"),
        ('path = "out"\nupload = "a//b"', "[workspace].artifact[0].upload"),
        ('path = "out"\nembed = "s.txt"\ntitle = "two\\nlines"', "[workspace].artifact[0].title"),
        ('path = "out"\nembed = "s.txt"\ntitle = 5', "[workspace].artifact[0].title"),
    ],
)
def test_a_bad_artifact_table_is_refused_naming_its_key(tmp_path: Path, table: str, words: str) -> None:
    message = refusal(tmp_path, with_artifacts(f"[[workspace.artifact]]\n{table}\n"))
    assert words in message
    assert "not supported" not in message


def test_the_number_of_declared_artifacts_is_bounded(tmp_path: Path) -> None:
    tables = "".join(f'[[workspace.artifact]]\npath = "out{i}"\nembed = "s.txt"\n' for i in range(33))
    assert "at most 32" in refusal(tmp_path, with_artifacts(tables))


def test_a_composite_refuses_carry_forward_and_artifacts_of_its_own(tmp_path: Path) -> None:
    composite_dir(tmp_path, "")
    carried = COMPOSITE.replace("[agent]", '[workspace]\ncarry_forward = ["out/"]\n\n[agent]')
    assert "carry_forward" in refusal(tmp_path, carried)
    declared = COMPOSITE + '\n[[workspace.artifact]]\npath = "out"\nembed = "s.txt"\n'
    assert "[[workspace.artifact]] of its own" in refusal(tmp_path, declared)


def test_a_composite_refuses_a_component_that_declares_artifacts(tmp_path: Path) -> None:
    composite_dir(tmp_path, "")
    write(tmp_path / "a", with_artifacts('[[workspace.artifact]]\npath = "out"\nembed = "s.txt"\n'))
    with pytest.raises(UnsupportedSectionError) as err:
        load_manifest(write(tmp_path, COMPOSITE))
    assert "[[component]][0].domain 'a' declares [[workspace.artifact]]" in err.value.render()


# -- collecting: the newest match, read as hostile input ----------------------------------------------


def put(root: Path, rel: str, data: bytes | str, mtime: int | None = None) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    if mtime is not None:
        os.utime(path, ns=(mtime * 10**9, mtime * 10**9))
    return path


def collect(workspace: Path, *entries: ArtifactEntry, stage: Path | None = None) -> Collected:
    redactor = Redactor()
    return collect_artifacts(workspace, entries, redact=redactor.text, stage_dir=stage)


def only(collected: Collected, mode: str) -> artifacts.CollectedArtifact:
    [item] = [item for item in collected.items if item.mode == mode]
    return item


def test_the_newest_match_wins_across_versioned_directories(tmp_path: Path) -> None:
    put(tmp_path, "a/b/out/V1/summary.txt", "first\n", mtime=1000)
    put(tmp_path, "a/b/out/V3/summary.txt", "third\n", mtime=3000)
    put(tmp_path, "a/b/out/V2/summary.txt", "second\n", mtime=2000)
    put(tmp_path, "a/b/out/V2/other.txt", "not the wanted name\n", mtime=9000)
    embed = only(collect(tmp_path, ArtifactEntry(path="a/b/out", embed="summary.txt")), "embed")
    assert (embed.status, embed.name, embed.text) == ("taken", "a/b/out/V3/summary.txt", "third")
    # the same modification time: V10 is the later version, not V9 (the path's natural order)
    put(tmp_path, "a/b/out/V9/summary.txt", "ninth\n", mtime=5000)
    put(tmp_path, "a/b/out/V10/summary.txt", "tenth\n", mtime=5000)
    embed = only(collect(tmp_path, ArtifactEntry(path="a/b/out", embed="summary.txt")), "embed")
    assert embed.name == "a/b/out/V10/summary.txt"
    # a pattern of two names matches the last two components, each a glob
    upload = only(collect(tmp_path, ArtifactEntry(path="a/b/out", upload="V[12]/*.txt")), "upload")
    assert upload.name == "a/b/out/V2/other.txt"


def test_nothing_produced_yet_is_missing_not_an_error(tmp_path: Path) -> None:
    put(tmp_path, "out/V1/notes.md", "no summary here\n")
    for path in ("out", "not-yet/deeper", "out/V1/notes.md/below"):
        item = only(collect(tmp_path, ArtifactEntry(path=path, embed="summary.txt")), "embed")
        assert (item.status, item.name) == ("missing", "")
    assert embed_markdown(collect(tmp_path, ArtifactEntry(path="out", embed="summary.txt"))) == ""


@pytest.mark.parametrize("path", ["", "/", "../ws", "a/../.."])
def test_a_declared_path_outside_the_workspace_is_refused_whoever_declared_it(
    tmp_path: Path, path: str
) -> None:
    put(tmp_path, "summary.txt", "outside\n")
    item = only(collect(tmp_path / "ws", ArtifactEntry(path=path, embed="summary.txt")), "embed")
    assert item.status == "refused" and item.text == ""


def test_a_declared_path_may_be_the_file_itself(tmp_path: Path) -> None:
    put(tmp_path, "report/summary.txt", "the one\n")
    item = only(collect(tmp_path, ArtifactEntry(path="report/summary.txt", embed="summary.txt")), "embed")
    assert (item.name, item.text) == ("report/summary.txt", "the one")


def test_a_link_named_like_the_artifact_is_never_followed(tmp_path: Path) -> None:
    outside = put(tmp_path, "outside/secret.txt", "host secret\n")
    ws = tmp_path / "ws"
    put(ws, "out/V1/summary.txt", "honest\n", mtime=1000)
    (ws / "out/V2").mkdir()
    os.symlink(outside, ws / "out/V2/summary.txt")  # newer, and a link out of the workspace
    os.symlink(outside.parent, ws / "out/V3")  # a directory link: never descended into
    collected = collect(ws, ArtifactEntry(path="out", embed="summary.txt"))
    embed = only(collected, "embed")
    assert (embed.name, embed.text) == ("out/V1/summary.txt", "honest")
    assert collected.notes == ("out/V2/summary.txt: a symbolic link (never followed)",)
    assert "host secret" not in embed_markdown(collected)


@pytest.mark.parametrize("linked", ["out", "a/out"])
def test_a_declared_path_that_is_or_passes_a_link_is_refused(tmp_path: Path, linked: str) -> None:
    put(tmp_path, "outside/out/summary.txt", "host secret\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    if linked == "out":
        os.symlink(tmp_path / "outside/out", ws / "out")
    else:
        os.symlink(tmp_path / "outside", ws / "a")
    item = only(collect(ws, ArtifactEntry(path=linked, embed="summary.txt")), "embed")
    assert item.status == "refused" and "symbolic link" in item.note
    assert item.text == ""


def test_a_fifo_named_like_the_artifact_never_blocks_the_collection(tmp_path: Path) -> None:
    put(tmp_path, "out/V1/summary.txt", "honest\n", mtime=1000)
    (tmp_path / "out/V2").mkdir()
    os.mkfifo(tmp_path / "out/V2/summary.txt")
    result: list[Collected] = []
    worker = threading.Thread(
        target=lambda: result.append(collect(tmp_path, ArtifactEntry(path="out", embed="summary.txt"))),
        daemon=True,
    )
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "a FIFO blocked the collection"
    assert only(result[0], "embed").name == "out/V1/summary.txt"
    assert result[0].notes == ("out/V2/summary.txt: not a regular file",)
    # the declared path itself a FIFO: refused, not opened
    item = only(collect(tmp_path, ArtifactEntry(path="out/V2/summary.txt", embed="summary.txt")), "embed")
    assert item.status == "refused" and "not a directory" in item.note


def test_a_hard_link_is_refused(tmp_path: Path) -> None:
    outside = put(tmp_path, "outside.txt", "host secret\n")
    (tmp_path / "ws/out").mkdir(parents=True)
    os.link(outside, tmp_path / "ws/out/summary.txt")
    item = only(collect(tmp_path / "ws", ArtifactEntry(path="out", upload="summary.txt")), "upload")
    assert item.status == "refused" and "2 hard links" in item.note
    assert item.staged is None


def test_an_embed_is_cut_at_its_bound_redacted_and_text_only(tmp_path: Path) -> None:
    line = f"token={TOKEN} and some words\n"
    put(tmp_path, "out/summary.txt", line * (4 * EMBED_MAX_BYTES // len(line)))
    embed = only(collect(tmp_path, ArtifactEntry(path="out", embed="summary.txt")), "embed")
    assert embed.truncated and len(embed.text.encode()) <= EMBED_MAX_BYTES
    assert embed.size > 3 * EMBED_MAX_BYTES
    assert TOKEN not in embed.text and "[REDACTED]" in embed.text
    put(tmp_path, "bin/summary.txt", b"\x7fELF\x00\x01binary")
    item = only(collect(tmp_path, ArtifactEntry(path="bin", embed="summary.txt")), "embed")
    assert item.status == "refused" and "upload" in item.note
    # escape sequences the agent wrote never reach a reader
    put(tmp_path, "esc/summary.txt", "a\x1b]0;retitled\x07b\x1b[2Jc\n")
    assert only(collect(tmp_path, ArtifactEntry(path="esc", embed="summary.txt")), "embed").text == "abc"


def test_an_upload_is_copied_privately_and_refused_past_its_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, stage = tmp_path / "ws", tmp_path / "stage"
    data = os.urandom(300_000)
    put(ws, "out/deck.pptx", data)
    collected = collect(ws, ArtifactEntry(path="out", upload="deck.pptx"), stage=stage)
    upload = only(collected, "upload")
    assert upload.status == "taken" and upload.size == len(data) and upload.staged is not None
    assert upload.staged.read_bytes() == data and upload.staged.parent == stage
    assert upload.staged.stat().st_mode & 0o777 == 0o600
    assert record_files(collected) == [("out/deck.pptx", upload.staged)]
    (ws / "out/deck.pptx").write_bytes(b"swapped after the collection")
    assert upload.staged.read_bytes() == data  # the record takes the copy, not the agent's path
    monkeypatch.setattr(artifacts, "UPLOAD_MAX_BYTES", 100_000)
    put(ws, "out/deck.pptx", data)
    refused = only(
        collect(ws, ArtifactEntry(path="out", upload="deck.pptx"), stage=tmp_path / "s2"), "upload"
    )
    assert refused.status == "refused" and "100000 bytes" in refused.note
    assert list((tmp_path / "s2").iterdir()) == []  # nothing half-copied is left behind


def test_the_walk_and_its_notes_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for index in range(30):  # a tree of links named like the artifact: named a bounded number of times
        os.symlink("/etc/passwd", put(tmp_path, f"links/{index}/x", "").parent / "summary.txt")
    notes = collect(tmp_path, ArtifactEntry(path="links", embed="summary.txt")).notes
    assert len(notes) == 21 and notes[-1] == "... and 10 more passed over"
    for index in range(50):
        put(tmp_path, f"out/noise/{index}.txt", "x")
    monkeypatch.setattr(artifacts, "MAX_WALK_ENTRIES", 20)
    collected = collect(tmp_path, ArtifactEntry(path="out", embed="summary.txt"))
    assert collected.notes == ("out: stopped looking after 20 entries",)


# -- the two consumers --------------------------------------------------------------------------


def test_embed_markdown_collapses_each_embed_and_nothing_in_it_renders(tmp_path: Path) -> None:
    put(tmp_path, "out/summary.txt", "```\n</details><script>x</script>\n````\n")
    put(tmp_path, "notes/summary.md", "plain notes\n")
    collected = collect(
        tmp_path,
        ArtifactEntry(path="out", embed="summary.txt", title="Runtime <investigation>"),
        ArtifactEntry(path="notes", embed="summary.md"),
    )
    text = embed_markdown(collected)
    assert text.count("<details>") == 2 and text.count("</details>") == 3  # one inside the fenced text
    assert "<summary>Runtime &lt;investigation&gt;: <code>out/summary.txt</code></summary>" in text
    assert (
        "\n`````text\n```\n</details><script>x</script>\n````\n`````\n" in text
    )  # a fence longer than any run
    assert "<summary>notes: <code>notes/summary.md</code></summary>" in text
    small = embed_markdown(collected, max_chars=200)
    assert "<details>" in small and small.count("<details>") == 1
    assert "not shown here" in small and "notes" in small.splitlines()[-1]


def test_record_files_name_embeds_and_uploads_once(tmp_path: Path) -> None:
    ws, stage = tmp_path / "ws", tmp_path / "stage"
    put(ws, "out/summary.txt", f"key {TOKEN}\n")
    put(ws, "out/deck.bin", b"\x00\x01")
    collected = collect(ws, ArtifactEntry(path="out", embed="summary.txt", upload="deck.bin"), stage=stage)
    files = dict(record_files(collected))
    assert sorted(files) == ["out/deck.bin", "out/summary.txt"]
    assert files["out/deck.bin"].read_bytes() == b"\x00\x01"
    assert files["out/summary.txt"].read_text() == "key [REDACTED]"  # the record's embed is redacted too


# -- a counter run: carried across discards, heard at each keep and at the end, logged ------------------

PROPOSER = """#!/bin/sh
# good on odd iterations (+2), bad on even ones (-1); each writes a pipeline version it derived
set -eu
v=$(cat value.txt)
if [ $((CRUCIBLE_ITERATION % 2)) -eq 1 ]; then echo $((v + 2)) > value.txt; else echo $((v - 1)) > value.txt; fi
out=target/pipeline/V$CRUCIBLE_ITERATION
mkdir -p $out
printf 'iteration %s derived this; token=%s\\n' "$CRUCIBLE_ITERATION" "$LEAK" > $out/summary.txt
printf 'binary %s' "$CRUCIBLE_ITERATION" > $out/deck.bin
sleep 0.02  # distinct modification times, whatever the file system's resolution
"""


def test_a_counter_run_carries_artifacts_across_discards_and_hands_them_to_plugins(example) -> None:
    manifest = example("counter")
    folder = manifest.parent
    (folder / "propose.sh").write_text(PROPOSER.replace("$LEAK", TOKEN))
    (folder / "propose.sh").chmod(0o755)
    text = manifest.read_text().replace("cp value.txt bump.sh", "cp value.txt propose.sh")
    text = text.replace('agent_cmd = "./bump.sh"', 'agent_cmd = "./propose.sh"')
    text += (
        '\n[[workspace.artifact]]\npath = "target/pipeline"\nembed = "summary.txt"\n'
        'upload = "deck.bin"\ntitle = "Pipeline"\n'
    )
    manifest.write_text(text)
    heard: list[tuple[str, int, Any]] = []
    module = types.ModuleType("artifact_plugin")

    def crucible_commit_kept(kept: Any) -> None:
        heard.append(("kept", kept.iteration, kept.artifacts))

    def crucible_run_end(end: Any) -> None:
        heard.append(("end", end.iterations, end.artifacts))

    module.crucible_commit_kept = hookimpl(crucible_commit_kept)  # type: ignore[attr-defined]
    module.crucible_run_end = hookimpl(crucible_run_end)  # type: ignore[attr-defined]
    result = run(fresh_plugins(module), manifest, 4)

    assert result.outcome == "finished"
    events = log(manifest)
    assert [e["row"]["decision"] for e in events if e["kind"] == "row"] == [
        "baseline",
        "keep",
        "discard",
        "keep",
        "discard",
    ]
    workspace = folder / "workspace"
    # every version survived the discards (the last one included), and none entered a commit
    assert sorted(p.name for p in (workspace / "target/pipeline").iterdir()) == ["V1", "V2", "V3", "V4"]
    tracked = subprocess.run(
        ["git", "-C", str(workspace), "log", "--all", "--name-only", "--format="],
        capture_output=True,
        text=True,
    ).stdout
    assert "target/" not in tracked and "value.txt" in tracked

    assert [(what, n) for what, n, _ in heard] == [("kept", 1), ("kept", 3), ("end", 4)]
    newest = [(only(c, "embed").name, only(c, "upload").name) for _, _, c in heard]
    assert newest == [
        ("target/pipeline/V1/summary.txt", "target/pipeline/V1/deck.bin"),
        ("target/pipeline/V3/summary.txt", "target/pipeline/V3/deck.bin"),
        ("target/pipeline/V4/summary.txt", "target/pipeline/V4/deck.bin"),  # carried from a discard
    ]
    body = embed_markdown(heard[1][2])
    assert "<summary>Pipeline: <code>target/pipeline/V3/summary.txt</code></summary>" in body
    assert "iteration 3 derived this; token=[REDACTED]" in body and TOKEN not in body
    files = dict(record_files(heard[2][2]))
    assert files["target/pipeline/V4/deck.bin"].read_bytes() == b"binary 4"
    assert files["target/pipeline/V4/deck.bin"].is_relative_to(folder / "state")

    logged = [wire.from_object(e) for e in events if e["kind"] == "artifacts"]
    assert [line.event.iter for line in logged if line is not None] == [1, 3, 4]
    last = logged[-1]
    assert last is not None and isinstance(last.event, wire.Artifacts)
    assert [(i.mode, i.status, i.name, i.bytes) for i in last.event.items] == [
        (
            "embed",
            "taken",
            "target/pipeline/V4/summary.txt",
            len(f"iteration 4 derived this; token={TOKEN}\n"),
        ),
        ("upload", "taken", "target/pipeline/V4/deck.bin", 8),
    ]
    state = "".join(p.read_text(errors="replace") for p in (folder / "state").rglob("*") if p.is_file())
    assert TOKEN not in state


def test_without_declared_artifacts_nothing_is_collected(example) -> None:
    manifest = example("counter")
    heard: list[Any] = []
    module = types.ModuleType("artifact_plugin")
    module.crucible_commit_kept = hookimpl(lambda kept: heard.append(kept.artifacts))  # type: ignore[attr-defined]
    assert run(fresh_plugins(module), manifest, 1).outcome == "finished"
    assert heard == [None]
    assert not [e for e in log(manifest) if e["kind"] == "artifacts"]


REGENERATE_ONLY = """#!/bin/sh
# derives a new pipeline version and changes nothing else
set -eu
mkdir -p target/pipeline/V$CRUCIBLE_ITERATION
echo "iteration $CRUCIBLE_ITERATION" > target/pipeline/V$CRUCIBLE_ITERATION/summary.txt
"""


def test_a_turn_that_only_regenerates_artifacts_is_no_candidate_change(example) -> None:
    manifest = example("counter")
    folder = manifest.parent
    (folder / "regen.sh").write_text(REGENERATE_ONLY)
    (folder / "regen.sh").chmod(0o755)
    text = manifest.read_text().replace("cp value.txt bump.sh", "cp value.txt regen.sh")
    text = text.replace('agent_cmd = "./bump.sh"', 'agent_cmd = "./regen.sh"')
    manifest.write_text(text + '\n[[workspace.artifact]]\npath = "target/pipeline"\nembed = "summary.txt"\n')
    assert run(fresh_plugins(), manifest, 2).outcome == "finished"
    rows = [e["row"] for e in log(manifest) if e["kind"] == "row"]
    assert [(r["decision"], r["note"]) for r in rows[1:]] == [("discard", "no change")] * 2
    assert sorted(p.name for p in (folder / "workspace/target/pipeline").iterdir()) == ["V1", "V2"]
    # nothing was kept, so only the run's end collected them
    assert [e["iter"] for e in log(manifest) if e["kind"] == "artifacts"] == [2]
