"""The declared artifacts reach the deliverable: an embed shows in the run's draft PR body, and
both the embed and the upload land in the run record's artifacts/ folder (file:// destination).

The forge is tests/fakes/github_api.py plus a bare repository reached through the real git CLI,
as in test_one_pr_per_run.py; the record is a real directory written by crucible-plugin-run-records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crucible_core.plugins import load_plugins
from crucible_core.run.budget import Budget
from crucible_core.session.entry import execute
from crucible_core.session.request import SessionRequest
from tests.fakes.github_api import serve_github
from tests.publish_github.test_one_pr_per_run import Remote, forge_env

PLUGINS = [
    "core",
    "world_git",
    "judge_command",
    "backend_local",
    "broker_mcp",
    "publish_github",
    "run_records",
]

# Each turn raises the value (kept) and writes its derived output under out/, outside the diff.
REPORTING = """#!/bin/sh
set -eu
v=$(cat value.txt)
echo $((v + 1)) > value.txt
mkdir -p out/V$CRUCIBLE_ITERATION
printf 'findings of turn %s\\n' "$CRUCIBLE_ITERATION" > out/V$CRUCIBLE_ITERATION/summary.txt
printf '\\000\\001binary deck %s' "$CRUCIBLE_ITERATION" > out/V$CRUCIBLE_ITERATION/deck.bin
"""


def test_an_embed_reaches_the_pr_body_and_both_files_reach_the_run_record(
    example: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = Remote(tmp_path)
    records = tmp_path / "records"
    records.mkdir()
    manifest = example("counter")
    (manifest.parent / "bump.sh").write_text(REPORTING)
    manifest.write_text(
        manifest.read_text()
        + '\n[[workspace.artifact]]\npath = "out"\nembed = "summary.txt"\nupload = "deck.bin"\n'
        + 'title = "What the turns found"\n'
        + f'\n[publish]\npr_repo = "team/counter"\nrecord = "{records.as_uri()}"\n'
    )
    with serve_github() as forge:
        forge_env(monkeypatch, forge, remote)
        execute(
            load_plugins(names=PLUGINS),
            SessionRequest(manifest=manifest, budget=Budget(iterations=2), ui="headless"),
        )
        (pull,) = forge.pulls.values()
    # the newest summary (turn 2's) is embedded under the declared title
    assert "What the turns found" in pull["body"] and "findings of turn 2" in pull["body"]
    assert "findings of turn 1" not in pull["body"]
    (run_dir,) = [p for p in records.iterdir() if p.is_dir()]
    artifacts = {
        p.relative_to(run_dir / "artifacts").as_posix(): p
        for p in (run_dir / "artifacts").rglob("*")
        if p.is_file()
    }
    # each collection's files by their workspace names: the last one's are turn 2's
    assert artifacts["out/V2/summary.txt"].read_text().strip() == "findings of turn 2", sorted(artifacts)
    assert artifacts["out/V2/deck.bin"].read_bytes() == b"\x00\x01binary deck 2"
