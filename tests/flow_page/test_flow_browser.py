"""The flow page in a real browser: headless Chromium from the distribution, driven by playwright.

No browser is ever downloaded: playwright drives the system's /usr/bin/chromium (CI's .ci/run
installs it from the distribution's packages). The screenshot lands in test-artifacts/flow/.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crucible_core.flow.decode import read_session
from crucible_core.flow.fold import fold_flow
from crucible_flow_page.page import render_html
from tests.cli_support import crucible_in_process

FIXTURES = Path(__file__).resolve().parents[1] / "flow" / "fixtures"  # the flow model's logs
FIXTURE = FIXTURES / "crucible_run.jsonl"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "flow"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (requirements-dev.txt)"
)
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists() and shutil.which("chromium") is None,
    reason="no Chromium on this machine (apt-get install chromium; .ci/run does this as root)",
)


@pytest.fixture(scope="module")
def browser():
    executable = str(CHROMIUM) if CHROMIUM.exists() else shutil.which("chromium")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


def test_the_page_shows_columns_chart_and_detail_on_click(browser, tmp_path: Path) -> None:
    page_file = tmp_path / "flow.html"
    page_file.write_text(render_html(fold_flow(read_session(FIXTURE))), encoding="utf-8")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(page_file.as_uri())

    assert page.locator(".lane .col").count() == 5
    assert page.locator(".lane .resume").count() == 1
    assert page.locator("svg.score-chart .point").count() == 5
    assert page.locator("svg.score-chart .baseline").count() == 1
    assert page.locator(".col[data-iter='4'] .cand").count() == 3
    assert page.locator("header").inner_text().count("vs baseline 277") == 1

    detail = page.locator("#detail")
    assert detail.get_attribute("data-iter") is None
    page.click(".col[data-iter='1']")
    assert detail.get_attribute("data-iter") == "1"
    text = detail.inner_text()
    assert "src/route.rs | 14" in text and "read outside the lock" in text
    assert "Moved the endpoint-table read out of the critical section" in text

    page.click(".col[data-iter='3']")
    assert "<script>window.__pwned=1</script> build failed" in detail.inner_text()  # shown as text
    assert page.evaluate("window.__pwned") is None  # never executed
    assert errors == []
    assert all(url.startswith("file://") for url in requests)  # nothing fetched from anywhere

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.click(".col[data-iter='1']")
    shot = ARTIFACTS / "flow.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    page.close()


OUR_RUN = FIXTURES / "our_run.jsonl"  # described in tests/flow/test_flow_model.py


def test_our_run_wide_round_plans_outlier_and_a_zero_baseline_in_the_browser(browser, tmp_path: Path) -> None:
    page_file = tmp_path / "ours.html"
    page_file.write_text(render_html(fold_flow(read_session(OUR_RUN))), encoding="utf-8")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(page_file.as_uri())

    # the wide round before iteration 1 has its own column, and the best it kept holds after it
    columns = page.locator(".lane .col")
    assert columns.count() == 6
    assert columns.first.locator("h3").inner_text().startswith("wide round")
    assert columns.first.locator(".cand").count() == 2
    assert "best 3" in page.locator(".col[data-iter='1']").inner_text()
    assert "iterations: 5 of 5; kept 2, discarded 3 (1 invalid)" in page.locator("header").inner_text()
    assert page.locator(".col[data-iter='1'] .badge").inner_text() == "invalid"

    # a baseline of 0 still says how far each score moved
    assert "vs baseline +4" in page.locator(".col[data-iter='2']").inner_text()

    # one far-out score is drawn on the edge; the others spread over the plot instead of a line
    assert page.locator("svg.score-chart .point").count() == 6
    assert page.locator("svg.score-chart .point.clipped").count() == 1
    chart = page.locator("svg.score-chart").bounding_box()
    ys = [box["y"] for box in (c.bounding_box() for c in page.locator("svg.score-chart circle").all()) if box]
    assert chart is not None and max(ys) - min(ys) > chart["height"] / 4  # with -500 on the axis: 2px

    # each iteration's graph, labelled, in its own detail; no unlabelled table for the whole run
    assert page.locator("section.plan").count() == 0
    page.click(".col[data-iter='1']")
    detail = page.locator("#detail")
    assert "Plan tasks of iteration 1" in detail.inner_text()
    assert detail.locator("td.st-fail").inner_text() == "fail"
    page.click(".col[data-iter='2']")
    assert "Plan tasks of iteration 2" in detail.inner_text() and detail.locator("td.st-fail").count() == 0
    assert errors == []
    page.close()


TASK_PLAN = """
version = 1
[budget]
usd = 1.0
[[task]]
name = "build"
kind = "command"
command = "echo '{\\"artifact\\": \\"<img src=x onerror=window.__pwned=1>\\"}'"
[[task]]
name = "test"
kind = "command"
command = "echo 'no tests found' >&2; exit 3"
depends_on = ["build"]
[[task]]
name = "report"
kind = "command"
command = "echo '{}'"
depends_on = ["test"]
[[task]]
name = "tell"
kind = "command"
stage = "epilogue"
command = "echo '{\\"told\\": true}'"
"""


def test_a_plan_run_is_its_task_graph_coloured_by_status_in_the_browser(browser, tmp_path: Path) -> None:
    (tmp_path / "plan.toml").write_text(TASK_PLAN)
    (tmp_path / "ws").mkdir()
    assert (
        crucible_in_process("plan", "run", tmp_path / "plan.toml", "--workspace", tmp_path / "ws").exit_code
        == 4
    )
    page_file = tmp_path / "plan.html"
    page_file.write_text(render_html(fold_flow(read_session(tmp_path / "state" / "session.jsonl"))))
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(page_file.as_uri())

    # the graph, not a score chart or an empty lane of iterations
    assert page.locator("svg.score-chart").count() == 0 and page.locator(".lane").count() == 0
    assert page.locator("svg.task-graph .node").count() == 4
    assert page.locator("svg.task-graph .edge").count() == 2
    assert [page.locator(f".node[data-task='{n}']").get_attribute("class") for n in range(4)] == [
        "node st-pass",
        "node st-fail",
        "node st-blocked",
        "node st-pass",
    ]
    fills = {page.locator(f".node[data-task='{n}'] rect").get_attribute("fill") for n in (0, 1)}
    assert len(fills) == 2  # a passing and a failing task are drawn in different colours
    header = page.locator("header").inner_text()
    assert (
        "verdict: fail" in header
        and "outcome: error" in header  # a failed graph, not an exhausted one
        and "4 tasks: 2 pass, 1 fail, 1 blocked" in header
    )

    detail = page.locator("#detail")
    page.click(".node[data-task='1']")
    assert detail.get_attribute("data-task") == "1"
    assert "Task test: fail" in detail.inner_text() and "exited 3: no tests found" in detail.inner_text()
    page.click(".node[data-task='0']")
    assert '{"artifact":"<img src=x onerror=window.__pwned=1>"}' in detail.inner_text()  # shown as text
    assert page.evaluate("window.__pwned") is None
    assert page.locator("section.plan td.st-blocked").inner_text() == "blocked"
    assert errors == []
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "flow-plan.png"), full_page=True)
    page.close()
