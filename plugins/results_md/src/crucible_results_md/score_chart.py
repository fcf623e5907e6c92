"""The score-over-iterations chart as a small standalone SVG (used by RESULTS.md and the flow page).

Hand-written rather than drawn by a plotting library: the chart is a few dozen shapes, it must
render identically with no dependency (this plugin needs crucible-core alone), it must be
inlinable into a page that may not fetch anything, and every label in it comes from the session
log, so we escape every string ourselves.

One slow candidate must not flatten the rest: a score far outside the others (beyond three
interquartile ranges of the middle half, Tukey's "far out" fence) is drawn as a triangle on the
chart's edge, its value in its tooltip, instead of stretching the axis. The baseline and the
best line always fit.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

DECISION_COLOURS = {
    "keep": "#1a7f37",
    "discard": "#8c959f",
    "invalid": "#cf222e",
    "error": "#cf222e",
}
_OTHER = "#bf8700"
FAR_OUT = 3.0  # interquartile ranges beyond the middle half at which a score is drawn clipped


@attrs.frozen
class ChartPoint:
    iter: int
    score: float | None
    decision: str
    best: float | None = None


def escape(text: str) -> str:
    """`text` safe inside SVG markup and attribute values, as `html.escape` makes it.

    Written here because importing `html` loads its 100 KB entity table, and every run draws
    this chart from its start (issue 27, docs/performance.md)."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace('"', "&quot;").replace("'", "&#x27;")


def quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    """The three cut points of `values` into quarters, as `statistics.quantiles(values, n=4,
    method="inclusive")` computes them (at least two values): written here, since importing
    `statistics` (with `fractions` and `decimal`) cost a run's start-up some 5 ms."""
    data = sorted(values)
    last = len(data) - 1
    cuts = []
    for i in (1, 2, 3):
        j, delta = divmod(i * last, 4)
        cuts.append((data[j] * (4 - delta) + data[j + 1] * delta) / 4)
    return cuts[0], cuts[1], cuts[2]


def _fmt(value: float) -> str:
    return f"{value:.6g}"


def _value_range(points: Sequence[ChartPoint], baseline: float | None) -> tuple[float, float] | None:
    """The lowest and highest value the axis must show: the baseline, every best, and every
    score that is not far out (None when there is nothing to show)."""
    anchors = [p.best for p in points if p.best is not None]
    anchors += [baseline] if baseline is not None else []
    scores = [p.score for p in points if p.score is not None]
    shown = anchors + scores
    if not shown:
        return None
    if len(shown) >= 4:
        q1, _, q3 = quartiles(shown)
        reach = FAR_OUT * (q3 - q1)
        shown = anchors + [v for v in scores if q1 - reach <= v <= q3 + reach]
    return min(shown), max(shown)


