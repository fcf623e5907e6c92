"""Evidence on the wire: keep and discard rows carry the candidate's diff and git's diffstat, and
the views (`show`, `results --json`, the flow page) show them. Real CLI, real git, real scripts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from crucible_core.contract.change_evidence import DIFF_CAP_BYTES
from tests.cli_support import run_crucible
from tests.e2e.session import rows, verdicts

ALTERNATING = """#!/bin/sh
# good on odd iterations (+2), bad on even ones (-1); each leaves a note file
set -eu
v=$(cat value.txt)
if [ $((CRUCIBLE_ITERATION % 2)) -eq 1 ]; then echo $((v + 2)) > value.txt; else echo $((v - 1)) > value.txt; fi
echo "iteration $CRUCIBLE_ITERATION" > note-$CRUCIBLE_ITERATION.txt
"""


def _alternating(example) -> Path:  # type: ignore[no-untyped-def]
    manifest = example("counter")
    (manifest.parent / "alternate.sh").write_text(ALTERNATING)
    (manifest.parent / "alternate.sh").chmod(0o755)
    text = manifest.read_text().replace("cp value.txt bump.sh", "cp value.txt alternate.sh")
    manifest.write_text(text.replace('agent_cmd = "./bump.sh"', 'agent_cmd = "./alternate.sh"'))
    return manifest


def _git_diff(workspace: Path, base: str, head: str) -> str:
    return subprocess.run(
        ["git", "-C", str(workspace), "diff", base, head],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_keep_and_discard_rows_carry_the_exact_diff_and_diffstat(example) -> None:
    manifest = _alternating(example)
    done = run_crucible("--manifest", manifest, "--iterations", "2", "--no-early-stop")
    assert done.returncode == 0, done.stderr
    assert verdicts(manifest) == ["baseline", "keep", "discard"]
    baseline, keep, discard = rows(manifest)
    assert baseline["diff"] == "" and baseline["diffstat"] == ""
    # the keep: value.txt 0 -> 2 and a new note file, exactly what git itself says of the commit
    workspace = manifest.parent / "workspace"
    assert keep["diff"] == _git_diff(workspace, baseline["kept_snap"], keep["kept_snap"])
    assert keep["diff"] == (
        "diff --git a/note-1.txt b/note-1.txt\n"
        "new file mode 100644\n"
        "index 0000000..10d6a40\n"
        "--- /dev/null\n"
        "+++ b/note-1.txt\n"
        "@@ -0,0 +1 @@\n"
        "+iteration 1\n"
        "diff --git a/value.txt b/value.txt\n"
        "index 573541a..0cfbf08 100644\n"
        "--- a/value.txt\n"
        "+++ b/value.txt\n"
        "@@ -1 +1 @@\n"
        "-0\n"
        "+2\n"
    )
    assert keep["diffstat"] == "2 files changed, 2 insertions(+), 1 deletion(-)"
    # the discard: its change against the kept state it was proposed from, though it was rolled back
    assert "+++ b/note-2.txt\n@@ -0,0 +1 @@\n+iteration 2\n" in discard["diff"]
    assert "--- a/value.txt\n+++ b/value.txt\n@@ -1 +1 @@\n-2\n+1\n" in discard["diff"]
    assert discard["diffstat"] == "2 files changed, 2 insertions(+), 1 deletion(-)"
    assert not (workspace / "note-2.txt").exists()


def test_show_results_and_the_flow_page_show_the_change(example) -> None:
    manifest = _alternating(example)
    done = run_crucible("--manifest", manifest, "--iterations", "2", "--no-early-stop")
    assert done.returncode == 0, done.stderr
    shown = run_crucible("show", "--manifest", manifest)
    assert shown.returncode == 0, shown.stderr
    assert "2 files changed, 2 insertions(+), 1 deletion(-)" in shown.stdout
    as_json = json.loads(run_crucible("show", "--manifest", manifest, "--json").stdout)
    keep = next(row for row in as_json["rows"] if row["decision"] == "keep")
    assert keep["diffstat"] == "2 files changed, 2 insertions(+), 1 deletion(-)"
    assert "+iteration 1\n" in keep["diff"]
    results = json.loads(run_crucible("results", "--manifest", manifest, "--json").stdout)
    by_iter = {row["iter"]: row for row in results["rows"]}
    assert by_iter[1]["diffstat"] == by_iter[2]["diffstat"] != ""
    assert "-2\n+1\n" in by_iter[2]["diff"]
    table = (manifest.parent / "workspace" / "RESULTS.md").read_text()
    assert "| 2 files changed, 2 insertions(+), 1 deletion(-) |" in table
    page = manifest.parent / "flow.html"
    drawn = run_crucible("flow", "--manifest", manifest, "--out", page)
    assert drawn.returncode == 0, drawn.stderr
    html = page.read_text()
    assert "2 files changed, 2 insertions(+), 1 deletion(-)" in html
    assert (
        "+iteration 1" in html
        and "(none recorded)" not in html.split('id="detail-1"')[1].split("</template>")[0]
    )


HOSTILE = """#!/bin/sh
# a hostile candidate: a huge text file, a binary, a link out of the workspace, a secret
set -eu
python3 - <<'PY'
with open("huge.txt", "w") as f:
    for i in range(10000):
        f.write(f"line {i} of a file far too long for a row\\n")
