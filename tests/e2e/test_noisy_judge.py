"""Keeps that survive noise, end to end: a real measure script whose noise is seeded.

The domain's true cost lives in program.txt; the proposer makes a real improvement (cost - 10)
on two iterations and only edits a comment on the others. The measure adds seeded Gaussian
noise (sigma 1), so a comment change reads better than the best about half the time. Without
noise handling those no-change candidates get kept; with `repeats` and `noise = "auto"` none
are, and both real improvements still are, even when one of the baseline's samples is wild.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from crucible_core.contract.noise import noise_margin
from tests.cli_support import run_crucible
from tests.e2e.session import rows

REAL_IMPROVEMENTS = (3, 7)
ITERATIONS = 10

MEASURE = """\
import pathlib, random, re, json
counter = pathlib.Path({counter!r})
n = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(n + 1))
cost = float(re.search(r"cost = (\\S+)", pathlib.Path("program.txt").read_text()).group(1))
noise = random.Random(1000 + n).gauss(0.0, {sigma}) + ({outlier} if n == 4 else 0.0)
print(json.dumps({{"valid": True, "score": round(cost + noise, 4), "note": "cost %g" % cost}}))
"""

PROPOSE = """\
import os, pathlib, re
it = int(os.environ["CRUCIBLE_ITERATION"])
p = pathlib.Path("program.txt")
text = p.read_text()
if it in {real}:
    cost = float(re.search(r"cost = (\\S+)", text).group(1))
    text = re.sub(r"cost = \\S+", "cost = %g" % (cost - 10), text)
else:
    text += "# tidied the comments (%d)\\n" % it
p.write_text(text)
"""

MANIFEST = """\
[repo]
path = "."

[workspace]
dir = "workspace"
setup_cmd = "mkdir -p workspace && cp program.txt workspace/"
inject = ["measure.py"]

[agent]
backend = "command"
agent_cmd = "{python} {propose}"
goal = "Lower the cost in program.txt."

