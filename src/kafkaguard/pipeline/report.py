"""The one-page, self-contained HTML report of a job: summary numbers, inline SVG charts and tables.

Plain Python over small, already-aggregated results (lists of tuples); no Spark here.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

Cell = str | int | float | datetime | bool | None
_COLORS = ("#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2")
_CSS = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#111;padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}td,th{border:1px solid #ddd;padding:3px 8px;
text-align:left;vertical-align:top}th{background:#f3f4f6}td.n{text-align:right;font-variant-numeric:tabular-nums}
.cards{display:flex;flex-wrap:wrap;gap:1rem}.card{border:1px solid #ddd;border-radius:6px;padding:.6rem 1rem}
.card b{display:block;font-size:1.3rem}.muted{color:#666;font-size:.85rem}svg text{font-size:11px}
code{background:#f3f4f6;padding:0 3px}
"""


def esc(value: Cell) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return html.escape(str(value))


def table(columns: Sequence[str], rows: Sequence[Sequence[Cell]], empty: str = "none") -> str:
    if not rows:
        return f'<p class="muted">{html.escape(empty)}</p>'
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{esc(v)}</td>'
            if isinstance(v, int | float) and not isinstance(v, bool)
            else f"<td>{esc(v)}</td>"
            for v in row
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def bar_chart(items: Sequence[tuple[str, int]], color: str = _COLORS[0], width: int = 700) -> str:
    """Horizontal bars, labels left; nothing drawn for an empty list."""
    if not items:
        return '<p class="muted">no data</p>'
    top = max(v for _, v in items) or 1
    label_w, row_h = 300, 18
    height = row_h * len(items) + 4
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">']
    for i, (label, value) in enumerate(items):
        y = i * row_h + 2
        w = max(1, int((width - label_w - 80) * value / top))
        short = label if len(label) <= 48 else label[:45] + "..."
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 12}" text-anchor="end"><title>{html.escape(label)}</title>'
            f"{html.escape(short)}</text>"
            f'<rect x="{label_w}" y="{y}" width="{w}" height="{row_h - 4}" fill="{color}"/>'
            f'<text x="{label_w + w + 4}" y="{y + 12}">{value:,}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def line_chart(series: Mapping[str, Sequence[tuple[datetime, int]]], width: int = 1000, height: int = 220) -> str:
    """Requests per time bucket, one polyline per series, with a legend."""
    points = [p for values in series.values() for p in values]
    if not points:
        return '<p class="muted">no data</p>'
    t0 = min(t for t, _ in points).timestamp()
    t1 = max(t for t, _ in points).timestamp()
    top = max(v for _, v in points) or 1
    left, bottom, plot_w, plot_h = 60, height - 30, width - 80, height - 50
    span = (t1 - t0) or 1.0

    def xy(t: datetime, v: int) -> str:
        x = left + (t.timestamp() - t0) / span * plot_w if t1 > t0 else left + plot_w / 2
        return f"{x:.1f},{bottom - v / top * plot_h:.1f}"

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">',
        f'<line x1="{left}" y1="{bottom}" x2="{left + plot_w}" y2="{bottom}" stroke="#999"/>',
        f'<line x1="{left}" y1="{bottom}" x2="{left}" y2="{bottom - plot_h}" stroke="#999"/>',
        f'<text x="{left - 4}" y="{bottom - plot_h + 4}" text-anchor="end">{top:,}</text>',
        f'<text x="{left - 4}" y="{bottom}" text-anchor="end">0</text>',
        f'<text x="{left}" y="{height - 8}">{esc(min(t for t, _ in points))}</text>',
        f'<text x="{left + plot_w}" y="{height - 8}" text-anchor="end">{esc(max(t for t, _ in points))}</text>',
    ]
    for i, (name, values) in enumerate(series.items()):
        color = _COLORS[i % len(_COLORS)]
        ordered = sorted(values)
        if len(ordered) == 1:
            x, y = xy(*ordered[0]).split(",")
            parts.append(f'<circle cx="{x}" cy="{y}" r="3" fill="{color}"/>')
        else:
            path = " ".join(xy(t, v) for t, v in ordered)
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{path}"/>')
        parts.append(
            f'<rect x="{left + 10 + i * 170}" y="4" width="10" height="10" fill="{color}"/>'
            f'<text x="{left + 24 + i * 170}" y="13">{html.escape(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


@dataclass
class Report:
    title: str
    subtitle: str = ""
    cards: list[tuple[str, Cell]] = field(default_factory=list)
    sections: list[tuple[str, str]] = field(default_factory=list)

    def card(self, label: str, value: Cell) -> None:
        self.cards.append((label, value))

    def section(self, heading: str, *fragments: str) -> None:
        self.sections.append((heading, "".join(fragments)))

    def render(self) -> str:
        cards = "".join(f'<div class="card"><b>{esc(v)}</b>{html.escape(k)}</div>' for k, v in self.cards)
        body = "".join(f"<h2>{html.escape(h)}</h2>{content}" for h, content in self.sections)
        return (
            '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(self.title)}</title><style>{_CSS}</style></head><body>"
            f'<h1>{html.escape(self.title)}</h1><p class="muted">{html.escape(self.subtitle)}</p>'
            f'<div class="cards">{cards}</div>{body}</body></html>'
        )
