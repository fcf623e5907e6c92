"""The score-over-iterations SVG chart beside RESULTS.md (and on the flow page)."""

from __future__ import annotations

import html
import random
import re
import statistics

from crucible_results_md.score_chart import ChartPoint, escape, quartiles, render_score_chart


def test_score_chart_draws_a_point_per_iteration_and_the_baseline() -> None:
    points = [
        ChartPoint(1, 5.0, "keep", 5.0),
        ChartPoint(2, None, "invalid", 5.0),
        ChartPoint(3, 4.0, "discard", 5.0),
    ]
    svg = render_score_chart(points, baseline=3.0, title='a "<b>" title')
    assert svg.startswith("<svg") and svg.count('class="point"') == 3
    assert 'class="baseline"' in svg and 'class="best"' in svg
    assert "<b>" not in svg


def test_a_far_out_score_is_drawn_on_the_edge_and_the_rest_fill_the_chart() -> None:
    points = [ChartPoint(n, 10.0 + n / 10, "discard", 10.0) for n in range(1, 6)]
    points.append(ChartPoint(6, 900.0, "discard", 10.0))
    svg = render_score_chart(points, baseline=10.0, direction="lower", height=240)
    assert svg.count('class="point clipped"') == 1 and "900 (off the scale)" in svg
    ys = [float(y) for y in re.findall(r'<circle cx="[\d.]+" cy="([\d.]+)"', svg)]
    assert max(ys) - min(ys) > 100  # the five ordinary scores spread over the plot, not one pixel
    # none far out, or too few values to tell: nothing is clipped
    assert "clipped" not in render_score_chart(points[:5], baseline=10.0)
    assert "clipped" not in render_score_chart([ChartPoint(1, 10.0, "discard"), points[-1]], baseline=None)


def test_the_charts_own_quartiles_and_escape_answer_as_the_standard_librarys() -> None:
    """Written in the module so a run's start does not import statistics and html (issue 27)."""
    rng = random.Random(27)
    for size in range(2, 40):
        values = [
            rng.choice([rng.uniform(-1e6, 1e6), float(rng.randint(-5, 5)), 0.1 * size]) for _ in range(size)
        ]
        assert list(quartiles(values)) == statistics.quantiles(values, n=4, method="inclusive")
    for text in ("a \"<b>\" & 'c'", "plain", "&amp;", "<<>>\"'"):
        assert escape(text) == html.escape(text)
