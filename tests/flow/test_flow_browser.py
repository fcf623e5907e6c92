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
from crucible_core.flow.page import render_html

FIXTURE = Path(__file__).parent / "fixtures" / "crucible_run.jsonl"
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
