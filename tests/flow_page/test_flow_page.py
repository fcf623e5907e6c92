"""The flow page rendered from the flow model's fixture logs (no browser here; test_flow_browser.py drives one)."""

from __future__ import annotations

from crucible_flow_page.page import render_html
from tests.flow.test_flow_model import model, our_model


def test_html_escapes_every_log_string() -> None:
    page = render_html(model())
    assert "<script>window.__pwned" not in page
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page
    assert "<b>aggressively</b>" not in page and "&lt;b&gt;aggressively&lt;/b&gt;" in page
    assert page.count("<script>") == 1  # our own, and only ours
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page  # nothing fetched, no CDN
    assert "default-src 'none'" in page


def test_each_iteration_keeps_its_own_graph_on_the_page() -> None:
    page = render_html(our_model())
    assert "Plan tasks of iteration 1" in page and "Plan tasks of the run" not in page


def test_versus_a_baseline_of_zero_is_the_change_itself_on_the_page() -> None:
    page = render_html(our_model())
    assert "vs baseline +4 · best 4" in page and "best: <b>6 vs baseline 0 +6</b>" in page