with open("giant.txt", "w") as f:
    f.write(("y" * 99 + "\\n") * 21000)
with open("blob.bin", "wb") as f:
    f.write(bytes(range(256)) * 64)
with open("config.py", "w") as f:
    f.write("API_KEY = 'sk-ant-abcdefghijklmnopqrstuvwxyz0123456789'\\n")
PY
ln -s "$OUTSIDE" escape
v=$(cat value.txt)
echo $((v + 1)) > value.txt
"""


def test_a_hostile_candidate_gives_a_bounded_redacted_link_free_diff(example, tmp_path: Path) -> None:
    manifest = example("counter")
    outside = tmp_path / "outside-secret.txt"
    outside.write_text("THE-CONTENT-BEHIND-THE-LINK\n")
    (manifest.parent / "hostile.sh").write_text(HOSTILE.replace("$OUTSIDE", str(outside)))
    (manifest.parent / "hostile.sh").chmod(0o755)
    text = manifest.read_text().replace("cp value.txt bump.sh", "cp value.txt hostile.sh")
    manifest.write_text(text.replace('agent_cmd = "./bump.sh"', 'agent_cmd = "./hostile.sh"'))
    done = run_crucible("--manifest", manifest, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    keep = rows(manifest)[1]
    assert keep["decision"] == "keep"
    diff = keep["diff"]
    assert len(diff.encode()) <= DIFF_CAP_BYTES + 200
    assert "diff truncated" in diff
    # every file is counted, the huge one in full, though its text was cut
    # (giant.txt, over the per-file cap, is named with its size and counted as a file only)
    assert keep["diffstat"] == "6 files changed, 10003 insertions(+), 1 deletion(-)"
    assert "sk-ant-abcdefghijklmnop" not in diff and "[REDACTED]" in diff
    assert "Binary files /dev/null and b/blob.bin differ" in diff
    assert "Large file a/giant.txt (0 bytes) and b/giant.txt (2100000 bytes): not diffed" in diff
    # the link is shown as the path it names, never as what is behind it
    assert f"+{outside}" in diff
    assert "THE-CONTENT-BEHIND-THE-LINK" not in diff
    log = (manifest.parent / "state" / "session.jsonl").read_text()
    assert "sk-ant-abcdefghijklmnop" not in log and "THE-CONTENT-BEHIND-THE-LINK" not in log


def test_a_log_written_before_rows_carried_the_change_resumes_and_folds(example) -> None:
    manifest = _alternating(example)
    done = run_crucible("--manifest", manifest, "--iterations", "2", "--no-early-stop")
    assert done.returncode == 0, done.stderr
    log = manifest.parent / "state" / "session.jsonl"
    older = []
    for line in log.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event["kind"] == "row":  # as an older writer left it: neither field at all
            event["row"].pop("diff")
            event["row"].pop("diffstat")
        older.append(json.dumps(event, separators=(",", ":")))
    log.write_text("\n".join(older) + "\n", encoding="utf-8")
    resumed = run_crucible("run", "--manifest", manifest, "--resume", "--iterations", "4", "--no-early-stop")
    assert resumed.returncode == 0, resumed.stderr
    written = rows(manifest)
    assert [r["iter"] for r in written] == [0, 1, 2, 3, 4]
    assert all("diff" not in r for r in written[:3])
    assert written[3]["diffstat"] == "2 files changed, 2 insertions(+), 1 deletion(-)"
    assert "+++ b/note-3.txt" in written[3]["diff"]
    view = json.loads(run_crucible("show", "--manifest", manifest, "--json").stdout)
    assert [("diffstat" in r) for r in view["rows"]] == [False, False, False, True, True]
    results = json.loads(run_crucible("results", "--manifest", manifest, "--json").stdout)
    assert [r["diffstat"] != "" for r in results["rows"]] == [False, False, True, True]