[judge]
measure_cmd = "{python} measure.py"
direction = "lower"
{noise}
"""


def make_domain(root: Path, noise: str, *, sigma: float = 1.0, outlier: float = 0.0) -> Path:
    """`outlier` is added to the fifth measurement only: the last of a 5-repeat baseline."""
    root.mkdir()
    (root / "program.txt").write_text("cost = 100\n")
    measure = MEASURE.format(counter=str(root / "measure-count"), sigma=sigma, outlier=outlier)
    (root / "measure.py").write_text(measure)
    (root / "propose.py").write_text(PROPOSE.format(real=set(REAL_IMPROVEMENTS)))
    manifest = root / "crucible.toml"
    manifest.write_text(MANIFEST.format(python=sys.executable, propose=root / "propose.py", noise=noise))
    return manifest


def kept_iterations(manifest: Path, *, resume_at: int | None = None) -> list[int]:
    if resume_at is not None:
        # stop part-way, then resume: the baseline-derived margin must come back from the log
        done = run_crucible("--manifest", manifest, "--iterations", str(resume_at))
        assert done.returncode == 0, done.stderr
    resume = ("--resume",) if resume_at is not None else ()
    done = run_crucible("--manifest", manifest, "--iterations", str(ITERATIONS), *resume)
    assert done.returncode == 0, done.stderr
    return [row["iter"] for row in rows(manifest) if row["decision"] == "keep"]


def test_without_noise_handling_comment_changes_are_kept(tmp_path: Path) -> None:
    kept = kept_iterations(make_domain(tmp_path / "plain", noise=""))
    assert set(REAL_IMPROVEMENTS) <= set(kept)
    assert set(kept) - set(REAL_IMPROVEMENTS), "the noise was kind to no comment change; pick another seed"


def test_with_repeats_and_auto_noise_only_real_improvements_are_kept(tmp_path: Path) -> None:
    manifest = make_domain(tmp_path / "robust", noise='repeats = 5\nnoise = "auto"')
    assert kept_iterations(manifest, resume_at=4) == list(REAL_IMPROVEMENTS)
    written = rows(manifest)
    baseline = written[0]
    assert baseline["decision"] == "baseline" and len(baseline["samples"]) == 5
    assert baseline["noise_margin"] == noise_margin(baseline["samples"]) > 0
    for row in written[1:]:
        assert len(row["samples"]) == 5 and row["margin"] >= baseline["noise_margin"]
    # the row's score is the median of its samples
    for row in written:
        assert row["score"] == sorted(row["samples"])[2]


def test_a_fixed_min_improvement_also_holds_off_the_noise(tmp_path: Path) -> None:
    manifest = make_domain(tmp_path / "margin", noise='repeats = 3\nmin_improvement = "4%"')
    assert kept_iterations(manifest) == list(REAL_IMPROVEMENTS)
    assert all(row["margin"] > 3 for row in rows(manifest)[1:])  # 4% of a cost near 100, then 90


def test_one_wild_baseline_sample_does_not_block_every_keep(tmp_path: Path) -> None:
    """Issue 28: a slow outlier among the baseline's five samples set a margin larger than the
    baseline (the samples' range), so no candidate could ever be kept."""
    manifest = make_domain(tmp_path / "outlier", noise='repeats = 5\nnoise = "auto"', outlier=150.0)
    done = run_crucible("--manifest", manifest, "--iterations", str(ITERATIONS))
    assert done.returncode == 0, done.stderr
    assert [row["iter"] for row in rows(manifest) if row["decision"] == "keep"] == list(REAL_IMPROVEMENTS)
    baseline = rows(manifest)[0]
    assert max(baseline["samples"]) > 240  # the wild one
    assert baseline["noise_margin"] < 5  # three robust sigmas of noise whose sigma is 1
    # a discarded candidate's note says what it needed, in every view of the log
    results = json.loads(run_crucible("results", "--json", "--manifest", manifest).stdout)
    discarded = [row for row in results["rows"] if row["decision"] == "discard"]
    assert discarded and all(row["note"].startswith("needed below ") for row in discarded)
    first = discarded[0]
    needed = first["best"] - rows(manifest)[first["iter"]]["margin"]
    assert first["note"].startswith(f"needed below {needed:.6g} (best {first['best']:.6g}, margin ")
    # the log's own note says it (a reader of session.jsonl sees it too), and no view says it twice
    logged = [row for row in rows(manifest) if row["decision"] == "discard"]
    assert all(row["note"].startswith("needed below ") for row in logged)
    assert all(row["note"].count("needed below ") == 1 for row in discarded)
    results_md = (manifest.parent / "workspace" / "RESULTS.md").read_text()
    assert f"| {first['iter']} | discard |" in results_md and "needed below " in results_md
    console = [line for line in done.stderr.splitlines() if " discard " in line]
    assert len(console) == len(discarded) and all("needed below " in line for line in console)


def test_check_shows_the_spread_of_repeated_measures(tmp_path: Path) -> None:
    manifest = make_domain(tmp_path / "check", noise="repeats = 4")
    done = run_crucible("check", "--manifest", manifest)
    assert done.returncode == 0, done.stdout
    assert "4 measures: median" in done.stdout and 'what noise = "auto" would require' in done.stdout
    assert "WARN noise" not in done.stdout  # noise = "auto" is not set, and the spread is small


def test_check_warns_when_the_auto_margin_is_a_large_share_of_the_score(tmp_path: Path) -> None:
    manifest = make_domain(tmp_path / "loud", noise='repeats = 5\nnoise = "auto"', sigma=10.0)
    done = run_crucible("check", "--manifest", manifest)
    assert done.returncode == 0, done.stdout  # a warning, not a failure
    [warning] = [line for line in done.stdout.splitlines() if line.startswith('WARN noise = "auto"')]
    margin = float(warning.split("sets a margin of ")[1].split(",")[0])
    assert margin > 10 and "% of the score" in warning and "min_improvement" in warning
    quiet = make_domain(tmp_path / "quiet", noise='repeats = 5\nnoise = "auto"', outlier=150.0)
    done = run_crucible("check", "--manifest", quiet)
    assert done.returncode == 0 and "WARN noise" not in done.stdout  # one wild sample is not noise
