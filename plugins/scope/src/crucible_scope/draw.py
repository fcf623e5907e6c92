"""Drawing a laid-out graph: WORKFLOW.svg as plain SVG text, WORKFLOW.png with Pillow.

Both come from the same Layout, so the two pictures agree box for box. Task names come from a
hand-written pack (and, later, from a proposing agent), so every label is bounded by the layout
and escaped for XML here.
"""

from __future__ import annotations

import io
from xml.sax.saxutils import escape

from crucible_scope.layout import MAX_TITLE, NODE_H, NODE_W, Layout, Node, short

INK = (33, 37, 41)
EDGE = (108, 117, 125)
BOX = (248, 249, 250)
GROUP = (231, 241, 255)
GROUP_INK = (13, 110, 253)


def _centre_right(node: Node) -> tuple[int, int]:
    return node.x + NODE_W, node.y + NODE_H // 2


def _centre_left(node: Node) -> tuple[int, int]:
    return node.x, node.y + NODE_H // 2


def _arrow_head(tip: tuple[int, int], tail: tuple[int, int]) -> list[tuple[float, float]]:
    """A small triangle at `tip`, pointing away from `tail`."""
    import math

    angle = math.atan2(tip[1] - tail[1], tip[0] - tail[0])
    size, spread = 9.0, 0.45
    return [
        (float(tip[0]), float(tip[1])),
        (tip[0] - size * math.cos(angle - spread), tip[1] - size * math.sin(angle - spread)),
        (tip[0] - size * math.cos(angle + spread), tip[1] - size * math.sin(angle + spread)),
    ]


def _title(layout: Layout, title: str) -> str:
    """The title, cut to what the picture's width holds (about 7 pixels a character)."""
    return short(title, max(20, min(MAX_TITLE, (layout.width - 32) // 7)))


def _color(rgb: tuple[int, int, int]) -> str:
    return "#" + "".join(f"{c:02x}" for c in rgb)


def to_svg(layout: Layout, title: str) -> str:
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{layout.width}" height="{layout.height}" '
        f'viewBox="0 0 {layout.width} {layout.height}" font-family="sans-serif">',
        f'<rect width="{layout.width}" height="{layout.height}" fill="white"/>',
        f'<text x="16" y="26" font-size="15" fill="{_color(INK)}">{escape(_title(layout, title))}</text>',
    ]
    for group in layout.groups:
        out.append(
            f'<rect x="{group.x}" y="{group.y}" width="{group.w}" height="{group.h}" rx="8" '
            f'fill="{_color(GROUP)}" stroke="{_color(GROUP_INK)}" stroke-dasharray="4 3"/>'
        )
        out.append(
            f'<text x="{group.x + 8}" y="{group.y + 14}" font-size="11" fill="{_color(GROUP_INK)}">'
            f"{escape(group.label)}</text>"
        )
    for source, target in layout.edges:
        tail, tip = _centre_right(layout.node(source)), _centre_left(layout.node(target))
        head = " ".join(f"{x:.1f},{y:.1f}" for x, y in _arrow_head(tip, tail))
        out.append(
            f'<line x1="{tail[0]}" y1="{tail[1]}" x2="{tip[0]}" y2="{tip[1]}" stroke="{_color(EDGE)}" '
            'stroke-width="1.5"/>'
        )
        out.append(f'<polygon points="{head}" fill="{_color(EDGE)}"/>')
    for node in layout.nodes:
        dash = ' stroke-dasharray="6 4"' if node.dashed else ""
        out.append(
            f'<rect x="{node.x}" y="{node.y}" width="{NODE_W}" height="{NODE_H}" rx="8" '
            f'fill="{_color(BOX)}" stroke="{_color(INK)}"{dash}/>'
        )
        out.append(
            f'<text x="{node.x + 10}" y="{node.y + 21}" font-size="13" fill="{_color(INK)}">'
            f"{escape(short(node.name))}</text>"
        )
        out.append(
            f'<text x="{node.x + 10}" y="{node.y + 40}" font-size="11" fill="{_color(EDGE)}">'
            f"{escape(short(node.kind))}</text>"
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def to_png(layout: Layout, title: str) -> bytes:
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (layout.width, layout.height), "white")
    pen = ImageDraw.Draw(image)
    font = ImageFont.load_default()
    pen.text((16, 12), _title(layout, title), fill=INK, font=font)
    for group in layout.groups:
        box = (group.x, group.y, group.x + group.w, group.y + group.h)
        pen.rounded_rectangle(box, radius=8, fill=GROUP, outline=GROUP_INK)
        pen.text((group.x + 8, group.y + 3), group.label, fill=GROUP_INK, font=font)
    for source, target in layout.edges:
        tail, tip = _centre_right(layout.node(source)), _centre_left(layout.node(target))
        pen.line([tail, tip], fill=EDGE, width=2)
        pen.polygon(_arrow_head(tip, tail), fill=EDGE)
    for node in layout.nodes:
        box = (node.x, node.y, node.x + NODE_W, node.y + NODE_H)
        # Pillow draws no dashed outline: an advisory or epilogue task is told by a grey one
        pen.rounded_rectangle(box, radius=8, fill=BOX, outline=EDGE if node.dashed else INK, width=2)
        pen.text((node.x + 10, node.y + 10), short(node.name), fill=INK, font=font)
        pen.text((node.x + 10, node.y + 30), short(node.kind), fill=EDGE, font=font)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()
