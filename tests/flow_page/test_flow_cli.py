"""`crucible flow` through the real CLI: a crucible-written log and our own counter run, every format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_support import run_crucible

FIXTURE = Path(__file__).parents[1] / "flow" / "fixtures" / "crucible_run.jsonl"  # the flow model's logs
WIRE_FIXTURE = Path(__file__).parents[1] / "fixtures" / "crucible_session.jsonl"  # the wire tests' log


@pytest.mark.parametrize("ext", ["json", "dot", "mmd", "html"])
def test_a_crucible_written_log_renders_to_every_format(tmp_path: Path, ext: str) -> None:
    out = tmp_path / f"flow.{ext}"
    done = run_crucible("flow", "--session", FIXTURE, "--out", out)
    assert done.returncode == 0, done.stderr
    assert "5 iterations, outcome budget" in done.stdout
    text = out.read_text()
    if ext == "json":
        assert [it["decision"] for it in json.loads(text)["iterations"]] == [
            "keep",
            "discard",
            "invalid",
            "keep",
            "keep",
        ]
    else:
        assert "iter5" in text or 'data-iter="5"' in text


@pytest.mark.parametrize("ext", ["json", "dot", "mmd", "html"])
def test_the_wire_tests_crucible_written_log_renders(tmp_path: Path, ext: str) -> None:
    out = tmp_path / f"flow.{ext}"
    done = run_crucible("flow", "--session", WIRE_FIXTURE, "--out", out)
    assert done.returncode == 0, done.stderr
    if ext == "json":
        model = json.loads(out.read_text())
        assert [(it["iter"], it["decision"]) for it in model["iterations"]] == [
            (1, "keep"),
            (2, "discard"),
            (3, "keep"),
            (4, "discard"),
        ]
        assert model["iterations"][1]["candidates"][0]["decision"] == "wide-keep-0"
        assert [r["recovery"] for r in model["resumes"]] == ["died_mid_turn", "clean_exit"]


def test_our_counter_run_renders(example, tmp_path: Path) -> None:
    manifest = example("counter")
    assert run_crucible("--manifest", manifest, "--iterations", "3").returncode == 0
    session = manifest.parent / "state" / "session.jsonl"
    for ext in ("json", "dot", "mmd", "html"):
        done = run_crucible("flow", "--session", session, "--out", tmp_path / f"counter.{ext}")
        assert done.returncode == 0, done.stderr
    model = json.loads((tmp_path / "counter.json").read_text())
    assert [(it["iter"], it["decision"], it["score"]) for it in model["iterations"]] == [
        (1, "keep", 1),
        (2, "keep", 2),
        (3, "keep", 3),
    ]
    assert model["header"]["baseline"] == 0 and model["header"]["best"] == 3
    assert model["header"]["goal"] == "" or "value.txt" in model["header"]["goal"]


def test_spans_add_wall_clock(tmp_path: Path) -> None:
    spans = tmp_path / "spans.json"
    spans.write_text(json.dumps({"data": [{"start": 0, "duration": 4_000_000_000, "meta": {"iter": 2}}]}))
    out = tmp_path / "flow.json"
    assert run_crucible("flow", "--session", FIXTURE, "--out", out, "--spans", spans).returncode == 0
    assert json.loads(out.read_text())["iterations"][1]["wall_secs"] == 4.0


def test_bad_input_is_one_line_with_a_documented_code(tmp_path: Path) -> None:
    done = run_crucible("flow", "--session", FIXTURE, "--out", tmp_path / "flow.pdf")
    assert done.returncode == 64 and "name the output .dot, .html, .json or .mmd" in done.stderr
    done = run_crucible("flow", "--session", tmp_path / "missing.jsonl", "--out", tmp_path / "f.html")
    assert done.returncode == 11 and "no session log" in done.stderr
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("not json\n")
    done = run_crucible("flow", "--session", garbage, "--out", tmp_path / "f.html")
    assert done.returncode == 64 and "Traceback" not in done.stderr


PLAN = """
version = 1
[budget]
usd = 1.0
[[task]]
name = "build"
kind = "command"
command = "echo '{\\"ok\\": true}'"
[[task]]
name = "test"
kind = "command"
command = "exit 1"
depends_on = ["build"]
[[task]]
name = "report"
kind = "command"
command = "echo '{\\"ok\\": true}'"
depends_on = ["test"]
"""


def test_a_plan_run_shows_its_tasks_and_statuses(tmp_path: Path) -> None:
    (tmp_path / "plan.toml").write_text(PLAN)
    assert run_crucible("plan", "run", "plan.toml", cwd=tmp_path).returncode == 4  # a required task failed
    session = tmp_path / "state" / "session.jsonl"
    for ext in ("json", "dot", "mmd", "html"):
        assert run_crucible("flow", "--session", session, "--out", tmp_path / f"plan.{ext}").returncode == 0
    plan = json.loads((tmp_path / "plan.json").read_text())["plan"]
    assert [(t["name"], t["status"]) for t in plan] == [
        ("build", "pass"),
        ("test", "fail"),
        ("report", "blocked"),
    ]
    assert "task0 -> task1;" in (tmp_path / "plan.dot").read_text()
    assert "task1 --> task2" in (tmp_path / "plan.mmd").read_text()
    page = (tmp_path / "plan.html").read_text()
    assert '<td class="st-blocked">blocked</td>' in page and "did not pass" in page