def render_score_chart(
    points: Sequence[ChartPoint],
    *,
    baseline: float | None,
    direction: str = "higher",
    width: int = 640,
    height: int = 240,
    title: str = "score by iteration",
) -> str:
    """An SVG document: one dot per measured iteration, the best-so-far step line, the baseline dashed.

    Invalid iterations (no score) are drawn as crosses on the bottom edge so they stay visible;
    a far-out score as a triangle on the edge it lies beyond.
    """
    left, right, top, bottom = 56, 16, 28, 36
    plot_w, plot_h = width - left - right, height - top - bottom
    lo, hi = _value_range(points, baseline) or (0.0, 1.0)
    if hi == lo:
        lo, hi = lo - 1.0, hi + 1.0
    pad = (hi - lo) * 0.08
    lo, hi = lo - pad, hi + pad
    last_iter = max([p.iter for p in points] + [1])

    def x(iteration: float) -> float:
        return left + plot_w * (iteration / last_iter if last_iter else 0)

    def y(value: float) -> float:
        return top + plot_h * (1 - (value - lo) / (hi - lo))

    better = "lower is better" if direction == "lower" else "higher is better"
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="score-chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)} ({better})</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{left}" y="16" font-family="sans-serif" font-size="12" fill="#24292f">'
        f"{escape(title)} ({better})</text>",
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#d0d7de"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#d0d7de"/>',
    ]
    for value in (lo + pad, (lo + hi) / 2, hi - pad):
        parts.append(
            f'<text x="{left - 6}" y="{y(value) + 4:.1f}" text-anchor="end" font-family="sans-serif" '
            f'font-size="10" fill="#57606a">{escape(_fmt(value))}</text>'
        )
    ticks = sorted({p.iter for p in points})
    step = max(1, len(ticks) // 12 + (1 if len(ticks) % 12 else 0)) if len(ticks) > 12 else 1
    for tick in ticks[::step]:
        parts.append(
            f'<text x="{x(tick):.1f}" y="{top + plot_h + 14}" text-anchor="middle" font-family="sans-serif" '
            f'font-size="10" fill="#57606a">{tick}</text>'
        )
    parts.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 4}" text-anchor="middle" font-family="sans-serif" '
        f'font-size="10" fill="#57606a">iteration</text>'
    )
    if baseline is not None:
        parts.append(
            f'<line class="baseline" x1="{left}" y1="{y(baseline):.1f}" x2="{left + plot_w}" '
            f'y2="{y(baseline):.1f}" stroke="#0969da" stroke-dasharray="5,4"/>'
            f'<text x="{left + plot_w}" y="{y(baseline) - 4:.1f}" text-anchor="end" font-family="sans-serif" '
            f'font-size="10" fill="#0969da">baseline {escape(_fmt(baseline))}</text>'
        )
    best_line = [(0.0, baseline)] if baseline is not None else []
    best_line += [(float(p.iter), p.best) for p in points if p.best is not None]
    if len(best_line) > 1:
        path, prev = [], None
        for it, val in best_line:
            assert val is not None
            if prev is None:
                path.append(f"M{x(it):.1f},{y(val):.1f}")
            else:
                path.append(f"H{x(it):.1f}V{y(val):.1f}")
            prev = val
        parts.append(
            f'<path class="best" d="{"".join(path)}" fill="none" stroke="#1a7f37" stroke-width="1.5"/>'
        )
    for p in points:
        colour = DECISION_COLOURS.get(p.decision, _OTHER)
        label = escape(f"iteration {p.iter}: {p.decision} {'' if p.score is None else _fmt(p.score)}".strip())
        if p.score is not None and not lo <= p.score <= hi:
            # a triangle pointing off the chart, its tip on the edge the score lies beyond
            cx, above = x(p.iter), p.score > hi
            tip = top if above else top + plot_h
            base = tip + 8 if above else tip - 8
            parts.append(
                f'<g class="point clipped" data-iter="{p.iter}"><title>{label} (off the scale)</title>'
                f'<path d="M{cx:.1f},{tip:.1f}L{cx - 5:.1f},{base:.1f}L{cx + 5:.1f},{base:.1f}Z" '
                f'fill="{colour}"/><text x="{cx + 7:.1f}" y="{(tip + base) / 2 + 3:.1f}" '
                f'font-family="sans-serif" font-size="9" fill="{colour}">{escape(_fmt(p.score))}</text></g>'
            )
        elif p.score is None:
            cx, cy = x(p.iter), top + plot_h - 6
            parts.append(
                f'<g class="point" data-iter="{p.iter}"><title>{label}</title>'
                f'<path d="M{cx - 4:.1f},{cy - 4:.1f}L{cx + 4:.1f},{cy + 4:.1f}M{cx - 4:.1f},{cy + 4:.1f}'
                f'L{cx + 4:.1f},{cy - 4:.1f}" stroke="{colour}" stroke-width="2"/></g>'
            )
        else:
            parts.append(
                f'<g class="point" data-iter="{p.iter}"><title>{label}</title>'
                f'<circle cx="{x(p.iter):.1f}" cy="{y(p.score):.1f}" r="4.5" fill="{colour}"/></g>'
            )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
