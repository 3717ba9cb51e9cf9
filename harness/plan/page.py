"""A plan as one HTML page (`harness plan --html`): every deployment simulated on a cost–capacity plane, the
front joined, the pick ringed, and the front's table. Self-contained: an inline SVG, no script."""

from __future__ import annotations

import html
from collections.abc import Sequence

from harness.plan.front import PlanRow, capacity_front

_W, _H, _PAD = 720, 420, 56


def plan_html(table: Sequence[PlanRow], pick: PlanRow | None, target: float | None, unit: str,
              title: str) -> str:
    shown = [r for r in table if r.measured.capacity]
    front = capacity_front(table)
    rows = "".join(f"<tr><td>{html.escape(r.measured.deployment.text())}</td><td>{r.cost:g}</td>"
                   f"<td>{r.measured.capacity or 0:.2f}</td><td>{_f(r.usd_per_m_tokens, '.2f')}</td>"
                   f"<td>{_f(r.tokens_per_joule, '.2f')}</td></tr>" for r in front)
    said = (f"<p>Cheapest that carries {target:g} req/s: <b>{html.escape(pick.measured.deployment.text())}</b> "
            f"({pick.cost:g} {unit}).</p>" if pick is not None and target is not None else "")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            "<style>body{font:14px system-ui,sans-serif;margin:24px}table{border-collapse:collapse}"
            "td,th{padding:3px 10px;border-bottom:1px solid #ddd;text-align:right}td:first-child{text-align:left}"
            "</style></head><body>"
            f"<h1>{html.escape(title)}</h1>{said}{_plane(shown, front, pick, target, unit)}"
            f"<h2>The front: no cheaper deployment carries as much</h2><table><tr><th>deployment</th><th>{unit}</th>"
            f"<th>capacity req/s</th><th>$ / M tokens</th><th>tokens / J</th></tr>{rows}</table></body></html>")


def _plane(shown: Sequence[PlanRow], front: Sequence[PlanRow], pick: PlanRow | None, target: float | None,
           unit: str) -> str:
    if not shown:
        return "<p>No deployment was simulated.</p>"
    top_x = max(r.cost for r in shown) * 1.05
    top_y = max([r.measured.capacity or 0 for r in shown] + [target or 0]) * 1.1

    def x(cost: float) -> float:
        return _PAD + cost / top_x * (_W - 2 * _PAD)

    def y(rate: float) -> float:
        return _H - _PAD - rate / top_y * (_H - 2 * _PAD)

    dots = "".join(f"<circle cx='{x(r.cost):.1f}' cy='{y(r.measured.capacity or 0):.1f}' r='3' fill='#bbb'>"
                   f"<title>{html.escape(r.measured.deployment.text())}</title></circle>" for r in shown)
    line = " ".join(f"{x(r.cost):.1f},{y(r.measured.capacity or 0):.1f}" for r in front)
    marks = "".join(f"<circle cx='{x(r.cost):.1f}' cy='{y(r.measured.capacity or 0):.1f}' r='4' fill='#1f6feb'>"
                    f"<title>{html.escape(r.measured.deployment.text())}</title></circle>" for r in front)
    ring = ("" if pick is None else f"<circle cx='{x(pick.cost):.1f}' cy='{y(pick.measured.capacity or 0):.1f}' "
            "r='9' fill='none' stroke='#d1242f' stroke-width='2'/>")
    goal = ("" if target is None else f"<line x1='{_PAD}' x2='{_W - _PAD}' y1='{y(target):.1f}' y2='{y(target):.1f}'"
            " stroke='#d1242f' stroke-dasharray='4 4'/>")
    axes = (f"<line x1='{_PAD}' y1='{_H - _PAD}' x2='{_W - _PAD}' y2='{_H - _PAD}' stroke='#333'/>"
            f"<line x1='{_PAD}' y1='{_PAD}' x2='{_PAD}' y2='{_H - _PAD}' stroke='#333'/>"
            f"<text x='{_W / 2}' y='{_H - 16}' text-anchor='middle'>cost ({unit}, up to {top_x:.3g})</text>"
            f"<text x='16' y='{_H / 2}' transform='rotate(-90 16 {_H / 2})' text-anchor='middle'>capacity at the "
            f"SLOs (req/s, up to {top_y:.3g})</text>")
    return (f"<svg width='{_W}' height='{_H}' viewBox='0 0 {_W} {_H}' role='img'>{axes}{goal}{dots}"
            f"<polyline points='{line}' fill='none' stroke='#1f6feb'/>{marks}{ring}</svg>")


def _f(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)
