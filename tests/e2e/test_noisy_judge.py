"""Keeps that survive noise, end to end: a real measure script whose noise is seeded.

The domain's true cost lives in program.txt; the proposer makes a real improvement (cost - 10)
on two iterations and only edits a comment on the others. The measure adds seeded Gaussian
noise (sigma 1), so a comment change reads better than the best about half the time. Without
noise handling those no-change candidates get kept; with `repeats` and `noise = "auto"` none
are, and both real improvements still are.
"""

from __future__ import annotations

import sys
from pathlib import Path

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
noise = random.Random(1000 + n).gauss(0.0, 1.0)
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


def make_domain(root: Path, noise: str) -> Path:
    root.mkdir()
    (root / "program.txt").write_text("cost = 100\n")
    (root / "measure.py").write_text(MEASURE.format(counter=str(root / "measure-count")))
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
    assert baseline["noise_margin"] == max(baseline["samples"]) - min(baseline["samples"]) > 0
    for row in written[1:]:
        assert len(row["samples"]) == 5 and row["margin"] >= baseline["noise_margin"]
    # the row's score is the median of its samples
    for row in written:
        assert row["score"] == sorted(row["samples"])[2]


def test_a_fixed_min_improvement_also_holds_off_the_noise(tmp_path: Path) -> None:
    manifest = make_domain(tmp_path / "margin", noise='repeats = 3\nmin_improvement = "4%"')
    assert kept_iterations(manifest) == list(REAL_IMPROVEMENTS)
    assert all(row["margin"] > 3 for row in rows(manifest)[1:])  # 4% of a cost near 100, then 90


def test_check_shows_the_spread_of_repeated_measures(tmp_path: Path) -> None:
    manifest = make_domain(tmp_path / "check", noise="repeats = 4")
    done = run_crucible("check", "--manifest", manifest)
    assert done.returncode == 0, done.stdout
    assert "4 measures: median" in done.stdout and 'the margin noise = "auto" would require' in done.stdout
